#!/bin/sh
# A runtime module written in POSIX shell, for the loader's tests. It serves
# runtime "sh-rt" (inspect only). $1 picks a behaviour; most of them are
# deliberately broken.
mode=${1:-ok}
# The environment the loader gave this module, for the scrub test.
if [ -n "$SHMODULE_ENV_OUT" ]; then env > "$SHMODULE_ENV_OUT"; fi
case $mode in
  crash) echo "shmodule: crashing before describe" >&2; exit 3 ;;
  stdoutflood) i=0; while [ $i -lt 3000 ]; do echo "stdout noise $i"; i=$((i+1)); done ;;
  flood) i=0; while [ $i -lt 3000 ]; do echo "flood line $i"; i=$((i+1)); done >&2 ;;
esac
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\([0-9][0-9]*\).*/\1/p')
  method=$(printf '%s' "$line" | sed -n 's/.*"method":"\([a-z]*\)".*/\1/p')
  case $method in
  describe)
    case $mode in
      silent) ;;
      badid) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"runtimes":[{"id":"bad id!","operations":["inspect"]}]}}\n' "$id" ;;
      badversion) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":2,"runtimes":[]}}\n' "$id" ;;
      notjsondescribe) echo 'hello, I am not JSON' ;;
      *) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"runtimes":[{"id":"sh-rt","provider":"shell","operations":["inspect","teleport"]},{"id":"sh-noinspect","operations":["continue"]}]}}\n' "$id" ;;
    esac ;;
  inspect)
    case $mode in
      notjson) echo 'not json at all' ;;
      unknownid) printf '{"jsonrpc":"2.0","id":%s,"result":null}\n' "$((id + 1000))" ;;
      huge) printf '{"jsonrpc":"2.0","id":%s,"result":{"latestResponse":"' "$id"; head -c 3000000 /dev/zero | tr '\0' 'a'; printf '"}}\n' ;;
      wrongtypes) printf '{"jsonrpc":"2.0","id":%s,"result":{"state":5,"alive":"yes","lastEventAt":{},"metadata":[1],"finalResponse":7}}\n' "$id" ;;
      badresult) printf '{"jsonrpc":"2.0","id":%s,"result":[1,2]}\n' "$id" ;;
      rpcerror) printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"shell says no"}}\n' "$id" ;;
      exit) exit 7 ;;
      *) printf '{"jsonrpc":"2.0","id":%s,"result":{"state":"completed","alive":false,"finalResponse":"from the shell","lastEventAt":"2026-01-02T03:04:05Z"}}\n' "$id" ;;
    esac ;;
  cancel) echo "shmodule: cancel received" >&2 ;;
  esac
done
