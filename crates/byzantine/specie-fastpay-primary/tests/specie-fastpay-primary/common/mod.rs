//! Builders for signed test transactions (core and FastPay), the keys a sentinel trusts, and the
//! vector block of `docs/transaction-format.md`.

#![allow(dead_code)] // Each test module uses a different subset.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use secp256k1::Keypair;
use specie_fastpay::test_support::SigningCommittee;
use specie_fastpay::{
    deterministic_key, AccountKey, Certificate, Committee, CoreAddress, Recipient, SignedOrder, SigningKey,
    TransferOrder, VoteKind,
};
use specie_fastpay_primary::{FastpayFunding, FastpayRedeem, FastpayRules};
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

/// The issuer only: no rules for FastPay's kinds, so they are not accepted at all.
pub fn issuers_only() -> TrustedKeys {
    TrustedKeys::new(IssuerKeys::new([issuer().x_only_public_key().0]).unwrap())
}

/// The issuer, and FastPay's rules with `committee` (none: the node is no FastPay Primary).
pub fn trusted_with(committee: Option<Committee>) -> TrustedKeys {
    issuers_only().with_capability(Arc::new(FastpayRules { committee }))
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

/// `docs/transaction-format.md`, whose vector block the tests check (the same file the core's
/// tests read).
pub fn format_doc() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../docs/transaction-format.md"
    ))
}

/// `name=value` lines inside the fenced code blocks of a markdown file; `#` lines are comments.
/// (As `specie-transaction`'s tests read them.)
pub fn parse_kv_blocks(markdown: &str) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    let mut in_block = false;
    for line in markdown.lines() {
        let line = line.trim();
        if line.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block || line.is_empty() || line.starts_with('#') {
            continue;
        }
        // Vector lines are `name=value` with no spaces; formulas are not vectors.
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let is_name = |c: char| c.is_ascii_alphanumeric() || "_[]".contains(c);
        if key.is_empty() || !key.chars().all(is_name) || value.contains(char::is_whitespace) {
            continue;
        }
        let previous = values.insert(key.to_owned(), value.to_owned());
        assert!(previous.is_none(), "duplicate vector key {key}");
    }
    values
}

pub struct Vectors(pub BTreeMap<String, String>);

impl Vectors {
    /// The documented vectors; FastPay's kinds are installed first, so that they decode.
    pub fn documented() -> Vectors {
        specie_fastpay_primary::install();
        let path = format_doc();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("reading {}: {error}", path.display()));
        Vectors(parse_kv_blocks(&text))
    }
    pub fn get(&self, key: &str) -> &str {
        self.0.get(key).unwrap_or_else(|| panic!("vector {key} missing"))
    }
    pub fn bytes(&self, key: &str) -> Vec<u8> {
        hex::decode(self.get(key)).unwrap_or_else(|error| panic!("vector {key}: {error}"))
    }
    pub fn hash(&self, key: &str) -> [u8; 32] {
        self.bytes(key)
            .try_into()
            .unwrap_or_else(|_| panic!("vector {key} is not 32 bytes"))
    }
}
