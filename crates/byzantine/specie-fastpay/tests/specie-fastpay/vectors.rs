//! The vectors of `docs/byzantine-format.md`: a fixed scenario built from `deterministic_key`
//! (Ed25519 signatures are deterministic, so every byte is reproducible), encoded, and compared
//! with `docs/byzantine-vectors.json`. Any change to an encoding, a domain string, the digest or
//! the key derivation fails this test. The stored bytes are also decoded back, re-encoded, and
//! checked as a verifier would (signatures, certificates against the committee, evidence).
//!
//! To regenerate the file after a deliberate format change (which also needs a new version
//! byte): `SPECIE_WRITE_VECTORS=1 cargo test -p specie-fastpay --test specie-fastpay vectors::`.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;
use specie_codec::{DecodeError, Reader};
use specie_fastpay::{
    decode_exact, deterministic_key, AccountKey, Allowed, BrokenPromise, Certificate, CertificateError, Committee,
    CommitteeChain, CommitteeRecord, CoreAddress, DoubleVote, Evidence, Justification, Recipient, RoundChange,
    RoundRequest, SignedOrder, SignedRoundChange, SignedRoundRequest, SigningKey, TransferOrder, Vote, VoteKind,
    VoteStatement,
};
use specie_vectors::{assert_file_matches, encoded, read_or_write, stored_bytes, vectors_text, Vector};

/// Generous: the largest vector (the evidence file) is about 1.2 KiB.
const VECTOR_BYTES_MAX: usize = 1 << 16;

/// The authorities that sign the redeem order as well as the transfer: the ones convicted.
const CONVICTED: [u16; 2] = [1, 2];

fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../docs/byzantine-vectors.json")
}

/// Every value of the scenario.
struct Scenario {
    authorities: Vec<SigningKey>,
    owner: SigningKey,
    payee: SigningKey,
    committee: Committee,
    transfer: SignedOrder,
    redeem: SignedOrder,
    statement: VoteStatement,
    votes: Vec<Vote>,
    certificate: Certificate,
    conflicting: Certificate,
    evidence: Evidence,
    /// Recovery of the owner's slot: a lock of round 1, the owner's request for round 2, and
    /// round 2's justification.
    lock: Certificate,
    round_request: SignedRoundRequest,
    justification: Justification,
    /// Epoch 2: seat 3 handed to `deterministic_key("authority", 4)`, endorsed by seats 0, 1, 2.
    record: CommitteeRecord,
}

fn votes_for(
    committee: &Committee,
    authorities: &[SigningKey],
    (kind, round): (VoteKind, u32),
    order: &SignedOrder,
) -> Vec<Vote> {
    let statement = VoteStatement {
        kind,
        committee_id: committee.id(),
        round,
        order_digest: order.order.digest(),
    };
    (0..authorities.len() as u16)
        .map(|authority| Vote {
            authority,
            statement,
            signature: statement.sign(&authorities[usize::from(authority)]),
        })
        .collect()
}

fn certificate_of(order: &SignedOrder, votes: &[Vote], signers: &[u16]) -> Certificate {
    let chosen: Vec<Vote> = signers.iter().map(|&a| votes[usize::from(a)].clone()).collect();
    Certificate::from_votes(order.clone(), &chosen)
}

