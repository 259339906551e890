"""The one engine interface the app uses; the agent loop depends on this, never on llama.cpp."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from app.domain.cancel import CancelToken
from app.domain.proposal import EngineInfo, Observation, PastStep, Proposal

# progress(fraction 0..1, what is happening); text(new text as it is generated)
ProgressFn = Callable[[float, str], None]
TextFn = Callable[[str], None]


class Engine(Protocol):
    """Loads a model, proposes the next action for a task, and releases the model."""

    def load(self, progress: ProgressFn | None, token: CancelToken) -> EngineInfo: ...

    def propose(self, task: str, observation: Observation, history: Sequence[PastStep], token: CancelToken,
                on_text: TextFn | None = None) -> Proposal: ...

    def close(self) -> None: ...


@runtime_checkable
class ShowsPrompt(Protocol):
    """An engine that can show the last prompt it sent, for run trajectories (screenshots by reference)."""

    def prompt_sent(self) -> dict[str, Any] | None: ...
