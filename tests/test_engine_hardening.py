"""The engine and model-file rows of the 2026-12-06 reliability report that the re-run found still bad or
partial (docs/hardening-2026-12-06/core.md): real `deskhand` processes on the private Xvfb against a loopback
model server (tests/fake_vllm.py), the real answer parsers, and the tiny GGUF models of tests/fixtures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.domain.errors import ProposalError
from app.domain.paths import default_paths
from app.engine.answer import parse_answer
from app.engine.prompt import tool_of
from tests.desktop import REPO, XServer
from tests.fake_vllm import FakeVLLM

DEEP = "[" * 200_000 + "]" * 200_000


def _run(desktop: XServer, home: Path, tmp_path: Path, *args: str, timeout: int = 240
         ) -> subprocess.CompletedProcess[str]:
    env = desktop.env(DESKHAND_HOME=str(home), DESKHAND_API_KEY="")
    return subprocess.run([sys.executable, "-m", "app", "run", "--task", "Open the invoices",
                           "--display", desktop.display, "--out", str(tmp_path / "out"), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------- R11: an answer nested 200,000 deep
@pytest.mark.xdisplay
def test_a_deeply_nested_answer_is_said_at_each_step_without_a_traceback(desktop, tmp_path):
    with FakeVLLM(answer=DEEP) as server:
        proc = _run(desktop, tmp_path / "home", tmp_path, "--engine", server.url, "--max-steps", "2")
        chats = len(server.chats)
    err = proc.stderr
    assert "Traceback" not in err and "RecursionError" not in err and "internal error" not in err, err
    assert chats == 2, err  # the second step was asked too, with the first answer in its history
    said = "the model's answer was not usable: The model's answer is nested too deeply to be an action"
    assert f"step 1: {said}" in err and f"step 2: {said}" in err, err
    assert "cut off" not in err, err
    assert proc.returncode == 3, err  # the step limit, as any run whose steps were not usable


@pytest.mark.parametrize("finished", [True, False])
def test_the_answer_parser_names_a_deeply_nested_answer(finished):
    with pytest.raises(ProposalError) as caught:
        parse_answer(DEEP, 1000, finished=finished)
    assert caught.value.what.startswith("The model's answer is nested too deeply to be an action"), caught.value
    assert caught.value.raw == DEEP


def test_the_previous_tool_of_a_deeply_nested_answer_is_an_action():
    assert tool_of(DEEP) == "action"
    assert tool_of('{"tool_call": {"tool_name": "click"}}') == "click"


def test_a_server_s_deeply_nested_tool_call_arguments_are_named():
    from app.engine.tool_call import call_from_json_arguments

    tools = [{"tool_name": "click", "properties": {"x": {"type": "integer"}, "keys": {"type": "array"}}}]
    for arguments in (DEEP, {"keys": DEEP}):
        with pytest.raises(ProposalError, match="nested too deeply"):
            call_from_json_arguments("click", arguments, tools, "answer")


# ---------------------------------------------------------------- U8: an address with a line break in it
@pytest.mark.xdisplay
@pytest.mark.parametrize("given", ["--engine", "settings"])
def test_an_engine_address_with_a_line_break_is_refused_by_position(desktop, tmp_path, given):
    url = "http://127.0.0.1:9/v1\r\nX-Evil: 1"
    home = tmp_path / "home"
    args = ["--engine", url]
    if given == "settings":
        paths = default_paths(home).ensure()
        paths.settings_file.write_text(json.dumps({"engine": "remote", "engine_url": url}), encoding="utf-8")
        args = []
    proc = _run(desktop, home, tmp_path, *args)
    assert proc.returncode == 2, proc.stderr
    assert "The model server address has a line break at character 22 of 32" in proc.stderr, proc.stderr
    assert "X-Evil" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("url, said", [
    ("http://127.0.0.1:9/v1\nHost: evil", "a line break at character 22 of 32"),
    ("http://127.0.0.1:9/\tv1", "a tab at character 20 of 22"),
    ("http://127.0.0.1:9/v\x001", "a control character (U+0000) at character 21 of 22"),
    ("http://127.0.0.1:9/v\x7f1", "a control character (U+007F) at character 21 of 22"),
    ("http://127.0.0.1:9/v\x851", "a control character (U+0085) at character 21 of 22"),
    ("http://127.0.0.1:9/v\u20281", "a line break at character 21 of 22"),
])
def test_an_address_with_a_control_character_names_it_and_where(url, said):
    from app.domain.errors import DeskhandError
    from app.engine.remote.endpoint import parse_endpoint

    with pytest.raises(DeskhandError) as caught:
        parse_endpoint(url)
    assert caught.value.what.startswith(f"The model server address has {said};"), caught.value.what
    assert parse_endpoint(" http://127.0.0.1:9/v1\r\n").base_url == "http://127.0.0.1:9/v1"  # pasted with its line end


# ---------------------------------------------------------------- R46 / R47: a model list Deskhand cannot use
@pytest.mark.xdisplay
@pytest.mark.parametrize("listed, said", [
    ({"object": "list", "data": []}, "lists no model: its /models answer is an empty list, so it has loaded none."),
    ({"object": "list", "data": {"id": "m"}}, "answered a malformed model list: its /models answer has a “data” "
                                               "that is not a list (dict)."),
    ({"object": "list"}, "answered a malformed model list: its /models answer has no “data” list."),
    ([{"id": "m"}], "answered a malformed model list: its /models answer is not a JSON object."),
    ({"object": "list", "data": [{"object": "model"}]}, "answered a malformed model list: none of its 1 entries "
                                                         "has a model name (“id”)."),
])
def test_a_model_list_with_no_model_is_said_plainly(desktop, tmp_path, listed, said):
    with FakeVLLM(models_reply=listed) as server:
        proc = _run(desktop, tmp_path / "home", tmp_path, "--engine", server.url)
        chats = len(server.chats)
    assert f"The server at {server.url} {said}" in proc.stderr, proc.stderr
    assert "Choose one of" not in proc.stderr and "0 models" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and proc.returncode != 0 and chats == 0, proc.stderr


# ---------------------------------------------------------------- R51: the server runs another model
@pytest.mark.xdisplay
@pytest.mark.parametrize("named", [True, False])
def test_an_answer_from_another_model_than_the_one_asked_is_refused_naming_both(desktop, tmp_path, named):
    with FakeVLLM(answers_as="evil/other-model") as server:
        proc = _run(desktop, tmp_path / "home", tmp_path, "--engine", server.url, "--max-steps", "1",
                    *(["--served-model", server.model] if named else []))
        asked = [b["model"] for b in server.chats]
    assert asked == ["Hcompany/Holotron-12B"], proc.stderr
    said = (f"The server at {server.url} answered with the model “evil/other-model”, not “Hcompany/Holotron-12B” "
            "that Deskhand asked for")
    assert said in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and proc.returncode not in (0, 3), proc.stderr
    assert "Click" not in proc.stderr, proc.stderr  # the other model's answer was not acted on


def test_an_alias_of_the_model_asked_for_is_the_same_model(tmp_path):
    from app.domain.cancel import CancelToken
    from app.engine.remote.engine import RemoteEngine, RemoteEngineConfig
    from tests.engine_helpers import screenshot

    cards = [{"id": name, "object": "model", "owned_by": "vllm", "root": "/models/holotron", "max_model_len": 65536}
             for name in ("holotron", "Hcompany/Holotron-12B")]
    with FakeVLLM(models_reply={"object": "list", "data": cards}, answers_as="holotron") as server:
        engine = RemoteEngine(RemoteEngineConfig(url=server.url, model="Hcompany/Holotron-12B"))
        try:
            engine.load(None, CancelToken())
            proposal = engine.propose("Open the menu", screenshot(1), [], CancelToken())
        finally:
            engine.close()
    assert proposal.tool_call["tool_name"] == "click"


# ---------------------------------------------------------------- N15: a model with all-zero weights
@pytest.mark.model
def test_propose_on_a_model_with_all_zero_weights_says_it_looks_broken(tmp_path):
    from PIL import Image

    from tests.fixtures import gguf_models as gm

    pair = gm.build_pair(tmp_path / "zero", gm.TINY, skeleton=True)  # every weight zero, as a damaged file
    shot = tmp_path / "s.png"
    Image.new("RGB", (640, 400), (40, 90, 140)).save(shot)
    proc = subprocess.run([sys.executable, "-m", "app", "propose", "--threads", "1", "--ctx", "8192",
                           "--model", str(pair.text), "--mmproj", str(pair.mmproj), "--screenshot", str(shot),
                           "--task", "Open the menu"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 3, proc.stderr + proc.stdout  # propose's status for an answer that is not usable
    assert "over and over: the model looks broken (all-zero or damaged weights)." in proc.stderr, proc.stderr
    assert "Download or convert the model again" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_an_answer_cut_off_while_repeating_one_piece_says_the_model_looks_broken():
    stuck = '{"note": null, "thought": "' + "tha" * 400
    with pytest.raises(ProposalError) as caught:
        parse_answer(stuck, 1000, finished=False)
    assert caught.value.what == ("The model's answer was cut off at the token limit while repeating “tha” over and "
                                 "over: the model looks broken (all-zero or damaged weights).")
    long_thought = '{"note": null, "thought": "' + "I look for the Settings entry in the menu. " * 40
    with pytest.raises(ProposalError, match=r"cut off before it was complete \(it hit the token limit\)"):
        parse_answer(long_thought, 1000, finished=False)


def test_a_working_model_s_repetitive_text_to_type_is_not_called_broken():
    answer = {"note": None, "thought": "Draw the separator line under the title.",
              "tool_call": {"tool_name": "write", "content": "=" * 200}}
    assert parse_answer(json.dumps(answer), 1000).tool_call["content"] == "=" * 200


# ---------------------------------------------------------------- N5, N19, N21: crafted model files, said at load
def _propose(tmp_path: Path, text: Path, mmproj: Path) -> subprocess.CompletedProcess[str]:
    from PIL import Image

    shot = tmp_path / "s.png"
    Image.new("RGB", (640, 400), (40, 90, 140)).save(shot)
    return subprocess.run([sys.executable, "-m", "app", "propose", "--threads", "1", "--ctx", "8192", "--model",
                           str(text), "--mmproj", str(mmproj), "--screenshot", str(shot), "--task", "Open the menu"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def _set_u32(path: Path, key: str, value: int) -> None:
    """A header value changed in place, as a damaged or hand-edited file has it."""
    data = bytearray(path.read_bytes())
    at = data.index(key.encode()) + len(key)
    assert int.from_bytes(data[at:at + 4], "little") == 4  # GGUF_TYPE_UINT32
    data[at + 4:at + 8] = value.to_bytes(4, "little")
    path.write_bytes(bytes(data))


@pytest.mark.model
def test_a_big_endian_gguf_file_is_called_big_endian(tiny_model_pair, tmp_path):
    swapped = tmp_path / "model-be.gguf"
    data = bytearray(tiny_model_pair.text.read_bytes())
    data[4:8] = (3).to_bytes(4, "big")  # the version as a big-endian file writes it (and its other numbers)
    swapped.write_bytes(bytes(data))
    proc = _propose(tmp_path, swapped, tiny_model_pair.mmproj)
    assert proc.returncode == 2, proc.stderr
    assert "model-be.gguf is a big-endian GGUF file" in proc.stderr and "50331648" not in proc.stderr, proc.stderr
    assert "gguf_convert_endian.py" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.model
def test_a_projector_that_does_not_say_its_type_is_named_so(tiny_model_pair, tmp_path):
    from app.engine.gguf.edit import copy_without

    untyped = tmp_path / "mmproj-untyped.gguf"
    copy_without(tiny_model_pair.mmproj, untyped, lambda key: key.endswith("projector_type"))
    proc = _propose(tmp_path, tiny_model_pair.text, untyped)
    assert proc.returncode == 2, proc.stderr
    assert ("The mmproj mmproj-untyped.gguf does not say which projector it is (its header has no "
            "clip.projector_type)") in proc.stderr, proc.stderr
    assert "“”" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.model
def test_a_projector_with_an_input_size_of_zero_is_refused_at_load(tiny_model_pair, tmp_path):
    zero = tmp_path / "mmproj-zero.gguf"
    zero.write_bytes(tiny_model_pair.mmproj.read_bytes())
    _set_u32(zero, "clip.vision.image_size", 0)
    proc = _propose(tmp_path, tiny_model_pair.text, zero)
    assert proc.returncode == 2, proc.stderr
    assert ("The mmproj mmproj-zero.gguf declares an input size of 0 px (clip.vision.image_size): its vision encoder "
            "cannot take any image") in proc.stderr, proc.stderr
    assert "rejected a screenshot" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
