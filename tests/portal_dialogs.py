"""The person in front of the headless GNOME screen: finds the portal's consent dialog (xdg-desktop-portal-gnome
43) on the screen by its Adwaita colours and answers it through mutter's own input API (tests.wayland.MutterInput),
as a person would: choose the monitor, turn on "Allow remote interaction", press Share, or close it."""

from __future__ import annotations

import os
import time
from typing import Any

from tests.desktop import wait_until
from tests.wayland import MutterInput

# The portal's consent dialogs (xdg-desktop-portal-gnome 43, Adwaita colours), found on the screen by colour.
ADWAITA_BLUE = (53, 132, 228)  # a suggested-action button ("Share"), a ticked check box, a switch that is on
SHARE_DISABLED = (144, 183, 231)  # "Share" before a monitor is chosen
SWITCH_OFF = (225, 225, 225)  # the track of a switch that is off
WHITE = (255, 255, 255)  # a list row (a monitor to choose)


def _blobs(image: Any, rgb: tuple[int, int, int], min_pixels: int = 150) -> list[tuple[int, int, int, int]]:
    """Bounding boxes (x0, y0, x1, y1) of the connected areas of exactly `rgb` (text and lines are too small)."""
    import numpy as np

    mask = np.all(np.asarray(image.convert("RGB")) == rgb, axis=2)
    ys, xs = np.nonzero(mask)
    left = {(int(x), int(y)) for x, y in zip(xs.tolist(), ys.tolist(), strict=True)}
    boxes = []
    while left:
        todo = [left.pop()]
        xs_, ys_ = [todo[0][0]], [todo[0][1]]
        while todo:
            x, y = todo.pop()
            for n in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                if n in left:
                    left.remove(n)
                    todo.append(n)
                    xs_.append(n[0])
                    ys_.append(n[1])
        if len(xs_) >= min_pixels:
            boxes.append((min(xs_), min(ys_), max(xs_), max(ys_)))
    return boxes


def _centre(box: tuple[int, int, int, int]) -> tuple[float, float]:
    return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2


def _share_button(shot: Any) -> tuple[tuple[int, int, int, int], bool] | None:
    """The dialog's Share button (the top-most wide blue button) and whether it is enabled."""
    found = [(b, True) for b in _blobs(shot, ADWAITA_BLUE) if b[2] - b[0] >= 50]
    found += [(b, False) for b in _blobs(shot, SHARE_DISABLED) if b[2] - b[0] >= 50]
    return min(found, key=lambda f: f[0][1]) if found else None


def _switches_off(shot: Any, below: int) -> list[tuple[int, int, int, int]]:
    return [b for b in _blobs(shot, SWITCH_OFF) if b[1] > below and 30 <= b[2] - b[0] <= 70]


def _switch_on(shot: Any, switch: tuple[int, int, int, int]) -> bool:
    """The switch's track is blue (on) rather than grey."""
    x0, y0, x1, y1 = switch
    return any(b[0] <= (x0 + x1) / 2 <= b[2] and b[1] <= (y0 + y1) / 2 <= b[3] for b in _blobs(shot, ADWAITA_BLUE, 100))


def answer_share_dialog(hands: MutterInput, allow_control: bool, timeout: float = 30.0) -> None:
    """Act as the person in front of the screen: wait for the portal's dialog, choose the monitor if none is
    chosen, turn on "Allow remote interaction" when asked to, and press Share."""
    end = time.monotonic() + timeout
    hands.move(2, 400)  # off the dialog: a button under the pointer changes colour
    seen = None
    while True:  # until the dialog is drawn and still (the same in two screenshots)
        shot = hands.screenshot(0.3)
        share = _share_button(shot)
        switches = _switches_off(shot, share[0][3]) if share else []
        found = (share, switches) if share is not None and (switches or not allow_control) else None
        if found is not None and found == seen:
            break
        seen = found
        if time.monotonic() > end:
            shot.save(f"/tmp/deskhand-no-dialog-{os.getpid()}.png")
            raise AssertionError(f"no portal dialog appeared within {timeout:g} s (screen saved in /tmp)")
    box, enabled = share
    if allow_control:
        switch = switches[-1]
        for _ in range(3):  # as a person would: click, look (pointer away: hover changes the colours), again
            hands.click(*_centre(switch))
            hands.move(2, 400)
            look_until = time.monotonic() + 2
            while not (on := _switch_on(hands.screenshot(0.3), switch)) and time.monotonic() < look_until:
                time.sleep(0.05)
            if on:
                break
        else:
            raise AssertionError("the “Allow remote interaction” switch did not turn on")
    if not enabled:  # nothing chosen yet: choose the first monitor in the list
        rows = [b for b in _blobs(shot, WHITE, 2000) if b[1] > box[3] and b[2] - b[0] > 300]
        assert rows, "the dialog lists no monitor"
        hands.click(*_centre(min(rows, key=lambda b: b[1])))
        wait_until(lambda: (_share_button(hands.screenshot(0.3)) or (None, False))[1], 5, "Share to be enabled",
                   0.05)
    hands.click(*_centre(box))


def decline_share_dialog(hands: MutterInput, timeout: float = 30.0) -> None:
    """The person closes the dialog (Escape) instead of sharing."""
    wait_until(lambda: _share_button(hands.screenshot(0.5)), timeout, "the portal's dialog", 0.05)
    hands.key(0xFF1B, True)
    hands.key(0xFF1B, False)
