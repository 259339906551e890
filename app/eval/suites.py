"""The grounding suites Deskhand knows: where each is published, under which licence, and how its layout is read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.domain.errors import DeskhandError
from app.eval.items import Item
from app.eval.osworld import load_osworld_g
from app.eval.screenspot import load_screenspot_pro, load_screenspot_v2
from app.eval.webclick import load_webclick


@dataclass(frozen=True)
class Published:
    """A figure someone published for a model on the whole suite, to set a result beside."""

    model: str
    accuracy: float  # percent
    source: str  # who published it, and how it was measured

    def words(self) -> str:
        return f"{self.model} {self.accuracy:.1f}% ({self.source})"


@dataclass(frozen=True)
class Suite:
    name: str  # what --suite takes
    title: str
    repo: str | None  # the Hugging Face dataset it is published as (None: not on the hub)
    revision: str | None  # a pinned commit where one is known; None: the repository's main branch
    license: str
    patterns: tuple[str, ...]  # the files of the repository the loader reads
    load: Callable[[Path], list[Item]]
    home: str  # where a person reads about it (and, for a suite not on the hub, gets it)
    published: tuple[Published, ...]  # figures to set results beside: only those with a number
    breakdown: tuple[str, ...]  # the groups its published tables use, first
    layout: str  # the files `--data DIR` must hold, in words (the help, the errors and the README say it)

    @property
    def page(self) -> str:
        return f"https://huggingface.co/datasets/{self.repo}" if self.repo else self.home


SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("screenspot-v2", "ScreenSpot-v2", "OS-Copilot/ScreenSpot-v2", None, "Apache-2.0",
          ("screenspot_desktop_v2.json", "screenspot_mobile_v2.json", "screenspot_web_v2.json",
           "screenspotv2_image.zip"), load_screenspot_v2, "https://huggingface.co/datasets/OS-Copilot/ScreenSpot-v2",
          (), ("platform", "kind", "platform/kind"),
          "screenspot_desktop_v2.json, screenspot_mobile_v2.json and screenspot_web_v2.json beside "
          "screenspotv2_image.zip (or that archive unpacked as screenspotv2_image/)"),
    Suite("screenspot-pro", "ScreenSpot-Pro", "likaixin/ScreenSpot-Pro", None,
          "no licence stated on the dataset card: used on this computer only, never redistributed",
          ("annotations/*.json", "images/*", "images/*/*"), load_screenspot_pro,
          "https://github.com/likaixin2000/ScreenSpot-Pro-GUI-Grounding",
          (Published("Holo2-4B", 57.2, "H Company, single pass, all 1,581 items"),), ("group", "kind", "group/kind"),
          "annotations/<application>_<os>.json beside images/ (the image files the annotations name)"),
    # The revision is the one a third-party benchmark pinned (verify); --revision main takes the newest.
    Suite("webclick", "WebClick (H Company)", "Hcompany/WebClick", "9482a7d5aaa8f4cd5d28d9ed0c8e0c48d20b1e4a",
          "Apache-2.0", ("data/test-*.parquet",), load_webclick, "https://huggingface.co/datasets/Hcompany/WebClick",
          (), ("bucket",), "data/test-*.parquet (the columns image, instruction, bbox and bucket; reading it "
          "needs pyarrow)"),
    Suite("osworld-g", "OSWorld-G", None, None, "Apache-2.0 (the OSWorld-G repository's)", ("benchmark/*",),
          load_osworld_g, "https://github.com/xlang-ai/OSWorld-G",
          (), ("category",), "a clone of the OSWorld-G repository (or its benchmark/ folder): OSWorld-G.json "
          "(or OSWorld-G_refined.json) and classification_result.json beside images/"),
)}


def layouts() -> str:
    """Every suite's --data layout, one line each (the command's help)."""
    return "\n".join(f"  {s.name}: {s.layout}" for s in SUITES.values())


def suite(name: str) -> Suite:
    key = name.strip().lower().replace("_", "-")
    if key not in SUITES:
        raise DeskhandError(f"There is no grounding suite “{name}”.", f"Use one of: {', '.join(SUITES)}.")
    return SUITES[key]
