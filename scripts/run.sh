#!/usr/bin/env bash
# The project's run command: the task bridge, end to end.
#
#   ./scripts/run.sh              build clawconnect; when no OpenClaw gateway is
#                                 configured, start a local one backed by the fake
#                                 model; run one task to show the bridge works;
#                                 then serve the MCP tools on 127.0.0.1:7331
#   ./scripts/run.sh ARGS...      the same set-up, then `clawconnect ARGS...`
#                                 (e.g. status JOB against the demo's store)
#
# A gateway counts as configured when OPENCLAW_URL is set or
# $CLAWCONNECT_HOME/agents.json (default ~/.clawconnect/agents.json) exists.
# Without one it installs what the local gateway needs: npm from the system
# packages when missing (with sudo unless root), then Node 24 and OpenClaw
# into the cache. The binary is $CLAWCONNECT_CACHE/bin/clawconnect (default
# ~/.cache/clawconnect/bin); $CLAWCONNECT_CACHE/demo.env points any
# clawconnect at the demo (set -a; . ~/.cache/clawconnect/demo.env; set +a).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup/env.sh
clawconnect=$CLAWCONNECT_TOOLS/clawconnect
if [ -x "$clawconnect" ]; then
  echo "== building clawconnect" >&2
else
  echo "== building clawconnect (the first build compiles every dependency: about 4 minutes on 2 cores, then seconds)" >&2
fi
CGO_ENABLED=0 go build -o "$clawconnect" ./cmd/clawconnect
echo "   binary: $clawconnect" >&2

home=${CLAWCONNECT_HOME:-$HOME/.clawconnect}
if [ -z "${OPENCLAW_URL:-}" ] && [ ! -f "$home/agents.json" ]; then
  echo "== no OpenClaw gateway configured: starting a local one with the fake model" >&2
  echo "   (stop it with scripts/local-gateway.sh --stop)" >&2
  if ! command -v npm >/dev/null && ! ls -d "$CLAWCONNECT_CACHE"/peers/node@*/ >/dev/null 2>&1; then
    scripts/setup/system.sh npm >&2 # bootstraps the pinned Node
  fi
  env_file=${CLAWCONNECT_LOCAL_GATEWAY_ENV:-$CLAWCONNECT_CACHE/localgateway/env}
  scripts/local-gateway.sh --background >&2
  set -a; . "$env_file"; set +a
  # Keep the demo's tasks apart from a real ~/.clawconnect.
  export CLAWCONNECT_HOME=${CLAWCONNECT_HOME:-$CLAWCONNECT_CACHE/demo-home}
  demo_env=$CLAWCONNECT_CACHE/demo.env
  { grep -v '^CLAWCONNECT_LOCAL_GATEWAY_PID=' "$env_file"; echo "CLAWCONNECT_HOME=$CLAWCONNECT_HOME"; } >"$demo_env"
  chmod 600 "$demo_env"
fi

if [ $# -gt 0 ]; then
  exec "$clawconnect" "$@"
fi

echo "== one task through the bridge: clawconnect run --wait 'Say hello'" >&2
"$clawconnect" run --wait "Say hello"
echo >&2
if [ -n "${demo_env:-}" ]; then
  echo "   Use the CLI on this demo with ./scripts/run.sh ARGS (e.g. ./scripts/run.sh status JOB), or:" >&2
  echo "   set -a; . $demo_env; set +a; $clawconnect status JOB" >&2
fi
echo "== serving the MCP tools at http://127.0.0.1:7331/mcp (Ctrl-C stops)" >&2
echo "   Claude Code: claude mcp add --transport http clawconnect http://127.0.0.1:7331/mcp" >&2
echo "   Terminal Turns (Codex, Claude Code in tmux on the fake model): README, \"Trying terminal Turns\"" >&2
exec "$clawconnect" serve
