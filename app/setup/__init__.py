"""Getting a working model onto this machine: the catalog, downloads, GPU detection, secrets, the setup flow and
conversion. May import `app.engine`, `app.desktop` and `app.domain`; never the agent loop, no Qt."""