fn scenario() -> Scenario {
    let authorities: Vec<SigningKey> = (0..4).map(|i| deterministic_key("authority", i)).collect();
    let (owner, payee) = (deterministic_key("account", 0), deterministic_key("account", 1));
    let committee = Committee::new(1, authorities.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap();
    let sender = AccountKey(owner.verifying_key().to_bytes());
    let transfer = TransferOrder {
        sender,
        recipient: Recipient::Account(AccountKey(payee.verifying_key().to_bytes())),
        amount: 1000,
        sequence: 0,
        memo: b"vector".to_vec(),
    }
    .sign(&owner);
    // The same account and sequence number to the online core: a double spend of `transfer`.
    let redeem = TransferOrder {
        sender,
        recipient: Recipient::Core(CoreAddress([0x11; 32])),
        amount: 400,
        sequence: 0,
        memo: Vec::new(),
    }
    .sign(&owner);
    // Prepare votes (the fast path's), and final certificates of the slow path: commit votes.
    let votes = votes_for(&committee, &authorities, (VoteKind::Prepare, 0), &transfer);
    let commits = votes_for(&committee, &authorities, (VoteKind::Commit, 0), &transfer);
    let certificate = certificate_of(&transfer, &commits, &[0, 1, 2]);
    let redeem_commits = votes_for(&committee, &authorities, (VoteKind::Commit, 0), &redeem);
    let conflicting = certificate_of(&redeem, &redeem_commits, &[1, 2, 3]);
    let round_one = votes_for(&committee, &authorities, (VoteKind::Prepare, 1), &transfer);
    let lock = certificate_of(&transfer, &round_one, &[0, 1, 2]);
    let justification = round_two_justification(&committee, &authorities, &lock, &redeem);
    // Authority 2 reports `redeem` prepared in round 0, but its round-0 vote is for `transfer`.
    let fast = Certificate::from_votes(transfer.clone(), &votes);
    let evidence = Evidence {
        committee: committee.clone(),
        double_votes: DoubleVote::from_certificates(&certificate, &conflicting),
        broken_promises: BrokenPromise::find([&justification.changes[2]], &[&fast]),
    };
    let round_request = RoundRequest {
        committee_id: committee.id(),
        account: sender,
        sequence: 0,
        round: 2,
    }
    .sign(&owner);
    let mut members = committee.members().to_vec();
    members[3] = deterministic_key("authority", 4).verifying_key().to_bytes();
    let mut record = CommitteeRecord::propose(&committee, members).unwrap();
    for seat in [2u16, 0, 1] {
        record.endorse(seat, &authorities[usize::from(seat)]);
    }
    Scenario {
        record,
        lock,
        round_request,
        justification,
        statement: votes[0].statement,
        authorities,
        owner,
        payee,
        committee,
        transfer,
        redeem,
        votes,
        certificate,
        conflicting,
        evidence,
    }
}

/// The round changes of authorities 0, 1 and 2 entering round 2 of the owner's slot at sequence
/// 0: 0 prepared `lock`'s order in round 0 and holds `lock` (round 1), 1 prepared the same order,
/// 2 prepared `other`. The lock decides: only `lock`'s order, `lock_round` 1.
fn round_two_justification(
    committee: &Committee,
    authorities: &[SigningKey],
    lock: &Certificate,
    other: &SignedOrder,
) -> Justification {
    let locked = lock.order.order.digest();
    let reports = [
        (Some(locked), Some((lock.round, locked))),
        (Some(locked), None),
        (Some(other.order.digest()), None),
    ];
    let changes = reports
        .into_iter()
        .enumerate()
        .map(|(authority, (prepared_first, reported_lock))| {
            let change = RoundChange {
                committee_id: committee.id(),
                account: lock.order.order.sender,
                sequence: lock.order.order.sequence,
                round: 2,
                prepared_first,
                lock: reported_lock,
            };
            let certificate = reported_lock.map(|_| lock.clone());
            change.sign(authority as u16, &authorities[authority], certificate)
        })
        .collect();
    Justification { changes }
}

/// Every vector, in the order the format document reads.
fn vectors(s: &Scenario) -> Vec<Vector> {
    let mut vectors = Vec::new();
    let mut put = |name: String, description: String, bytes: &[u8]| {
        vectors.push(Vector {
            name,
            description,
            bytes: bytes.to_vec(),
        });
    };
    for (i, key) in s.authorities.iter().enumerate() {
        put(
            format!("authority_seed[{i}]"),
            format!("Ed25519 secret key (seed) of deterministic_key(\"authority\", {i})"),
            &key.to_bytes(),
        );
        put(
            format!("authority_public_key[{i}]"),
            format!("authority {i}'s public key"),
            key.verifying_key().as_bytes(),
        );
    }
    for (i, key, role) in [(0, &s.owner, "the owner"), (1, &s.payee, "the payee")] {
        put(
            format!("account_seed[{i}]"),
            format!("deterministic_key(\"account\", {i}): {role}"),
            &key.to_bytes(),
        );
        put(
            format!("account_public_key[{i}]"),
            format!("{role}'s public key: its account"),
            key.verifying_key().as_bytes(),
        );
    }
    put(
        "committee".into(),
        "epoch 1, authorities 0..4 in order".into(),
        &encoded(|o| s.committee.encode_to(o)),
    );
    put(
        "committee_id".into(),
        "SHA-256(\"specie/fastpay/committee/v1\" || committee)".into(),
        &s.committee.id(),
    );
    put_order(
        &mut put,
        "transfer",
        "account 0 pays account 1 1000, sequence 0, memo \"vector\"",
        &s.transfer,
    );
    put_order(
        &mut put,
        "redeem",
        "account 0 redeems 400 to core address 11..11, sequence 0, no memo: a double spend of transfer",
        &s.redeem,
    );
    put(
        "vote_statement_signing_bytes".into(),
        "what every authority signs to prepare transfer in round 0: \"specie/fastpay/vote/v2\" || 02 || committee_id || 00 (prepare) || round 0 || transfer_order_digest".into(),
        &s.statement.signing_bytes(),
    );
    for (i, vote) in s.votes.iter().enumerate() {
        put(
            format!("vote[{i}]"),
            format!("authority {i}'s prepare vote for transfer (round 0)"),
            &encoded(|o| vote.encode_to(o)),
        );
    }
    put(
        "certificate".into(),
        "transfer certified by the commit votes (round 0) of authorities 0, 1, 2: final".into(),
        &encoded(|o| s.certificate.encode_to(o)),
    );
    put(
        "conflicting_certificate".into(),
        "redeem certified by the commit votes (round 0) of authorities 1, 2, 3: 1 and 2 signed both".into(),
        &encoded(|o| s.conflicting.encode_to(o)),
    );
    put(
        "evidence".into(),
        "evidence version 03: the committee, the double votes of authorities 1 and 2 from the two certificates, and authority 2's broken promise (signed_round_change[2] reports redeem prepared in round 0, vote[2] is its round-0 prepare of transfer); convicts 1 and 2".into(),
        &encoded(|o| s.evidence.encode_to(o)),
    );
    put(
        "lock_certificate".into(),
        "prepare votes of round 1 for transfer by authorities 0, 1, 2: a lock, not final".into(),
        &encoded(|o| s.lock.encode_to(o)),
    );
    put(
        "round_request_signing_bytes".into(),
        "what the owner signs to ask for round 2 of its sequence 0: \"specie/fastpay/round-request/v2\" || 02 || committee_id || account || sequence 0 || round 2".into(),
        &s.round_request.request.signing_bytes(),
    );
    put(
        "signed_round_request".into(),
        "the owner's request for round 2, with its signature".into(),
        &encoded(|o| s.round_request.encode_to(o)),
    );
    put(
        "round_change_signing_bytes".into(),
        "what authority 0 signs entering round 2 of account 0's sequence 0: \"specie/fastpay/round-change/v2\" || 02 || committee_id || account || sequence 0 || round 2 || 01 transfer_order_digest (prepared in round 0) || 01 round 1 transfer_order_digest (its lock)".into(),
        &s.justification.changes[0].change.signing_bytes(),
    );
    for (i, signed) in s.justification.changes.iter().enumerate() {
        let report = [
            "prepared transfer, locked it in round 1 (with lock_certificate)",
            "prepared transfer, no lock",
            "prepared redeem, no lock",
        ][i];
        put(
            format!("signed_round_change[{i}]"),
            format!("authority {i} enters round 2: {report}"),
            &encoded(|o| signed.encode_to(o)),
        );
    }
    put(
        "justification".into(),
        "signed_round_change[0..3] for round 2: the lock decides, only transfer may be prepared".into(),
        &encoded(|o| s.justification.encode_to(o)),
    );
    put(
        "committee_record_signing_bytes".into(),
        "what seats of epoch 1 sign to endorse epoch 2: \"specie/fastpay/committee-record/v1\" || 02 || committee_id (epoch 1's) || the committee of epoch 2 (seat 3's key now deterministic_key(\"authority\", 4))".into(),
        &s.record.signing_bytes(),
    );
    put(
        "committee_record".into(),
        "epoch 2's record: 02 || previous committee_id || epoch 2's committee || 3 signatures (seats 0, 1, 2 of epoch 1, sorted)".into(),
        &encoded(|o| s.record.encode_to(o)),
    );
    vectors
}

fn put_order(put: &mut impl FnMut(String, String, &[u8]), name: &str, description: &str, signed: &SignedOrder) {
    put(
        format!("{name}_order"),
        description.into(),
        &encoded(|o| signed.order.encode_to(o)),
    );
    put(
        format!("{name}_order_signing_bytes"),
        "what the owner signs: \"specie/fastpay/transfer-order/v1\" || order".into(),
        &signed.order.signing_bytes(),
    );
    put(
        format!("{name}_order_digest"),
        "SHA-256 of the signing bytes".into(),
        &signed.order.digest(),
    );
    put(
        format!("{name}_signed_order"),
        "order || owner's signature".into(),
        &encoded(|o| signed.encode_to(o)),
    );
}

const FILE_DESCRIPTION: &str = "Test vectors of docs/byzantine-format.md, generated and checked by \
     crates/byzantine/specie-fastpay/tests/specie-fastpay/vectors.rs; keys from deterministic_key, Ed25519 signatures (deterministic)";

/// The stored file's text, read once; written first from the code if `SPECIE_WRITE_VECTORS=1`
/// (once, so that the tests, which run in parallel, all read the new file).
fn stored_text() -> &'static str {
    static STORED: OnceLock<String> = OnceLock::new();
    STORED.get_or_init(|| {
        read_or_write(&vectors_path(), || {
            vectors_text(FILE_DESCRIPTION, &vectors(&scenario()))
        })
    })
}

