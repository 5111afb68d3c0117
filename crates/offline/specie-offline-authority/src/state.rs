//! The authority's replicated state: what every replica rebuilds from the same commands, the
//! books the supply audit reads, and the invariants checked after every round.
//!
//! The primary record is small: registered identities, certified keys, fundings with their
//! tokens, and every recorded deposit in order. Everything else (the token trees, which serials
//! are paid, the debts, the revocation list) is derived by applying those, so a snapshot is the
//! primary record written as commands, and restoring it runs the very code that built it.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use ed25519_dalek::VerifyingKey;
use sha2::{Digest, Sha256};
use specie_codec::{DecodeError, Reader};
use specie_offline::{
    Conflict, DoubleSpend, History, Instruction, Issuance, KeyBinding, KeyCertificate, KeyStatus, Lifecycle, Link,
    PublicKey, Recorded,
};
use thiserror::Error;

use crate::messages::{
    Books, Command, Debt, Deposit, DepositLink, DepositOutcome, Funding, KeyBooks, AUTHORITY_ENCODING_VERSION,
};

/// Why a snapshot or log record is refused, or the state broke an invariant.
#[derive(Debug, Error)]
pub enum StateError {
    #[error("cannot decode: {0}")]
    Decode(#[from] DecodeError),
    #[error("invariant broken: {0}")]
    Invariant(String),
}

/// A key this authority certified.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Certified {
    pub period: u32,
    pub binding: KeyBinding,
    pub signature: [u8; 64],
}

/// A double spend the authority found: the serial and the conflict its tree recorded.
#[derive(Clone, Debug)]
pub(crate) struct Conviction {
    pub serial: [u8; 16],
    pub conflict: Conflict,
}

/// A deposited token's tree of statements. Most tokens are deposited once, so the tree is built
/// when a second deposit of the token comes; until then its first deposit stands for it (the tree
/// that chain and its deposit make alone: all new, in conflict with nothing). Building every tree
/// at once cost the sequential stage of each deposit about a third of its time.
enum Tree {
    First(Arc<Deposit>),
    Built(Box<History>),
}

impl Tree {
    /// The tree `first`, the token's first recorded deposit, makes alone.
    fn of(first: &Deposit) -> History {
        let links = first.token.links();
        let link = deposit_link(first, links.last().expect("an issuance link"));
        let mut history = History::new(&first.token.issuance);
        let recorded = history.record_linked(&first.token, &links, Some((first.statement, link)));
        assert!(
            matches!(&recorded, Ok(Recorded::New { conflicts }) if conflicts.is_empty()),
            "a token's first recorded deposit meets an empty tree: {recorded:?}"
        );
        history
    }

    /// The tree, built now if it was its first deposit's.
    fn built(&mut self) -> &mut History {
        if let Tree::First(first) = self {
            let history = Tree::of(first);
            *self = Tree::Built(Box::new(history));
        }
        match self {
            Tree::Built(history) => history,
            Tree::First(_) => unreachable!("built just now"),
        }
    }
}

#[derive(Default)]
pub(crate) struct AuthorityState {
    /// Issuing key → its denomination and period: the first period's from the configuration,
    /// later ones from the log's rotations.
    denominations: BTreeMap<PublicKey, (u64, u32)>,
    /// The windows (from the configuration) and the current period (from the log).
    pub lifecycle: Lifecycle,
    /// The rotations applied, in order: what a snapshot replays.
    rotations: Vec<(u32, Vec<(PublicKey, u64)>)>,
    pub revoked_keys: BTreeSet<PublicKey>,
    pub identities: BTreeSet<PublicKey>,
    /// One-time key → the period it was certified for, its binding to an identity, and its
    /// certificate's signature.
    pub certified: BTreeMap<PublicKey, Certified>,
    /// Certified keys, decompressed once (derived: rebuilt as certifications are applied).
    verifying: HashMap<PublicKey, VerifyingKey>,
    /// Certified keys per identity (derived likewise).
    keys_by_identity: HashMap<PublicKey, usize>,
    pub fundings: BTreeMap<[u8; 32], (Funding, Vec<Issuance>)>,
    /// Core fundings refunded (never issuable): id → (amount, the core address paid back).
    pub refunds: BTreeMap<[u8; 32], (u64, [u8; 32])>,
    /// Every deposit recorded in a token's tree (paid or refused as double spent), in order: the
    /// log's own commands, shared.
    deposits: Vec<Arc<Deposit>>,
    pub issued: HashMap<[u8; 16], Issuance>,
    /// Each deposited token's tree of statements.
    histories: HashMap<[u8; 16], Tree>,
    paid: HashSet<[u8; 16]>,
    pub outcomes: HashMap<DepositLink, DepositOutcome>,
    issued_by_key: BTreeMap<PublicKey, u128>,
    paid_by_key: BTreeMap<PublicKey, u128>,
    funded: u128,
    defunded: u128,
    double_spent: u128,
    pub debts: BTreeMap<PublicKey, Debt>,
    pub convictions: BTreeMap<PublicKey, Vec<Conviction>>,
    pub revoked: Vec<[u8; 16]>,
    revoked_set: HashSet<[u8; 16]>,
}

