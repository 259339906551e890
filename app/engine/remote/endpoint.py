"""The address of a model server: normalised, with HTTPS by default for every host that is not this computer."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from app.domain.errors import DeskhandError

ADDRESS_TODO = "Write it like http://127.0.0.1:8000/v1 (this computer) or https://gpu-server.example:8000/v1."


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # the OpenAI API root, e.g. "https://gpu.example:8000/v1"
    host: str
    loopback: bool  # the server runs on this computer: screenshots do not leave it

    @property
    def server_root(self) -> str:
        """The server's own root (vLLM's /version and /health live there, not under /v1)."""
        parts = urlsplit(self.base_url)
        path = parts.path[: -len("/v1")] if parts.path.endswith("/v1") else parts.path
        return urlunsplit((parts.scheme, parts.netloc, path, "", ""))

    @property
    def secure(self) -> bool:
        return self.base_url.startswith("https://")


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_endpoint(url: str, allow_http: bool = False) -> Endpoint:
    """`url` as typed by the user. Without a scheme, loopback hosts get http:// and every other host https://;
    an explicit http:// to another host is refused unless `allow_http` (screenshots would travel in clear)."""
    text = url.strip()
    if not text:
        raise DeskhandError("No model server address is set.", ADDRESS_TODO)
    _refuse_control_characters(text)
    if "@" in text.partition("://")[2 if "://" in text else 0].split("/", 1)[0]:  # user:password@host
        # refused, not stored: settings, records and logs keep the address in clear (and it is not echoed here)
        raise DeskhandError("The model server address holds a user name or password (“…@host”); Deskhand "
                            "does not keep passwords in addresses.",
                            "Remove the part before “@”, and put the server's key in the API key field (kept in "
                            "the system keyring) or DESKHAND_API_KEY.")
    if "://" not in text:
        host_guess = urlsplit("//" + text).hostname or ""
        text = ("http://" if is_loopback(host_guess) else "https://") + text
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError as exc:
        raise DeskhandError(f"The model server address “{url}” is not valid ({exc}).", ADDRESS_TODO) from None
    if parts.scheme not in ("http", "https") or not host:
        raise DeskhandError(f"The model server address “{url}” is not an http(s) address.", ADDRESS_TODO)
    loopback = is_loopback(host)
    if parts.scheme == "http" and not loopback and not allow_http:
        raise DeskhandError(
            f"The model server {host} is not on this computer, and “{url}” is plain HTTP: your screenshots "
            "(and the API key) would cross the network unencrypted.",
            "Use https:// (put the server behind TLS), or allow plain HTTP explicitly (Settings → General, or "
            "--allow-http) if the network in between is yours alone.")
    path = parts.path.rstrip("/") or "/v1"
    return Endpoint(urlunsplit((parts.scheme, parts.netloc, path, "", "")), host, loopback)


def _refuse_control_characters(text: str) -> None:
    """A line break or other control character inside an address would be dropped or joined by the URL parser
    (`…/v1` CR LF `X-Evil: 1` became `…/v1X-Evil: 1`): a server other than the one meant, or a header smuggled in."""
    for i, ch in enumerate(text):
        code = ord(ch)
        if code < 32 or 127 <= code < 160 or ch in "\u2028\u2029":
            kind = ("a line break" if ch in "\r\n\u2028\u2029" else "a tab" if ch == "\t" else
                    f"a control character (U+{code:04X})")
            raise DeskhandError(f"The model server address has {kind} at character {i + 1} of {len(text)}; an "
                                "address is one line of printable characters.",
                                "Type or paste the address again, in one piece. " + ADDRESS_TODO)


def clean_api_key(key: str) -> str:
    """The key without the spaces and line break around it; refused, without showing it, when it holds a character
    no HTTP header may (a line break inside, a space, a non-ASCII letter): it would end up in an error message."""
    text = key.strip()
    for i, ch in enumerate(text):
        if not 33 <= ord(ch) <= 126:
            kind = ("a line break" if ch in "\r\n" else "a space" if ch.isspace() else
                    "a control character" if ord(ch) < 32 or ord(ch) == 127 else "a non-ASCII character")
            raise DeskhandError(f"The API key has {kind} at character {i + 1} of {len(text)}; no server accepts "
                                "such a key.", "Copy the key again, in one piece, into Settings → General (or "
                                "DESKHAND_API_KEY).")
    return text
