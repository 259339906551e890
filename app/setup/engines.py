"""Which engine the settings ask for: the embedded llama.cpp one, or the user's own model server.

The API key of a server comes from DESKHAND_API_KEY (containers, `deskhand run`) or else the system keyring;
it is never written to the settings file.
"""

from __future__ import annotations

import os

from app.domain.errors import DeskhandError
from app.domain.settings import Settings
from app.engine.base import Engine

API_KEY_ENV = "DESKHAND_API_KEY"


def api_key() -> str:
    """The model server's API key: the environment first, then the keyring ("" when there is none)."""
    from app.setup.secrets import REMOTE_API_KEY, get_secret

    env = os.environ.get(API_KEY_ENV, "").strip()
    if env:
        return env
    try:
        return get_secret(REMOTE_API_KEY) or ""
    except DeskhandError:
        return ""


def engine_configured(s: Settings) -> bool:
    """Whether a run can start: model files for the embedded engine, an address for a server."""
    return bool(s.engine_url.strip()) if s.engine == "remote" else bool(s.text_model and s.mmproj)


def check_screenshots_may_leave(s: Settings) -> None:
    """Screenshots go to a host that is not this computer only after the user confirmed that host (the settings
    dialog asks when the address is saved)."""
    from app.engine.remote.endpoint import parse_endpoint

    endpoint = parse_endpoint(s.engine_url, s.engine_allow_http)
    if not endpoint.loopback and s.engine_confirmed_host != endpoint.host:
        raise DeskhandError(
            f"Screenshots of your screen would be sent to {endpoint.host}, which you have not confirmed yet.",
            "Open Settings → General and save the server address again: Deskhand asks before sending screenshots to "
            "another computer.")


def engine_from_settings(s: Settings) -> Engine:
    """The engine factory the app and the CLI use (called on the run's worker thread)."""
    from app.engine.from_settings import local_config, remote_config

    if s.engine == "remote":
        from app.engine.remote.engine import RemoteEngine

        check_screenshots_may_leave(s)
        return RemoteEngine(remote_config(s, api_key()))
    from app.engine.llama.engine import LocalEngine

    return LocalEngine(local_config(s))
