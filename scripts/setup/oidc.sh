#!/usr/bin/env bash
# Installs the OpenID providers the OAuth end-to-end tests sign in against:
#  - Ory Hydra v2.3.0 (OpenID-certified, maintained), which issues JWT
#    access tokens for the resource a client names, signed with keys it
#    publishes and rotates through its admin API. It runs headless in
#    memory; the tests serve its login and consent pages themselves.
#  - the example provider of zitadel/oidc (an OpenID-certified Go library),
#    whose access tokens are opaque: the introspection path.
# Both are built from their Go modules into the cache, the first time only.
set -euo pipefail
source "$(dirname "$0")/env.sh"
if [ ! -x "$CLAWCONNECT_TOOLS/zitadel-example-op" ]; then
  echo "== installing the test OpenID provider (zitadel/oidc example) into $CLAWCONNECT_TOOLS (first time only)"
  tmp=$(mktemp -d)
  GOBIN=$tmp go install github.com/zitadel/oidc/v3/example/server@v3.52.0
  mv "$tmp/server" "$CLAWCONNECT_TOOLS/zitadel-example-op"
  rmdir "$tmp"
fi
if [ ! -x "$CLAWCONNECT_TOOLS/hydra" ]; then
  # Hydra's go.mod replaces its API client with a directory that its module
  # does not ship, so `go install` refuses it: build it from its module's
  # source as the main module, with the released client in that place. The
  # sqlite tag (cgo) gives it in-memory storage.
  echo "== building Ory Hydra v2.3.0 into $CLAWCONNECT_TOOLS (first time only; several minutes)"
  start=$SECONDS
  src=$(go mod download -json github.com/ory/hydra/v2@v2.3.0 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  tmp=$(mktemp -d)
  cp -r "$src/." "$tmp"
  chmod -R u+w "$tmp"
  (cd "$tmp" && go mod edit -dropreplace github.com/ory/hydra-client-go/v2 &&
    CGO_ENABLED=1 go build -mod=mod -tags sqlite -o "$CLAWCONNECT_TOOLS/hydra.part" .)
  mv "$CLAWCONNECT_TOOLS/hydra.part" "$CLAWCONNECT_TOOLS/hydra"
  rm -rf "$tmp"
  echo "   built in $((SECONDS - start)) s"
fi
