#!/bin/sh
# Offline cash in a cluster: the offline authority runs as a Raft group beside the core, whose
# sentinels bank for its bridge key. Each person's device is kept in their core wallet file
# (`specie wallet offline …`): alice funds hers from her coins, pays bob's device 200 with no
# network, and bob deposits the tokens back into his coins.
# Run it in an empty directory, with `specie` on PATH: sh offline-cluster.sh
# The cluster listens on consecutive ports from $BASE_PORT (default 18470; it takes 9).
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

# 2. A small cluster (one replica per group, one sentinel) with the offline authority as a
#    group of one replica (`--offline` alone: 3, which survive the loss of one). `cluster up`
#    makes the authority's seed and its operator's token in ./cluster/pki, writes its bridge key
#    into cluster.toml for the sentinels, and prints its URL (with 3 replicas: their URLs,
#    comma-separated, which is what devices take).
UP=$(specie cluster up --dir ./cluster --base-port "$BASE_PORT" --replicas 1 --sentinels 1 \
    --issuer "$ISSUER" --offline 1)
echo "$UP"
SENTINEL=$(echo "$UP" | sed -n 's/^  sentinel-0: //p')
AUTHORITY=$(echo "$UP" | sed -n 's/^  offline authority: \([^ ]*\) .*/\1/p')
TOKEN=./cluster/pki/offline-operator.token

# 3. Core wallets for alice and bob, and 1000 of core money for alice.
ALICE=$(specie wallet --wallet alice.json --node "$SENTINEL" create | sed -n 's/^address: //p')
specie wallet --wallet bob.json --node "$SENTINEL" create
PAYMENT=$(specie wallet --wallet issuer.json --node "$SENTINEL" mint 1000 --to "$ALICE" |
    sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet alice.json import "$PAYMENT"

# 4. A device in each wallet, enrolled by the authority's operator (its token).
for WALLET in alice.json bob.json; do
    specie wallet --wallet "$WALLET" offline --authority "$AUTHORITY" create
    specie wallet --wallet "$WALLET" offline --authority "$AUTHORITY" enrol --operator-token-file "$TOKEN"
done

# 5. Alice moves 700 of her coins into her device (a funding the core confirms, then tokens).
specie wallet --wallet alice.json offline --authority "$AUTHORITY" fund-from-core 700

# 6. Offline: bob's device asks for 200, alice's pays, bob's checks and takes the payment.
REQUEST=$(specie wallet --wallet bob.json offline request 200)
PAYMENT=$(specie wallet --wallet alice.json offline pay "$REQUEST")
specie wallet --wallet bob.json offline receive "$PAYMENT"

# 7. Online again: bob deposits the tokens back into coins of his wallet.
specie wallet --wallet bob.json offline --authority "$AUTHORITY" deposit --to-core

# 8. The balances, and the authority's books, which `cluster status` shows too.
check "bob's coins" "$(specie wallet --wallet bob.json balance | sed -n 's/^spendable: *//p')" "200 usd"
check "alice's coins" "$(specie wallet --wallet alice.json balance | sed -n 's/^spendable: *//p')" "300 usd"
check "alice's device" "$(specie wallet --wallet alice.json offline balance | sed -n 's/^balance \([0-9]*\);.*/\1/p')" "500"
BOOKS=$(specie offline audit --authority "$AUTHORITY")
check "value outstanding in tokens" "$(echo "$BOOKS" | sed -n 's/^outstanding in tokens *\([0-9]*\) .*/\1/p')" "500"
specie cluster status --dir ./cluster
