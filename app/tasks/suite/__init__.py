"""The live-task suite (`deskhand eval tasks`); may import `app.tasks`, `app.agent` and below, no Qt.

Task folders (task_files), their private X display, their preparation and their runs, each checked by the saved
tasks' success checks while its application is still there."""
