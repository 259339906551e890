"""Other agents (MCP hosts) as the person at the desk sees them: the question when a host first asks to use
Deskhand, and the Settings page that lists the answers and withdraws them. Qt; may import every layer below app.ui,
the shared app.ui modules and the approval window's input guard, never the shell."""
