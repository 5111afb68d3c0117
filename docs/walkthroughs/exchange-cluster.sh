#!/bin/sh
# The exchange as a Raft group of a cluster: it trades the cluster's own currency (usd) and eur,
# minted by a separate node. Alice deposits usd, bob deposits eur, they offer to swap, a batch
# auction clears both offers at one price, and bob withdraws the usd he bought into a usd
# wallet of his, paid by the cluster's core.
# Run it in an empty directory, with `specie` on PATH: sh exchange-cluster.sh
# The cluster listens on consecutive ports from $BASE_PORT (default 18470; it takes 9), the eur
# node on 127.0.0.1:$EUR_PORT (8471).
set -eu
BASE_PORT=${BASE_PORT:-18470}
EUR_PORT=${EUR_PORT:-8471}
EUR=http://127.0.0.1:$EUR_PORT

# Stop what this script started, and the cluster, when it ends, however it ends.
PIDS=
stop() {
    status=$?
    [ -z "$PIDS" ] || kill $PIDS 2>/dev/null || true
    wait
    [ ! -f cluster/cluster.toml ] || specie cluster down --dir ./cluster || true
    exit "$status"
}
trap stop EXIT
trap 'exit 130' INT TERM

# Wait until the server started as process PID answers: run COMMAND every 0.2 s until it
# succeeds (30 s at most), and stop at once if the server has exited (its log says why).
wait_for() {
    pid=$1
    shift
    tries=0
    until "$@" >/dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || { echo "process $pid exited: see its log" >&2; return 1; }
        tries=$((tries + 1))
        [ "$tries" -lt 150 ] || { echo "no answer after 30 s: $*" >&2; return 1; }
        sleep 0.2
    done
}

# Stop the script unless what was printed ($2) is what was expected ($3).
check() {
    [ "$2" = "$3" ] || { echo "FAILED: $1: '$2', expected '$3'" >&2; exit 1; }
    echo "ok: $1: $2"
}

# 1. Each currency has its own issuer: usd is the cluster's, eur the eur node's.
USD_ISSUER=$(specie wallet --wallet usd-issuer.json create --issuer --hrp usd |
    sed -n 's/^issuer public key: //p')
EUR_ISSUER=$(specie wallet --wallet eur-issuer.json --node "$EUR" create --issuer --hrp eur |
    sed -n 's/^issuer public key: //p')

# 2. A small cluster (one replica per group, one sentinel) with the exchange as a group of one
#    replica (`--exchange` alone: 3). `cluster up` makes the exchange's seed in ./cluster/pki,
#    has the sentinels bank for its bridge key, and prints the key and the exchange's URL
#    (with 3 replicas: their URLs, comma-separated, which is what traders take).
UP=$(specie cluster up --dir ./cluster --base-port "$BASE_PORT" --replicas 1 --sentinels 1 \
    --issuer "$USD_ISSUER" --exchange 1 --exchange-asset "eur=$EUR")
echo "$UP"
SENTINEL=$(echo "$UP" | sed -n 's/^  sentinel-0: //p')
EXCHANGE=$(echo "$UP" | sed -n 's/^  exchange ([a-z, ]*): \([^ ]*\) (bridge key [0-9a-f]*)$/\1/p')
BRIDGE=$(echo "$UP" | sed -n 's/^  exchange ([a-z, ]*): [^ ]* (bridge key \([0-9a-f]*\))$/\1/p')

# 3. The eur node, banking for the exchange's bridge key (its output in eur-node.log).
specie node --data-dir ./eur-node --hrp eur --listen "127.0.0.1:$EUR_PORT" --issuer "$EUR_ISSUER" \
    --exchange "$BRIDGE" >eur-node.log 2>&1 &
PIDS="$PIDS $!"
wait_for $! specie wallet --wallet eur-issuer.json sync

# 4. Alice holds 10000 usd (through the sentinel), bob 10000 eur; bob has an (empty) usd wallet.
ALICE=$(specie wallet --wallet alice-usd.json --node "$SENTINEL" create --hrp usd |
    sed -n 's/^address: //p')
PAYMENT=$(specie wallet --wallet usd-issuer.json --node "$SENTINEL" mint 10000 --to "$ALICE" |
    sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet alice-usd.json import "$PAYMENT"
BOB=$(specie wallet --wallet bob-eur.json --node "$EUR" create --hrp eur | sed -n 's/^address: //p')
PAYMENT=$(specie wallet --wallet eur-issuer.json mint 10000 --to "$BOB" |
    sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet bob-eur.json import "$PAYMENT"
specie wallet --wallet bob-usd.json --node "$SENTINEL" create --hrp usd

# 5. Deposits (the first opens each trader's account, kept in that wallet file).
specie exchange deposit --wallet alice-usd.json --exchange "$EXCHANGE" --asset usd --amount 6000
specie exchange deposit --wallet bob-eur.json --exchange "$EXCHANGE" --asset eur --amount 5000

# 6. Offers both ways, each at a price of at least 0.5.
specie exchange offer --wallet alice-usd.json --sell usd --buy eur --amount 2000 --min-price 0.5
specie exchange offer --wallet bob-eur.json --sell eur --buy usd --amount 2000 --min-price 0.5

# 7. Wait for the trade to show in bob's account (at most 30 s), then withdraw the usd he
#    bought: the exchange signs a payout, the cluster's core pays it once.
tries=0
until BOUGHT=$(specie exchange account --wallet bob-eur.json | sed -n 's/^  usd: //p') &&
    [ "${BOUGHT:-0}" -gt 0 ]; do
    tries=$((tries + 1))
    [ "$tries" -lt 150 ] || { echo "FAILED: no trade after 30 s" >&2; exit 1; }
    sleep 0.2
done
specie exchange account --wallet bob-eur.json
specie exchange withdraw --wallet bob-eur.json --core-wallet bob-usd.json --asset usd --amount "$BOUGHT"

# 8. The balances, and the exchange's replicas in `cluster status` (height, state hash).
check "bob's usd wallet" "$(specie wallet --wallet bob-usd.json balance | sed -n 's/^spendable: *//p')" "$BOUGHT usd"
check "bob's eur wallet" "$(specie wallet --wallet bob-eur.json balance | sed -n 's/^spendable: *//p')" "5000 eur"
specie cluster status --dir ./cluster
