"""Issue 25, items 8 and 12: the stream parser does not trust the server. Events of the wrong shape, text that is
not text, usage that is not numbers and deeply nested JSON are named errors (not internal ones); an answer far
longer than max_tokens allows is cut where max_tokens would have cut it; a stream that ends without a finish
reason is a broken connection, retried only while nothing was delivered. A real loopback HTTP server that
speaks vLLM's SSE (tests/fake_vllm.py) and the real client."""

from __future__ import annotations

import pytest

from app.domain.cancel import CancelToken
from app.engine.remote.client import ClientOptions, ServerClient
from app.engine.remote.endpoint import parse_endpoint
from app.engine.remote.errors import RemoteError, RemoteUnavailable
from tests.fake_vllm import FakeVLLM


class Cut(list):
    """Chunks sent until the server process's connection drops: no finish reason, no [DONE]."""

    def __iter__(self):
        yield from list.__iter__(self)
        raise ConnectionAbortedError("the server went away")  # ends the handler: the socket is closed


def _chat(server: FakeVLLM, max_tokens: int = 64):
    client = ServerClient(parse_endpoint(server.url), options=ClientOptions(backoff_s=0.01, backoff_cap_s=0.01))
    got: list[str] = []
    try:
        result = client.chat({"model": server.model, "messages": [{"role": "user", "content": "hi"}],
                              "max_tokens": max_tokens, "stream": True}, CancelToken(), lambda k, t: got.append(t))
    finally:
        client.close()
    return result, "".join(got)


def _replying(*payloads):
    server = FakeVLLM()
    server.replies = [lambda body, p=p: (200, p(server) if callable(p) else p, {}) for p in payloads]
    return server


@pytest.mark.parametrize(("payload", "said"), [
    (lambda s: [[1, 2, 3]], "an event that is not a chat.completion.chunk object"),
    (lambda s: [{"choices": "all of them"}], "an event that is not a chat.completion.chunk object"),
    (lambda s: [s.chunk({"content": 5})], "content that is not text (int)"),
    (lambda s: [s.chunk({"reasoning": {"deep": True}})], "reasoning that is not text (dict)"),
    (lambda s: [s.chunk("not an object")], "a “delta” that is not an object"),
])
def test_an_event_of_the_wrong_shape_is_a_named_error(payload, said):
    with _replying(payload) as server, pytest.raises(RemoteError) as err:
        _chat(server)
    assert said in err.value.what and err.value.kind == "request"


def test_deeply_nested_json_in_an_event_is_a_named_error():
    with _replying(["[" * 100_000 + "]" * 100_000]) as server, pytest.raises(RemoteError) as err:
        _chat(server)
    assert "nested too deeply" in err.value.what


def test_usage_that_is_not_numbers_is_left_out():
    def payload(s):
        chunks = s.chunks("hello")
        chunks[-1]["usage"] = {"prompt_tokens": "many", "completion_tokens": [1], "total_tokens": 7}
        return chunks

    with _replying(payload) as server:
        result, text = _chat(server)
    assert text == result.content == "hello" and result.usage == {"total_tokens": 7}


def test_an_answer_far_longer_than_max_tokens_is_cut_where_max_tokens_would_have_cut_it():
    piece = "x" * 65_536

    def payload(s):  # 8 MiB of content for max_tokens=100
        return [s.chunk({"content": piece}) for _ in range(128)] + [s.chunk({}, "stop")]

    with _replying(payload) as server:
        result, text = _chat(server, max_tokens=100)
    assert result.finish_reason == "length" and text == result.content == "x" * 3200


@pytest.mark.parametrize("kind", ["reasoning", "content"])
def test_long_reasoning_is_cut_too(kind):
    with _replying(lambda s: [s.chunk({kind: "y" * 100_000}), s.chunk({}, "stop")]) as server:
        result, _ = _chat(server, max_tokens=10)
    assert result.finish_reason == "length" and len(getattr(result, kind)) == 320


def test_a_stream_cut_after_text_was_delivered_is_a_broken_connection_and_not_retried():
    with _replying(lambda s: Cut(s.chunks("half an ans")[:2]), lambda s: s.chunks("the whole answer")) as server:
        with pytest.raises(RemoteUnavailable) as err:
            _chat(server)
        assert len(server.chats) == 1  # a retry would deliver the beginning twice
    assert "broke in the middle" in err.value.what and err.value.kind == "lost"


def test_a_stream_cut_before_any_text_is_retried():
    with _replying(lambda s: Cut(s.chunks("")[:1]), lambda s: s.chunks("the whole answer")) as server:
        result, text = _chat(server)
        assert len(server.chats) == 2
    assert text == result.content == "the whole answer" and result.finish_reason == "stop"


def test_the_status_bar_names_the_model_server_not_the_cpu(tmp_path):
    """Item 9: with a remote engine the status bar said "On the CPU (slow)"."""
    from app.engine.remote.engine import RemoteEngine, RemoteEngineConfig
    from app.ui.run.view import device_words
    from tests.remote_helpers import tool_profile

    with FakeVLLM() as server:
        engine = RemoteEngine(RemoteEngineConfig(server.url, profile=str(tool_profile(tmp_path, ("click",)))))
        try:
            info = engine.load(None, CancelToken())
        finally:
            engine.close()
    assert device_words(info.device, info.gpu_offload) == "On 127.0.0.1 (vLLM 0.34.0)", info.device


class _ResetMidAnswer:
    """A loopback server that streams part of an answer as HTTP chunks, then drops the connection in the middle of
    the body (no last chunk): the client sees a broken connection (an httpx error), not a clean end. Every request
    after the first is answered whole, so a retry would deliver the beginning twice."""

    def __init__(self) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests = 0
        outer = self

        def events(text: str) -> list[dict]:
            pieces = [text[i:i + 16] for i in range(0, len(text), 16)]
            return [{"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                     "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                first = outer.requests == 1
                sent = events("half an answer, then the cable is cut")[:2] if first else events("whole")
                for event in sent:
                    data = f"data: {json.dumps(event)}\n\n".encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                if outer.requests > 1:
                    self.wfile.write(b"0\r\n\r\n")
                self.close_connection = True  # the first: closed mid-body, without the last chunk

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _ResetMidAnswer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_connection_broken_mid_answer_after_text_was_delivered_is_not_retried():
    """The mutation audit: a transport error (not a clean end) after text was delivered was retried, so the
    beginning of the answer arrived twice. Only the clean cut had a test."""
    with _ResetMidAnswer() as server:
        client = ServerClient(parse_endpoint(server.url), options=ClientOptions(backoff_s=0.01, backoff_cap_s=0.01))
        got: list[str] = []
        try:
            with pytest.raises(RemoteUnavailable) as err:
                client.chat({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64,
                             "stream": True}, CancelToken(), lambda k, t: got.append(t))
        finally:
            client.close()
        assert server.requests == 1, "retried after text was delivered"
    assert "".join(got) == "half an answer, then the cable i" and err.value.kind == "lost", (got, err.value)
    assert "broke in the middle of the answer" in err.value.what
