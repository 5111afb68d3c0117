#!/usr/bin/env bash
# The measurements behind docs/capacity.md: a fresh cluster (`specie cluster up`, its defaults
# for this machine: 3-way Raft, fsync, mutual TLS), closed-loop swaps from `specie bench
# cluster`, and for every member process over the load: CPU time (/proc/PID/stat), bytes handed
# to the network (/proc/PID/io wchar minus what went to files, write_bytes … an estimate that
# includes TLS framing), bytes written to disk, and fdatasync/fsync calls (perf's syscall
# tracepoints, if perf is installed: Debian's linux-perf). Prints one table per member and one
# per role, per confirmed transaction and per second.
#
#   cargo build --release -p specie
#   scripts/capacity.sh [SECONDS] [extra `specie cluster up` flags, e.g. --shard-groups 4]
#   LOAD=demo scripts/capacity.sh 0   # signed payments through the sentinels instead
#                                     # (`specie demo --cluster`, PAYMENTS of them, default 50000)
#
# `bench cluster` sends compact swaps straight to the coordinators (the sentinels idle): the 2PC
# core's costs. `LOAD=demo` adds the sentinels' validation and the wallets' signing (in the demo
# process, not counted as the cluster's).
# Uses ports from 38570 and a temporary directory it removes; SPECIE=path picks the binary.
set -euo pipefail
cd "$(dirname "$0")/.."
SPECIE=${SPECIE:-target/release/specie}
SECONDS_LOAD=${1:-20}
shift || true
[ -x "$SPECIE" ] || { echo "no $SPECIE: run cargo build --release -p specie first" >&2; exit 2; }
WORK=$(mktemp -d)
DIR=$WORK/cluster
PERF_PIDS=()
cleanup() {
  for pid in "${PERF_PIDS[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  "$SPECIE" cluster down --dir "$DIR" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"$SPECIE" cluster up --dir "$DIR" --base-port 38570 "$@" >"$WORK/up.log" 2>&1 \
  || { cat "$WORK/up.log" >&2; exit 1; }

snapshot() { # FILE: one line per member: name pid cpu_ticks wchar write_bytes
  for file in "$DIR"/pids/*.pid; do
    local name pid
    name=$(basename "$file" .pid)
    pid=$(cat "$file")
    [ -r "/proc/$pid/io" ] || continue
    local ticks wchar wbytes
    ticks=$(sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}')
    wchar=$(awk '/^wchar/ {print $2}' "/proc/$pid/io")
    wbytes=$(awk '/^write_bytes/ {print $2}' "/proc/$pid/io")
    echo "$name $pid $ticks $wchar $wbytes"
  done >"$1"
}

snapshot "$WORK/before"
if command -v perf >/dev/null; then
  while read -r name pid _; do
    perf stat -x, -o "$WORK/perf-$name" -e syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync -p "$pid" \
      2>/dev/null &
    PERF_PIDS+=($!)
  done <"$WORK/before"
fi
if [ "${LOAD:-bench}" = demo ]; then
  "$SPECIE" demo --cluster "$DIR" --payments "${PAYMENTS:-50000}" --json >"$WORK/demo.json" 2>"$WORK/bench.log" \
    || { cat "$WORK/bench.log" >&2; exit 1; }
else
  "$SPECIE" bench cluster --dir "$DIR" --seconds "$SECONDS_LOAD" --out "$WORK/bench" >"$WORK/bench.log" 2>&1 \
    || { cat "$WORK/bench.log" >&2; exit 1; }
fi
snapshot "$WORK/after"
for pid in "${PERF_PIDS[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
wait "${PERF_PIDS[@]}" 2>/dev/null || true
PERF_PIDS=()

python3 - "$WORK" "$(getconf CLK_TCK)" <<'EOF'
import json, os, sys, collections
work, ticks_per_s = sys.argv[1], float(sys.argv[2])
if os.path.exists(os.path.join(work, "demo.json")):
    demo = json.load(open(os.path.join(work, "demo.json")))
    confirmed, seconds = demo["confirmed"], demo["elapsed_s"]
    result = {}
    print(f"demo --cluster: {confirmed} confirmed in {seconds:.1f} s = {confirmed / seconds:,.0f} tx/s, "
          f"p50 {demo['latency_ms_p50']:.1f} ms, p99 {demo['latency_ms_p99']:.1f} ms, "
          f"{demo['ratio_to_ceiling']:.0%} of the same-run sign+verify ceiling; {os.cpu_count()} cores")
else:
    result = json.load(open(os.path.join(work, "bench", "result.json")))
    confirmed = result["totals"]["confirmed_during_load"]
    seconds = result["config"]["seconds"]
    print(f"cluster bench: {confirmed} confirmed in {seconds} s = {confirmed / seconds:,.0f} tx/s "
          f"(closed loop, window {result['config']['window']}), p50 {result['latency_ms']['p50']:.1f} ms, "
          f"p99 {result['latency_ms']['p99']:.1f} ms; {os.cpu_count()} cores")
def table(path):
    return {f[0]: [float(x) for x in f[2:]] for f in (l.split() for l in open(path)) if f}
before, after = table(os.path.join(work, "before")), table(os.path.join(work, "after"))
def syncs(name):
    path = os.path.join(work, f"perf-{name}")
    if not os.path.exists(path):
        return None
    count = 0
    for line in open(path):
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("syscalls:") and fields[0].strip().isdigit():
            count += int(fields[0])
    return count
print()
print("| member | CPU µs/tx | network bytes/tx | disk bytes/tx | fsyncs/s | fsyncs per 1k tx |")
print("|---|---|---|---|---|---|")
roles = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0])
deltas = {n: [a - b for a, b in zip(after[n], before[n])] for n in after if n in before}
group_of = lambda name: name.rsplit("-", 1)[0] if name.split("-")[0] != "sentinel" else name
least_written = {}
for name, d in deltas.items():
    g = group_of(name)
    least_written[g] = min(least_written.get(g, d[1]), d[1])
for name in sorted(deltas):
    d = deltas[name]
    cpu_us = d[0] / ticks_per_s * 1e6 / max(confirmed, 1)
    disk = d[2] / max(confirmed, 1)
    net = (d[1] - least_written[group_of(name)]) / max(confirmed, 1)
    s = syncs(name)
    role = name.split("-")[0]
    r = roles[role]
    r[0] += cpu_us; r[1] += net; r[2] += disk; r[3] += (s or 0); r[4] += 1
    sync_text = "— | —" if s is None else f"{s / seconds:,.0f} | {1000 * s / max(confirmed, 1):.2f}"
    print(f"| {name} | {cpu_us:.1f} | {net:,.0f} | {disk:,.0f} | {sync_text} |")
bench_us = (result.get("cpu") or {}).get("us_per_confirmed_tx", {}).get("bench")
if bench_us is not None:
    print(f"| the load generator (`bench cluster`, coordinator client) | {bench_us:.1f} | | | | |")
print()
print("| role (all its processes) | processes | CPU µs/tx | network bytes/tx | disk bytes/tx | fsyncs/s |")
print("|---|---|---|---|---|---|")
total = 0.0
for role, (cpu_us, net, disk, s, n) in sorted(roles.items()):
    total += cpu_us
    print(f"| {role} | {n} | {cpu_us:.1f} | {net:,.0f} | {disk:,.0f} | {s / seconds:,.0f} |")
print(f"| whole cluster | {sum(r[4] for r in roles.values())} | {total:.1f} | | | |")
EOF