/// A fresh serial: SHA-256 of a domain, what issues the token (a funding id or a deposit's link)
/// and the token's place among those it issues, cut to 16 bytes.
pub(crate) fn derive_serial(kind: &[u8], source: &[u8; 32], index: usize) -> [u8; 16] {
    let mut hasher = Sha256::new();
    hasher.update(b"specie/offline/serial/v1/");
    hasher.update(kind);
    hasher.update(source);
    hasher.update((index as u32).to_le_bytes());
    hasher.finalize()[..16].try_into().expect("16 of 32 bytes")
}

/// The link of a deposit statement on a token: the node it makes in the token's tree.
pub(crate) fn deposit_link(deposit: &Deposit, last_link: &[u8; 32]) -> DepositLink {
    let index = (deposit.token.hops.len() + 1) as u8;
    Sha256::digest(deposit.statement.statement.signing_bytes(last_link, index)).into()
}

impl AuthorityState {
    /// A state starting in `lifecycle.current_period` with its issuing keys `first`.
    pub fn new(lifecycle: Lifecycle, first: &[(PublicKey, u64)]) -> AuthorityState {
        let period = lifecycle.current_period;
        AuthorityState {
            denominations: first.iter().map(|(key, value)| (*key, (*value, period))).collect(),
            lifecycle,
            ..AuthorityState::default()
        }
    }

    /// Where the tokens of `issuing_key` stand now, if it is one of this authority's keys.
    pub fn key_status(&self, issuing_key: &PublicKey) -> Option<KeyStatus> {
        let (_, period) = self.denominations.get(issuing_key)?;
        Some(self.lifecycle.status(*period, self.revoked_keys.contains(issuing_key)))
    }

    pub fn key_period(&self, issuing_key: &PublicKey) -> Option<u32> {
        self.denominations.get(issuing_key).map(|(_, period)| *period)
    }

    /// Whether `certificate` is, byte for byte, one this authority issued.
    pub fn issued_certificate(&self, certificate: &KeyCertificate) -> bool {
        self.certified.get(&certificate.key).is_some_and(|certified| {
            certified.period == certificate.period && certified.signature == certificate.signature
        })
    }

    /// How many keys are certified for `identity`.
    pub fn keys_of(&self, identity: &PublicKey) -> usize {
        self.keys_by_identity.get(identity).copied().unwrap_or(0)
    }

    /// A certified key, ready to verify with.
    pub fn verifying_key(&self, key: &PublicKey) -> Option<&VerifyingKey> {
        self.verifying.get(key)
    }

    pub fn denomination(&self, issuing_key: &PublicKey) -> u64 {
        self.denominations.get(issuing_key).map_or(0, |(value, _)| *value)
    }

    /// Applies a durable command; a deposit's link and outcome are returned (and the outcome kept,
    /// so a deposit sent again gets it again).
    pub fn apply(&mut self, command: &Command) -> Option<(DepositLink, DepositOutcome)> {
        match command {
            Command::Register { identity } => {
                self.identities.insert(*identity);
            }
            Command::Certify { period, certified } => {
                for (binding, signature) in certified {
                    if self.certified.contains_key(&binding.key) {
                        continue;
                    }
                    self.certified.insert(
                        binding.key,
                        Certified {
                            period: *period,
                            binding: *binding,
                            signature: *signature,
                        },
                    );
                    if let Ok(key) = VerifyingKey::from_bytes(&binding.key) {
                        self.verifying.insert(binding.key, key);
                    }
                    *self.keys_by_identity.entry(binding.identity).or_default() += 1;
                }
            }
            Command::Fund { funding, issuances } => self.apply_fund(funding, issuances),
            Command::Refund { id, amount, address } => self.apply_refund(id, *amount, *address),
            Command::Deposit(deposit) => return Some(self.apply_deposit(deposit)),
            // A rotation to a period the authority is in or past already lost a race (two
            // leaders in turn proposed one): it changes nothing.
            Command::Rotate { period, .. } if *period <= self.lifecycle.current_period => {}
            Command::Rotate { period, keys } => {
                self.lifecycle.current_period = *period;
                for (key, value) in keys {
                    self.denominations.insert(*key, (*value, *period));
                }
                self.rotations.push((*period, keys.clone()));
            }
            Command::RevokeKey { key } => {
                self.revoked_keys.insert(*key);
            }
        }
        None
    }

