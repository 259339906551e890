#!/usr/bin/env bash
# macOS: builds dist/Deskhand.app from build.spec (PyInstaller BUNDLE with installers/macos/Info.plist) and
# wraps it in dist/Deskhand-<version>-macos-<arch>.dmg (the app and a link to /Applications).
#
#   bash installers/macos/build_app.sh [--no-clean] [--self-test] [--no-dmg]
#
# Signing (see installers/macos/SIGNING.md); without these the app is signed ad hoc (runs on this Mac; other
# Macs' Gatekeeper refuses it unless the user right-clicks › Open):
#   DESKHAND_CODESIGN_IDENTITY="Developer ID Application: Name (TEAMID)"   sign with the hardened runtime
#   DESKHAND_NOTARY_PROFILE=profile-name    also notarize and staple (a `xcrun notarytool store-credentials` profile)
# Environment: PYTHON (default .venv/bin/python, else python3) with PyInstaller installed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$ROOT/installers/macos"
cd "$ROOT"
CLEAN=--clean SELFTEST=0 DMG=1
for arg in "$@"; do
  case "$arg" in
    --no-clean) CLEAN= ;;
    --self-test) SELFTEST=1 ;;
    --no-dmg) DMG=0 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "build_app.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
[ "$(uname -s)" = Darwin ] || { echo "build_app.sh: run this on macOS (it needs codesign and hdiutil)" >&2; exit 1; }

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi
"$PY" -c 'import PyInstaller' 2>/dev/null || { echo "build_app.sh: $PY -m pip install \"pyinstaller>=6\" first" >&2; exit 1; }
VERSION=$("$PY" -c 'import re,sys; print(re.search(r"__version__\s*=\s*\"([^\"]+)\"", open(sys.argv[1]).read())[1])' app/__init__.py)
ARCH=$(uname -m)
APP="$ROOT/dist/Deskhand.app"
DMG_PATH="$ROOT/dist/Deskhand-$VERSION-macos-$ARCH.dmg"
IDENTITY=${DESKHAND_CODESIGN_IDENTITY:-}
PROFILE=${DESKHAND_NOTARY_PROFILE:-}
[ -z "$PROFILE" ] || [ -n "$IDENTITY" ] || { echo "build_app.sh: notarizing needs DESKHAND_CODESIGN_IDENTITY" >&2; exit 1; }

plutil -lint "$HERE/Info.plist" "$HERE/entitlements.plist"

# ------------------------------------------------------------------ PyInstaller
say "PyInstaller: build.spec → dist/Deskhand.app (Deskhand $VERSION, $ARCH)"
start=$(date +%s)
mkdir -p build
rm -rf "$APP"
if ! QT_QPA_PLATFORM=offscreen PYNPUT_BACKEND=dummy "$PY" -m PyInstaller --noconfirm $CLEAN --log-level WARN \
    --distpath "$ROOT/dist" --workpath "$ROOT/build/pyinstaller" build.spec >build/pyinstaller.log 2>&1; then
  tail -40 build/pyinstaller.log >&2
  echo "build_app.sh: PyInstaller failed; the whole log is build/pyinstaller.log" >&2
  exit 1
fi
[ -x "$APP/Contents/MacOS/deskhand" ] || { echo "build_app.sh: $APP was not built" >&2; exit 1; }
plutil -lint "$APP/Contents/Info.plist"
say "Built $APP in $(( $(date +%s) - start )) s: $(du -sh "$APP" | cut -f1)"

# ------------------------------------------------------------------ signing
if [ -n "$IDENTITY" ]; then
  say "Signing with “$IDENTITY” (hardened runtime)"
  # Inside out: every Mach-O file first, then the bundle with the entitlements (no --deep: it would put the
  # app's entitlements on every library).
  find "$APP/Contents" -type f -print0 | while IFS= read -r -d '' f; do
    if file -b "$f" | grep -q 'Mach-O'; then
      codesign --force --timestamp --options runtime --sign "$IDENTITY" "$f"
    fi
  done
  codesign --force --timestamp --options runtime --entitlements "$HERE/entitlements.plist" \
    --sign "$IDENTITY" "$APP"
else
  say "Signing ad hoc (no DESKHAND_CODESIGN_IDENTITY): fine on this Mac, refused by Gatekeeper elsewhere"
  codesign --force --deep --sign - "$APP"
fi
codesign --verify --strict --verbose=2 "$APP"

if [ -n "$PROFILE" ]; then
  say "Notarizing the app (xcrun notarytool, profile $PROFILE)"
  zip="$ROOT/build/Deskhand-notarize.zip"
  rm -f "$zip"
  ditto -c -k --keepParent "$APP" "$zip"
  xcrun notarytool submit "$zip" --keychain-profile "$PROFILE" --wait
  xcrun stapler staple "$APP"
  rm -f "$zip"
fi

if [ "$SELFTEST" = 1 ]; then
  say "Self-test of the app"
  "$APP/Contents/MacOS/deskhand" --self-test
fi
[ "$DMG" = 1 ] || exit 0

# ------------------------------------------------------------------ disk image
say "Disk image: $DMG_PATH"
stage="$ROOT/build/dmg"
rm -rf "$stage" "$DMG_PATH"
mkdir -p "$stage"
ditto "$APP" "$stage/Deskhand.app"
ln -s /Applications "$stage/Applications"
hdiutil create -volname "Deskhand $VERSION" -srcfolder "$stage" -fs HFS+ -format UDZO -ov "$DMG_PATH"
rm -rf "$stage"
if [ -n "$IDENTITY" ]; then
  codesign --force --timestamp --sign "$IDENTITY" "$DMG_PATH"
fi
if [ -n "$PROFILE" ]; then
  say "Notarizing the disk image"
  xcrun notarytool submit "$DMG_PATH" --keychain-profile "$PROFILE" --wait
  xcrun stapler staple "$DMG_PATH"
  spctl --assess --type open --context context:primary-signature --verbose=2 "$DMG_PATH"
fi
(cd "$ROOT/dist" && shasum -a 256 "$(basename "$DMG_PATH")" >"$(basename "$DMG_PATH").sha256")
say "$DMG_PATH: $(du -h "$DMG_PATH" | cut -f1); total $(( $(date +%s) - start )) s"
