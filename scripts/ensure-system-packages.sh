#!/usr/bin/env bash
# The tests use Debian's chromium (browser tests; never a downloaded browser build),
# redis-server (the Redis channel layer and cluster tests start their own on a free port) and
# PostgreSQL's server binaries (scripts/cluster.sh starts a throwaway cluster in a temp dir).
# Installs whichever is missing.
set -euo pipefail
need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "error: missing Debian packages: ${need[*]}; install them: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "installing Debian packages for the tests: ${need[*]} (apt, about 2 minutes)..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
