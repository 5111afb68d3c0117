//! Builders for signed test transactions.

#![allow(dead_code)] // Each test module uses a different subset.

use secp256k1::Keypair;
use specie_sentinel::{IssuerKeys, TrustedKeys};
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{
    witness_program_commitment, Input, MintTransaction, NonceMode, OutPoint, Output, RedeemTransaction, Transaction,
    Txid,
};

/// A keypair from a one-byte seed (secret = seed repeated; valid for every seed 1..=255).
pub fn key(seed: u8) -> Keypair {
    keypair_from_secret(&[seed; 32]).expect("seeds 1..=255 are valid secret keys")
}

pub fn issuer() -> Keypair {
    key(0x03)
}

/// The issuer; no bridge, no private kinds, no capability kinds.
pub fn trusted() -> TrustedKeys {
    TrustedKeys::new(IssuerKeys::new([issuer().x_only_public_key().0]).unwrap())
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
