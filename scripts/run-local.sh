#!/usr/bin/env bash
# Start the Celery workers and the web server on port 8000; stop them all on Ctrl-C.
# As in docker-compose.yml: one model process on `generate` (an in-process model uses every core;
# two would fight over them), and CPU workers for `verify` and `default`.
set -euo pipefail
PY=${1:-.venv/bin/python}
PORT=${PORT:-8000}
"$PY" -m celery -A passband worker -Q generate --concurrency 1 --hostname "generate@%h" --loglevel INFO &
generate_worker=$!
"$PY" -m celery -A passband worker -Q verify,default --concurrency 2 --hostname "cpu@%h" --loglevel INFO &
cpu_worker=$!
trap 'kill $generate_worker $cpu_worker 2>/dev/null; wait $generate_worker $cpu_worker 2>/dev/null' EXIT INT TERM
echo "Passband on http://127.0.0.1:$PORT/ (credentials above; Ctrl-C stops the server and the workers)"
"$PY" manage.py runserver "0.0.0.0:$PORT"
