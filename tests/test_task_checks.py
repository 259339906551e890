"""Success checks beyond files and windows, without a display: a Python check run in a real child process (what
it returns, raises, or how it hangs or dies, each said specifically), a region compared with its tolerance, the
task format versions that carry them, and the live-task folder format's own errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageEnhance, ImageFont

from app.domain.errors import DeskhandError
from app.tasks.python_check import CheckRequest, check_source, run_python_check
from app.tasks.region_check import compare_region, recorded_region
from app.tasks.save import python_check
from app.tasks.saved_task import SavedStep, SavedTask, SuccessCheck, from_json, read_task
from app.tasks.suite.task_files import BrokenTask, SuiteTask, load_suite
from tests.desktop import REPO

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # fonts-dejavu-core, which Deskhand's Qt needs


def outcome(code: str, tmp_path: Path, timeout: float = 30.0, **ctx: object):
    return run_python_check(CheckRequest(code, str(tmp_path / "check.py"), tmp_path, tmp_path, **ctx), timeout)


@pytest.mark.parametrize(("code", "status", "said"), [
    ("def check(ctx):\n    return True\n", "passed", "returned True"),
    ("def check(ctx):\n    return False\n", "failed", "returned False"),
    ("def check(ctx):\n    return 'the file is empty'\n", "failed", "the file is empty"),
    ("def check(ctx):\n    assert ctx.vars['n'] == '2', 'n is not 2'\n    return True\n", "failed", "n is not 2"),
    ("def check(ctx):\n    x = 1\n    raise ValueError('no such row')\n", "broken",
     "check.py raised ValueError: no such row (check.py, line 3)"),
    ("def check(ctx):\n    return None\n", "broken", "returned None; it should return True, False or a text"),
    ("def check(ctx)\n    return True\n", "broken", "check.py does not compile"),
    ("def verify(ctx):\n    return True\n", "broken", "defines no function check(ctx)"),
    ("import no_such_module_here\ndef check(ctx):\n    return True\n", "broken",
     "raised ModuleNotFoundError while loading"),
    ("import os\ndef check(ctx):\n    os._exit(3)\n", "broken", "ended with status 3 before it answered"),
])
def test_a_python_check_says_passed_failed_or_broken_with_why(code, status, said, tmp_path):
    got = outcome(code, tmp_path, vars={"n": "1"})
    assert (got.status, said in got.said) == (status, True), got


def test_a_python_check_sees_its_context_and_runs_in_the_work_folder(tmp_path):
    (tmp_path / "out.txt").write_text("42\n", encoding="utf-8")
    code = ("import os\nfrom pathlib import Path\n"
            "def check(ctx):\n"
            "    assert Path.cwd() == ctx.work and os.environ['HOME'] == str(ctx.home)\n"
            "    assert ctx.answer == 'done' and ctx.vars == {'who': 'bob'} and ctx.task_dir is None\n"
            "    return Path('out.txt').read_text().strip() == '42'\n")
    got = outcome(code, tmp_path, vars={"who": "bob"}, answer="done")
    assert got.passed, got.said


def _gone(pid: int) -> bool:
    """The process has ended (a zombie waiting for its parent to reap it has ended too)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _running_with(marker: str) -> list[int]:
    """The processes (as this process numbers them) whose command line holds `marker`, zombies left out: a check
    may run in a PID namespace of its own, where the numbers it sees are not these."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes() and not _gone(int(proc.name)):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def test_a_hanging_check_is_stopped_with_what_it_started(tmp_path):
    """The check starts a process of its own (which says it started, then would run on), then hangs: both end."""
    started = tmp_path / "grandchild.started"
    marker = f"deskhand-check-grandchild-{uuid.uuid4().hex}"
    grandchild = (f"# {marker}\nimport pathlib, time\npathlib.Path({str(started)!r}).write_text('yes')\n"
                  "time.sleep(600)\n")
    code = ("import subprocess, sys, time\n"
            "from pathlib import Path\n"
            "def check(ctx):\n"
            f"    subprocess.Popen([sys.executable, '-c', {grandchild!r}])\n"
            f"    while not Path({str(started)!r}).exists():\n"
            "        time.sleep(0.05)\n"
            "    while True:\n"
            "        time.sleep(1)\n")
    got = outcome(code, tmp_path, timeout=10)  # room for both to start on a busy machine
    assert got.status == "broken" and "did not finish within 10 s and was stopped" in got.said
    assert started.exists(), "the check's own process never started: nothing was tested"
    end = time.monotonic() + 30
    while _running_with(marker) and time.monotonic() < end:  # SIGKILL is sent before the outcome; this waits
        time.sleep(0.05)
    assert not _running_with(marker), "the process the check started survived it"


def test_a_check_file_is_refused_before_it_is_kept_when_it_cannot_work(tmp_path):
    assert check_source("def check(ctx):\n    return True\n", "c.py") is None
    assert "takes" not in (check_source("def check():\n    return True\n", "c.py") or "")
    assert "must take one argument" in (check_source("def check():\n    return True\n", "c.py") or "")
    assert "not async" in (check_source("async def check(ctx):\n    return True\n", "c.py") or "")
    bad = tmp_path / "bad.py"
    bad.write_text("def check(ctx):\nreturn 1\n", encoding="utf-8")
    with pytest.raises(DeskhandError, match=r"bad.py does not compile: expected an indented block"):
        python_check(bad, 20)
    good = tmp_path / "good.py"
    good.write_text("def check(ctx):\n    return True\n", encoding="utf-8")
    with pytest.raises(DeskhandError, match="--check-timeout 0 is not between"):
        python_check(good, 0)
    assert python_check(good, 5).code.startswith("def check")


def screen_with(text: str, shift: tuple[int, int] = (0, 0), size: tuple[int, int] = (400, 300)) -> Image.Image:
    """A calculator's display, as it were: a framed box with a number in a large font."""
    img = Image.new("RGB", size, (240, 240, 240))
    d = ImageDraw.Draw(img)
    x, y = 100 + shift[0], 100 + shift[1]
    d.rectangle((x, y, x + 160, y + 40), outline=(40, 40, 40), fill=(255, 255, 255))
    d.text((x + 10, y + 4), text, fill=(0, 0, 0), font=ImageFont.truetype(FONT, 28))
    return img


