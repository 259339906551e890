#!/usr/bin/env bash
# Installs Deskhand from this source checkout into .venv/, then launches it or runs the tests.
#
#   bash installers/source/install.sh --launch   install, then start the app
#   bash installers/source/install.sh --test     install with the test tools, then run the whole test suite
#
# Options: --cpu | --cuda   force the llama.cpp backend (default: CUDA when an NVIDIA GPU and nvcc are found)
#          --no-system      do not install Debian/Ubuntu packages (print what is missing instead)
# Environment: CMAKE_ARGS (passed to the llama-cpp-python build; implies a custom build),
#          DESKHAND_WHEEL_CACHE (where built llama-cpp-python wheels are kept, default ~/.cache/deskhand-build),
#          DESKHAND_LLAMA_PATCHES=off (build llama.cpp without Deskhand's patches, installers/llama-patches/)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
LLAMA_VERSION=0.3.36
MODE=install BACKEND=auto SYSTEM=1
for arg in "$@"; do
  case "$arg" in
    --launch) MODE=launch ;;
    --test) MODE=test ;;
    --cpu) BACKEND=cpu ;;
    --cuda) BACKEND=cuda ;;
    --no-system) SYSTEM=0 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# ------------------------------------------------------------------ Python
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3.12 python3.11 python3.10 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then PY=$c; break; fi
  done
fi
[ -n "$PY" ] || { echo "Deskhand needs Python 3.10 or newer (python3 --version). Install it and run this again." >&2; exit 1; }

# ------------------------------------------------------------------ system packages (Debian/Ubuntu)
need_pkgs="libxcb-cursor0 libxkbcommon-x11-0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 \
libxcb-randr0 libxcb-shape0 libxcb-xkb1 libxcb-xfixes0 libxcb-shm0 libegl1 libgl1 libfontconfig1 libglib2.0-0 \
libdbus-1-3 fonts-dejavu-core cmake patch libpipewire-0.3-0"
if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then need_pkgs="$need_pkgs python3-venv"; fi
if [ "${XDG_SESSION_TYPE:-}" = wayland ] || [ -n "${WAYLAND_DISPLAY:-}" ]; then
  # Wayland: the screen and input go through the desktop portals (app/desktop/wayland)
  need_pkgs="$need_pkgs xdg-desktop-portal"
  case "${XDG_CURRENT_DESKTOP:-}" in
    *GNOME*) need_pkgs="$need_pkgs xdg-desktop-portal-gnome" ;;
    *KDE*) need_pkgs="$need_pkgs xdg-desktop-portal-kde" ;;
  esac
fi
if [ "$MODE" = test ]; then
  # A private X server, a window manager and tray host, xrandr and xdotool for the desktop tests; the
  # accessibility bus (at-spi2-core) and GTK dialogs (zenity) for the accessibility tests;
  # a headless GNOME session (mutter, PipeWire, the portals) for the Wayland tests (about 310 MB);
  # the applications of the live-task suite, resources/eval_tasks (an editor, a file manager, a calculator, a
  # small browser: about 15 MB); systemd's systemd-analyze and systemctl for the schedule tests (their files are
  # checked and enabled as on a desktop; nothing is started); headless Chromium, which opens the HTML reports (eval,
  # exported runs) as a person's browser would.
  need_pkgs="$need_pkgs xvfb xauth xdotool jwm trayer x11-xserver-utils x11-utils desktop-file-utils binutils \
mutter pipewire wireplumber xdg-desktop-portal xdg-desktop-portal-gnome dbus-daemon at-spi2-core zenity \
mousepad pcmanfm galculator dillo systemd chromium"
fi
if command -v dpkg-query >/dev/null; then
  missing=""
  for p in $need_pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    if [ "$SYSTEM" = 1 ]; then
      SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
      say "Installing system packages:$missing"
      $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
      $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
    else
      echo "Missing system packages:$missing (install them with apt-get)" >&2
    fi
  fi
elif [ "$(uname -s)" = Linux ]; then
  echo "Not a Debian/Ubuntu system: make sure Qt's xcb libraries, cmake and a C++ compiler are installed." >&2
fi

# ------------------------------------------------------------------ virtual environment
if [ ! -x .venv/bin/python ]; then
  say "Creating the virtual environment in .venv/"
  "$PY" -m venv .venv
fi
VPY="$ROOT/.venv/bin/python"
"$VPY" -m pip install -q --upgrade pip >/dev/null 2>&1 || true

