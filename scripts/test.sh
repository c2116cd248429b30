#!/usr/bin/env bash
# The project's test command: installs what the tests need (idempotently),
# starts PostgreSQL, then runs the checks and the whole suite, end-to-end
# tests against the real peers included, and stops the PostgreSQL it started.
# Usage: ./scripts/test.sh
#
# A first run on a fresh machine takes about 20 minutes on 2 cores (most of
# it the race-enabled test run) and fills about 4 GB of caches; later runs
# reuse them. See the README.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/setup/env.sh
scripts/setup/system.sh
scripts/setup/gotools.sh
scripts/setup/oidc.sh
source scripts/setup/postgres.sh
trap stop_postgres EXIT
scripts/setup/peers.sh

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "== go mod tidy"
if ! go mod tidy -diff; then
  echo "go.mod/go.sum are not tidy: run go mod tidy and commit them"; exit 1
fi
echo "== go vet"
go vet ./...
echo "== staticcheck"
"$CLAWCONNECT_TOOLS/staticcheck" ./...
echo "== go test -race (end-to-end tests included; about 15 minutes on 2 cores, quiet until each package ends)"
# The browser tests (the dashboard's, the task center app's) keep their
# screenshots here (they print each path).
export CLAWCONNECT_DASHBOARD_ARTIFACTS="${CLAWCONNECT_DASHBOARD_ARTIFACTS:-$CLAWCONNECT_CACHE/dashboard-screenshots}"
export CLAWCONNECT_APP_ARTIFACTS="${CLAWCONNECT_APP_ARTIFACTS:-$CLAWCONNECT_CACHE/app-screenshots}"
CLAWCONNECT_E2E=1 go test -race -count=1 -timeout 45m -coverprofile="$CLAWCONNECT_CACHE/cover.out" ./...
echo "== load proof without the race detector (10^4 tasks from 10 concurrent clients)"
# The load tests live in internal/bridge; the step fails if they stop
# matching (a rename or a move must not turn the proof into a no-op).
load_out=$(mktemp)
if ! go test -count=1 -timeout 20m -v -run '^TestLoad' ./internal/bridge/ >"$load_out" 2>&1; then
  cat "$load_out"; rm -f "$load_out"; exit 1
fi
grep -E '^ *(--- |ok|FAIL)|retained per finished task' "$load_out" || true
for t in TestLoadNoLostOrStuckTasks TestLoadMemoryBounded; do
  if ! grep -q -- "^--- PASS: $t " "$load_out"; then
    echo "load proof: $t did not run and pass (see above)"; rm -f "$load_out"; exit 1
  fi
done
rm -f "$load_out"
echo "== coverage"
go tool cover -func="$CLAWCONNECT_CACHE/cover.out" | awk '/^total:/ {print "total coverage:", $3}'
scripts/coverage.sh "$CLAWCONNECT_CACHE/cover.out"
