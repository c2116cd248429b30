#!/usr/bin/env bash
# Installs the npm-installed peers the end-to-end tests run against (pinned
# Node, the OpenClaw gateway, Claude Code, Codex, MCP clients) into the cache.
set -euo pipefail
source "$(dirname "$0")/env.sh"
: # filled in by the testbed
