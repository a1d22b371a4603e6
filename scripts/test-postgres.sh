#!/usr/bin/env bash
# Run the test suite against a throwaway PostgreSQL cluster (Debian's postgresql package).
#
#   scripts/test-postgres.sh                  # the main suite (tests/, browser tests excluded)
#   scripts/test-postgres.sh tests/apps -x    # any pytest arguments instead
#   PG_KEEP=1 scripts/test-postgres.sh ...    # leave the cluster running afterwards (prints its URL)
#   PG_INITDB_ARGS="--locale-provider=icu --icu-locale=en-US" scripts/test-postgres.sh   # another collation
#
# The cluster lives in a temp dir, listens on a free loopback port (and a socket in that dir)
# and is stopped and deleted on exit. initdb refuses to run as root, so under root the cluster
# belongs to the `postgres` user the package creates. Durability is off (fsync, full-page
# writes): the data is thrown away, and the suite runs faster.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bindir" ] && command -v initdb >/dev/null 2>&1; then
  bindir=$(dirname "$(command -v initdb)")
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  echo "error: PostgreSQL server binaries not found; install them: sudo apt-get install -y postgresql" >&2
  exit 1
fi
if ! "$PYTHON" -c "import psycopg" 2>/dev/null; then
  echo "error: psycopg is missing from the venv; install it: $PYTHON -m pip install 'psycopg[binary]>=3.2'" >&2
  exit 1
fi

tmp=$(mktemp -d /tmp/evalsite-pg.XXXXXX)
as_owner=()
if [ "$(id -u)" = 0 ]; then
  chown postgres: "$tmp"
  as_owner=(runuser -u postgres --)
fi
port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

stop_cluster() {
  if [ "${PG_KEEP:-0}" = 1 ]; then
    echo "PostgreSQL left running: DATABASE_URL=$DATABASE_URL (stop: ${as_owner[*]} $bindir/pg_ctl -D $tmp/data stop; rm -rf $tmp)"
    return
  fi
  "${as_owner[@]}" "$bindir/pg_ctl" -D "$tmp/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap stop_cluster EXIT

# shellcheck disable=SC2086 # PG_INITDB_ARGS is a list of options
"${as_owner[@]}" "$bindir/initdb" -D "$tmp/data" -U evalsite -A trust -E UTF8 --no-sync ${PG_INITDB_ARGS:-} >/dev/null
"${as_owner[@]}" "$bindir/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w -t 30 \
  -o "-p $port -k $tmp -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c synchronous_commit=off -c max_connections=200" \
  start >/dev/null
"${as_owner[@]}" "$bindir/createdb" -h 127.0.0.1 -p "$port" -U evalsite evalsite

# The initdb superuser can create the test database pytest-django makes (test_evalsite).
export DATABASE_URL="postgres://evalsite@127.0.0.1:$port/evalsite"
echo "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on port $port; DATABASE_URL=$DATABASE_URL"
if [ $# -eq 0 ]; then
  set -- -q -p no:randomly
fi
status=0
"$PYTHON" -m pytest "$@" || status=$?
if [ $status -ne 0 ] && [ -s "$tmp/server.log" ]; then
  echo "--- PostgreSQL log (last 20 lines) ---" >&2
  tail -n 20 "$tmp/server.log" >&2
fi
exit $status
