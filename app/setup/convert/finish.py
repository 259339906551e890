"""The end of a conversion: the projector's normalisation made right, the pair proven to work and registered, and
what is no longer needed deleted."""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from app.domain.cancel import CancelToken
from app.domain.errors import ProposalError
from app.domain.paths import Paths
from app.domain.settings import Settings
from app.domain.units import human_bytes
from app.engine.gguf.edit import set_float_array
from app.engine.gguf.header import read_gguf
from app.setup.convert.registry import ConvertedModel, register_converted
from app.setup.flow import Checked, check_pair, finish_setup
from app.setup.gpu import GPUReport
from app.setup.sample_screen import synthetic_screenshot

VERIFY_TASK = "Click the Save button"


def fix_normalisation(mmproj: Path, mean: tuple[float, ...], std: tuple[float, ...]) -> str:
    """Make the mmproj's clip.vision.image_mean/std the checkpoint's own (in place); "" if they already were,
    else what was changed."""
    info = read_gguf(mmproj, "mmproj")
    got = (info.get("clip.vision.image_mean"), info.get("clip.vision.image_std"))
    if _close(got[0], mean) and _close(got[1], std):
        return ""
    set_float_array(mmproj, "clip.vision.image_mean", mean)
    set_float_array(mmproj, "clip.vision.image_std", std)
    return f"mean {got[0]} / std {got[1]} → {list(mean)} / {list(std)}"


def _close(a: object, b: tuple[float, ...]) -> bool:
    return isinstance(a, list) and len(a) == len(b) and all(abs(float(x) - y) < 1e-4 for x, y in zip(a, b, strict=True))


def verify_pair(text: Path, mmproj: Path, profile: str, token: CancelToken,
                say: Callable[[str], None]) -> tuple[Checked, str]:
    """The engine's file checks, a load through llama.cpp, and one proposal on the built-in screenshot through the
    incremental session (one tile, so it stays quick on a CPU); returns what the model proposed, in words.
    Raises ModelFileError / ModelLoadError / ProposalError (with the raw answer) when the pair does not work."""
    from app.domain.proposal import Observation
    from app.engine.llama.engine import LocalEngine, LocalEngineConfig

    say("checking the files")
    checked = check_pair(text, mmproj)
    engine = LocalEngine(LocalEngineConfig(text_model=str(text), mmproj=str(mmproj), profile=profile, n_ctx=8192,
                                           max_tiles=1))
    try:
        t0 = time.perf_counter()
        say("loading the model")
        info = engine.load(None, token)
        say(f"loaded on {info.device} in {time.perf_counter() - t0:.1f} s; asking for one step")
        img = synthetic_screenshot()
        digest = hashlib.blake2b(img.tobytes(), digest_size=16).hexdigest()
        t1 = time.perf_counter()
        try:
            prop = engine.propose(VERIFY_TASK, Observation(img, digest), [], token)
        except ProposalError as exc:
            exc.what = f"The converted model loaded but its answer was not a valid step: {exc.what}"
            raise
        c = prop.counters
        return checked, (f"loads on {info.device}; for “{VERIFY_TASK}” on the built-in screenshot it proposed "
                         f"“{prop.action.describe()[:80]}” ({c.tokens_evaluated} tokens read, {c.tokens_generated} "
                         f"generated, {time.perf_counter() - t1:.1f} s)")
    finally:
        engine.close()


def register(paths: Paths, settings: Settings, model: ConvertedModel, checked: Checked,
             gpu: GPUReport | None) -> Settings:
    """converted.json and the settings (the pair in use, a context and GPU layers that fit): the very last step."""
    register_converted(paths, model)
    return finish_setup(paths, settings, checked, gpu)


def delete_intermediates(items: tuple[tuple[str, Path, int], ...], cache: Path | None = None) -> int:
    """Delete the work folder and the downloaded checkpoint (its revision in the hub cache); bytes freed."""
    freed = 0
    for _, path, size in items:
        ref = str(path)
        if ref.startswith("hf-cache:"):
            freed += _delete_cached_revision(ref.removeprefix("hf-cache:"), cache)
        elif path.exists():
            shutil.rmtree(path, ignore_errors=True)
            freed += size
    return freed


def _delete_cached_revision(repo_at: str, cache: Path | None) -> int:
    from huggingface_hub import scan_cache_dir

    from app.setup.hub import hub_cache

    repo, _, commit = repo_at.partition("@")
    info = scan_cache_dir(cache or hub_cache())  # the cache as the environment says now, as downloads use it
    commits = [r.commit_hash for c in info.repos if c.repo_id == repo for r in c.revisions if r.commit_hash == commit]
    if not commits:
        return 0
    strategy = info.delete_revisions(*commits)
    strategy.execute()
    return int(strategy.expected_freed_size)


def describe_intermediates(items: tuple[tuple[str, Path, int], ...]) -> str:
    return "; ".join(f"{what} ({human_bytes(size)})" for what, _, size in items)
