#!/bin/sh
# A newcomer's first day, mistakes included: a wallet pointed at the wrong node or at a node of
# another currency, a second process on a data directory, payments over what is held (core,
# offline device, exchange account, FastPay account), a server on a busy port, a wallet file cut
# short, and a
# pipe closed on a command's output. Each mistake is made on purpose and checked twice: the
# command refuses with a message that says what to do, and nothing is lost (the balances are the
# same, the wallet file is unchanged or still whole). At the end every unit minted is accounted
# for. Run it in an empty directory, with `specie` on PATH: sh newcomer-tryout.sh
# (`cargo test -p specie --test specie cli::newcomer` runs it). On 127.0.0.1: the usd node on $PORT
# (default 8470), the eur node on $EUR_PORT (8471), the exchange on $EXCHANGE_PORT (8480), the
# offline authority on $OFFLINE_PORT (8490), the FastPay committee on $COMMITTEE_PORT (8495),
# and on $BASE_PORT (8500) a second usd node: the
# "wrong node" a mistyped port reaches. $BASE_PORT + 1 must be free: the servers that are
# refused for their data directory are given it.
set -eu
PORT=${PORT:-8470}
EUR_PORT=${EUR_PORT:-8471}
EXCHANGE_PORT=${EXCHANGE_PORT:-8480}
OFFLINE_PORT=${OFFLINE_PORT:-8490}
COMMITTEE_PORT=${COMMITTEE_PORT:-8495}
BASE_PORT=${BASE_PORT:-8500}
SPARE=127.0.0.1:$((BASE_PORT + 1))
USD=http://127.0.0.1:$PORT
EUR=http://127.0.0.1:$EUR_PORT
WRONG=http://127.0.0.1:$BASE_PORT
EXCHANGE=http://127.0.0.1:$EXCHANGE_PORT
AUTHORITY=http://127.0.0.1:$OFFLINE_PORT
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

# The mistake $1: run COMMAND, which must fail, and stop the script unless what it printed says
# $2 (what to do, or what was wrong) and nothing panicked.
refused() {
    what=$1 says=$2
    shift 2
    if "$@" >refused.txt 2>&1; then
        echo "FAILED: $what: accepted: $*" >&2
        exit 1
    fi
    if ! grep -qF -- "$says" refused.txt || grep -q panicked refused.txt; then
        echo "FAILED: $what: the message does not say '$says':" >&2
        cat refused.txt >&2
        exit 1
    fi
    echo "ok: $what, refused: $(cat refused.txt)"
}

# Stop the script unless FILE is byte for byte its copy KEPT (taken before the mistake).
unchanged() {
    cmp -s "$1" "$2" || { echo "FAILED: $1 changed" >&2; exit 1; }
    echo "ok: $1 unchanged"
}

# Run COMMAND with its standard output a pipe whose reader is gone (what `| head -n 1` does to
# every line after the first; the sleep lets `true` end first): it must end quietly, no panic.
closed_stdout() {
    { sleep 0.3; "$@" 2>closed.txt; } | true
    if [ -s closed.txt ]; then
        echo "FAILED: with its output closed, $* said:" >&2
        cat closed.txt >&2
        exit 1
    fi
    echo "ok: with its output closed, quietly: $*"
}

