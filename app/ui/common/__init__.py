"""What several windows of the shell share (icons, messages, screenshot view, placement, shortcuts, background work).

May import Qt and the layers below `app.ui`; never a window package, the shell or the bridge."""
