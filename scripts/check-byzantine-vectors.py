#!/usr/bin/env python3
"""Recomputes docs/byzantine-vectors.json without the Rust code: the keys from deterministic_key's
derivation, every encoding from the layouts of specie-fastpay's format 2 (docs/byzantine-format.md;
votes and certificates carry their phase, round changes and justifications for the recovery
rounds), the committee id and order digests with hashlib, and every Ed25519 signature verified
and re-signed (Ed25519 is deterministic) with the `cryptography` package. Not part of CI (which
has no Python packages): run it by hand after a format change, from the repository root:

    python3 scripts/check-byzantine-vectors.py
"""
import hashlib, json, struct, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives import serialization

VERSION = bytes([2])
PREPARE, COMMIT = 0, 1
v = {x["name"]: bytes.fromhex(x["hex"]) for x in json.load(open(sys.argv[1] if len(sys.argv) > 1 else "docs/byzantine-vectors.json"))["vectors"]}
raw = serialization.Encoding.Raw, serialization.PublicFormat.Raw
def u16(n): return struct.pack("<H", n)
def u32(n): return struct.pack("<I", n)
def u64(n): return struct.pack("<Q", n)
def seed(label, n): return hashlib.sha256(b"specie/fastpay/deterministic-key/" + label.encode() + u64(n)).digest()
def signed_by(secret, message, signature):
    """Verifies `signature` and checks that re-signing gives the same bytes."""
    key = Ed25519PrivateKey.from_private_bytes(secret)
    key.public_key().verify(signature, message)
    assert key.sign(message) == signature
for i in range(4):
    assert v[f"authority_seed[{i}]"] == seed("authority", i)
    assert Ed25519PrivateKey.from_private_bytes(seed("authority", i)).public_key().public_bytes(*raw) == v[f"authority_public_key[{i}]"]
for i in range(2):
    assert v[f"account_seed[{i}]"] == seed("account", i)
    assert Ed25519PrivateKey.from_private_bytes(seed("account", i)).public_key().public_bytes(*raw) == v[f"account_public_key[{i}]"]
auth = [v[f"authority_public_key[{i}]"] for i in range(4)]
committee = VERSION + u64(1) + u32(4) + b"".join(auth)
assert committee == v["committee"]
cid = hashlib.sha256(b"specie/fastpay/committee/v1" + committee).digest()
assert cid == v["committee_id"]
owner, payee = v["account_public_key[0]"], v["account_public_key[1]"]

# Orders (§4): owner-signed under their own domain.
def order(recipient_kind, recipient, amount, seq, memo):
    return VERSION + owner + bytes([recipient_kind]) + recipient + struct.pack("<QQI", amount, seq, len(memo)) + memo
orders = {"transfer": order(0, payee, 1000, 0, b"vector"), "redeem": order(1, b"\x11"*32, 400, 0, b"")}
digests = {}
for name, o in orders.items():
    assert o == v[f"{name}_order"], name
    sb = b"specie/fastpay/transfer-order/v1" + o
    assert sb == v[f"{name}_order_signing_bytes"]
    digests[name] = hashlib.sha256(sb).digest()
    assert digests[name] == v[f"{name}_order_digest"]
    so = v[f"{name}_signed_order"]
    assert so[:-64] == o and len(so) == len(o) + 64
    signed_by(seed("account", 0), sb, so[-64:])

# Votes (§5): the statement names the committee, the phase (kind byte) and the round.
def statement(kind, rnd, digest): return b"specie/fastpay/vote/v2" + VERSION + cid + bytes([kind]) + u32(rnd) + digest
st = statement(PREPARE, 0, digests["transfer"])
assert st == v["vote_statement_signing_bytes"]
for i in range(4):
    vote = v[f"vote[{i}]"]
    assert vote[:-64] == VERSION + u16(i) + cid + bytes([PREPARE]) + u32(0) + digests["transfer"]
    signed_by(seed("authority", i), st, vote[-64:])

# Certificates (§6): final ones of commit votes, and a lock of round-1 prepare votes.
def cert(name, of, kind, rnd, signers, data=None):
    """Checks the certificate `data` (default: the vector `name`); returns its signatures and length."""
    c = v[name] if data is None else data
    body = VERSION + v[f"{of}_signed_order"] + cid + bytes([kind]) + u32(rnd) + u32(len(signers))
    assert c.startswith(body), name
    sigs = {}
    for k, s in enumerate(signers):
        at = len(body) + 66 * k
        a, sig = struct.unpack("<H", c[at:at+2])[0], c[at+2:at+66]
        assert a == s, name
        signed_by(seed("authority", a), statement(kind, rnd, digests[of]), sig)
        sigs[a] = sig
    return sigs, len(body) + 66 * len(signers)
