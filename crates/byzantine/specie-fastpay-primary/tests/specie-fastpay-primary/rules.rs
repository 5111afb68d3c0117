//! FastPay funding and redeem under `FastpayRules` in a sentinel: valid ones pass and compact as
//! specified, and every refusal has its own reason (the transaction is otherwise valid, and
//! re-signed after the change). Moved from `specie-sentinel`'s tests with FastPay's kinds.

use crate::common;

use common::*;
use specie_fastpay::{AccountKey, CertificateError, OrderError, Recipient, VoteKind};
use specie_fastpay_primary::{
    fastpay_funding_marker, fastpay_redeem_marker, FastpayErrorCode, FastpayFunding, FastpayRedeem,
};
use specie_sentinel::{
    validate, validate_and_compact, CapabilityError, InputErrorCode, OutputErrorCode, Sentinel, TxErrorCode,
    ValidationError, WitnessErrorCode,
};
use specie_transaction::{NonceMode, P2pkWitness, SpecieTransaction};

fn fastpay_error(code: FastpayErrorCode) -> ValidationError {
    code.into_error()
}

/// The refusal of a node with no rules for FastPay's kinds at all.
fn not_accepted(kind_name: &str) -> ValidationError {
    ValidationError::Capability(CapabilityError {
        category: "specie",
        code: "kind_not_accepted",
        message: format!(
            "this node accepts no {kind_name} transactions (its configuration names no keys for that mode)"
        ),
    })
}

fn certificate_error(error: CertificateError) -> ValidationError {
    fastpay_error(FastpayErrorCode::Certificate(error))
}

fn check_funding(funding: FastpayFunding) -> Result<(), ValidationError> {
    validate(&SpecieTransaction::from(funding), &trusted())
}

fn check_redeem(redeem: FastpayRedeem) -> Result<(), ValidationError> {
    validate(&SpecieTransaction::from(redeem), &trusted())
}

/// Re-signs a funding after a test changed it, so that only the intended error remains.
fn resign_funding(mut funding: FastpayFunding, owners: &[secp256k1::Keypair]) -> FastpayFunding {
    funding.sign(owners, NonceMode::Deterministic).unwrap();
    funding
}

#[test]
fn a_valid_funding_spends_its_inputs_and_creates_its_change_and_marker() {
    let funding = funding(30, &[(key(1), 50), (key(2), 5)], &[(key(1), 25)]);
    let tx = SpecieTransaction::from(funding.clone());
    let compact = validate_and_compact(&tx, &trusted()).unwrap();
    assert_eq!(
        compact.spent,
        funding.inputs.iter().map(|input| input.uhs_id()).collect::<Vec<_>>()
    );
    let marker = fastpay_funding_marker(&funding.txid());
    assert_eq!(compact.created, vec![tx.created_outputs()[0].uhs_id, marker]);
    let claim = funding.claim();
    assert_eq!(
        (claim.committee_id, claim.account, claim.amount, claim.marker),
        (committee().id(), account(&account_owner(0)), 30, marker)
    );
    // Funding everything: no change is fine.
    assert_eq!(check_funding(common::funding(50, &[(key(1), 50)], &[])), Ok(()));
}

#[test]
fn funding_refusals_follow_the_redeem_order_then_the_committee_checks() {
    let owners = [key(1)];
    let valid = funding(30, &[(key(1), 50)], &[(key(1), 20)]);
    assert_eq!(check_funding(valid.clone()), Ok(()));

    let no_inputs = FastpayFunding {
        inputs: vec![],
        witnesses: vec![],
        ..valid.clone()
    };
    assert_eq!(
        check_funding(no_inputs),
        Err(ValidationError::Transaction(TxErrorCode::NoInputs))
    );

    let missing_witness = FastpayFunding {
        witnesses: vec![],
        ..valid.clone()
    };
    let error = check_funding(missing_witness).unwrap_err();
    assert_eq!(error, ValidationError::Transaction(TxErrorCode::MissingWitness));
    assert_eq!(error.code(), "missing_witness");

    let mut duplicate = valid.clone();
    duplicate.inputs.push(duplicate.inputs[0]);
    duplicate.outputs[0].value += 50;
    let duplicate = resign_funding(duplicate, &[key(1), key(1)]);
    assert_eq!(
        check_funding(duplicate).unwrap_err(),
        ValidationError::Input {
            index: 1,
            code: InputErrorCode::Duplicate,
            data_error: None
        }
    );

    let mut zero_change = valid.clone();
    zero_change.outputs[0].value = 0;
    zero_change.amount = 50;
    let error = check_funding(resign_funding(zero_change, &owners)).unwrap_err();
    assert_eq!(
        error,
        ValidationError::Output {
            index: 0,
            code: OutputErrorCode::ZeroValue
        }
    );

    let zero_amount = FastpayFunding {
        amount: 0,
        outputs: vec![pays(&key(1), 50)],
        ..valid.clone()
    };
    let error = check_funding(resign_funding(zero_amount, &owners)).unwrap_err();
    assert_eq!(error, fastpay_error(FastpayErrorCode::ZeroFundingAmount));
    assert_eq!(error.code(), "zero_funding_amount");
    assert_eq!(error.category(), "fastpay");
    assert_eq!(error.to_string(), "funding amount is zero");
}

