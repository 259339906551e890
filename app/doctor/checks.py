"""`deskhand doctor`: everything Deskhand needs, checked and explained, as data (the CLI prints it)."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from app.doctor.findings import FAIL, OK, SKIP, WARN, Check, Report
from app.domain.errors import DeskhandError
from app.domain.paths import Paths
from app.domain.units import human_bytes
from app.setup.gpu import GPUReport

MIN_PYTHON = (3, 10)
PACKAGES = (("PySide6", ("PySide6-Essentials", "PySide6")), ("llama-cpp-python", ("llama-cpp-python",)),
            ("mss", ("mss",)), ("pynput", ("pynput",)), ("Pillow", ("pillow", "Pillow")),
            ("keyring", ("keyring",)), ("platformdirs", ("platformdirs",)), ("numpy", ("numpy",)),
            ("Jinja2", ("jinja2", "Jinja2")))
SETUP_TODO = ("Run `deskhand setup` (or start Deskhand) to download the recommended Holo3.1 model, or choose GGUF "
              "files you already have.")


def _version(names: tuple[str, ...]) -> str | None:
    for n in names:
        try:
            return metadata.version(n)
        except metadata.PackageNotFoundError:
            continue
    return None


def check_python() -> Check:
    v = platform.python_version()
    where = f"{v} ({sys.executable}, {platform.system()} {platform.machine()})"
    if sys.version_info[:2] < MIN_PYTHON:
        return Check("Python", FAIL, where, "Install Python 3.10 or newer and reinstall Deskhand.")
    return Check("Python", OK, where)


def check_packages() -> Check:
    found = {label: _version(names) for label, names in PACKAGES}
    missing = [k for k, v in found.items() if v is None]
    detail = ", ".join(f"{k} {v}" for k, v in found.items() if v)
    if missing:
        return Check("Packages", FAIL, f"missing: {', '.join(missing)}; installed: {detail}",
                     "Reinstall Deskhand with its dependencies (source checkout: "
                     "`bash installers/source/install.sh`; otherwise `pip install deskhand`).")
    return Check("Packages", OK, detail)


def check_gpu_and_llama(r: GPUReport) -> list[Check]:
    from app.setup.gpu import CUDA_BUILD_NOTE, rebuild_command

    out = []
    if r.offload is None:
        out.append(Check("llama-cpp-python", FAIL, f"not usable: {r.llama_error}",
                         f"Reinstall it: {rebuild_command() if r.gpus else 'bash installers/source/install.sh'}"))
    elif r.needs_cuda_build:
        out.append(Check("llama-cpp-python", WARN,
                         f"{r.llama_version}, built for the CPU only: GPU offload is not supported, so the NVIDIA "
                         "GPU below is not used and every step takes minutes.",
                         f"Rebuild it with CUDA: {rebuild_command()}  ({CUDA_BUILD_NOTE})", required=False))
    else:
        kind = "GPU offload supported (CUDA build)" if r.offload else "CPU build (no GPU offload)"
        out.append(Check("llama-cpp-python", OK, f"{r.llama_version}, {kind}; {r.llama_patches}"))
    best = r.best
    if best is None:
        out.append(Check("GPU", WARN, f"No NVIDIA GPU: {r.detail}. The model would run on the CPU (minutes per "
                         "step).", "Use a computer with an NVIDIA GPU (6–8 GB of VRAM for Holo3.1-4B Q4_K_M, 24 GB for "
                         "the 35B-A3B), with its driver installed (`nvidia-smi` must work).", required=False))
    else:
        others = f" (+{len(r.gpus) - 1} more)" if len(r.gpus) > 1 else ""
        out.append(Check("GPU", OK, f"{best.describe()}{others}", required=False))
    return out


def check_display_and_capture() -> list[Check]:
    from app.desktop.display import check_display

    status = check_display()
    names = {"x11": "X11", "xwayland": "Wayland (XWayland)", "wayland": "Wayland", "none": "none",
             "unreachable": "X11 (not answering)", "windows": "Windows", "macos": "macOS"}
    label = f"{names.get(status.session, status.session)}: {status.what}"
    out = []
    if not status.usable:
        out.append(Check("Display server", FAIL, label, status.todo))
        out.append(Check("Screen capture", SKIP, "not tried: no usable display", status.todo))
        out.append(Check("Mouse and keyboard", SKIP, "not tried: no usable display", status.todo))
        return out
    if status.session == "wayland":
        from app.doctor.wayland import wayland_checks

        return [Check("Display server", OK, label), *wayland_checks()]
    if status.session == "xwayland":
        out.append(Check("Display server", WARN, label, status.warning, required=False))
    else:
        out.append(Check("Display server", OK, label))
    out.append(_capture_check())
    out.append(_input_check())
    return out


def _capture_check() -> Check:
    from app.desktop.capture import CaptureConfig, Capturer

    try:
        with Capturer(CaptureConfig(refuse_black_frames=True)) as capturer:
            shot = capturer.grab()
    except DeskhandError as exc:
        return Check("Screen capture", FAIL, exc.what, exc.todo)
    except Exception as exc:  # mss and Xlib raise their own types
        return Check("Screen capture", FAIL, f"{type(exc).__name__}: {exc}", "Check the display and try again.")
    w, h = shot.image.size
    return Check("Screen capture", OK, f"a test capture of {shot.monitor.label()} worked ({w}×{h} pixels, "
                 "not black)")


def _input_check() -> Check:
    from app.desktop.display import MACOS_INPUT_TODO, import_pynput

    try:
        import_pynput()
    except DeskhandError as exc:
        return Check("Mouse and keyboard", FAIL, exc.what, exc.todo)
    if sys.platform == "darwin":
        from app.desktop.display import macos_input_allowed

        if macos_input_allowed() is False:
            return Check("Mouse and keyboard", FAIL, "macOS Accessibility permission is not granted.",
                         MACOS_INPUT_TODO)
    return Check("Mouse and keyboard", OK, "pynput can control the pointer and keyboard")


def check_platform_permissions() -> list[Check]:
    from app.desktop import display as d

    if sys.platform == "darwin":
        cap, acc = d.macos_capture_allowed(), d.macos_input_allowed()
        word = {True: "granted", False: "not granted", None: "unknown (could not be asked)"}
        return [Check("macOS Screen Recording", FAIL if cap is False else OK, word[cap], d.MACOS_CAPTURE_TODO),
                Check("macOS Accessibility", FAIL if acc is False else OK, word[acc], d.MACOS_INPUT_TODO)]
    if sys.platform.startswith("win"):
        aware = d.declare_dpi_awareness()
        return [Check("Windows DPI awareness", OK if aware else WARN,
                      "per-monitor DPI aware" if aware else "could not declare per-monitor DPI awareness",
                      "" if aware else "Update Windows 10 to version 1703 or newer; until then clicks may land "
                      "off target on scaled displays.", required=False)]
    return []


def check_keyring() -> Check:
    from app.setup.secrets import NO_KEYRING_TODO, backend

    b = backend()
    if not b.usable:
        return Check("Keyring", WARN, f"{b.name}: {b.detail} (only needed for gated model downloads)",
                     NO_KEYRING_TODO, required=False)
    return Check("Keyring", OK, f"{b.name} ({b.detail})", required=False)


def _writable(p: Path) -> bool:
    probe = p
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return os.access(probe, os.W_OK)


def check_folders(paths: Paths) -> Check:
    folders = {"config": paths.config, "data": paths.data, "logs": paths.logs, "models": paths.models}
    detail = "; ".join(f"{k} {v}" + ("" if v.exists() else " (created on first use)") for k, v in folders.items())
    bad = [str(v) for v in folders.values() if not _writable(v)]
    if bad:
        return Check("Folders", FAIL, f"not writable: {', '.join(bad)}. {detail}",
                     "Fix the folders' permissions, or point DESKHAND_HOME (or --base-dir) at a writable folder.")
    free = _free(paths.models)
    return Check("Folders", OK, f"{detail}; {human_bytes(free)} free for models" if free is not None else detail)


def check_history(paths: Paths) -> Check:
    """The run history database: a damaged, locked or unwritable one would cost the records of every run."""
    from app.agent.database_file import diagnose

    h = diagnose(paths.database)
    if h.state in ("ok", "missing"):
        return Check("History", OK, h.what, required=False)
    return Check("History", WARN if h.state == "locked" else FAIL, h.what, h.todo, required=False)


def _free(p: Path) -> int | None:
    import shutil

    while not p.exists() and p.parent != p:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def check_model(paths: Paths, gpu: GPUReport | None = None, overrides: dict[str, Any] | None = None) -> list[Check]:
    from app.domain.errors import ModelFileError
    from app.domain.settings import load_settings
    from app.engine.gguf.model_pair import check_model_files
    from app.setup.catalog import memory_shape_of, plan

    loaded = load_settings(paths.settings_file)
    out = []
    if loaded.warnings:
        out.append(Check("Settings", WARN, " ".join(loaded.warnings), "Open Settings and save them again.",
                         required=False))
    s = loaded.settings.replace(**(overrides or {}))
    if s.engine == "remote":  # a model server of the user's: its checks replace the model files'
        from app.doctor.model_server import check_remote

        return out + check_remote(s)
    if not s.text_model and not s.mmproj:
        out.append(Check("Model files", FAIL, "No model is set up yet.", SETUP_TODO))
        return out
    try:
        from app.engine.family import resolve_profile

        files = check_model_files(s.text_model, s.mmproj, resolve_profile(s.profile, s.text_model))
    except ModelFileError as exc:
        out.append(Check("Model files", FAIL, exc.what, exc.todo or SETUP_TODO))
        return out
    if files.warnings:
        out.append(Check("Model files", WARN, f"{files.summary()}: " + " ".join(files.warnings), required=False))
    else:
        out.append(Check("Model files", OK, f"{files.summary()} ({files.text.path}, {files.mmproj.path})"))
    if gpu is not None and gpu.budget is not None:
        fit = plan(files.text.file_size, files.mmproj.file_size, gpu.budget, memory_shape_of(files.text.metadata))
        layers = "all layers" if s.gpu_layers < 0 else f"{s.gpu_layers} layers"
        need = f"settings: {s.context_size:,}-token context, {layers} on the GPU"
        ok = fit.fits and fit.context_size >= s.context_size
        out.append(Check("GPU memory", OK if ok else WARN, f"{fit.describe()} ({need})",
                         "" if ok else f"Set the context size to {fit.context_size:,} and GPU layers to "
                         f"{fit.gpu_layers} in Settings → Advanced, or use a smaller quantization.", required=False))
        out.append(check_prompt_weights(gpu, files.text.tensors, gpu.budget - fit.needed))
    return out


def check_prompt_weights(gpu: GPUReport, tensors: dict[str, tuple[tuple[int, ...], int]], free_after: int) -> Check:
    """Which way the prompt's products get their weights on this GPU (app.engine.prompt_weights), predicted from
    the free memory and the model's size; the engine measures again when it loads the model, and logs its choice."""
    from app.engine.prompt_weights import PATCH, choose, dequantized_bytes, gpu_compute_capability, is_hopper

    best = gpu.best
    name = best.name if best is not None else "the GPU"
    chosen = choose(dequantized_bytes(tensors), free_after, gpu_offload=bool(gpu.offload),
                    patched=PATCH in gpu.llama_patches, hopper=is_hopper(name, gpu_compute_capability()), gpu=name)
    return Check("Prompt weights", OK, chosen.describe(), required=False)


def _safe(name: str, fn: Callable[[], Check | list[Check]]) -> list[Check]:
    try:
        got = fn()
    except Exception as exc:  # a broken check is itself a finding, not a crash of the doctor
        return [Check(name, FAIL, f"the check itself failed: {exc!r}", "Report this with the output of the doctor.")]
    return got if isinstance(got, list) else [got]


def run_doctor(paths: Paths, overrides: dict[str, Any] | None = None) -> Report:
    """`overrides`: settings to check instead of the saved ones (`doctor --engine URL`)."""
    from app.doctor.accessibility import check_accessibility
    from app.setup.gpu import gpu_report

    gpu = gpu_report()
    steps: list[tuple[str, Callable[[], Check | list[Check]]]] = [
        ("Python", check_python), ("Packages", check_packages), ("GPU", lambda: check_gpu_and_llama(gpu)),
        ("Display server", check_display_and_capture), ("Permissions", check_platform_permissions),
        ("Accessibility lookups", check_accessibility), ("Keyring", check_keyring),
        ("Folders", lambda: check_folders(paths)),
        ("History", lambda: check_history(paths)), ("Model files", lambda: check_model(paths, gpu, overrides))]
    return Report(tuple(c for name, fn in steps for c in _safe(name, fn)))
