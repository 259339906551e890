"""The remote engine: the same engine protocol as the embedded one, served by an OpenAI-compatible server of the
user's own (vLLM for Holotron-12B and Holo3.1; llama.cpp's servers work too).

The prompt comes from the same profile, the answer is constrained to the profile's JSON schema by the server and
validated into typed actions exactly as the embedded engine's is. Screenshots leave this computer only for the
server the user chose; the address check refuses plain HTTP to another host unless allowed explicitly.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError, ProposalError
from app.domain.proposal import Counters, EngineInfo, Observation, PastStep, Proposal, Timings
from app.engine.answer import ParsedAnswer, parse_answer
from app.engine.base import ProgressFn, TextFn
from app.engine.family import profile_for_served_model
from app.engine.profile import AUTO_PROFILE, DEFAULT_PROFILE, FALLBACK_PROFILE, Profile, load_profile
from app.engine.remote.client import ClientOptions, ServerClient
from app.engine.remote.endpoint import Endpoint, parse_endpoint
from app.engine.remote.errors import RemoteError
from app.engine.remote.prompt import build_messages, data_url, screenshot_refs, with_images
from app.engine.remote.request import GRAMMAR, request_body, sends_tools
from app.engine.remote.server import NEITHER_TODO, ServerInfo, detect
from app.engine.tool_call import grammar_for_profile

log = logging.getLogger("deskhand.engine.remote")
THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL)


@dataclass(frozen=True)
class RemoteEngineConfig:
    url: str
    model: str = ""  # the served model name; "" = the only one the server serves
    api_key: str = ""
    profile: str = DEFAULT_PROFILE
    max_tiles: int | None = None  # the server-side tile budget (Holotron: max_num_tiles)
    max_tokens: int | None = None
    allow_http: bool = False  # plain HTTP to a host that is not this computer
    structured: str = "auto"  # or one mode of remote.request, for a server that cannot be told apart
    client: ClientOptions = field(default_factory=ClientOptions)


class RemoteEngine:
    def __init__(self, config: RemoteEngineConfig) -> None:
        self.config = config
        self.endpoint: Endpoint = parse_endpoint(config.url, config.allow_http)
        self.profile: Profile = load_profile(config.profile)
        self.server: ServerInfo | None = None
        self.model = config.model
        self.info: EngineInfo | None = None
        self._client: ServerClient | None = None
        self._urls: dict[str, str] = {}  # digest -> data URL of the screenshots the prompt still shows
        self._compact = 0
        self._last: dict[str, Any] | None = None
        self._grammar = ""

    @property
    def max_tokens(self) -> int:
        return self.config.max_tokens or self.profile.generation.max_tokens

    def load(self, progress: ProgressFn | None, token: CancelToken) -> EngineInfo:
        if progress is not None:
            progress(0.1, f"Connecting to {self.endpoint.base_url}")
        self._client = ServerClient(self.endpoint, self.config.api_key, self.config.client)
        try:
            return self._connect(self._client, progress, token)
        except BaseException:
            self.close()  # a failed load leaves no connection or event loop behind
            raise

    def _connect(self, client: ServerClient, progress: ProgressFn | None, token: CancelToken) -> EngineInfo:
        server = detect(client, token, self.config.model, self.config.structured)
        self.model = self._choose_model(server)
        if self.config.profile == AUTO_PROFILE:  # the profile of the model the server serves, by its name
            self.profile = load_profile(profile_for_served_model(self.model) or FALLBACK_PROFILE)
        if server.structured is None:
            raise RemoteError(f"The server at {self.endpoint.base_url} ({server.describe()}) supports no structured "
                              "output Deskhand knows (vLLM structured_outputs, response_format json_schema, a GBNF "
                              "grammar): its answers would not be valid by construction.", NEITHER_TODO,
                              kind="structured")
        self.server = server
        if server.structured == GRAMMAR:
            self._grammar = grammar_for_profile(self.profile)
        warnings = []
        if not self.endpoint.loopback:
            warnings.append(f"Screenshots are sent to {self.endpoint.host}, a server that is not this computer.")
        if not self.endpoint.secure and not self.endpoint.loopback:
            warnings.append(f"The connection to {self.endpoint.host} is plain HTTP: screenshots travel unencrypted.")
        served = server.model(self.model)
        self.info = EngineInfo(name=self.model, device=f"Remote: {server.describe()} at {self.endpoint.host}",
                               gpu_offload=False, n_ctx=served.max_model_len if served else 0,
                               warnings=tuple(warnings))
        log.info("remote engine: %s, model %s, structured output by %s", server.describe(), self.model, server.how)
        if progress is not None:
            progress(1.0, "Model server ready")
        return self.info

    def _choose_model(self, server: ServerInfo) -> str:
        names = [m.id for m in server.models]
        if self.config.model:
            if self.config.model not in names:  # llama-cpp-python would silently answer with another model
                raise RemoteError(f"The server at {self.endpoint.base_url} does not serve the model "
                                  f"“{self.config.model}”.", f"It serves: {', '.join(names) or 'no model'}. Set the "
                                  "served model name in Settings → General (--served-model for `deskhand run`).",
                                  kind="model")
            return self.config.model
        if len(names) == 1:
            return names[0]
        raise RemoteError(f"The server at {self.endpoint.base_url} serves {len(names)} models; Deskhand cannot tell "
                          "which one to use.", f"Choose one of: {', '.join(names) or 'none'} (Settings → General, or "
                          "--served-model).", kind="model")

    # ------------------------------------------------------------------ proposing
    def _url_of(self, digest: str, images: dict[str, Any]) -> str:
        if digest not in self._urls:
            image = images.get(digest)
            if image is None:
                raise DeskhandError("A screenshot of this run is no longer available to send to the model server.",
                                    "Start the task again.")
            self._urls[digest] = data_url(image)
        return self._urls[digest]

    def _request(self, task: str, observation: Observation, history: Sequence[PastStep]) -> dict[str, Any]:
        assert self.server is not None and self.server.structured is not None
        tools_sent = self.profile.tool_calls and sends_tools(self.server.structured)
        messages = build_messages(self.profile, task, observation, history, compact_before=self._compact,
                                  tools_sent=tools_sent)
        return request_body(self.profile, self.model, messages, server=self.server.kind,
                            mode=self.server.structured, max_tokens=self.max_tokens, max_tiles=self.config.max_tiles,
                            grammar=self._grammar)

    def propose(self, task: str, observation: Observation, history: Sequence[PastStep], token: CancelToken,
                on_text: TextFn | None = None) -> Proposal:
        if self._client is None or self.server is None:
            raise DeskhandError("The model server is not connected.", "Load the engine first.")
        if not history:
            self._compact = 0
        images = {p.observation.digest: p.observation.image for p in [*history, PastStep(observation, "")]
                  if p.observation.image is not None}
        for attempt in range(3):
            body = self._request(task, observation, history)
            refs = screenshot_refs(body["messages"])
            self._urls = {d: u for d, u in self._urls.items() if d in refs}
            self._last = body
            sent = {**body, "messages": with_images(body["messages"], lambda d: self._url_of(d, images))}
            try:
                result = self._client.chat(sent, token, (lambda kind, text: on_text(text)) if on_text else None)
                break
            except RemoteError as exc:
                if exc.kind != "context" or attempt == 2 or self._compact >= len(history):
                    raise
                # like the embedded engine: summarise the oldest half of the remaining steps and ask again
                self._compact = min(len(history), self._compact + max(1, (len(history) - self._compact) // 2))
                log.warning("the server's context overflowed at step %d: the oldest %d steps are summarised",
                            len(history) + 1, self._compact)
        self._check_answering_model(result.model)
        usage = result.usage
        counters = Counters(tokens_evaluated=int(usage.get("prompt_tokens") or 0),
                            tokens_generated=int(usage.get("completion_tokens") or 0),
                            images_encoded=len(refs), context_used=int(usage.get("total_tokens") or 0))
        timings = Timings(generate_s=result.total_s - result.first_token_s, total_s=result.total_s,
                          first_token_s=result.first_token_s)
        try:
            if self.profile.tool_calls:
                parsed, raw = self._tool_call_answer(result)
            else:
                raw = THINK.sub("", result.content, count=1).strip()  # a server without a reasoning parser
                parsed = parse_answer(raw, self.profile.coordinate_scale, finished=result.finish_reason != "length")
        except ProposalError as exc:
            exc.counters, exc.timings = counters, timings
            raise
        return Proposal(parsed.note, parsed.thought, parsed.action, parsed.tool_call, raw, counters, timings)

    def _check_answering_model(self, answered: str) -> None:
        """The server answered with another model than the one asked for: refused, as a model the server does not
        list is (a served name listed as an alias of the same model is the same model)."""
        if not answered or answered == self.model or self.server is None:
            return
        asked, other = self.server.model(self.model), self.server.model(answered)
        if asked is not None and other is not None and asked.root and asked.root == other.root:
            return
        how = "set in Settings → General or with --served-model" if self.config.model else \
            "the one it lists"
        raise RemoteError(f"The server at {self.endpoint.base_url} answered with the model “{answered}”, not "
                          f"“{self.model}” that Deskhand asked for ({how}); the answer was not used.",
                          "Check which model the server runs (its /v1/models and its command line), then set the "
                          "served model name it answers with in Settings → General (--served-model for `deskhand "
                          "run`).", kind="model")

    def _tool_call_answer(self, result: Any) -> tuple[ParsedAnswer, str]:
        """A native tool call: as the server's tool parser returned it (name and JSON arguments), or as text in the
        answer (a server without one). The answer kept for the history is laid out as the embedded engine's
        generation: the reasoning (when the profile keeps it), the end tag, the call in the template's XML."""
        from app.engine.answer import cut_off, thought_of
        from app.engine.tool_call import call_from_json_arguments, call_from_xml, render_call, validate_call

        p = self.profile
        tools = p.output["tools"]
        reasoning = result.reasoning.strip()
        content = result.content
        if not reasoning and "</think>" in content:  # a server without a reasoning parser
            reasoning, _, content = content.partition("</think>")
            reasoning = reasoning.replace("<think>", "", 1).strip()
        if result.tool_calls:
            first = result.tool_calls[0]
            call = call_from_json_arguments(first["name"], first["arguments"], tools, content or first["arguments"])
        else:
            if result.finish_reason == "length":
                raise cut_off(content, "Ask again (re-propose) or reject the step.")
            call = call_from_xml(content, tools)
        xml = render_call(call)
        kept = p.thinking and p.chat.keep_generation_prefix_in_history and reasoning
        raw = f"{reasoning}\n{p.reasoning.end}{xml}" if kept else xml
        action = validate_call(call, p.coordinate_scale, raw)
        before = content.split("<tool_call>", 1)[0].strip()
        return ParsedAnswer(None, before[:400] or thought_of(p, xml, reasoning), action, call), raw

    def prompt_sent(self) -> dict[str, Any] | None:
        """The last request as sent, with screenshots as `deskhand-screenshot:<digest>` references."""
        return copy.deepcopy(self._last) if self._last is not None else None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None
        self._urls.clear()
