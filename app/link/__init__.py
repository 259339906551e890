"""Talking to the running Deskhand app from another process; may import only `app.domain`, no Qt.

Used by `deskhand mcp`, a scheduled saved-task run, `deskhand stop` and the app itself: the versioned protocol on
the app's single-instance socket (instance), a blocking client, the per-host consent both sides read, and how to
start this install again from outside (self_command). The app's side of the channel is a small adapter in
app/ui/shell/agent_link.py (and handed_steps.py for a scheduled run's steps)."""
