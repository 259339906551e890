"""The local channel between other processes of this user (`deskhand mcp`, a scheduled saved-task run) and the
running Deskhand app: its versioned protocol, a blocking client, and the per-host consent both sides read.
Qt-free; imports only `app.domain`. The app's side of the channel is a small adapter in
app/ui/shell/agent_link.py (and handed_steps.py for a scheduled run's steps)."""