    fn apply_fund(&mut self, funding: &Funding, issuances: &[Issuance]) {
        if self.fundings.contains_key(&funding.id) || self.refunds.contains_key(&funding.id) {
            return;
        }
        self.fundings.insert(funding.id, (funding.clone(), issuances.to_vec()));
        self.funded += u128::from(funding.amount);
        self.issue(issuances);
    }

    /// A funding refunded: in and straight out again, once (issued or refunded, not both).
    fn apply_refund(&mut self, id: &[u8; 32], amount: u64, address: [u8; 32]) {
        if self.fundings.contains_key(id) || self.refunds.contains_key(id) {
            return;
        }
        self.refunds.insert(*id, (amount, address));
        self.funded += u128::from(amount);
        self.defunded += u128::from(amount);
    }

    fn issue(&mut self, issuances: &[Issuance]) {
        for issuance in issuances {
            let value = self.denomination(&issuance.issuing_key);
            let earlier = self.issued.insert(issuance.serial, *issuance);
            assert!(earlier.is_none(), "serials are derived fresh: a serial is issued once");
            *self.issued_by_key.entry(issuance.issuing_key).or_default() += u128::from(value);
        }
    }

    fn apply_deposit(&mut self, deposit: &Arc<Deposit>) -> (DepositLink, DepositOutcome) {
        let links = deposit.token.links();
        let link = deposit_link(deposit, links.last().expect("an issuance link"));
        (link, self.decide(deposit, &links, link))
    }

    fn decide(&mut self, deposit: &Arc<Deposit>, links: &[Link], link: DepositLink) -> DepositOutcome {
        let serial = deposit.token.issuance.serial;
        if let Some(outcome) = self.outcomes.get(&link) {
            return outcome.clone();
        }
        let recorded = match self.histories.entry(serial) {
            // The token's first deposit: it stands for the tree until a second one comes.
            Entry::Vacant(vacant) => {
                vacant.insert(Tree::First(Arc::clone(deposit)));
                Ok(Recorded::New { conflicts: Vec::new() })
            }
            Entry::Occupied(tree) => {
                let history = tree.into_mut().built();
                history.record_linked(&deposit.token, links, Some((deposit.statement, link)))
            }
        };
        let conflicts = match recorded {
            // The leader checked the issuance against the issued table before proposing.
            Err(other) => panic!("a deposit of another issuance of a known serial reached the log: {other}"),
            Ok(Recorded::Known) => unreachable!("a deposit recorded before has an outcome"),
            Ok(Recorded::DepositedBefore { .. }) => return DepositOutcome::AlreadyDeposited,
            Ok(Recorded::New { conflicts }) => conflicts,
        };
        self.deposits.push(Arc::clone(deposit));
        let value = self.denomination(&deposit.token.issuance.issuing_key);
        let outcome = if self.paid.contains(&serial) {
            self.convict(serial, conflicts, value)
        } else {
            assert!(
                conflicts.is_empty(),
                "a token's first recorded deposit meets an empty tree"
            );
            self.pay(serial, deposit, value)
        };
        self.outcomes.insert(link, outcome.clone());
        outcome
    }

    fn pay(&mut self, serial: [u8; 16], deposit: &Deposit, value: u64) -> DepositOutcome {
        self.paid.insert(serial);
        *self.paid_by_key.entry(deposit.token.issuance.issuing_key).or_default() += u128::from(value);
        match &deposit.instruction {
            Instruction::Reissue { .. } => {
                self.issue(&deposit.issuances);
                DepositOutcome::Reissued {
                    issuances: deposit.issuances.clone(),
                }
            }
            Instruction::Defund { address } => {
                self.defunded += u128::from(value);
                DepositOutcome::Defunded {
                    serial,
                    address: *address,
                    amount: value,
                }
            }
        }
    }

