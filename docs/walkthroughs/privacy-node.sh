#!/bin/sh
# Private payments on one node, read by an auditor. Confidential: alice pays bob 250 with the
# value hidden from everyone but bob and the auditor. Anonymous: alice and bob are enrolled by a
# registration authority (RA), and alice pays bob's enrolment id 120 with neither of them named
# on the ledger; the auditor names them. Unlinkable: alice pays bob 20 from a token certified by
# two of three certifiers, the spend revealing a serial number instead of the token; the auditor
# names them and reads the value.
# Run it in an empty directory, with `specie` on PATH: sh privacy-node.sh
# The node listens on 127.0.0.1:$PORT (default 8470).
set -eu
PORT=${PORT:-8470}
NODE=http://127.0.0.1:$PORT

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

# 1. The keys the node needs: the issuer's; the auditor's, made from one seed in auditor.key
#    (line 1: the key values are encrypted to, then the owner key anonymous owners are
#    encrypted to); and the RA's, whose seed and records are in ./ra.
ISSUER=$(specie wallet --wallet issuer.json --node "$NODE" create --issuer |
    sed -n 's/^issuer public key: //p')
specie audit keygen --out auditor.key
AUDITOR=$(specie audit key --key auditor.key | sed -n 1p)
OWNER_AUDITOR=$(specie audit key --key auditor.key | sed -n 's/^owner auditor key: //p')
RA=$(specie ra init --dir ./ra)
CERTIFIERS=$(specie certifier deal --group 2-of-3 --out ./certifiers)

# 2. The node: every confidential transaction must encrypt its values to the auditor, every
#    anonymous one its owners too, anonymous spends are proven with the RA's credentials, and
#    unlinkable ones with certificates of the certifier group. It keeps these keys in node.toml,
#    and the ledger of record the auditor reads.
specie node --data-dir ./node-data --listen "127.0.0.1:$PORT" --issuer "$ISSUER" \
    --auditor "$AUDITOR" --registration-authority "$RA" --owner-auditor "$OWNER_AUDITOR" \
    --certifiers "$CERTIFIERS" >node.log 2>&1 &
PIDS="$PIDS $!"
wait_for $! specie wallet --wallet issuer.json sync

# Two of the three certifiers, each beside the node whose ledger it asks, on a free port its log
# names.
CERTIFIER_ARGS=
for MEMBER in 1 2; do
    specie certifier serve --secret "./certifiers/certifier-$MEMBER.secret" --node "$NODE" \
        --listen 127.0.0.1:0 >"certifier-$MEMBER.log" 2>&1 &
    PIDS="$PIDS $!"
    wait_for $! grep -q 'API on http' "certifier-$MEMBER.log"
    URL=$(sed -n 's/.*API on \(http:[^ ]*\).*/\1/p' "certifier-$MEMBER.log" | head -n 1)
    CERTIFIER_ARGS="$CERTIFIER_ARGS --certifier $URL"
done

# 3. Alice's and bob's wallets, and 1000 for alice.
ALICE=$(specie wallet --wallet alice.json --node "$NODE" create | sed -n 's/^address: //p')
BOB=$(specie wallet --wallet bob.json --node "$NODE" create | sed -n 's/^address: //p')
PAYMENT=$(specie wallet --wallet issuer.json mint 1000 --to "$ALICE" |
    sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet alice.json import "$PAYMENT"

# 4. Confidential: alice shields 600 of her coins into a note (its value a commitment) and pays
#    bob 250 from it; bob receives the note with the opening in the specie-cpay1… string.
specie wallet --wallet alice.json shield --amount 600
PAYMENT=$(specie wallet --wallet alice.json send --confidential --to "$BOB" --amount 250 |
    sed -n 's/^  \(specie-cpay1[^ ]*\)$/\1/p')
specie wallet --wallet bob.json receive "$PAYMENT"

# 5. Enrolment, after KYC: the RA opens an id for each person; their wallet answers the
#    challenge with a request (no secret in it); the RA signs a credential the wallet keeps.
for ENROLMENT in alice.json:7 bob.json:8; do
    WALLET=${ENROLMENT%:*}
    ID=${ENROLMENT#*:}
    CHALLENGE=$(specie ra --dir ./ra challenge --id "$ID")
    REQUEST=$(specie wallet --wallet "$WALLET" enrol "$CHALLENGE" |
        sed -n 's/^  \(specie-enrol-request1[^ ]*\)$/\1/p')
    CREDENTIAL=$(specie ra --dir ./ra enrol "$REQUEST")
    specie wallet --wallet "$WALLET" enrol --credential "$CREDENTIAL"
done

# 6. Anonymous: alice turns 300 of her coins into an anonymous note, and pays 120 of it to
#    enrolment id 8, proving her spend with her credential; bob receives the specie-apay1… string.
specie wallet --wallet alice.json anonymise --amount 300
PAYMENT=$(specie wallet --wallet alice.json send-anonymous --to-id 8 --amount 120 |
    sed -n 's/^  \(specie-apay1[^ ]*\)$/\1/p')
specie wallet --wallet bob.json receive "$PAYMENT"

# 7. Unlinkable: alice turns 50 of her coins into a token, which the certifiers certify once the
#    ledger holds it, and pays 20 of it to enrolment id 8: the spend shows a serial number, not
#    the token. Bob receives the specie-upay1… string and has his token certified.
specie wallet --wallet alice.json enter-unlinkable --amount 50 $CERTIFIER_ARGS
PAYMENT=$(specie wallet --wallet alice.json send-unlinkable --to-id 8 --amount 20 $CERTIFIER_ARGS |
    sed -n 's/^  \(specie-upay1[^ ]*\)$/\1/p')
specie wallet --wallet bob.json receive "$PAYMENT" $CERTIFIER_ARGS

# 8. The balances.
check "bob's confidential notes" "$(specie wallet --wallet bob.json balance | sed -n 's/^confidential spendable: *\([0-9]*\) .*/\1/p')" "250"
check "bob's anonymous notes" "$(specie wallet --wallet bob.json balance | sed -n 's/^anonymous spendable: *\([0-9]*\) .*/\1/p')" "120"
check "bob's unlinkable tokens" "$(specie wallet --wallet bob.json balance | sed -n 's/^unlinkable spendable: *\([0-9]*\) .*/\1/p')" "20"

# 9. The auditor reads the ledger of record from genesis, checks every proof again, decrypts
#    the values and names the anonymous owners among the enrolled ids the RA lists. Blocks are
#    cut every 100 ms: wait (at most 30 s) until the anonymous payment is in one, shown as
#    `id:7:300 -> id:8:120 id:7:180` (id 7 spent 300: 120 to id 8, 180 back; outputs in random
#    order).
specie ra --dir ./ra list >ids
tries=0
until AUDIT=$(specie audit show --node "$NODE" --key auditor.key --directory ids \
    --registration-authority "$RA") && echo "$AUDIT" | grep 'id:7:300 -> ' | grep -q 'id:8:120'; do
    tries=$((tries + 1))
    [ "$tries" -lt 150 ] || { echo "FAILED: the auditor did not see id 7 pay id 8 120" >&2; exit 1; }
    sleep 0.2
done
echo "$AUDIT"
