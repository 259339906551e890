""""Test on this computer" borrows the model the agent worker holds, never loading a second copy beside it (an
8 GB graphics card does not hold two): the real worker with the real llama.cpp engine on the tiny model (the app's
own engine factory), a real task on the private Xvfb (dry run) that loads it, the benchmark downloaded from a
loopback hub, and the live engines counted while the test's items are asked. A task running refuses the test
(before anything is downloaded); the test running refuses a task; settings that differ replace the model there."""

from __future__ import annotations

import gc
import queue
import threading
import time

import pytest

from app.agent.approval import Decision
from app.agent.worker import AgentWorker
from app.domain import events as ev
from app.domain.cancel import CancelToken
from app.domain.errors import Cancelled, DeskhandError, ModelBusy
from app.domain.paths import default_paths
from app.domain.settings import Settings
from app.engine.llama.engine import LocalEngine
from app.eval.runner import ItemResult
from app.eval.trial.sample import Listener, run_sample
from tests import eval_datasets as ds
from tests.engine_helpers import compact_profile
from tests.loopback_hub import LoopbackHub

pytestmark = [pytest.mark.model, pytest.mark.xdisplay]


def loaded_engines() -> list[LocalEngine]:
    """Every llama.cpp engine in this process that holds a loaded model now."""
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, LocalEngine) and o._rt is not None]


def _next(got: queue.Queue[ev.Event], kind: type, timeout: float = 180) -> ev.Event:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        e = got.get(timeout=max(0.1, end - time.monotonic()))
        if isinstance(e, (kind, ev.RunFinished)):
            return e
    raise AssertionError(f"no {kind.__name__} within {timeout} s")


