#!/usr/bin/env bash
# NeMo Gym's own package in a side virtualenv: nemo-gym 0.4.0 needs Python >= 3.12 and pins its own stack
# (ray, mlflow, wandb, mcp<2, openai<=2.7.2), so it cannot share Passband's 3.11 environment.
#
#   scripts/nemo-gym-env.sh python   print the side environment's python, building it once if needed
#   scripts/nemo-gym-env.sh build    build it (cached outside the clone; about 6.5 minutes, 1.4 GB)
#
# Exit status 3, with the reason on stderr, when no Python 3.12 interpreter is on this machine
# (pyenv's 3.12.x, else python3.12 on PATH).
set -euo pipefail
NEMO_GYM_VERSION=0.4.0
CACHE=${PASSBAND_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/passband}
VENV="$CACHE/nemo-gym-$NEMO_GYM_VERSION-py3.12"

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
  [ -x "$VENV/bin/python" ] && [ -f "$VENV/.complete" ] && return 0
  local python
  python=$(interpreter) || { echo "no Python 3.12 interpreter on this machine (pyenv 3.12.x or python3.12)" >&2; exit 3; }
  echo "building NeMo Gym $NEMO_GYM_VERSION's side environment in $VENV (once, about 6.5 minutes)" >&2
  rm -rf "$VENV.partial"
  $python -m venv "$VENV.partial"
  "$VENV.partial/bin/python" -m pip install --quiet "nemo-gym==$NEMO_GYM_VERSION" >&2
  touch "$VENV.partial/.complete"
  rm -rf "$VENV"
  mv "$VENV.partial" "$VENV"
}

case "${1:-}" in
  build) build ;;
  python) build && echo "$VENV/bin/python" ;;
  *) echo "usage: $0 build|python" >&2; exit 2 ;;
esac
