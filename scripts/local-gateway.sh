#!/usr/bin/env bash
# Starts a local OpenClaw gateway backed by the project's fake model server,
# for trying ClawConnect without an OpenClaw account or network. Installs
# Node 24 and OpenClaw into the cache on first use.
#
#   scripts/local-gateway.sh [flags]            foreground; prints URL, token and
#                                               env lines; Ctrl-C stops it
#   scripts/local-gateway.sh --background [flags]
#                                               starts it detached (or reuses a
#                                               running one), waits until it is
#                                               ready, prints the env file
#   scripts/local-gateway.sh --stop             stops the background gateway
#
# flags are passed to the command: -port N, -token T, -dir DIR. In the
# background the env lines (OPENCLAW_URL, OPENCLAW_GATEWAY_TOKEN,
# OPENCLAW_PASSWORD, OPENCLAW_AGENT_ID, CLAWCONNECT_LOCAL_GATEWAY_PID) go to
# $CLAWCONNECT_LOCAL_GATEWAY_ENV (default $CLAWCONNECT_CACHE/localgateway/env);
# use them with: set -a; . "$file"; set +a
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup/env.sh
state=$CLAWCONNECT_CACHE/localgateway
env_file=${CLAWCONNECT_LOCAL_GATEWAY_ENV:-$state/env}
log=$state/localgateway.log
bin=$CLAWCONNECT_TOOLS/localgateway
mkdir -p "$state" "$(dirname "$env_file")"

running_pid() {
  [ -s "$env_file" ] || return 1
  local pid
  pid=$(sed -n 's/^CLAWCONNECT_LOCAL_GATEWAY_PID=//p' "$env_file")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

mode=foreground
case "${1:-}" in
  --background) mode=background; shift ;;
  --stop) mode=stop; shift ;;
esac

case $mode in
  stop)
    if pid=$(running_pid); then
      kill -TERM "$pid"
      for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      echo "local gateway (pid $pid) stopped"
    else
      echo "no local gateway running"
    fi
    exit 0 ;;
esac

[ -x "$bin" ] || echo "== building the local gateway launcher (first time: about a minute)"
go build -o "$bin" ./internal/testbed/cmd/localgateway

if [ $mode = foreground ]; then
  exec "$bin" "$@"
fi

if pid=$(running_pid); then
  echo "local gateway already running (pid $pid); env file: $env_file"
  cat "$env_file"
  exit 0
fi
rm -f "$env_file"
if ls -d "$CLAWCONNECT_CACHE"/peers/openclaw@*/ >/dev/null 2>&1; then
  echo "== starting the local gateway (about 30 s; log: $log)"
else
  echo "== installing Node 24 and OpenClaw into $CLAWCONNECT_CACHE/peers (first time: about a minute, about 850 MB), then starting the gateway (about 30 s; log: $log)"
fi
nohup setsid "$bin" -env-file "$env_file" "$@" >"$log" 2>&1 </dev/null &
pid=$!
for i in $(seq 1 600); do
  [ -s "$env_file" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "the local gateway failed to start; its log ($log):" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
  if [ $((i % 30)) -eq 0 ]; then
    echo "   still starting after $((i / 2)) s"
  fi
  sleep 0.5
done
if [ ! -s "$env_file" ]; then
  echo "the local gateway is not ready after 5 minutes; see $log" >&2
  exit 1
fi
echo "local gateway running (pid $pid, log $log); env file: $env_file"
cat "$env_file"