@pytest.fixture
def hub(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    with LoopbackHub() as h:
        monkeypatch.setenv("HF_ENDPOINT", h.endpoint)
        root = ds.write_screenspot_v2(tmp_path / "published")
        for p in sorted(root.iterdir()):
            h.add("OS-Copilot/ScreenSpot-v2", p.name, p.read_bytes(), commit="b" * 40, dataset=True)
        yield h


class Watch:
    """The test's listener: at each item (on the thread that asks the model), what is alive and who runs."""

    def __init__(self, worker: AgentWorker, settings: Settings, before: list[LocalEngine]) -> None:
        self.worker, self.settings, self.before = worker, settings, before
        self.seen: list[tuple[list[LocalEngine], bool, bool, str]] = []

    def item(self, i: int, n: int, r: ItemResult) -> None:
        live = [e for e in loaded_engines() if all(e is not b for b in self.before)]
        refused = not self.worker.start_task("a task typed while the test runs", self.settings)
        self.seen.append((live, self.worker.lent, refused, threading.current_thread().name))

    def listener(self) -> Listener:
        return Listener(say=lambda text: None, item=self.item, download=lambda p: None, phase=lambda p: None)


def test_the_test_borrows_the_model_a_task_loaded_and_never_loads_a_second(target, tiny_model_pair, hub, tmp_path):
    before = loaded_engines()  # whatever other tests in this process keep loaded
    paths = default_paths(tmp_path / "home").ensure()
    evals = paths.data / "evals"
    got: queue.Queue[ev.Event] = queue.Queue()
    worker = AgentWorker(paths, got.put, dry_run=True).start()  # the app's own engine factory: llama.cpp
    settings = Settings(text_model=str(tiny_model_pair.text), mmproj=str(tiny_model_pair.mmproj),
                        profile=str(compact_profile(tmp_path)), context_size=32768, step_limit=4)

    def ours() -> list[LocalEngine]:
        return [e for e in loaded_engines() if all(e is not b for b in before)]

    try:
        # a task loads the model and waits for the person's decision
        assert worker.start_task("Open the settings", settings)
        assert isinstance(_next(got, ev.StepProposed), ev.StepProposed)
        [task_engine] = ours()

        # the test while the task runs: refused, and nothing downloaded, nothing written
        with pytest.raises(ModelBusy) as busy:
            run_sample(settings, "screenspot-v2", evals, CancelToken(), Watch(worker, settings, before).listener(),
                       download=True, owner=worker)
        assert "A task is running" in busy.value.what and "never holds two copies" in busy.value.todo
        assert hub.seen == [] and not evals.exists()
        assert worker.decide(1, Decision("stop"))
        assert _next(got, ev.RunFinished).outcome == "stopped"
        assert ours() == [task_engine]  # kept loaded for the next task

        # the test between tasks: the task's engine, on the worker's thread; a task typed meanwhile is refused
        watch = Watch(worker, settings, before)
        out, summary = run_sample(settings, "screenspot-v2", evals, CancelToken(), watch.listener(), download=True,
                                  owner=worker)
        assert summary["complete"] and summary["variants"][""]["items"] == 4 == len(watch.seen)
        for live, lent, refused, thread in watch.seen:
            assert len(live) == 1 and live[0] is task_engine, f"{len(live)} models loaded during the test"
            assert lent and refused and thread == "deskhand-worker"
        assert summary["engine"]["kind"] == "local" and summary["engine"]["model"]
        assert ours() == [task_engine] and not worker.lent  # still loaded, and lent no more
        assert (out / "results.jsonl").read_text().count("\n") == 4

        # the test with other settings (the dialog's fields, not saved): the model is replaced, not doubled
        other = settings.replace(tile_budget=5)
        watch = Watch(worker, other, before)
        _out, summary = run_sample(other, "screenspot-v2", evals, CancelToken(), watch.listener(), owner=worker)
        assert summary["complete"] and len(watch.seen) == 4
        assert all(len(live) == 1 and live[0] is not task_engine for live, *_ in watch.seen)
        assert task_engine._rt is None  # released before the other was loaded

        # and the next task gets its own model back, again alone
        assert worker.start_task("Open the settings", settings)
        assert isinstance(_next(got, ev.StepProposed), ev.StepProposed)
        [again] = ours()
        assert again is not watch.seen[0][0][0]
        worker.stop()
        assert _next(got, ev.RunFinished).outcome == "stopped"
    finally:
        worker.shutdown()
    assert ours() == []


def test_stop_while_the_worker_loads_the_model_for_the_test_leaves_no_folder(tiny_model_pair, hub, tmp_path):
    """Stop arrives before the test's turn on the worker: Cancelled, and no empty results folder in the list."""
    paths = default_paths(tmp_path / "home").ensure()
    evals = paths.data / "evals"
    worker = AgentWorker(paths, lambda e: None, dry_run=True).start()
    settings = Settings(text_model=str(tiny_model_pair.text), mmproj=str(tiny_model_pair.mmproj),
                        profile=str(compact_profile(tmp_path)))
    token = CancelToken()

    def phase(p: str) -> None:
        if p == "loading":
            token.cancel("stopped by you")

    listen = Listener(say=lambda text: None, item=lambda i, n, r: None, download=lambda p: None, phase=phase)
    try:
        with pytest.raises(Cancelled):
            run_sample(settings, "screenspot-v2", evals, token, listen, download=True, owner=worker)
        assert list(evals.iterdir()) == [] and not worker.lent and not worker.busy
    finally:
        worker.shutdown()


def test_the_worker_refuses_to_lend_before_it_runs(tmp_path):
    worker = AgentWorker(default_paths(tmp_path / "home").ensure(), lambda e: None)
    with pytest.raises(DeskhandError, match="not ready to run the model"):
        worker.with_model(Settings(), CancelToken(), lambda engine, info: None)
    assert not worker.busy


def test_a_job_longer_than_the_wait_slice_returns_its_result(tmp_path):
    """with_model waits for the job in slices of half a second; a job that takes longer (every real model test)
    returns its result. On Python 3.10 a slice's timeout raised concurrent.futures.TimeoutError, which is not the
    builtin TimeoutError there: the test failed at once with "Something went wrong" while the job went on."""
    from tests.scripted_engine import ScriptedEngine

    worker = AgentWorker(default_paths(tmp_path / "home").ensure(), lambda e: None,
                         engine_factory=lambda s: ScriptedEngine([])).start()
    settings = Settings(text_model="model.gguf", mmproj="mmproj.gguf")

    def job(engine, info) -> str:
        time.sleep(1.5)  # longer than a slice, however busy the machine: its length is what is tested
        return "measured"

    try:
        assert worker.with_model(settings, CancelToken(), job) == "measured"
        assert not worker.lent and not worker.busy
    finally:
        worker.shutdown()
