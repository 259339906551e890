"""The approval dialog, its form, the target as the user may move it, and the on-screen marker. Qt; may
import every layer below app.ui and the shared app.ui modules."""
