"""The Wayland desktop: screen capture and input through the xdg-desktop-portal ScreenCast and RemoteDesktop
portals, frames and the pointer position from PipeWire, stops without a global keyboard listener."""
