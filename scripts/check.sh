#!/usr/bin/env bash
# The checks that read the code rather than run it, a step of `make test` before the suite: lint and format
# (ruff), the import layers (import-linter, contracts in pyproject.toml), types (mypy, [tool.mypy]), and the
# engine's wheel (scripts/check_wheel.py). PY: the virtualenv's python (default .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
BIN=$(dirname "$PY")

step() { echo "check: $*"; }

step "ruff check"
"$BIN/ruff" check --no-cache .
step "ruff format --check"
"$BIN/ruff" format --check --no-cache .
# web | api -> releases -> calibration | similarity -> review : curation (review uses curation, not back) -> accounts
# -> engine; no Django in the engine.
step "lint-imports"
"$BIN/lint-imports" --no-cache
step "mypy"
"$BIN/mypy"

# The type checker's configuration at work (check_untyped_defs): a wrong argument type in a function without
# annotations is an error too, so a service written without annotations is still checked.
step "mypy checks unannotated functions"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
printf 'from engine.episodes.drivers import turn_seed\n\n\ndef later():\n    return turn_seed(7, "first")\n' \
	>"$scratch/caller.py"
if found=$("$BIN/mypy" "$scratch/caller.py"); then
	echo "mypy passed a call of turn_seed with a str where an int belongs: check_untyped_defs is off" >&2
	exit 1
fi
grep -qF 'Argument 2 to "turn_seed" has incompatible type "str"; expected "int"' <<<"$found" || {
	echo "$found" >&2
	exit 1
}

step "the engine's wheel"
"$PY" scripts/check_wheel.py
echo "check: all clean"