#[test]
fn funding_sums_and_owner_signatures_are_checked() {
    let owners = [key(1)];
    let valid = funding(30, &[(key(1), 50)], &[(key(1), 20)]);
    // Sums that do not add up: one unit too many, one too few, and an overflowing amount.
    for amount in [31, 29] {
        let unbalanced = FastpayFunding {
            amount,
            ..valid.clone()
        };
        assert_eq!(
            check_funding(resign_funding(unbalanced, &owners)),
            Err(ValidationError::Transaction(TxErrorCode::AsymmetricValues))
        );
    }
    let overflowing = FastpayFunding {
        amount: u64::MAX,
        ..valid.clone()
    };
    assert_eq!(
        check_funding(resign_funding(overflowing, &owners)),
        Err(ValidationError::Transaction(TxErrorCode::ValueOverflow))
    );

    // The owners sign the txid: a witness by another key, or over other fields, is refused.
    let mut by_other = valid.clone();
    by_other.witnesses = vec![P2pkWitness::sign(&key(2), &valid.txid().0, NonceMode::Deterministic).to_witness()];
    assert_eq!(
        check_funding(by_other),
        Err(ValidationError::Witness {
            index: 0,
            code: WitnessErrorCode::ProgramMismatch
        })
    );
    let other_account = FastpayFunding {
        account: account(&account_owner(1)),
        ..valid.clone()
    };
    assert_eq!(
        check_funding(other_account),
        Err(ValidationError::Witness {
            index: 0,
            code: WitnessErrorCode::InvalidSignature
        })
    );
}

#[test]
fn a_funding_needs_the_configured_committee_and_a_usable_account() {
    let owners = [key(1)];
    let valid = funding(30, &[(key(1), 50)], &[(key(1), 20)]);
    // FastPay's rules without a committee: the node is no FastPay Primary.
    let tx = SpecieTransaction::from(valid.clone());
    let error = validate(&tx, &trusted_with(None)).unwrap_err();
    assert_eq!(error, fastpay_error(FastpayErrorCode::NoCommittee));
    assert_eq!(error.code(), "no_fastpay_committee");
    assert_eq!(error.category(), "fastpay");
    assert_eq!(error.to_string(), "this node is configured with no FastPay committee");
    // No FastPay rules at all: the kind is not accepted.
    let error = validate(&tx, &issuers_only()).unwrap_err();
    assert_eq!(error, not_accepted("fastpay_funding"));
    assert_eq!((error.code(), error.category()), ("kind_not_accepted", "specie"));

    let other_committee = FastpayFunding {
        committee_id: committee_of(&authorities(4), 1).id(),
        ..valid.clone()
    };
    let error = check_funding(resign_funding(other_committee, &owners)).unwrap_err();
    assert_eq!(error, fastpay_error(FastpayErrorCode::FundingOtherCommittee));
    assert_eq!(error.code(), "funding_other_committee");

    // The identity point (weak) and a y coordinate with no point (invalid).
    let mut weak = [0u8; 32];
    weak[0] = 1;
    let mut invalid = [0u8; 32];
    invalid[0] = 2;
    assert!(specie_fastpay::VerifyingKey::from_bytes(&invalid).is_err());
    for bad in [weak, invalid] {
        let unusable = FastpayFunding {
            account: AccountKey(bad),
            ..valid.clone()
        };
        let error = check_funding(resign_funding(unusable, &owners)).unwrap_err();
        assert_eq!(error, fastpay_error(FastpayErrorCode::FundingInvalidAccount));
        assert_eq!(error.code(), "funding_invalid_account");
    }
}

