"""Converting a Hugging Face checkpoint into a GGUF pair: fetch, plan, llama.cpp's converter and quantizer
in child processes, finish, register. May import app.domain, app.desktop, app.engine and app.setup."""
