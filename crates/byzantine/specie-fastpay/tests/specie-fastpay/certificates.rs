//! Certificates are refused for every reason §4 names (wrong committee, repeated signer, below
//! quorum, forged signatures), and conflicting certificates convict exactly the double signers.

use specie_fastpay::{
    deterministic_key, AccountKey, Certificate, CertificateError, Committee, DoubleVote, Evidence, EvidenceError,
    Recipient, SignedOrder, SigningKey, TransferOrder, Vote, VoteError, VoteKind, VoteStatement,
};

struct Setup {
    committee: Committee,
    authorities: Vec<SigningKey>,
    owner: SigningKey,
}

fn setup(n: usize) -> Setup {
    let authorities: Vec<SigningKey> = (0..n as u64).map(|i| deterministic_key("authority", i)).collect();
    let committee = Committee::new(1, authorities.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap();
    Setup {
        committee,
        authorities,
        owner: deterministic_key("account", 0),
    }
}

fn order(owner: &SigningKey, to: u64, amount: u64) -> SignedOrder {
    TransferOrder {
        sender: AccountKey(owner.verifying_key().to_bytes()),
        recipient: Recipient::Account(AccountKey(deterministic_key("account", to).verifying_key().to_bytes())),
        amount,
        sequence: 0,
        memo: Vec::new(),
    }
    .sign(owner)
}

fn statement(setup: &Setup, kind: VoteKind, round: u32, order: &SignedOrder) -> VoteStatement {
    VoteStatement {
        kind,
        committee_id: setup.committee.id(),
        round,
        order_digest: order.order.digest(),
    }
}

fn vote_of(setup: &Setup, kind: VoteKind, round: u32, authority: u16, order: &SignedOrder) -> Vote {
    let statement = statement(setup, kind, round, order);
    Vote {
        authority,
        statement,
        signature: statement.sign(&setup.authorities[usize::from(authority)]),
    }
}

fn vote(setup: &Setup, authority: u16, order: &SignedOrder) -> Vote {
    vote_of(setup, VoteKind::Prepare, 0, authority, order)
}

fn certificate_of(setup: &Setup, kind: VoteKind, round: u32, signers: &[u16], order: &SignedOrder) -> Certificate {
    let votes: Vec<Vote> = signers.iter().map(|&a| vote_of(setup, kind, round, a, order)).collect();
    for v in &votes {
        v.check(&setup.committee, &statement(setup, kind, round, order))
            .unwrap();
    }
    Certificate::from_votes(order.clone(), &votes)
}

/// A final certificate of the slow path: commit votes of round 0.
fn certificate(setup: &Setup, signers: &[u16], order: &SignedOrder) -> Certificate {
    certificate_of(setup, VoteKind::Commit, 0, signers, order)
}

#[test]
fn prepare_votes_are_final_only_from_everyone_in_round_zero_and_a_quorum_of_them_is_a_lock() {
    let s = setup(4);
    let o = order(&s.owner, 1, 10);
    let fast = certificate_of(&s, VoteKind::Prepare, 0, &[0, 1, 2, 3], &o);
    assert_eq!(fast.check(&s.committee), Ok(()));
    let lock = certificate_of(&s, VoteKind::Prepare, 0, &[0, 1, 3], &o);
    assert_eq!(
        lock.check(&s.committee),
        Err(CertificateError::BelowQuorum { signers: 3, quorum: 4 })
    );
    assert_eq!(lock.check_lock(&s.committee), Ok(()));
    let later = certificate_of(&s, VoteKind::Prepare, 2, &[0, 1, 2, 3], &o);
    assert_eq!(later.check(&s.committee), Err(CertificateError::NotFinal { round: 2 }));
    assert_eq!(later.check_lock(&s.committee), Ok(()));
    let committed = certificate(&s, &[1, 2, 3], &o);
    assert_eq!(committed.check(&s.committee), Ok(()));
    assert_eq!(committed.check_lock(&s.committee), Err(CertificateError::NotALock));
    // A prepare signature relabelled as a commit (or the reverse) does not verify.
    let mut relabelled = lock.clone();
    relabelled.kind = VoteKind::Commit;
    assert_eq!(
        relabelled.check(&s.committee),
        Err(CertificateError::BadSignature { authority: 0 })
    );
    assert_eq!(
        vote(&s, 1, &o).check(&s.committee, &statement(&s, VoteKind::Commit, 0, &o)),
        Err(VoteError::OtherPhase)
    );
}

#[test]
fn a_quorum_of_distinct_members_certifies_and_every_defect_is_refused_with_its_reason() {
    let s = setup(4);
    let o = order(&s.owner, 1, 10);
    let good = certificate(&s, &[0, 2, 3], &o);
    assert_eq!(good.check(&s.committee), Ok(()));

    assert_eq!(
        certificate(&s, &[0, 3], &o).check(&s.committee),
        Err(CertificateError::BelowQuorum { signers: 2, quorum: 3 })
    );

    let mut repeated = good.clone();
    repeated.signatures[1] = repeated.signatures[0];
    assert_eq!(
        repeated.check(&s.committee),
        Err(CertificateError::RepeatedSigner { authority: 0 })
    );

    let other = setup(7);
    assert_eq!(good.check(&other.committee), Err(CertificateError::WrongCommittee));
    // Signed by another committee's members but relabelled with this committee's id.
    let mut foreign = certificate(&other, &[0, 1, 2, 3, 4], &o);
    foreign.committee_id = s.committee.id();
    foreign.signatures.truncate(3);
    assert_eq!(
        foreign.check(&s.committee),
        Err(CertificateError::BadSignature { authority: 0 })
    );

    let mut forged = good.clone();
    forged.signatures[2].1[5] ^= 1;
    assert_eq!(
        forged.check(&s.committee),
        Err(CertificateError::BadSignature { authority: 3 })
    );

    let mut changed = good.clone();
    changed.order.order.amount = 11;
    assert!(matches!(changed.check(&s.committee), Err(CertificateError::Order(_))));

    let mut unknown = good.clone();
    unknown.signatures[2].0 = 9;
    assert_eq!(
        unknown.check(&s.committee),
        Err(CertificateError::UnknownAuthority { authority: 9 })
    );

    // A vote for a different order or committee does not count towards this one.
    let other_order = order(&s.owner, 2, 10);
    assert_eq!(
        vote(&s, 1, &other_order).check(&s.committee, &statement(&s, VoteKind::Prepare, 0, &o)),
        Err(VoteError::OtherOrder)
    );
    assert_eq!(
        vote(&other, 1, &o).check(&s.committee, &statement(&s, VoteKind::Prepare, 0, &o)),
        Err(VoteError::WrongCommittee)
    );
}

#[test]
fn conflicting_certificates_convict_exactly_the_authorities_in_both_quorums() {
    let s = setup(4);
    let paid = order(&s.owner, 1, 10);
    let stolen = order(&s.owner, 2, 10);
    // Authority 1 is Byzantine and signs both; with honest 0, 2, 3 split it takes a second
    // Byzantine signer to certify both, so here 1 and 3 are the double signers.
    let first = certificate(&s, &[0, 1, 3], &paid);
    let second = certificate(&s, &[1, 2, 3], &stolen);
    let evidence = Evidence {
        committee: s.committee.clone(),
        double_votes: DoubleVote::from_certificates(&first, &second),
        broken_promises: Vec::new(),
    };
    assert_eq!(evidence.convicted(), Ok(vec![1, 3]));
    assert!(evidence.convicted().unwrap().len() > s.committee.fault_tolerance());

    let mut bytes = Vec::new();
    evidence.encode_to(&mut bytes);
    let decoded = specie_fastpay::decode_exact("evidence", &bytes, 1 << 20, Evidence::decode_from).unwrap();
    assert_eq!(decoded.convicted(), Ok(vec![1, 3]));

    // An honest authority's two votes for the same order, or votes for different sequence
    // numbers, convict nobody; nor does a doctored signature.
    assert!(DoubleVote::from_certificates(&first, &first).is_empty());
    let mut framed = evidence.double_votes[0].clone();
    framed.authority = 0;
    assert_eq!(
        framed.check(&s.committee),
        Err(EvidenceError::BadSignature { authority: 0 })
    );
    let mut next = evidence.double_votes[0].clone();
    next.second.order.sequence = 1;
    assert_eq!(next.check(&s.committee), Err(EvidenceError::NoConflict));
    let empty = Evidence {
        committee: s.committee.clone(),
        double_votes: Vec::new(),
        broken_promises: Vec::new(),
    };
    assert_eq!(empty.convicted(), Err(EvidenceError::Empty));
}

#[test]
fn certificates_round_trip_and_a_repeated_signer_is_not_canonical() {
    let s = setup(4);
    let good = certificate(&s, &[0, 1, 2, 3], &order(&s.owner, 1, 3));
    let mut bytes = Vec::new();
    good.encode_to(&mut bytes);
    let decoded = specie_fastpay::decode_exact("certificate", &bytes, 4096, Certificate::decode_from).unwrap();
    assert_eq!(decoded, good);
    for cut in 0..bytes.len() {
        assert!(specie_fastpay::decode_exact("certificate", &bytes[..cut], 4096, Certificate::decode_from).is_err());
    }
    let mut repeated = good.clone();
    repeated.signatures[1] = repeated.signatures[0];
    let mut bytes = Vec::new();
    repeated.encode_to(&mut bytes);
    assert!(specie_fastpay::decode_exact("certificate", &bytes, 4096, Certificate::decode_from).is_err());
}

#[test]
fn the_largest_certificate_encodes_to_exactly_the_documented_bound() {
    let owner = deterministic_key("account", 0);
    let order = TransferOrder {
        sender: AccountKey(owner.verifying_key().to_bytes()),
        recipient: Recipient::Account(AccountKey([3; 32])),
        amount: u64::MAX,
        sequence: u64::MAX,
        memo: vec![7; specie_fastpay::MEMO_BYTES_MAX],
    }
    .sign(&owner);
    let mut order_bytes = Vec::new();
    order.encode_to(&mut order_bytes);
    assert_eq!(order_bytes.len(), specie_fastpay::SIGNED_ORDER_BYTES_MAX);
    let members = specie_fastpay::COMMITTEE_MEMBERS_MAX as u16;
    let largest = Certificate {
        kind: specie_fastpay::VoteKind::Prepare,
        order,
        committee_id: [1; 32],
        round: u32::MAX,
        signatures: (0..members).map(|authority| (authority, [9; 64])).collect(),
    };
    let mut bytes = Vec::new();
    largest.encode_to(&mut bytes);
    assert_eq!(bytes.len(), specie_fastpay::CERTIFICATE_BYTES_MAX);
    let decoded = specie_fastpay::decode_exact(
        "certificate",
        &bytes,
        specie_fastpay::CERTIFICATE_BYTES_MAX,
        Certificate::decode_from,
    );
    assert_eq!(decoded, Ok(largest));
}