#[test]
fn a_valid_redeem_creates_the_certified_output_and_its_marker() {
    let redeem = fastpay_redeem(&key(2), 10, 4);
    let tx = SpecieTransaction::from(redeem.clone());
    let compact = validate_and_compact(&tx, &trusted()).unwrap();
    assert!(compact.spent.is_empty());
    let created = tx.created_outputs();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].output, pays(&key(2), 10));
    assert_eq!(created[0].outpoint.index, 0);
    let marker = fastpay_redeem_marker(&account(&account_owner(0)), 4);
    assert_eq!(compact.created, vec![created[0].uhs_id, marker]);

    // A sentinel configured with the committee attests it.
    let sentinel = Sentinel::new(trusted(), Some(key(0x04)));
    let attested = sentinel.process(&tx).unwrap();
    assert_eq!(attested.attestations.len(), 1);
}

#[test]
fn redeem_refusals_each_name_their_reason() {
    let (keys, committee) = (authorities(4), committee());
    let to_bob = Recipient::Core(core_address(&key(2)));
    let certified = |signers: &[u16]| certificate_by(&keys, &committee, signers, to_bob, 10, 0);
    assert_eq!(check_redeem(FastpayRedeem::new(certified(&[0, 1, 2]))), Ok(()));
    assert_eq!(check_redeem(FastpayRedeem::new(certified(&[0, 1, 2, 3]))), Ok(()));

    // No committee configured; no FastPay rules at all.
    let redeem = SpecieTransaction::from(FastpayRedeem::new(certified(&[0, 1, 2])));
    assert_eq!(
        validate(&redeem, &trusted_with(None)),
        Err(fastpay_error(FastpayErrorCode::NoCommittee))
    );
    assert_eq!(validate(&redeem, &issuers_only()), Err(not_accepted("fastpay_redeem")));

    // Below quorum: 2 of 4.
    let error = check_redeem(FastpayRedeem::new(certified(&[1, 3]))).unwrap_err();
    assert_eq!(
        error,
        certificate_error(CertificateError::BelowQuorum { signers: 2, quorum: 3 })
    );
    assert_eq!(error.code(), "certificate_below_quorum");
    assert_eq!(
        error.to_string(),
        "FastPay certificate refused: 2 distinct signers, below the quorum of 3"
    );

    // Prepare votes are final only from every member in round 0: a quorum of them is a lock, and
    // prepare votes of a later round are never final, not even from every member. Commit votes
    // of a quorum are final in any round.
    let order = account_order(to_bob, 10, 0);
    let votes =
        |kind, round, signers: &[u16]| FastpayRedeem::new(votes_by(&keys, &committee, (kind, round), signers, &order));
    assert_eq!(check_redeem(votes(VoteKind::Prepare, 0, &[0, 1, 2, 3])), Ok(()));
    assert_eq!(check_redeem(votes(VoteKind::Commit, 1, &[1, 2, 3])), Ok(()));
    let error = check_redeem(votes(VoteKind::Prepare, 0, &[0, 1, 2])).unwrap_err();
    assert_eq!(
        error,
        certificate_error(CertificateError::BelowQuorum { signers: 3, quorum: 4 })
    );
    assert_eq!(error.code(), "certificate_below_quorum");
    let error = check_redeem(votes(VoteKind::Prepare, 1, &[0, 1, 2, 3])).unwrap_err();
    assert_eq!(error, certificate_error(CertificateError::NotFinal { round: 1 }));
    assert_eq!(error.code(), "certificate_not_final");

    // Wrong committee: a quorum of another committee (same keys, another epoch).
    let other = committee_of(&keys, 1);
    let foreign = certificate_by(&keys, &other, &[0, 1, 2], to_bob, 10, 0);
    let error = check_redeem(FastpayRedeem::new(foreign.clone())).unwrap_err();
    assert_eq!(error, certificate_error(CertificateError::WrongCommittee));
    assert_eq!(error.code(), "certificate_wrong_committee");

    // Forged: the other committee's votes relabelled with this committee's id.
    let mut relabelled = foreign;
    relabelled.committee_id = committee.id();
    let error = check_redeem(FastpayRedeem::new(relabelled)).unwrap_err();
    assert_eq!(
        error,
        certificate_error(CertificateError::BadSignature { authority: 0 })
    );
    assert_eq!(error.code(), "certificate_bad_signature");
}

