//! Feeds arbitrary bytes to every decoder of FastPay's signed vocabulary (`specie_fastpay`, the
//! formats of `docs/byzantine-format.md`): committee, committee record, signed transfer order,
//! vote, certificate, evidence, signed round request, signed round change and justification,
//! each through `decode_exact`, and the authorities' HTTP body for proposals. Every input goes
//! to all ten decoders.
//!
//! Nothing may panic; whatever decodes must re-encode to exactly the input (each format has one
//! encoding); and the checks a verifier then makes (`SignedOrder::check`, `Vote::check`,
//! `Certificate::check` and `check_lock`, `DoubleVote::check`, `BrokenPromise::check`,
//! `Evidence::convicted`,
//! `SignedRoundRequest::check`, `Justification::check`, `CommitteeRecord::check`) must not
//! panic either. The
//! verifier's committee and order are the vectors' (epoch 1, `deterministic_key("authority", 0..4)`;
//! the transfer order), so inputs grown from the vectors reach the signature checks.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use specie_codec::{DecodeError, Reader};
use specie_committee::http_api::Proposal;
use specie_fastpay::{
    deterministic_key, AccountKey, Allowed, Certificate, Committee, CommitteeChain, CommitteeRecord, DoubleVote,
    Evidence, Justification, Recipient, SignedOrder, SignedRoundChange, SignedRoundRequest, TransferOrder, Vote,
    VoteKind, VoteStatement,
};

/// Above the largest encoding any decoder but the justification's accepts (an evidence file of
/// 256 double votes with full memos and a 256-member committee is about 120 KiB), so that the
/// size check is not what refuses a valid input; a justification of many round changes with lock
/// certificates (up to `JUSTIFICATION_BYTES_MAX`) is beyond what a fuzzer grows. The decoders
/// bound every count before allocating anyway.
const INPUT_BYTES_MAX: usize = 1 << 18;

fn verifier_committee() -> &'static Committee {
    static COMMITTEE: OnceLock<Committee> = OnceLock::new();
    COMMITTEE.get_or_init(|| {
        let keys = (0..4).map(|i| deterministic_key("authority", i).verifying_key().to_bytes());
        Committee::new(1, keys.collect()).expect("four distinct valid keys")
    })
}

/// The vectors' transfer order (account 0 pays account 1 1000, sequence 0, memo "vector"), which
/// the vectors' votes are for.
fn vectors_transfer() -> &'static SignedOrder {
    static ORDER: OnceLock<SignedOrder> = OnceLock::new();
    ORDER.get_or_init(|| {
        let (owner, payee) = (deterministic_key("account", 0), deterministic_key("account", 1));
        TransferOrder {
            sender: AccountKey(owner.verifying_key().to_bytes()),
            recipient: Recipient::Account(AccountKey(payee.verifying_key().to_bytes())),
            amount: 1000,
            sequence: 0,
            memo: b"vector".to_vec(),
        }
        .sign(&owner)
    })
}

/// Decodes all of `data` as one `T`; if that succeeds, the encoding must be `data` again.
fn decode_canonical<T>(
    what: &'static str,
    data: &[u8],
    decode: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
    encode: impl FnOnce(&T, &mut Vec<u8>),
) -> Option<T> {
    specie_vectors::decode_canonical(data, INPUT_BYTES_MAX, decode, encode).unwrap_or_else(|e| panic!("{what}: {e}"))
}

