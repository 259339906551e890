"""One line of `deskhand doctor`: a check's name, its status, what was found and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass

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
