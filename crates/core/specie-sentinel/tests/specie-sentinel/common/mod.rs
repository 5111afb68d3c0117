//! Builders for signed test transactions.

#![allow(dead_code)] // Each test module uses a different subset.

use secp256k1::Keypair;
use specie_fastpay::test_support::SigningCommittee;
use specie_fastpay::{
    deterministic_key, AccountKey, Certificate, Committee, CoreAddress, Recipient, SignedOrder, SigningKey,
    TransferOrder, VoteKind,
};
use specie_sentinel::{IssuerKeys, TrustedKeys};
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{
    witness_program_commitment, FastpayFunding, FastpayRedeem, Input, MintTransaction, NonceMode, OutPoint, Output,
    RedeemTransaction, Transaction, Txid,
};

/// A keypair from a one-byte seed (secret = seed repeated; valid for every seed 1..=255).
pub fn key(seed: u8) -> Keypair {
    keypair_from_secret(&[seed; 32]).expect("seeds 1..=255 are valid secret keys")
}

pub fn issuer() -> Keypair {
    key(0x03)
}

/// The issuer, and the FastPay committee of [`authorities`]`(4)`.
pub fn trusted() -> TrustedKeys {
    TrustedKeys::new(
        IssuerKeys::new([issuer().x_only_public_key().0]).unwrap(),
        Some(committee_of(&authorities(4), 0)),
    )
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

pub fn pays(owner: &Keypair, value: u64) -> Output {
    Output {
        witness_program_commitment: witness_program_commitment(&xonly_bytes(owner)),
        value,
    }
}

/// An input owned by `owner`, as if output `index` of some earlier transaction `txid_seed`.
pub fn owned_input(owner: &Keypair, value: u64, txid_seed: u8, index: u64) -> Input {
    Input {
        prevout: OutPoint {
            txid: Txid([txid_seed; 32]),
            index,
        },
        data: pays(owner, value),
    }
}

/// A signed transfer: inputs (owner, value) to outputs (payee, value).
pub fn transfer(inputs: &[(Keypair, u64)], outputs: &[(Keypair, u64)]) -> Transaction {
    let mut tx = Transaction {
        inputs: inputs
            .iter()
            .enumerate()
            .map(|(i, (owner, value))| owned_input(owner, *value, 0xA0, i as u64))
            .collect(),
        outputs: outputs.iter().map(|(payee, value)| pays(payee, *value)).collect(),
        witnesses: vec![],
    };
    let owners: Vec<Keypair> = inputs.iter().map(|(owner, _)| *owner).collect();
    tx.sign(&owners, NonceMode::Deterministic).unwrap();
    tx
}

/// Alice pays 60 to bob from 100, 40 change: valid.
pub fn valid_transfer() -> Transaction {
    transfer(&[(key(1), 100)], &[(key(2), 60), (key(1), 40)])
}

/// Two inputs (alice 70, bob 30) to carol 100: valid.
pub fn valid_two_input_transfer() -> Transaction {
    transfer(&[(key(1), 70), (key(2), 30)], &[(key(4), 100)])
}

/// Re-signs a transfer after a test changed it, so that only the intended error remains.
pub fn resign(tx: &mut Transaction, owners: &[Keypair]) {
    tx.sign(owners, NonceMode::Deterministic).unwrap();
}

pub fn mint(outputs: &[(Keypair, u64)]) -> MintTransaction {
    MintTransaction::new_signed(
        [0x4E; 32],
        outputs.iter().map(|(payee, value)| pays(payee, *value)).collect(),
        &issuer(),
        NonceMode::Deterministic,
    )
}

/// Redeem `amount` from inputs, with change outputs.
pub fn redeem(amount: u64, inputs: &[(Keypair, u64)], change: &[(Keypair, u64)]) -> RedeemTransaction {
    let owners: Vec<Keypair> = inputs.iter().map(|(owner, _)| *owner).collect();
    RedeemTransaction::new_signed(
        amount,
        inputs
            .iter()
            .enumerate()
            .map(|(i, (owner, value))| owned_input(owner, *value, 0xB0, i as u64))
            .collect(),
        change.iter().map(|(payee, value)| pays(payee, *value)).collect(),
        &owners,
        &issuer(),
        NonceMode::Deterministic,
    )
    .unwrap()
}

/// Re-signs a redeem (owners and issuer) after a test changed it.
pub fn resign_redeem(tx: &mut RedeemTransaction, owners: &[Keypair]) {
    tx.sign(owners, &issuer(), NonceMode::Deterministic).unwrap();
}
