"""installers/llama-patches/patches.sh on a small source tree of its own (the mutation audit of the 2026-12-06
pass: neither behaviour had a test that fails when it breaks). A patch set whose second patch does not apply,
and a patch whose second file does not take it: nothing is changed (each patch is tried with --dry-run, or
`git apply --check` where `patch` is missing, before it is applied), and the record of the set is written only
once every patch applied."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.desktop import REPO

SCRIPT = REPO / "installers" / "llama-patches" / "patches.sh"
RECORD = "llama_cpp/deskhand_llama_patches.txt"


def _source(root: Path) -> Path:
    src = root / "llama-cpp-python"
    (src / "llama_cpp").mkdir(parents=True)
    (src / "pyproject.toml").write_text("[project]\nname = 'llama_cpp_python'\n", encoding="utf-8")
    (src / "llama_cpp" / "__init__.py").write_text('__version__ = "0.3.36"\n', encoding="utf-8")
    (src / "a.c").write_text("int a(void) {\n    return 1;\n}\n", encoding="utf-8")
    (src / "b.c").write_text("int b(void) {\n    return 2;\n}\n", encoding="utf-8")
    return src


def _diff(name: str, old: str, new: str) -> str:
    return (f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n@@ -1,3 +1,3 @@\n"
            f" int {name[0]}(void) {{\n-    return {old};\n+    return {new};\n }}\n")


def _patches(root: Path, *patches: tuple[str, str]) -> Path:
    """The script beside patches of this test's own (as the installer runs it: from its folder)."""
    here = root / "llama-patches"
    here.mkdir()
    shutil.copy(SCRIPT, here / "patches.sh")
    for name, text in patches:
        (here / name).write_text(text, encoding="utf-8")
    return here


def _without_patch_program(root: Path) -> dict[str, str]:
    """PATH with what the script needs but `patch`, so that it takes its `git apply` branch."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sed", "cut", "cat", "basename", "dirname", "git", "sha256sum", "shasum"):
        if (found := shutil.which(tool)) is not None:
            (bin_dir / tool).symlink_to(found)
    return {"PATH": str(bin_dir)}


def _apply(here: Path, src: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(here / "patches.sh"), "apply", str(src)], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env})


def _tree(src: Path) -> dict[str, bytes]:
    return {str(p.relative_to(src)): p.read_bytes() for p in sorted(src.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("tool", ["patch", "git apply"])
def test_a_patch_set_that_does_not_apply_whole_changes_nothing_and_records_nothing(tmp_path, tool):
    if tool == "patch" and shutil.which("patch") is None:
        pytest.skip("no patch program here")
    env = _without_patch_program(tmp_path) if tool == "git apply" else {}
    src = _source(tmp_path)
    # 0001 applies; 0002 changes a.c (takes) and b.c, whose line is not what it expects (does not take)
    here = _patches(tmp_path, ("0001-a.patch", _diff("a.c", "1", "10")),
                    ("0002-ab.patch", _diff("a.c", "10", "100") + _diff("b.c", "20", "200")))
    before = _tree(src)
    done = _apply(here, src, **env)
    assert done.returncode == 1 and "patch 0002-ab.patch does not apply" in done.stderr, done.stderr
    after = _tree(src)
    assert not (src / RECORD).exists()  # the set was not applied: no record says it was
    assert after.pop("a.c") == b"int a(void) {\n    return 10;\n}\n"  # 0001, applied before 0002 was tried
    before.pop("a.c")
    assert after == before  # 0002 left a.c and b.c alone: no half-applied patch, no .rej or .orig files


def test_the_record_names_the_set_once_every_patch_applied(tmp_path):
    src = _source(tmp_path)
    here = _patches(tmp_path, ("0001-a.patch", _diff("a.c", "1", "10")), ("0002-b.patch", _diff("b.c", "2", "20")))
    done = _apply(here, src)
    assert done.returncode == 0, done.stderr
    name = subprocess.run(["bash", str(here / "patches.sh"), "id"], capture_output=True, text=True,
                          timeout=60).stdout.strip()
    assert (src / RECORD).read_text(encoding="utf-8").split() == [name, "0001-a.patch", "0002-b.patch"]
    assert (src / "b.c").read_text(encoding="utf-8") == "int b(void) {\n    return 20;\n}\n"
