"""The remote engine against a real OpenAI-compatible server on loopback: llama-cpp-python's own server
(`llama_cpp.server`) serving the tiny random-weight model with its multimodal handler."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError, EngineUnavailable
from app.domain.proposal import PastStep
from app.engine.profile import load_profile
from app.engine.remote.client import ClientOptions
from app.engine.remote.endpoint import parse_endpoint
from app.engine.remote.engine import RemoteEngine, RemoteEngineConfig
from app.engine.remote.errors import RemoteError
from app.engine.remote.prompt import IMAGE_REF
from tests.desktop import REPO
from tests.engine_helpers import screenshot
from tests.llama_server import API_KEY, MODEL, free_port
from tests.remote_helpers import tool_profile

pytestmark = pytest.mark.model
FAST = ClientOptions(connect_timeout_s=2, read_timeout_s=30, retries=2, backoff_s=0.05)


def engine(url: str, profile: Path, **kw) -> RemoteEngine:
    cfg = dict(url=url, api_key=API_KEY, profile=str(profile), max_tokens=400, client=FAST)
    cfg.update(kw)
    return RemoteEngine(RemoteEngineConfig(**cfg))


def test_several_steps_are_valid_by_construction_and_the_prompt_follows_the_profile(llama_server, tmp_path):
    prof = tool_profile(tmp_path, ("click", "scroll", "answer"), budget=2)
    e = engine(llama_server.url, prof)
    info = e.load(None, CancelToken())
    assert info.name == MODEL and "llama-cpp-python" in info.device and not info.warnings
    assert e.server is not None and e.server.structured == "grammar"  # json_schema would be a 422 there
    history: list[PastStep] = []
    streamed: list[str] = []
    profile = load_profile(prof)
    for i in range(3):
        obs = screenshot(i, (800, 600), feedback="Done." if i else "")
        p = e.propose("Open the settings", obs, history, CancelToken(), streamed.append)
        # valid by construction: the exact layout of the profile's schema, tools from the profile, in bounds
        data = json.loads(p.raw)
        assert list(data) == ["note", "thought", "tool_call"] and p.action.tool_name in profile.tool_names
        assert "".join(streamed[-len(streamed):]).endswith(p.raw[-10:])
        history.append(PastStep(obs, p.raw))
    assert "".join(streamed).replace("}{", "}\n{").count("\n") == 2  # three answers streamed in pieces
    sent = e.prompt_sent()
    assert sent is not None and sent["model"] == MODEL and sent["stream"] is True and "grammar" in sent
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert sent["messages"][2]["content"] == history[0].answer  # past answers as sent back
    users = [m["content"] for m in sent["messages"] if m["role"] == "user"]
    # the image budget (2): the oldest screenshot became the profile's placeholder
    assert isinstance(users[0], str) and profile.placeholder in users[0] and "<task>" in users[0]
    for content, obs_i in ((users[1], 1), (users[2], 2)):
        urls = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
        assert urls == [IMAGE_REF + screenshot(obs_i, (800, 600)).digest]
    assert "<feedback>Done.</feedback>" in users[2][0]["text"]
    e.close()


def test_cancel_mid_stream_stops_at_once_and_closes_the_connection(llama_server, tmp_path):
    data = json.loads(tool_profile(tmp_path, ("click",), chars=300).read_text())
    data["output"]["tools"][0]["properties"]["element"]["maxLength"] = 300
    long_answer = tmp_path / "long.json"
    long_answer.write_text(json.dumps(data))
    e = engine(llama_server.url, long_answer, max_tokens=1200)
    e.load(None, CancelToken())
    token, pieces, cancelled_at = CancelToken(), [], []

    def on_text(text: str) -> None:
        pieces.append(text)
        if len(pieces) == 3:
            token.cancel("stopped by you")
            cancelled_at.append(time.monotonic())

    with pytest.raises(Cancelled):
        e.propose("Open the settings", screenshot(1, (800, 600)), [], token, on_text)
    took = time.monotonic() - cancelled_at[0]
    assert took < 1.0, f"the stream went on for {took:.2f} s after Stop"
    assert len("".join(pieces)) < 200  # far from the ~900 characters the full answer has
    port = f"{llama_server.port:04X}"
    established = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    assert not [f for f in established if f[2].endswith(":" + port) and f[3] == "01"], "the stream is still open"
    e.close()


def test_a_wrong_or_missing_key_and_an_unserved_model_are_said_plainly(llama_server, tmp_path):
    prof = tool_profile(tmp_path)
    with pytest.raises(RemoteError) as wrong:
        engine(llama_server.url, prof, api_key="not-the-key").load(None, CancelToken())
    assert wrong.value.kind == "auth" and "refused the API key (401 Unauthorized)" in wrong.value.what
    with pytest.raises(RemoteError) as missing:
        engine(llama_server.url, prof, api_key="").load(None, CancelToken())
    assert "needs an API key (401 Unauthorized)" in missing.value.what and "keyring" not in missing.value.what
    # llama-cpp-python would silently answer with its default model: the engine checks the list first
    with pytest.raises(RemoteError) as model:
        engine(llama_server.url, prof, model="Hcompany/Holotron-12B").load(None, CancelToken())
    assert model.value.kind == "model" and "does not serve the model “Hcompany/Holotron-12B”" in model.value.what
    assert MODEL in model.value.todo


def test_an_unreachable_server_is_retried_then_reported(tmp_path):
    port = free_port()  # nothing listens there
    e = engine(f"http://127.0.0.1:{port}/v1", tool_profile(tmp_path))
    t0 = time.monotonic()
    with pytest.raises(EngineUnavailable) as err:
        e.load(None, CancelToken())
    assert isinstance(err.value, RemoteError) and err.value.kind == "unreachable"
    assert f"cannot reach the model server at http://127.0.0.1:{port}/v1 (connection refused" in err.value.what
    assert "(tried 3 times)" in err.value.what and time.monotonic() - t0 < 5


class _TLS(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"data": []}')

    def log_message(self, *a: object) -> None:
        pass


def _self_signed(folder: Path) -> tuple[Path, Path]:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    return folder / "cert.pem", folder / "key.pem"


def test_tls_problems_are_named(llama_server, tmp_path):
    cert, key = _self_signed(tmp_path)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _TLS)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with pytest.raises(RemoteError) as bad_cert:
            engine(f"https://127.0.0.1:{srv.server_address[1]}/v1", tool_profile(tmp_path)).load(None, CancelToken())
        assert bad_cert.value.kind == "tls" and "certificate could not be verified" in bad_cert.value.what
        assert "SSL_CERT_FILE" in bad_cert.value.todo
    finally:
        srv.shutdown()
        srv.server_close()
    with pytest.raises(RemoteError) as plain:  # https:// to a server that speaks plain HTTP
        engine(f"https://127.0.0.1:{llama_server.port}/v1", tool_profile(tmp_path)).load(None, CancelToken())
    assert plain.value.kind == "tls" and "does not speak HTTPS" in plain.value.what


def test_https_is_the_default_for_other_hosts_and_plain_http_there_is_refused():
    assert parse_endpoint("127.0.0.1:8000").base_url == "http://127.0.0.1:8000/v1"
    assert parse_endpoint("localhost:8000/v1/").loopback
    assert parse_endpoint("gpu-box.example:8000").base_url == "https://gpu-box.example:8000/v1"
    with pytest.raises(DeskhandError) as refused:
        parse_endpoint("http://10.0.0.7:8000/v1")
    assert "unencrypted" in refused.value.what and "--allow-http" in refused.value.todo
    allowed = parse_endpoint("http://10.0.0.7:8000/v1", allow_http=True)
    assert not allowed.loopback and not allowed.secure and allowed.server_root == "http://10.0.0.7:8000"


def test_doctor_checks_the_model_server(llama_server, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    env.update(DESKHAND_HOME=str(tmp_path / "home"), DESKHAND_API_KEY=API_KEY, PYTHONIOENCODING="utf-8")

    def doctor(*args: str) -> dict[str, dict]:
        out = subprocess.run([sys.executable, "-m", "app", "doctor", "--json", "--engine", llama_server.url, *args],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        return {c["name"]: c for c in json.loads(out.stdout)["checks"]}

    checks = doctor()
    assert checks["Screenshots go to"]["status"] == "ok" and "this computer" in checks["Screenshots go to"]["detail"]
    assert checks["Model server"]["status"] == "ok" and "llama-cpp-python" in checks["Model server"]["detail"]
    assert checks["Served model"]["status"] == "ok" and checks["Served model"]["detail"].startswith(MODEL)
    assert checks["Image input"]["status"] == "ok"
    assert checks["Structured output"]["status"] == "ok" and "GBNF" in checks["Structured output"]["detail"]
    assert "Model files" not in checks  # the embedded engine's files do not matter here
    wrong = doctor("--served-model", "Hcompany/Holotron-12B")
    assert wrong["Served model"]["status"] == "fail" and MODEL in wrong["Served model"]["detail"]
    env["DESKHAND_API_KEY"] = "wrong"
    denied = doctor()
    assert denied["Model server"]["status"] == "fail" and "refused the API key" in denied["Model server"]["detail"]
