"""`deskhand mcp`: Deskhand as a Model Context Protocol server for other agents (coding agents, chat hosts), over
stdio or streamable HTTP on loopback, built on the official `mcp` SDK. Qt-free: a run asked for here goes through
the same loop, policy and records as the app's, and each host must first be allowed by the person at the desk."""
