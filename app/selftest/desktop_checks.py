"""The screen: a small capture through mss where the display allows it."""

from __future__ import annotations

import sys

from app.selftest.report import Report


def check_display_io(r: Report, display_ok: bool, status_text: str) -> None:
    """Screen capture through mss where the display allows it (never on macOS: it would ask for permission)."""
    if sys.platform == "darwin":
        r.ok("screen capture", "mss imports; not captured (macOS would ask for Screen Recording permission)")
        return
    if not display_ok:
        r.ok("screen capture", f"not tried: {status_text}")
        return

    def grab() -> str:
        import mss

        with mss.MSS() as sct:
            mon = sct.monitors[1] if len(sct.monitors) > 1 else sct.monitors[0]
            shot = sct.grab({"left": mon["left"], "top": mon["top"], "width": min(64, mon["width"]),
                             "height": min(64, mon["height"])})
        return f"captured {shot.width}×{shot.height} px of a {mon['width']}×{mon['height']} monitor with mss"

    r.check("screen capture", grab)
