#!/bin/sh
# Private payments in a cluster, read by an auditor: the sentinels require what the cluster
# file's [privacy] section names, and the ledger of record is kept by an archiver group. Alice
# pays bob 250 confidentially, then, both enrolled by a registration authority (RA), 120
# anonymously; the auditor reads both from the ledger.
# Run it in an empty directory, with `specie` on PATH: sh privacy-cluster.sh
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

# 1. The keys: the issuer's; the auditor's, from one seed in auditor.key (line 1: the key values
#    are encrypted to, then the owner key anonymous owners are encrypted to); the RA's, whose
#    seed and records are in ./ra.
ISSUER=$(specie wallet --wallet issuer.json create --issuer | sed -n 's/^issuer public key: //p')
specie audit keygen --out auditor.key
AUDITOR=$(specie audit key --key auditor.key | sed -n 1p)
OWNER_AUDITOR=$(specie audit key --key auditor.key | sed -n 's/^owner auditor key: //p')
RA=$(specie ra init --dir ./ra)

# 2. A small cluster (one replica per group, one sentinel) with the ledger of record in an
#    archiver group of one replica (`--ledger-of-record` alone: 3). The ledger is chosen at
#    creation; the privacy keys are the operator's edit of cluster.toml, which the sentinels
#    read when they start: so start the cluster once to write the file, stop it, add the
#    [privacy] section, and start it again.
specie cluster up --dir ./cluster --base-port "$BASE_PORT" --replicas 1 --sentinels 1 \
    --issuer "$ISSUER" --ledger-of-record 1
specie cluster down --dir ./cluster
cat >>cluster/cluster.toml <<TOML

[privacy]
auditors = ["$AUDITOR"]
registration_authority = "$RA"
owner_auditors = ["$OWNER_AUDITOR"]
TOML
SENTINEL=$(specie cluster up --dir ./cluster | sed -n 's/^  sentinel-0: //p')

# 3. Alice's and bob's wallets, and 1000 for alice.
ALICE=$(specie wallet --wallet alice.json --node "$SENTINEL" create | sed -n 's/^address: //p')
BOB=$(specie wallet --wallet bob.json --node "$SENTINEL" create | sed -n 's/^address: //p')
PAYMENT=$(specie wallet --wallet issuer.json --node "$SENTINEL" mint 1000 --to "$ALICE" |
    sed -n 's/^  \(specie-pay1[^ ]*\)$/\1/p')
specie wallet --wallet alice.json import "$PAYMENT"

# 4. Confidential: alice shields 600 into a note and pays bob 250 from it.
specie wallet --wallet alice.json shield --amount 600
PAYMENT=$(specie wallet --wallet alice.json send --confidential --to "$BOB" --amount 250 |
    sed -n 's/^  \(specie-cpay1[^ ]*\)$/\1/p')
specie wallet --wallet bob.json receive "$PAYMENT"

# 5. Enrolment, after KYC: the RA opens an id for each person; their wallet answers the
#    challenge; the RA signs a credential the wallet keeps.
for ENROLMENT in alice.json:7 bob.json:8; do
    WALLET=${ENROLMENT%:*}
    ID=${ENROLMENT#*:}
    CHALLENGE=$(specie ra --dir ./ra challenge --id "$ID")
    REQUEST=$(specie wallet --wallet "$WALLET" enrol "$CHALLENGE" |
        sed -n 's/^  \(specie-enrol-request1[^ ]*\)$/\1/p')
    CREDENTIAL=$(specie ra --dir ./ra enrol "$REQUEST")
    specie wallet --wallet "$WALLET" enrol --credential "$CREDENTIAL"
done

# 6. Anonymous, values hidden too: alice turns 300 of her coins into a note and pays 120 of it
#    to enrolment id 8.
specie wallet --wallet alice.json anonymise --amount 300 --hide-values
PAYMENT=$(specie wallet --wallet alice.json send-anonymous --to-id 8 --amount 120 --hide-values |
    sed -n 's/^  \(specie-apay1[^ ]*\)$/\1/p')
specie wallet --wallet bob.json receive "$PAYMENT"

# 7. The balances.
check "bob's confidential notes" "$(specie wallet --wallet bob.json balance | sed -n 's/^confidential spendable: *\([0-9]*\) .*/\1/p')" "250"
check "bob's anonymous notes" "$(specie wallet --wallet bob.json balance | sed -n 's/^anonymous spendable: *\([0-9]*\) .*/\1/p')" "120"

# 8. The auditor reads the ledger of record through the sentinel, checks every proof again,
#    decrypts the values and names the anonymous owners among the enrolled ids. Wait (at most
#    30 s) until the anonymous payment is in a block: `id:7:300 -> id:8:120 id:7:180`, the
#    outputs in random order.
specie ra --dir ./ra list >ids
tries=0
until AUDIT=$(specie audit show --node "$SENTINEL" --key auditor.key --directory ids \
    --registration-authority "$RA") && echo "$AUDIT" | grep 'id:7:300 -> ' | grep -q 'id:8:120'; do
    tries=$((tries + 1))
    [ "$tries" -lt 150 ] || { echo "FAILED: the auditor did not see id 7 pay id 8 120" >&2; exit 1; }
    sleep 0.2
done
echo "$AUDIT"
