#!/usr/bin/env python3
"""Recomputes the FastPay committee epoch vectors of docs/transaction-format.md (§5.11, the
`fastpay_epoch_*` lines of §8) without the Rust code: the keys from deterministic_key's
derivation, the record and the transaction from their layouts, the txid, the marker and the
compact transaction with hashlib, and every endorsement verified and re-signed (Ed25519 is
deterministic) with the `cryptography` package. Not part of CI (which has no Python packages):
run it by hand after a format change, from the repository root:

    python3 scripts/check-fastpay-epoch-vectors.py
"""
import hashlib, re, struct, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization

doc = open(sys.argv[1] if len(sys.argv) > 1 else "docs/transaction-format.md").read()
v = {m[1]: bytes.fromhex(m[2]) for m in re.finditer(r"^([a-z_]+(?:\[\d+\])?)=([0-9a-f]+)$", doc, re.M)}
raw = serialization.Encoding.Raw, serialization.PublicFormat.Raw
def u16(n): return struct.pack("<H", n)
def u32(n): return struct.pack("<I", n)
def u64(n): return struct.pack("<Q", n)
def seed(label, n): return hashlib.sha256(b"specie/fastpay/deterministic-key/" + label.encode() + u64(n)).digest()
def public(secret): return Ed25519PrivateKey.from_private_bytes(secret).public_key().public_bytes(*raw)
VERSION = bytes([2])
HEADER = bytes.fromhex("ff53504345585401")
KIND_EPOCH = bytes([0x09])

def committee(epoch, keys): return VERSION + u64(epoch) + u32(len(keys)) + b"".join(keys)
first = committee(0, [public(seed("authority", i)) for i in range(4)])
assert first == v["fastpay_committee_ser"]
first_id = hashlib.sha256(b"specie/fastpay/committee/v1" + first).digest()
assert first_id == v["fastpay_committee_id"]

# Epoch 1: seat 3 handed to deterministic_key("authority", 4); seats 0, 1, 2 of epoch 0 endorse.
nxt = committee(1, [public(seed("authority", i)) for i in (0, 1, 2, 4)])
signing = b"specie/fastpay/committee-record/v1" + VERSION + first_id + nxt
ser = v["fastpay_epoch_ser"]
head = HEADER + KIND_EPOCH + VERSION + first_id + nxt + u32(3)
assert ser.startswith(head) and len(ser) == len(head) + 3 * 66, "layout"
for i in range(3):
    entry = ser[len(head) + 66 * i:len(head) + 66 * (i + 1)]
    assert entry[:2] == u16(i)
    key = Ed25519PrivateKey.from_private_bytes(seed("authority", i))
    key.public_key().verify(entry[2:], signing)
    assert key.sign(signing) == entry[2:], "deterministic signature"

txid = hashlib.sha256(HEADER + KIND_EPOCH + first_id + nxt).digest()
assert txid == v["fastpay_epoch_txid"]
marker_preimage = b"specie/fastpay-epoch-record/v1" + first_id
assert len(marker_preimage) == 62
marker = hashlib.sha256(marker_preimage).digest()
assert marker == v["fastpay_epoch_marker"]
# Compact: txid ‖ u64(spent count) ‖ u64(created count) ‖ created ‖ u64(attestation count).
assert v["fastpay_epoch_compact_ser"] == txid + u64(0) + u64(1) + marker + u64(0)
print("fastpay_epoch vectors: OK")
