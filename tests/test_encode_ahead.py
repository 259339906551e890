"""The vision work runs on a worker thread ahead of the decode (app/engine/llama/encode_ahead.py): the next tiles
go through the encoder while the text model still takes the previous ones, a screenshot is prepared while the text
before it is evaluated, and a Stop or an encoder failure on the worker reaches the step as if it had happened in
the step's own thread. Real llama.cpp on the tiny random-weight pairs; the spies only watch and wait. The worker is
off by default until it is measured on a GPU (LocalEngineConfig.encode_ahead); these tests turn it on."""

from __future__ import annotations

import threading

import pytest

from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, ModelLoadError
from app.engine.llama import image_cache
from tests.engine_helpers import compact_profile, make_engine, screenshot

pytestmark = pytest.mark.model
WIDE = (1024, 512)  # 2×1 tiles of 512 px + the thumbnail: three encoder passes of one tile (n_batch 512)
WORKER = "deskhand-encode-ahead"


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == WORKER]


@pytest.fixture
def engine(tiny_model_pair, tmp_path):
    eng = make_engine(tiny_model_pair, compact_profile(tmp_path), encode_ahead=True)
    eng.load(None, CancelToken())
    yield eng
    eng.close()


def _watch_encodes(monkeypatch, on_call=None) -> list[str]:
    """The thread of each encoder pass; `on_call(n)` runs before the n-th (from 1)."""
    threads: list[str] = []
    native = image_cache.encode_tiles

    def encode(rt, bitmaps, into=None):
        threads.append(threading.current_thread().name)
        if on_call is not None:
            on_call(len(threads))
        return native(rt, bitmaps, into)

    monkeypatch.setattr(image_cache, "encode_tiles", encode)
    return threads


def test_the_next_tiles_are_encoded_while_the_text_model_takes_the_previous_ones(engine, monkeypatch):
    second = threading.Event()
    threads = _watch_encodes(monkeypatch, lambda n: second.set() if n == 2 else None)
    rt = engine._session.rt
    native = rt.decode_embeddings
    waited: list[bool] = []

    def decode(parts, pos, last, token):
        if not waited:  # the first tile's tokens: the second tile's encode begins before they are evaluated
            waited.append(second.wait(30))
        return native(parts, pos, last, token)

    monkeypatch.setattr(rt, "decode_embeddings", decode)
    prop = engine.propose("Open the settings", screenshot(1, WIDE), [], CancelToken())
    assert waited == [True]
    assert threads == [WORKER] * 3
    c = prop.counters
    assert (c.tiles_encoded, c.images_encoded, c.image_cache_hits) == (3, 1, 0)
    assert _workers() == []


def test_a_stop_while_the_worker_encodes_ends_the_step_and_the_next_step_works(engine, monkeypatch):
    token = CancelToken()
    _watch_encodes(monkeypatch, lambda n: token.cancel("user pressed Stop") if n == 2 else None)
    with pytest.raises(Cancelled):
        engine.propose("Open the settings", screenshot(1, WIDE), [], token)
    assert _workers() == []
    monkeypatch.undo()
    prop = engine.propose("Open the settings", screenshot(1, WIDE), [], CancelToken())
    # the worker finished the pass it was in and stopped before the next: only the thumbnail is left to encode
    assert prop.raw and (prop.counters.tiles_encoded, prop.counters.images_encoded) == (1, 0)


def test_an_encoder_failure_on_the_worker_fails_the_step_with_its_own_message(engine, monkeypatch):
    def fail(n: int) -> None:
        if n == 2:
            raise ModelLoadError("The vision encoder failed. (planted on the second pass)", "Report this.")

    _watch_encodes(monkeypatch, fail)
    with pytest.raises(ModelLoadError, match="planted on the second pass"):
        engine.propose("Open the settings", screenshot(1, WIDE), [], CancelToken())
    assert _workers() == []
    monkeypatch.undo()
    assert engine.propose("Open the settings", screenshot(1, WIDE), [], CancelToken()).raw


def test_a_dynamic_resolution_screenshot_is_prepared_and_encoded_on_the_worker(qwen35_pair, tmp_path, monkeypatch):
    eng = make_engine(qwen35_pair, compact_profile(tmp_path, base="holo31", thinking=0), encode_ahead=True)
    eng.load(None, CancelToken())
    threads: list[str] = []
    native = image_cache.encode_image

    def encode(rt, image, *, keep_chunk):
        threads.append(threading.current_thread().name)
        return native(rt, image, keep_chunk=keep_chunk)

    monkeypatch.setattr(image_cache, "encode_image", encode)
    try:
        first = eng.propose("Open the settings", screenshot(1, (640, 480)), [], CancelToken())
    except Exception as exc:  # a random model's sampled answer may not validate: the step ran all the same
        first = exc
    finally:
        eng.close()
    assert threads == [WORKER]
    assert (first.counters.images_encoded, first.counters.tiles_encoded) == (1, 1)