def test_a_region_matches_through_small_shifts_and_brightness_but_not_another_text():
    region = (95, 95, 170, 50)
    png = recorded_region(screen_with("1591"), region)
    assert compare_region(screen_with("1591"), region, png)[0]
    moved = compare_region(screen_with("1591", shift=(3, -2)), region, png)
    assert moved[0] and "(+3,-2 px from its place)" in moved[1]
    dimmer = ImageEnhance.Brightness(screen_with("1591")).enhance(0.9)
    assert compare_region(dimmer, region, png)[0]
    other = compare_region(screen_with("1597"), region, png)
    assert not other[0] and "does not look as recorded" in other[1]
    far = compare_region(screen_with("1591", shift=(40, 0)), region, png)
    assert not far[0]
    small = compare_region(screen_with("1591", size=(200, 120)), region, png)
    assert not small[0] and "outside the screen (200×120)" in small[1]
    with pytest.raises(ValueError, match="does not fit in the run's screenshot"):
        recorded_region(screen_with("x"), (390, 10, 20, 20))


def test_a_plain_region_is_compared_by_its_colour():
    plain = Image.new("RGB", (100, 100), (30, 120, 200))
    png = recorded_region(plain, (10, 10, 30, 30))
    assert compare_region(plain, (10, 10, 30, 30), png)[0]
    red = Image.new("RGB", (100, 100), (220, 30, 30))
    ok, said = compare_region(red, (10, 10, 30, 30), png)
    assert not ok and "where it was a plain" in said


