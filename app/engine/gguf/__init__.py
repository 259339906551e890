"""GGUF files on disk, in pure Python: reading headers, editing a value in place, checking a text model +
projector pair. May import app.domain and the shared app.engine modules; never llama_cpp."""
