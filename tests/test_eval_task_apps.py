"""The shipped live tasks (resources/eval_tasks) for real: each task's setup starts its application on a private
display (Xvfb + jwm, as `deskhand eval tasks` makes it) in a fresh home; its check fails before the task is done
and passes after a person (xdotool here) did it; afterwards the application is gone and the home deleted."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from app.tasks.region_check import grab_screen
from app.tasks.suite.preparation import Prepared, TaskSkipped, choose_app, prepared
from app.tasks.suite.private_display import PrivateDisplay, missing_programs
from app.tasks.suite.run import judge
from app.tasks.suite.task_files import SuiteTask, load_suite, load_task
from tests.desktop import REPO, missing_tools, wait_until

pytestmark = pytest.mark.xdisplay
SUITE = REPO / "resources" / "eval_tasks"


class Hand:
    """A person at the task's display, through xdotool."""

    def __init__(self, display: str) -> None:
        self.env = {**os.environ, "DISPLAY": display}
        self.display = display

    def x(self, *args: str) -> str:
        return subprocess.run(["xdotool", *args], env=self.env, capture_output=True, text=True, check=True,
                              timeout=60).stdout.strip()

    def focus(self, title: str) -> None:
        """Wait for a window whose title matches, and give it the keyboard."""
        wid = self.x("search", "--sync", "--name", title).splitlines()[0]
        self.x("windowactivate", "--sync", wid)

    def type(self, text: str) -> None:
        self.x("type", "--delay", "40", text)

    def key(self, *keys: str) -> None:
        self.x("key", "--delay", "100", *keys)

    def click(self, x: int, y: int) -> None:
        self.x("mousemove", "--sync", str(x), str(y), "click", "1")


def write_note(h: Hand, ready: Prepared) -> str:
    h.focus("shopping.txt")
    h.type("Buy milk and eggs")
    h.key("ctrl+s")
    return ""


def replace_name(h: Hand, ready: Prepared) -> str:
    h.focus("letter.txt")
    h.key("ctrl+Home", "Right", "Right", "Right", "Right", "Right", "shift+Right", "shift+Right", "shift+Right")
    h.type("Alice")
    h.key("ctrl+s")
    return ""


def line_numbers(h: Hand, ready: Prepared) -> str:
    h.focus("notes.txt")
    h.key("alt+e")
    h.key("Up", "Return")  # Preferences…, the Edit menu's last item
    h.focus("Mousepad Preferences")
    h.key("Tab", "space")  # the first check box of its View page: Show line numbers
    return ""


def new_folder(h: Hand, ready: Prepared) -> str:
    h.focus("work")
    h.key("ctrl+shift+n")
    h.focus("Creating New Folder")
    h.key("ctrl+a")
    h.type("Invoices 2024")
    h.key("Return")
    return ""


def rename(h: Hand, ready: Prepared) -> str:
    h.focus("work")
    h.type("draft")  # the icon view's type-ahead selects draft.txt
    h.key("Escape", "F2")
    h.focus("Rename File")
    h.key("ctrl+a")
    h.type("report.txt")
    h.key("Return")
    return ""


def count_answer(h: Hand, ready: Prepared) -> str:
    return "There are 4 files ending in .txt."


def multiply(h: Hand, ready: Prepared) -> str:
    h.focus("galculator")
    h.key("3", "7", "KP_Multiply", "4", "3", "KP_Enter")  # keypad keys: no shift level for xdotool to juggle
    h.key("ctrl+c")
    return ""


def square_root(h: Hand, ready: Prepared) -> str:
    h.focus("galculator")
    h.key("1", "7", "6", "4", "r", "ctrl+c")  # r: galculator's square root key
    return ""


def follow_link(h: Hand, ready: Prepared) -> str:
    """Click the page's first link, found by its colour (the browsers' link blue, #0000EE)."""
    h.focus("Welcome")
    pixels = np.asarray(grab_screen(0, h.display).convert("RGB")).astype(int)
    # pure blue only: jwm's title bar (15, 86, 201) is bluish too, and a click there follows nothing
    blue = (pixels[:, :, 0] < 40) & (pixels[:, :, 1] < 40) & (pixels[:, :, 2] > 200)
    ys, xs = np.nonzero(blue)
    assert len(ys), "no link on the screen"
    first = ys < ys.min() + 12  # the top-most link's row: “See the price list”
    h.click(int(np.median(xs[first])), int(np.median(ys[first])))
    return ""


BY_HAND: dict[str, Callable[[Hand, Prepared], str]] = {
    "editor-write-note": write_note, "editor-replace-name": replace_name, "settings-line-numbers": line_numbers,
    "files-new-folder": new_folder, "files-rename": rename, "files-count-answer": count_answer,
    "calculator-multiply": multiply, "calculator-square-root": square_root, "browser-follow-link": follow_link,
}


@pytest.fixture(scope="module")
def display(private_x, tmp_path_factory):
    missing = missing_programs() + missing_tools("xdotool")
    if missing:
        pytest.skip(f"missing desktop test tools: {', '.join(missing)}")
    with PrivateDisplay(tmp_path_factory.mktemp("suite-display")) as d:
        yield d.display


def statuses(task: SuiteTask, ready: Prepared, answer: str) -> list[Any]:
    return [c["status"] for c in judge(task, ready, {}, answer)]


def test_the_shipped_suite_loads_whole_and_covers_a_desktops_applications():
    entries = load_suite(SUITE)
    assert all(isinstance(e, SuiteTask) for e in entries), [e for e in entries if not isinstance(e, SuiteTask)]
    assert len(entries) >= 8 and {e.name for e in entries} == set(BY_HAND)
    programs = {a.program for e in entries for a in e.apps}
    assert {"mousepad", "pcmanfm", "galculator"} <= programs and {"firefox-esr", "dillo"} <= programs
    assert all(e.check_code and e.task and e.apps for e in entries)


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_a_shipped_task_starts_its_application_and_its_check_tells_done_from_not_done(name, display, tmp_path):
    task = load_task(SUITE / name)
    try:
        app = choose_app(task)
    except TaskSkipped as exc:
        pytest.skip(f"{name}: {exc.what}")
    assert app is not None
    with prepared(task, display, tmp_path / "logs") as ready:
        assert ready.window and app.window in ready.window  # its window was on the screen before the run
        assert statuses(task, ready, "") == ["failed"]
        answer = BY_HAND[name](Hand(display), ready)
        wait_until(lambda: statuses(task, ready, answer) == ["passed"], 30, f"{name}'s check to pass", 0.5)
        home = ready.home
    assert not home.exists()  # the temporary home is gone
    assert name != "files-count-answer" or statuses(task, ready, "3") == ["failed"]
