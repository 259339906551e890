"""Getting a person's attention from a run that has no window: the desktop's notifications (freedesktop
org.freedesktop.Notifications over D-Bus) and whether the screen is locked (the screen saver's GetActive, logind's
LockedHint). Both are optional: with no session bus or no service, the caller falls back to its log."""
