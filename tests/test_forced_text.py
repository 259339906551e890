"""Small engine parts without a model: the grammar's forced text, the checkpoint buffer pool, the prefix
comparison, and llama.cpp's debug lines kept out of the lines that explain failures."""

from __future__ import annotations

import json
import random
from typing import Any

from app.engine.llama.context_plan import common_prefix
from app.engine.llama.forced_text import ForcedText
from app.engine.llama.host_buffers import HostBuffers
from app.engine.profile import load_profile

TRICKY = ['', 'a "quoted" word', 'back\\slash', 'ünï', 'null', '", "x": 1', 'tab\there']


def _value(schema: dict[str, Any], rng: random.Random) -> Any:
    """A random value the schema allows (as the answer grammar would let the model write it)."""
    union = schema.get("oneOf") or schema.get("anyOf")
    if union:
        return _value(rng.choice(union), rng)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    t = schema.get("type", "string")
    if isinstance(t, list):
        return _value({**schema, "type": rng.choice(t)}, rng)
    if t == "null":
        return None
    if t == "boolean":
        return rng.random() < 0.5
    if t == "string":
        return rng.choice(TRICKY)[: schema.get("maxLength", 400)]
    if t == "integer":
        return rng.randint(schema.get("minimum", 0), schema.get("maximum", 10**6))
    if t == "array":
        return [_value(schema["items"], rng) for _ in range(rng.randint(schema.get("minItems", 0),
                                                                         schema.get("maxItems", 3)))]
    return {k: _value(v, rng) for k, v in schema["properties"].items()}


def test_forced_text_is_what_every_valid_answer_continues_with():
    """At every character of 300 random answers (both profiles' tool sets), the text called forced is exactly how
    that answer goes on; and the structural text is found (keys, commas, braces, the rest of a tool name)."""
    rng = random.Random(1)
    for name in ("holotron-12b", "holo31"):
        schema = load_profile(name).output_schema()
        automaton = ForcedText(schema)
        forced_chars = total = 0
        for _ in range(150):
            answer = json.dumps(_value(schema, rng))  # the grammar's layout: json.dumps spacing, fixed order
            f = automaton.fresh()
            for i, c in enumerate(answer):
                assert answer[i:].startswith(f.forced()), (answer[:i], f.forced())
                forced_chars += bool(f.forced())
                assert f.feed(c) and not (f.complete and i < len(answer) - 1)
            assert f.complete and f.forced() == ""
            total += len(answer)
        assert forced_chars > 0.3 * total


def test_forced_text_of_a_click():
    f = ForcedText(load_profile("holotron-12b").output_schema())
    assert f.forced() == '{"note": '
    f.feed('{"note": n')
    assert f.forced() == 'ull, "thought": "'
    f.feed('ull, "thought": "Open it"')
    assert f.forced() == ', "tool_call": {"tool_name": "'
    f.feed(', "tool_call": {"tool_name": "c')
    assert f.forced() == 'lick", "element": "'
    f.feed('lick", "element": "Save", "x": 91')
    assert f.forced() == ""  # another digit, or the end of the number
    assert not f.feed("x")  # outside the grammar: nothing is forced any more
    assert f.forced() == ""


def test_checkpoint_buffers_are_reused_by_size():
    pool = HostBuffers(pinned=True)
    a = pool.take(1000)
    assert not pool.pinned  # no GPU here: ordinary memory
    a[999] = 7
    pool.give_back(a)
    assert pool.take(1000) is a and pool.take(10) is not a
    assert (pool.allocated, pool.reused) == (2, 1)
    pool.close()


def test_common_prefix():
    img = [("img", "d", 0, i) for i in range(3000)]
    assert common_prefix([1, 2, *img, 5], [1, 2, *img, 6, 7]) == 3002
    assert common_prefix([], [1]) == 0 and common_prefix([1, 2], [1, 2]) == 2
    assert common_prefix(list(range(5000)), [*range(4096), -1]) == 4096


def test_llama_cpp_debug_lines_stay_out_of_the_failure_context():
    """With CUDA graphs llama.cpp logs a debug line per generated token; those (and their continuations) must not
    push out the lines that explain a failure."""
    from app.engine.llama.runtime import _log_line, recent_log

    _log_line(3, b"load: a warning that explains things\n", None)
    for i in range(300):
        _log_line(1, f"ggml_backend_cuda_graph_compute: CUDA Graph id {i} reused\n".encode(), None)
        _log_line(5, b"  (continued)\n", None)
    assert recent_log(1) == "load: a warning that explains things"
    _log_line(4, b"decode: failed\n", None)
    _log_line(5, b"  details\n", None)
    assert recent_log(2) == "decode: failed\n  details"
