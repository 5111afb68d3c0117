#!/bin/sh
# The online core as a cluster on this machine: shard groups and a coordinator group replicated
# by Raft over mutual TLS, and a sentinel serving the wallets' API. An issuer mints 1000 to
# alice through the sentinel, alice pays bob 250.
# Run it in an empty directory, with `specie` on PATH: sh core-cluster.sh
# The cluster listens on consecutive ports from $BASE_PORT (default 18470).
set -eu
BASE_PORT=${BASE_PORT:-18470}

# Stop the cluster when the script ends, however it ends (its data stays in ./cluster).
stop() {
    status=$?
    [ ! -f cluster/cluster.toml ] || specie cluster down --dir ./cluster || true
    exit "$status"
}
trap stop EXIT
trap 'exit 130' INT TERM

# Stop the script unless what was printed ($2) is what was expected ($3).
check() {
    [ "$2" = "$3" ] || { echo "FAILED: $1: '$2', expected '$3'" >&2; exit 1; }
    echo "ok: $1: $2"
}

# 1. The issuer's wallet holds the central bank's key, which signs mints and redeems.
ISSUER=$(specie wallet --wallet issuer.json create --issuer | sed -n 's/^issuer public key: //p')

# 2. The cluster, trusting that key. `cluster up` writes ./cluster/cluster.toml, issues the
#    mutual-TLS certificates, starts every process, waits until every group has a leader, and
#    prints each sentinel's URL. --replicas 1 --sentinels 1 make a small cluster for trying it
#    on one machine; without them each group has 3 replicas (one may fail) and there are 2
#    sentinels.
SENTINEL=$(specie cluster up --dir ./cluster --base-port "$BASE_PORT" --replicas 1 --sentinels 1 \
    --issuer "$ISSUER" | sed -n 's/^  sentinel-0: //p')
specie cluster status --dir ./cluster

# 3. Two wallets, talking to the sentinel.
ALICE=$(specie wallet --wallet alice.json --node "$SENTINEL" create | sed -n 's/^address: //p')
BOB=$(specie wallet --wallet bob.json --node "$SENTINEL" create | sed -n 's/^address: //p')

# 4. The issuer mints 1000 to alice (its wallet was made before the sentinel's URL was known,
#    so it is given here); alice imports the payment string.
PAYMENT=$(specie wallet --wallet issuer.json --node "$SENTINEL" mint 1000 --to "$ALICE" |
    sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet alice.json import "$PAYMENT"

# 5. Alice pays bob 250.
PAYMENT=$(specie wallet --wallet alice.json send "$BOB" 250 | sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet bob.json import "$PAYMENT"

# 6. The balances.
check "bob's balance" "$(specie wallet --wallet bob.json balance | sed -n 's/^spendable: *//p')" "250 usd"
check "alice's balance" "$(specie wallet --wallet alice.json balance | sed -n 's/^spendable: *//p')" "750 usd"
