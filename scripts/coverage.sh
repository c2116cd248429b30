#!/usr/bin/env bash
# Prints statement coverage per package from a Go cover profile, and fails
# when a package with a coverage floor falls below it.
set -euo pipefail
profile=$1
declare -A floor=(
  [agentsession]=90
)
awk -F'[: ,]' 'NR>1 {
  file=$1; sub(/\/[^\/]*$/, "", file); sub(/^github.com\/clawconnect\/clawconnect\/?/, "", file)
  n=$(NF-1); total[file]+=n; if ($NF>0) hit[file]+=n
} END { for (p in total) printf "%s %.1f\n", (p==""?".":p), 100*hit[p]/total[p] }' "$profile" | sort > "${profile}.pkgs"
status=0
while read -r pkg pct; do
  printf '  %-40s %5s%%\n' "$pkg" "$pct"
  want=${floor[$pkg]:-}
  if [ -n "$want" ] && awk -v p="$pct" -v w="$want" 'BEGIN{exit !(p<w)}'; then
    echo "coverage of $pkg is $pct%, below its floor of $want%"; status=1
  fi
done < "${profile}.pkgs"
exit $status
