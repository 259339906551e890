"""The local channel between `deskhand mcp` (or any later command) and the running Deskhand app: its versioned
protocol, a blocking client, and the per-host consent both sides read. Qt-free; imports only `app.domain`. The
app's side of the channel is a small adapter in app/ui/shell/agent_link.py."""
