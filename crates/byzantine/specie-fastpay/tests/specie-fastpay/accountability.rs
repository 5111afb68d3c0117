//! Accountable safety: authorities that sign two conflicting orders with signatures that a
//! certificate's batch verification accepts but strict verification refuses (a small-order
//! component in the nonce point R) are convicted all the same; authorities that hide a lock in
//! their round changes to settle a second order in a later round are convicted by their broken
//! promises; an honest authority's signatures never convict it.

use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use sha2::{Digest, Sha512};
use specie_fastpay::{
    deterministic_key, AccountKey, Allowed, BrokenPromise, Certificate, Committee, CoreAddress, DoubleVote, Evidence,
    EvidenceError, Justification, Recipient, RoundChange, SignedOrder, SigningKey, TransferOrder, Vote, VoteKind,
    VoteStatement,
};

/// The point (0, −1): order 2, so `z · T` vanishes exactly when the batch multiplier z is even.
fn order_two_point() -> EdwardsPoint {
    let mut y_minus_one = [0xff; 32];
    y_minus_one[0] = 0xec;
    y_minus_one[31] = 0x7f;
    CompressedEdwardsY(y_minus_one).decompress().unwrap()
}

/// An Ed25519 signature by `key` whose nonce point is `r·B + T`: the signer's choice, not the
/// deterministic nonce. Verifies cofactored, never strictly.
fn torsioned_signature(key: &SigningKey, message: &[u8], nonce: u64) -> [u8; 64] {
    let expanded = Sha512::digest(key.to_bytes());
    let mut secret: [u8; 32] = expanded[..32].try_into().unwrap();
    secret[0] &= 248;
    secret[31] &= 127;
    secret[31] |= 64;
    let secret = Scalar::from_bytes_mod_order(secret);
    let r = Scalar::from(nonce);
    let nonce_point = (r * ED25519_BASEPOINT_POINT + order_two_point()).compress();
    let k = Scalar::from_hash(
        Sha512::new()
            .chain_update(nonce_point.as_bytes())
            .chain_update(key.verifying_key().as_bytes())
            .chain_update(message),
    );
    let mut signature = [0u8; 64];
    signature[..32].copy_from_slice(nonce_point.as_bytes());
    signature[32..].copy_from_slice((r + k * secret).as_bytes());
    signature
}

fn order_of(owner: &SigningKey, recipient: Recipient) -> SignedOrder {
    TransferOrder {
        sender: AccountKey(owner.verifying_key().to_bytes()),
        recipient,
        amount: 10,
        sequence: 0,
        memo: Vec::new(),
    }
    .sign(owner)
}

/// A certificate of `order` by `honest` (deterministic signatures) and `cheats` (torsioned
/// ones), ground over nonces until batch verification accepts it.
fn cheating_certificate(
    committee: &Committee,
    authorities: &[SigningKey],
    order: &SignedOrder,
    honest: u16,
    cheats: [u16; 2],
) -> Certificate {
    let statement = VoteStatement {
        kind: specie_fastpay::VoteKind::Commit,
        committee_id: committee.id(),
        round: 0,
        order_digest: order.order.digest(),
    };
    let message = statement.signing_bytes();
    // Each try passes with probability 1/4 (both multipliers even): 64 tries all fail with
    // probability (3/4)^64 ≈ 1e-8, and the outcome is deterministic anyway.
    for attempt in 1..=64u64 {
        let mut signatures = vec![(honest, statement.sign(&authorities[usize::from(honest)]))];
        for cheat in cheats {
            let signature = torsioned_signature(
                &authorities[usize::from(cheat)],
                &message,
                1000 * attempt + u64::from(cheat),
            );
            assert!(
                !statement.verify(committee.key(cheat).unwrap(), &signature),
                "never strictly valid"
            );
            signatures.push((cheat, signature));
        }
        signatures.sort_by_key(|(authority, _)| *authority);
        let certificate = Certificate {
            kind: specie_fastpay::VoteKind::Commit,
            order: order.clone(),
            committee_id: committee.id(),
            round: 0,
            signatures,
        };
        if certificate.check(committee).is_ok() {
            return certificate;
        }
    }
    panic!("no nonce made the batch equation accept the torsioned signatures");
}