def task_with(*checks: SuccessCheck) -> SavedTask:
    step = SavedStep({"tool_name": "key", "keys": ["ctrl", "s"]}, "save")
    return SavedTask("t", "do it", (step,), checks=checks)


def test_the_task_format_version_is_the_lowest_that_holds_the_task(tmp_path):
    old = task_with(SuccessCheck("file", "~/x.txt", "done"))
    assert old.as_json()["version"] == 1  # an older Deskhand still opens it
    buf = io.BytesIO()
    Image.new("RGB", (4, 3), (1, 2, 3)).save(buf, "PNG")
    new = task_with(SuccessCheck("region", region=(1, 2, 4, 3), image_png=buf.getvalue(), monitor=1),
                    SuccessCheck("python", "check.py", code="def check(ctx):\n    return True\n", timeout_s=5))
    data = json.loads(json.dumps(new.as_json()))
    assert data["version"] == 2
    back = from_json(data, "The task file t")
    assert back.checks == new.checks and back.checks[0].describe().startswith("the screen at 1,2 (4×3 px)")
    newer = tmp_path / "newer.deskhand-task.json"
    newer.write_text(json.dumps({**data, "version": 3}), encoding="utf-8")
    with pytest.raises(DeskhandError, match=r"saved by a newer Deskhand \(task format 3; this one reads 2\)"):
        read_task(newer)
    for broken, said in (({"kind": "region", "region": [1, 2, 5, 3], "image_png": data["checks"][0]["image_png"]},
                          "picture is 4×3, not 5×3"),
                         ({"kind": "python", "code": " "}, "holds no code"),
                         ({"kind": "python", "code": "x", "timeout_s": 9999}, "timeout 9999.0 s is not in"),
                         ({"kind": "sound", "target": "x"}, "unknown kind 'sound'")):
        path = tmp_path / "damaged.deskhand-task.json"
        path.write_text(json.dumps({**data, "checks": [broken]}), encoding="utf-8")
        with pytest.raises(DeskhandError, match="is damaged") as err:
            read_task(path)
        assert said in str(err.value) and "left as it is" in str(err.value)


def write_task(folder: Path, task_json: object, check: str | None = "def check(ctx):\n    return True\n") -> None:
    folder.mkdir(parents=True)
    (folder / "task.json").write_text(task_json if isinstance(task_json, str) else json.dumps(task_json),
                                      encoding="utf-8")
    if check is not None:
        (folder / "check.py").write_text(check, encoding="utf-8")


