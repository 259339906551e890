"""ScreenSpot-v2 (OS-Copilot/ScreenSpot-v2) and ScreenSpot-Pro (likaixin/ScreenSpot-Pro), in their published layouts.

ScreenSpot-v2: `screenspot_{desktop,mobile,web}_v2.json` beside `screenspotv2_image.zip` (or that archive unpacked
into `screenspotv2_image/`); entries {img_filename, bbox: [x, y, w, h] in pixels, instruction, data_type: text |
icon, data_source}. Scored as its evaluation scripts (and the published tables) do: per platform (the file) and per
element kind.

ScreenSpot-Pro: `annotations/<application>_<os>.json` and `images/` (img_filename relative to it); entries
{img_filename, bbox: [x1, y1, x2, y2] in pixels of img_size, img_size, instruction, ui_type, platform, application,
group, id, gt_type}; only positive items (a negative one names nothing on the screen) are scored, as in the
published single-pass figures. Scored per group (Dev, Creative, CAD, Scientific, Office, OS) and element kind.
"""

from __future__ import annotations

from pathlib import Path

from app.eval import layout
from app.eval.items import DatasetError, ImageRef, Item, zip_names
from app.eval.targets import Box

V2_PLATFORMS = ("desktop", "mobile", "web")
V2_ARCHIVE = "screenspotv2_image.zip"
V2_FOLDER = "screenspotv2_image"


def _v2_image(root: Path, name: str) -> ImageRef:
    folder = root / V2_FOLDER
    if folder.is_dir():
        return ImageRef(f"{V2_FOLDER}/{name}", path=folder / name)
    archive = root / V2_ARCHIVE
    if not archive.is_file():
        raise DatasetError(f"{root} has neither {V2_ARCHIVE} nor its unpacked folder {V2_FOLDER}/.",
                           layout.REDOWNLOAD)
    names = zip_names(archive)
    member = next((m for m in (f"{V2_FOLDER}/{name}", name) if m in names), f"{V2_FOLDER}/{name}")
    return ImageRef(f"{V2_ARCHIVE}:{member}", path=archive, member=member)


def load_screenspot_v2(root: Path) -> list[Item]:
    items: list[Item] = []
    for platform in V2_PLATFORMS:
        path = root / f"screenspot_{platform}_v2.json"
        for i, e in enumerate(layout.entries(layout.read_json(path, "ScreenSpot-v2"), path.name)):
            where = f"{path.name} entry {i}"
            x, y, w, h = layout.numbers(e, "bbox", where)
            kind = layout.text(e, "data_type", where)
            items.append(Item(
                suite="screenspot-v2", id=f"{platform}/{i}", instruction=layout.text(e, "instruction", where),
                image=_v2_image(root, layout.image_name(e, "img_filename", where)), target=Box(x, y, x + w, y + h),
                groups={"platform": (platform,), "kind": (kind,), "platform/kind": (f"{platform}/{kind}",),
                        "source": (layout.text(e, "data_source", where, ""),)},
                extra={"bbox": [x, y, w, h]}))
    return items


def load_screenspot_pro(root: Path) -> list[Item]:
    folder = root / "annotations"
    files = sorted(folder.glob("*.json"))
    if not files:
        raise DatasetError(f"{folder} holds no annotation files (annotations/<application>_<os>.json), so {root} "
                           "is not a ScreenSpot-Pro folder.", layout.REDOWNLOAD)
    items: list[Item] = []
    for path in files:
        for i, e in enumerate(layout.entries(layout.read_json(path, "ScreenSpot-Pro"), path.name)):
            where = f"annotations/{path.name} entry {i}"
            if e.get("gt_type", "positive") != "positive":
                continue
            x1, y1, x2, y2 = layout.numbers(e, "bbox", where)
            name = layout.image_name(e, "img_filename", where)
            kind, group = layout.text(e, "ui_type", where), layout.text(e, "group", where)
            items.append(Item(
                suite="screenspot-pro", id=str(e.get("id") or f"{path.stem}/{i}"),
                instruction=layout.text(e, "instruction", where),
                image=ImageRef(f"images/{name}", path=root / "images" / name), target=Box(x1, y1, x2, y2),
                groups={"group": (group,), "kind": (kind,), "group/kind": (f"{group}/{kind}",),
                        "platform": (layout.text(e, "platform", where, ""),),
                        "application": (layout.text(e, "application", where, ""),)},
                image_size=layout.size(e, "img_size", where), extra={"bbox": [x1, y1, x2, y2]}))
    return items