fn stored() -> Value {
    serde_json::from_str(stored_text()).expect("the vectors file is JSON")
}

#[test]
fn the_encodings_match_the_stored_vectors() {
    assert_file_matches(
        stored_text(),
        "docs/byzantine-vectors.json",
        FILE_DESCRIPTION,
        &vectors(&scenario()),
    );
}

/// Decodes exactly and checks that re-encoding gives the stored bytes back.
fn round_trip<T>(
    stored: &Value,
    name: &str,
    decode: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
    encode: impl FnOnce(&T, &mut Vec<u8>),
) -> T {
    let bytes = stored_bytes(stored, name);
    let value = decode_exact("vector", &bytes, VECTOR_BYTES_MAX, decode).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(encoded(|o| encode(&value, o)), bytes, "{name} re-encodes to its bytes");
    value
}

#[test]
fn the_stored_vectors_decode_re_encode_and_verify() {
    let stored = &stored();
    let s = scenario();

    let committee = round_trip(stored, "committee", Committee::decode_from, Committee::encode_to);
    assert_eq!(committee, s.committee);
    assert_eq!(committee.id().to_vec(), stored_bytes(stored, "committee_id"));
    assert_eq!((committee.quorum(), committee.fault_tolerance()), (3, 1));

    let record = round_trip(
        stored,
        "committee_record",
        CommitteeRecord::decode_from,
        CommitteeRecord::encode_to,
    );
    assert_eq!(
        record.signing_bytes(),
        stored_bytes(stored, "committee_record_signing_bytes")
    );
    assert_eq!(record.replaced_seats(&committee), vec![3]);
    let mut chain = CommitteeChain::new(committee.clone());
    assert_eq!(
        chain.extend(record.clone()),
        Ok(true),
        "a quorum of epoch 1 endorsed epoch 2"
    );
    assert_eq!(chain.current().epoch(), 2);

    let mut orders = Vec::new();
    for name in ["transfer", "redeem"] {
        let order = round_trip(
            stored,
            &format!("{name}_order"),
            TransferOrder::decode_from,
            TransferOrder::encode_to,
        );
        assert_eq!(
            order.signing_bytes(),
            stored_bytes(stored, &format!("{name}_order_signing_bytes"))
        );
        assert_eq!(
            order.digest().to_vec(),
            stored_bytes(stored, &format!("{name}_order_digest"))
        );
        let signed = round_trip(
            stored,
            &format!("{name}_signed_order"),
            SignedOrder::decode_from,
            SignedOrder::encode_to,
        );
        assert_eq!(signed.order, order);
        assert_eq!(signed.check(), Ok(()), "{name}: the owner's signature verifies");
        orders.push(signed);
    }
    assert_eq!(orders, [s.transfer.clone(), s.redeem.clone()]);

    let statement_bytes = stored_bytes(stored, "vote_statement_signing_bytes");
    for i in 0..4u16 {
        let vote = round_trip(stored, &format!("vote[{i}]"), Vote::decode_from, Vote::encode_to);
        assert_eq!(vote.authority, i);
        assert_eq!(vote.statement.signing_bytes(), statement_bytes);
        assert_eq!(
            vote.check(&committee, &s.statement),
            Ok(()),
            "vote {i} counts for transfer"
        );
    }

    let certificate = round_trip(stored, "certificate", Certificate::decode_from, Certificate::encode_to);
    let conflicting = round_trip(
        stored,
        "conflicting_certificate",
        Certificate::decode_from,
        Certificate::encode_to,
    );
    assert_eq!((&certificate, &conflicting), (&s.certificate, &s.conflicting));
    for (certificate, signers) in [(&certificate, [0, 1, 2]), (&conflicting, [1, 2, 3])] {
        assert_eq!(certificate.check(&committee), Ok(()));
        assert_eq!(
            certificate.signatures.iter().map(|(a, _)| *a).collect::<Vec<_>>(),
            signers
        );
    }

    let evidence = round_trip(stored, "evidence", Evidence::decode_from, Evidence::encode_to);
    assert_eq!(evidence, s.evidence);
    assert_eq!(evidence.committee, committee);
    assert_eq!(evidence.convicted(), Ok(CONVICTED.to_vec()));
    assert_eq!(evidence.broken_promises.len(), 1);
    let broken = &evidence.broken_promises[0];
    assert_eq!(broken.authority, 2);
    assert_eq!(broken.vote.signature, s.votes[2].signature);

    let lock = round_trip(
        stored,
        "lock_certificate",
        Certificate::decode_from,
        Certificate::encode_to,
    );
    assert_eq!(lock, s.lock);
    assert_eq!(lock.check_lock(&committee), Ok(()));
    assert_eq!(lock.check(&committee), Err(CertificateError::NotFinal { round: 1 }));
    let request = round_trip(
        stored,
        "signed_round_request",
        SignedRoundRequest::decode_from,
        SignedRoundRequest::encode_to,
    );
    assert_eq!(request, s.round_request);
    assert_eq!(request.check(&committee), Ok(()));
    assert_eq!(
        (request.request.account, request.request.sequence, request.request.round),
        (s.transfer.order.sender, 0, 2)
    );
    assert_eq!(
        request.request.signing_bytes(),
        stored_bytes(stored, "round_request_signing_bytes")
    );
    let mut changes = Vec::new();
    for i in 0..3 {
        let name = format!("signed_round_change[{i}]");
        let signed = round_trip(
            stored,
            &name,
            SignedRoundChange::decode_from,
            SignedRoundChange::encode_to,
        );
        assert_eq!(usize::from(signed.authority), i);
        changes.push(signed);
    }
    assert_eq!(
        changes[0].change.signing_bytes(),
        stored_bytes(stored, "round_change_signing_bytes")
    );
    let justification = round_trip(
        stored,
        "justification",
        Justification::decode_from,
        Justification::encode_to,
    );
    assert_eq!(justification.changes, changes);
    let sender = s.transfer.order.sender;
    assert_eq!(
        justification.check(&committee, &sender, 0, 2),
        Ok(Allowed::Only {
            digest: s.transfer.order.digest(),
            lock_round: Some(1)
        })
    );
}
