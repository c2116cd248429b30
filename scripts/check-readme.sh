#!/usr/bin/env bash
# Runs the README's commands as written, as a new user on this machine would:
# a fresh HOME (the Go, npm and peer caches are reused, so only the first
# run pays for them), no OPENCLAW_* variables. It checks
#   - "Set up": ./scripts/run.sh run --wait "Say hello", ./scripts/run.sh
#     status JOB, ./scripts/run.sh (the demo task, then serving /mcp on
#     127.0.0.1:7331) and the demo.env line that points the CLI at the demo;
#   - "Quick start with your own gateway": the block as written, with the
#     local gateway's URL and password in place of HOST and "...";
#   - "Trying terminal Turns", with run.sh's serve still running on the
#     demo's home: localterminal, terminal list and send --wait to each
#     pane, then the demo gateway restarted with the plugin on the address
#     and token serve knows, doctor saying it is loaded and a Turn's
#     callback delivered.
# .ci/run runs it after the tests. It stops the local gateway it started.
# Usage: scripts/check-readme.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
source scripts/setup/env.sh
real_cache=$CLAWCONNECT_CACHE

work=$(mktemp -d)
serve_pid=""
term_pid=""
cleanup() {
  if [ -n "$serve_pid" ]; then kill -TERM "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
  if [ -n "$term_pid" ]; then kill -TERM "$term_pid" 2>/dev/null || true; wait "$term_pid" 2>/dev/null || true; fi
  scripts/local-gateway.sh --stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "README check FAILED: $*" >&2; exit 1; }
step() { echo "== README: $*"; }

# A new user: own HOME and cache; the Go caches and the installed peers are
# shared so nothing is downloaded twice.
export GOCACHE GOMODCACHE GOPATH
GOCACHE=$(go env GOCACHE) GOMODCACHE=$(go env GOMODCACHE) GOPATH=$(go env GOPATH)
export HOME=$work/home CLAWCONNECT_CACHE=$work/cache
mkdir -p "$HOME" "$CLAWCONNECT_CACHE" "$real_cache/peers"
ln -s "$real_cache/peers" "$CLAWCONNECT_CACHE/peers"
unset OPENCLAW_URL OPENCLAW_PASSWORD OPENCLAW_GATEWAY_TOKEN OPENCLAW_AGENT_ID CLAWCONNECT_HOME CLAWCONNECT_LOCAL_GATEWAY_ENV

# block HEADING N prints the Nth ```sh block of the README section HEADING.
block() {
  awk -v h="$1" -v n="$2" '
    $0 == h { sec = 1; next }
    sec && /^## / { exit }
    sec && /^```sh$/ { if (++k == n) { on = 1 }; next }
    on && /^```$/ { exit }
    on { print }' README.md
}
# cmd HEADING N L prints line L of that block without its comment.
cmd() { block "$1" "$2" | sed -n "${3}p" | sed 's/[[:space:]]\{2,\}#.*$//'; }
# health reports whether the demo server answers /health (bash's /dev/tcp:
# no curl needed).
health() {
  (exec 3<>/dev/tcp/127.0.0.1/7331 && printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 && grep -q '"ok":true' <&3) 2>/dev/null
}

run_wait=$(cmd "## Set up" 2 1)
[ "$run_wait" = './scripts/run.sh run --wait "Say hello"' ] || fail "unexpected demo command: $run_wait"
step "$run_wait"
out=$(eval "$run_wait" 2>"$work/run.err") || { cat "$work/run.err" >&2; fail "$run_wait"; }
cat "$work/run.err"
{ grep -q "FAKE-REPLY:" <<<"$out" && grep -q "Say hello" <<<"$out"; } || fail "$run_wait printed: $out"
job=$(sed -n 's/.*submitted \([0-9a-f-]\{36\}\).*/\1/p;T;q' "$work/run.err")
[ -n "$job" ] || fail "no job id in the progress of $run_wait"

status=$(cmd "## Set up" 2 2 | sed "s/JOB/$job/")
step "$status"
out=$(eval "$status") || fail "$status"
grep -q "completed" <<<"$out" || fail "$status printed: $out"

serve=$(cmd "## Set up" 1 1)
[ "$serve" = "./scripts/run.sh" ] || fail "unexpected run command: $serve"
step "$serve (until it serves /mcp)"
$serve >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
for _ in $(seq 1 600); do
  health 2>/dev/null && break
  kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.err" >&2; fail "$serve exited"; }
  sleep 0.5
done
health 2>/dev/null || fail "$serve did not serve /health within 5 minutes"
{ grep -q "FAKE-REPLY:" "$work/serve.out" && grep -q "Say hello" "$work/serve.out"; } || fail "$serve did not show the demo task's reply"

