#!/usr/bin/env bash
# The scaled setup on one machine: PostgreSQL (Debian's package, in a temp dir), Redis, the web
# server and N queue workers, each restarted when it exits (see docs/scale.md).
#
#   scripts/cluster.sh                    # everything, 2 workers, portal on 127.0.0.1:8000; Ctrl-C stops it all
#   scripts/cluster.sh -w 4 -p 8001       # 4 workers, port 8001
#   scripts/cluster.sh services DIR       # only PostgreSQL + Redis, in DIR (created); prints the env and exits
#   scripts/cluster.sh stop DIR           # stop what `services DIR` started
#
# With everything up, another shell runs a sharded run from the CLI with the env it prints:
#   set -a; . "$DIR/env"; set +a; evalsite eval examples/agents --set ... --executor queue
# The tests and bench/bench_cluster.py use `services` and start their own workers
# (`evalsite queue_worker`, the command this script starts).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)

free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

pg_bindir() {
  local bindir
  bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$bindir" ] && command -v initdb >/dev/null 2>&1; then bindir=$(dirname "$(command -v initdb)"); fi
  if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    echo "error: PostgreSQL server binaries not found; install them: sudo apt-get install -y postgresql" >&2
    exit 1
  fi
  echo "$bindir"
}

as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# services DIR: PostgreSQL and Redis in DIR, their URLs written to DIR/env (KEY=VALUE lines).
services() {
  local dir=$1 bindir pg_port redis_port
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  bindir=$(pg_bindir)
  command -v redis-server >/dev/null || { echo "error: redis-server missing: scripts/ensure-system-packages.sh" >&2; exit 1; }
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  pg_port=$(free_port)
  # durability off: a throwaway cluster (fsync, full-page writes); room for many workers' connections
  as_owner "$bindir/initdb" -D "$dir/pg" -U evalsite -A trust -E UTF8 --no-sync >/dev/null
  as_owner "$bindir/pg_ctl" -D "$dir/pg" -l "$dir/pg.log" -w -t 60 \
    -o "-p $pg_port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c synchronous_commit=off -c max_connections=300" \
    start >/dev/null
  as_owner "$bindir/createdb" -h 127.0.0.1 -p "$pg_port" -U evalsite evalsite
  redis_port=$(free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir"
  for _ in $(seq 1 200); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done
  {
    echo "DATABASE_URL=postgres://evalsite@127.0.0.1:$pg_port/evalsite"
    echo "EVALSITE_REDIS_URL=redis://127.0.0.1:$redis_port/0"
    echo "EVALSITE_QUEUE=rq"
  } >"$dir/env"
  cat "$dir/env"
}

stop() {
  local dir=$1
  [ -f "$dir/redis.pid" ] && kill "$(cat "$dir/redis.pid")" 2>/dev/null || true
  [ -d "$dir/pg" ] && as_owner "$(pg_bindir)/pg_ctl" -D "$dir/pg" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

case "${1:-}" in
  services) services "$2"; exit 0 ;;
  stop) stop "$2"; exit 0 ;;
esac

workers=${CLUSTER_WORKERS:-2}
port=${PORT:-8000}
while [ $# -gt 0 ]; do
  case "$1" in
    -w|--workers) workers=$2; shift 2 ;;
    -p|--port) port=$2; shift 2 ;;
    *) echo "usage: scripts/cluster.sh [-w WORKERS] [-p PORT] | services DIR | stop DIR" >&2; exit 2 ;;
  esac
done

dir=$(mktemp -d /tmp/evalsite-cluster.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  stop "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
services "$dir" >/dev/null
set -a; . "$dir/env"; set +a
export EVALSITE_DATA_DIR=${EVALSITE_DATA_DIR:-$dir/data}
evalsite=(.venv/bin/evalsite)
[ -x "${evalsite[0]}" ] || evalsite=("$PYTHON" manage.py)
"${evalsite[@]}" migrate --verbosity 0
"${evalsite[@]}" demo_users >/dev/null 2>&1 || true
setsid "${evalsite[@]}" serve --no-worker --port "$port" &
pids+=($!)
# Each queue worker is supervised: started again a second after it exits (kill -9, OOM, a crash),
# under a name of its own each time (RQ keeps a killed worker's name registered for minutes).
# In production use systemd or supervisor for the same (docs/scale.md).
supervised_worker() {
  local name=$1 n=0 rc
  while true; do
    rc=0
    "${evalsite[@]}" queue_worker --name "$name-$n" || rc=$?
    echo "cluster: queue worker $name-$n exited ($rc); starting it again" >&2
    n=$((n + 1))
    sleep 1
  done
}
for i in $(seq 1 "$workers"); do
  setsid bash -c "$(declare -p evalsite); $(declare -f supervised_worker); supervised_worker evalsite-$(hostname)-w$i" &
  pids+=($!)
done
echo
echo "cluster up: portal http://127.0.0.1:$port/ · $workers worker(s) · env in $dir/env:"
sed 's/^/  /' "$dir/env"
echo "run a sharded eval from another shell:  set -a; . $dir/env; set +a; .venv/bin/evalsite eval examples/agents --set ... --executor queue"
echo "Ctrl-C stops everything."
wait
