#!/bin/sh
# The exchange between two currencies, each minted on its own node: usd and eur. Alice deposits
# usd, bob deposits eur, they offer to swap, a batch auction clears both offers at one price,
# and alice withdraws the eur she bought into an eur wallet of hers.
# Run it in an empty directory, with `specie` on PATH: sh exchange-node.sh
# The usd node listens on 127.0.0.1:$PORT (default 8470), the eur node on $EUR_PORT (8471),
# the exchange on $EXCHANGE_PORT (8480).
set -eu
PORT=${PORT:-8470}
EUR_PORT=${EUR_PORT:-8471}
EXCHANGE_PORT=${EXCHANGE_PORT:-8480}
USD=http://127.0.0.1:$PORT
EUR=http://127.0.0.1:$EUR_PORT
EXCHANGE=http://127.0.0.1:$EXCHANGE_PORT

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

# 1. The exchange's bridge key (this creates its secret seed in ./exchange): each currency's
#    node banks for it, taking deposits to it and paying out withdrawals it signed.
BRIDGE=$(specie exchange bridge-key --data-dir ./exchange)

# 2. Each currency has its own issuer (`--hrp` names the currency) and its own node.
USD_ISSUER=$(specie wallet --wallet usd-issuer.json --node "$USD" create --issuer --hrp usd |
    sed -n 's/^issuer public key: //p')
EUR_ISSUER=$(specie wallet --wallet eur-issuer.json --node "$EUR" create --issuer --hrp eur |
    sed -n 's/^issuer public key: //p')
specie node --data-dir ./usd-node --hrp usd --listen "127.0.0.1:$PORT" --issuer "$USD_ISSUER" \
    --exchange "$BRIDGE" >usd-node.log 2>&1 &
USD_PID=$!
specie node --data-dir ./eur-node --hrp eur --listen "127.0.0.1:$EUR_PORT" --issuer "$EUR_ISSUER" \
    --exchange "$BRIDGE" >eur-node.log 2>&1 &
EUR_PID=$!
PIDS="$PIDS $USD_PID $EUR_PID"
wait_for $USD_PID specie wallet --wallet usd-issuer.json sync
wait_for $EUR_PID specie wallet --wallet eur-issuer.json sync

# 3. The exchange, trading usd and eur, asking each node to confirm deposits (its output in
#    exchange.log).
specie exchange serve --data-dir ./exchange --listen "127.0.0.1:$EXCHANGE_PORT" \
    --asset "usd=$USD" --asset "eur=$EUR" >exchange.log 2>&1 &
PIDS="$PIDS $!"
wait_for $! specie exchange last-block --exchange "$EXCHANGE"

# 4. Alice holds 10000 usd, bob 10000 eur; alice has an (empty) eur wallet too.
ALICE=$(specie wallet --wallet alice-usd.json --node "$USD" create --hrp usd | sed -n 's/^address: //p')
PAYMENT=$(specie wallet --wallet usd-issuer.json mint 10000 --to "$ALICE" |
    sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet alice-usd.json import "$PAYMENT"
BOB=$(specie wallet --wallet bob-eur.json --node "$EUR" create --hrp eur | sed -n 's/^address: //p')
PAYMENT=$(specie wallet --wallet eur-issuer.json mint 10000 --to "$BOB" |
    sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet bob-eur.json import "$PAYMENT"
specie wallet --wallet alice-eur.json --node "$EUR" create --hrp eur

# 5. Deposits: coins paid to the bridge key on their currency's node, then credited by the
#    exchange. The first deposit opens the trader's account, kept in that wallet file.
specie exchange deposit --wallet alice-usd.json --exchange "$EXCHANGE" --asset usd --amount 6000
specie exchange deposit --wallet bob-eur.json --exchange "$EXCHANGE" --asset eur --amount 5000

# 6. Offers both ways: alice sells 2000 usd for at least 0.5 eur each, bob 2000 eur for at
#    least 0.5 usd each. Blocks clear every 250 ms at one price per currency.
specie exchange offer --wallet alice-usd.json --sell usd --buy eur --amount 2000 --min-price 0.5
specie exchange offer --wallet bob-eur.json --sell eur --buy usd --amount 2000 --min-price 0.5
specie exchange last-block --exchange "$EXCHANGE"

# 7. Wait for the trade to show in alice's account (at most 30 s), then withdraw the eur she
#    bought into her eur wallet: the exchange signs a payout, the eur node pays it once.
tries=0
until BOUGHT=$(specie exchange account --wallet alice-usd.json | sed -n 's/^  eur: //p') &&
    [ "${BOUGHT:-0}" -gt 0 ]; do
    tries=$((tries + 1))
    [ "$tries" -lt 150 ] || { echo "FAILED: no trade after 30 s" >&2; exit 1; }
    sleep 0.2
done
specie exchange account --wallet alice-usd.json
specie exchange withdraw --wallet alice-usd.json --core-wallet alice-eur.json --asset eur --amount "$BOUGHT"

# 8. The balances: alice's eur wallet holds what she bought, her usd wallet what she did not
#    deposit.
check "alice's eur wallet" "$(specie wallet --wallet alice-eur.json balance | sed -n 's/^spendable: *//p')" "$BOUGHT eur"
check "alice's usd wallet" "$(specie wallet --wallet alice-usd.json balance | sed -n 's/^spendable: *//p')" "4000 usd"
