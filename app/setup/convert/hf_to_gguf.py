"""One run of llama.cpp's `convert_hf_to_gguf.py` (text model or vision projector) in the tools environment.

Progress comes from its log: one "INFO:hf-to-gguf:<gguf name>, <dtype> --> <type>, shape = …" line per tensor as it
is mapped, then tqdm's "Writing: NN%" bar while the tensors are computed and written (the conversion is lazy: the
real work happens while writing). The output goes to `<name>.part` and is renamed only when the converter succeeded,
so a cancelled or failed run never leaves a file that looks finished.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.domain.errors import Cancelled, DeskhandError
from app.setup.convert.child import run_child
from app.setup.convert.tools_env import ToolsEnv
from app.setup.transfer import DownloadControl

_TENSOR = re.compile(r"^INFO:hf-to-gguf:(\S+),\s+\S+ --> (\S+), shape")
_WRITING = re.compile(r"^Writing:\s+(\d+)%")


class ConverterError(DeskhandError):
    """llama.cpp's converter failed; the message ends with its last lines."""


@dataclass(frozen=True)
class ConverterProgress:
    tensors: int  # mapped so far
    expected: int  # tensors the checkpoint holds for this part (an estimate of what the converter writes)
    written: float  # 0..1 of the bytes written

    @property
    def fraction(self) -> float:
        mapped = min(1.0, self.tensors / self.expected) if self.expected else 0.0
        return 0.1 * mapped + 0.9 * self.written

    def describe(self) -> str:
        if self.written > 0:
            return f"computing and writing: {self.written:.0%}"
        return f"{self.tensors} tensors mapped"


def convert(tools: ToolsEnv, staged: Path, out: Path, *, mmproj: bool, outtype: str, model_name: str,
            expected_tensors: int, progress: Callable[[ConverterProgress], None] | None = None,
            log: Callable[[str], None] | None = None, control: DownloadControl | None = None) -> Path:
    """Convert `staged` into `out`; raises ConverterError (with the converter's last lines) or Cancelled."""
    part = out.with_name(out.name + ".part")
    part.unlink(missing_ok=True)
    state = {"tensors": 0, "written": 0.0}
    emit = progress or (lambda p: None)

    def on_line(line: str) -> None:
        if m := _TENSOR.match(line):
            state["tensors"] += 1
            if state["tensors"] % 8 == 1:
                emit(ConverterProgress(int(state["tensors"]), expected_tensors, state["written"]))
            return
        if m := _WRITING.match(line):
            state["written"] = int(m.group(1)) / 100
            emit(ConverterProgress(int(state["tensors"]), expected_tensors, state["written"]))
            return
        if log is not None:
            log(line)

    argv: list[str | Path] = [tools.python, tools.converter, staged, "--outtype", outtype, "--outfile", part,
                              "--model-name", model_name]
    if mmproj:
        argv.append("--mmproj")
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}  # the in-tree gguf-py of this version
    try:
        result = run_child(argv, control=control, on_line=on_line, env=env, cwd=tools.llama_dir)
    except Cancelled:
        part.unlink(missing_ok=True)
        raise
    if result.returncode != 0 or not part.is_file():
        part.unlink(missing_ok=True)
        what = "vision projector" if mmproj else "text model"
        tail = result.last_lines()
        if "pre-tokenizer was not recognized" in tail:
            raise ConverterError(
                f"llama.cpp {tools.version}'s converter does not recognise this checkpoint's tokenizer, so it "
                f"cannot write the {what}:\n{tail}",
                "This checkpoint's tokenizer differs from Holotron-12B's; use the original checkpoint.")
        raise ConverterError(f"llama.cpp's converter failed on the {what} (exit status {result.returncode}):\n{tail}",
                             "If the checkpoint is the original one, report this with the lines above.")
    emit(ConverterProgress(int(state["tensors"]), expected_tensors, 1.0))
    os.replace(part, out)
    return out
