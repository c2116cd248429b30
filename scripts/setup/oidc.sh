#!/usr/bin/env bash
# Installs the OpenID provider the OAuth end-to-end tests sign in against:
# the example provider of zitadel/oidc (an OpenID-certified Go library),
# built from its module into the cache as zitadel-example-op. It runs
# headless in memory with two test users and serves authorization code with
# PKCE, token introspection and its key set.
set -euo pipefail
source "$(dirname "$0")/env.sh"
if [ ! -x "$CLAWCONNECT_TOOLS/zitadel-example-op" ]; then
  echo "== installing the test OpenID provider into $CLAWCONNECT_TOOLS (first time only)"
  tmp=$(mktemp -d)
  GOBIN=$tmp go install github.com/zitadel/oidc/v3/example/server@v3.52.0
  mv "$tmp/server" "$CLAWCONNECT_TOOLS/zitadel-example-op"
  rmdir "$tmp"
fi
