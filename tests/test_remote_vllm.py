"""What the remote engine sends to vLLM and how it reads vLLM's answers, captured on a loopback endpoint that
answers with vLLM 0.34's shapes (tests/fake_vllm.py: vLLM needs a GPU, so the vendor side is the stand-in)."""

from __future__ import annotations

import base64
import io
import json

import pytest
from PIL import Image, ImageChops

from app.domain.cancel import CancelToken
from app.domain.errors import EngineUnavailable
from app.domain.proposal import PastStep
from app.engine.profile import load_profile
from app.engine.remote.client import ClientOptions
from app.engine.remote.engine import RemoteEngine, RemoteEngineConfig
from app.engine.remote.errors import RemoteError
from tests.engine_helpers import screenshot
from tests.fake_vllm import FakeVLLM, vllm_error

FAST = ClientOptions(connect_timeout_s=2, read_timeout_s=10, retries=2, backoff_s=0.01)
HOLOTRON = "Hcompany/Holotron-12B"


def holotron(url: str, **kw) -> RemoteEngine:
    return RemoteEngine(RemoteEngineConfig(url=url, model=HOLOTRON, client=FAST, **kw))


def decode(url: str) -> Image.Image:
    head, _, data = url.partition(",")
    assert head == "data:image/png;base64"
    return Image.open(io.BytesIO(base64.b64decode(data, validate=True)))


def test_the_holotron_request_body_is_what_vllm_documents():
    """The body checked against vLLM's API documentation (v0.34):
    - docs/serving/openai_compatible_server.md, "Extra Parameters": parameters that are not part of the OpenAI API
      are passed in `extra_body` by the OpenAI client, "or directly merge them into the JSON payload if you are
      using HTTP call directly" — so `structured_outputs`, `chat_template_kwargs` ("additional keyword args to pass
      to the template renderer") and `mm_processor_kwargs` ("additional kwargs to pass to the HF processor") sit at
      the top level of the JSON body.
    - docs/features/structured_outputs.md: `guided_json -> {"structured_outputs": {"json": ...}}` (the guided_*
      fields were removed in v0.12.0).
    - docs/features/multimodal_inputs.md: images are `{"type": "image_url", "image_url": {"url": ...}}` content
      parts, base64 `data:` URLs accepted ("Only base64 data URLs are supported", multimodal/media/connector.py);
      "there is no need to place image placeholders in the text content".
    - The Nemotron-Nano-12B-v2-VL processor (transformers_utils/processors/nano_nemotron_vl.py) takes
      `max_num_tiles` per request (default 12); Nemotron's template switches thinking off with "/no_think" in the
      system turn, Qwen3.5's with `enable_thinking`.
    """
    profile = load_profile()  # the real Holotron-12B profile
    with FakeVLLM() as srv:
        e = holotron(srv.url)
        info = e.load(None, CancelToken())
        assert info.name == HOLOTRON and info.device == "Remote: vLLM 0.34.0 at 127.0.0.1" and info.n_ctx == 65536
        assert srv.paths[:2] == ["/v1/models", "/version"]  # no probe: vLLM's version decides
        shots = [screenshot(i, (1920, 1080), feedback="Done." if i else "") for i in range(5)]
        history = [PastStep(s, srv.answer) for s in shots[:4]]
        streamed: list[str] = []
        p = e.propose("Open the display settings", shots[4], history, CancelToken(), streamed.append)
        body = srv.chats[-1]
        e.close()
    assert set(body) == {"model", "messages", "max_tokens", "temperature", "seed", "stream", "stream_options",
                         "top_k", "structured_outputs", "chat_template_kwargs", "mm_processor_kwargs"}
    assert body["model"] == HOLOTRON and body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert (body["max_tokens"], body["temperature"], body["top_k"], body["seed"]) == (1024, 0.0, 1, 0)
    assert body["structured_outputs"] == {"json": profile.output_schema()}
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["mm_processor_kwargs"] == {"max_num_tiles": 12}
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * 4 + ["user"]
    assert isinstance(msgs[0]["content"], str) and msgs[0]["content"].endswith("\n/no_think")
    assert json.dumps(profile.output_schema(), ensure_ascii=False) in msgs[0]["content"]  # <output_format> copy
    assert all(m["content"] == srv.answer for m in msgs if m["role"] == "assistant")
    users = [m["content"] for m in msgs if m["role"] == "user"]
    # the profile's image budget: 3 screenshots dropped in blocks, so step 5 shows those of steps 4 and 5
    assert all(isinstance(u, str) and profile.placeholder in u for u in users[:3])
    assert users[0].startswith("<task>\nOpen the display settings\n</task>\n<observation step=1>")
    for content, shot in zip(users[3:], shots[3:], strict=True):
        texts = [c["text"] for c in content if c["type"] == "text"]
        images = [c["image_url"]["url"] for c in content if c["type"] == "image_url"]
        assert len(images) == 1 and texts[0].rstrip().endswith("<screenshot>")
        sent = decode(images[0])
        assert sent.size == (1920, 1080) and ImageChops.difference(sent.convert("RGB"), shot.image).getbbox() is None
    assert "<feedback>Done.</feedback>" in users[4][0]["text"]
    assert p.action.tool_name == "click" and p.raw == srv.answer and "".join(streamed) == srv.answer
    assert p.counters.tokens_evaluated == 5000 and p.counters.images_encoded == 2


