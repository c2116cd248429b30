#!/usr/bin/env bash
# Installs the system packages the tests need (tmux, PostgreSQL, Node/npm for
# bootstrapping the pinned Node) when they are missing.
set -euo pipefail
need=()
command -v tmux >/dev/null || need+=(tmux)
command -v npm >/dev/null || need+=(nodejs npm)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "== installing system packages: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
