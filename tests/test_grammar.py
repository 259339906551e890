"""The action grammar: integer bounds, string limits and the profile's tool union."""

from __future__ import annotations

import json
import re

import pytest

from app.engine.grammar import grammar_for_schema, int_range
from app.engine.llama.library import safe_model_params
from app.engine.profile import load_profile


def _as_regex(gbnf_alternatives: str) -> re.Pattern[str]:
    rx = gbnf_alternatives.replace(" ", "")
    rx = re.sub(r'"(\d)"', r"\1", rx)
    return re.compile(f"^(?:{rx})$")


@pytest.mark.parametrize(("lo", "hi"), [(0, 1000), (1, 3), (1, 20), (1, 30), (0, 9), (7, 7), (10, 99), (5, 123)])
def test_int_range_matches_exactly_the_range(lo, hi):
    rx = _as_regex(int_range(lo, hi))
    for n in range(0, 1200):
        assert bool(rx.match(str(n))) == (lo <= n <= hi), n
    assert not rx.match("01") and not rx.match("-1") and not rx.match("")


def test_profile_grammar_covers_every_tool():
    profile = load_profile()
    g = grammar_for_schema(profile.output_schema())
    assert g.startswith("root ::= answer\n")
    for tool in profile.tool_names:
        assert f"tool-{tool.replace('_', '-')} ::= " in g
        assert json.dumps(json.dumps(tool)) in g  # the tool name as a JSON string literal
    assert "char{0,400}" in g  # thought/note length bound
    assert "int-0-1000 ::=" in g


def test_grammar_parses_in_llama_cpp(tiny_model_pair):
    """llama.cpp accepts the generated grammar (its parser is the judge)."""
    import llama_cpp

    profile = load_profile()
    params = safe_model_params(llama_cpp.llama_model_default_params())
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(tiny_model_pair.text).encode(), params)
    assert model
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        smpl = llama_cpp.llama_sampler_init_grammar(vocab, grammar_for_schema(profile.output_schema()).encode(),
                                                    b"root")
        assert smpl, "llama.cpp rejected the grammar"
        llama_cpp.llama_sampler_free(smpl)
    finally:
        llama_cpp.llama_model_free(model)
