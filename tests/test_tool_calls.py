"""Native tool calls (Holo4 and Holotron4 profiles, app/engine/tool_call.py): the Qwen3-Coder XML format the chat
templates render, checked against the templates (tools included); the embedded engine's grammar allows exactly one
call of one tool (random weights still answer with a valid call); the remote engine sends the tools with
`tool_choice: "required"` to vLLM (a stand-in at the network boundary) and reads its parsed tool calls, and drives a
real llama.cpp server with the same grammar."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.domain.cancel import CancelToken
from app.domain.errors import ProposalError
from app.domain.proposal import PastStep
from app.engine.llama.engine import LocalEngine, LocalEngineConfig
from app.engine.profile import load_profile
from app.engine.remote.engine import RemoteEngine, RemoteEngineConfig
from app.engine.template_check import layout_drift
from app.engine.tool_call import call_from_xml, function_tools, render_call
from tests.engine_helpers import compact_profile, screenshot
from tests.fake_vllm import FakeVLLM
from tests.fixtures import gguf_models as gm
from tests.fixtures import qwen35_models as qm
from tests.fixtures.gguf_models import ModelPair

TOOLS = load_profile("holo4").output["tools"]


# ---------------------------------------------------------------------------------------------------- format
def test_profiles_lay_out_tools_and_turns_as_their_templates_do():
    holo4, holotron4 = load_profile("holo4"), load_profile("holotron4")
    assert holo4.tool_calls and holotron4.tool_calls
    assert layout_drift(holo4, qm.HOLO4_TEMPLATE_PATH.read_text(encoding="utf-8")) is None
    assert layout_drift(holotron4, gm.NANO3_TEMPLATE_PATH.read_text(encoding="utf-8")) is None
    drift = layout_drift(holo4, gm.NANO3_TEMPLATE_PATH.read_text(encoding="utf-8"))  # another template's tools
    assert drift is not None and "the profile lays out turns as" in drift
    assert holo4.rendered_system_prompt().startswith("# Tools\n\nYou have access to the following functions:")
    assert holotron4.rendered_system_prompt().startswith("You are a computer-use agent")
    assert "\n<function>\n<name>click</name>" in holotron4.rendered_system_prompt()


def test_a_call_parses_into_typed_arguments_and_renders_back():
    text = ("Some reasoning\n</think>\n\n<tool_call>\n<function=scroll>\n<parameter=element>\nthe list\n</parameter>\n"
            "<parameter=x>\n500\n</parameter>\n<parameter=y>\n20\n</parameter>\n<parameter=direction>\ndown\n"
            "</parameter>\n<parameter=amount>\n3\n</parameter>\n</function>\n</tool_call>")
    call = call_from_xml(text, TOOLS)
    assert call == {"tool_name": "scroll", "element": "the list", "x": 500, "y": 20, "direction": "down", "amount": 3}
    assert render_call(call) in text
    key = {"tool_name": "key", "keys": ["ctrl", "s"]}
    assert call_from_xml(render_call(key), TOOLS) == key and '["ctrl", "s"]' in render_call(key)
    write = {"tool_name": "write", "content": "hello", "press_enter": True}
    assert call_from_xml(render_call(write), TOOLS) == write
    with pytest.raises(ProposalError, match="“open_app”, which is not one of its tools"):
        call_from_xml("<tool_call>\n<function=open_app>\n</function>\n</tool_call>", TOOLS)
    with pytest.raises(ProposalError, match=r"“x” .* is not a valid integer"):
        call_from_xml(render_call({"tool_name": "click", "element": "a", "x": "far", "y": 1}), TOOLS)
    with pytest.raises(ProposalError, match="holds no tool call"):
        call_from_xml("I would click the button.", TOOLS)
    assert [f["function"]["name"] for f in function_tools(TOOLS)][:2] == ["click", "double_click"]


# ---------------------------------------------------------------------------------------------------- embedded
@pytest.mark.model
def test_the_embedded_engine_answers_with_exactly_one_call(holotron4_pair: ModelPair, tmp_path: Path):
    profile = compact_profile(tmp_path, base="holotron4", chars=6, max_tiles=2)
    engine = LocalEngine(LocalEngineConfig(text_model=str(holotron4_pair.text), mmproj=str(holotron4_pair.mmproj),
                                           profile=str(profile), n_ctx=8192))
    try:
        info = engine.load(None, CancelToken())
        assert not any("Chat layout check" in w for w in info.warnings)  # the profile matches the GGUF's template
        first = engine.propose("Open the settings", screenshot(1), [], CancelToken())
        assert first.raw.startswith("<tool_call>\n<function=") and first.raw.endswith("</function>\n</tool_call>")
        assert first.tool_call["tool_name"] in engine.profile.tool_names and first.note is None
        second = engine.propose("Open the settings", screenshot(2, feedback="Done."),
                                [PastStep(screenshot(1), first.raw)], CancelToken())
        assert second.raw.startswith("<tool_call>")
        prompt = engine.prompt_sent()["prompt"]
        assert "# Tools\n\nYou have access to the following functions:" in prompt
        assert f"<|im_start|>assistant\n<think></think>{first.raw}<|im_end|>\n" in prompt  # the call, as generated
        assert "<|im_start|>user\n<tool_response>\nDone.\n</tool_response>\n<|im_end|>\n<|im_start|>user\n" in prompt
    finally:
        engine.close()


@pytest.mark.model
def test_holo4_reasons_then_calls_and_keeps_its_reasoning(holo4moe_pair: ModelPair, tmp_path: Path):
    profile = compact_profile(tmp_path, base="holo4", chars=6, thinking=6)
    engine = LocalEngine(LocalEngineConfig(text_model=str(holo4moe_pair.text), mmproj=str(holo4moe_pair.mmproj),
                                           profile="auto", n_ctx=8192))
    assert engine.profile.name == "holo4"  # qwen35moe with a Holo4 name: not Holo3.1's profile
    engine = LocalEngine(LocalEngineConfig(text_model=str(holo4moe_pair.text), mmproj=str(holo4moe_pair.mmproj),
                                           profile=str(profile), n_ctx=8192))
    try:
        info = engine.load(None, CancelToken())
        assert not any("Chat layout check" in w for w in info.warnings)
        p = engine.propose("Open the settings", screenshot(1, (640, 480)), [], CancelToken())
        assert "</think>\n\n<tool_call>\n<function=" in p.raw  # forced end of the budget, then the call
        engine.propose("Open the settings", screenshot(2, (640, 480)), [PastStep(screenshot(1, (640, 480)), p.raw)],
                       CancelToken())
        prompt = engine.prompt_sent()["prompt"]
        assert f"<|im_start|>assistant\n<think>\n{p.raw}<|im_end|>\n" in prompt  # preserve_thinking
    finally:
        engine.close()


# ---------------------------------------------------------------------------------------------------- remote
def _tool_call_stream(fake: FakeVLLM, reasoning: str, name: str, arguments: dict) -> list[dict]:
    args = json.dumps(arguments)
    out = [fake.chunk({"role": "assistant", "content": ""})]
    out += [fake.chunk({"reasoning": reasoning[i:i + 8]}) for i in range(0, len(reasoning), 8)]
    out.append(fake.chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                           "function": {"name": name, "arguments": ""}}]}))
    out += [fake.chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[i:i + 7]}}]})
            for i in range(0, len(args), 7)]
    out.append(fake.chunk({}, "tool_calls"))
    return out


def test_the_remote_engine_asks_vllm_for_one_required_call_and_reads_it(tmp_path: Path):
    fake = FakeVLLM(model="Hcompany/Holo4-35B-A3B")
    fake.replies = [lambda body: (200, _tool_call_stream(fake, "The gear icon opens the settings.", "click",
                                                          {"element": "Settings", "x": 912, "y": 64}), {}),
                    lambda body: (200, _tool_call_stream(fake, "Now the theme.", "key", {"keys": ["ctrl", "t"]}),
                                  {})]
    with fake:
        engine = RemoteEngine(RemoteEngineConfig(url=fake.url))
        try:
            engine.load(None, CancelToken())
            assert engine.profile.name == "holo4"  # by the served model's name
            p = engine.propose("Open the settings", screenshot(1), [], CancelToken())
            assert p.tool_call == {"tool_name": "click", "element": "Settings", "x": 912, "y": 64}
            assert p.thought == "The gear icon opens the settings."
            assert p.raw == ("The gear icon opens the settings.\n</think>\n\n" + render_call(p.tool_call))
            body = fake.chats[-1]
            assert body["tool_choice"] == "required" and [t["function"]["name"] for t in body["tools"]][:1] == ["click"]
            assert "structured_outputs" not in body and "response_format" not in body
            assert body["chat_template_kwargs"] == {"enable_thinking": True, "preserve_thinking": True}
            assert body["messages"][0]["content"].startswith("You are a computer-use agent")  # the template adds tools
            p2 = engine.propose("Open the settings", screenshot(2, feedback="Done."), [PastStep(screenshot(1), p.raw)],
                                CancelToken())
            assert p2.tool_call == {"tool_name": "key", "keys": ["ctrl", "t"]}
            history = fake.chats[-1]["messages"]
            assert {"role": "assistant", "content": p.raw} in history
            texts = [m["content"] if isinstance(m["content"], str) else
                     "".join(part.get("text", "") for part in m["content"]) for m in history]
            assert any("<tool_response>\nDone.\n</tool_response>" in t for t in texts)
        finally:
            engine.close()


@pytest.fixture(scope="module")
def moe_server(tmp_path_factory):
    """A real llama-cpp-python server serving the tiny nemotron_h_moe pair under a Holotron4 model name."""
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python's [server] extra is not installed")
    from tests.llama_server import LlamaServer

    folder = tmp_path_factory.mktemp("moe-server")
    template = ("{%- for m in messages -%}{{ '<|im_start|>' + m['role'] + '\\n' }}"
                "{%- if m['content'] is string -%}{{ m['content'] }}{%- else -%}{%- for p in m['content'] -%}"
                "{{ p['text'] if p['type'] == 'text' else '' }}{%- endfor -%}{%- endif -%}{{ '<|im_end|>\\n' }}"
                "{%- endfor -%}{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n<think></think>' }}"
                "{%- endif -%}")
    text = gm.build_text_model(folder / "text.gguf", gm.TINY_MOE.text, chat_template=template)
    pair = gm.ModelPair(text, gm.build_mmproj(folder / "mmproj.gguf", gm.TINY_MOE.vision, vision_only=True))
    server = LlamaServer(folder / "srv", pair, api_key=None, n_ctx=8192)
    yield server
    server.stop()


@pytest.mark.model
def test_a_llama_cpp_server_answers_with_the_same_grammar(moe_server, tmp_path: Path):
    profile = compact_profile(tmp_path, base="holotron4", chars=4, max_tiles=2)
    data = json.loads(profile.read_text(encoding="utf-8"))
    data["output"]["tools"] = [t for t in data["output"]["tools"] if t["tool_name"] in ("click", "wait")]
    profile.write_text(json.dumps(data), encoding="utf-8")
    engine = RemoteEngine(RemoteEngineConfig(url=moe_server.url, profile=str(profile), max_tokens=400))
    try:
        engine.load(None, CancelToken())
        p = engine.propose("Open the settings", screenshot(1), [], CancelToken())
        assert p.raw.startswith("<tool_call>\n<function=") and p.tool_call["tool_name"] in engine.profile.tool_names
        body = engine.prompt_sent()
        assert "grammar" in body and "tools" not in body
        assert "# Tools" in body["messages"][0]["content"]  # the server's template gets no tools: ours carries them
    finally:
        engine.close()