def test_the_tile_budget_and_thinking_follow_the_settings_and_profile(tmp_path):
    data = json.loads(load_profile().source.read_text())
    data["thinking"] = True
    (tmp_path / "thinking.json").write_text(json.dumps(data))
    with FakeVLLM() as srv:
        e = holotron(srv.url, max_tiles=6, profile=str(tmp_path / "thinking.json"))
        e.load(None, CancelToken())
        srv.replies.append(lambda body: (200, "<think>\nThe menu is top left.\n</think>\n\n" + srv.answer, {}))
        p = e.propose("Open the menu", screenshot(0), [], CancelToken())
        body = srv.chats[-1]
        e.close()
    assert body["mm_processor_kwargs"] == {"max_num_tiles": 6}
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    assert "/no_think" not in body["messages"][0]["content"]
    assert p.raw == srv.answer  # reasoning written inline (no reasoning parser) is not part of the answer


@pytest.mark.parametrize(("version", "field"), [("0.34.0", "structured_outputs"), ("0.11.1", "structured_outputs"),
                                                ("0.9.2", "guided_json")])
def test_vllm_versions_get_the_structured_output_field_they_read(version, field):
    with FakeVLLM(version=version) as srv:
        e = holotron(srv.url)
        e.load(None, CancelToken())
        e.propose("Open the menu", screenshot(0), [], CancelToken())
        body = srv.chats[-1]
        e.close()
    assert field in body and "response_format" not in body
    assert body[field] == ({"json": load_profile().output_schema()} if field == "structured_outputs"
                           else load_profile().output_schema())


def test_an_unknown_server_is_probed_and_refused_plainly_when_nothing_constrains_it():
    with FakeVLLM(owned_by="organization-owner", honours=frozenset({"response_format"})) as srv:
        e = holotron(srv.url)
        e.load(None, CancelToken())
        assert e.server is not None and e.server.structured == "json_schema" and "probe" in e.server.how
        e.propose("Open the menu", screenshot(0), [], CancelToken())
        body = srv.chats[-1]
        e.close()
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == load_profile().output_schema()
    assert not {"top_k", "chat_template_kwargs", "mm_processor_kwargs", "structured_outputs"} & set(body)
    with FakeVLLM(owned_by="organization-owner", honours=frozenset()) as srv, pytest.raises(RemoteError) as err:
        holotron(srv.url).load(None, CancelToken())
    assert err.value.kind == "structured" and "supports no structured output Deskhand knows" in err.value.what
    assert "vLLM 0.10.2 or newer" in err.value.todo


