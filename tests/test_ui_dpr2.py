"""The marker and the approval dialog's keep-out box at a device-pixel ratio of 2 (QT_SCALE_FACTOR=2 on a
private Xvfb + jwm, in a child process: the scale factor is fixed when the QApplication is made). Qt works in
logical pixels, input and screenshots in physical ones: a missed conversion puts the marker (and the box the
dialog keeps clear) at half or double the distance from the screen's corner."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.desktop import REPO, XServer, missing_tools

pytestmark = pytest.mark.xdisplay


@pytest.mark.parametrize("target", [(2400, 1400), (600, 380)])
def test_marker_and_keep_out_box_land_on_the_physical_target_at_dpr_2(private_x, tmp_path, target):
    if missing_tools("Xvfb", "jwm"):
        pytest.skip("needs Xvfb and jwm")
    with XServer(tmp_path / "x", 3840, 2160) as server:  # a 4K monitor at 200 %: 1920×1080 logical
        proc = subprocess.run([sys.executable, "-m", "tests.dpr_probe", *map(str, target)], cwd=REPO,
                              env=server.env(QT_SCALE_FACTOR="2"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["dpr"] == 2
    x, y = target
    assert r["marker_pixels"] > 100, r
    assert abs(r["marker_centre"][0] - x) <= 6 and abs(r["marker_centre"][1] - y) <= 6, r  # on the screen
    assert abs(r["overlay_centre"][0] - x) <= 2 and abs(r["overlay_centre"][1] - y) <= 2, r
    kx, ky, kw, kh = r["keep_out"]
    assert kx <= x <= kx + kw and ky <= y <= ky + kh, r  # the box is around the physical target
    assert kw >= 2 * 2 * 90 - 4, r  # 90 logical px each side is 180 physical px at DPR 2
    dx, dy, dw, dh = r["dialog"]
    overlaps = dx < kx + kw and kx < dx + dw and dy < ky + kh and ky < dy + dh
    assert not overlaps, f"the dialog covers the target: {r}"
