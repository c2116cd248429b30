# Sourced by the scripts: where caches live. Everything installed for the
# tests (Go tools, Node, npm peers, PostgreSQL data) goes under one cache dir
# so a second run reuses it.
export CLAWCONNECT_CACHE=${CLAWCONNECT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clawconnect}
export CLAWCONNECT_TOOLS=$CLAWCONNECT_CACHE/bin
mkdir -p "$CLAWCONNECT_CACHE" "$CLAWCONNECT_TOOLS"
