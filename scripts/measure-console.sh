#!/bin/sh
# The console's pages beside the command-line reads of the same data, in one run: the median
# of N reads of each, in milliseconds. The baseline for the Groups page is `specie cluster
# status` (the same replicas' status, printed); for the Supply page, `specie audit supply`
# (the page runs it). Usage, with `specie` and curl on PATH and a console serving the cluster:
#   scripts/measure-console.sh DIR CONSOLE_URL [N]
#   e.g. scripts/measure-console.sh ./c http://127.0.0.1:8495 20
set -eu
DIR=$1
URL=$2
N=${3:-20}
command -v specie >/dev/null && command -v curl >/dev/null ||
    { echo "put specie (a release build) and curl on PATH" >&2; exit 1; }
specie cluster status --dir "$DIR" >/dev/null || { echo "specie cluster status --dir $DIR failed: is the cluster up?" >&2; exit 1; }
curl -sf "$URL/" >/dev/null || { echo "no console answers at $URL: start specie console --dir $DIR" >&2; exit 1; }
ms() { # the median of N runs of a command, in ms
    i=0
    while [ $i -lt "$N" ]; do
        start=$(date +%s%N)
        "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
        end=$(date +%s%N)
        echo $(( (end - start) / 1000 ))
        i=$((i + 1))
    done | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}'
}
# The audit the Supply page runs, as the page shows it (no shell quoting is needed in it).
audit=$(curl -sf "$URL/supply" | sed -n 's/.*<code id="audit-command">specie \([^<]*\)<.*/\1/p')
printf '%-28s %11s   %-34s %11s\n' "console page" "median" "same-run baseline" "median"
printf '%-28s %8s ms   %-34s %8s ms\n' "Groups (/)" "$(ms curl -sf "$URL/")" \
    "specie cluster status" "$(ms specie cluster status --dir "$DIR")"
printf '%-28s %8s ms\n' "Charts (/charts)" "$(ms curl -sf "$URL/charts")"
printf '%-28s %8s ms\n' "Ledger (/ledger)" "$(ms curl -sf "$URL/ledger")"
# shellcheck disable=SC2086 # the audit's arguments, split on spaces
printf '%-28s %8s ms   %-34s %8s ms\n' "Supply (/supply)" "$(ms curl -sf "$URL/supply")" \
    "specie audit supply (what it runs)" "$(ms specie $audit)"
