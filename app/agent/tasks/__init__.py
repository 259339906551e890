"""Saved tasks' success checks that need more than a file read (a region of the screen, a Python function run in
a child process) and the live-task suite (`deskhand eval tasks`): task folders, their private X display, their
setup and their runs. May import `app.agent`, `app.desktop`, `app.engine` and `app.domain`; no Qt."""
