"""H Company's WebClick (Hcompany/WebClick), in its published layout: `data/test-*.parquet` with the columns
image ({bytes, path}), instruction, bbox and bucket (agentbrowse, humanbrowse, calendars).

The bbox is [x_min, y_min, x_max, y_max] relative to the image (0..1), as the evaluation code that uses the
dataset reads it; a row whose numbers exceed 1 is read as pixels of the image (both conventions have been seen in
third-party code, so the record says which one each item used). Parquet needs pyarrow (the `eval` extra).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.eval import layout
from app.eval.items import DatasetError, ImageRef, Item
from app.eval.targets import Box

COLUMNS = ("instruction", "bbox", "bucket")


def _pyarrow() -> Any:
    try:
        import pyarrow.parquet as pq
    except ModuleNotFoundError:
        raise DatasetError("WebClick is published as Parquet, and reading it needs pyarrow, which is not installed.",
                           "Install it into Deskhand's environment: pip install 'pyarrow>=14'.") from None
    return pq


class _Images:
    """The image column of one Parquet file, read one row group at a time (the last one kept)."""

    def __init__(self, pq: Any, path: Path) -> None:
        self.pq, self.path = pq, path
        self.group: tuple[int, list[Any]] | None = None

    def reader(self, row: int) -> Callable[[], bytes]:
        return lambda: self.read(row)

    def read(self, row: int) -> bytes:
        f = self.pq.ParquetFile(self.path)
        start = 0
        for g in range(f.num_row_groups):
            n = f.metadata.row_group(g).num_rows
            if row < start + n:
                if self.group is None or self.group[0] != g:
                    self.group = (g, f.read_row_group(g, columns=["image"]).column("image").to_pylist())
                value = self.group[1][row - start]
                data = value.get("bytes") if isinstance(value, dict) else value
                if isinstance(data, bytes):
                    return data
                break
            start += n
        raise DatasetError(f"{self.path.name} row {row} holds no image bytes.", layout.REDOWNLOAD)


def load_webclick(root: Path) -> list[Item]:
    pq = _pyarrow()
    files = sorted((root / "data").glob("test-*.parquet"))
    if not files:
        raise DatasetError(f"{root / 'data'} holds no test-*.parquet files, so {root} is not a WebClick folder.",
                           layout.REDOWNLOAD)
    items: list[Item] = []
    for path in files:
        try:
            table = pq.read_table(path, columns=list(COLUMNS))
        except Exception as exc:  # pyarrow raises its own ArrowInvalid, KeyError for a missing column, OSError
            raise DatasetError(f"{path} cannot be read as WebClick's Parquet (columns {', '.join(COLUMNS)}): {exc}.",
                               layout.REDOWNLOAD) from None
        images = _Images(pq, path)
        for row, e in enumerate(table.to_pylist()):
            where = f"data/{path.name} row {row}"
            x1, y1, x2, y2 = layout.numbers(e, "bbox", where)
            relative = max(x1, y1, x2, y2) <= 1.0
            bucket = layout.text(e, "bucket", where, "")
            items.append(Item(
                suite="webclick", id=f"{path.stem}/{row}", instruction=layout.text(e, "instruction", where),
                image=ImageRef(where, read=images.reader(row)), target=Box(x1, y1, x2, y2, relative),
                groups={"bucket": (bucket,)},
                extra={"bbox": [x1, y1, x2, y2], "bbox_units": "relative" if relative else "pixels"}))
    return items