# ------------------------------------------------------------------ llama-cpp-python (built from source: no Linux wheel on PyPI)
if [ "$BACKEND" = auto ]; then
  if [ -n "${CMAKE_ARGS:-}" ]; then
    case "$CMAKE_ARGS" in *GGML_CUDA=on*|*GGML_CUDA=ON*) BACKEND=cuda ;; *) BACKEND=custom ;; esac
  elif command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then BACKEND=cuda
    else
      echo "An NVIDIA GPU is present but the CUDA toolkit (nvcc) is not: building llama.cpp for the CPU." >&2
      echo "Install the CUDA toolkit and run this again with --cuda to use the GPU." >&2
      BACKEND=cpu
    fi
  else
    BACKEND=cpu
  fi
fi
case "$BACKEND" in
  cuda) export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_CUDA=on}"; [ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH" ;;
  cpu) export CMAKE_ARGS="${CMAKE_ARGS:-}" ;;
esac
# Deskhand's patches to the vendored llama.cpp (installers/llama-patches/): the wheel cache is keyed by the set
PATCHES="$ROOT/installers/llama-patches/patches.sh"
PATCH_SET=$(bash "$PATCHES" id)
variant="$BACKEND-$(printf '%s' "${CMAKE_ARGS:-}" | cksum | cut -d' ' -f1)-$("$VPY" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')-$(uname -m)-$PATCH_SET"
CACHE=${DESKHAND_WHEEL_CACHE:-$HOME/.cache/deskhand-build}/wheels/llama-cpp-python-$LLAMA_VERSION-$variant
marker="$ROOT/.venv/.llama-cpp-python-variant"
if [ "$(cat "$marker" 2>/dev/null)" != "$variant" ] || ! "$VPY" -c 'import llama_cpp' 2>/dev/null; then
  wheel=$(ls "$CACHE"/llama_cpp_python-*.whl 2>/dev/null | head -n 1 || true)
  if [ -z "$wheel" ]; then
    case "$BACKEND" in
      cpu) say "Building llama-cpp-python $LLAMA_VERSION for the CPU (no NVIDIA GPU found; about 12 minutes on 2 cores)" ;;
      *) say "Building llama-cpp-python $LLAMA_VERSION with CMAKE_ARGS='$CMAKE_ARGS' (several minutes)" ;;
    esac
    mkdir -p "$CACHE"
    # The source distribution is kept: `deskhand model convert` takes llama.cpp's converter from this very source.
    SDIST_DIR=${DESKHAND_WHEEL_CACHE:-$HOME/.cache/deskhand-build}/sdist
    sdist="$SDIST_DIR/llama_cpp_python-$LLAMA_VERSION.tar.gz"
    [ -f "$sdist" ] || "$VPY" -m pip download -q --no-deps --no-binary :all: -d "$SDIST_DIR" "llama-cpp-python==$LLAMA_VERSION"
    src=$(mktemp -d)
    tar xzf "$sdist" -C "$src"
    say "llama.cpp patches: $PATCH_SET"
    bash "$PATCHES" apply "$src/llama_cpp_python-$LLAMA_VERSION" || { rm -rf "$src"; exit 1; }
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)} \
      "$VPY" -m pip wheel --no-deps -w "$CACHE" "$src/llama_cpp_python-$LLAMA_VERSION"
    rm -rf "$src"
    wheel=$(ls "$CACHE"/llama_cpp_python-*.whl | head -n 1)
  else
    say "Using the llama-cpp-python wheel built earlier ($wheel)"
  fi
  "$VPY" -m pip install -q --no-deps --force-reinstall "$wheel"
  echo "$variant" > "$marker"
fi

# ------------------------------------------------------------------ Deskhand itself
if [ "$MODE" = test ]; then extra="[test]"; else extra=""; fi
say "Installing Deskhand and its dependencies"
"$VPY" -m pip install -q -e ".$extra"
"$VPY" -m app --version
if [ "$BACKEND" = cpu ]; then
  echo "Note: this llama.cpp build runs on the CPU; with an NVIDIA GPU and the CUDA toolkit, run again with --cuda."
fi

case "$MODE" in
  launch) say "Starting Deskhand"; exec "$ROOT/.venv/bin/deskhand" ;;
  test) say "Running the test suite"; exec "$VPY" -m pytest -p no:cacheprovider ;;
esac
