#!/usr/bin/env bash
# Installs Deskhand @VERSION@ for this user (no root, no Python needed), from the unpacked tarball:
#
#   ./install.sh [--autostart] [--launch] [--no-menu]
#
#   the app     ~/.local/opt/deskhand/        (replaces an earlier version there)
#   command     ~/.local/bin/deskhand         (a symbolic link)
#   menu entry  ~/.local/share/applications/deskhand.desktop, icons in ~/.local/share/icons/hicolor/
#   autostart   ~/.config/autostart/deskhand.desktop (only with --autostart)
#
# Options: --autostart   also start Deskhand when you log in
#          --launch      start Deskhand when the installation is done
#          --no-menu     no menu entry and no icons (the command only)
# Environment: DESKHAND_PREFIX (default ~/.local) moves the app and the command; XDG_DATA_HOME and
#          XDG_CONFIG_HOME are honoured for the menu entry, the icons and the autostart entry.
# Uninstall with ~/.local/opt/deskhand/uninstall.sh (settings, runs and models are kept unless --purge).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
AUTOSTART=0 LAUNCH=0 MENU=1
for arg in "$@"; do
  case "$arg" in
    --autostart) AUTOSTART=1 ;;
    --launch) LAUNCH=1 ;;
    --no-menu) MENU=0 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done
say() { printf '==> %s\n' "$*"; }

[ -n "${HOME:-}" ] || { echo "install.sh: HOME is not set" >&2; exit 1; }
if [ "$(id -u)" = 0 ] && [ -n "${SUDO_USER:-}" ] && [ -z "${DESKHAND_PREFIX:-}" ]; then
  echo "install.sh: this installs Deskhand for one user: run it as $SUDO_USER, without sudo." >&2
  exit 1
fi
PREFIX=${DESKHAND_PREFIX:-$HOME/.local}
DEST="$PREFIX/opt/deskhand"
BIN="$PREFIX/bin"
DATA=${XDG_DATA_HOME:-$HOME/.local/share}
CONFIG=${XDG_CONFIG_HOME:-$HOME/.config}
SRC="$HERE/deskhand"
ICONS_SRC="$SRC/_internal/resources/icons"

[ -x "$SRC/deskhand" ] || { echo "install.sh: $SRC/deskhand is missing: unpack the whole tarball first" >&2; exit 1; }
if [ "$(uname -m)" != "@ARCH@" ]; then
  echo "install.sh: this is Deskhand for @ARCH@; this computer is $(uname -m)." >&2
  exit 1
fi
need=@GLIBC@
have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}' || true)
if [ -n "$have" ] && [ "$need" != 0 ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
  echo "install.sh: this build needs glibc $need or newer; this system has $have. Deskhand will not start here." >&2
  exit 1
fi

# ------------------------------------------------------------------ the app
say "Installing Deskhand @VERSION@ into $DEST"
mkdir -p "$PREFIX/opt" "$BIN"
rm -rf "$DEST.new" "$DEST.old"
cp -a "$SRC" "$DEST.new"
cp "$HERE/uninstall.sh" "$DEST.new/uninstall.sh"
chmod 755 "$DEST.new/uninstall.sh"
[ -d "$DEST" ] && mv "$DEST" "$DEST.old"
mv "$DEST.new" "$DEST"
rm -rf "$DEST.old"
ln -sfn "$DEST/deskhand" "$BIN/deskhand"

# ------------------------------------------------------------------ menu entry, icons, autostart
exec_field() {  # the desktop entry spec's quoting for Exec= (quoted argument, then string escapes)
  local p=$1
  if printf '%s' "$p" | grep -q '[[:space:]"'"'"'\\><~|&;$*?#()`]'; then
    p=$(printf '%s' "$p" | sed -e 's/\\/\\\\\\\\/g' -e 's/["`$]/\\\\&/g')
    p="\"$p\""
  fi
  printf '%s' "${p//%/%%}"
}

write_entry() {  # write_entry TARGET [extra line]
  local target=$1 extra=${2:-} exec line
  exec=$(exec_field "$DEST/deskhand")
  mkdir -p "$(dirname "$target")"
  {
    while IFS= read -r line || [ -n "$line" ]; do
      line=${line//@EXEC@/"$exec"}
      line=${line//@TRYEXEC@/"$DEST/deskhand"}
      printf '%s\n' "$line"
    done <"$HERE/deskhand.desktop.in"
    [ -z "$extra" ] || printf '%s\n' "$extra"
  } >"$target.tmp"
  chmod 644 "$target.tmp"
  mv "$target.tmp" "$target"
}

if [ "$MENU" = 1 ]; then
  hicolor="$DATA/icons/hicolor"
  icons=0
  for size in 16 22 24 32 48 64 128 256 512; do
    if [ -f "$ICONS_SRC/deskhand-$size.png" ]; then
      mkdir -p "$hicolor/${size}x$size/apps"
      cp "$ICONS_SRC/deskhand-$size.png" "$hicolor/${size}x$size/apps/deskhand.png"
      icons=$((icons + 1))
    fi
  done
  if [ -f "$ICONS_SRC/deskhand.svg" ]; then
    mkdir -p "$hicolor/scalable/apps"
    cp "$ICONS_SRC/deskhand.svg" "$hicolor/scalable/apps/deskhand.svg"
    icons=$((icons + 1))
  fi
  [ "$icons" -gt 0 ] || echo "install.sh: warning: this build has no icons; the menu shows a generic one" >&2
  write_entry "$DATA/applications/deskhand.desktop"
  say "Menu entry: $DATA/applications/deskhand.desktop ($icons icon files)"
  if command -v update-desktop-database >/dev/null; then update-desktop-database -q "$DATA/applications" 2>/dev/null || true; fi
  if command -v gtk-update-icon-cache >/dev/null && [ -f "$hicolor/index.theme" ]; then
    gtk-update-icon-cache -q -t "$hicolor" 2>/dev/null || true
  fi
  touch "$hicolor" 2>/dev/null || true  # icon themes notice new icons by the folder's time
fi
if [ "$AUTOSTART" = 1 ]; then
  write_entry "$CONFIG/autostart/deskhand.desktop" "X-GNOME-Autostart-enabled=true"
  say "Autostart: $CONFIG/autostart/deskhand.desktop (Deskhand starts when you log in)"
fi

case ":$PATH:" in
  *":$BIN:"*) ;;
  *) echo "Note: $BIN is not on your PATH; add it to use \`deskhand\` in a terminal (the menu entry works anyway)." ;;
esac
say "Done. Start Deskhand from your applications menu, or run: $BIN/deskhand"
echo "    Uninstall: $DEST/uninstall.sh"
if [ "$LAUNCH" = 1 ]; then
  if command -v setsid >/dev/null; then setsid "$DEST/deskhand" >/dev/null 2>&1 </dev/null &
  else nohup "$DEST/deskhand" >/dev/null 2>&1 </dev/null & fi
fi
