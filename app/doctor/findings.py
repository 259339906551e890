"""The doctor's vocabulary: one check's finding (ok, warn, fail, skip) with its fix, and the whole report."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from app import __version__

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail | skip
    detail: str
    fix: str = ""
    required: bool = True  # a failing required check means Deskhand cannot work

    @property
    def blocking(self) -> bool:
        return self.required and self.status == FAIL


@dataclass(frozen=True)
class Report:
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return not any(c.blocking for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        return {"deskhand": __version__, "ok": self.ok, "checks": [asdict(c) for c in self.checks]}
