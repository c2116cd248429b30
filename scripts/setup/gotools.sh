#!/usr/bin/env bash
# Installs the pinned Go tools (staticcheck, benchstat) into the cache.
set -euo pipefail
source "$(dirname "$0")/env.sh"
if [ ! -x "$CLAWCONNECT_TOOLS/staticcheck" ] || [ ! -x "$CLAWCONNECT_TOOLS/benchstat" ]; then
  echo "== installing staticcheck and benchstat into $CLAWCONNECT_TOOLS (first time only, about a minute)"
fi
[ -x "$CLAWCONNECT_TOOLS/staticcheck" ] || GOBIN=$CLAWCONNECT_TOOLS go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
[ -x "$CLAWCONNECT_TOOLS/benchstat" ] || GOBIN=$CLAWCONNECT_TOOLS go install golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
