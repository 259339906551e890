"""Model runtimes behind one protocol (Qt-free)."""