def test_each_broken_task_folder_is_said_by_name_and_the_good_ones_still_load(tmp_path):
    base = {"format": "deskhand-suite-task", "version": 1, "task": "Do a thing.",
            "app": {"command": ["true"], "window": "x"}}
    write_task(tmp_path / "a-good", base)
    write_task(tmp_path / "b-not-json", '{"format": "deskhand-suite-task",\n "version": 1 "task": "x"}')
    write_task(tmp_path / "c-no-check", base, check=None)
    write_task(tmp_path / "d-newer", {**base, "version": 2})
    write_task(tmp_path / "e-steps", {**base, "max_steps": 0})
    write_task(tmp_path / "f-approve", {**base, "auto_approve": "sometimes"})
    write_task(tmp_path / "g-typo", {**base, "max_step": 5})
    write_task(tmp_path / "h-escape", {**base, "files": {"../outside.txt": "x"}})
    write_task(tmp_path / "i-check-syntax", base, check="def check(ctx):\n  return (\n")
    write_task(tmp_path / "j-saved-missing", {**base, "saved_task": "nope.deskhand-task.json"})
    write_task(tmp_path / "k-command", {**base, "app": {"command": "mousepad"}})
    (tmp_path / "l-empty").mkdir()
    write_task(tmp_path / "m-deep", '{"a": ' * 100_000 + "1" + "}" * 100_000)
    (tmp_path / "n-fifo").mkdir()
    os.mkfifo(tmp_path / "n-fifo" / "task.json")  # no one writes to it: reading it would wait for ever
    entries = {e.name: e for e in load_suite(tmp_path)}
    assert isinstance(entries["a-good"], SuiteTask) and entries["a-good"].max_steps == 15
    said = {n: e.problem for n, e in entries.items() if isinstance(e, BrokenTask)}
    assert said == {
        "b-not-json": "task.json is not JSON (line 2, column 15: Expecting ',' delimiter)",
        "c-no-check": "check.py is missing: every task needs a success check in code (def check(ctx) -> bool | "
                      "str), or a saved task with checks of its own",
        "d-newer": "task.json was written for a newer Deskhand (suite task format 2; this one reads 1)",
        "e-steps": "task.json: “max_steps” should be a whole number from 1 to 1000, not 0",
        "f-approve": "task.json: “auto_approve” should be safe or all, not \"sometimes\"",
        "g-typo": said["g-typo"],
        "h-escape": "task.json: the file name '../outside.txt' in “files” must stay inside the work folder",
        "i-check-syntax": said["i-check-syntax"],
        "j-saved-missing": said["j-saved-missing"],
        "k-command": "task.json: “app”'s “command” should be a list of texts (the program, then its arguments)",
        "l-empty": "task.json is missing (every task folder needs one)",
        "m-deep": "task.json is nested too deeply to be a suite task",
        "n-fifo": "task.json is a named pipe (FIFO), not a task file",
    }
    assert said["g-typo"].startswith("task.json: unknown key “max_step” (known: app, auto_approve")
    assert said["i-check-syntax"].startswith("check.py does not compile: ")
    assert said["j-saved-missing"].startswith("its saved task: There is no task file ")
    with pytest.raises(DeskhandError, match="does not exist"):
        load_suite(tmp_path / "nowhere")


def test_a_task_file_with_a_python_check_is_imported_only_when_its_code_is_trusted(tmp_path):
    """A task file is shared (mailed, downloaded); its Python check is code that would run, as the person, after
    every run of the task. Importing it asks for --trust-python-check, and nothing is kept before that."""
    import os
    import subprocess
    import sys

    from tests.desktop import REPO

    marker = tmp_path / "ran"
    code = f"import pathlib\npathlib.Path({str(marker)!r}).touch()\ndef check(ctx):\n    return True\n"
    shared = tmp_path / "shared.deskhand-task.json"
    shared.write_text(json.dumps(task_with(SuccessCheck("python", "check.py", code=code)).as_json()),
                      encoding="utf-8")
    home = tmp_path / "home"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "app", "task", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=120, env={**os.environ, "DESKHAND_HOME": str(home)})

    refused = cli("import", str(shared))
    assert refused.returncode == 2, refused.stderr
    assert "holds a Python success check (check.py, 4 lines)" in refused.stderr
    assert "Nothing was imported" in refused.stderr and "--trust-python-check" in refused.stderr
    # its code is shown where it is refused: a one-line check that only runs another file shows that it does
    assert f"Its code begins:\n    import pathlib\n    pathlib.Path({str(marker)!r}).touch()" in refused.stderr
    assert cli("list").stdout.startswith("No saved tasks yet.")
    trusted = cli("import", str(shared), "--trust-python-check")
    assert trusted.returncode == 0, trusted.stderr
    assert json.loads(trusted.stdout)["imported"] == "t" and not marker.exists()  # kept, not run


def test_a_task_file_without_code_is_imported_as_before(tmp_path):
    import os
    import subprocess
    import sys

    from tests.desktop import REPO

    shared = tmp_path / "plain.deskhand-task.json"
    shared.write_text(json.dumps(task_with(SuccessCheck("file", "~/x.txt", "done")).as_json()), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "app", "task", "import", str(shared)], cwd=REPO,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DESKHAND_HOME": str(tmp_path / "home")})
    assert done.returncode == 0 and json.loads(done.stdout)["imported"] == "t", done.stderr


