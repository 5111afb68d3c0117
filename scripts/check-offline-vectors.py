#!/usr/bin/env python3
"""Recomputes docs/offline-vectors.json without the Rust code: the keys from deterministic_key's
derivation, every signing statement, link and encoding from the layouts of specie-offline's format
1 (docs/offline-format.md), hashes with hashlib, and every Ed25519 signature verified and
re-signed (Ed25519 is deterministic) with the `cryptography` package. Not part of CI (which has no
Python packages): run it by hand after a format change, from the repository root:

    python3 scripts/check-offline-vectors.py
"""
import hashlib, json, struct, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives import serialization

VERSION = bytes([1])
DENOMINATION, PERIOD = 100, 7
SERIAL = bytes(range(16))
NONCE_A, NONCE_B, NONCE_C = b"\xaa" * 16, b"\xbb" * 16, b"\xcc" * 16
ISSUE, TRANSFER, DEPOSIT = b"specie/offline/issue/v1", b"specie/offline/transfer/v1", b"specie/offline/deposit/v1"
KEY_CERTIFICATE, KEY_BINDING = b"specie/offline/key-certificate/v1", b"specie/offline/key-binding/v1"
INSTRUCTION, NONCE_D = b"\x11" * 32, b"\xdd" * 16
# §2: the five domains share "specie/offline/" (15 bytes) and differ at byte 15, the two key
# domains (sharing "specie/offline/key-") at byte 19.
assert (len(ISSUE), len(TRANSFER), len(DEPOSIT), len(KEY_CERTIFICATE), len(KEY_BINDING)) == (23, 26, 25, 33, 29)
assert {d[15:16] for d in (ISSUE, TRANSFER, DEPOSIT, KEY_CERTIFICATE)} == {b"i", b"t", b"d", b"k"}
assert (KEY_CERTIFICATE[:19], KEY_CERTIFICATE[19:20], KEY_BINDING[19:20]) == (KEY_BINDING[:19], b"c", b"b")

v = {x["name"]: bytes.fromhex(x["hex"]) for x in json.load(open(sys.argv[1] if len(sys.argv) > 1 else "docs/offline-vectors.json"))["vectors"]}
checked = set()
def get(name):
    checked.add(name)
    return v[name]
raw = serialization.Encoding.Raw, serialization.PublicFormat.Raw
def u32(n): return struct.pack("<I", n)
def u64(n): return struct.pack("<Q", n)
def sha256(b): return hashlib.sha256(b).digest()
def seed(label, n): return sha256(b"specie/offline/deterministic-key/" + label.encode() + u64(n))
def public(secret): return Ed25519PrivateKey.from_private_bytes(secret).public_key().public_bytes(*raw)
def signed_by(secret, message, signature):
    """Verifies `signature` under the secret's public key and checks that re-signing gives the same bytes."""
    key = Ed25519PrivateKey.from_private_bytes(secret)
    key.public_key().verify(signature, message)
    Ed25519PublicKey.from_public_bytes(public(secret)).verify(signature, message)
    assert key.sign(message) == signature
    assert len(signature) == 64 and int.from_bytes(signature[32:], "little") < 2**252 + 27742317777372353535851937790883648493

# Keys (§9).
secrets = {"issuing": seed("issuing", 0), "certifying": seed("certifying", 0), "identity": seed("identity", 0)}
secrets.update({f"one_time[{i}]": seed("one-time", i) for i in range(3)})
for name, secret in secrets.items():
    assert get(f"{name}_seed") == secret, name
    assert get(f"{name}_public_key") == public(secret), name
pub = {name: public(secret) for name, secret in secrets.items()}
owner = [pub[f"one_time[{i}]"] for i in range(3)]

# Key certificates (§3): the certifying key signs domain || 01 || certifying key || key || period
# (102 bytes); the encoding is key || period || signature (100 bytes, no version byte).
certificates = {}
for i in (1, 2):
    signing = KEY_CERTIFICATE + VERSION + pub["certifying"] + owner[i] + u32(PERIOD)
    assert len(signing) == 102 and signing == get(f"key_certificate_signing_bytes[{i}]"), i
    certificate = get(f"key_certificate[{i}]")
    assert len(certificate) == 100 and certificate[:36] == owner[i] + u32(PERIOD), i
    signed_by(secrets["certifying"], signing, certificate[36:])
    certificates[i] = certificate

# Key binding (§4): the identity key signs domain || 01 || identity || key (94 bytes).
binding = KEY_BINDING + VERSION + pub["identity"] + owner[0]
assert len(binding) == 94 and binding == get("key_binding_signing_bytes")
signed_by(secrets["identity"], binding, get("key_binding_signature"))

# Issuance (§5): domain || 01 || issuing key || serial || first owner (104 bytes); link 0 is its hash.
issuance = ISSUE + VERSION + pub["issuing"] + SERIAL + owner[0]
assert len(issuance) == 104 and issuance == get("issuance_signing_bytes")
link = [sha256(issuance)]
assert link[0] == get("link[0]")

# Transfers (§6): domain || 01 || previous link || index (u8) || next key || period || nonce (112
# bytes); a link is the hash of those bytes, the domain included.
def transfer(previous, index, next_owner, nonce):
    statement = TRANSFER + VERSION + previous + bytes([index]) + next_owner + u32(PERIOD) + nonce
    assert len(statement) == 112
    return statement
