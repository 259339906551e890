"""Showing a window with or without taking the keyboard from the window the person is typing in.

Qt reads Qt.WA_ShowWithoutActivating into the native window only when that is created, so a window shown once
(or whose id was asked for) ignores a later change of the attribute and takes the keyboard on every show. The
platform window's own property is what the X11 backend reads at each show: set both.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget


def set_show_without_activating(widget: QWidget, on: bool = True) -> None:
    widget.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating, on)
    handle = widget.windowHandle()
    if handle is not None:
        handle.setProperty("_q_showWithoutActivating", on)
