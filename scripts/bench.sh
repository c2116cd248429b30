#!/usr/bin/env bash
# The performance figures of the task bridge, both tables from one run:
#
#   ./scripts/bench.sh            build this tree and measure it
#   ./scripts/bench.sh REV        also build REV (e.g. main, HEAD~3) and print
#                                 it beside this tree, measured in the same run
#
# Table one: one `clawconnect mcp` against an instant in-process fake gateway:
# start → initialize answered, resident memory after 1.5 s idle, the median of
# 50 sequential run_task + check_task round trips beside the gateway floor (a
# direct gateway client's chat.send → final on the same gateway) and the
# overhead over it, the process's CPU per round trip, and the resident memory
# after CLAWCONNECT_BENCH_TASKS/2 and CLAWCONNECT_BENCH_TASKS finished tasks
# (default 24000; a few minutes per build). Table two: ten `clawconnect mcp`
# processes on one store, 40 round trips each at once: throughput, round
# trip median / p90 and their CPU per task, on SQLite, and on PostgreSQL when
# TEST_DATABASE_URL is set (source scripts/setup/postgres.sh);
# CLAWCONNECT_BENCH_TABLES=2 measures table two alone. Wall-clock
# figures depend on the machine's load; compare builds within one run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup/env.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/this" ./cmd/clawconnect
bins="this-tree=$tmp/this"
if [ $# -gt 0 ]; then
	mkdir "$tmp/src"
	git archive "$1" | tar -x -C "$tmp/src"
	(cd "$tmp/src" && CGO_ENABLED=0 go build -o "$tmp/base" ./cmd/clawconnect)
	bins="$1=$tmp/base $bins"
fi
CLAWCONNECT_BENCH_BINS="$bins" go test -run '^$' -bench '^BenchmarkTables$' -benchtime=1x -timeout 60m ./internal/cli |
	grep -Ev '^(goos|goarch|pkg|cpu|PASS|ok |BenchmarkTables)'
