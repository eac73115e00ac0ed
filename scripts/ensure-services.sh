#!/usr/bin/env bash
# Make sure the test services run: PostgreSQL on 127.0.0.1:5432 and Redis on 6379.
# Starts them when installed but stopped; installs them with apt when missing and possible.
# Also installs Debian's chromium for the browser tests and docker-compose for the compose check.
set -uo pipefail

have() { command -v "$1" >/dev/null 2>&1; }
sudo_cmd() { if [ "$(id -u)" = 0 ]; then "$@"; elif have sudo; then sudo -n "$@"; else return 1; fi; }
apt_updated=0
apt_install() {
  have apt-get || { echo "apt-get not available: install $* yourself" >&2; return 1; }
  if [ $apt_updated = 0 ]; then sudo_cmd apt-get update -qq >/dev/null && apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive sudo_cmd apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

postgres_up() { (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }
redis_up() { [ "$( (exec 3<>/dev/tcp/127.0.0.1/6379 && printf 'PING\r\n' >&3 && head -c5 <&3) 2>/dev/null)" = "+PONG" ]; }

if ! postgres_up; then
  if ! have pg_ctlcluster; then apt_install postgresql || true; fi
  if have pg_ctlcluster; then
    for version in $(ls /etc/postgresql 2>/dev/null); do
      sudo_cmd pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    done
  fi
  for _ in $(seq 1 30); do postgres_up && break; sleep 1; done
fi
postgres_up || { echo "PostgreSQL is not reachable on 127.0.0.1:5432" >&2; exit 1; }

if ! redis_up; then
  have redis-server || apt_install redis-server || true
  mkdir -p /tmp/passband-redis
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir /tmp/passband-redis >/dev/null
  for _ in $(seq 1 20); do redis_up && break; sleep 0.5; done
fi
redis_up || { echo "Redis is not reachable on 127.0.0.1:6379" >&2; exit 1; }

# Optional tools: the tests that need them skip with a reason when they are missing.
[ -x /usr/bin/chromium ] || apt_install chromium || echo "chromium missing: browser tests will be skipped" >&2
if ! have docker-compose && ! docker compose version >/dev/null 2>&1; then
  apt_install docker-compose || echo "docker-compose missing: the compose file check will be skipped" >&2
fi
echo "services ready: PostgreSQL and Redis"
