"""A real OpenAI-compatible model server on loopback: llama-cpp-python's own (`python -m llama_cpp.server`, the
`[server]` extra), serving the tiny random-weight Nemotron-shaped model with its multimodal (mtmd) handler.

Its quirks, which the remote engine must live with: it serves one request at a time; a new request interrupts a
running stream unless `interrupt_requests` is off (off here, as a fleet needs); an unknown model name silently
falls back to the first model; `response_format` of type json_schema gets a 422 (a GBNF `grammar` works).
The text model embeds a small chat template that takes OpenAI content lists (the fixture's text template does
not), so the server's MTMDChatHandler can render image parts.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.fixtures import gguf_models as gm

# The Nemotron-Nano-v2 turn layout, for string or list content (image parts become the media marker).
SERVED_TEMPLATE = """\
{%- macro text_of(content) -%}
{%- if content is string -%}{{ content }}{%- else -%}
{%- for part in content -%}{{ part['text'] if part['type'] == 'text' else '' }}{%- endfor -%}
{%- endif -%}
{%- endmacro -%}
{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{{ '<SPECIAL_10>System\\n' + text_of(message['content']).replace('/no_think', '').strip() + '\\n\\n' }}
{%- elif message['role'] == 'user' -%}
{{ '<SPECIAL_11>User\\n' + text_of(message['content']) + '\\n' }}
{%- elif message['role'] == 'assistant' -%}
{{ '<SPECIAL_11>Assistant\\n<think></think>' + text_of(message['content']) + '\\n<SPECIAL_12>\\n' }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<SPECIAL_11>Assistant\\n<think></think>' }}{%- endif -%}
"""
MODEL = "tiny-vl"
API_KEY = "test-key-0f3c"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_served_model(folder: Path) -> gm.ModelPair:
    folder.mkdir(parents=True, exist_ok=True)
    text = gm.build_text_model(folder / "text.gguf", gm.TINY.text, seed=0, chat_template=SERVED_TEMPLATE)
    return gm.ModelPair(text, gm.build_mmproj(folder / "mmproj.gguf", gm.TINY.vision, seed=1))


class LlamaServer:
    def __init__(self, folder: Path, pair: gm.ModelPair, *, api_key: str | None = API_KEY, n_ctx: int = 16384,
                 port: int | None = None) -> None:
        self.folder, self.api_key = folder, api_key
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        config = {"host": "127.0.0.1", "port": self.port, "interrupt_requests": False,
                  "models": [{"model": str(pair.text), "model_alias": MODEL, "chat_format": "mtmd",
                              "clip_model_path": str(pair.mmproj), "n_ctx": n_ctx, "n_gpu_layers": 0,
                              "n_threads": 1, "verbose": False}]}
        if api_key:
            config["api_key"] = api_key
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "server.json").write_text(json.dumps(config))
        self.log = folder / "server.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--config_file",
                                          str(folder / "server.json")], stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 90) -> None:
        end = time.monotonic() + timeout
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/models", headers=headers, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {timeout} s: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        """Gone at once, as a crashed or unplugged server."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