    /// A second branch of a paid token: the first new statement of the chain hangs under a node
    /// that had a child already, and its owner signed both. That owner owes the refused value.
    fn convict(&mut self, serial: [u8; 16], conflicts: Vec<Conflict>, value: u64) -> DepositOutcome {
        let conflict = conflicts
            .into_iter()
            .next()
            .expect("a new branch of a paid token hangs under a node with a child");
        let debtor = self
            .certified
            .get(&conflict.owner)
            .map_or(conflict.owner, |certified| certified.binding.identity);
        let debt = self.debts.entry(debtor).or_insert(Debt {
            identity: debtor,
            value: 0,
            double_spends: 0,
        });
        debt.value += u128::from(value);
        debt.double_spends += 1;
        self.double_spent += u128::from(value);
        self.convictions
            .entry(debtor)
            .or_default()
            .push(Conviction { serial, conflict });
        if self.revoked_set.insert(serial) {
            self.revoked.push(serial);
        }
        DepositOutcome::DoubleSpent { serial, debtor, value }
    }

    /// Evidence of `conviction` that anyone can check with the key ring.
    pub fn evidence(&self, conviction: &Conviction) -> Option<DoubleSpend> {
        let conflict = &conviction.conflict;
        let token = match self.histories.get(&conviction.serial)? {
            Tree::Built(history) => history.chain_to(&conflict.node)?,
            Tree::First(first) => Tree::of(first).chain_to(&conflict.node)?,
        };
        let certified = self.certified.get(&conflict.owner)?;
        Some(DoubleSpend {
            token,
            first: conflict.first,
            second: conflict.second,
            binding: certified.binding,
        })
    }

    pub fn books(&self) -> Books {
        let by_key: Vec<KeyBooks> = self
            .denominations
            .iter()
            .map(|(key, (denomination, period))| KeyBooks {
                issuing_key: *key,
                denomination: *denomination,
                period: *period,
                status: self.lifecycle.status(*period, self.revoked_keys.contains(key)),
                issued: self.issued_by_key.get(key).copied().unwrap_or(0),
                paid: self.paid_by_key.get(key).copied().unwrap_or(0),
            })
            .collect();
        let expired = by_key
            .iter()
            .filter(|key| matches!(key.status, KeyStatus::Expired { .. }))
            .map(|key| key.issued - key.paid)
            .sum();
        Books {
            funded: self.funded,
            defunded: self.defunded,
            by_key,
            outstanding: self.funded - self.defunded,
            expired,
            current_period: self.lifecycle.current_period,
            debts: self.debts.values().copied().collect(),
        }
    }

    /// Per issuing key, value paid never exceeds value issued; value is conserved (issued − paid
    /// over all keys = funded − defunded); debts add up to the refused double-spent value; every
    /// paid serial was issued; every certified key belongs to a registered identity.
    pub fn check(&self) -> Result<(), StateError> {
        let broken = |what: String| Err(StateError::Invariant(what));
        let mut outstanding: i128 = 0;
        for (key, issued) in &self.issued_by_key {
            let paid = self.paid_by_key.get(key).copied().unwrap_or(0);
            if paid > *issued {
                return broken(format!("issuing key {}: paid {paid} > issued {issued}", hex(key)));
            }
            outstanding += (*issued - paid) as i128;
        }
        if self.paid_by_key.keys().any(|key| !self.issued_by_key.contains_key(key)) {
            return broken("value paid for a key that issued nothing".into());
        }
        if self.defunded > self.funded || outstanding != (self.funded - self.defunded) as i128 {
            return broken(format!(
                "value not conserved: funded {} − defunded {} ≠ outstanding {outstanding}",
                self.funded, self.defunded
            ));
        }
        let debts: u128 = self.debts.values().map(|debt| debt.value).sum();
        if debts != self.double_spent {
            return broken(format!(
                "debts {debts} ≠ refused double-spent value {}",
                self.double_spent
            ));
        }
        if let Some(serial) = self.paid.iter().find(|serial| !self.issued.contains_key(*serial)) {
            return broken(format!("serial {} paid but never issued", hex(serial)));
        }
        if let Some((key, _)) = self
            .certified
            .iter()
            .find(|(_, certified)| !self.identities.contains(&certified.binding.identity))
        {
            return broken(format!("key {} certified for an unregistered identity", hex(key)));
        }
        if self.revoked.len() != self.revoked_set.len() {
            return broken("a serial revoked twice".into());
        }
        Ok(())
    }