def _answer_with(status: int, payload: object, headers: dict[str, str] | None = None):
    return lambda body: (status, payload, headers or {})


def test_vllm_errors_are_said_plainly():
    with FakeVLLM(api_key="k") as srv:
        with pytest.raises(RemoteError) as no_key:
            holotron(srv.url).load(None, CancelToken())
        assert no_key.value.kind == "auth" and "needs an API key (401 Unauthorized)" in no_key.value.what
        e = holotron(srv.url, api_key="k")
        e.load(None, CancelToken())
        cases = [
            (403, vllm_error(403, "This key may not use the model.", "PermissionDeniedError"), "auth",
             "denied access (403 Forbidden): This key may not use the model."),
            (404, vllm_error(404, f"The model `{HOLOTRON}` does not exist. Valid aliases: ['holo'].",
                             "NotFoundError", "model"), "model", f"does not serve the model “{HOLOTRON}”"),
            (400, vllm_error(400, "At most 3 image(s) may be provided in one prompt."), "request",
             "rejected the request (400): At most 3 image(s)"),
        ]
        for status, payload, kind, words in cases:
            srv.replies.append(_answer_with(status, payload))
            with pytest.raises(RemoteError) as err:
                e.propose("Open the menu", screenshot(0), [], CancelToken())
            assert err.value.kind == kind and words in err.value.what, err.value.what
        srv.replies += [_answer_with(429, vllm_error(429, "Too many requests", "RateLimitError"),
                                     {"Retry-After": "0"})] * 3
        with pytest.raises(RemoteError) as limited:
            e.propose("Open the menu", screenshot(0), [], CancelToken())
        assert limited.value.kind == "rate_limited" and "(after 3 attempts)" in limited.value.what
        srv.replies += [_answer_with(503, vllm_error(503, "Service Unavailable", "ServiceUnavailableError"))] * 3
        with pytest.raises(EngineUnavailable) as down:
            e.propose("Open the menu", screenshot(0), [], CancelToken())
        assert "failed (503) (after 3 attempts)" in down.value.what
        engine_died = vllm_error(500, "EngineCore encountered an issue.", "InternalServerError")
        srv.replies.append(_answer_with(200, [srv.chunk({"role": "assistant", "content": ""}), engine_died]))
        with pytest.raises(EngineUnavailable) as dead:
            e.propose("Open the menu", screenshot(0), [], CancelToken())
        assert "EngineCore encountered an issue" in dead.value.what
        e.close()


def test_transient_errors_are_retried_before_anything_is_streamed():
    with FakeVLLM() as srv:
        e = holotron(srv.url)
        e.load(None, CancelToken())
        srv.replies += [_answer_with(429, vllm_error(429, "slow down", "RateLimitError"), {"Retry-After": "0"}),
                        _answer_with(502, {"detail": "Bad Gateway"})]
        p = e.propose("Open the menu", screenshot(0), [], CancelToken())
        assert p.action.tool_name == "click" and len(srv.chats) == 3
        e.close()


def test_a_context_overflow_summarises_old_steps_and_asks_again():
    too_long = vllm_error(400, "This model's maximum context length is 65536 tokens. However, your prompt contains "
                               "70211 input tokens, which exceeds this limit even without any output tokens. Please "
                               "reduce the length of the input prompt.", param="input_tokens")
    with FakeVLLM() as srv:
        e = holotron(srv.url)
        e.load(None, CancelToken())
        shots = [screenshot(i) for i in range(7)]
        history = [PastStep(s, srv.answer) for s in shots[:6]]
        srv.replies.append(_answer_with(400, too_long))
        p = e.propose("Open the menu", shots[6], history, CancelToken())
        first, second = srv.chats[-2:]
        assert p.action.tool_name == "click"
        assert len(second["messages"]) < len(first["messages"])
        first_user = second["messages"][1]["content"]
        text = first_user if isinstance(first_user, str) else "".join(c.get("text", "") for c in first_user)
        assert "Earlier steps, summarised to fit the context" in text
        srv.replies += [_answer_with(400, too_long)] * 3
        with pytest.raises(RemoteError) as err:
            e.propose("Open the menu", shots[6], history, CancelToken())
        assert err.value.kind == "context" and "--max-model-len" in err.value.todo
        e.close()