#[test]
fn double_signers_whose_votes_only_batch_verify_are_convicted() {
    let authorities: Vec<SigningKey> = (0..4).map(|i| deterministic_key("authority", i)).collect();
    let committee = Committee::new(1, authorities.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap();
    let owner = deterministic_key("account", 0);
    let paid = order_of(&owner, Recipient::Account(AccountKey([7; 32])));
    let redeemed = order_of(&owner, Recipient::Core(CoreAddress([0x11; 32])));

    let first = cheating_certificate(&committee, &authorities, &paid, 0, [1, 2]);
    let second = cheating_certificate(&committee, &authorities, &redeemed, 3, [1, 2]);
    let evidence = Evidence {
        committee: committee.clone(),
        double_votes: DoubleVote::from_certificates(&first, &second),
        broken_promises: Vec::new(),
    };
    assert_eq!(evidence.convicted(), Ok(vec![1, 2]));

    // Cofactored verification frames no one: authority 0's honest vote on `paid` paired with a
    // signature it never made on `redeemed` is refused.
    let mut framed = evidence.double_votes[0].clone();
    framed.authority = 0;
    framed.first.signature = first.signatures[0].1;
    assert!(framed.check(&committee).is_err());
}

/// The votes of `signers` of phase `kind` in `round` for `order`, as one certificate.
fn certificate_by(
    committee: &Committee,
    authorities: &[SigningKey],
    (kind, round): (VoteKind, u32),
    order: &SignedOrder,
    signers: &[u16],
) -> Certificate {
    let statement = VoteStatement {
        committee_id: committee.id(),
        kind,
        round,
        order_digest: order.order.digest(),
    };
    let votes: Vec<Vote> = signers
        .iter()
        .map(|&a| Vote {
            authority: a,
            statement,
            signature: statement.sign(&authorities[usize::from(a)]),
        })
        .collect();
    Certificate::from_votes(order.clone(), &votes)
}

/// Two Byzantine authorities of four (more than f = 1) settle two orders of one slot in
/// different rounds: they commit X in round 0 with an honest one, then hide that lock in their
/// round changes for round 1, where with the other honest one they settle Y. The certificates
/// alone convict no one (different rounds); with the justification of round 1, which the honest
/// authority that prepared Y holds, exactly the two liars are convicted.
#[test]
fn final_certificates_of_different_rounds_convict_the_liars_through_the_justification() {
    let authorities: Vec<SigningKey> = (0..4).map(|i| deterministic_key("authority", i)).collect();
    let committee = Committee::new(1, authorities.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap();
    let owner = deterministic_key("account", 7);
    let x = order_of(&owner, Recipient::Core(CoreAddress([1; 32])));
    let y = order_of(&owner, Recipient::Core(CoreAddress([2; 32])));
    let (liars, honest_in_round_zero, honest_in_round_one) = ([1u16, 2], 0u16, 3u16);

    let lock_x = certificate_by(&committee, &authorities, (VoteKind::Prepare, 0), &x, &[0, 1, 2]);
    let final_x = certificate_by(&committee, &authorities, (VoteKind::Commit, 0), &x, &[0, 1, 2]);
    assert_eq!(final_x.check(&committee), Ok(()));
    let change = |authority: u16, prepared_first: Option<[u8; 32]>| {
        let change = RoundChange {
            committee_id: committee.id(),
            account: x.order.sender,
            sequence: 0,
            round: 1,
            prepared_first,
            lock: None,
        };
        change.sign(authority, &authorities[usize::from(authority)], None)
    };
    // The liars report neither their round-0 prepare nor their lock; 3 truthfully reports nothing.
    let justification = Justification {
        changes: vec![change(1, None), change(2, None), change(honest_in_round_one, None)],
    };
    assert_eq!(
        justification.check(&committee, &x.order.sender, 0, 1),
        Ok(Allowed::Any),
        "the lies free round 1 for Y"
    );
    let final_y = certificate_by(&committee, &authorities, (VoteKind::Commit, 1), &y, &[1, 2, 3]);
    assert_eq!(final_y.check(&committee), Ok(()));
    assert!(DoubleVote::from_certificates(&final_x, &final_y).is_empty());

    let broken = BrokenPromise::find(&justification.changes, &[&final_x, &lock_x, &final_y]);
    assert!(broken.iter().all(|b| liars.contains(&b.authority)), "{broken:?}");
    let evidence = Evidence {
        committee: committee.clone(),
        double_votes: Vec::new(),
        broken_promises: broken,
    };
    let mut bytes = Vec::new();
    evidence.encode_to(&mut bytes);
    let decoded = specie_fastpay::decode_exact("evidence", &bytes, 1 << 20, Evidence::decode_from).unwrap();
    assert_eq!(decoded, evidence);
    let convicted = decoded.convicted().unwrap();
    assert_eq!(convicted, liars.to_vec());
    assert!(!convicted.contains(&honest_in_round_zero) && !convicted.contains(&honest_in_round_one));
}

/// What an honest authority signs never convicts it, and a broken promise holds only with both
/// of its signatures, for one slot of the file's committee.
#[test]
fn a_kept_promise_or_a_tampered_pair_convicts_no_one() {
    let authorities: Vec<SigningKey> = (0..4).map(|i| deterministic_key("authority", i)).collect();
    let committee = Committee::new(1, authorities.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap();
    let owner = deterministic_key("account", 8);
    let (x, y) = (
        order_of(&owner, Recipient::Core(CoreAddress([1; 32]))),
        order_of(&owner, Recipient::Core(CoreAddress([2; 32]))),
    );
    let (digest_x, digest_y) = (x.order.digest(), y.order.digest());
    let change = |round: u32, prepared_first, lock| RoundChange {
        committee_id: committee.id(),
        account: x.order.sender,
        sequence: 0,
        round,
        prepared_first,
        lock,
    };
    // Kept: the round-0 prepare reported; a commit covered by a lock at its round or higher;
    // votes of the round entered or later; a prepare of round ≥ 1 (never reported).
    let kept = change(3, Some(digest_x), Some((1, digest_y)));
    assert!(!kept.contradicted_by(VoteKind::Prepare, 0, &digest_x));
    assert!(!kept.contradicted_by(VoteKind::Commit, 1, &digest_y));
    assert!(!kept.contradicted_by(VoteKind::Commit, 0, &digest_x));
    assert!(!kept.contradicted_by(VoteKind::Prepare, 2, &digest_x));
    assert!(!kept.contradicted_by(VoteKind::Commit, 3, &digest_x));
    // Broken: another round-0 prepare; a commit above the reported lock, or at its round on
    // another order; a commit with no lock reported.
    assert!(kept.contradicted_by(VoteKind::Prepare, 0, &digest_y));
    assert!(kept.contradicted_by(VoteKind::Commit, 2, &digest_x));
    assert!(kept.contradicted_by(VoteKind::Commit, 1, &digest_x));
    assert!(change(3, None, None).contradicted_by(VoteKind::Commit, 0, &digest_x));

    let liar = 2u16;
    let lie = change(1, None, None).sign(liar, &authorities[2], None);
    let commit = certificate_by(&committee, &authorities, (VoteKind::Commit, 0), &x, &[0, 1, 2]);
    let found = BrokenPromise::find([&lie], &[&commit]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].check(&committee), Ok(()));

    let mut tampered = found[0].clone();
    tampered.change_signature[0] ^= 1;
    assert_eq!(
        tampered.check(&committee),
        Err(EvidenceError::BadSignature { authority: liar })
    );
    let mut other_slot = found[0].clone();
    other_slot.vote.order.sequence = 1;
    assert_eq!(other_slot.check(&committee), Err(EvidenceError::NoConflict));
    let mut kept_pair = found[0].clone();
    kept_pair.change.lock = Some((0, digest_x));
    assert_eq!(kept_pair.check(&committee), Err(EvidenceError::PromiseKept));
    let other = Committee::new(2, committee.members().to_vec()).unwrap();
    assert_eq!(found[0].check(&other), Err(EvidenceError::OtherCommittee));
}
