"""The History window: past runs and a step-by-step replay of one. Qt; may import every layer below app.ui
and the shared app.ui modules."""
