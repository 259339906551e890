"""Regenerate Deskhand's icons from deskhand.svg: PNGs 16–512, deskhand.ico (Windows), deskhand.icns (macOS).

    .venv/bin/python resources/icons/generate.py [OUTPUT_FOLDER]

Qt's SVG renderer draws each size (crisper than scaling one bitmap); Pillow writes the ICO and ICNS containers.
The generated files are committed, so a build needs neither step.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)


def render(svg: Path, size: int) -> bytes:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"{svg} is not a valid SVG")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buf, "PNG")
    return bytes(data.data())


def main(argv: list[str]) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # no display needed
    out = Path(argv[0]) if argv else HERE
    from PIL import Image
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    svg = HERE / "deskhand.svg"
    images = {}
    for size in SIZES:
        png = render(svg, size)
        (out / f"deskhand-{size}.png").write_bytes(png)
        images[size] = Image.open(io.BytesIO(png)).convert("RGBA")
    images[512].save(out / "deskhand.ico", sizes=[(s, s) for s in ICO_SIZES],
                     append_images=[images[s] for s in ICO_SIZES if s != 512])
    big = Image.open(io.BytesIO(render(svg, 1024))).convert("RGBA")  # ICNS carries 512@2x
    big.save(out / "deskhand.icns", append_images=[images[s] for s in (16, 32, 64, 128, 256, 512)])
    del app
    print(f"wrote {len(SIZES)} PNGs, deskhand.ico and deskhand.icns to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