#[test]
fn forged_and_malformed_certificates_are_refused_with_their_reason() {
    let (keys, committee) = (authorities(4), committee());
    let to_bob = Recipient::Core(core_address(&key(2)));
    let certified = |signers: &[u16]| certificate_by(&keys, &committee, signers, to_bob, 10, 0);
    // Forged: authority 3's vote presented as authority 1's.
    let mut impersonated = certified(&[0, 1, 2]);
    impersonated.signatures[1].1 = certified(&[3]).signatures[0].1;
    assert_eq!(
        check_redeem(FastpayRedeem::new(impersonated)),
        Err(certificate_error(CertificateError::BadSignature { authority: 1 }))
    );

    // Forged: the amount raised after the quorum signed.
    let mut raised = certified(&[0, 1, 2]);
    raised.order.order.amount = 1_000;
    let error = check_redeem(FastpayRedeem::new(raised)).unwrap_err();
    assert_eq!(
        error,
        certificate_error(CertificateError::Order(OrderError::BadSignature))
    );
    assert_eq!(error.code(), "certificate_bad_owner_signature");

    // A signer the committee does not have, and a repeated signer.
    let mut unknown = certified(&[0, 1, 2]);
    unknown.signatures[2].0 = 9;
    assert_eq!(
        check_redeem(FastpayRedeem::new(unknown)).unwrap_err().code(),
        "certificate_unknown_authority"
    );
    let mut repeated = certified(&[0, 1, 2]);
    repeated.signatures[1] = repeated.signatures[0];
    assert_eq!(
        check_redeem(FastpayRedeem::new(repeated)).unwrap_err().code(),
        "certificate_repeated_signer"
    );

    // A zero amount is not an order at all.
    let zero = certificate_by(&keys, &committee, &[0, 1, 2], to_bob, 0, 0);
    assert_eq!(
        check_redeem(FastpayRedeem::new(zero)),
        Err(certificate_error(CertificateError::Order(OrderError::ZeroAmount)))
    );
}

#[test]
fn a_redeem_of_a_transfer_to_an_account_is_refused_before_its_signatures_are_checked() {
    let (keys, committee) = (authorities(4), committee());
    let to_account = Recipient::Account(account(&account_owner(1)));
    let certificate = certificate_by(&keys, &committee, &[0, 1, 2], to_account, 10, 0);
    assert_eq!(certificate.check(&committee), Ok(()), "a genuine certificate");
    let error = check_redeem(FastpayRedeem::new(certificate.clone())).unwrap_err();
    assert_eq!(error, fastpay_error(FastpayErrorCode::RedeemRecipientNotCore));
    assert_eq!(error.code(), "redeem_recipient_not_core");
    // Even with a forged quorum the reason given is the recipient.
    let mut forged = certificate;
    forged.signatures[0].1[0] ^= 1;
    assert_eq!(
        check_redeem(FastpayRedeem::new(forged)),
        Err(fastpay_error(FastpayErrorCode::RedeemRecipientNotCore))
    );
}

#[test]
fn a_redeem_certified_in_a_later_epoch_is_taken_once_the_rules_learn_its_record() {
    use specie_fastpay::{deterministic_key, CommitteeChain, CommitteeRecord};
    use specie_fastpay_primary::FastpayRules;
    let first = committee();
    let mut keys = authorities(4);
    keys[3] = deterministic_key("authority", 9);
    let next = committee_of(&keys, first.epoch() + 1);
    let mut record = CommitteeRecord::propose(&first, next.members().to_vec()).unwrap();
    for seat in 0..3 {
        record.endorse(seat, &authorities(4)[usize::from(seat)]);
    }
    let rules = FastpayRules::of(CommitteeChain::new(first));
    let trusted = issuers_only().with_capability(std::sync::Arc::new(rules.clone()));
    // Certified by epoch 1's committee, with the new key of seat 3 among the signers.
    let payee = key(2);
    let certificate = certificate_by(&keys, &next, &[1, 2, 3], Recipient::Core(core_address(&payee)), 10, 4);
    let redeem = SpecieTransaction::from(FastpayRedeem::new(certificate));
    assert_eq!(
        validate(&redeem, &trusted),
        Err(certificate_error(CertificateError::WrongCommittee)),
        "an epoch this node has not learned"
    );
    assert_eq!(rules.learn(vec![record.clone()]), Ok(true));
    assert_eq!(rules.learn(vec![record]), Ok(false), "an epoch known is skipped");
    assert_eq!(
        validate(&redeem, &trusted),
        Ok(()),
        "every clone of the rules learned it"
    );
    // A certificate of the first epoch stays final.
    let earlier = SpecieTransaction::from(fastpay_redeem(&payee, 10, 5));
    assert_eq!(validate(&earlier, &trusted), Ok(()));
}

