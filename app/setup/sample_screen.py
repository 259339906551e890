"""A built-in screenshot for checking that a model works (self-test, conversion check): a window with a button."""

from __future__ import annotations

from typing import Any


def synthetic_screenshot(size: tuple[int, int] = (1280, 800)) -> Any:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", size, (58, 95, 138))
    d = ImageDraw.Draw(img)
    d.rectangle((0, size[1] - 32, size[0], size[1]), fill=(30, 30, 36))  # a task bar
    d.rectangle((120, 90, 760, 520), fill=(245, 245, 245), outline=(20, 20, 20))  # a window
    d.rectangle((120, 90, 760, 118), fill=(60, 60, 70))
    d.rectangle((540, 460, 740, 500), fill=(40, 110, 220))  # its button
    d.text((600, 472), "Save", fill=(255, 255, 255))
    d.text((140, 140), "Deskhand self-test: a synthetic screenshot", fill=(0, 0, 0))
    return img
