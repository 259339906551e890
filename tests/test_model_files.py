"""Specific errors for bad model files, before anything reaches llama.cpp."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.domain.cancel import CancelToken
from app.domain.errors import ModelFileError
from app.engine.gguf.header import read_gguf
from app.engine.gguf.model_pair import check_model_files
from tests.engine_helpers import compact_profile, make_engine
from tests.fixtures import gguf_models as gm


def _err(text, mmproj) -> ModelFileError:
    with pytest.raises(ModelFileError) as e:
        check_model_files(text, mmproj)
    return e.value


def test_good_pair_passes_with_no_warnings(tiny_model_pair):
    files = check_model_files(tiny_model_pair.text, tiny_model_pair.mmproj)
    assert files.warnings == ()
    assert files.n_embd == 64 and "SPECIAL_11" in files.chat_template


def test_missing_file(tiny_model_pair, tmp_path):
    e = _err(tmp_path / "nope.gguf", tiny_model_pair.mmproj)
    assert "does not exist" in e.what and "nope.gguf" in e.what


def test_a_symlink_loop_and_a_broken_link_are_called_what_they_are(tiny_model_pair, tmp_path):
    """Row N26 of the 2026-12-06 pass: "The text model file …/loop1.gguf does not exist." for a link loop."""
    (tmp_path / "loop1.gguf").symlink_to(tmp_path / "loop2.gguf")
    (tmp_path / "loop2.gguf").symlink_to(tmp_path / "loop1.gguf")
    e = _err(tmp_path / "loop1.gguf", tiny_model_pair.mmproj)
    assert e.what == (f"The text model file {tmp_path / 'loop1.gguf'} is a symbolic-link loop (its links lead back "
                      "to each other, never to a file).")
    (tmp_path / "gone.gguf").symlink_to(tmp_path / "moved-away.gguf")
    e = _err(tmp_path / "gone.gguf", tiny_model_pair.mmproj)
    assert f"is a symbolic link to {tmp_path / 'moved-away.gguf'}, which does not exist" in e.what


def test_not_a_gguf(tiny_model_pair, tmp_path, model_factory):
    e = _err(model_factory.not_gguf(tmp_path), tiny_model_pair.mmproj)
    assert "is not a GGUF file" in e.what


@pytest.mark.parametrize("fraction", [0.002, 0.5, 0.999])
def test_truncated_gguf(tiny_model_pair, tmp_path, model_factory, fraction):
    cut = model_factory.truncated(tiny_model_pair.text, tmp_path, fraction=fraction)
    e = _err(cut, tiny_model_pair.mmproj)
    assert "is truncated" in e.what and "download" in e.todo


def test_text_model_of_another_architecture(tiny_model_pair, tmp_path, model_factory):
    e = _err(model_factory.llama(tmp_path), tiny_model_pair.mmproj)
    assert "“llama” model" in e.what and "nemotron_h" in e.what


def test_text_only_model_without_a_projector(tiny_model_pair):
    e = _err(tiny_model_pair.text, None)
    assert "no vision projector" in e.what and "mmproj" in e.todo


def test_text_model_given_as_mmproj(tiny_model_pair):
    e = _err(tiny_model_pair.text, tiny_model_pair.text)
    assert "not a vision projector" in e.what and "cannot see the screen" in e.todo


def test_files_swapped(tiny_model_pair):
    e = _err(tiny_model_pair.mmproj, tiny_model_pair.text)
    assert "is a vision projector (mmproj), not the text model" in e.what


def test_mmproj_of_another_model(tiny_model_pair, tmp_path, model_factory):
    e = _err(tiny_model_pair.text, model_factory.mmproj_mismatched(tmp_path))
    assert "96-wide embeddings" in e.what and "expects 64" in e.what


def test_imagenet_normalisation_is_an_error_with_the_command_that_fixes_it(tiny_model_pair, tmp_path, model_factory):
    mmproj = model_factory.mmproj_imagenet(tmp_path)
    e = _err(tiny_model_pair.text, mmproj)
    assert "ImageNet values" in e.what and "CLIP" in e.what and "every colour shifted" in e.what
    assert e.todo == f"Correct the file in place with: deskhand model fix-norm '{mmproj}'"
    size = mmproj.stat().st_size
    r = subprocess.run([sys.executable, "-m", "app", "model", "fix-norm", str(mmproj)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "0.485" in r.stdout and "0.48145466" in r.stdout
    files = check_model_files(tiny_model_pair.text, mmproj)
    assert files.warnings == () and mmproj.stat().st_size == size
    assert read_gguf(mmproj).get("clip.vision.image_std") == pytest.approx(list(gm.CLIP_STD))


def test_fix_norm_on_a_projector_that_does_not_say_its_type_says_so(tiny_model_pair, tmp_path):
    from app.engine.gguf.edit import copy_without

    untyped = tmp_path / "untyped.gguf"
    copy_without(tiny_model_pair.mmproj, untyped, lambda key: key.endswith("projector_type"))
    r = subprocess.run([sys.executable, "-m", "app", "model", "fix-norm", str(untyped)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0 and "does not say which projector it is" in r.stderr, r.stderr
    assert "“”" not in r.stderr and "Traceback" not in r.stderr


def test_engine_load_reports_file_errors_and_warnings(tiny_model_pair, tmp_path, model_factory):
    prof = compact_profile(tmp_path)
    with pytest.raises(ModelFileError, match="truncated"):
        make_engine(tiny_model_pair, prof, text_model=str(model_factory.truncated(tiny_model_pair.text, tmp_path))
                    ).load(None, CancelToken())
    with pytest.raises(ModelFileError, match="ImageNet"):
        make_engine(tiny_model_pair, prof, mmproj=str(model_factory.mmproj_imagenet(tmp_path))).load(None,
                                                                                                      CancelToken())


def test_chat_template_drift_is_reported(tiny_model_pair, tmp_path, model_factory):
    text = model_factory.text(tmp_path, chat_template="{% for m in messages %}{{ m.content }}{% endfor %}")
    eng = make_engine(tiny_model_pair, compact_profile(tmp_path), text_model=str(text))
    try:
        info = eng.load(None, CancelToken())
    finally:
        eng.close()
    assert any("Chat layout check" in w for w in info.warnings)


def test_header_reader_sees_metadata_and_tensors(tiny_model_pair):
    info = read_gguf(tiny_model_pair.mmproj)
    assert info.architecture == "clip" and info.complete
    assert info.get("clip.projector_type") == "nemotron_v2_vl"
    assert any(name.startswith("v.blk.0.") for name in info.tensors)


def test_a_file_one_byte_short_says_one_byte(tiny_model_pair, tmp_path):
    short = tmp_path / "short.gguf"
    short.write_bytes(tiny_model_pair.text.read_bytes()[:-1])
    assert "1 byte of its tensor data is missing" in _err(short, tiny_model_pair.mmproj).what
