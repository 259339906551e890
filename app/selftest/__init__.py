"""`deskhand --self-test [--model TEXT.gguf --mmproj MMPROJ.gguf]`: is this installation complete?

Written for the frozen (PyInstaller) build, where a module, data file, Qt plugin or shared library that the
build forgot only shows up when a user reaches the code that needs it. Every check prints one line,
`PASS name: detail` or `FAIL name: detail` (`INFO` lines only inform); the exit status is 0 only when no
check failed. Nothing is skipped silently: a check that cannot run here (no display, no model given) says
so in its PASS line, and what it verified instead.

Checks: every `app` module imports (and, in a frozen build, every module the build listed is there); the
third-party modules that are imported lazily (pynput and mss backends, Xlib, keyring backends, Pillow
plugins, Jinja2, TLS certificates, package metadata); the resources (profile, risk rules, icons, model
catalog); Qt (a QApplication on the display, or offscreen without one; a hidden native window; the image
format and SVG icon engine plugins); llama.cpp and mtmd (and whether GPU offload is compiled in); with a
model, one proposal on a synthetic screenshot through the real engine.
"""
