# Firefox wants its --profile folder to exist; an empty one is a fresh profile.
mkdir -p "$HOME/firefox"
