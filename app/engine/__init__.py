"""Model runtimes behind one protocol (`base.Engine`): profile, tiling, prompt, grammar, session, llama.cpp.
May import `app.domain` only; never the agent loop, the desktop or setup; no Qt."""
