"""The bridge between the Qt shell and the Qt-free agent: the worker thread that runs a task (AgentHost), what
keeps the UI thread free while a model loads or answers, the batching of streamed text, and hiding Deskhand's own
windows before a capture. Imports the core layers and app.ui's shared widgets; never a window or the shell."""
