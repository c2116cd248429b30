#!/usr/bin/env bash
# The project's run command: the task bridge, end to end.
#
#   ./scripts/run.sh              build clawconnect; when no OpenClaw gateway is
#                                 configured, start a local one backed by the fake
#                                 model; run one task to show the bridge works;
#                                 then serve the MCP tools on 127.0.0.1:7331
#   ./scripts/run.sh ARGS...      the same set-up, then `clawconnect ARGS...`
#
# A gateway counts as configured when OPENCLAW_URL is set or
# $CLAWCONNECT_HOME/agents.json (default ~/.clawconnect/agents.json) exists.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup/env.sh
CGO_ENABLED=0 go build -o "$CLAWCONNECT_TOOLS/clawconnect" ./cmd/clawconnect
clawconnect=$CLAWCONNECT_TOOLS/clawconnect

home=${CLAWCONNECT_HOME:-$HOME/.clawconnect}
if [ -z "${OPENCLAW_URL:-}" ] && [ ! -f "$home/agents.json" ]; then
  echo "== no OpenClaw gateway configured: starting a local one with the fake model" >&2
  echo "   (first start installs Node 24 and OpenClaw into $CLAWCONNECT_CACHE; stop it with scripts/local-gateway.sh --stop)" >&2
  env_file=${CLAWCONNECT_LOCAL_GATEWAY_ENV:-$CLAWCONNECT_CACHE/localgateway/env}
  scripts/local-gateway.sh --background >&2
  set -a; . "$env_file"; set +a
  # Keep the demo's tasks apart from a real ~/.clawconnect.
  export CLAWCONNECT_HOME=${CLAWCONNECT_HOME:-$CLAWCONNECT_CACHE/demo-home}
fi

if [ $# -gt 0 ]; then
  exec "$clawconnect" "$@"
fi

echo "== one task through the bridge: clawconnect run --wait 'Say hello'" >&2
"$clawconnect" run --wait "Say hello"
echo >&2
echo "== serving the MCP tools at http://127.0.0.1:7331/mcp (Ctrl-C stops)" >&2
echo "   Claude Code: claude mcp add --transport http clawconnect http://127.0.0.1:7331/mcp" >&2
exec "$clawconnect" serve
