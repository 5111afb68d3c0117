//! Builders for signed test transactions (core and FastPay), the keys a sentinel trusts, and the
//! vector block of `docs/transaction-format.md`.

#![allow(dead_code)] // Each test module uses a different subset.

use std::sync::Arc;

use secp256k1::Keypair;
use specie_fastpay::test_support::SigningCommittee;
use specie_fastpay::{
    deterministic_key, AccountKey, Certificate, Committee, CoreAddress, Recipient, SignedOrder, SigningKey,
    TransferOrder, VoteKind,
};
use specie_fastpay_primary::{FastpayFunding, FastpayRedeem, FastpayRules};
use specie_sentinel::{IssuerKeys, TrustedKeys};
use specie_transaction::signing::xonly_bytes;
pub use specie_transaction::test_support::*;
use specie_transaction::{witness_program_commitment, NonceMode};

/// The documented vectors, FastPay's kinds installed first so that they decode.
pub fn vectors() -> Vectors {
    specie_fastpay_primary::install();
    Vectors::documented()
}

/// The issuer only: no rules for FastPay's kinds, so they are not accepted at all.
pub fn issuers_only() -> TrustedKeys {
    TrustedKeys::new(IssuerKeys::new([issuer().x_only_public_key().0]).unwrap())
}

/// The issuer, and FastPay's rules with `committee` (none: the node is no FastPay Primary).
pub fn trusted_with(committee: Option<Committee>) -> TrustedKeys {
    let rules = committee.map_or_else(FastpayRules::none, |c| {
        FastpayRules::of(specie_fastpay::CommitteeChain::new(c))
    });
    issuers_only().with_capability(Arc::new(rules))
}

/// The issuer, and FastPay's rules with the committee of [`authorities`]`(4)`.
pub fn trusted() -> TrustedKeys {
    trusted_with(Some(committee_of(&authorities(4), 0)))
}

/// FastPay authority keys 0..n (`deterministic_key("authority", i)`).
pub fn authorities(n: u64) -> Vec<SigningKey> {
    (0..n).map(|i| deterministic_key("authority", i)).collect()
}

pub fn committee_of(authorities: &[SigningKey], epoch: u64) -> Committee {
    Committee::new(
        epoch,
        authorities.iter().map(|a| a.verifying_key().to_bytes()).collect(),
    )
    .unwrap()
}

/// The committee [`trusted`] is configured with.
pub fn committee() -> Committee {
    committee_of(&authorities(4), 0)
}

/// The owner of Byzantine-mode account `n`.
pub fn account_owner(n: u64) -> SigningKey {
    deterministic_key("account", n)
}

pub fn account(owner: &SigningKey) -> AccountKey {
    AccountKey(owner.verifying_key().to_bytes())
}

/// A funding of `amount` into account 0 of [`committee`] from inputs, with change outputs.
pub fn funding(amount: u64, inputs: &[(Keypair, u64)], change: &[(Keypair, u64)]) -> FastpayFunding {
    let owners: Vec<Keypair> = inputs.iter().map(|(owner, _)| *owner).collect();
    FastpayFunding::new_signed(
        committee().id(),
        account(&account_owner(0)),
        amount,
        inputs
            .iter()
            .enumerate()
            .map(|(i, (owner, value))| owned_input(owner, *value, 0xC0, i as u64))
            .collect(),
        change.iter().map(|(payee, value)| pays(payee, *value)).collect(),
        &owners,
        NonceMode::Deterministic,
    )
    .unwrap()
}

/// The core address (p2pk commitment) of a core key.
pub fn core_address(owner: &Keypair) -> CoreAddress {
    CoreAddress(witness_program_commitment(&xonly_bytes(owner)))
}

/// Account 0's transfer `sequence` of `amount` to `recipient`.
pub fn account_order(recipient: Recipient, amount: u64, sequence: u64) -> SignedOrder {
    let owner = account_owner(0);
    TransferOrder {
        sender: account(&owner),
        recipient,
        amount,
        sequence,
        memo: Vec::new(),
    }
    .sign(&owner)
}

/// The votes of phase `kind` in `round` of `signers` of `authorities` (whose committee is
/// `committee`) for `order`, as one certificate.
pub fn votes_by(
    authorities: &[SigningKey],
    committee: &Committee,
    (kind, round): (VoteKind, u32),
    signers: &[u16],
    order: &SignedOrder,
) -> Certificate {
    let signing = SigningCommittee {
        committee: committee.clone(),
        keys: authorities.to_vec(),
    };
    signing.certificate(kind, round, order, signers)
}

/// A certificate of account 0's transfer `sequence` of `amount` to `recipient`, of the commit
/// votes of `signers` of `authorities` (whose committee is `committee`) in round 0: final if
/// they are a quorum.
pub fn certificate_by(
    authorities: &[SigningKey],
    committee: &Committee,
    signers: &[u16],
    recipient: Recipient,
    amount: u64,
    sequence: u64,
) -> Certificate {
    let order = account_order(recipient, amount, sequence);
    votes_by(authorities, committee, (VoteKind::Commit, 0), signers, &order)
}

/// A redeem of account 0's transfer `sequence` of `amount` to `payee`'s core address, certified
/// by the commit votes of authorities 0, 1 and 2 of [`committee`] (a final certificate).
pub fn fastpay_redeem(payee: &Keypair, amount: u64, sequence: u64) -> FastpayRedeem {
    let certificate = certificate_by(
        &authorities(4),
        &committee(),
        &[0, 1, 2],
        Recipient::Core(core_address(payee)),
        amount,
        sequence,
    );
    FastpayRedeem::new(certificate)
}
