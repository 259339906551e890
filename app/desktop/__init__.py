"""What touches the screen and the input devices: capture, displays and windows, the executor and its input
backends, the stops. May import `app.domain` only; no Qt, no model."""