statements = [transfer(link[0], 1, owner[1], NONCE_A)]
link.append(sha256(statements[0]))
statements.append(transfer(link[1], 2, owner[2], NONCE_B))
link.append(sha256(statements[1]))
for i in (1, 2):
    assert statements[i - 1] == get(f"transfer_signing_bytes[{i}]"), i
    assert link[i] == get(f"link[{i}]"), i
branch = transfer(link[0], 1, owner[2], NONCE_C)
assert branch == get("branch_signing_bytes")
branch_link = sha256(branch)
assert branch_link == get("branch_link") and branch_link != link[1]

# Deposit (§7): domain || 01 || last link || index (u8) || instruction hash || nonce (107 bytes),
# signed by owner 2 on the 2-hop token's last link, as its third statement after the issuance.
deposit = DEPOSIT + VERSION + link[2] + bytes([3]) + INSTRUCTION + NONCE_D
assert len(deposit) == 107 and deposit == get("deposit_signing_bytes")
assert sha256(deposit) == get("deposit_link")
signed_by(secrets["one_time[2]"], deposit, get("deposit_signature"))

# Tokens (§8): 01 || issuing key || serial || first owner || issuance signature || hop count (u8)
# || hops, each certificate (100) || nonce (16) || owner's signature (64): 146 + 180·h bytes.
def check_token(name, hops):
    """hops: (certificate, nonce, signer's secret, statement) of each hop, in order."""
    token = get(name)
    head = VERSION + pub["issuing"] + SERIAL + owner[0]
    assert token[:81] == head and token[145] == len(hops), name
    signed_by(secrets["issuing"], issuance, token[81:145])
    assert len(token) == 146 + 180 * len(hops), name
    for k, (certificate, nonce, signer, statement) in enumerate(hops):
        at = 146 + 180 * k
        assert token[at:at + 100] == certificate and token[at + 100:at + 116] == nonce, (name, k)
        signed_by(signer, statement, token[at + 116:at + 180])
hop1 = (certificates[1], NONCE_A, secrets["one_time[0]"], statements[0])
hop2 = (certificates[2], NONCE_B, secrets["one_time[1]"], statements[1])
check_token("token[0]", [])
check_token("token[1]", [hop1])
check_token("token[2]", [hop1, hop2])
check_token("branch_token", [(certificates[2], NONCE_C, secrets["one_time[0]"], branch)])

# Key ring (§13a), version 02: current period, spend periods, deposit periods (u32 each; the
# defaults 0, 3, 12) || issuing count (u8) || (key || denomination u64 || period u32 || flags u8)
# each || certifying count (u8) || (period u32 || key) each; its fingerprint hashes
# "specie/offline/key-ring/v2" with it.
ring = (bytes([2]) + u32(0) + u32(3) + u32(12) + bytes([1]) + pub["issuing"] + u64(DENOMINATION) + u32(0)
        + bytes([0]) + bytes([1]) + u32(PERIOD) + pub["certifying"])
assert ring == get("key_ring")
assert sha256(b"specie/offline/key-ring/v2" + ring) == get("key_ring_fingerprint")
# Signed key ring (§9b): the bridge key signs "specie/offline/signed-key-ring/v1" || 01 || its
# public key || the ring's fingerprint; published as public key || signature || ring.
bridge = seed("bridge", 0)
assert get("bridge_seed") == bridge and get("bridge_public_key") == public(bridge)
ring_statement = b"specie/offline/signed-key-ring/v1" + VERSION + public(bridge) + get("key_ring_fingerprint")
assert ring_statement == get("signed_key_ring_signing_bytes")
signed_ring = get("signed_key_ring")
assert signed_ring[:32] == public(bridge) and signed_ring[96:] == ring
signed_by(bridge, ring_statement, signed_ring[32:96])
# Instruction (§13b): 01 || 00 re-issue || count (u8) || (value u64 || owner) each; a deposit
# statement signs SHA-256("specie/offline/instruction/v1" || encoding).
instruction = VERSION + bytes([0, 1]) + u64(DENOMINATION) + owner[2]
assert instruction == get("instruction_reissue")
assert sha256(b"specie/offline/instruction/v1" + instruction) == get("instruction_reissue_hash")
# Evidence bundle (§13a): 01 || ring || count (u8) || double spend (01 || token || two moves,
# each 00 || certificate || nonce || signature for a transfer || binding identity || key ||
# signature). Owner 0 passed the issued token to owner 1 (nonce A) and to owner 2 (nonce C).
token0 = get("token[0]")
def transfer_move(certificate, nonce, signature): return bytes([0]) + certificate + nonce + signature
first = transfer_move(certificates[1], NONCE_A, get("token[1]")[146 + 116:146 + 180])
second = transfer_move(certificates[2], NONCE_C, get("branch_token")[146 + 116:146 + 180])
bound = pub["identity"] + owner[0] + get("key_binding_signature")
double_spend = VERSION + token0 + first + second + bound
assert get("evidence_bundle") == VERSION + ring + bytes([1]) + double_spend
signed_by(secrets["one_time[0]"], statements[0], first[-64:])
signed_by(secrets["one_time[0]"], branch, second[-64:])
assert first != second
assert checked == set(v), f"vectors not checked: {set(v) - checked}"
print("all vectors independently checked;", {k: len(b) for k, b in v.items() if not k.endswith(("_seed", "_public_key"))})