(c1, n1), (c2, n2) = cert("certificate", "transfer", COMMIT, 0, [0, 1, 2]), cert("conflicting_certificate", "redeem", COMMIT, 0, [1, 2, 3])
assert (n1, n2) == (len(v["certificate"]), len(v["conflicting_certificate"]))
_, n = cert("lock_certificate", "transfer", PREPARE, 1, [0, 1, 2])
assert n == len(v["lock_certificate"])


# The owner's request for round 2 of its sequence 0 (§8.1).
request = VERSION + cid + owner + u64(0) + u32(2)
assert v["round_request_signing_bytes"] == b"specie/fastpay/round-request/v2" + request
assert v["signed_round_request"][:-64] == request
signed_by(seed("account", 0), v["round_request_signing_bytes"], v["signed_round_request"][-64:])

# Round changes and the justification: authorities 0, 1, 2 enter round 2 of account 0's
# sequence 0. 0 prepared transfer in round 0 and holds the round-1 lock on it, 1 prepared
# transfer, 2 prepared redeem.
def option(value): return b"\x00" if value is None else b"\x01" + value
reports = [(digests["transfer"], u32(1) + digests["transfer"]), (digests["transfer"], None), (digests["redeem"], None)]
changes = []
for a, (prepared, lock) in enumerate(reports):
    fields = VERSION + cid + owner + u64(0) + u32(2) + option(prepared) + option(lock)
    signing = b"specie/fastpay/round-change/v2" + fields
    if a == 0:
        assert signing == v["round_change_signing_bytes"]
    signed = v[f"signed_round_change[{a}]"]
    head = VERSION + u16(a) + fields
    assert signed.startswith(head), a
    signed_by(seed("authority", a), signing, signed[len(head):len(head)+64])
    tail = signed[len(head)+64:]
    if lock is None:
        assert tail == b"\x00", a
    else:
        assert tail == b"\x01" + v["lock_certificate"], a
    changes.append(signed)
assert v["justification"] == VERSION + u32(3) + b"".join(changes)

# Evidence (§7), version 3: each double vote carries both orders, each with its kind, round and
# signature; then authority 2's broken promise: its round change (reporting redeem prepared in
# round 0) against its round-0 prepare of transfer.
ev = bytes([3]) + committee + u32(2)
for a in (1, 2):
    ev += u16(a)
    ev += orders["transfer"] + bytes([COMMIT]) + u32(0) + c1[a]
    ev += orders["redeem"] + bytes([COMMIT]) + u32(0) + c2[a]
fields = VERSION + cid + owner + u64(0) + u32(2) + option(digests["redeem"]) + option(None)
change_signature = v["signed_round_change[2]"][3 + len(fields):3 + len(fields) + 64]
ev += u32(1) + u16(2) + fields + change_signature
ev += orders["transfer"] + bytes([PREPARE]) + u32(0) + v["vote[2]"][-64:]
assert ev == v["evidence"]

# Committee record (§3.1): epoch 2 hands seat 3 to deterministic_key("authority", 4), endorsed by
# seats 0, 1, 2 of epoch 1 over domain || version || epoch 1's id || epoch 2's committee.
def pub(secret): return Ed25519PrivateKey.from_private_bytes(secret).public_key().public_bytes(*raw)
members2 = [pub(seed("authority", a)) for a in (0, 1, 2, 4)]
committee2 = VERSION + u64(2) + u32(4) + b"".join(members2)
record_signing = b"specie/fastpay/committee-record/v1" + VERSION + cid + committee2
assert record_signing == v["committee_record_signing_bytes"]
record = v["committee_record"]
head = VERSION + cid + committee2 + u32(3)
assert record.startswith(head) and len(record) == len(head) + 3 * 66
for i, a in enumerate((0, 1, 2)):
    entry = record[len(head) + 66 * i:len(head) + 66 * (i + 1)]
    assert entry[:2] == u16(a), a
    signed_by(seed("authority", a), record_signing, entry[2:])

print("all vectors independently checked;", {k: len(b) for k, b in v.items() if not k.startswith(("authority", "account"))})
