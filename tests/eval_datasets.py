"""Small grounding datasets written in each suite's own published layout (file names, folders, field names and box
conventions as the dataset repositories publish them), with a red target drawn where the annotation says it is,
so an engine that finds the red in the image it receives answers each item right, and a decoy item (the red
elsewhere) wrong."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from PIL import Image, ImageDraw

RED = (255, 0, 0)


def screen(size: tuple[int, int], red: tuple[float, float, float, float] | None, shade: int = 0) -> Image.Image:
    img = Image.new("RGB", size, (40 + shade % 150, 90, 140))
    d = ImageDraw.Draw(img)
    d.rectangle((10, 10, size[0] // 3, 40), fill=(230, 230, 230))
    if red is not None:
        d.rectangle(red, fill=RED)
    return img


def png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


# (platform, image name, size, box [x, y, w, h], data_type, data_source, red drawn where: "box" or "decoy")
V2_ITEMS = [
    ("desktop", "pc_1.png", (640, 400), [100, 80, 60, 30], "text", "windows", "box"),
    ("desktop", "pc_2.png", (800, 500), [600, 400, 40, 40], "icon", "macos", "box"),
    ("mobile", "m_1.png", (360, 640), [20, 500, 100, 50], "icon", "android", "decoy"),
    ("web", "w_1.png", (720, 480), [300, 200, 120, 24], "text", "shop", "box"),
]


def write_screenspot_v2(root: Path, *, unpacked: bool = False, items: list | None = None) -> Path:
    """OS-Copilot/ScreenSpot-v2: screenspot_{desktop,mobile,web}_v2.json + screenspotv2_image.zip."""
    root.mkdir(parents=True, exist_ok=True)
    items = V2_ITEMS if items is None else items
    per: dict[str, list] = {"desktop": [], "mobile": [], "web": []}
    images: dict[str, bytes] = {}
    for i, (platform, name, size, (x, y, w, h), kind, source, where) in enumerate(items):
        red = (x, y, x + w, y + h) if where == "box" else (5, size[1] - 30, 25, size[1] - 10)
        images[name] = png(screen(size, red, i * 30))
        per[platform].append({"img_filename": name, "bbox": [x, y, w, h], "instruction": f"click item {i}",
                              "data_type": kind, "data_source": source})
    for platform, entries in per.items():
        (root / f"screenspot_{platform}_v2.json").write_text(json.dumps(entries, indent=2), encoding="utf-8")
    if unpacked:
        (root / "screenspotv2_image").mkdir(exist_ok=True)
        for name, data in images.items():
            (root / "screenspotv2_image" / name).write_bytes(data)
    else:
        with zipfile.ZipFile(root / "screenspotv2_image.zip", "w") as z:
            for name, data in images.items():
                z.writestr(f"screenspotv2_image/{name}", data)
    return root


def write_screenspot_pro(root: Path) -> Path:
    """likaixin/ScreenSpot-Pro: annotations/<app>_<os>.json, images/<app>_<os>/<file>; bbox [x1, y1, x2, y2]."""
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    (root / "images" / "vscode_macos").mkdir(parents=True, exist_ok=True)
    entries = []
    for i, (box, kind, gt) in enumerate([([1500, 900, 1540, 930], "icon", "positive"),
                                         ([100, 100, 400, 140], "text", "positive"),
                                         ([10, 10, 20, 20], "icon", "negative")]):
        name = f"vscode_macos/shot_{i}.png"
        (root / "images" / name).write_bytes(png(screen((2560, 1440), tuple(box), i)))  # type: ignore[arg-type]
        entries.append({"img_filename": name, "bbox": box, "img_size": [2560, 1440], "instruction": f"open {i}",
                        "instruction_cn": "打开", "id": f"vscode_macos_{i}", "application": "vscode",
                        "platform": "macos", "group": "Dev", "ui_type": kind, "gt_type": gt})
    (root / "annotations" / "vscode_macos.json").write_text(json.dumps(entries), encoding="utf-8")
    return root


def write_osworld_g(root: Path) -> Path:
    """xlang-ai/OSWorld-G: benchmark/OSWorld-G.json, benchmark/images/, benchmark/classification_result.json."""
    bench = root / "benchmark"
    (bench / "images").mkdir(parents=True, exist_ok=True)
    entries = [
        {"id": "A1-0", "image_path": "A1.png", "image_size": [1280, 720], "instruction": "funnel button",
         "box_type": "bbox", "box_coordinates": [900.5, 300.2, 30.0, 28.0], "GUI_types": ["Button", "Icon"]},
        {"id": "B2-0", "image_path": "B2.png", "image_size": [1280, 720], "instruction": "the triangle",
         "box_type": "polygon", "box_coordinates": [100, 100, 200, 100, 150, 180], "GUI_types": ["Label"]},
        {"id": "C3-0", "image_path": "C3.png", "image_size": [1280, 720], "instruction": "the missing button",
         "box_type": "refusal", "box_coordinates": [], "GUI_types": []},
    ]
    reds = [(900.5, 300.2, 930.5, 328.2), (140, 110, 160, 130), (600, 600, 640, 640)]
    for e, red in zip(entries, reds, strict=True):
        (bench / "images" / e["image_path"]).write_bytes(png(screen((1280, 720), red)))  # type: ignore[arg-type]
    (bench / "OSWorld-G.json").write_text(json.dumps(entries), encoding="utf-8")
    (bench / "classification_result.json").write_text(json.dumps({"classified": {
        "element_recognition": [{"id": "A1-0"}, {"id": "B2-0"}], "layout_understanding": [{"id": "B2-0"}],
        "refusal": [{"id": "C3-0"}]}}), encoding="utf-8")
    return root


def write_webclick(root: Path) -> Path:
    """Hcompany/WebClick: data/test-00000-of-00001.parquet with image {bytes, path}, instruction, bbox (relative
    x_min, y_min, x_max, y_max), bucket — as `datasets` writes an Image feature."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / "data").mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (bbox, bucket) in enumerate([([0.5, 0.5, 0.6, 0.56], "calendars"), ([0.1, 0.2, 0.3, 0.25], "agentbrowse")]):
        size = (1000, 800)
        red = (bbox[0] * size[0], bbox[1] * size[1], bbox[2] * size[0], bbox[3] * size[1])
        rows.append({"image": {"bytes": png(screen(size, red, i)), "path": f"{i}.png"},
                     "instruction": f"pick {i}", "bbox": bbox, "bucket": bucket})
    table = pa.Table.from_pylist(rows, schema=pa.schema([
        ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])), ("instruction", pa.string()),
        ("bbox", pa.list_(pa.float64())), ("bucket", pa.string())]))
    pq.write_table(table, root / "data" / "test-00000-of-00001.parquet", row_group_size=1)
    return root