def test_feedback_can_name_the_tool_the_previous_answer_called(tmp_path):
    """Holo's agent loop wraps results as <tool_output tool="click">…</tool_output> (hub.hcompany.ai/agent-loop)."""
    from app.engine.remote.prompt import build_messages

    data = json.loads(load_profile().source.read_text())
    data["feedback_template"] = '<tool_output tool="{tool}">\n{feedback}\n</tool_output>\n'
    (tmp_path / "p.json").write_text(json.dumps(data))
    answer = json.dumps({"note": None, "thought": "t", "tool_call": {"tool_name": "scroll", "x": 1, "y": 2}})
    msgs = build_messages(load_profile(tmp_path / "p.json"), "Task", screenshot(1, feedback="Done."),
                          [PastStep(screenshot(0), answer)])
    assert '<tool_output tool="scroll">\nDone.\n</tool_output>' in msgs[-1]["content"][0]["text"]


def test_a_holo31_server_gets_the_holo31_profile_when_the_profile_is_auto():
    holo = load_profile("holo31")
    with FakeVLLM(model="Hcompany/Holo-3.1-4B") as srv:
        e = RemoteEngine(RemoteEngineConfig(url=srv.url, client=FAST))  # profile "auto", the default
        e.load(None, CancelToken())
        e.propose("Open the menu", screenshot(0), [], CancelToken())
        body = srv.chats[-1]
        e.close()
    assert e.profile.name == holo.name and body["model"] == "Hcompany/Holo-3.1-4B"
    assert body["messages"][0]["content"].startswith(holo.rendered_system_prompt().strip()[:200])
    assert "mm_processor_kwargs" not in body  # Holotron's tiles are no Qwen-VL processor argument
    assert body["structured_outputs"] == {"json": holo.output_schema()}


class _JsonChatter(FakeVLLM):
    """A server that answers every unconstrained request with a JSON object of its own (as an instruction-tuned
    model asked for "a JSON object" does), and applies only the forms in `honours`."""

    def probe_answer(self, body: dict) -> str:
        if any(k in body for k in self.honours):
            return super().probe_answer(body)
        return '{"probe": "here is a JSON object", "ok": true}'


@pytest.mark.parametrize(("honours", "chosen"), [
    (frozenset(), None), (frozenset({"structured_outputs"}), "structured_outputs"),
    (frozenset({"response_format"}), "json_schema")])
def test_a_probe_counts_only_the_answer_no_free_model_would_give(honours, chosen):
    """The mutation audit: the probe must see the one value its schema allows, not any JSON object; a form the
    server ignores is not taken, and the next one is tried."""
    from app.engine.remote.client import ServerClient
    from app.engine.remote.endpoint import parse_endpoint
    from app.engine.remote.server import detect

    with _JsonChatter(owned_by="organization-owner", honours=honours) as srv:
        client = ServerClient(parse_endpoint(srv.url))
        try:
            info = detect(client, CancelToken())
        finally:
            client.close()
        probes = [b for b in srv.bodies if not b.get("stream")]
    assert info.structured == chosen, info
    assert probes and all(b["max_tokens"] <= 64 and b["temperature"] == 0 for b in probes)
    if chosen is None:
        assert len(probes) == 3 and "none of the forms" in info.how  # every form tried, none taken
    else:
        assert "tested with a probe request" in info.how
