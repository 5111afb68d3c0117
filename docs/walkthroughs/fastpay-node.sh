#!/bin/sh
# The Byzantine mode (FastPay) beside a node: a committee of 4 authorities in one process next to
# the node, which is their Primary. Alice moves 500 of her core money into an account at the
# authorities, pays bob's account 120 with a certificate that bob checks offline, and bob redeems
# 100 of it back into the core. (One process holding every authority's key tolerates no
# Byzantine authority: it is for trying the mode; fastpay-cluster.sh runs the authorities apart.)
# Run it in an empty directory, with `specie` on PATH: sh fastpay-node.sh
# The node listens on 127.0.0.1:$PORT (default 8470), the committee on $COMMITTEE_PORT (8495).
set -eu
PORT=${PORT:-8470}
COMMITTEE_PORT=${COMMITTEE_PORT:-8495}
NODE=http://127.0.0.1:$PORT
COMMITTEE=http://127.0.0.1:$COMMITTEE_PORT

# Stop what this script started when it ends, however it ends.
PIDS=
stop() {
    status=$?
    [ -z "$PIDS" ] || kill $PIDS 2>/dev/null || true
    wait
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

# 1. The issuer's key, and the committee: its 4 authorities' keys come from one secret seed,
#    made in ./committee now. The node takes the committee (fundings to it and redeems of its
#    certificates are valid) and keeps it in its node.toml.
ISSUER=$(specie wallet --wallet issuer.json --node "$NODE" create --issuer |
    sed -n 's/^issuer public key: //p')
COMMITTEE_KEY=$(specie byzantine committee --data-dir ./committee --show-committee)

# 2. The node, and alice's and bob's wallets; 1000 of core money for alice.
#    The node's output goes to node.log.
specie node --data-dir ./node-data --listen "127.0.0.1:$PORT" --issuer "$ISSUER" \
    --fastpay-committee "$COMMITTEE_KEY" >node.log 2>&1 &
PIDS="$PIDS $!"
wait_for $! specie wallet --wallet issuer.json sync
ALICE=$(specie wallet --wallet alice.json --node "$NODE" create | sed -n 's/^address: //p')
specie wallet --wallet bob.json --node "$NODE" create
PAYMENT=$(specie wallet --wallet issuer.json mint 1000 --to "$ALICE" |
    sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet alice.json import "$PAYMENT"

# 3. The committee, which asks the node whether each funding is confirmed (output in
#    committee.log). Bob makes an account as soon as it answers (its key stays in bob.json),
#    and gives alice its number. His wallet remembers the committee's URL from here on.
specie byzantine committee --data-dir ./committee --listen "127.0.0.1:$COMMITTEE_PORT" \
    --core "$NODE" >committee.log 2>&1 &
PIDS="$PIDS $!"
wait_for $! specie wallet --wallet bob.json fastpay --committee-url "$COMMITTEE" accounts --new
BOB_ACCOUNT=$(specie wallet --wallet bob.json fastpay accounts)

# 4. Alice funds a new account with 500: a core transaction, then credited by every authority
#    once each finds it in the node's UHS.
specie wallet --wallet alice.json fastpay --committee-url "$COMMITTEE" fund 500

# 5. Alice pays 120: the authorities' votes make a certificate, final at once. Bob checks it
#    against the committee in his wallet, with no network at all.
CERTIFICATE=$(specie wallet --wallet alice.json fastpay pay "$BOB_ACCOUNT" 120 | tail -n 1)
specie wallet --wallet bob.json fastpay verify "$CERTIFICATE"

# 6. Bob redeems 100 back into the core: a transfer to the core, presented to the node once.
specie wallet --wallet bob.json fastpay redeem 100

# 7. The balances: at the authorities (what at least f+1 of them report), and in the core.
check "alice's account" "$(specie wallet --wallet alice.json fastpay balance | sed -n '1s/^[0-9a-f]* *//p')" "380 usd"
check "bob's account" "$(specie wallet --wallet bob.json fastpay balance | sed -n '1s/^[0-9a-f]* *//p')" "20 usd"
check "bob's core money" "$(specie wallet --wallet bob.json balance | sed -n 's/^spendable: *//p')" "100 usd"
