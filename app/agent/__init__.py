"""One run from task to end: the step loop, the worker thread that owns it, the risk policy, the approval gate and
the recorder. May import `app.engine`, `app.desktop` and `app.domain`; no Qt."""
