"""The short test Settings → General → "Test on this computer" runs: a fixed sample of a grounding suite (50 items,
seed 0, so every test asks the same items and results compare), through the engine the settings name, into a new
folder under the data folder's `evals/`. It is the command `deskhand eval grounding --suite NAME --limit 50
--seed 0`, with the same files, so a run of the headless image against a model server sets beside it.

The suite is read from the Hugging Face cache. When it is not there yet nothing is downloaded until the person has
read its licence and said yes (`download=True`); a download stopped part-way resumes where it stopped next time;
without a network and without a cached copy the message says exactly that.

In the app the model is the one the agent worker holds (`owner`, lent.py): never a second copy beside it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError, ModelBusy
from app.domain.proposal import EngineInfo
from app.domain.settings import Settings
from app.engine.base import Engine
from app.eval.fetch import cached_snapshot, fetch, licence_notice
from app.eval.grounding import Variant, check_items, evaluate, prepare_out, select
from app.eval.items import DatasetError
from app.eval.runner import ItemResult
from app.eval.suites import Suite, suite
from app.eval.trial.lent import Lent, ModelOwner
from app.setup.transfer import ProgressFn

SAMPLE_ITEMS = 50
SAMPLE_SEED = 0
OFFERED = ("screenspot-v2", "screenspot-pro", "webclick")  # the suites on the hub (OSWorld-G needs a clone)
SHOWS = {"screenspot-v2": "desktop, web and phone screens", "screenspot-pro": "professional applications on "
         "high-resolution screens", "webclick": "web pages"}
DOWNLOAD_SIZE = {"screenspot-v2": "about 1.3 GB"}  # the image archive (the dataset card's listing)


class NeedsConsent(DeskhandError):
    """The suite is not on this computer: downloading it waits for the person's yes to its licence."""


@dataclass(frozen=True)
class Listener:
    """What the test reports as it goes (called on the worker thread)."""

    say: Callable[[str], None]
    item: Callable[[int, int, ItemResult], None]
    download: ProgressFn
    phase: Callable[[str], None]  # "dataset", "checking", "loading" (the model, then the first item)


def command_line(name: str) -> str:
    return f"deskhand eval grounding --suite {name} --limit {SAMPLE_ITEMS} --seed {SAMPLE_SEED}"


def cached_copy(name: str) -> Path | None:
    """The suite's copy in the Hugging Face cache, if there is one (file-system reads only)."""
    s = suite(name)
    return cached_snapshot(s.repo, s.revision or "main") if s.repo else None


def uses_tiles(settings: Settings) -> bool:
    """Whether the model in `settings` cuts a screenshot into tiles (Holotron), so that a tile budget means
    something: not a Holo3.1 model, which sees the whole screen at once, nor a model on a server. Reads the model
    file's header when the profile follows the file."""
    from app.engine.family import resolve_profile
    from app.engine.profile import ImageSpec

    if settings.engine == "remote" or not settings.text_model:
        return False
    try:
        return isinstance(resolve_profile(settings.profile, settings.text_model).image, ImageSpec)
    except Exception:  # a file that is not there (yet) or not a model: the test itself says what is wrong
        return False


def consent_text(name: str) -> str:
    s = suite(name)
    size = DOWNLOAD_SIZE.get(name)
    return (f"{licence_notice(s)} The whole suite is downloaded once{f' ({size})' if size else ''}; later tests "
            "use that copy and need no network.")


def _variant(settings: Settings) -> Variant:
    from app.setup.engines import engine_configured, engine_from_settings

    if not engine_configured(settings):
        raise DeskhandError("No model is set up yet, so there is nothing to test.",
                            "Choose the model files (or a model server) above, or run the setup.")
    return Variant.of("", settings, lambda: engine_from_settings(settings))


def _folder(evals: Path, name: str) -> Path:
    base = evals / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def _suite_folder(s: Suite, token: CancelToken, listen: Listener, download: bool) -> tuple[Path, str]:
    root = cached_copy(s.name)
    if root is not None:
        listen.say(f"{s.title}: the copy in the Hugging Face cache ({root}).")
        return root, f"{s.page} ({root.name[:12]})"
    if not download:
        raise NeedsConsent(f"{s.title} is not on this computer yet.", consent_text(s.name))
    try:
        root = fetch(s, None, listen.say, token, listen.download)
    except NeedsConsent:
        raise
    except DeskhandError as exc:
        raise DeskhandError(f"{s.title} is not on this computer yet, and it could not be downloaded: {exc.what}",
                            exc.todo or "Connect to the internet and try again: once downloaded, the test "
                            "needs no network.") from None
    return root, f"{s.page} ({root.name[:12]})"


def run_sample(settings: Settings, name: str, evals: Path, token: CancelToken, listen: Listener,
               download: bool = False, owner: ModelOwner | None = None) -> tuple[Path, dict[str, Any]]:
    """The test from start to end: its folder and summary (partial when stopped). Raises NeedsConsent, or a
    DeskhandError saying what is wrong (a damaged dataset file, no engine, a task using the model) before anything
    is written. `owner`: the model's owner in the app (a local model is borrowed from it, not loaded again)."""
    s = suite(name)
    variant = _variant(settings)
    owner = owner if settings.engine != "remote" else None  # a model server: nothing is loaded here
    if owner is not None and owner.busy:
        raise ModelBusy()
    listen.phase("dataset")
    root, source = _suite_folder(s, token, listen, download)
    again = (f"Delete the folder {root.parent.parent} and start the test again: the benchmark is downloaded anew "
             "(after its licence is shown).")
    try:
        all_items = s.load(root)
        if not all_items:
            raise DatasetError(f"{root} holds no {s.title} items.", again)
        items = select(all_items, SAMPLE_ITEMS, SAMPLE_SEED)
        listen.phase("checking")
        listen.say(f"{s.title}: {len(items)} of {len(all_items)} items; checking their images")
        check_items(items, listen.say)
    except DatasetError as exc:  # the command line's advice (--data) means nothing in the window
        raise DatasetError(exc.what, again) from None
    token.check()
    out = prepare_out(_folder(evals, name))
    listen.say(f"results: {out}")
    listen.phase("loading")

    def measure(v: Variant) -> dict[str, Any]:
        return evaluate(s, source, all_items, items, [v], out, SAMPLE_SEED, token, listen.say, listen.item)

    def borrowed(engine: Engine, info: EngineInfo) -> dict[str, Any]:
        return measure(dataclasses.replace(variant, make=lambda: Lent(engine, info)))

    try:
        summary = measure(variant) if owner is None else owner.with_model(settings, token, borrowed)
    except (DeskhandError, Cancelled):  # Cancelled: stopped while the owner loaded the model
        if not (out / "results.jsonl").exists():
            with contextlib.suppress(OSError):
                out.rmdir()  # nothing was measured (the model did not load): no empty folder in the list
        raise
    return out, summary
