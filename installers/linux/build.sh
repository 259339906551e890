#!/usr/bin/env bash
# Builds the Linux bundle and its installer tarball from this checkout:
#
#   bash installers/linux/build.sh              PyInstaller (build.spec) → dist/deskhand/, then
#                                               dist/deskhand-<version>-linux-<arch>.tar.gz (+ .sha256)
#
# Options: --no-clean     reuse PyInstaller's cache in build/pyinstaller (faster rebuilds)
#          --no-tarball   stop after dist/deskhand/
#          --self-test    run `dist/deskhand/deskhand --self-test` (offscreen when there is no DISPLAY)
#          --appimage     also make an AppImage (needs appimagetool on PATH; it is not downloaded)
# Environment: PYTHON (default .venv/bin/python, else python3): the Python whose packages are bundled; it
#          needs PyInstaller: `$PYTHON -m pip install "pyinstaller>=6"`.
#
# The tarball holds deskhand/ (the bundle), install.sh, uninstall.sh and the desktop entry template. Users run
# `./install.sh [--autostart]`: no root, no Python; everything goes under ~/.local.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$ROOT/installers/linux"
cd "$ROOT"
CLEAN=--clean TARBALL=1 SELFTEST=0 APPIMAGE=0
for arg in "$@"; do
  case "$arg" in
    --no-clean) CLEAN= ;;
    --no-tarball) TARBALL=0 ;;
    --self-test) SELFTEST=1 ;;
    --appimage) APPIMAGE=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi
if ! "$PY" -c 'import PyInstaller' 2>/dev/null; then
  echo "build.sh: PyInstaller is not installed for $PY. Install it with:" >&2
  echo "    $PY -m pip install \"pyinstaller>=6\"" >&2
  exit 1
fi
VERSION=$("$PY" -c 'import re,sys; print(re.search(r"__version__\s*=\s*\"([^\"]+)\"", open(sys.argv[1]).read())[1])' app/__init__.py)
ARCH=$(uname -m)
NAME="deskhand-$VERSION-linux-$ARCH"

# ------------------------------------------------------------------ PyInstaller
say "PyInstaller: build.spec → dist/deskhand/ (Deskhand $VERSION, $("$PY" -m PyInstaller --version 2>/dev/null | tail -1))"
start=$(date +%s)
mkdir -p build
# PyInstaller imports packages in subprocesses to ask about them: Qt offscreen, and pynput's dummy backend
# (its X backend connects to the display when imported).
if ! QT_QPA_PLATFORM=offscreen PYNPUT_BACKEND=dummy "$PY" -m PyInstaller --noconfirm $CLEAN --log-level WARN \
    --distpath "$ROOT/dist" --workpath "$ROOT/build/pyinstaller" build.spec >build/pyinstaller.log 2>&1; then
  tail -40 build/pyinstaller.log >&2
  echo "build.sh: PyInstaller failed; the whole log is build/pyinstaller.log" >&2
  exit 1
fi
grep -E "build.spec:|WARNING: (Library not found|Hidden import .* not found)" build/pyinstaller.log | grep -v "tzdata\|pyimod\|dependency of .*libqgtk3" || true
[ -x dist/deskhand/deskhand ] || { echo "build.sh: dist/deskhand/deskhand was not built" >&2; exit 1; }
say "Built dist/deskhand/ in $(( $(date +%s) - start )) s: $(du -sh dist/deskhand | cut -f1)"

# The newest glibc symbol any bundled binary needs: the oldest distribution the bundle runs on.
GLIBC=$(find dist/deskhand -type f \( -name '*.so*' -o -name deskhand \) -print0 \
  | xargs -0 objdump -T 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1 || true)
echo "Needs glibc ${GLIBC:-?} or newer (this machine: $(getconf GNU_LIBC_VERSION 2>/dev/null || echo unknown))"

if [ "$SELFTEST" = 1 ]; then
  say "Self-test of the frozen build"
  if [ -n "${DISPLAY:-}" ]; then dist/deskhand/deskhand --self-test
  else QT_QPA_PLATFORM=offscreen dist/deskhand/deskhand --self-test; fi
fi
[ "$TARBALL" = 1 ] || exit 0

# ------------------------------------------------------------------ tarball
say "Tarball: dist/$NAME.tar.gz"
stage="$ROOT/build/linux-package"
rm -rf "$stage"
mkdir -p "$stage/$NAME"
# Hard links: the staging copy costs no space (a plain copy where dist/ is on another file system).
cp -al dist/deskhand "$stage/$NAME/deskhand" 2>/dev/null || cp -a dist/deskhand "$stage/$NAME/deskhand"
for f in install.sh uninstall.sh deskhand.desktop.in; do
  sed -e "s/@VERSION@/$VERSION/g" -e "s/@GLIBC@/${GLIBC:-0}/g" -e "s/@ARCH@/$ARCH/g" "$HERE/$f" >"$stage/$NAME/$f"
done
chmod 755 "$stage/$NAME/install.sh" "$stage/$NAME/uninstall.sh"
chmod 644 "$stage/$NAME/deskhand.desktop.in"
cat >"$stage/$NAME/README.txt" <<EOF
Deskhand $VERSION for Linux ($ARCH)

Install (no root needed; needs an X11 session and glibc ${GLIBC:-?} or newer):
    ./install.sh                 the app goes to ~/.local/opt/deskhand, \`deskhand\` to ~/.local/bin,
                                 and Deskhand appears in your applications menu
    ./install.sh --autostart     the same, and Deskhand starts when you log in
    ./install.sh --launch        the same, then start Deskhand
Uninstall:
    ~/.local/opt/deskhand/uninstall.sh           (add --purge to delete settings, runs and models too)
Run without installing:
    ./deskhand/deskhand
Check the installation:
    deskhand --self-test
EOF
tar -C "$stage" -czf "dist/$NAME.tar.gz" "$NAME"
rm -rf "$stage"
(cd dist && sha256sum "$NAME.tar.gz" >"$NAME.tar.gz.sha256")
say "dist/$NAME.tar.gz: $(du -h "dist/$NAME.tar.gz" | cut -f1) (unpacked $(du -sh dist/deskhand | cut -f1)); total $(( $(date +%s) - start )) s"

# ------------------------------------------------------------------ AppImage (optional)
if [ "$APPIMAGE" = 1 ]; then
  if ! command -v appimagetool >/dev/null; then
    echo "build.sh: appimagetool is not on PATH: no AppImage (the tarball above is the installer)" >&2
    exit 1
  fi
  appdir="$ROOT/build/Deskhand.AppDir"
  rm -rf "$appdir"
  mkdir -p "$appdir/usr"
  cp -a dist/deskhand "$appdir/usr/deskhand"
  ln -s usr/deskhand/deskhand "$appdir/AppRun"
  sed -e 's|@EXEC@|deskhand|' -e 's|@TRYEXEC@||' -e '/^TryExec=$/d' "$HERE/deskhand.desktop.in" >"$appdir/deskhand.desktop"
  cp resources/icons/deskhand-256.png "$appdir/deskhand.png"
  ARCH="$ARCH" appimagetool "$appdir" "dist/Deskhand-$VERSION-$ARCH.AppImage"
  rm -rf "$appdir"
  say "dist/Deskhand-$VERSION-$ARCH.AppImage"
fi
