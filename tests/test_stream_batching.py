"""Streamed text reaches the UI at a frame rate: token deltas are merged, nothing is lost, order is kept."""

from __future__ import annotations

from app.domain import events as ev
from app.ui.bridge.stream_batching import StreamBatcher


def test_tokens_are_merged_to_at_most_30_updates_per_second_without_losing_text_or_order():
    now = [0.0]
    out: list[ev.Event] = []
    b = StreamBatcher(out.append, 30, clock=lambda: now[0])
    text = "".join(f"tok{i} " for i in range(300))
    for i in range(300):  # 300 tokens in one second
        b(ev.TokensStreamed(1, 1, f"tok{i} "))
        now[0] += 1 / 300
    b(ev.StepDecided(1, 1, "auto", ""))  # another event flushes what is pending first
    streamed = [e for e in out if isinstance(e, ev.TokensStreamed)]
    assert len(streamed) <= 31
    assert "".join(e.text for e in streamed) == text
    assert isinstance(out[-1], ev.StepDecided)


def test_a_new_step_never_merges_with_the_last_ones_text():
    out: list[ev.Event] = []
    b = StreamBatcher(out.append, 30, clock=lambda: 5.0)
    b(ev.TokensStreamed(1, 1, "a"))  # due: goes out at once
    b(ev.TokensStreamed(1, 1, "b"))  # pending
    b(ev.TokensStreamed(1, 2, "c"))  # step 2: step 1's "b" goes out first, unmerged
    b.flush()
    assert [(e.step, e.text) for e in out] == [(1, "a"), (1, "b"), (2, "c")]
