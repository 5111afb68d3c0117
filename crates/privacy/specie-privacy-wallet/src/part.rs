//! The privacy levels' part of a wallet ([`PrivacyPart`]): what the core wallet keeps for them
//! as a [`WalletPart`], and the life cycle its notes share with the coins ([`CoinState`]).

use std::any::Any;
use std::collections::BTreeMap;

use serde_json::{Map, Value};
use specie_private_transactions::unlinkable::serial_uhs_id;
use specie_transaction::{OutPoint, Txid, UhsId};
use specie_wallet::{Balance, CoinState, Settled, Wallet, WalletPart};

use crate::anonymous::{AnonymousNote, EnrolledIdentity, Enrolling};
use crate::anonymous_payment::AnonymousPaymentString;
use crate::confidential_payment::ConfidentialPaymentString;
use crate::notes::Note;
use crate::unlinkable::UnlinkableToken;
use crate::unlinkable_payment::UnlinkablePaymentString;

/// The part's name, and the name of its kind.
pub const PRIVACY_PART: &str = "privacy";

/// The privacy levels' state in a wallet: confidential notes, the enrolled identity (or an
/// enrolment under way), anonymous notes, and the payee's strings of pending private payments.
#[derive(Clone, Debug, Default)]
pub struct PrivacyPart {
    /// Confidential outputs this wallet can spend, with their openings.
    pub(crate) notes: BTreeMap<OutPoint, Note>,
    /// The payee's string of each pending confidential payment, kept until the payment is
    /// resolved so that `sync` can hand it over if the first answer came too late.
    pub(crate) sent_confidential: BTreeMap<Txid, ConfidentialPaymentString>,
    /// The enrolled identity of the anonymous level.
    pub(crate) identity: Option<EnrolledIdentity>,
    /// An enrolment under way.
    pub(crate) enrolling: Option<Enrolling>,
    /// Anonymous outputs this wallet can spend.
    pub(crate) anonymous_notes: BTreeMap<OutPoint, AnonymousNote>,
    /// The payee's string of each pending anonymous payment.
    pub(crate) sent_anonymous: BTreeMap<Txid, AnonymousPaymentString>,
    /// Unlinkable tokens this wallet holds (spendable once certified).
    pub(crate) unlinkable_tokens: BTreeMap<OutPoint, UnlinkableToken>,
    /// The payee's string of each pending unlinkable payment.
    pub(crate) sent_unlinkable: BTreeMap<Txid, UnlinkablePaymentString>,
}

/// The privacy part of `wallet`, if it holds one.
pub(crate) fn privacy(wallet: &Wallet) -> Option<&PrivacyPart> {
    wallet.part::<PrivacyPart>()
}

/// The privacy part of `wallet`, to change; an empty one is added if it holds none (it writes
/// nothing to the file while it stays empty).
pub(crate) fn privacy_mut(wallet: &mut Wallet) -> &mut PrivacyPart {
    if wallet.part::<PrivacyPart>().is_none() {
        wallet.insert_part(Box::new(PrivacyPart::default()));
    }
    wallet.part_mut::<PrivacyPart>().expect("inserted above")
}

/// A note of either private level (confidential or anonymous): what the coins' life cycle needs.
pub(crate) trait HeldNote {
    fn value(&self) -> u64;
    fn state(&self) -> CoinState;
    fn set_state(&mut self, state: CoinState);
    fn uhs_id(&self) -> UhsId;
}

/// The notes' values by state.
pub(crate) fn balance_of<'a, N: HeldNote + 'a>(notes: impl Iterator<Item = &'a N>) -> Balance {
    let mut balance = Balance::default();
    for note in notes {
        let bucket = match note.state() {
            CoinState::Spendable => &mut balance.spendable,
            CoinState::PendingSpend { .. } => &mut balance.pending_out,
            CoinState::PendingReceive { .. } => &mut balance.pending_in,
            CoinState::Missing => &mut balance.missing,
        };
        *bucket = bucket.saturating_add(note.value());
    }
    balance
}

/// Applies the fate of `txid` to `notes`, as `on_confirmed` and `on_rejected` do to the coins.
pub(crate) fn settle<N: HeldNote>(
    notes: &mut BTreeMap<OutPoint, N>,
    txid: &Txid,
    confirmed: bool,
    settled: &mut Settled,
) {
    notes.retain(|_, note| match note.state() {
        CoinState::PendingSpend { txid: spender } if spender == *txid => {
            if confirmed {
                settled.spent = settled.spent.saturating_add(note.value());
                return false;
            }
            note.set_state(CoinState::Spendable);
            settled.released = settled.released.saturating_add(note.value());
            true
        }
        CoinState::PendingReceive { txid: creator } if creator == *txid => {
            if confirmed {
                note.set_state(CoinState::Spendable);
                settled.received = settled.received.saturating_add(note.value());
                return true;
            }
            settled.dropped = settled.dropped.saturating_add(note.value());
            false
        }
        _ => true,
    });
}

