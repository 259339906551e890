"""Deskhand's patches to llama.cpp (installers/llama-patches): the patch set's name and its record in the built
package, a patch that no longer applies, and what patch 0001 changes: a screenshot's tiles through the vision
encoder in one pass, with the embeddings of the one-by-one encode."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import llama_cpp  # noqa: F401  (before numpy)
import numpy as np
import pytest

from app.domain.cancel import CancelToken
from app.engine.llama import library
from tests.desktop import REPO

PATCH_DIR = REPO / "installers" / "llama-patches"
LLAMA_VERSION = "0.3.36"
BATCHED_ENCODE = "0001-mtmd-nemotron-v2-vl-batched-encode.patch"


def patches(*args: str, here: Path = PATCH_DIR, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(here / "patches.sh"), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_the_patch_set_is_named_by_the_changes_it_makes(tmp_path):
    names = patches("list").stdout.split()
    assert names == sorted(names) and BATCHED_ENCODE in names
    name = patches("id").stdout.strip()
    assert name.startswith("deskhand-") and len(name) == len("deskhand-") + 10
    assert patches("id", DESKHAND_LLAMA_PATCHES="off").stdout.strip() == "none"
    assert patches("list", DESKHAND_LLAMA_PATCHES="off").stdout == ""
    copy = tmp_path / "llama-patches"
    shutil.copytree(PATCH_DIR, copy)
    first = copy / names[0]
    text = first.read_text(encoding="utf-8")
    first.write_text("Measured: more words in the header\n" + text, encoding="utf-8")
    assert patches("id", here=copy).stdout.strip() == name  # a header that says more keeps the built wheels
    first.write_text(text.replace("\n+", "\n+// changed\n+", 1), encoding="utf-8")
    assert patches("id", here=copy).stdout.strip() not in ("", name)  # another change: another wheel


def _sdist() -> Path:
    cache = Path(os.environ.get("DESKHAND_WHEEL_CACHE", Path.home() / ".cache" / "deskhand-build"))
    sdist = cache / "sdist" / f"llama_cpp_python-{LLAMA_VERSION}.tar.gz"
    if not sdist.is_file():
        pytest.skip(f"no llama-cpp-python source distribution at {sdist} (installers/source/install.sh keeps it)")
    return sdist


def _touched() -> set[str]:
    files = {"pyproject.toml", "llama_cpp/__init__.py"}
    for p in PATCH_DIR.glob("*.patch"):
        files |= {ln.split()[1].split("/", 1)[1] for ln in p.read_text(encoding="utf-8").splitlines()
                  if ln.startswith("+++ ")}
    return files


def test_patches_apply_to_the_pinned_source_and_one_that_no_longer_applies_says_so(tmp_path):
    top = f"llama_cpp_python-{LLAMA_VERSION}"
    wanted = {f"{top}/{f}" for f in _touched()}
    with tarfile.open(_sdist()) as tar:  # only what the patches touch: the whole source is 76 MB
        members = [m for m in tar.getmembers() if m.name in wanted]
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp_path, members=members, filter="data")
        else:  # Python before 3.10.12 / 3.11.4
            tar.extractall(tmp_path, members=members)
    src = tmp_path / top
    (src / "llama_cpp" / "deskhand_llama_patches.txt").unlink(missing_ok=True)
    done = patches("apply", str(src))
    assert done.returncode == 0, done.stderr
    record = (src / "llama_cpp" / "deskhand_llama_patches.txt").read_text(encoding="utf-8").split()
    assert record == [patches("id").stdout.strip(), *patches("list").stdout.split()]
    before = {f: (src / f).read_bytes() for f in _touched()}
    again = patches("apply", str(src))  # already patched: as a newer llama-cpp-python would look to the patch
    assert again.returncode == 1
    assert BATCHED_ENCODE in again.stderr and f"llama-cpp-python {LLAMA_VERSION}" in again.stderr
    assert "DESKHAND_LLAMA_PATCHES=off bash installers/source/install.sh" in again.stderr
    assert {f: (src / f).read_bytes() for f in _touched()} == before  # nothing half-applied


def test_the_record_in_the_package_names_the_patch_set(tmp_path):
    pkg = tmp_path / "llama_cpp"
    pkg.mkdir()
    assert library.patch_set(pkg).describe() == "llama.cpp patches unknown (not built by Deskhand's installer)"
    (pkg / library.PATCH_RECORD).write_text("deskhand-0123456789\n0001-a.patch\n0002-b.patch\n", encoding="utf-8")
    got = library.patch_set(pkg)
    assert got == library.PatchSet("deskhand-0123456789", ("0001-a.patch", "0002-b.patch"))
    assert got.describe() == "llama.cpp patch set deskhand-0123456789 (0001-a, 0002-b)"
    (pkg / library.PATCH_RECORD).write_text("none\n", encoding="utf-8")
    assert library.patch_set(pkg).describe() == "llama.cpp unpatched (DESKHAND_LLAMA_PATCHES=off)"


@pytest.mark.model
def test_one_encoder_pass_gives_a_screenshot_s_tiles_the_embeddings_of_the_one_by_one_encode(tiny_model_pair):
    import llama_cpp.mtmd_cpp as mtmd
    from PIL import Image, ImageDraw

    from app.engine.llama import vision
    from app.engine.llama.runtime import LlamaRuntime, RuntimeOptions
    from app.engine.tiling import choose_grid, tile_image

    # a batch of 4096 tokens: mtmd may put up to a batch's worth of tiles (16) into one encoder pass
    rt = LlamaRuntime(str(tiny_model_pair.text), str(tiny_model_pair.mmproj),
                      RuntimeOptions(n_ctx=4096, n_batch=4096), None, CancelToken())
    try:
        shot = Image.new("RGB", (1920, 1080), (40, 44, 52))
        d = ImageDraw.Draw(shot)
        for i in range(30):
            d.text((60 + 11 * i, 30 * i + 10), f"line {i} of the window", fill=(200, 220 - 5 * i, 90 + 4 * i))
        tiles = tile_image(shot, choose_grid(shot.width, shot.height))
        assert len(tiles) == 9  # 4×2 tiles and the thumbnail
        one = [vision.encode_image(rt, t, keep_chunk=False).embd for t in tiles]
        together = vision.encode_tiles(rt, tiles)
        assert [e.shape for e in together] == [e.shape for e in one]
        scale = max(float(np.abs(e).max()) for e in one)
        for a, b in zip(one, together, strict=True):
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-4 * scale)
        assert not np.allclose(one[0], one[1])  # the tiles differ: each embedding is its own tile's

        if BATCHED_ENCODE not in library.patch_set().patches:
            return  # a plain build encodes them one by one (encode_tiles falls back): the same embeddings
        # with patch 0001, mtmd takes every tile of the screenshot into one batch (one encoder graph)
        made = [vision._tokenize(rt, t) for t in tiles]
        batch = mtmd.mtmd_batch_init(rt.mctx)
        try:
            assert [mtmd.mtmd_batch_add_chunk(batch, chunk) for _, chunk in made] == [0] * len(tiles)
            assert mtmd.mtmd_batch_encode(batch) == 0
            first = mtmd.mtmd_batch_get_output_embd(batch, made[0][1])
            got = np.ctypeslib.as_array(ctypes.cast(first, ctypes.POINTER(ctypes.c_float)),
                                        shape=(one[0].size,)).reshape(one[0].shape)
            np.testing.assert_allclose(got, one[0], rtol=0, atol=1e-4 * scale)
        finally:
            mtmd.mtmd_batch_free(batch)
            for chunks, _ in made:
                mtmd.mtmd_input_chunks_free(chunks)
    finally:
        rt.close()


@pytest.mark.model
def test_tiles_already_prepared_are_freed_when_a_later_one_fails(tiny_model_pair, monkeypatch):
    """mtmd refuses the third tile of a batch (its tokenizer fails): the two prepared before it are released too,
    not left in native memory (a few MB each)."""
    import llama_cpp.mtmd_cpp as mtmd
    from PIL import Image

    from app.domain.errors import ModelLoadError
    from app.engine.llama import vision
    from app.engine.llama.runtime import LlamaRuntime, RuntimeOptions

    rt = LlamaRuntime(str(tiny_model_pair.text), str(tiny_model_pair.mmproj), RuntimeOptions(n_ctx=4096), None,
                      CancelToken())
    try:
        made: list[int] = []
        freed: list[int] = []
        init, free, tokenize = mtmd.mtmd_input_chunks_init, mtmd.mtmd_input_chunks_free, mtmd.mtmd_tokenize

        def counted_init():  # the real calls, counted
            chunks = init()
            made.append(chunks)
            return chunks

        def counted_free(chunks):
            freed.append(chunks)
            free(chunks)

        def third_fails(*args):  # the one failure the real tokenizer cannot be made to give on demand
            return 1 if len(made) == 3 else tokenize(*args)

        monkeypatch.setattr(mtmd, "mtmd_input_chunks_init", counted_init)
        monkeypatch.setattr(mtmd, "mtmd_input_chunks_free", counted_free)
        monkeypatch.setattr(mtmd, "mtmd_tokenize", third_fails)
        tiles = [Image.new("RGB", (512, 512), (10 * i, 40, 90)) for i in range(4)]
        with pytest.raises(ModelLoadError, match="rejected a screenshot"):
            vision.encode_tiles(rt, tiles)
        assert len(made) == 3 and sorted(freed) == sorted(made)
    finally:
        rt.close()
