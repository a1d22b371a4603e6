#!/usr/bin/env bash
# Browser tests use Debian's chromium (never a downloaded browser build). Install it if missing.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "error: /usr/bin/chromium is missing; install Debian's chromium: sudo apt-get install -y chromium" >&2
  exit 1
fi
echo "installing Debian's chromium for the browser tests..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
