"""The main window and its picture of a run: task box and queue, live view, streamed text, step list,
activity. Qt; may import every layer below app.ui and the shared app.ui modules."""
