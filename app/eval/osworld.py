"""OSWorld-G (xlang-ai/OSWorld-G on GitHub), in its published layout: the repository's `benchmark/` folder.

`OSWorld-G.json` (or `OSWorld-G_refined.json`, the refined annotations, when it is the only one) beside `images/`;
entries {id, image_path, image_size, instruction, box_type: bbox | polygon | refusal, box_coordinates, GUI_types}:
a bbox is [x, y, w, h] in pixels, a polygon the flat [x1, y1, x2, y2, …]. `classification_result.json`
({"classified": {category: [{"id": …}, …]}}) gives the categories the paper reports (text matching, element
recognition, layout understanding, fine-grained manipulation, refusal); an item may be in several. A refusal item
is a hit when the model proposes no point (OSWorld-G's own script leaves refusal unscored).
"""

from __future__ import annotations

from pathlib import Path

from app.eval import layout
from app.eval.items import DatasetError, ImageRef, Item
from app.eval.targets import Box, Polygon, Refusal, Target

ANNOTATIONS = ("OSWorld-G.json", "OSWorld-G_refined.json")


def benchmark_folder(root: Path) -> Path:
    for folder in (root, root / "benchmark"):
        if any((folder / name).is_file() for name in ANNOTATIONS):
            return folder
    raise DatasetError(f"{root} holds neither {ANNOTATIONS[0]} nor benchmark/{ANNOTATIONS[0]}, so it is not an "
                       "OSWorld-G folder.",
                       "Clone https://github.com/xlang-ai/OSWorld-G and give --data the clone (or its benchmark/).")


def _target(kind: str, coords: list[float], where: str) -> Target:
    if kind == "bbox" and len(coords) == 4:
        x, y, w, h = coords
        return Box(x, y, x + w, y + h)
    if kind == "polygon" and len(coords) >= 6 and len(coords) % 2 == 0:
        return Polygon(tuple((coords[i], coords[i + 1]) for i in range(0, len(coords), 2)))
    if kind == "refusal":
        return Refusal()
    raise DatasetError(f"{where}: box_type “{kind}” with {len(coords)} coordinates is neither a bbox [x, y, w, h], "
                       "a polygon [x1, y1, …] nor a refusal.", layout.REDOWNLOAD)


def _categories(folder: Path) -> dict[str, list[str]]:
    path = folder / "classification_result.json"
    if not path.is_file():
        return {}
    data = layout.read_json(path, "OSWorld-G")
    classified = data.get("classified") if isinstance(data, dict) else None
    if not isinstance(classified, dict):
        raise DatasetError(f"{path} has no “classified” object of categories.", layout.REDOWNLOAD)
    found: dict[str, list[str]] = {}
    for category, members in classified.items():
        for m in members if isinstance(members, list) else []:
            if isinstance(m, dict) and "id" in m:
                found.setdefault(str(m["id"]), []).append(str(category))
    return found


def load_osworld_g(root: Path) -> list[Item]:
    folder = benchmark_folder(root)
    path = next(folder / n for n in ANNOTATIONS if (folder / n).is_file())
    categories = _categories(folder)
    items: list[Item] = []
    for i, e in enumerate(layout.entries(layout.read_json(path, "OSWorld-G"), path.name)):
        where = f"{path.name} entry {i}"
        kind = layout.text(e, "box_type", where)
        coords = [] if kind == "refusal" else layout.numbers(e, "box_coordinates", where, None)
        item_id = str(e.get("id") or i)
        name = layout.image_name(e, "image_path", where)
        gui_types = e.get("GUI_types")
        gui = gui_types if isinstance(gui_types, list) else []
        items.append(Item(
            suite="osworld-g", id=item_id, instruction=layout.text(e, "instruction", where),
            image=ImageRef(f"images/{name}", path=folder / "images" / name), target=_target(kind, coords, where),
            groups={"category": tuple(categories.get(item_id, ["unclassified"])), "box_type": (kind,),
                    "gui_type": tuple(str(g) for g in gui[:1]) or ("unknown",)},
            image_size=layout.size(e, "image_size", where), extra={"annotations": path.name}))
    return items
