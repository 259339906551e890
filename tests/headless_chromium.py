"""A page opened as a person would open it, in a real browser: Debian's chromium, headless, on a private profile
(no network, nothing synced), for the HTML reports. Skips where chromium is not installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars")


def chromium() -> str:
    import pytest

    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (installers/source/install.sh --test installs it)")
    return found


def _run(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)


def screenshot(page: Path, png: Path, size: tuple[int, int] = (1200, 2400)) -> Path:
    """The page as the browser draws it (images loaded), `size` pixels from its top."""
    out = _run(page, png.parent / "chromium-profile", f"--window-size={size[0]},{size[1]}", f"--screenshot={png}")
    assert png.is_file(), out.stderr[-2000:]
    return png


def dom(page: Path, profile: Path) -> str:
    """The document as the browser parsed it (what it would show, in text)."""
    out = _run(page, profile, "--dump-dom")
    assert out.returncode == 0 and "<html" in out.stdout, out.stderr[-2000:]
    return out.stdout
