"""Re-runs the 2026-12-06 report's rows B1 (MP*, MC*, MCF*) and B2 (HT*) against the shipped command, `python -m
app mcp` from this checkout, with no display: one line per row, what the command answered now. From the
repository root: `PYTHONPATH=$PWD python docs/hardening-2026-12-06/mcp_rerun.py`. The rows that need a display,
the app or signals are the tests named in mcp.md."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.mcp_raw import RawServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WORK = Path(tempfile.mkdtemp(prefix="mcp-rerun-"))
HOME = WORK / "home"


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    e.update({"DESKHAND_HOME": str(HOME), "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
              "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring", "HOME": str(WORK / "user"), **extra})
    return e


def cli(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=WORK, env=env(**extra), capture_output=True,
                          text=True, timeout=180)


def say(row: str, text: str) -> None:
    print(f"{row}\t{' '.join(str(text).split())[:230]}", flush=True)


def brief(msg: dict | None) -> str:
    if msg is None:
        return "(no answer: the server ended)"
    if "error" in msg:
        return f"id {msg.get('id')!r}: {msg['error']['code']} {msg['error']['message']}"
    result = msg.get("result", {})
    content = result.get("content") or [{}]
    return f"id {msg.get('id')!r}: result " + (content[0].get("text", "") if content else json.dumps(result)[:150])


def call(s: RawServer, ident: object, name: str, arguments: object) -> dict:
    return s.request(ident, "tools/call", {"name": name, "arguments": arguments})


def b1() -> None:
    s = RawServer(env(), "--headless", log=WORK / "b1.log")
    say("MP5", brief(s.request("early", "tools/list")))
    say("MP5b", brief(s.request("early2", "tools/call", {"name": "status", "arguments": {}})))
    for row, line in (("MP1", b"{garbage\n"), ("MP2", b"[]\n"), ("MP2b", b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n'),
                      ("MP3", b"42\n"), ("MP3b", b'"str"\n'), ("MP4", b"null\n"), ("MP4b", b"{}\n"),
                      ("MP4c", b'{"jsonrpc":"1.0","id":9,"method":"ping"}\n')):
        s.send(line)
        say(row, brief(s.next(60)))
    init = s.request("i", "initialize", {"protocolVersion": "1999-01-01", "capabilities": {},
                                          "clientInfo": {"name": "rerun-host", "version": "1"}})
    say("MP6", f"negotiated {init['result']['protocolVersion']}")
    s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    say("MP6b", brief(s.request("i2", "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                     "clientInfo": {"name": "rerun-host", "version": "1"}})))
    say("MP7", brief(s.request(7, "no/such")))
    say("MP8", brief(s.request(8, "tools/call", "status")))
    say("MP9", brief(s.request(9, "tools/call", {"arguments": {}})))
    say("MP9b", brief(s.request(91, "tools/call", {"name": 5})))
    say("MP11", brief(s.request(11, "tools/call", {"name": "status", "arguments": ["x"]})))
    say("MP10", brief(call(s, 10, "click_everything", {})))
    say("MP10b", brief(call(s, 101, "status ", {})))
    say("MP11b", brief(s.request(111, "tools/call", {"name": "run_task", "arguments": None})))
    for row, args in (("MP12a", {"task": "x", "max_steps": 0}), ("MP12b", {"task": "x", "max_steps": 201}),
                      ("MP12c", {"task": "x", "max_steps": True}), ("MP12d", {"task": "x", "max_steps": 1.5}),
                      ("MP12e", {"task": "x", "max_steps": "3"}), ("MP12f", {"task": "x", "max_steps": 10 ** 30}),
                      ("MP12g", {"task": "x", "auto_approve": "all"}), ("MP12h", {"task": "   "}),
                      ("MP12i", {"task": "x", "extra": 1}), ("MP12j", {"task": 5})):
        say(row, brief(call(s, row, "run_task", args)))
    for row, args in (("MP13a", {"monitor": 0}), ("MP13b", {"monitor": -1}), ("MP13c", {"monitor": "1"})):
        say(row, brief(call(s, row, "screenshot", args)))
    for row, args in (("MP14a", {"run_id": 0}), ("MP14b", {"run_id": 2 ** 70}), ("MP14c", {"run_id": 999999}),
                      ("MP14d", {"run_id": 1, "screenshots": "yes"})):
        say(row, brief(call(s, row, "run", args)))
    for row, ident in (("MP15", None), ("MP16", {"a": 1})):
        s.send({"jsonrpc": "2.0", "id": ident, "method": "tools/list"})
        say(row, brief(s.next(60)))
    say("MP17", brief(s.request(2 ** 100, "ping")))
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}})
    say("MP18", "cancel for an unknown id: " + brief(s.request(18, "ping")))
    say("MP19", brief(call(s, 19, "run_task", {"task": "x" * (1 << 20)})))
    t0 = time.monotonic()
    s.send(b'{"jsonrpc":"2.0","id":20,"method":"ping","params":{"x":"' + b"a" * (50 << 20) + b'"}}\n')
    say("MP20", f"{brief(s.next(120))} ({time.monotonic() - t0:.1f} s)")
    s.send(b'{"jsonrpc":"2.0","id":21,"method":"ping","x":"\xff\xfe"}\n')
    say("MP21", brief(s.next(60)))
    s.send(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    say("MP22", brief(s.next(60)))
    s.send(b'{"jsonrpc":"2.0","id":23,"method":"ping","x":"a\\u0000b"}\n')
    say("MP23", brief(s.next(60)))
    s.send({"jsonrpc": "2.0", "id": 24, "method": "ping"})
    s.send({"jsonrpc": "2.0", "id": 24, "method": "ping"})
    say("MP24", brief(s.next(60)) + " / " + brief(s.next(60)))
    say("MP25", brief(call(s, 25, "status", {})) + " / " + brief(call(s, 251, "stop", {})))
    say("MC1", brief(call(s, "mc1", "screenshot", {})))
    say("MP27", f"stdin closed: exit status {s.close()}")

    def host_call(host: str, tool: str = "status", headless: bool = True) -> str:
        h = RawServer(env(), *(["--headless"] if headless else []), log=WORK / f"{host}.log")
        try:
            h.initialize(host)
            return brief(call(h, 1, tool, {}))
        finally:
            h.close()

    cli("mcp", "allow", "partial-host", "--tools", "status")
    say("MC2", host_call("partial-host", "screenshot"))
    config = HOME / "config" / "mcp-hosts.json"
    hosts = json.loads(config.read_text())
    hosts["hosts"]["denied-host"] = {"tools": [], "denied": True, "granted_at": 1.0}
    config.write_text(json.dumps(hosts))
    say("MC3", host_call("denied-host"))
    say("MC4", host_call("gui-host", headless=False))
    saved = config.read_text()
    config.write_text("garbage{")
    say("MC5", host_call("partial-host"))
    config.write_text(json.dumps({"hosts": ["partial-host"]}))
    say("MC10", host_call("partial-host"))
    for row, entry in (("MC6", {"tools": None, "granted_at": 1}), ("MC7", {"tools": ["status"], "granted_at": "abc"}),
                       ("MC8", {"tools": "status", "granted_at": 1}),
                       ("MC9", {"tools": ["status"], "denied": "yes", "granted_at": 1})):
        config.write_text(json.dumps({"hosts": {"rel-host": entry}}))
        listed = cli("mcp", "hosts")
        say(row, f"host: {host_call('rel-host')} | mcp hosts rc {listed.returncode}: {listed.stdout.strip()}"
                 f"{' TRACEBACK' if 'Traceback' in listed.stderr else ''}")
    config.write_text(saved)
    for row, args in (("MC11", ["allow", ""]), ("MC12", ["allow", "h", "--tools", "bogus"]),
                      ("MC13", ["allow", "h", "--tools", ""]), ("MC14", ["allow", "h", "--tools", ","]),
                      ("MC15", ["forget", "never-there"])):
        r = cli("mcp", *args)
        say(row, f"rc {r.returncode}: {(r.stdout + r.stderr).strip()}")
    r = cli("mcp", "allow", "\x1b]0;PWNED\x07\x1b[2Jevil")
    listed = cli("mcp", "hosts")
    say("MC16", f"allow rc {r.returncode}, ESC in output: {chr(27) in r.stdout + listed.stdout}; "
                f"{r.stdout.strip()[:120]}")
    r = cli("mcp", "allow", "x" * 100_000, "--tools", "status")
    stored = json.loads(config.read_text())["hosts"]
    say("MC18", f"rc {r.returncode}; longest stored name: {max(len(h) for h in stored)} characters")
    r = cli("mcp", "token")
    say("MC20", f"rc {r.returncode}: {r.stderr.strip()}")
    for row, port in (("MC21", "99999"), ("MC22", "-1"), ("MC23", "abc")):
        r = cli("mcp", "--http", "--port", port)
        say(row, f"rc {r.returncode}: {r.stderr.strip().splitlines()[-1]}")
    r = cli("mcp", "--http", "--host", "0.0.0.0")
    say("MC24", f"rc {r.returncode}: {r.stderr.strip().splitlines()[-1]}")


def mcf() -> None:
    user, project = WORK / "user", WORK
    (user / ".cursor").mkdir(parents=True, exist_ok=True)
    (user / ".codex").mkdir(parents=True, exist_ok=True)

    def write(host: str) -> str:
        r = cli("mcp", "config", "--host", host, "--write")
        return f"rc {r.returncode}: {(r.stdout + r.stderr).strip()}"

    (user / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "o"}}}))
    say("MCF1", write("cursor"))
    (project / "opencode.json").write_text("{not json")
    say("MCF2", write("opencode"))
    (project / ".mcp.json").mkdir(exist_ok=True)
    say("MCF3", write("claude-code"))
    (user / ".cursor" / "mcp.json").write_text("[1, 2]")
    say("MCF4", write("cursor"))
    (user / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": ["other"]}))
    say("MCF5", write("cursor"))
    (user / ".codex" / "config.toml").write_text('[mcp_servers.deskhand]\ncommand = "x"\n')
    say("MCF6", write("codex"))
    (user / ".codex" / "config.toml").write_text('model = "o4\n[broken\n')
    say("MCF7", write("codex"))


def b2() -> None:
    e = env(PYTHON_KEYRING_BACKEND="tests.file_keyring.FileKeyring", DESKHAND_TEST_KEYRING=str(WORK / "keyring.json"))
    proc = subprocess.Popen([sys.executable, "-m", "app", "mcp", "--http", "--port", "0"], cwd=WORK, env=e,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "listening on" in line:
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    ready.wait(120)
    said = "".join(lines)
    url, port = re.search(r"listening on (http://127\.0\.0\.1:(\d+)/mcp)", said).groups()  # type: ignore[union-attr]
    token = re.search(r"printed only this once\): (\S+)", said)[1]  # type: ignore[index]
    say("HT0", f"token printed once on stderr; {url}")
    rows = [r.split() for r in Path("/proc/net/tcp").read_text().splitlines()[1:] + Path(
        "/proc/net/tcp6").read_text().splitlines()[1:]]
    say("HT1", "listening: " + ", ".join(r[1] for r in rows if r[3] == "0A" and int(r[1].rsplit(":", 1)[1], 16)
                                         == int(port)))
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
                                                                         "capabilities": {},
                                                                         "clientInfo": {"name": "h", "version": "1"}}}
    accept = "application/json, text/event-stream"

    def post(auth: str | None, **headers: str) -> str:
        h = {"Accept": accept, **headers}
        if auth is not None:
            h["Authorization"] = auth
        r = httpx2.post(url, json=init, headers=h, timeout=60)
        return f"{r.status_code} {r.text[:100]}"

    say("HT2", post(None))
    say("HT3a", post("Bearer " + "x" * len(token)))
    say("HT3b", post("Bearer short"))
    say("HT4", post(f"bearer {token}"))
    say("HT5", post(f"Bearer {token}", Host="evil.example"))
    say("HT6", post(f"Bearer {token}", Origin="http://evil.example"))
    say("HT6b", post(f"Bearer {token}", Origin="null"))
    say("HT7", post(f"Bearer {token}", Host=f"localhost:{port}"))
    r = httpx2.options(url, headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    say("HT8", f"{r.status_code}; CORS headers: {[k for k in r.headers if k.lower().startswith('access-control')]}")
    say("HT9", f"{httpx2.get(url, headers={'Authorization': f'Bearer {token}', 'Accept': accept}).status_code}")
    say("HT10", f"{httpx2.post(url.replace('/mcp', '/other'), headers={'Authorization': f'Bearer {token}'}).status_code}")
    say("HT12", post(f"Bearer {token}"))
    say("HT13", post(f"Bearer {token}", **{"mcp-session-id": "made-up"}))
    big = b"x" * (60 << 20)
    say("HT14", f"{httpx2.post(url, content=big, timeout=120).status_code}")
    say("HT15", f"{httpx2.post(url, content=big, headers={'Authorization': f'Bearer {token}'}, timeout=120).status_code}")
    say("HT16", f"{httpx2.post(url, content=b'{bad', headers={'Authorization': f'Bearer {token}', 'Accept': accept, 'Content-Type': 'application/json'}).text[:120]}")
    second = subprocess.run([sys.executable, "-m", "app", "mcp", "--http", "--port", port], cwd=WORK, env=e,
                            capture_output=True, text=True, timeout=120)
    say("HT19", f"rc {second.returncode}: {second.stderr.strip().splitlines()[-1]}")
    new = subprocess.run([sys.executable, "-m", "app", "mcp", "token", "--new"], cwd=WORK, env=e, capture_output=True,
                         text=True, timeout=120).stdout.strip()
    say("HT18", f"old token: {post(f'Bearer {token}')[:3]}; new token: {post(f'Bearer {new}')[:3]}")
    t0 = time.monotonic()
    proc.terminate()
    proc.wait(60)
    say("HT21", f"SIGTERM while idle: exit status {proc.returncode} in {time.monotonic() - t0:.1f} s")
    say("HT22", f"the token in the log: {''.join(lines).count(token)} time(s)")


if __name__ == "__main__":
    print(f"# rerun in {WORK}, code from {ROOT}")
    parts = sys.argv[1:] or ["b1", "mcf", "b2"]
    for part in parts:
        {"b1": b1, "mcf": mcf, "b2": b2}[part]()
