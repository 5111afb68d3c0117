//! An authority shard's durable state and the deterministic effect of each command on it.

use std::collections::{BTreeMap, VecDeque};

use specie_codec::{put_u32, put_u64, DecodeError, Reader};
use specie_fastpay::{
    AccountKey, Certificate, CommitteeRecord, Recipient, SignedOrder, SigningKey, VoteKind, VoteStatement,
    CHAIN_RECORDS_MAX, SIGNATURE_BYTES,
};
use thiserror::Error;

use crate::messages::{Credit, Funding, Refusal, ShardIndex};

/// Why a log record or snapshot is refused, or a recovered state is inconsistent.
#[derive(Debug, Error)]
pub enum StateError {
    #[error("undecodable: {0}")]
    Decode(#[from] DecodeError),
    #[error("inconsistent state: {0}")]
    Inconsistent(String),
}

/// FastPay's account at one authority shard (§4). The balance is signed: a certificate is
/// settled even before the credits that paid for it reach this shard (§5), since a quorum's
/// votes already prove the sender could pay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Account {
    pub balance: i128,
    pub next_sequence: u64,
    /// The order voted for at `next_sequence`, and this authority's signature on it.
    pub pending: Option<(SignedOrder, [u8; SIGNATURE_BYTES])>,
    /// One certificate per sequence number below `next_sequence`.
    pub confirmed: Vec<Certificate>,
    /// Recovery of the slot at `next_sequence` (cleared when it settles): the highest round
    /// entered, the latest prepare vote of a round ≥ 1, and the highest lock with this shard's
    /// commit vote on it.
    pub round: u32,
    pub prepared: Option<(u32, SignedOrder, [u8; SIGNATURE_BYTES])>,
    pub lock: Option<(Certificate, [u8; SIGNATURE_BYTES])>,
}

impl Account {
    /// The round of the highest lock, if any.
    pub fn lock_round(&self) -> Option<u32> {
        self.lock.as_ref().map(|(certificate, _)| certificate.round)
    }
}

/// The sending end of the channel to one other shard: credits numbered from
/// `next_sequence - unacked.len()`, kept until acknowledged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Outbox {
    pub next_sequence: u64,
    pub unacked: VecDeque<Credit>,
}

