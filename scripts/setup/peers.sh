#!/usr/bin/env bash
# Installs the npm-installed peers the end-to-end tests run against (pinned
# Node, the OpenClaw gateway, Claude Code, Codex, MCP clients) into the cache
# ($CLAWCONNECT_CACHE/peers), reusing what is already there. Needs npm on
# PATH (scripts/setup/system.sh installs it). Usage: scripts/setup/peers.sh [peer ...]
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$(dirname "$0")/../.."
echo "== peers in $CLAWCONNECT_CACHE/peers (a first install downloads Node 24, OpenClaw, Claude Code, Codex, the MCP clients and the MCP Apps host bridge: several minutes, about 2 GB)"
go run ./internal/testbed/cmd/installpeers "$@"
