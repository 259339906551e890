"""A model server of the user's over the OpenAI chat-completions API (address, client, prompt, request,
errors). May import app.domain and the shared app.engine modules, never app.engine.llama."""
