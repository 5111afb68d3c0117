#!/usr/bin/env python3
"""Recomputes docs/byzantine-vectors.json without the Rust code: the keys from deterministic_key's
derivation, every encoding from docs/byzantine-format.md's layouts, the committee id and order
digests with hashlib, and every Ed25519 signature verified (and re-signed: Ed25519 is
deterministic) with the `cryptography` package. Not part of CI (which has no Python packages):
run it by hand after a format change, from the repository root:

    python3 scripts/check-byzantine-vectors.py
"""
import hashlib, json, struct, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives import serialization
v = {x["name"]: bytes.fromhex(x["hex"]) for x in json.load(open(sys.argv[1] if len(sys.argv) > 1 else "docs/byzantine-vectors.json"))["vectors"]}
raw = serialization.Encoding.Raw, serialization.PublicFormat.Raw
def seed(label, n): return hashlib.sha256(b"specie/fastpay/deterministic-key/" + label.encode() + struct.pack("<Q", n)).digest()
for i in range(4):
    assert v[f"authority_seed[{i}]"] == seed("authority", i)
    assert Ed25519PrivateKey.from_private_bytes(seed("authority", i)).public_key().public_bytes(*raw) == v[f"authority_public_key[{i}]"]
for i in range(2):
    assert v[f"account_seed[{i}]"] == seed("account", i)
    assert Ed25519PrivateKey.from_private_bytes(seed("account", i)).public_key().public_bytes(*raw) == v[f"account_public_key[{i}]"]
auth = [v[f"authority_public_key[{i}]"] for i in range(4)]
committee = bytes([1]) + struct.pack("<Q", 1) + struct.pack("<I", 4) + b"".join(auth)
assert committee == v["committee"]
cid = hashlib.sha256(b"specie/fastpay/committee/v1" + committee).digest()
assert cid == v["committee_id"]
owner, payee = v["account_public_key[0]"], v["account_public_key[1]"]
def order(recipient_kind, recipient, amount, seq, memo):
    return bytes([1]) + owner + bytes([recipient_kind]) + recipient + struct.pack("<QQI", amount, seq, len(memo)) + memo
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
    Ed25519PublicKey.from_public_bytes(owner).verify(so[-64:], sb)
    # deterministic: re-signing gives the same signature
    assert Ed25519PrivateKey.from_private_bytes(seed("account", 0)).sign(sb) == so[-64:]
def statement(d): return b"specie/fastpay/vote/v1" + bytes([1]) + cid + struct.pack("<I", 0) + d
st = statement(digests["transfer"])
assert st == v["vote_statement_signing_bytes"]
for i in range(4):
    vote = v[f"vote[{i}]"]
    assert vote[:-64] == bytes([1]) + struct.pack("<H", i) + cid + struct.pack("<I", 0) + digests["transfer"]
    Ed25519PublicKey.from_public_bytes(auth[i]).verify(vote[-64:], st)
def cert(name, signers):
    c = v[name]
    body = bytes([1]) + v[f"{name2order[name]}_signed_order"] + cid + struct.pack("<I", 0) + struct.pack("<I", len(signers))
    assert c.startswith(body)
    rest = c[len(body):]
    assert len(rest) == 66 * len(signers)
    sigs = {}
    for k, s in enumerate(signers):
        a, sig = struct.unpack("<H", rest[66*k:66*k+2])[0], rest[66*k+2:66*k+66]
        assert a == s
        Ed25519PublicKey.from_public_bytes(auth[a]).verify(sig, statement(digests[name2order[name]]))
        sigs[a] = sig
    return sigs
name2order = {"certificate": "transfer", "conflicting_certificate": "redeem"}
c1 = cert("certificate", [0, 1, 2]); c2 = cert("conflicting_certificate", [1, 2, 3])
ev = bytes([1]) + committee + struct.pack("<I", 2)
for a in (1, 2):
    ev += struct.pack("<H", a) + orders["transfer"] + struct.pack("<I", 0) + c1[a] + orders["redeem"] + struct.pack("<I", 0) + c2[a]
assert ev == v["evidence"]
print("all vectors independently checked;", {k: len(b) for k, b in v.items() if not k.startswith(("authority", "account"))})
