"""`deskhand doctor`: readiness checks of every layer and their findings; may import `app.setup`, `app.agent` and below.

This machine (Python, packages, GPU and llama.cpp, display, capture, input, keyring, folders), the history
database (through the recorder's app.agent.history.database_file), the model files, a Wayland session, a model server.
It sits above setup and agent because it checks what both own; no Qt."""
