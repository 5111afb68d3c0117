#!/usr/bin/env bash
# Reproduces the stall measurements of issue 8 part 8 on a fresh default 3-way cluster.
#
#   measure-stall.sh BIN LABEL MODE RATE SECONDS [limit=value ...]
#
#   BIN      a release `specie` binary (copy it somewhere stable first: restarted replicas use it)
#   LABEL    name of the run; results go to ${STALL_OUT:-/tmp/stall/runs}/LABEL/
#   MODE     closed | open
#   RATE     open loop: tx/s (ignored for closed)
#   SECONDS  length of the load
#   limit=value  overrides in cluster.toml's [limits], e.g. raft_snapshot_entries=1000000000
#
# Each run: a fresh cluster dir (cluster up, down, edit [limits], wipe data, up again), one bench,
# cluster down, then a summary: overall p50/p99 and the per-second p50/p99 series, with every
# snapshot build (openraft's "build snapshot" log line) mapped to the bench second it fell in.
# Environment: BASE_PORT (default 23100), STALL_DIR (cluster dir, default /tmp/stall/cluster).
#
# Key runs of the report (peak 75 900 tx/s closed loop here; 10% = 7 500, 50% = 38 000 tx/s):
#   measure-stall.sh BIN peak          closed 0     10
#   measure-stall.sh BIN open10        open   7500  30
#   measure-stall.sh BIN open50        open   38000 30
#   measure-stall.sh BIN open10-nosnap open   7500  30 raft_snapshot_entries=1000000000
#   measure-stall.sh BIN open10-hb100  open   7500  30 raft_heartbeat_ms=100
# With the i8-stall-measure binary, SPECIE_SNAPSHOT_ON_APPLY=1 in the environment gives the old
# behaviour (shard encodes its snapshot on the apply path); unset, the shard hands a copy.
set -euo pipefail
BIN=$1 LABEL=$2 MODE=$3 RATE=$4 SECONDS_LOAD=$5
shift 5
OUT_ROOT=${STALL_OUT:-/tmp/stall/runs}
DIR=${STALL_DIR:-/tmp/stall/cluster}
PORT=${BASE_PORT:-23100}
OUT=$OUT_ROOT/$LABEL
mkdir -p "$OUT_ROOT"
rm -rf "$OUT" && mkdir -p "$OUT"

"$BIN" cluster down --dir "$DIR" >/dev/null 2>&1 || true
rm -rf "$DIR"
"$BIN" cluster up --dir "$DIR" --base-port "$PORT" >/dev/null
"$BIN" cluster down --dir "$DIR" >/dev/null
rm -rf "$DIR/data" "$DIR/logs" "$DIR/pids"
for kv in "$@"; do
  key=${kv%%=*} value=${kv#*=}
  grep -q "^$key = " "$DIR/cluster.toml" || { echo "no limit $key in cluster.toml" >&2; exit 1; }
  sed -i "s/^$key = .*/$key = $value/" "$DIR/cluster.toml"
done
sed -n '/^\[limits\]/,/^$/p' "$DIR/cluster.toml" >"$OUT/limits.toml"
RUST_LOG=${REPLICA_LOG:-warn,openraft::core::sm::worker=info,openraft::engine=info} "$BIN" cluster up --dir "$DIR" >/dev/null
sleep 2

args=(bench cluster --dir "$DIR" --seconds "$SECONDS_LOAD" --mode "$MODE" --out "$OUT")
[ "$MODE" = open ] && args+=(--rate "$RATE")
# Timestamp every line of the bench's output: "preloaded … ids" is printed just before the load.
"$BIN" "${args[@]}" 2>&1 | while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done >"$OUT/bench.log"
"$BIN" cluster down --dir "$DIR" >/dev/null
cp -r "$DIR/logs" "$OUT/logs"
du -sh "$DIR/data"/* >"$OUT/data-sizes.txt" 2>/dev/null || true

python3 - "$OUT" <<'EOF'
import json, sys, glob, re, datetime, os
out = sys.argv[1]
r = json.load(open(f"{out}/result.json"))
start = None
for line in open(f"{out}/bench.log"):
    if "preloaded" in line:
        start = float(line.split()[0])
lat = r["latency_ms"]
print(f"{os.path.basename(out)}: mean {r['throughput']['mean_tps']:.0f} tx/s, p50 {lat['p50']:.1f} ms, "
      f"p99 {lat['p99']:.1f} ms, max {lat['max']:.1f} ms, not_sent {r['totals']['not_sent']}")
c = r.get("cpu") or {}
if c:
    print(f"  cpu: cluster {sum(c['by_role'].values()):.1f} s, bench {c['bench_s']:.1f} s, other processes {c['other_s']:.1f} s "
          f"(of {c['cores'] * c['wall_s']:.0f}), machine busy {c['machine_busy_percent']:.0f}%")
# Time each shard/coordinator replica spent encoding its state on the apply path (openraft's
# "build snapshot" .. "returning; spawned building snapshot task"), and the whole build including
# the write and fsync of the file (.. "update_snapshot").
def ts(line):
    m = re.match(r"(\S+Z)\s", line)
    return datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp() if m else None
for log in sorted(glob.glob(f"{out}/logs/*-*-*.log")):
    t0 = None; enc = []; whole = []
    for line in open(log, errors="replace"):
        t = ts(line)
        if t is None: continue
        if "worker_loop: build snapshot" in line: t0 = t
        elif "spawned building snapshot task" in line and t0: enc.append((t - t0) * 1000)
        elif "update_snapshot" in line and t0: whole.append((t - t0) * 1000); t0 = None
    if enc:
        print(f"  {os.path.basename(log)[:-4]}: {len(enc)} snapshots, encode on apply path max {max(enc):.0f} ms mean {sum(enc)/len(enc):.0f} ms; "
              f"whole build max {max(whole, default=0):.0f} ms mean {sum(whole)/max(len(whole),1):.0f} ms")
snaps = {}
pat = re.compile(r"^(\S+Z)\s.*build snapshot")
for log in sorted(glob.glob(f"{out}/logs/*.log")):
    name = os.path.basename(log)[:-4]
    for line in open(log, errors="replace"):
        if "build snapshot" in line and "returning" not in line:
            m = pat.match(line.replace("\x1b", ""))
            if m and start:
                t = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp() - start
                snaps.setdefault(int(t) if t >= 0 else -1, []).append(f"{name}@{t:.2f}")
rows = []
for s in r["throughput"]["per_second"]:
    sec = s["second"]
    rows.append(f"  s{sec:>3} conf {s['confirmed']:>6} p50 {s['latency_ms_p50']:>7.1f} p99 {s['latency_ms_p99']:>7.1f}  "
                + " ".join(snaps.get(sec, [])))
print("\n".join(rows))
EOF
