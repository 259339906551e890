"""A saved task at a set time; may import `app.tasks`, `app.agent`, `app.link` and below, no Qt.

Writing it into the operating system's own scheduler (os_scheduler, when; systemd_timer, launchd_agent,
windows_task), and the run that scheduler starts (`deskhand task run --scheduled`): waiting for a person where a
step needs one (a desktop notification, the step handed to the Deskhand app's approval window), waiting for a
locked screen or a missing display, and History records of runs that started late, could not start or were
missed (occasion, person, handover)."""
