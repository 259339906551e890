"""The model a running Deskhand already holds, lent to the model test, so that it is never in memory twice.

In the app, the agent worker owns the model a task loaded (app.agent.worker.AgentWorker.with_model): the test's
items are asked on that worker's thread, with that engine, between tasks; a model the test's settings name
differently replaces it there (the next task loads its own again). On an 8 GB graphics card a second copy beside
the first does not fit. `ModelOwner` is what the test needs of such an owner; without one (the command line, the
setup window on its own) the test loads the model itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from app.domain.cancel import CancelToken
from app.domain.proposal import EngineInfo, Observation, PastStep, Proposal
from app.domain.settings import Settings
from app.engine.base import Engine, ProgressFn, TextFn

T = TypeVar("T")


class ModelOwner(Protocol):
    @property
    def busy(self) -> bool:
        """A task (or another test) is using the model now."""
        ...

    def with_model(self, settings: Settings, token: CancelToken, job: Callable[[Engine, EngineInfo], T]) -> T:
        """`job` run with the owner's engine for `settings`, on the owner's thread; ModelBusy while a task runs."""
        ...


class Lent:
    """The owner's loaded engine for the length of the test: loading it gives what the owner loaded, closing it
    leaves it loaded (the next task uses it)."""

    def __init__(self, engine: Engine, info: EngineInfo) -> None:
        self.engine, self.info = engine, info

    def load(self, progress: ProgressFn | None, token: CancelToken) -> EngineInfo:
        return self.info

    def propose(self, task: str, observation: Observation, history: Sequence[PastStep], token: CancelToken,
                on_text: TextFn | None = None) -> Proposal:
        return self.engine.propose(task, observation, history, token, on_text)

    def close(self) -> None:
        return None