# What a wallet, a device and an exchange account hold.
spendable() { specie wallet --wallet "$1" balance | sed -n 's/^spendable: *//p'; }
device_holds() { specie offline device --device "$1" balance | sed -n 's/^balance \([0-9]*\);.*/\1/p'; }
account_holds() { specie exchange account --wallet "$1" | sed -n "s/^  $2: //p"; }
payment_in() { sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p'; }
fastpay_holds() { specie wallet --wallet "$1" fastpay balance | sed -n '1s/^[0-9a-f]* *\([0-9]*\).*/\1/p'; }

# 0. What works, as the walkthroughs do it: the offline authority's and the exchange's bridge
#    keys and the FastPay committee; a usd issuer and an eur issuer; a usd node banking for all
#    three, an eur node, and a second usd node of the same issuer (another network: the wrong
#    node); the authority, the exchange and the committee. Then alice holds 1000 usd; bob has a
#    usd wallet, eve an eur one.
OFFLINE_BRIDGE=$(specie offline authority --data-dir ./offline --show-bridge-key)
EXCHANGE_BRIDGE=$(specie exchange bridge-key --data-dir ./exchange)
FASTPAY_COMMITTEE=$(specie byzantine committee --data-dir ./committee --show-committee)
ISSUER=$(specie wallet --wallet issuer.json --node "$USD" create --issuer | sed -n 's/^issuer public key: //p')
EUR_ISSUER=$(specie wallet --wallet eur-issuer.json --node "$EUR" create --issuer --hrp eur |
    sed -n 's/^issuer public key: //p')
specie node --data-dir ./usd-node --listen "127.0.0.1:$PORT" --issuer "$ISSUER" \
    --offline-authority "$OFFLINE_BRIDGE" --exchange "$EXCHANGE_BRIDGE" \
    --fastpay-committee "$FASTPAY_COMMITTEE" >usd-node.log 2>&1 &
USD_PID=$!
specie node --data-dir ./eur-node --hrp eur --listen "127.0.0.1:$EUR_PORT" --issuer "$EUR_ISSUER" \
    --exchange "$EXCHANGE_BRIDGE" >eur-node.log 2>&1 &
EUR_PID=$!
specie node --data-dir ./wrong-node --listen "127.0.0.1:$BASE_PORT" --issuer "$ISSUER" >wrong-node.log 2>&1 &
WRONG_PID=$!
PIDS="$USD_PID $EUR_PID $WRONG_PID"
wait_for $USD_PID specie wallet --wallet issuer.json sync
wait_for $EUR_PID specie wallet --wallet eur-issuer.json sync
wait_for $WRONG_PID specie wallet --wallet issuer.json --node "$WRONG" sync
specie offline authority --data-dir ./offline --listen "127.0.0.1:$OFFLINE_PORT" --core "$USD" >authority.log 2>&1 &
AUTHORITY_PID=$!
specie exchange serve --data-dir ./exchange --listen "127.0.0.1:$EXCHANGE_PORT" \
    --asset "usd=$USD" --asset "eur=$EUR" >exchange.log 2>&1 &
EXCHANGE_PID=$!
specie byzantine committee --data-dir ./committee --listen "127.0.0.1:$COMMITTEE_PORT" --core "$USD" \
    >committee.log 2>&1 &
COMMITTEE_PID=$!
PIDS="$PIDS $AUTHORITY_PID $EXCHANGE_PID $COMMITTEE_PID"
wait_for $AUTHORITY_PID specie offline audit --authority "$AUTHORITY"
wait_for $EXCHANGE_PID specie exchange last-block --exchange "$EXCHANGE"
ALICE=$(specie wallet --wallet alice.json --node "$USD" create | sed -n 's/^address: //p')
BOB=$(specie wallet --wallet bob.json --node "$USD" create | sed -n 's/^address: //p')
wait_for $COMMITTEE_PID specie wallet --wallet bob.json fastpay --committee-url "$COMMITTEE" accounts --new
BOB_ACCOUNT=$(specie wallet --wallet bob.json fastpay accounts)
EVE=$(specie wallet --wallet eve.json --node "$EUR" create --hrp eur | sed -n 's/^address: //p')
specie wallet --wallet alice.json import "$(specie wallet --wallet issuer.json mint 1000 --to "$ALICE" | payment_in)"
check "alice holds" "$(spendable alice.json)" "1000 usd"

# 1. The wrong node: a mistyped port reaches another usd node, a network where alice's coins
#    are not. Her wallet remembers its network and refuses it before it sends anything, so
#    that node's word (it holds none of her coins) changes nothing.
cp alice.json alice.kept
refused "alice syncs with the wrong node" "Use a node of network" \
    specie wallet --wallet alice.json --node "$WRONG" sync
refused "alice pays bob through the wrong node" "nothing was sent and nothing changed" \
    specie wallet --wallet alice.json --node "$WRONG" send "$BOB" 100
unchanged alice.json alice.kept
check "alice holds" "$(spendable alice.json)" "1000 usd"
#    Bob's wallet is empty, so it cannot tell a wrong node yet: the payment he imports there is
#    not found, kept as pending, and his own node (the one his wallet saved) confirms it.
PAYMENT=$(specie wallet --wallet alice.json send "$BOB" 100 | payment_in)
refused "bob imports at the wrong node" "saved as pending, and \`specie wallet sync\` makes it spendable" \
    specie wallet --wallet bob.json --node "$WRONG" import "$PAYMENT"
specie wallet --wallet bob.json sync
check "bob holds" "$(spendable bob.json)" "100 usd"

# 2. The wrong currency: a usd wallet and the eur node, and an eur address paid from usd.
refused "alice syncs with the eur node" "Use a usd node (--node URL), or another wallet for eur" \
    specie wallet --wallet alice.json --node "$EUR" sync
refused "eve's eur wallet syncs with the usd node" "Use a eur node" \
    specie wallet --wallet eve.json --node "$USD" sync
cp alice.json alice.kept
refused "alice pays eve's eur address" "is not an address of this wallet's currency" \
    specie wallet --wallet alice.json send "$EVE" 100
unchanged alice.json alice.kept
check "alice holds" "$(spendable alice.json)" "900 usd"

# 3. A second process on a data directory (another port, so that only the directory is in the
#    way): refused, naming the process that holds it.
refused "a second node on ./usd-node" "in use by process $USD_PID (specie node" \
    specie node --data-dir ./usd-node --listen "$SPARE"
refused "a second offline authority on ./offline" "in use by process $AUTHORITY_PID" \
    specie offline authority --data-dir ./offline --listen "$SPARE" --core "$USD"
refused "a second exchange on ./exchange" "stop that process first, or give this one another data directory" \
    specie exchange serve --data-dir ./exchange --listen "$SPARE" --asset "usd=$USD" --asset "eur=$EUR"
refused "a second committee on ./committee" "in use by process $COMMITTEE_PID" \
    specie byzantine committee --data-dir ./committee --listen "$SPARE" --core "$USD"
check "alice holds" "$(spendable alice.json)" "900 usd"

# 4. Spending more than is held, in each mode a node offers. The core: alice holds 900.
cp alice.json alice.kept
refused "alice pays bob 901" "this wallet holds 900 usd spendable but the payment needs 901 usd" \
    specie wallet --wallet alice.json send "$BOB" 901
unchanged alice.json alice.kept
#    Offline cash: alice's device can only be funded from what her wallet holds, and pays only
#    what the device holds (300 of it); bob's device asks for 500.
for DEVICE in alice.device bob.device; do
    specie offline device --device "$DEVICE" --authority "$AUTHORITY" create
    specie offline device --device "$DEVICE" --authority "$AUTHORITY" enrol \
        --operator-token-file ./offline/operator.token
done
refused "alice funds her device with 901" "this wallet holds 900 usd spendable" \
    specie offline device --device alice.device --authority "$AUTHORITY" fund-from-core --wallet alice.json 901
specie offline device --device alice.device --authority "$AUTHORITY" fund-from-core --wallet alice.json 300
REQUEST=$(specie offline device --device bob.device request 500)
cp alice.device alice.device.kept
refused "alice's device pays 500" "500 is more than the 300 this device can pay offline" \
    specie offline device --device alice.device pay "$REQUEST"
unchanged alice.device alice.device.kept
check "alice's device holds" "$(device_holds alice.device)" "300"
#    The exchange: a deposit over the wallet's 600, then an offer and a withdrawal over the
#    account's 200.
refused "alice deposits 601 at the exchange" "this wallet holds 600 usd spendable" \
    specie exchange deposit --wallet alice.json --exchange "$EXCHANGE" --asset usd --amount 601
specie exchange deposit --wallet alice.json --exchange "$EXCHANGE" --asset usd --amount 200
refused "alice offers 500 usd" "take more of usd than it has" \
    specie exchange offer --wallet alice.json --sell usd --buy eur --amount 500 --min-price 0.5
refused "alice withdraws 300 usd" "take more of usd than it has" \
    specie exchange withdraw --wallet alice.json --core-wallet alice.json --asset usd --amount 300
check "alice's exchange account holds" "$(account_holds alice.json usd)" "200"
check "alice holds" "$(spendable alice.json)" "400 usd"
#    FastPay: a funding over the wallet's 400, then a transfer over the account's 100. Neither
#    is signed, so nothing is left waiting that would block the account.
cp alice.json alice.kept
refused "alice funds a FastPay account with 401" "this wallet holds 400 usd spendable" \
    specie wallet --wallet alice.json fastpay --committee-url "$COMMITTEE" fund 401
unchanged alice.json alice.kept
specie wallet --wallet alice.json fastpay --committee-url "$COMMITTEE" fund 100
cp alice.json alice.kept
refused "alice's account pays bob 101" "nothing was signed. Pay at most 100 usd" \
    specie wallet --wallet alice.json fastpay pay "$BOB_ACCOUNT" 101
unchanged alice.json alice.kept
specie wallet --wallet alice.json fastpay pay "$BOB_ACCOUNT" 30 >/dev/null
check "alice's FastPay account holds" "$(fastpay_holds alice.json)" "70"
check "alice holds" "$(spendable alice.json)" "300 usd"

# 5. A busy port: each server binds its port before it creates anything, so it is refused at
#    once and leaves no data directory behind.
refused "a node on the usd node's port" "choose another address with --listen" \
    specie node --data-dir ./busy-node --listen "127.0.0.1:$PORT"
refused "an authority on the authority's port" "choose another address with --listen" \
    specie offline authority --data-dir ./busy-offline --listen "127.0.0.1:$OFFLINE_PORT" --core "$USD"
refused "an exchange on the exchange's port" "cannot listen on 127.0.0.1:$EXCHANGE_PORT" \
    specie exchange serve --data-dir ./busy-exchange --listen "127.0.0.1:$EXCHANGE_PORT" \
    --asset "usd=$USD" --asset "eur=$EUR"
refused "a committee on the committee's port" "choose another address with --listen" \
    specie byzantine committee --data-dir ./busy-committee --listen "127.0.0.1:$COMMITTEE_PORT" --core "$USD"
for DIR in busy-node busy-offline busy-exchange busy-committee; do
    [ ! -e "$DIR" ] || { echo "FAILED: ./$DIR was created" >&2; exit 1; }
done
echo "ok: no data directory left behind"

# 6. A wallet file cut short (a full disk, a copy interrupted): refused with advice, and neither
#    the cut copy nor the original is touched. The same for a device file.
cp alice.json alice.kept
head -c 300 alice.json >cut.json
cp cut.json cut.kept
refused "the cut wallet's balance" "restore it from your backup" specie wallet --wallet cut.json balance
refused "a payment from the cut wallet" "restore it from your backup" specie wallet --wallet cut.json send "$BOB" 5
unchanged cut.json cut.kept
unchanged alice.json alice.kept
head -c 200 alice.device >cut.device
refused "the cut device's balance" "restore it from your backup" specie offline device --device cut.device balance
check "alice holds" "$(spendable alice.json)" "300 usd"

# 7. A closed pipe on standard output: help, a balance, a listing, and a payment whose payment
#    string never reaches the terminal; `specie wallet sent` shows it again, and bob imports it.
specie wallet --help | head -n 1
closed_stdout specie wallet --help
closed_stdout specie wallet --wallet alice.json balance
closed_stdout specie wallet --wallet alice.json list-coins
closed_stdout specie wallet --wallet alice.json send "$BOB" 100
specie wallet --wallet bob.json import "$(specie wallet --wallet alice.json sent | payment_in | tail -n 1)"
check "bob holds" "$(spendable bob.json)" "200 usd"
check "alice holds" "$(spendable alice.json)" "200 usd"

# 8. Nothing lost: of the 1000 minted, alice holds 200, bob 200, alice's device 300, her
#    exchange account 200, her FastPay account 70 and bob's 30.
check "alice, bob, the device and the accounts hold" \
    "$(($(spendable alice.json | cut -d' ' -f1) + $(spendable bob.json | cut -d' ' -f1) + \
    $(device_holds alice.device) + $(account_holds alice.json usd) + \
    $(fastpay_holds alice.json) + $(fastpay_holds bob.json)))" "1000"
