#!/usr/bin/env bash
# Removes Deskhand @VERSION@ as install.sh put it: the app, the `deskhand` link, the menu entry, the icons and
# the autostart entry. Your settings, runs, logs and downloaded models stay unless you add --purge.
#
#   ~/.local/opt/deskhand/uninstall.sh [--purge]
#
# Environment: the same DESKHAND_PREFIX, XDG_DATA_HOME and XDG_CONFIG_HOME as at install time.
set -euo pipefail

PURGE=0
for arg in "$@"; do
  case "$arg" in
    --purge) PURGE=1 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "uninstall.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done
say() { printf '==> %s\n' "$*"; }

[ -n "${HOME:-}" ] || { echo "uninstall.sh: HOME is not set" >&2; exit 1; }
PREFIX=${DESKHAND_PREFIX:-$HOME/.local}
DEST="$PREFIX/opt/deskhand"
BIN="$PREFIX/bin"
DATA=${XDG_DATA_HOME:-$HOME/.local/share}
CONFIG=${XDG_CONFIG_HOME:-$HOME/.config}

if pgrep -x deskhand >/dev/null 2>&1; then
  echo "Note: Deskhand is running; quit it from its tray menu (its files are removed anyway)."
fi

# Only what this installer made: entries that start this install, a link that points into it.
ours() { [ -f "$1" ] && { grep -q "^X-Deskhand-Installer=tarball" "$1" || grep -qF "$DEST/deskhand" "$1"; }; }
for entry in "$DATA/applications/deskhand.desktop" "$CONFIG/autostart/deskhand.desktop"; do
  if ours "$entry"; then rm -f "$entry"; say "Removed $entry"
  elif [ -e "$entry" ]; then echo "Kept $entry: it was not made by this installer"; fi
done
if [ -L "$BIN/deskhand" ] && [ "$(readlink "$BIN/deskhand")" = "$DEST/deskhand" ]; then
  rm -f "$BIN/deskhand"; say "Removed $BIN/deskhand"
fi
hicolor="$DATA/icons/hicolor"
removed=0
for size in 16 22 24 32 48 64 128 256 512; do
  if [ -f "$hicolor/${size}x$size/apps/deskhand.png" ]; then
    rm -f "$hicolor/${size}x$size/apps/deskhand.png"; removed=$((removed + 1))
  fi
done
if [ -f "$hicolor/scalable/apps/deskhand.svg" ]; then rm -f "$hicolor/scalable/apps/deskhand.svg"; removed=$((removed + 1)); fi
[ "$removed" = 0 ] || say "Removed $removed icon files from $hicolor"
if command -v update-desktop-database >/dev/null && [ -d "$DATA/applications" ]; then
  update-desktop-database -q "$DATA/applications" 2>/dev/null || true
fi
if command -v gtk-update-icon-cache >/dev/null && [ -f "$hicolor/index.theme" ]; then
  gtk-update-icon-cache -q -t "$hicolor" 2>/dev/null || true
fi

if [ -d "$DEST" ]; then
  case "$DEST" in
    */opt/deskhand) rm -rf "$DEST"; say "Removed $DEST" ;;
    *) echo "uninstall.sh: refusing to delete $DEST (unexpected path)" >&2; exit 1 ;;
  esac
fi

# Deskhand's own files (platformdirs' locations for "Deskhand").
STATE=${XDG_STATE_HOME:-$HOME/.local/state}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}
userdirs=("$CONFIG/Deskhand" "$DATA/Deskhand" "$STATE/Deskhand" "$CACHE/Deskhand")
if [ "$PURGE" = 1 ]; then
  for d in "${userdirs[@]}"; do
    if [ -d "$d" ]; then rm -rf "$d"; say "Removed $d"; fi
  done
else
  kept=""
  for d in "${userdirs[@]}"; do [ -d "$d" ] && kept="$kept $d"; done
  [ -z "$kept" ] || echo "Kept your settings, runs and models:$kept (delete them with --purge)"
fi
say "Deskhand is uninstalled."
