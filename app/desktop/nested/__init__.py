"""Deskhand's desktop, where a run works in the background: a nested X server (Xephyr) shown as a window on the
person's desktop, with a window manager and the apps the person lets Deskhand start in it (xephyr), the process
group that ends with Deskhand (keeper), input and stops on that display (xtest, watch), a run's capture, input,
stops and lookups opened there (session), and the X-server start it shares with the live-task suite (xserver).
May import `app.domain` and the rest of `app.desktop` but for the Wayland backend; no Qt."""
