"""The application shell: composition root, launch, tray, global hotkeys, single instance, quick task, the
agent host. Qt; may import every layer below app.ui and the shared app.ui modules."""
