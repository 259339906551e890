"""The embedded engine: llama.cpp through llama-cpp-python (runtime, session, vision, sampling), the only
place that imports llama_cpp. May import app.domain and the shared app.engine modules, never app.engine.remote."""