/// Marks the spendable ones of `outpoints` missing ([`CoinState::Missing`]); returns their value.
pub(crate) fn mark_missing<N: HeldNote>(held: &mut BTreeMap<OutPoint, N>, outpoints: &[OutPoint]) -> u64 {
    let mut marked = 0u64;
    for outpoint in outpoints {
        if let Some(note) = (held.get_mut(outpoint)).filter(|note| note.state() == CoinState::Spendable) {
            note.set_state(CoinState::Missing);
            marked = marked.saturating_add(note.value());
        }
    }
    marked
}

/// Makes the missing ones of `outpoints` spendable again; returns their value.
pub(crate) fn restore_missing<N: HeldNote>(held: &mut BTreeMap<OutPoint, N>, outpoints: &[OutPoint]) -> u64 {
    let mut restored = 0u64;
    for outpoint in outpoints {
        if let Some(note) = held.get_mut(outpoint).filter(|note| note.state() == CoinState::Missing) {
            note.set_state(CoinState::Spendable);
            restored = restored.saturating_add(note.value());
        }
    }
    restored
}

/// Outpoint, UHS id and value of the notes in `state`.
fn in_state<N: HeldNote>(held: &BTreeMap<OutPoint, N>, state: CoinState) -> Vec<(OutPoint, UhsId, u64)> {
    (held.iter())
        .filter(|(_, note)| note.state() == state)
        .map(|(outpoint, note)| (*outpoint, note.uhs_id(), note.value()))
        .collect()
}

/// Drops the missing notes; adds how many and their value to `forgotten`.
fn forget<N: HeldNote>(held: &mut BTreeMap<OutPoint, N>, forgotten: &mut (usize, u64)) {
    held.retain(|_, note| {
        note.state() != CoinState::Missing || {
            forgotten.0 += 1;
            forgotten.1 = forgotten.1.saturating_add(note.value());
            false
        }
    });
}

impl WalletPart for PrivacyPart {
    fn name(&self) -> &'static str {
        PRIVACY_PART
    }

    /// The payee's string is no longer needed once the transaction is resolved.
    fn settle(&mut self, txid: &Txid, confirmed: bool, settled: &mut Settled) {
        self.sent_confidential.remove(txid);
        settle(&mut self.notes, txid, confirmed, settled);
        self.sent_anonymous.remove(txid);
        settle(&mut self.anonymous_notes, txid, confirmed, settled);
        self.sent_unlinkable.remove(txid);
        settle(&mut self.unlinkable_tokens, txid, confirmed, settled);
    }

    fn spendable(&self) -> Vec<(OutPoint, UhsId, u64)> {
        let mut spendable = in_state(&self.notes, CoinState::Spendable);
        spendable.extend(in_state(&self.anonymous_notes, CoinState::Spendable));
        spendable
    }

    fn missing(&self) -> Vec<(OutPoint, UhsId, u64)> {
        let mut missing = in_state(&self.notes, CoinState::Missing);
        missing.extend(in_state(&self.anonymous_notes, CoinState::Missing));
        missing
    }

    /// A token's marker is its serial number's id, which only the wallet's identity computes.
    fn spent_markers(&self) -> Vec<(OutPoint, UhsId, u64)> {
        let Some(enrolled) = &self.identity else {
            return Vec::new();
        };
        (self.unlinkable_tokens.iter())
            .filter(|(_, token)| token.state == CoinState::Spendable)
            .filter_map(|(outpoint, token)| {
                let serial = token.payment.opening.serial_number(&enrolled.identity)?;
                Some((*outpoint, serial_uhs_id(&serial), token.value()))
            })
            .collect()
    }

    fn mark_missing(&mut self, outpoints: &[OutPoint]) -> u64 {
        let notes = mark_missing(&mut self.notes, outpoints);
        let anonymous = mark_missing(&mut self.anonymous_notes, outpoints);
        (notes.saturating_add(anonymous)).saturating_add(mark_missing(&mut self.unlinkable_tokens, outpoints))
    }

    fn restore_missing(&mut self, outpoints: &[OutPoint]) -> u64 {
        let notes = restore_missing(&mut self.notes, outpoints);
        notes.saturating_add(restore_missing(&mut self.anonymous_notes, outpoints))
    }

    fn forget_missing(&mut self) -> (usize, u64) {
        let mut forgotten = (0usize, 0u64);
        forget(&mut self.notes, &mut forgotten);
        forget(&mut self.anonymous_notes, &mut forgotten);
        forget(&mut self.unlinkable_tokens, &mut forgotten);
        forgotten
    }

    /// A note waiting with no pending transaction of the wallet's own is an import.
    fn holds_any(&self) -> bool {
        let held = |state: CoinState| !matches!(state, CoinState::PendingReceive { .. });
        self.notes.values().any(|note| held(note.state))
            || self.anonymous_notes.values().any(|note| held(note.state))
            || self.unlinkable_tokens.values().any(|token| held(token.state))
    }

    fn payment_string_for(&self, txid: &Txid) -> Option<String> {
        let confidential = self.sent_confidential.get(txid).map(ConfidentialPaymentString::encode);
        (confidential.or_else(|| self.sent_anonymous.get(txid).map(AnonymousPaymentString::encode)))
            .or_else(|| self.sent_unlinkable.get(txid).map(UnlinkablePaymentString::encode))
    }

    fn to_fields(&self) -> Map<String, Value> {
        crate::file::to_fields(self)
    }

    fn clone_box(&self) -> Box<dyn WalletPart> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
