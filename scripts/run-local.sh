#!/usr/bin/env bash
# Start a Celery worker (all queues) and the web server on port 8000; stop both on Ctrl-C.
set -euo pipefail
PY=${1:-.venv/bin/python}
PORT=${PORT:-8000}
"$PY" -m celery -A passband worker -Q default,generate,verify --concurrency 2 --loglevel INFO &
worker=$!
trap 'kill $worker 2>/dev/null; wait $worker 2>/dev/null' EXIT INT TERM
echo "Passband on http://127.0.0.1:$PORT/ (credentials above; Ctrl-C stops the server and the worker)"
"$PY" manage.py runserver "0.0.0.0:$PORT"
