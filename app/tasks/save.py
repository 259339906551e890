"""A finished run (or one the person stopped, once it had done the job) as a saved task: the steps that were
performed (approved, edited or auto-approved), each with a crop of its screenshot around the target; typed text
the person names becomes a {variable}; what was typed into a password field (redacted in the record) becomes a
secret variable, asked for when the task runs."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path
from typing import Any

from PIL import Image

from app.agent.history.recorder import connect, run_steps
from app.agent.run_memory import REDACTED
from app.domain.actions import MODEL_SCALE
from app.domain.background import BACKGROUND, desktop_words
from app.domain.errors import DeskhandError
from app.tasks.saved_task import VARIABLE_RE, SavedStep, SavedTask, SuccessCheck, Variable, check_name, escape

CROP_HALF = 128  # px each side of the target at scale 1; the replay uses the smallest part that is unique
PERFORMED = ("approve", "edit", "auto")
SAVABLE = ("answered", "stopped")
TARGETED = ("click", "move", "drag", "scroll", "write")


def _final_attempts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last: dict[int, dict[str, Any]] = {}
    for r in rows:
        last[r["step"]] = r  # ordered by step, attempt
    return [last[k] for k in sorted(last)]


def _crop(shot: Path, call: dict[str, Any], scale: float) -> tuple[bytes, tuple[float, float], tuple[int, int],
                                                                 tuple[float, float] | None]:
    with Image.open(shot) as img:
        image = img.convert("RGB")
    px, py = call["x"] / MODEL_SCALE * image.width, call["y"] / MODEL_SCALE * image.height
    half = max(8, round(CROP_HALF * scale))
    box = (max(0, int(px) - half), max(0, int(py) - half), min(image.width, int(px) + half),
           min(image.height, int(py) + half))
    buf = io.BytesIO()
    image.crop(box).save(buf, "PNG")
    end = None
    if "to_x" in call:
        end = (call["to_x"] / MODEL_SCALE * image.width - px, call["to_y"] / MODEL_SCALE * image.height - py)
    return buf.getvalue(), (px - box[0], py - box[1]), image.size, end


def _variables(values: dict[str, str]) -> list[Variable]:
    for name, value in values.items():
        if not VARIABLE_RE.match(name):
            raise DeskhandError(f"“{name}” cannot be a variable name.",
                                "Use letters, digits and underscores, starting with a letter (at most 32).")
        if not value:
            raise DeskhandError(f"The variable {name} needs the text it stands for (--var {name}=TEXT).",
                                "Give the text the run typed that should change from one run to the next.")
    return [Variable(n, v) for n, v in values.items()]


def _template(text: str, variables: list[Variable]) -> str:
    """`text` as a template: its braces doubled, each variable's text replaced by {name} — in one pass, the
    longest text first where two overlap ("alice@example.com" before "alice"), and never inside a {name} put
    there already."""
    named = {escape(v.default): v.name for v in variables if v.default}
    if not named:
        return escape(text)
    pattern = re.compile("|".join(re.escape(t) for t in sorted(named, key=len, reverse=True)))
    return pattern.sub(lambda m: "{" + named[m.group(0)] + "}", escape(text))


def _performed(row: dict[str, Any], call: dict[str, Any]) -> bool:
    """The step was done as recorded: approved (as proposed, as the person edited it, or by auto-approve) and
    carried out without an error — not skipped, rejected, refused, stopped, stale, or cut short by the person
    taking over the mouse."""
    if row["decision"] not in PERFORMED:
        return False
    if call.get("tool_name") in ("wait", "answer", "done", "ask_user"):
        return True  # no input: nothing to carry out
    executed = row["executed"]
    return isinstance(executed, dict) and not executed.get("stopped")  # the executor's outcome: it was done


def save_run(db: Path, runs_dir: Path, run_id: int, name: str, values: dict[str, str] | None = None
             ) -> SavedTask:
    """The run as a task called `name`; `values`: variable name -> the typed text it stands for."""
    name = check_name(name)
    con = connect(db)
    try:
        run = con.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if run is None:
            raise DeskhandError(f"There is no run {run_id} in the history.", "See the run numbers in History.")
        rows = run_steps(con, run_id)
    finally:
        con.close()
    if run["status"] not in SAVABLE:  # a stopped run did what it did until the person stopped it: often the job
        raise DeskhandError(f"Run {run_id} did not do its job ({run['status']}); only a run that finished, or one "
                            "that was stopped once it had, can be saved.", "Save a run whose outcome is “answered” "
                                                                           "or “stopped”.")
    if run["private"]:
        raise DeskhandError(f"Run {run_id} was made in private mode: no screenshots were kept, so its targets "
                            "cannot be found again.", "Run the task once with private mode off, then save that run.")
    variables = _variables(dict(values or {}))
    task_text = _template(run["task"], variables)
    steps, secrets, answer = [], 0, ""
    for r in _final_attempts(rows):
        call = r["edited_action"] or r["action"]  # the person's edit, where they made one, is what was done
        if call is None or not _performed(r, call):
            continue  # skipped, rejected, refused, invalid or not carried out: not part of what worked
        if call.get("tool_name") in ("answer", "done"):
            answer = str(call.get("content", ""))
            continue
        if call.get("tool_name") == "ask_user":
            continue
        call = dict(call)
        if call.get("tool_name") in ("write", "type"):
            text = str(call.get("content", ""))
            if text == REDACTED:
                secrets += 1
                var = Variable(f"secret{secrets}" if secrets > 1 else "secret", "", secret=True)
                variables.append(var)
                call["content"] = "{" + var.name + "}"
            else:
                call["content"] = _template(text, variables)
        crop, offset, size, end = b"", (0.0, 0.0), (0, 0), None
        if call.get("tool_name") in TARGETED and "x" in call and r["screenshot"]:
            shot = runs_dir / str(run_id) / r["screenshot"]
            if not shot.exists():
                raise DeskhandError(f"The screenshot of step {r['step']} of run {run_id} is missing ({shot}).",
                                    "A run whose screenshots were deleted cannot be saved as a task.")
            scale = float((r["monitor"] or {}).get("scale", 1.0) or 1.0)
            crop, offset, size, end = _crop(shot, call, scale)
        steps.append(SavedStep(call, r["description"], crop, offset, end, size, r.get("element"),
                               "", r["raw_output"] or ""))
    if not steps:
        raise DeskhandError(f"Run {run_id} performed no step, so there is nothing to do again.",
                            "Save a run that did something.")
    for v in variables:
        if not v.secret and "{" + v.name + "}" not in task_text + "".join(str(s.action.get("content", ""))
                                                                     for s in steps):
            raise DeskhandError(f"“{v.default}” ({v.name}) is neither in the task nor in any typed text of run "
                                f"{run_id}.", "Name text the run really typed.")
    return SavedTask(name, task_text, tuple(steps), tuple(variables), answer, run_id, time.time(), run["model"],
                     _where_recorded(run["settings"]))


def _where_recorded(settings: str | None) -> dict[str, Any]:
    """{"desktop": "background"} for a run that worked in Deskhand's desktop: its steps' pictures are of that
    desktop, so the task is done there again (kept in the file's "extra", which older Deskhands keep as it is)."""
    try:
        meta = json.loads(settings or "{}")
    except ValueError:
        return {}
    return {"desktop": "background"} if isinstance(meta, dict) and desktop_words(meta.get("desktop")) == BACKGROUND \
        else {}


def last_screenshot(db: Path, runs_dir: Path, run_id: int) -> tuple[Image.Image, int]:
    """The run's last screenshot (the screen as the run left it, or nearly) and its monitor's number."""
    con = connect(db)
    try:
        rows = run_steps(con, run_id)
    finally:
        con.close()
    for r in reversed(rows):
        if r["screenshot"] and (runs_dir / str(run_id) / r["screenshot"]).exists():
            with Image.open(runs_dir / str(run_id) / r["screenshot"]) as img:
                return img.convert("RGB"), int((r["monitor"] or {}).get("index", 0) or 0)
    raise DeskhandError(f"Run {run_id} kept no screenshot, so a region of its screen cannot be recorded.",
                        "Use a file or window check instead, or save a run made with private mode off.")


def region_check(db: Path, runs_dir: Path, run_id: int, region: tuple[int, int, int, int]) -> SuccessCheck:
    """A region check from the run's last screenshot: `region` (x, y, width, height in its pixels)."""
    from app.tasks.region_check import recorded_region

    image, monitor = last_screenshot(db, runs_dir, run_id)
    try:
        png = recorded_region(image, region)
    except ValueError as exc:
        raise DeskhandError(f"The region check cannot be recorded: {exc}.",
                            "Give X,Y,WIDTH,HEIGHT inside the screenshot (pixels from its top-left corner).") from exc
    return SuccessCheck("region", region=region, image_png=png, monitor=monitor)


def python_check(path: Path, timeout_s: float) -> SuccessCheck:
    """A Python check from its file: the code is kept in the task, so the task file stays the whole task."""
    from app.tasks.python_check import check_source
    from app.tasks.saved_task import MAX_CHECK_TIMEOUT_S

    try:
        code = path.expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DeskhandError(f"The Python check {path} could not be read: {exc}.", "Give the path of a .py file.") \
            from exc
    problem = check_source(code, str(path))
    if problem:
        raise DeskhandError(f"The Python check cannot be used: {problem}.",
                            "It must define `def check(ctx):` returning True, False or a text saying what is "
                            "wrong (README: Saved tasks).")
    if not 0 < timeout_s <= MAX_CHECK_TIMEOUT_S:
        raise DeskhandError(f"--check-timeout {timeout_s:g} is not between 0 and {MAX_CHECK_TIMEOUT_S:g} seconds.",
                            "Give a few seconds, e.g. --check-timeout 20.")
    return SuccessCheck("python", path.name, code=code, timeout_s=timeout_s)
