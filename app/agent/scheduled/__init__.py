"""Runs the operating system's scheduler starts (`deskhand task run --scheduled`): waiting for a person where a step
needs one (a desktop notification, the step handed to the Deskhand app's approval window), waiting for a locked
screen or a missing display, and History records of runs that started late, could not start or were missed."""
