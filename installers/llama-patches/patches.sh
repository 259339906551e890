#!/usr/bin/env bash
# Deskhand's patches to the llama.cpp that llama-cpp-python vendors (the *.patch files beside this script, applied
# in name order to the unpacked llama-cpp-python source before it is built; README.md says what each does).
#
#   bash installers/llama-patches/patches.sh id          the patch set: deskhand-<hash of the patches>, or "none"
#   bash installers/llama-patches/patches.sh list        the patches of the set, one a line
#   bash installers/llama-patches/patches.sh apply SRC   apply them to the llama-cpp-python source tree SRC and
#                                                        record the set in SRC/llama_cpp/deskhand_llama_patches.txt,
#                                                        which the wheel carries (`deskhand doctor` reads it)
#
# DESKHAND_LLAMA_PATCHES=off builds the plain source: no patches, and the record says "none".
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RECORD=llama_cpp/deskhand_llama_patches.txt

enabled() {
  case "${DESKHAND_LLAMA_PATCHES:-on}" in
    off|OFF|0|no|none) return 1 ;;
    *) return 0 ;;
  esac
}

list() {
  enabled || return 0
  local p
  for p in "$HERE"/[0-9]*.patch; do [ -f "$p" ] && basename "$p"; done
  return 0
}

digest() {  # sha256 of the patches' names and changes (not their headers: those may say more later), in order
  if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi | cut -c1-10
}

id() {
  local names; names=$(list)
  if [ -z "$names" ]; then echo none; return; fi
  { printf '%s\n' "$names"; for n in $names; do sed -n '/^diff /,$p' "$HERE/$n"; done; } | digest | sed 's/^/deskhand-/'
}

apply_one() {  # SRC PATCH: --dry-run first, so that a patch that does not apply changes nothing
  if command -v patch >/dev/null; then
    patch -d "$1" -p1 --forward --batch --silent --dry-run <"$2" >/dev/null 2>&1 &&
      patch -d "$1" -p1 --forward --batch --silent <"$2" >/dev/null
  else
    (cd "$1" && git apply --check "$2" 2>/dev/null && git apply "$2")
  fi
}

apply() {
  local src=${1:?llama-cpp-python source tree}
  [ -f "$src/pyproject.toml" ] && [ -d "$src/llama_cpp" ] || { echo "patches.sh: $src is not a llama-cpp-python source tree" >&2; return 2; }
  local set name version
  set=$(id)
  version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$src/llama_cpp/__init__.py")
  for name in $(list); do
    if ! apply_one "$src" "$HERE/$name"; then
      cat >&2 <<MSG
Deskhand's llama.cpp patch $name does not apply to llama-cpp-python $version.
It was written for the llama.cpp that llama-cpp-python 0.3.36 vendors; this source has changed where it patches.
Build the plain source instead (Deskhand works without its patches, only slower on a GPU):
    DESKHAND_LLAMA_PATCHES=off bash installers/source/install.sh
or update the patch (installers/llama-patches/README.md says how each was made).
MSG
      return 1
    fi
  done
  { echo "$set"; list; } >"$src/$RECORD"
}

case "${1:-}" in
  id) id ;;
  list) list ;;
  apply) apply "${2:-}" ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
