"""Engine configurations from the user's settings (the embedded engine, or a model server of theirs)."""

from __future__ import annotations

from app.domain.settings import Settings
from app.engine.llama.engine import LocalEngineConfig
from app.engine.remote.engine import RemoteEngineConfig


def local_config(s: Settings) -> LocalEngineConfig:
    return LocalEngineConfig(text_model=s.text_model, mmproj=s.mmproj, profile=s.profile, n_gpu_layers=s.gpu_layers,
                             n_ctx=s.context_size, max_tiles=s.tile_budget)


def remote_config(s: Settings, api_key: str = "") -> RemoteEngineConfig:
    return RemoteEngineConfig(url=s.engine_url, model=s.engine_model.strip(), api_key=api_key, profile=s.profile,
                              max_tiles=s.tile_budget, allow_http=s.engine_allow_http)
