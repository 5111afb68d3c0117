#!/bin/sh
# The Byzantine mode (FastPay): a committee of 4 authorities beside the online core, which is
# their Primary. Alice moves 500 of her core money into an account at the authorities, pays
# bob's account 120 with a certificate that bob checks offline, and bob redeems 100 of it back
# into the core.
# Run it in an empty directory, with `specie` on PATH: sh fastpay-cluster.sh
# The cluster listens on consecutive ports from $BASE_PORT (default 18470; it takes 15).
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

# 2. A small cluster (one replica per group, one sentinel) with a FastPay committee of 4
#    authorities, each running one shard (the default is 2). Each authority's signing key is
#    made in ./cluster/pki; the committee and the authorities' addresses are in
#    ./cluster/cluster.toml, which is all a wallet needs to reach them.
SENTINEL=$(specie cluster up --dir ./cluster --base-port "$BASE_PORT" --replicas 1 --sentinels 1 \
    --issuer "$ISSUER" --authorities --authority-shards 1 | sed -n 's/^  sentinel-0: //p')
specie cluster status --dir ./cluster

# 3. Alice's and bob's wallets, and 1000 of core money for alice.
ALICE=$(specie wallet --wallet alice.json --node "$SENTINEL" create | sed -n 's/^address: //p')
specie wallet --wallet bob.json --node "$SENTINEL" create
PAYMENT=$(specie wallet --wallet issuer.json --node "$SENTINEL" mint 1000 --to "$ALICE" |
    sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet alice.json import "$PAYMENT"

# 4. Alice funds a new account with 500: a core transaction, then credited by every authority
#    once each finds it in the core. The wallet remembers the cluster file from here on.
specie wallet --wallet alice.json fastpay --cluster-file ./cluster/cluster.toml fund 500

# 5. Bob makes an account (its key stays in bob.json) and gives alice its number.
BOB_ACCOUNT=$(specie wallet --wallet bob.json fastpay --cluster-file ./cluster/cluster.toml accounts --new)

# 6. Alice pays 120: the authorities' votes make a certificate, final at once. Bob checks it
#    against the committee in his wallet, with no network at all.
CERTIFICATE=$(specie wallet --wallet alice.json fastpay pay "$BOB_ACCOUNT" 120 | tail -n 1)
specie wallet --wallet bob.json fastpay verify "$CERTIFICATE"

# 7. Bob redeems 100 back into the core: a transfer to the core, presented to the core once.
specie wallet --wallet bob.json fastpay redeem 100

# 8. The balances: at the authorities (what at least f+1 of them report), and in the core.
check "alice's account" "$(specie wallet --wallet alice.json fastpay balance | sed -n '1s/^[0-9a-f]* *//p')" "380 usd"
check "bob's account" "$(specie wallet --wallet bob.json fastpay balance | sed -n '1s/^[0-9a-f]* *//p')" "20 usd"
check "bob's core money" "$(specie wallet --wallet bob.json balance | sed -n 's/^spendable: *//p')" "100 usd"