impl Outbox {
    pub fn acked_through(&self) -> u64 {
        self.next_sequence - self.unacked.len() as u64
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ShardState {
    pub accounts: BTreeMap<AccountKey, Account>,
    pub fundings: BTreeMap<[u8; 32], Funding>,
    /// Per sending shard, the number of the next credit to apply.
    pub inbox: BTreeMap<ShardIndex, u64>,
    pub outbox: BTreeMap<ShardIndex, Outbox>,
    /// The shard's books: value in from the core and from other shards, value out to other
    /// shards and to the core. The balances always sum to in − out.
    pub funded: u128,
    pub credited_in: u128,
    pub credited_out: u128,
    pub redeemed: u128,
    /// The committee records of every epoch after the first (`AuthorityConfig::committee`),
    /// oldest first, each checked against the one before when it was applied.
    pub records: Vec<CommitteeRecord>,
    /// The epoch from which this state's key holds its seat by a hand-over (`take_over`); `None`
    /// for the seat's first holder. A key that holds the seat only from a later epoch, without
    /// a hand-over, never votes: it would vote without the seat's promises.
    pub holder_since: Option<u64>,
}

/// Where a confirmed certificate's value goes.
pub(crate) enum Settled {
    Here,
    ToShard(ShardIndex, u64),
    ToCore,
}

impl ShardState {
    /// Signs every vote of every open slot again under `committee_id` with `key`: what an epoch
    /// change carries over (the round-0 prepare, a recovery round's prepare, the commit vote on a
    /// lock), now in the name of the new epoch's committee and of whoever holds the seat. The
    /// choices stay the ones made durable; only the signatures change, and Ed25519 signing is
    /// deterministic, so signing again gives the same bytes.
    pub fn sign_open_slots(&mut self, key: &SigningKey, committee_id: [u8; 32]) {
        let sign = |kind, round, order: &SignedOrder| {
            VoteStatement {
                committee_id,
                kind,
                round,
                order_digest: order.order.digest(),
            }
            .sign(key)
        };
        for account in self.accounts.values_mut() {
            if let Some((order, signature)) = &mut account.pending {
                *signature = sign(VoteKind::Prepare, 0, order);
            }
            if let Some((round, order, signature)) = &mut account.prepared {
                *signature = sign(VoteKind::Prepare, *round, order);
            }
            if let Some((certificate, signature)) = &mut account.lock {
                *signature = sign(VoteKind::Commit, certificate.round, &certificate.order);
            }
        }
    }

    /// Records this shard's vote; refuses if the account moved on since the vote was signed.
    pub fn vote(&mut self, order: &SignedOrder, signature: [u8; SIGNATURE_BYTES]) -> Result<(), Refusal> {
        let account = self
            .accounts
            .get_mut(&order.order.sender)
            .ok_or(Refusal::UnknownAccount)?;
        check_votable(account, order)?;
        if let Some((pending, _)) = &account.pending {
            assert_eq!(pending, order, "a shard votes once per sequence number");
            return Ok(());
        }
        account.pending = Some((order.clone(), signature));
        Ok(())
    }

    /// Settles a checked certificate at the account's next sequence number.
    pub fn confirm(
        &mut self,
        certificate: &Certificate,
        shard_of: impl Fn(&AccountKey) -> ShardIndex,
    ) -> Result<Settled, Refusal> {
        let order = &certificate.order.order;
        let account = self.accounts.entry(order.sender).or_default();
        if order.sequence != account.next_sequence {
            return Err(confirmation_mismatch(account, certificate));
        }
        account.balance -= i128::from(order.amount);
        account.next_sequence += 1;
        account.pending = None;
        account.round = 0;
        account.prepared = None;
        account.lock = None;
        account.confirmed.push(certificate.clone());
        let amount = order.amount;
        match order.recipient {
            Recipient::Core(_) => {
                self.redeemed += u128::from(amount);
                Ok(Settled::ToCore)
            }
            Recipient::Account(recipient) => {
                let shard = shard_of(&recipient);
                if shard == shard_of(&order.sender) {
                    self.accounts.entry(recipient).or_default().balance += i128::from(amount);
                    return Ok(Settled::Here);
                }
                let outbox = self.outbox.entry(shard).or_default();
                outbox.unacked.push_back(Credit {
                    recipient,
                    amount,
                    sender: order.sender,
                    sender_sequence: order.sequence,
                });
                outbox.next_sequence += 1;
                self.credited_out += u128::from(amount);
                Ok(Settled::ToShard(shard, outbox.next_sequence - 1))
            }
        }
    }

    /// The slot at `sequence` of `account`, if it is the account's next one.
    fn slot(&mut self, account: &AccountKey, sequence: u64) -> Result<&mut Account, Refusal> {
        let state = self.accounts.get_mut(account).ok_or(Refusal::UnknownAccount)?;
        if state.next_sequence != sequence {
            return Err(Refusal::WrongSequence {
                expected: state.next_sequence,
                got: sequence,
            });
        }
        Ok(state)
    }

    /// Records a prepare vote of round `round` ≥ 1 (the role checked the justification).
    pub fn prepare(
        &mut self,
        order: &SignedOrder,
        round: u32,
        signature: [u8; SIGNATURE_BYTES],
    ) -> Result<(), Refusal> {
        let account = self.slot(&order.order.sender, order.order.sequence)?;
        check_preparable(account, order, round)?;
        account.round = round;
        account.prepared = Some((round, order.clone(), signature));
        Ok(())
    }

    /// Records a lock and this shard's commit vote on it.
    pub fn lock(&mut self, certificate: &Certificate, signature: [u8; SIGNATURE_BYTES]) -> Result<(), Refusal> {
        let order = &certificate.order.order;
        let account = self.slot(&order.sender, order.sequence)?;
        check_lockable(account, certificate)?;
        account.round = account.round.max(certificate.round);
        if account.lock_round() != Some(certificate.round) {
            account.lock = Some((certificate.clone(), signature));
        }
        Ok(())
    }

    /// Promises to act in no round below `round` for the slot.
    pub fn enter_round(&mut self, account: &AccountKey, sequence: u64, round: u32) -> Result<(), Refusal> {
        let account = self.slot(account, sequence)?;
        check_enterable(account, round)?;
        account.round = round;
        Ok(())
    }

    pub fn fund(&mut self, funding: &Funding) -> Result<(), Refusal> {
        if let Some(known) = self.fundings.get(&funding.id) {
            return match known == funding {
                true => Ok(()),
                false => Err(Refusal::FundingMismatch {
                    id_hex: hex_id(&funding.id),
                }),
            };
        }
        self.fundings.insert(funding.id, *funding);
        self.accounts.entry(funding.account).or_default().balance += i128::from(funding.amount);
        self.funded += u128::from(funding.amount);
        Ok(())
    }

    /// Applies the credits of channel `from` not applied yet; returns how many were new.
    pub fn credit(&mut self, from: ShardIndex, first_sequence: u64, credits: &[Credit]) -> usize {
        let expected = self.inbox.entry(from).or_default();
        if first_sequence > *expected {
            return 0;
        }
        let skip = (*expected - first_sequence) as usize;
        let fresh = credits.get(skip..).unwrap_or_default();
        *expected += fresh.len() as u64;
        for credit in fresh {
            self.accounts.entry(credit.recipient).or_default().balance += i128::from(credit.amount);
            self.credited_in += u128::from(credit.amount);
        }
        fresh.len()
    }

    pub fn acked(&mut self, to: ShardIndex, through: u64) {
        let outbox = self.outbox.entry(to).or_default();
        let through = through.min(outbox.next_sequence);
        while outbox.acked_through() < through {
            outbox.unacked.pop_front();
        }
    }

    /// The invariants that protect money, checked after recovery and (debug) every round.
    pub fn check(&self) -> Result<(), StateError> {
        let mut balances: i128 = 0;
        for (key, account) in &self.accounts {
            balances += account.balance;
            if account.confirmed.len() as u64 != account.next_sequence {
                return Err(StateError::Inconsistent(format!(
                    "account {key:?}: {} certificates for next sequence {}",
                    account.confirmed.len(),
                    account.next_sequence
                )));
            }
            for (sequence, certificate) in account.confirmed.iter().enumerate() {
                let order = &certificate.order.order;
                if order.sender != *key || order.sequence != sequence as u64 {
                    return Err(StateError::Inconsistent(format!(
                        "account {key:?}: certificate {sequence} is for another account or sequence"
                    )));
                }
            }
            let slot_orders = account
                .pending
                .iter()
                .map(|(order, _)| order)
                .chain(account.prepared.iter().map(|(_, order, _)| order))
                .chain(account.lock.iter().map(|(certificate, _)| &certificate.order));
            for order in slot_orders {
                if order.order.sequence != account.next_sequence || order.order.sender != *key {
                    return Err(StateError::Inconsistent(format!(
                        "account {key:?}: a pending, prepared or locked order is not for the next sequence number"
                    )));
                }
            }
            let highest_round = account.prepared.iter().map(|(r, ..)| *r).chain(account.lock_round());
            if highest_round.max().is_some_and(|r| r > account.round) {
                return Err(StateError::Inconsistent(format!(
                    "account {key:?}: voted in a round above the round entered"
                )));
            }
        }
        let into = i128::try_from(self.funded + self.credited_in)
            .map_err(|_| StateError::Inconsistent("books overflow".into()))?;
        let out = i128::try_from(self.credited_out + self.redeemed)
            .map_err(|_| StateError::Inconsistent("books overflow".into()))?;
        if balances != into - out {
            return Err(StateError::Inconsistent(format!(
                "balances sum to {balances}, the books to {}",
                into - out
            )));
        }
        let funded: u128 = self.fundings.values().map(|f| u128::from(f.amount)).sum();
        if funded != self.funded {
            return Err(StateError::Inconsistent(format!(
                "fundings sum to {funded}, the books say {}",
                self.funded
            )));
        }
        Ok(())
    }

    pub fn encode_to(&self, out: &mut Vec<u8>) {
        put_u32(out, self.accounts.len() as u32);
        for (key, account) in &self.accounts {
            out.extend_from_slice(&key.0);
            out.extend_from_slice(&account.balance.to_le_bytes());
            put_u64(out, account.next_sequence);
            match &account.pending {
                None => out.push(0),
                Some((order, signature)) => {
                    out.push(1);
                    order.encode_to(out);
                    out.extend_from_slice(signature);
                }
            }
            put_u32(out, account.confirmed.len() as u32);
            for certificate in &account.confirmed {
                certificate.encode_to(out);
            }
            put_u32(out, account.round);
            match &account.prepared {
                None => out.push(0),
                Some((round, order, signature)) => {
                    out.push(1);
                    put_u32(out, *round);
                    order.encode_to(out);
                    out.extend_from_slice(signature);
                }
            }
            match &account.lock {
                None => out.push(0),
                Some((certificate, signature)) => {
                    out.push(1);
                    certificate.encode_to(out);
                    out.extend_from_slice(signature);
                }
            }
        }
        put_u32(out, self.fundings.len() as u32);
        for funding in self.fundings.values() {
            funding.encode_to(out);
        }
        put_u32(out, self.inbox.len() as u32);
        for (from, next) in &self.inbox {
            put_u32(out, *from);
            put_u64(out, *next);
        }
        put_u32(out, self.outbox.len() as u32);
        for (to, outbox) in &self.outbox {
            put_u32(out, *to);
            put_u64(out, outbox.next_sequence);
            let unacked: Vec<Credit> = outbox.unacked.iter().copied().collect();
            put_u32(out, unacked.len() as u32);
            for credit in &unacked {
                credit.encode_to(out);
            }
        }
        for total in [self.funded, self.credited_in, self.credited_out, self.redeemed] {
            out.extend_from_slice(&total.to_le_bytes());
        }
        // Absent while the shard is in its first epoch, so snapshots written before epochs
        // existed read unchanged (and a present count is never 0: one encoding per state).
        if !self.records.is_empty() {
            put_u32(out, self.records.len() as u32);
            for record in &self.records {
                record.encode_to(out);
            }
            if let Some(epoch) = self.holder_since {
                put_u64(out, epoch);
            }
        }
    }

    /// Reads a snapshot written by [`ShardState::encode_to`]; a snapshot is the shard's own,
    /// but its counts are still bounded by the bytes present.
    pub fn decode(bytes: &[u8]) -> Result<ShardState, DecodeError> {
        let mut reader = Reader::new(bytes);
        let mut state = ShardState::default();
        let accounts = reader.read_u32_count("snapshot accounts", u64::MAX, 32 + 16 + 8 + 1 + 4 + 4 + 1 + 1)?;
        for _ in 0..accounts {
            let key = AccountKey(reader.read_array("snapshot account key")?);
            let balance = i128::from_le_bytes(reader.read_array("snapshot balance")?);
            let next_sequence = reader.read_u64("snapshot next sequence")?;
            let pending = match reader.read_bool("snapshot pending")? {
                false => None,
                true => Some((
                    SignedOrder::decode_from(&mut reader)?,
                    reader.read_array("snapshot vote")?,
                )),
            };
            let count = reader.read_u32_count("snapshot certificates", u64::MAX, 100)?;
            let confirmed = (0..count)
                .map(|_| Certificate::decode_from(&mut reader))
                .collect::<Result<_, _>>()?;
            let round = reader.read_u32("snapshot round")?;
            let prepared = match reader.read_bool("snapshot prepared")? {
                false => None,
                true => Some((
                    reader.read_u32("snapshot prepared round")?,
                    SignedOrder::decode_from(&mut reader)?,
                    reader.read_array("snapshot prepare vote")?,
                )),
            };
            let lock = match reader.read_bool("snapshot lock")? {
                false => None,
                true => Some((
                    Certificate::decode_from(&mut reader)?,
                    reader.read_array("snapshot commit vote")?,
                )),
            };
            ascending(
                "snapshot accounts",
                state.accounts.last_key_value().map(|(k, _)| k),
                &key,
            )?;
            state.accounts.insert(
                key,
                Account {
                    balance,
                    next_sequence,
                    pending,
                    confirmed,
                    round,
                    prepared,
                    lock,
                },
            );
        }
        let fundings = reader.read_u32_count("snapshot fundings", u64::MAX, 72)?;
        for _ in 0..fundings {
            let funding = Funding::decode_from(&mut reader)?;
            ascending(
                "snapshot fundings",
                state.fundings.last_key_value().map(|(k, _)| k),
                &funding.id,
            )?;
            state.fundings.insert(funding.id, funding);
        }
        let inbox = reader.read_u32_count("snapshot inbox", u64::MAX, 12)?;
        for _ in 0..inbox {
            let from = reader.read_u32("inbox shard")?;
            ascending("snapshot inbox", state.inbox.last_key_value().map(|(k, _)| k), &from)?;
            state.inbox.insert(from, reader.read_u64("inbox next")?);
        }
        let outbox = reader.read_u32_count("snapshot outbox", u64::MAX, 16)?;
        for _ in 0..outbox {
            let to = reader.read_u32("outbox shard")?;
            let next_sequence = reader.read_u64("outbox next")?;
            ascending("snapshot outbox", state.outbox.last_key_value().map(|(k, _)| k), &to)?;
            let unacked = decode_unbounded_credits(&mut reader)?;
            state.outbox.insert(
                to,
                Outbox {
                    next_sequence,
                    unacked: unacked.into(),
                },
            );
        }
        let mut totals = [0u128; 4];
        for total in &mut totals {
            *total = u128::from_le_bytes(reader.read_array("snapshot total")?);
        }
        [state.funded, state.credited_in, state.credited_out, state.redeemed] = totals;
        (state.records, state.holder_since) = decode_epochs(&mut reader)?;
        reader.finish()?;
        Ok(state)
    }
}

/// The fewest bytes a committee record takes: version, previous id, a committee of one key
/// (13 + 32), and a signature count.
const RECORD_BYTES_MIN: usize = 1 + 32 + 13 + 32 + 4;

/// The committee records at a snapshot's end (absent in the first epoch, never an empty
/// count), then the epoch of the hand-over, if the state was handed over.
fn decode_epochs(reader: &mut Reader<'_>) -> Result<(Vec<CommitteeRecord>, Option<u64>), DecodeError> {
    if reader.remaining() == 0 {
        return Ok((Vec::new(), None));
    }
    let records = decode_records(reader)?;
    let holder_since = match reader.remaining() {
        0 => None,
        _ => Some(reader.read_u64("snapshot holder since")?),
    };
    Ok((records, holder_since))
}

fn decode_records(reader: &mut Reader<'_>) -> Result<Vec<CommitteeRecord>, DecodeError> {
    let count = reader.read_u32_count("snapshot epochs", CHAIN_RECORDS_MAX as u64, RECORD_BYTES_MIN)?;
    if count == 0 {
        return Err(DecodeError::NonCanonical {
            what: "snapshot epochs",
            reason: "a shard in its first epoch writes no epoch count",
        });
    }
    (0..count).map(|_| CommitteeRecord::decode_from(reader)).collect()
}

/// Map keys in a snapshot are strictly ascending: one encoding per state.
fn ascending<K: Ord>(what: &'static str, last: Option<&K>, key: &K) -> Result<(), DecodeError> {
    match last {
        Some(last) if last >= key => Err(DecodeError::NonCanonical {
            what,
            reason: "keys must be strictly ascending",
        }),
        _ => Ok(()),
    }
}

/// An outbox may hold more than one message's worth of credits.
fn decode_unbounded_credits(reader: &mut Reader<'_>) -> Result<Vec<Credit>, DecodeError> {
    let count = reader.read_u32_count("outbox credits", u64::MAX, 80)?;
    (0..count).map(|_| Credit::decode_from(reader)).collect()
}

/// FastPay's transfer-order checks against the account (Figure 2), after the signature.
pub(crate) fn check_votable(account: &Account, order: &SignedOrder) -> Result<(), Refusal> {
    if let Some((pending, _)) = &account.pending {
        return match pending == order {
            true => Ok(()),
            false => Err(Refusal::OtherOrderPending {
                sequence: account.next_sequence,
            }),
        };
    }
    if order.order.sequence != account.next_sequence {
        return Err(Refusal::WrongSequence {
            expected: account.next_sequence,
            got: order.order.sequence,
        });
    }
    if account.balance < i128::from(order.order.amount) {
        return Err(Refusal::InsufficientBalance {
            balance: account.balance,
            amount: order.order.amount,
        });
    }
    Ok(())
}

/// Whether a prepare vote in `round` ≥ 1 for `order` is still possible (the justification and
/// the lock rule are the role's checks): not a round already left, and one order per round.
pub(crate) fn check_preparable(account: &Account, order: &SignedOrder, round: u32) -> Result<(), Refusal> {
    if round < account.round {
        return Err(Refusal::RoundPassed { round: account.round });
    }
    match &account.prepared {
        Some((prepared_round, prepared, _)) if *prepared_round == round && prepared != order => {
            Err(Refusal::OtherOrderPending {
                sequence: account.next_sequence,
            })
        }
        _ => Ok(()),
    }
}

/// Whether this shard may commit-vote for a lock: not in a round it left, and never against a
/// higher lock of its own.
pub(crate) fn check_lockable(account: &Account, certificate: &Certificate) -> Result<(), Refusal> {
    if certificate.round < account.round {
        return Err(Refusal::RoundPassed { round: account.round });
    }
    match &account.lock {
        Some((locked, _)) if locked.round > certificate.round => Err(Refusal::RoundPassed { round: account.round }),
        Some((locked, _)) if locked.round == certificate.round && locked.order != certificate.order => {
            Err(Refusal::LockedOnOther {
                lock_round: locked.round,
            })
        }
        _ => Ok(()),
    }
}

/// Whether this shard may sign a round change for `round`: a round above every round it acted
/// in, so that what it reports (round 0's prepare and its highest lock) stays true for good.
pub(crate) fn check_enterable(account: &Account, round: u32) -> Result<(), Refusal> {
    let acted = account.prepared.iter().map(|(r, ..)| *r).chain(account.lock_round());
    match acted.max() {
        Some(acted) if acted >= round => Err(Refusal::RoundPassed { round: acted }),
        _ if round < account.round || round == 0 => Err(Refusal::RoundPassed { round: account.round }),
        _ => Ok(()),
    }
}

/// Why a certificate cannot settle now: confirmed already (the same: fine for the caller to
/// hear, a different one: conflict), or earlier ones missing.
pub(crate) fn confirmation_mismatch(account: &Account, certificate: &Certificate) -> Refusal {
    let sequence = certificate.order.order.sequence;
    match account.confirmed.get(sequence as usize) {
        Some(_) => Refusal::ConflictingCertificate { sequence },
        None => Refusal::MissingEarlier {
            next: account.next_sequence,
            got: sequence,
        },
    }
}

pub(crate) fn hex_id(id: &[u8; 32]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}