def test_a_python_check_s_variables_never_reach_a_file(tmp_path):
    """The run's variables may hold a password (a secret variable asked for at the run): the check gets them,
    and no file of its run holds them (they reached it as a request file in its temporary folder)."""
    code = ("import sys\nfrom pathlib import Path\n"
            "def check(ctx):\n"
            "    assert ctx.vars['password'] == 's3cret-passw0rd'\n"
            "    folder = Path(sys.argv[-1]).parent\n"
            "    holding = [p.name for p in folder.iterdir() if p.is_file() and b's3cret' in p.read_bytes()]\n"
            "    holding += [a for a in sys.argv if 's3cret' in a]\n"
            "    return f'the password is in {holding}' if holding else True\n")
    got = outcome(code, tmp_path, vars={"password": "s3cret-passw0rd"})
    assert got.passed, got.said


def test_a_check_s_own_timeout_is_the_one_that_stops_it(tmp_path):
    """The task's check says 1 s: it is stopped after 1 s (not the default 20), through the path `task run` takes."""
    from app.tasks.checks import CheckPlace, run_checks

    code = "import time\ndef check(ctx):\n    time.sleep(120)\n    return True\n"
    task = SavedTask("slow", "Wait", (SavedStep({"tool_name": "wait", "seconds": 1}),),
                     checks=(SuccessCheck("python", "slow.py", code=code, timeout_s=1.0),))
    (result,) = run_checks(task, {}, CheckPlace(home=tmp_path, work=tmp_path))
    assert result.broken and "slow.py did not finish within 1 s and was stopped" in result.said


def test_what_a_check_says_is_cut_to_a_readable_length(tmp_path):
    got = outcome("def check(ctx):\n    return 'x' * 10_000_000\n", tmp_path)
    assert got.status == "failed" and len(got.said) < 2100 and got.said.endswith("(9,998,000 more characters)")


CALLER = """
import json, sys
from pathlib import Path
from app.tasks.python_check import CheckRequest, run_python_check
work = Path(sys.argv[1])
out = run_python_check(CheckRequest(sys.stdin.read(), str(work / "check.py"), work, work), 60)
print(json.dumps([out.status, out.said]))
"""


def caller(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """A process in Deskhand's place, running a check: whether it survives the check is what is tested."""
    return subprocess.run([sys.executable, "-c", CALLER, str(tmp_path)], input=code, capture_output=True, text=True,
                          timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_a_check_that_signals_its_parent_does_not_end_deskhand(tmp_path):
    done = caller("import os\ndef check(ctx):\n    os.kill(os.getppid(), 9)\n    return 'still here'\n", tmp_path)
    assert done.returncode == 0, (done.returncode, done.stderr)  # the process that ran the check lives on
    status, said = json.loads(done.stdout)
    assert status in ("broken", "failed"), said  # its worker ended, or (in a PID namespace) the signal went nowhere


def test_in_a_pid_namespace_a_check_cannot_signal_deskhand_at_all(tmp_path):
    probe = ["unshare", "--user", "--map-current-user", "--pid", "--fork", "true"]
    if not sys.platform.startswith("linux") or subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip("this kernel lets no user make a PID namespace: only the check's parent is kept from Deskhand")
    code = ("import os, sys\ndef check(ctx):\n"
            "    os.kill(int(open(os.environ['DESKHAND_CALLER_PID_FILE']).read()), 9)\n    return True\n")
    pid_file = tmp_path / "caller.pid"
    script = f"import os; open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n" + CALLER
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], input=code, capture_output=True, text=True,
                          timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO),
                                                      "DESKHAND_CALLER_PID_FILE": str(pid_file)})
    assert done.returncode == 0, (done.returncode, done.stderr)
    status, said = json.loads(done.stdout)
    assert status == "broken" and "ProcessLookupError" in said
