"""A test double for the model: the real Engine protocol, proposing a scripted sequence of tool calls and
recording everything it was given (the task, each observation's feedback and image, the history length).

The GPU is the one boundary the desktop tests cannot cross; everything around it (capture, policy, the decision
gate, execution, the recorder, the UI) stays real. A script entry is a tool call (dict), or a function of the
observation returning one, so a test can aim at where a window really is.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from app.domain.actions import action_from_tool_call
from app.domain.cancel import CancelToken
from app.domain.proposal import Counters, EngineInfo, Observation, PastStep, Proposal, Timings
from app.engine.base import ProgressFn, TextFn

Step = dict[str, Any] | Callable[[Observation], dict[str, Any]]


@dataclass
class Seen:
    task: str
    feedback: str
    image: Image.Image | None
    history: int


@dataclass
class ScriptedEngine:
    script: list[Step]
    thought: str = "I can see the window; this step gets closer to the goal."
    think_s: float = 0.0  # how long each proposal "thinks" (streamed in pieces meanwhile)
    seen: list[Seen] = field(default_factory=list)
    loads: int = 0
    closed: bool = False
    gate: threading.Event | None = None  # when set by the test, proposals wait for it
    keep_images: bool = True  # False: `seen` holds no pixels (long runs and memory measurements)

    def load(self, progress: ProgressFn | None, token: CancelToken) -> EngineInfo:
        self.loads += 1
        for i in range(1, 4):
            token.check()
            if progress is not None:
                progress(i / 3, ("text model", "vision projector", "Model ready")[i - 1])
        return EngineInfo(name="Scripted test model", device="CPU (test double)", gpu_offload=False, n_ctx=8192)

    def propose(self, task: str, observation: Observation, history: Sequence[PastStep], token: CancelToken,
                on_text: TextFn | None = None) -> Proposal:
        image = observation.image.copy() if observation.image is not None and self.keep_images else None
        self.seen.append(Seen(task, observation.feedback, image, len(history)))
        if self.gate is not None:
            while not self.gate.wait(0.02):
                token.check()
        started = time.monotonic()
        entry = self.script.pop(0) if self.script else {"tool_name": "answer", "content": "The script is done."}
        call = entry(observation) if callable(entry) else dict(entry)
        raw = json.dumps({"note": None, "thought": self.thought, "tool_call": call})
        pieces = [raw[i:i + 12] for i in range(0, len(raw), 12)]
        for piece in pieces:
            token.check()
            if on_text is not None:
                on_text(piece)
            if self.think_s:
                time.sleep(self.think_s / len(pieces))
        total = time.monotonic() - started
        return Proposal(note=None, thought=self.thought, action=action_from_tool_call(call), tool_call=call, raw=raw,
                        counters=Counters(tokens_generated=len(pieces)),
                        timings=Timings(generate_s=total, total_s=total))

    def close(self) -> None:
        self.closed = True

    @property
    def feedback(self) -> list[str]:
        return [s.feedback for s in self.seen]