#[test]
fn an_epoch_record_is_kept_once_per_committee_and_checked_against_its_previous_epoch() {
    use specie_fastpay::{deterministic_key, CommitteeChain, CommitteeRecord, RecordError};
    use specie_fastpay_primary::{fastpay_epoch_marker, FastpayEpoch, FastpayRules};
    let first = committee();
    let old = authorities(4);
    let record_to = |seat3: u64, signers: &[u16]| {
        let mut members = first.members().to_vec();
        members[3] = deterministic_key("authority", seat3).verifying_key().to_bytes();
        let mut record = CommitteeRecord::propose(&first, members).unwrap();
        for &seat in signers {
            record.endorse(seat, &old[usize::from(seat)]);
        }
        record
    };
    let rules = FastpayRules::of(CommitteeChain::new(first.clone()));
    let trusted = issuers_only().with_capability(std::sync::Arc::new(rules.clone()));
    let epoch = |record: &CommitteeRecord| SpecieTransaction::from(FastpayEpoch { record: record.clone() });

    // Below a quorum of epoch 1's seats: refused, with the record's own reason; nothing learned.
    let record = record_to(9, &[0, 1]);
    let invalid = FastpayErrorCode::EpochRecordInvalid;
    assert!(matches!(
        validate(&epoch(&record), &trusted),
        Err(ValidationError::Capability(CapabilityError { code, message, .. }))
            if code == invalid.code() && message.contains(&RecordError::BelowQuorum { signers: 2, quorum: 3 }.to_string())
    ));
    assert_eq!(rules.epoch(), Some(first.epoch()));

    // Endorsed by a quorum: it spends nothing, moves no value, creates only the marker of its
    // previous committee, and the rules learn the epoch.
    let record = record_to(9, &[0, 1, 3]);
    let tx = epoch(&record);
    let compact = validate_and_compact(&tx, &trusted).unwrap();
    assert!(compact.spent.is_empty());
    assert_eq!(compact.created, vec![fastpay_epoch_marker(&first.id())]);
    assert_eq!(tx.circulation(), Default::default());
    assert_eq!(rules.epoch(), Some(first.epoch() + 1));
    // The same record again, endorsed by another quorum: the same txid and marker, still valid.
    let again = epoch(&record_to(9, &[1, 2, 3]));
    assert_eq!(again.txid(), tx.txid());
    assert_eq!(validate(&again, &trusted), Ok(()));

    // Another successor of the first committee: the same marker (the shards keep one), and
    // refused here since this node knows the other.
    let rival = epoch(&record_to(10, &[0, 1, 2]));
    assert_ne!(rival.txid(), tx.txid());
    assert_eq!(rival.compact().created, compact.created);
    assert_eq!(
        validate(&rival, &trusted),
        Err(fastpay_error(FastpayErrorCode::EpochConflicts))
    );

    // A record that follows a committee this node has not heard of.
    let mut beyond = record_to(9, &[0, 1, 2]);
    beyond.previous_id = [7; 32];
    assert_eq!(
        validate(&epoch(&beyond), &trusted),
        Err(fastpay_error(FastpayErrorCode::EpochUnknownPrevious))
    );
    // A node of no committee takes no record, and one without FastPay's rules none either.
    let none = issuers_only().with_capability(std::sync::Arc::new(FastpayRules::none()));
    assert_eq!(validate(&tx, &none), Err(fastpay_error(FastpayErrorCode::NoCommittee)));
    assert_eq!(validate(&tx, &issuers_only()), Err(not_accepted("fastpay_epoch")));
}
