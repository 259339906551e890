"""The PySide6 shell: renders the worker's events and sends it requests. Main thread only, except where a
module says otherwise (the agent host's sink and the hide hook run on the worker thread)."""
