"""`deskhand doctor`: readiness checks and their findings (this machine, a Wayland session, a model
server). May import app.domain, app.desktop, app.engine and app.setup."""
