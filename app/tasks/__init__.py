"""Saved tasks: format, store, saving a run, replay, checks, schedules, the live-task suite; may import agent and below.

Below it: `app.agent`, `app.link`, `app.engine`, `app.desktop`, `app.domain`; no Qt. The CLI, the UI and the MCP
server use it; the agent's worker runs a saved task through an engine it is handed (app.tasks.replay), never
importing this package."""