fuzz_target!(|data: &[u8]| {
    let committee = verifier_committee();

    if let Some(decoded) = decode_canonical("committee", data, Committee::decode_from, Committee::encode_to) {
        let (n, f, q) = (decoded.size(), decoded.fault_tolerance(), decoded.quorum());
        assert!(3 * f < n && q <= n - f && 2 * q > n + f, "quorum arithmetic for n={n}");
    }

    if let Some(record) = decode_canonical(
        "committee record",
        data,
        CommitteeRecord::decode_from,
        CommitteeRecord::encode_to,
    ) {
        let mut chain = CommitteeChain::new(committee.clone());
        if record.check(committee).is_ok() {
            // A record that checks extends the chain, once, to the next epoch of the same seats.
            assert_eq!(chain.extend(record.clone()), Ok(true));
            assert_eq!(chain.extend(record.clone()), Ok(false));
            assert_eq!(chain.current().epoch(), committee.epoch() + 1);
            assert_eq!(chain.current().size(), committee.size());
            assert!(record.signatures.len() >= committee.quorum());
        } else {
            assert_ne!(
                chain.extend(record),
                Ok(true),
                "an unchecked record never extends a chain"
            );
        }
    }

    if let Some(order) = decode_canonical("signed order", data, SignedOrder::decode_from, SignedOrder::encode_to) {
        let _ = order.check();
    }

    if let Some(vote) = decode_canonical("vote", data, Vote::decode_from, Vote::encode_to) {
        // The vectors' votes: prepare votes of round 0 for the transfer.
        let expected = VoteStatement {
            committee_id: committee.id(),
            kind: VoteKind::Prepare,
            round: 0,
            order_digest: vectors_transfer().order.digest(),
        };
        if vote.check(committee, &expected).is_ok() {
            assert!(usize::from(vote.authority) < committee.size());
            assert_eq!(vote.statement.order_digest, vectors_transfer().order.digest());
        }
    }

    if let Some(certificate) = decode_canonical("certificate", data, Certificate::decode_from, Certificate::encode_to) {
        let _ = certificate.check_lock(committee);
        if certificate.check(committee).is_ok() {
            assert_eq!(certificate.committee_id, committee.id());
            assert!(certificate.signatures.len() >= committee.quorum());
            // Final: a quorum of commit votes, or every member's prepare vote of round 0.
            assert!(certificate.kind == VoteKind::Commit || certificate.signatures.len() == committee.size());
            assert!(certificate.kind == VoteKind::Commit || certificate.round == 0);
            // A certified order's votes each count for it.
            for &(authority, signature) in &certificate.signatures {
                let vote = Vote {
                    authority,
                    statement: certificate.statement(),
                    signature,
                };
                let _ = vote.check(committee, &certificate.statement());
            }
        }
        assert!(DoubleVote::from_certificates(&certificate, &certificate).is_empty());
    }

    if let Some(evidence) = decode_canonical("evidence", data, Evidence::decode_from, Evidence::encode_to) {
        if let Ok(convicted) = evidence.convicted() {
            assert!(!convicted.is_empty());
            assert!(convicted.windows(2).all(|pair| pair[0] < pair[1]));
            assert!(convicted.iter().all(|&a| usize::from(a) < evidence.committee.size()));
        }
        for double_vote in &evidence.double_votes {
            let _ = double_vote.check(committee);
        }
        for broken in &evidence.broken_promises {
            let _ = broken.check(committee);
        }
    }

    if let Some(request) = decode_canonical(
        "signed round request",
        data,
        SignedRoundRequest::decode_from,
        SignedRoundRequest::encode_to,
    ) {
        let _ = request.check(committee);
    }

    let signed = decode_canonical(
        "signed round change",
        data,
        SignedRoundChange::decode_from,
        SignedRoundChange::encode_to,
    );
    if let Some(lock) = signed.and_then(|signed| signed.lock_certificate) {
        let _ = lock.check_lock(committee);
    }

    if let Some(justification) = decode_canonical(
        "justification",
        data,
        Justification::decode_from,
        Justification::encode_to,
    ) {
        // For the slot and round of its first change, so that a valid one is checked through.
        if let Some(first) = justification.changes.first().map(|signed| signed.change) {
            let allowed = justification.check(committee, &first.account, first.sequence, first.round);
            if let Ok(Allowed::Only {
                lock_round: Some(lock_round),
                ..
            }) = allowed
            {
                assert!(lock_round < first.round, "a lock reported is of an earlier round");
            }
        }
    }

    // The authorities' HTTP request body for proposals (docs/api.md).
    if let Ok(proposal) = Proposal::decode(data) {
        assert_eq!(proposal.encode(), data, "one encoding per proposal");
        let _ = proposal.justification.check(
            committee,
            &proposal.order.order.sender,
            proposal.order.order.sequence,
            proposal.round,
        );
    }
});
