"""Where windows go (pure, Qt-free): the approval dialog on the target's monitor, never over the target and
where it was for the previous step when it still can be; any window inside the available area."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rect:
    x: int
    y: int
    w: int
    h: int

    @property
    def right(self) -> int:
        return self.x + self.w

    @property
    def bottom(self) -> int:
        return self.y + self.h

    def intersects(self, o: Rect) -> bool:
        return self.x < o.right and o.x < self.right and self.y < o.bottom and o.y < self.bottom

    def contains(self, px: int, py: int) -> bool:
        return self.x <= px < self.right and self.y <= py < self.bottom


def fit_inside(r: Rect, area: Rect) -> Rect:
    """`r` shrunk to fit `area` if need be, then moved the least distance that puts it inside."""
    w, h = min(r.w, area.w), min(r.h, area.h)
    return Rect(_clamp(r.x, area.x, area.right - w), _clamp(r.y, area.y, area.bottom - h), w, h)


def keep_out(points: list[tuple[int, int]], radius: int) -> Rect | None:
    """The box around every point the action uses (a drag's start and end), grown by `radius`."""
    if not points:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return Rect(min(xs) - radius, min(ys) - radius, max(xs) - min(xs) + 2 * radius, max(ys) - min(ys) + 2 * radius)


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(v, hi)) if hi >= lo else lo


def keep(previous: Rect | None, area: Rect, avoid: Rect | None, size: tuple[int, int],
         clear_of: Rect | None = None) -> bool:
    """Whether the dialog can stay where it was for the previous step: still inside the area, still clear of
    the new target (and of `clear_of`, the pointer) and no smaller than it wants to be (so it does not jump from
    step to step)."""
    if previous is None or fit_inside(previous, area) != previous:
        return False
    if previous.w < min(size[0], area.w) or previous.h < min(size[1], area.h):
        return False
    return not any(r is not None and previous.intersects(r) for r in (avoid, clear_of))


def place(area: Rect, size: tuple[int, int], avoid: Rect | None, minimum: tuple[int, int] = (480, 380),
          margin: int = 16, clear_of: Rect | None = None) -> Rect:
    """The dialog's outer rectangle: preferred `size`, shrunk to no less than `minimum` where space is short,
    inside `area`, clear of `avoid`; and clear of `clear_of` (the pointer: a window that comes up under it takes
    the keyboard under focus-follows-mouse) where a place is. Beside the target (the side with more room) first,
    then above or below; when nothing fits, the roomiest side at the minimum size (covering as little as
    possible)."""
    candidates = _candidates(area, size, avoid, minimum, margin)
    return next((r for r in candidates if clear_of is None or not r.intersects(clear_of)), candidates[0])


def _candidates(area: Rect, size: tuple[int, int], avoid: Rect | None, minimum: tuple[int, int],
                margin: int) -> list[Rect]:
    """Places in order of preference: the first is the one to take when nothing else matters."""
    w, h = min(size[0], area.w), min(size[1], area.h)
    if avoid is None:
        xs = (area.x + (area.w - w) // 2, area.x, area.right - w)
        ys = (area.y + (area.h - h) // 2, area.y, area.bottom - h)
        return [Rect(x, y, w, h) for y in ys for x in xs]
    cy = avoid.y + avoid.h // 2
    cx = avoid.x + avoid.w // 2
    free = {  # room on each side of the keep-out box, inside the area
        "right": Rect(avoid.right + margin, area.y, area.right - avoid.right - margin, area.h),
        "left": Rect(area.x, area.y, avoid.x - margin - area.x, area.h),
        "below": Rect(area.x, avoid.bottom + margin, area.w, area.bottom - avoid.bottom - margin),
        "above": Rect(area.x, area.y, area.w, avoid.y - margin - area.y),
    }
    horizontal = sorted(("right", "left"), key=lambda s: -free[s].w)
    vertical = sorted(("below", "above"), key=lambda s: -free[s].h)
    out = []
    for side in (*horizontal, *vertical):
        room = free[side]
        fw, fh = min(w, room.w), min(h, room.h)
        if fw < min(minimum[0], w) or fh < min(minimum[1], h):
            continue
        if side in ("right", "left"):  # beside the target, level with it first, then at either end of the side
            x = room.x if side == "right" else room.right - fw
            out += [Rect(x, y, fw, fh) for y in (_clamp(cy - fh // 2, room.y, room.bottom - fh), room.y,
                                                 room.bottom - fh)]
        else:
            y = room.y if side == "below" else room.bottom - fh
            out += [Rect(x, y, fw, fh) for x in (_clamp(cx - fw // 2, room.x, room.right - fw), room.x,
                                                 room.right - fw)]
    if out:
        return out
    side = max(free, key=lambda s: free[s].w * area.h if s in ("right", "left") else free[s].h * area.w)
    fw, fh = min(w, minimum[0]), min(h, minimum[1])
    x = area.right - fw if side == "right" else area.x if side == "left" else _clamp(cx - fw // 2, area.x,
                                                                                          area.right - fw)
    y = area.bottom - fh if side == "below" else area.y if side == "above" else _clamp(cy - fh // 2, area.y,
                                                                                           area.bottom - fh)
    return [Rect(x, y, fw, fh)]
