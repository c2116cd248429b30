#!/usr/bin/env bash
# Installs the system packages the scripts need when they are missing:
# tmux, PostgreSQL, npm (to bootstrap the pinned Node), python3 and Chromium
# (the dashboard's browser tests).
# Usage: scripts/setup/system.sh [tmux|npm|postgresql|python3|chromium ...]
# (default: all of them; run.sh asks only for npm).
set -euo pipefail
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(tmux npm postgresql python3 chromium)
need=()
for w in "${want[@]}"; do
  case $w in
    tmux) command -v tmux >/dev/null || need+=(tmux) ;;
    npm) command -v npm >/dev/null || need+=(nodejs npm) ;;
    postgresql) ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql) ;;
    python3) command -v python3 >/dev/null || need+=(python3) ;;
    chromium) command -v chromium >/dev/null || need+=(chromium) ;;
    *) echo "system.sh: unknown package group '$w' (want tmux, npm, postgresql, python3 or chromium)" >&2; exit 2 ;;
  esac
done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "== installing system packages with apt-get: ${need[*]} (about a minute)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
