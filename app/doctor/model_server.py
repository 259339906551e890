"""`deskhand doctor` for a model server: reachable, the model served, structured output supported, an image
accepted, and where the screenshots would go."""

from __future__ import annotations

import base64
import io
import time

from PIL import Image

from app.doctor.findings import FAIL, OK, SKIP, WARN, Check
from app.domain.errors import DeskhandError
from app.domain.settings import Settings
from app.engine.profile import load_profile
from app.engine.remote.client import ServerClient
from app.engine.remote.endpoint import parse_endpoint
from app.engine.remote.errors import RemoteError
from app.engine.remote.server import NEITHER_TODO, ServerInfo, detect
from app.setup.engines import api_key


def _tiny_png() -> str:
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (40, 120, 200)).save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def image_accepted(client: ServerClient, model: str) -> Check:
    body = {"model": model, "max_tokens": 1, "temperature": 0, "stream": False,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "What colour is this?"},
                                                      {"type": "image_url", "image_url": {"url": _tiny_png()}}]}]}
    try:
        client.post_json("/chat/completions", body)
    except RemoteError as exc:
        return Check("Image input", FAIL, f"the server refused a request with one screenshot: {exc.what}",
                     "Serve a vision-language model (Holotron-12B, Holo3.1) with image input enabled (vLLM: "
                     "--limit-mm-per-prompt with images > 0).")
    return Check("Image input", OK, "a request with one image was accepted")


def _structured(server: ServerInfo) -> Check:
    if server.structured is None:
        return Check("Structured output", FAIL, f"{server.describe()}: {server.how}", NEITHER_TODO)
    return Check("Structured output", OK, server.how)


def check_remote(s: Settings) -> list[Check]:
    try:
        endpoint = parse_endpoint(s.engine_url, s.engine_allow_http)
    except DeskhandError as exc:
        return [Check("Model server", FAIL, exc.what, exc.todo)]
    where = "this computer" if endpoint.loopback else endpoint.host
    out = [Check("Screenshots go to", OK if endpoint.loopback else WARN,
                 f"{where} ({'HTTPS' if endpoint.secure else 'plain HTTP'})",
                 "" if endpoint.loopback else "Only use a server you control: every screenshot is sent to it.",
                 required=False)]
    try:  # a key no header can carry, an unreadable SSL_CERT_FILE
        client = ServerClient(endpoint, api_key())
    except DeskhandError as exc:
        return [*out, Check("Model server", FAIL, exc.what, exc.todo)]
    try:
        t0 = time.perf_counter()
        try:
            server = detect(client, None, s.engine_model.strip())
        except RemoteError as exc:
            out.append(Check("Model server", FAIL, exc.what, exc.todo))
            return out
        ms = (time.perf_counter() - t0) * 1000
        out.append(Check("Model server", OK, f"{server.describe()} at {endpoint.base_url} (answered in {ms:.0f} ms)"))
        names = [m.id for m in server.models]
        model = s.engine_model.strip() or (names[0] if len(names) == 1 else "")
        served = server.model(model)
        if served is None:
            which = f"“{s.engine_model}” is not served" if s.engine_model.strip() else "no model name is set"
            out.append(Check("Served model", FAIL, f"{which}; the server serves: {', '.join(names) or 'nothing'}",
                             "Set the served model name in Settings → General (--served-model for `deskhand run`)."))
            out.append(Check("Image input", SKIP, "not tried: no model"))
        else:
            length = f", context {served.max_model_len:,} tokens" if served.max_model_len else ""
            out.append(Check("Served model", OK, f"{served.id}{length} (profile {load_profile(s.profile).name})"))
            out.append(image_accepted(client, served.id))
        out.append(_structured(server))
    finally:
        client.close()
    return out
