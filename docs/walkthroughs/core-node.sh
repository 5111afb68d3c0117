#!/bin/sh
# The online core on one node: an issuer mints 1000 to alice, alice pays bob 250.
# Run it in an empty directory with `specie` on PATH. The node listens on $PORT (default 8470).
set -eu
PORT=${PORT:-8470}
NODE=http://127.0.0.1:$PORT

# 1. The issuer's wallet holds the central bank's key, which signs mints and redeems.
ISSUER=$(specie wallet --wallet issuer.json --node "$NODE" create --issuer |
    sed -n 's/^issuer public key: //p')

# 2. A node that trusts that key: every role in one process, durable in ./node-data. It runs in
#    the background (its output in node.log) until the script ends. Wait until it answers.
specie node --data-dir ./node-data --listen "127.0.0.1:$PORT" --issuer "$ISSUER" >node.log 2>&1 &
NODE_PID=$!
trap 'status=$?; kill $NODE_PID 2>/dev/null || true; wait; exit $status' EXIT
trap 'exit 130' INT TERM
tries=0
until specie wallet --wallet issuer.json sync >/dev/null 2>&1; do
    kill -0 $NODE_PID 2>/dev/null || { echo "the node exited: see node.log" >&2; exit 1; }
    tries=$((tries + 1))
    [ $tries -lt 150 ] || { echo "the node did not answer in 30 s: see node.log" >&2; exit 1; }
    sleep 0.2
done

# 3. Two wallets; `create` prints the first address and remembers the node.
ALICE=$(specie wallet --wallet alice.json --node "$NODE" create | sed -n 's/^address: //p')
BOB=$(specie wallet --wallet bob.json --node "$NODE" create | sed -n 's/^address: //p')

# 4. The issuer mints 1000 to alice. The node stores only hashes of outputs, so the payer hands
#    the payee a payment string (specie-pay1…), which the payee imports: the wallet checks with
#    the node that the money is there.
PAYMENT=$(specie wallet --wallet issuer.json mint 1000 --to "$ALICE" |
    sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet alice.json import "$PAYMENT"

# 5. Alice pays bob 250 (her change comes back to her wallet); bob imports his payment string.
PAYMENT=$(specie wallet --wallet alice.json send "$BOB" 250 | sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet bob.json import "$PAYMENT"

# 6. Bob holds 250, alice 750.
specie wallet --wallet alice.json balance
BOB_HOLDS=$(specie wallet --wallet bob.json balance | sed -n 's/^spendable: *//p')
[ "$BOB_HOLDS" = "250 usd" ] || { echo "FAILED: bob holds '$BOB_HOLDS', not 250 usd" >&2; exit 1; }
echo "ok: bob holds $BOB_HOLDS"
