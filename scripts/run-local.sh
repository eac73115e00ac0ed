#!/usr/bin/env bash
# Start the Celery workers, beat and the web server on port 8000; stop them all on Ctrl-C.
# As in docker-compose.yml: one model process on `generate` (an in-process model uses every core;
# two would fight over them), CPU workers for `verify` and `default`, one process for `similarity` (one
# copy of the sentence model), and beat, which re-queues rounds that stalled (a lost message, a killed worker).
# Each is started again if it exits.
set -euo pipefail
PY=${1:-.venv/bin/python}
PORT=${PORT:-8000}
# Loopback only by default (DEBUG is on); PASSBAND_BIND=0.0.0.0 opts in to the network, where clients still
# never see Django's debug pages (web/debug.py).
BIND=${PASSBAND_BIND:-127.0.0.1}
mkdir -p var "${PASSBAND_VAR_DIR:-var}"
# Every process writes its metrics here and /metrics adds them up (calibration/metrics.py); files of
# processes from an earlier run would add their old counts, so the folder is emptied first.
export PROMETHEUS_MULTIPROC_DIR="${PROMETHEUS_MULTIPROC_DIR:-${PASSBAND_VAR_DIR:-$PWD/var}/metrics}"
mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
find "$PROMETHEUS_MULTIPROC_DIR" -maxdepth 1 -name '*.db' -delete
# A worker or beat that exits (a crash, an out-of-memory kill) is started again, saying so, as compose's restart
# policy does. Each runs in a session of its own under a small supervisor: Ctrl-C then reaches only this script,
# which stops the supervisors in order (a signal sent to a worker's pool processes directly can leave its main
# process waiting for a child that is gone, ignoring SIGTERM). A supervisor passes SIGTERM on as a warm shutdown
# and SIGUSR1 as a cold one (SIGQUIT), and does not start its process again once told to stop.
supervise() {
  local name=$1
  shift
  (
    stopping=
    child=
    trap 'stopping=1; [ -z "$child" ] || kill -TERM "$child" 2>/dev/null' TERM
    trap 'stopping=1; [ -z "$child" ] || kill -QUIT "$child" 2>/dev/null' USR1
    while :; do
      setsid "$@" &
      child=$!
      status=0
      while kill -0 "$child" 2>/dev/null; do
        wait "$child" && status=0 || status=$?
      done
      [ -z "$stopping" ] || exit 0
      echo "run-local: $name exited (status $status); starting it again" >&2
      sleep 1
    done
  ) &
}
supervise "the generate worker" "$PY" -m celery -A passband worker -Q generate --concurrency 1 --hostname "generate@%h" --loglevel INFO
generate_worker=$!
supervise "the CPU worker" "$PY" -m celery -A passband worker -Q verify,default --concurrency 2 --hostname "cpu@%h" --loglevel INFO
cpu_worker=$!
supervise "the similarity worker" "$PY" -m celery -A passband worker -Q similarity --concurrency 1 --hostname "similarity@%h" --loglevel INFO
similarity_worker=$!
supervise "beat" "$PY" -m celery -A passband beat --schedule "${PASSBAND_VAR_DIR:-var}/celerybeat-schedule" --loglevel INFO
beat=$!
# Alive and not a zombie (an exited child stays one until `wait`, and kill -0 still finds it).
running() { ps -o stat= -p "$1" 2>/dev/null | grep -qv Z; }
stop() {
  # Warm shutdown first (finish the job in hand); a model job can take a while, so after 10 s
  # shut down cold: acknowledged-late jobs are handed out again, and beat re-queues the rest.
  kill -TERM ${server:-} $generate_worker $cpu_worker $similarity_worker $beat 2>/dev/null || true
  for _ in $(seq 20); do
    running $generate_worker || running $cpu_worker || running $similarity_worker || break
    sleep 0.5
  done
  kill -USR1 $generate_worker $cpu_worker $similarity_worker 2>/dev/null || true
  wait ${server:-} $generate_worker $cpu_worker $similarity_worker $beat 2>/dev/null || true
}
trap stop EXIT INT TERM
"$PY" manage.py runserver "$BIND:$PORT" &
server=$!
# The URL and the demo admin's sign-in come last, once the server answers, below the workers' start-up logs.
"$PY" - "http://127.0.0.1:$PORT/login/" <<'WAIT' || true
import sys, time, urllib.error, urllib.request
for _ in range(240):
    try:
        urllib.request.urlopen(sys.argv[1], timeout=2)
        break
    except urllib.error.HTTPError:
        break  # it answered
    except OSError:
        time.sleep(0.5)
WAIT
credentials="${PASSBAND_VAR_DIR:-var}/demo-admin.txt"
echo
echo "================================================================"
echo "  Passband is running: http://$BIND:$PORT/"
if [ -r "$credentials" ]; then
  read -r username password < "$credentials"
  echo "  Sign in as: $username"
  echo "  Password:   $password"
else
  echo "  Sign in with the demo admin's password (manage.py changepassword admin sets a new one)."
fi
echo "  Ctrl-C stops the server, the workers and beat."
echo "================================================================"
wait $server
