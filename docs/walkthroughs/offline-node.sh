#!/bin/sh
# Offline cash beside a node: the offline authority issues tokens against core money, alice's
# device pays bob's device 200 with no network, and bob deposits the tokens back into core money.
# Run it in an empty directory, with `specie` on PATH: sh offline-node.sh
# The node listens on 127.0.0.1:$PORT (default 8470), the authority on $OFFLINE_PORT (8490).
set -eu
PORT=${PORT:-8470}
OFFLINE_PORT=${OFFLINE_PORT:-8490}
NODE=http://127.0.0.1:$PORT
AUTHORITY=http://127.0.0.1:$OFFLINE_PORT

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

# 1. The issuer's key, and the offline authority's bridge key: the key the core banks for
#    (fundings of devices go to it, payouts back to the core are signed by it). This creates
#    the authority's secret seed in ./offline.
ISSUER=$(specie wallet --wallet issuer.json --node "$NODE" create --issuer |
    sed -n 's/^issuer public key: //p')
BRIDGE=$(specie offline authority --data-dir ./offline --show-bridge-key)

# 2. The node, trusting the issuer and banking for the authority; then the authority, which
#    asks the node whether each funding is confirmed. Their output goes to node.log and
#    authority.log. The authority writes its operator's token to ./offline/operator.token.
specie node --data-dir ./node-data --listen "127.0.0.1:$PORT" --issuer "$ISSUER" \
    --offline-authority "$BRIDGE" >node.log 2>&1 &
PIDS="$PIDS $!"
wait_for $! specie wallet --wallet issuer.json sync
specie offline authority --data-dir ./offline --listen "127.0.0.1:$OFFLINE_PORT" \
    --core "$NODE" >authority.log 2>&1 &
PIDS="$PIDS $!"
wait_for $! specie offline audit --authority "$AUTHORITY"

# 3. Core wallets for alice and bob, and 1000 of core money for alice.
ALICE=$(specie wallet --wallet alice.json --node "$NODE" create | sed -n 's/^address: //p')
specie wallet --wallet bob.json --node "$NODE" create
PAYMENT=$(specie wallet --wallet issuer.json mint 1000 --to "$ALICE" |
    sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet alice.json import "$PAYMENT"

# 4. A device each, enrolled by the authority's operator (its token): the authority certifies
#    the device's one-time keys, and the device keeps the authority's signed key ring to check
#    payments offline.
for DEVICE in alice.device bob.device; do
    specie offline device --device "$DEVICE" --authority "$AUTHORITY" create
    specie offline device --device "$DEVICE" --authority "$AUTHORITY" enrol \
        --operator-token-file ./offline/operator.token
done

# 5. Alice moves 700 of her core money into her device: a funding the core confirms, then
#    tokens the authority issues once it finds that funding in the core.
specie offline device --device alice.device --authority "$AUTHORITY" fund-from-core \
    --wallet alice.json 700

# 6. Offline: bob's device asks for 200, alice's pays, bob's checks and takes the payment.
REQUEST=$(specie offline device --device bob.device request 200)
PAYMENT=$(specie offline device --device alice.device pay "$REQUEST")
specie offline device --device bob.device receive "$PAYMENT"

# 7. Online again: bob deposits his tokens, paid out to a new address of his core wallet.
specie offline device --device bob.device --authority "$AUTHORITY" deposit --wallet bob.json

# 8. The balances, and the authority's books (funded − paid back = outstanding in tokens).
check "bob's core money" "$(specie wallet --wallet bob.json balance | sed -n 's/^spendable: *//p')" "200 usd"
check "alice's core money" "$(specie wallet --wallet alice.json balance | sed -n 's/^spendable: *//p')" "300 usd"
check "alice's device" "$(specie offline device --device alice.device balance | sed -n 's/^balance \([0-9]*\);.*/\1/p')" "500"
BOOKS=$(specie offline audit --authority "$AUTHORITY")
echo "$BOOKS"
check "value outstanding in tokens" "$(echo "$BOOKS" | sed -n 's/^outstanding in tokens *\([0-9]*\) .*/\1/p')" "500"