step "the CLI pointed at the demo with demo.env, beside the server"
# Captured, not piped into grep -q: under pipefail the status command
# would fail with SIGPIPE whenever grep stopped reading first.
out=$(set -a; . "$CLAWCONNECT_CACHE/demo.env"; set +a; "$CLAWCONNECT_CACHE/bin/clawconnect" status "$job") \
  || fail "clawconnect status JOB with demo.env"
grep -q completed <<<"$out" || fail "clawconnect status JOB with demo.env printed: $out"
# serve keeps running, as run.sh leaves it for a new user, through "Trying
# terminal Turns": it follows Turns on the demo's store without the private
# tmux sockets the terminal commands are given.

step "Quick start with your own gateway (the local gateway standing in)"
url=$(sed -n 's/^OPENCLAW_URL=//p' "$CLAWCONNECT_CACHE/demo.env")
pass=$(sed -n 's/^OPENCLAW_PASSWORD=//p' "$CLAWCONNECT_CACHE/demo.env")
[ -n "$url" ] && [ -n "$pass" ] || fail "demo.env lacks OPENCLAW_URL or OPENCLAW_PASSWORD"
quick=$(block "## Quick start with your own gateway" 1)
grep -q 'ws://HOST:18789' <<<"$quick" && grep -q 'OPENCLAW_PASSWORD=\.\.\.' <<<"$quick" || fail "the quick start's placeholders changed"
quick=${quick//ws:\/\/HOST:18789/$url}
quick=${quick//OPENCLAW_PASSWORD=.../OPENCLAW_PASSWORD=$pass}
export HOME=$work/quickstart
mkdir -p "$HOME"
(cd "$repo" && bash -euo pipefail -c "$quick") || fail "the quick start block"
export HOME=$work/home

# tcmd N L: line L of the Nth block of "Trying terminal Turns", with the
# cache path of this run for ~/.cache/clawconnect.
tcmd() { cmd "## Trying terminal Turns" "$1" "$2" | sed "s|~/.cache/clawconnect|$CLAWCONNECT_CACHE|g"; }
term=$(tcmd 1 1)
[ "$term" = "go run ./internal/testbed/cmd/localterminal" ] || fail "unexpected terminal demo command: $term"
step "$term (until its env file is written)"
# Built first, so the TERM below reaches the command itself, not go run.
go build -o "$work/localterminal" ./internal/testbed/cmd/localterminal
"$work/localterminal" >"$work/term.out" 2>"$work/term.err" &
term_pid=$!
for _ in $(seq 1 600); do
  [ -s "$CLAWCONNECT_CACHE/localterminal.env" ] && break
  kill -0 "$term_pid" 2>/dev/null || { cat "$work/term.err" >&2; fail "$term exited"; }
  sleep 0.5
done
[ -s "$CLAWCONNECT_CACHE/localterminal.env" ] || fail "$term wrote no env file within 5 minutes"
load=$(tcmd 2 1)
step "$load"
eval "$load"
list=$(tcmd 2 2)
step "$list"
out=$(eval "$list" 2>/dev/null) || fail "$list"
ids=$(awk 'NR > 1 { print $1 }' <<<"$out")
[ "$(wc -l <<<"$ids")" = 2 ] || fail "$list did not show the two panes: $out"
for id in $ids; do
  send=$(tcmd 2 3 | sed "s|TERMINAL_ID|$id|")
  step "$send"
  out=$(eval "$send" 2>/dev/null) || fail "$send"
  grep -q "FAKE-REPLY: Say hello" <<<"$out" || fail "$send printed: $out"
done
for l in 1 2 3; do
  c=$(tcmd 3 "$l"); step "$c"; eval "$c" >/dev/null || fail "$c"
done
doctor=$(tcmd 3 4)
step "$doctor"
out=$(eval "$doctor" 2>/dev/null) || fail "$doctor"
grep -q "the ClawConnect plugin is loaded" <<<"$out" || fail "$doctor printed: $out"
first=$(head -n 1 <<<"$ids")
send=$(tcmd 3 5 | sed "s|TERMINAL_ID|$first|")
step "$send"
out=$(eval "$send" 2>/dev/null) || fail "$send"
turn=$(sed -n 's/^turn: *//p' <<<"$out")
[ -n "$turn" ] || fail "$send printed no turn: $out"
status=$(tcmd 3 6 | sed "s|TURN_ID|$turn|")
step "$status (until the callback is delivered)"
for _ in $(seq 1 120); do
  out=$(eval "$status" 2>/dev/null) || fail "$status"
  grep -q "callback: done delivered to agent:main:main" <<<"$out" && break
  sleep 0.5
done
grep -q "callback: done delivered to agent:main:main" <<<"$out" || fail "$status printed: $out"
grep "^callback:" <<<"$out"
kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.err" >&2; fail "$serve exited during \"Trying terminal Turns\""; }
kill -TERM "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; serve_pid=""
echo "== README: every command worked"
