#!/bin/sh
# A minimal runtime module for the CLI tests: it describes one runtime,
# "cli-rt", and answers nothing else.
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\([0-9][0-9]*\).*/\1/p')
  case $line in
    *'"method":"describe"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"runtimes":[{"id":"cli-rt","operations":["inspect"]}]}}\n' "$id" ;;
  esac
done
