#!/usr/bin/env bash
# Start the Celery workers, beat and the web server on port 8000; stop them all on Ctrl-C.
# As in docker-compose.yml: one model process on `generate` (an in-process model uses every core;
# two would fight over them), CPU workers for `verify` and `default`, one process for `similarity` (one
# copy of the sentence model), and beat, which re-queues rounds that stalled (a lost message, a killed worker).
set -euo pipefail
PY=${1:-.venv/bin/python}
PORT=${PORT:-8000}
mkdir -p var
# Every process writes its metrics here and /metrics adds them up (calibration/metrics.py); files of
# processes from an earlier run would add their old counts, so the folder is emptied first.
export PROMETHEUS_MULTIPROC_DIR="${PROMETHEUS_MULTIPROC_DIR:-${PASSBAND_VAR_DIR:-$PWD/var}/metrics}"
mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
find "$PROMETHEUS_MULTIPROC_DIR" -maxdepth 1 -name '*.db' -delete
# Each worker in a session of its own: Ctrl-C then reaches only this script, which stops the main
# processes in order. A signal sent to a worker's pool processes directly can leave its main process
# waiting for a child that is gone, ignoring SIGTERM.
setsid "$PY" -m celery -A passband worker -Q generate --concurrency 1 --hostname "generate@%h" --loglevel INFO &
generate_worker=$!
setsid "$PY" -m celery -A passband worker -Q verify,default --concurrency 2 --hostname "cpu@%h" --loglevel INFO &
cpu_worker=$!
setsid "$PY" -m celery -A passband worker -Q similarity --concurrency 1 --hostname "similarity@%h" --loglevel INFO &
similarity_worker=$!
setsid "$PY" -m celery -A passband beat --schedule var/celerybeat-schedule --loglevel INFO &
beat=$!
# Alive and not a zombie (an exited child stays one until `wait`, and kill -0 still finds it).
running() { ps -o stat= -p "$1" 2>/dev/null | grep -qv Z; }
stop() {
  # Warm shutdown first (finish the job in hand); a model job can take a while, so after 10 s
  # shut down cold: acknowledged-late jobs are handed out again, and beat re-queues the rest.
  kill -TERM $generate_worker $cpu_worker $similarity_worker $beat 2>/dev/null || true
  for _ in $(seq 20); do
    running $generate_worker || running $cpu_worker || running $similarity_worker || break
    sleep 0.5
  done
  kill -QUIT $generate_worker $cpu_worker $similarity_worker 2>/dev/null || true
  wait $generate_worker $cpu_worker $similarity_worker $beat 2>/dev/null || true
}
trap stop EXIT INT TERM
echo "Passband on http://127.0.0.1:$PORT/ (credentials above; Ctrl-C stops the server, the workers and beat)"
"$PY" manage.py runserver "0.0.0.0:$PORT"
