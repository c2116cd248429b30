#!/usr/bin/env bash
# The project's run command: builds clawconnect and runs it. Until the task
# bridge lands this prints the version and the command list.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup/env.sh
go build -o "$CLAWCONNECT_TOOLS/clawconnect" ./cmd/clawconnect
"$CLAWCONNECT_TOOLS/clawconnect" version
exec "$CLAWCONNECT_TOOLS/clawconnect" "${@:-help}"
