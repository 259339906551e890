"""The settings dialog and its parts (the engine choice, shortcut fields). Qt; may import every layer below
app.ui and the shared app.ui modules."""