    /// What the leader checked before proposing `command` and `apply` relies on (a serial issued
    /// once; a deposit statement on a token this authority issued): checked again for commands that come
    /// from a snapshot, which the leader did not propose.
    fn check_applicable(&self, command: &Command) -> Result<(), StateError> {
        let fresh = |issuances: &[Issuance]| {
            let serials: HashSet<_> = issuances.iter().map(|issuance| issuance.serial).collect();
            serials.len() == issuances.len() && issuances.iter().all(|i| !self.issued.contains_key(&i.serial))
        };
        let applicable = match command {
            Command::Register { .. } | Command::Certify { .. } => true,
            Command::Rotate { period, keys } => {
                *period > self.lifecycle.current_period
                    && keys.iter().all(|(key, _)| !self.denominations.contains_key(key))
            }
            Command::RevokeKey { key } => self.denominations.contains_key(key),
            Command::Fund { funding, issuances } => fresh(issuances) && !self.refunds.contains_key(&funding.id),
            Command::Refund { id, .. } => !self.fundings.contains_key(id) && !self.refunds.contains_key(id),
            Command::Deposit(deposit) => {
                self.issued.get(&deposit.token.issuance.serial) == Some(&deposit.token.issuance)
                    && deposit.statement.statement.is_deposit()
                    && fresh(&deposit.issuances)
            }
        };
        match applicable {
            true => Ok(()),
            false => Err(StateError::Invariant(
                "a snapshot command re-issues a serial, deposits a token never issued, or refunds a funding issued or refunded"
                    .into(),
            )),
        }
    }

    /// The primary record as commands, in an order that rebuilds this state: identities,
    /// rotations (in order), revoked keys (sorted), certified keys (sorted), fundings (by id),
    /// refunds (by id), then deposits in the order they were recorded.
    pub fn encode(&self) -> Vec<u8> {
        let mut commands: Vec<Command> = Vec::new();
        commands.extend(
            self.identities
                .iter()
                .map(|identity| Command::Register { identity: *identity }),
        );
        commands.extend(self.rotations.iter().map(|(period, keys)| Command::Rotate {
            period: *period,
            keys: keys.clone(),
        }));
        commands.extend(self.revoked_keys.iter().map(|key| Command::RevokeKey { key: *key }));
        commands.extend(self.certified.values().map(|certified| Command::Certify {
            period: certified.period,
            certified: vec![(certified.binding, certified.signature)],
        }));
        commands.extend(self.fundings.values().map(|(funding, issuances)| Command::Fund {
            funding: funding.clone(),
            issuances: issuances.clone(),
        }));
        commands.extend(self.refunds.iter().map(|(id, (amount, address))| Command::Refund {
            id: *id,
            amount: *amount,
            address: *address,
        }));
        commands.extend(
            self.deposits
                .iter()
                .map(|deposit| Command::Deposit(Arc::clone(deposit))),
        );
        let mut out = vec![AUTHORITY_ENCODING_VERSION];
        out.extend_from_slice(&(commands.len() as u64).to_le_bytes());
        for command in &commands {
            command.encode_body(&mut out);
        }
        out
    }

    /// A state rebuilt from a snapshot, which must be in canonical form.
    pub fn decode(
        lifecycle: Lifecycle,
        first: &[(PublicKey, u64)],
        bytes: &[u8],
    ) -> Result<AuthorityState, StateError> {
        let mut reader = Reader::new(bytes);
        reader.read_version("authority snapshot", AUTHORITY_ENCODING_VERSION)?;
        let count = reader.read_count("snapshot command count", u64::MAX, 33)?;
        let mut state = AuthorityState::new(lifecycle, first);
        for _ in 0..count {
            let command = Command::decode_body(&mut reader)?;
            state.check_applicable(&command)?;
            state.apply(&command);
        }
        reader.finish()?;
        if state.encode() != bytes {
            return Err(DecodeError::NonCanonical {
                what: "authority snapshot",
                reason: "re-encoding the state it builds gives other bytes",
            }
            .into());
        }
        state.check()?;
        Ok(state)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
