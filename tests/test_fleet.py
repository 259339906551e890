"""Load: 8 headless agents at once, each on its own Xvfb, against one model server on loopback (llama-cpp-python's,
which serves one request at a time: the agents queue). Every run ends with a stated reason, no record is lost, and
each agent acted on its own display only. Figures are printed, not asserted (benchmarks/fleet_loopback.py writes
them to a results file)."""

from __future__ import annotations

import time

import pytest

from app.agent.history.recorder import connect, list_runs, run_steps
from app.domain.paths import default_paths
from tests.desktop import missing_tools
from tests.fleet import Agent, figures, launch, pointer, start_displays, wait_all
from tests.llama_server import API_KEY
from tests.remote_helpers import tool_profile

pytestmark = [pytest.mark.model, pytest.mark.xdisplay]
AGENTS, STEPS = 8, 2


@pytest.fixture
def displays(tmp_path):
    if missing_tools("Xvfb", "jwm", "xprop"):
        pytest.skip("Xvfb, jwm and xprop are needed")
    servers = start_displays(tmp_path / "x", AGENTS)
    yield servers
    for x in servers:
        x.stop()


def test_eight_agents_on_their_own_displays_share_one_server(llama_server, displays, tmp_path):
    profile = tool_profile(tmp_path, ("click",), budget=1)
    agents = [Agent(i, x, tmp_path / f"home{i}", tmp_path / f"out{i}") for i, x in enumerate(displays)]
    t0 = time.monotonic()
    launch(agents, llama_server.url, profile, task="Open the settings", steps=STEPS, api_key=API_KEY)
    wait_all(agents, timeout=240)
    wall = time.monotonic() - t0
    last_points = []
    for a in agents:
        assert a.exit in (0, 3, 4), f"agent {a.index} exit {a.exit}: {a.stderr[-2000:]}"
        r = a.result
        assert r["outcome"] in ("answered", "step_limit", "stopped") and r["message"], r
        assert r["display"] == a.display
        lines = a.trajectory()
        assert lines[0]["type"] == "run" and lines[0]["display"] == a.display and lines[-1]["type"] == "end"
        steps = a.steps()
        con = connect(default_paths(a.home).database)
        try:
            runs = list_runs(con)
            assert [x["status"] for x in runs] == [r["outcome"]]
            rows = run_steps(con, runs[0]["id"])
        finally:
            con.close()
        # no record lost: one database row and one trajectory line per step attempt, every step present
        assert len(rows) == len(steps) == r["steps"] and [s["step"] for s in steps] == list(range(1, r["steps"] + 1))
        executed = [s for s in steps if s.get("executed_at")]
        assert executed, f"agent {a.index} performed nothing"
        assert pointer(a) == tuple(executed[-1]["executed_at"]), f"agent {a.index}'s pointer moved elsewhere"
        last_points.append(tuple(executed[-1]["executed_at"]))
    # the same model-space click lands on a different pixel on each display: nobody acted on another's
    assert len(set(last_points)) == AGENTS
    print("fleet figures:", figures(agents, wall))
