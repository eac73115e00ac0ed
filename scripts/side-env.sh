#!/usr/bin/env bash
# Frameworks that need a newer Python than Passband's, each in a side virtualenv of its own: nemo-gym 0.4.0
# (Python >= 3.12; it pins ray, mlflow, wandb, mcp<2, openai<=2.7.2) and harbor 0.25.0 (Python >= 3.12),
# whose own code the `side_env` tests run on Passband's exports.
#
#   scripts/side-env.sh python nemo-gym|harbor   print that environment's python, building it once if needed
#   scripts/side-env.sh build nemo-gym|harbor    build it, cached outside the clone
#
# Measured builds on a loaded 2-core machine: nemo-gym about 6.5 minutes (1.4 GB), harbor about 1 minute. Exit status 3, with the
# reason on stderr, when no Python 3.12 interpreter is on this machine (pyenv's 3.12.x, else python3.12).
set -euo pipefail
CACHE=${PASSBAND_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/passband}

requirement() {
  case "$1" in
    nemo-gym) echo "nemo-gym==0.4.0" ;;
    harbor) echo "harbor==0.25.0" ;;
    *) echo "unknown side environment $1 (nemo-gym or harbor)" >&2; exit 2 ;;
  esac
}

interpreter() {
  local candidate
  for candidate in "env PYENV_VERSION=${PASSBAND_PYENV_312:-3.12.1} python3.12" "python3.12"; do
    if $candidate -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

build() {
  local package=$1 venv python
  venv="$CACHE/$(requirement "$package" | tr '=' '-' | tr -s '-')-py3.12"
  mkdir -p "$CACHE"
  # One build at a time per environment (two clones or test processes may ask at once): the others wait for it.
  exec 9>"$venv.lock"
  flock 9
  if [ ! -f "$venv/.complete" ]; then
    python=$(interpreter) || { echo "no Python 3.12 interpreter on this machine (pyenv 3.12.x or python3.12)" >&2; exit 3; }
    echo "building the side environment of $(requirement "$package") in $venv (once)" >&2
    rm -rf "$venv.partial" "$venv"
    # Each step is checked by hand: `set -e` does not apply inside `build ... && echo` (the python command).
    $python -m venv "$venv.partial" || { echo "could not create $venv.partial" >&2; exit 1; }
    "$venv.partial/bin/python" -m pip install --quiet "$(requirement "$package")" >&2 ||
      { echo "pip could not install $(requirement "$package"); nothing is marked built" >&2; rm -rf "$venv.partial"; exit 1; }
    touch "$venv.partial/.complete"
    mv "$venv.partial" "$venv"
  fi
  if [ ! -f "$venv/.scripts-moved" ]; then
    # pip wrote the console scripts' (ng_prepare_data, harbor) #! line with the .partial path: point them here.
    grep -lI "^#!$venv.partial/bin/" "$venv"/bin/* 2>/dev/null | xargs -r sed -i "1s|^#!$venv.partial/bin/|#!$venv/bin/|" || true
    touch "$venv/.scripts-moved"
  fi
  BUILT="$venv/bin/python"
}

case "${1:-}" in
  build) build "${2:?which side environment: nemo-gym or harbor}" ;;
  python) build "${2:?which side environment: nemo-gym or harbor}" && echo "$BUILT" ;;
  *) echo "usage: $0 build|python nemo-gym|harbor" >&2; exit 2 ;;
esac
