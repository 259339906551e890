"""What `deskhand eval grounding` leaves for a person to read, from a real comparison through the command (a
model server on loopback that finds every target but the decoy, against one that clicks a corner): a matplotlib
chart with axes, values, labels that fit and one colour per model, each model's own histogram; `summary.md` as
Markdown tables; `report.html` opened in headless Chromium; progress lines often enough that a slow model is
never silent; the dataset layout `--data` wants in the help and the error; published figures with a number."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from app.__main__ import main
from tests import eval_datasets as ds
from tests.desktop import REPO
from tests.eval_server import GroundingServer, red_click
from tests.fake_vllm import FakeVLLM
from tests.headless_chromium import dom, screenshot

CORNER = ('{"note": null, "thought": "Top left.", "tool_call": {"tool_name": "click", "element": "corner", '
          '"x": 0, "y": 0, "button": "left", "count": 1}}')
BLIND, FINDER = "holotron-12b-blind", "Hcompany/Holotron-12B"


@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("compared")
    data, out = ds.write_screenspot_v2(tmp / "v2"), tmp / "out"
    with GroundingServer(model=FINDER).expect(4) as finder, FakeVLLM(model=BLIND, answer=CORNER) as blind:
        assert main(["eval", "grounding", "--suite", "screenspot-v2", "--data", str(data), "--engine", blind.url,
                     "--compare-with", finder.url, "--out", str(out)]) == 0
    return out


def summary_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def seconds_of(out: Path) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = {}
    for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        seconds.setdefault(row["variant"], []).append(row["seconds"])
    return seconds


def pixels_near(png: Path, rgb: tuple[float, ...], tolerance: int = 12) -> int:
    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    target = np.array([round(255 * c) for c in rgb[:3]])
    return int((np.abs(img - target).max(axis=2) <= tolerance).sum())


def test_the_chart_has_axes_values_labels_that_fit_and_a_colour_and_histogram_per_model(compared):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgb

    from app.eval.reports import charts

    fig = charts.figure(summary_of(compared), "platform", seconds_of(compared))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    bars, *histograms = fig.axes
    assert [t.get_text() for t in bars.get_xticklabels()] == [str(v) for v in range(0, 101, 10)]
    assert bars.get_xlabel().startswith("accuracy (%)") and bars.get_ylabel() == "platform"
    assert [t.get_text() for t in bars.get_yticklabels()] == ["overall", "desktop", "mobile", "web"]
    values = {t.get_text() for t in bars.texts}
    assert {"0.0% (0/4)", "75.0% (3/4)", "100.0% (2/2)", "0.0% (0/1)", "100.0% (1/1)"} <= values, values

    legend = bars.get_legend()
    names = [t.get_text() for t in legend.get_texts()]
    assert names == [BLIND, FINDER]
    colour = {n: to_rgb(h.get_facecolor()) for n, h in zip(names, legend.legend_handles, strict=True)}
    assert colour[BLIND] != colour[FINDER]  # one colour per model
    bar_colours = {to_rgb(p.get_facecolor()) for p in bars.patches}
    assert bar_colours == set(colour.values())

    assert len(histograms) == 2  # each model's own seconds, in its own colour
    for h, name in zip(histograms, names, strict=True):
        assert name in h.get_title(loc="left") and h.get_xlabel() == "seconds per item" and h.get_ylabel() == "items"
        assert {to_rgb(p.get_facecolor()) for p in h.patches} == {colour[name]}
        assert sum(p.get_height() for p in h.patches) == 4

    # every word drawn lies inside the picture: nothing is cut
    renderer = canvas.get_renderer()
    width, height = canvas.get_width_height()
    texts = [t for ax in fig.axes for t in (*ax.get_xticklabels(), *ax.get_yticklabels(), *ax.texts, ax.title,
                                             ax._left_title, ax.xaxis.label, ax.yaxis.label)]
    texts += list(legend.get_texts())
    for t in texts:
        if t.get_text() and t.get_visible():
            box = t.get_window_extent(renderer)
            assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= width and box.y1 <= height, t.get_text()

    # and the chart the run wrote shows both colours
    for rgb in colour.values():
        assert pixels_near(compared / "chart.png", rgb) > 2000


def test_summary_md_is_markdown_tables(compared):
    md = (compared / "summary.md").read_text(encoding="utf-8")
    assert "```" not in md
    lines = md.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| model |"))
    assert lines[head].split("|")[1:4] == [" model ", " quantization ", " profile "]
    assert re.fullmatch(r"\|(-{3,}:?\|){3}(-{3,}:?\|)+", lines[head + 1]), lines[head + 1]
    rows = {line.split("|")[1].strip(): line for line in lines[head + 2:head + 4]}
    assert "0.0% [0.0–49.0] (0/4)" in rows[BLIND] and "75.0% [30.1–95.4] (3/4)" in rows[FINDER]
    by = lines.index("## By platform")
    assert lines[by + 2] == f"| platform | {BLIND} | {FINDER} |" and lines[by + 3].startswith("|---|")
    assert lines[by + 4].startswith("| desktop | 0.0% ") and "(2/2) |" in lines[by + 4]
    assert "+75.0 points" in md and "published figures" not in md  # no number is known for ScreenSpot-v2


def test_the_html_report_opens_in_headless_chromium_with_its_tables_and_pictures(compared, tmp_path):
    page = compared / "report.html"
    text = dom(page, tmp_path / "profile")
    for words in ("Results", BLIND, FINDER, "75.0% [30.1–95.4] (3/4)", "By platform", "Missed items",
                  "What was measured", 'src="chart.png"', 'src="misses.png"'):
        assert words in text, words
    shot = screenshot(page, tmp_path / "report.png")
    from app.eval.reports.charts import colours

    for rgb in colours(2):  # the chart drawn in the page: the browser loaded the picture beside the page
        assert pixels_near(shot, tuple(rgb), tolerance=20) > 1000


def test_progress_is_said_for_every_item_of_a_slow_model_and_hits_are_counted_in_words(tmp_path, capsys,
                                                                                      monkeypatch):
    import app.eval.grounding as grounding

    monkeypatch.setattr(grounding, "PROGRESS_EVERY_S", 0.5)  # a few seconds in real use; items take minutes

    def slow(body: dict[str, Any]) -> Any:
        time.sleep(0.6)  # longer than the interval: every item is worth a line
        return red_click(body)

    data = ds.write_screenspot_v2(tmp_path / "v2")
    with GroundingServer() as srv:
        srv.replies.extend([slow] * 4)
        assert main(["eval", "grounding", "--suite", "screenspot-v2", "--data", str(data), "--engine", srv.url,
                     "--out", str(tmp_path / "out")]) == 0
    said = [line.removeprefix("deskhand: ") for line in capsys.readouterr().err.splitlines() if " items, " in line]
    assert [line.split(",")[0] for line in said] == ["1/4 items", "2/4 items", "3/4 items", "4/4 items"], said
    assert "1 hit so far" in said[0] and "2 hits so far" in said[1] and "3 hits so far" in said[3], said


def test_the_layout_data_wants_is_in_the_help_the_error_and_the_readme(tmp_path, capsys):
    from app.eval.suites import SUITES

    with pytest.raises(SystemExit):
        main(["eval", "grounding", "--help"])
    helped = " ".join(capsys.readouterr().out.split())
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").replace("`", "").split())
    for s in SUITES.values():
        assert s.layout in helped, s.name
        assert s.layout in readme, s.name
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["eval", "grounding", "--suite", "screenspot-v2", "--data", str(empty), "--engine",
                 "http://127.0.0.1:9/v1"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "screenspot_desktop_v2.json is missing" in err
    assert ("--data wants ScreenSpot-v2 in its published layout: screenspot_desktop_v2.json, "
            "screenspot_mobile_v2.json and screenspot_web_v2.json beside screenspotv2_image.zip") in err


def test_a_published_figure_is_named_with_its_number_or_not_at_all(compared):
    from app.eval import report
    from app.eval.reports import page
    from app.eval.suites import suite

    s = summary_of(compared)
    assert s["suite"]["published"] == [] and report.published_words(s) == ""
    assert "published" not in (compared / "report.html").read_text(encoding="utf-8")
    pro = suite("screenspot-pro")
    s["suite"]["published"] = [{"model": f.model, "accuracy": f.accuracy, "source": f.source} for f in pro.published]
    words = report.published_words(s)
    assert words == "Holo2-4B 57.2% (H Company, single pass, all 1,581 items)"
    assert f"published figures to compare with: {words}" in report.markdown(s, ())
    assert words in page.html(s, (), [])
