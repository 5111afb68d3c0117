//! Confidential notes: outputs of confidential transactions (docs/privacy.md) that this wallet
//! can spend. A note's value is hidden in a Pedersen commitment, so besides where the output is
//! the wallet must keep its opening (value and blinding): without it the note cannot be spent
//! (the proof needs it) and its value is unknown even to its owner.
//!
//! * [`ConfidentialWallet::build_shield`]: transparent coins → one note of this wallet (change in clear).
//! * [`ConfidentialWallet::build_confidential_payment`]: notes → a note for the payee and a change note,
//!   two in and two out whenever the wallet holds two notes, so that an observer cannot tell
//!   payments apart by their shape. The payee needs the [`ConfidentialPaymentString`].
//! * [`ConfidentialWallet::build_unshield`]: notes → a transparent coin (and a change note, which a
//!   confidential transaction must have, of value 0 when nothing is left).
//! * [`receive_confidential`]: accepts a payee's note only once the node holds its UHS id,
//!   which commits to the owner and the opening's commitment.
//!
//! Notes follow the coins' life cycle ([`CoinState`]): inputs are `PendingSpend` and new notes
//! `PendingReceive` until the transaction is resolved.

use std::fmt;

use rand::{CryptoRng, Rng, RngCore};
use secp256k1::Keypair;
use specie_confidential::{AuditorKey, Opening};
use specie_private_transactions::{ConfidentialInput, ConfidentialPlan, ConfidentialTransaction};
use specie_transaction::{Address, NonceMode, OutPoint, Output, SpecieTransaction, Txid, UhsId};

use specie_wallet::{
    select_coins, Balance, CoinState, Ledger, PendingKind, SelectionError, Wallet, WalletError, WalletKey,
};

use crate::confidential_payment::ConfidentialPaymentString;
use crate::error::PrivacyError;
use crate::part::{balance_of, privacy, privacy_mut, HeldNote};

/// Notes one confidential transaction may spend: the proof's limit.
pub const NOTE_INPUTS_MAX: usize = specie_confidential::INPUTS_MAX;

/// A confidential output this wallet can spend (or will, once confirmed).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Note {
    /// Where the output is, its owner and its commitment: what a transaction spending it names.
    pub input: ConfidentialInput,
    pub opening: Opening,
    pub state: CoinState,
}

impl Note {
    pub fn uhs_id(&self) -> UhsId {
        self.input.uhs_id()
    }

    pub fn value(&self) -> u64 {
        self.opening.value
    }

    pub fn outpoint(&self) -> OutPoint {
        self.input.prevout
    }
}

impl fmt::Debug for Note {
    /// Leaves out the opening: wallets end up in logs and bug reports, and a note's value is
    /// what a confidential payment hides.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Note")
            .field("outpoint", &self.input.prevout)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// A shielding built by [`ConfidentialWallet::build_shield`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shielded {
    pub txid: Txid,
    pub amount: u64,
    /// Transparent change back to this wallet.
    pub change: u64,
}

/// A confidential payment built by [`ConfidentialWallet::build_confidential_payment`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfidentialPayment {
    pub txid: Txid,
    pub to: Address,
    pub amount: u64,
    /// Value of the change note back to this wallet.
    pub change: u64,
    pub inputs: usize,
    /// What the payee needs; hand it over once the payment is confirmed.
    pub payment_string: ConfidentialPaymentString,
}

/// An unshielding built by [`ConfidentialWallet::build_unshield`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unshielded {
    pub txid: Txid,
    pub amount: u64,
    /// Value of the change note back to this wallet.
    pub change: u64,
}

/// What [`receive_confidential`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceivedNote {
    pub value: u64,
    /// The wallet already held this note: nothing was added.
    pub already_known: bool,
}

/// Parses auditor keys given as hex (as `GET /v1/info` lists them and `--auditor` takes them).
pub fn parse_auditors(keys: &[String]) -> Result<Vec<AuditorKey>, PrivacyError> {
    keys.iter()
        .map(|text| {
            let bytes: Option<[u8; 32]> = hex::decode(text.trim()).ok().and_then(|bytes| bytes.try_into().ok());
            bytes
                .and_then(AuditorKey::from_bytes)
                .ok_or_else(|| PrivacyError::BadAuditor { text: text.clone() })
        })
        .collect()
}

/// Checks the payee's note of `payment` against the node and keeps it: refused unless it pays
/// one of this wallet's keys and the node holds its UHS id (which commits to the outpoint, the
/// owner and the commitment the opening makes, so a changed value or blinding, or another
/// output, names an id the node does not hold). Receiving a note twice adds it once.
pub fn receive_confidential<L: Ledger + ?Sized>(
    wallet: &mut Wallet,
    ledger: &L,
    payment: &ConfidentialPaymentString,
) -> Result<ReceivedNote, PrivacyError> {
    wallet.check_confidential_payment(payment)?;
    let present = ledger.query_uhs(&[payment.uhs_id()])?;
    wallet.accept_note(payment, present.first().copied().unwrap_or(false))
}

/// The confidential level of a wallet (docs/privacy.md): its notes, kept in the wallet's
/// [`crate::PrivacyPart`], and the transactions that shield coins into notes, pay from notes and
/// unshield them.
pub trait ConfidentialWallet {
    /// The confidential notes, by outpoint.
    fn notes(&self) -> impl Iterator<Item = &Note>;

    /// The notes' values by state, as [`Wallet::balance`] sums the coins.
    fn confidential_balance(&self) -> Balance;

    /// Builds a shielding: `amount` of this wallet's coins into one note of a fresh key of this
    /// wallet, readable by `auditors`, any excess back as a transparent coin.
    fn build_shield(
        &mut self,
        amount: u64,
        auditors: &[AuditorKey],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Shielded), PrivacyError>;

    /// Builds a confidential payment of `amount` to `to` from this wallet's notes, with the
    /// change as a note of a fresh key; the two outputs in random order, so that their position
    /// tells nothing.
    fn build_confidential_payment(
        &mut self,
        to: &Address,
        amount: u64,
        auditors: &[AuditorKey],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, ConfidentialPayment), PrivacyError>;

    /// Builds an unshielding: `amount` of this wallet's notes back into a transparent coin of a
    /// fresh key, the rest as a change note (of value 0 if nothing is left: a confidential
    /// transaction has at least one confidential output).
    fn build_unshield(
        &mut self,
        amount: u64,
        auditors: &[AuditorKey],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Unshielded), PrivacyError>;

    /// The payee's string of pending confidential payment `txid`, for the CLI to hand over
    /// once `sync` learns the payment was confirmed.
    fn confidential_payment_string_for(&self, txid: &Txid) -> Option<ConfidentialPaymentString>;

    /// Refuses a payment whose output pays none of this wallet's keys.
    fn check_confidential_payment(&self, payment: &ConfidentialPaymentString) -> Result<(), PrivacyError>;

    /// Keeps the note of `payment` as spendable, if `present_at_node` (the caller asked the node
    /// for its UHS id); a note already held is not added twice.
    fn accept_note(
        &mut self,
        payment: &ConfidentialPaymentString,
        present_at_node: bool,
    ) -> Result<ReceivedNote, PrivacyError>;

    /// Marks missing the spendable notes the node no longer holds (spent from another copy of
    /// this wallet); a later `sync` restores any the node shows again. Returns their value.
    fn mark_missing_notes(&mut self, outpoints: &[OutPoint]) -> u64;
}

impl ConfidentialWallet for Wallet {
    fn notes(&self) -> impl Iterator<Item = &Note> {
        privacy(self).into_iter().flat_map(|part| part.notes.values())
    }

    fn confidential_balance(&self) -> Balance {
        balance_of(self.notes())
    }

    fn build_shield(
        &mut self,
        amount: u64,
        auditors: &[AuditorKey],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Shielded), PrivacyError> {
        let spending = self.spend(amount, rng)?;
        let note_key = WalletKey::random(rng)?;
        let plan = ConfidentialPlan {
            transparent_inputs: spending.inputs,
            confidential_inputs: vec![],
            outputs: vec![(note_key.commitment(), amount)],
            transparent_outputs: spending.change_output,
            auditors: auditors.to_vec(),
        };
        let (tx, openings) = plan.prove_and_sign(&spending.owners, NonceMode::Randomized, rng)?;
        self.add_key(note_key);
        if let Some(key) = spending.change_key {
            self.add_key(key);
        }
        let (tx, txid) = record_confidential(self, tx, &openings, PendingKind::Shield { amount })?;
        let change = spending.change;
        Ok((tx, Shielded { txid, amount, change }))
    }

    fn build_confidential_payment(
        &mut self,
        to: &Address,
        amount: u64,
        auditors: &[AuditorKey],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, ConfidentialPayment), PrivacyError> {
        self.check_pending_room()?;
        let (notes, total) = select_notes(self, amount)?;
        let change_key = WalletKey::random(rng)?;
        let payee = (to.witness_program_commitment(), amount);
        let mut outputs = vec![payee, (change_key.commitment(), total - amount)];
        if rng.gen_bool(0.5) {
            outputs.swap(0, 1);
        }
        let payee_position = if outputs[0] == payee { 0 } else { 1 };
        let plan = ConfidentialPlan {
            transparent_inputs: vec![],
            confidential_inputs: notes.iter().map(|note| (note.input, note.opening)).collect(),
            outputs,
            transparent_outputs: vec![],
            auditors: auditors.to_vec(),
        };
        let (tx, openings) = plan.prove_and_sign(&keypairs_for_notes(self, &notes)?, NonceMode::Randomized, rng)?;
        self.add_key(change_key);
        let created = tx.created_confidential_outputs()[payee_position];
        let payment_string = ConfidentialPaymentString {
            txid: created.outpoint.txid,
            index: created.outpoint.index,
            owner: created.owner,
            opening: openings[payee_position],
        };
        let kind = PendingKind::ConfidentialPayment { to: *to, amount };
        let (tx, txid) = record_confidential(self, tx, &openings, kind)?;
        privacy_mut(self).sent_confidential.insert(txid, payment_string);
        let payment = ConfidentialPayment {
            txid,
            to: *to,
            amount,
            change: total - amount,
            inputs: notes.len(),
            payment_string,
        };
        Ok((tx, payment))
    }

    fn build_unshield(
        &mut self,
        amount: u64,
        auditors: &[AuditorKey],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Unshielded), PrivacyError> {
        self.check_pending_room()?;
        let (notes, total) = select_notes(self, amount)?;
        let coin_key = WalletKey::random(rng)?;
        let change_key = WalletKey::random(rng)?;
        let plan = ConfidentialPlan {
            transparent_inputs: vec![],
            confidential_inputs: notes.iter().map(|note| (note.input, note.opening)).collect(),
            outputs: vec![(change_key.commitment(), total - amount)],
            transparent_outputs: vec![Output {
                witness_program_commitment: coin_key.commitment(),
                value: amount,
            }],
            auditors: auditors.to_vec(),
        };
        let (tx, openings) = plan.prove_and_sign(&keypairs_for_notes(self, &notes)?, NonceMode::Randomized, rng)?;
        self.add_key(coin_key);
        self.add_key(change_key);
        let (tx, txid) = record_confidential(self, tx, &openings, PendingKind::Unshield { amount })?;
        let change = total - amount;
        Ok((tx, Unshielded { txid, amount, change }))
    }

    fn confidential_payment_string_for(&self, txid: &Txid) -> Option<ConfidentialPaymentString> {
        privacy(self)?.sent_confidential.get(txid).copied()
    }

    fn check_confidential_payment(&self, payment: &ConfidentialPaymentString) -> Result<(), PrivacyError> {
        if !self.owns(&payment.owner) {
            return Err(PrivacyError::ConfidentialNotOurs {
                addresses: self.addresses().len(),
            });
        }
        Ok(())
    }

    fn accept_note(
        &mut self,
        payment: &ConfidentialPaymentString,
        present_at_node: bool,
    ) -> Result<ReceivedNote, PrivacyError> {
        self.check_confidential_payment(payment)?;
        let value = payment.opening.value;
        if privacy(self).is_some_and(|part| part.notes.contains_key(&payment.outpoint())) {
            return Ok(ReceivedNote {
                value,
                already_known: true,
            });
        }
        if !present_at_node {
            return Err(PrivacyError::NoteNotAtNode {
                txid: payment.txid,
                index: payment.index,
            });
        }
        let note = Note {
            input: payment.to_input(),
            opening: payment.opening,
            state: CoinState::Spendable,
        };
        privacy_mut(self).notes.insert(payment.outpoint(), note);
        Ok(ReceivedNote {
            value,
            already_known: false,
        })
    }

    fn mark_missing_notes(&mut self, outpoints: &[OutPoint]) -> u64 {
        match self.part_mut::<crate::PrivacyPart>() {
            Some(part) => crate::part::mark_missing(&mut part.notes, outpoints),
            None => 0,
        }
    }
}

/// Spendable notes worth at least `amount`: the fewest that cover it, then, if that is one and
/// the wallet holds another, the smallest other one too, so that payments keep the common
/// two-in shape (and small notes get merged rather than pile up).
fn select_notes(wallet: &Wallet, amount: u64) -> Result<(Vec<Note>, u64), PrivacyError> {
    if amount == 0 {
        return Err(WalletError::ZeroAmount.into());
    }
    let candidates: Vec<Note> = (wallet.notes())
        .filter(|note| note.state == CoinState::Spendable && note.value() > 0)
        .copied()
        .collect();
    let values: Vec<u64> = candidates.iter().map(Note::value).collect();
    let unit = wallet.hrp().to_owned();
    let selection = select_coins(&values, amount, NOTE_INPUTS_MAX).map_err(|error| match error {
        SelectionError::Insufficient { .. } => PrivacyError::InsufficientNotes {
            confidential: wallet.confidential_balance().spendable,
            needed: amount,
            unit: wallet.hrp().to_owned(),
        },
        other => WalletError::from_selection(other, unit, || unreachable!("not an insufficiency")).into(),
    })?;
    let (chosen, total) = second_input(selection.chosen, selection.total, &values);
    Ok((chosen.iter().map(|&index| candidates[index]).collect(), total))
}

/// `chosen` (worth `total`) and, if it is one note and there is another, the smallest other one
/// of `values` too, while the sum fits.
pub(crate) fn second_input(mut chosen: Vec<usize>, mut total: u64, values: &[u64]) -> (Vec<usize>, u64) {
    if chosen.len() == 1 {
        let other = (0..values.len())
            .filter(|index| !chosen.contains(index))
            .min_by_key(|&index| values[index]);
        if let Some(index) = other.filter(|&index| total.checked_add(values[index]).is_some()) {
            chosen.push(index);
            total += values[index];
        }
    }
    (chosen, total)
}

fn keypairs_for_notes(wallet: &Wallet, notes: &[Note]) -> Result<Vec<Keypair>, PrivacyError> {
    notes
        .iter()
        .enumerate()
        .map(|(index, note)| {
            (wallet.keypair_for_commitment(&note.input.owner))
                .ok_or(WalletError::Sign(specie_transaction::SignError::KeyMismatch { index }).into())
        })
        .collect()
}

/// Records a built confidential transaction: its notes become `PendingSpend`, its confidential
/// outputs that pay this wallet new `PendingReceive` notes (value-0 change is not kept: it can
/// pay nothing), and its transparent side is recorded as for any transaction.
fn record_confidential(
    wallet: &mut Wallet,
    tx: ConfidentialTransaction,
    openings: &[Opening],
    kind: PendingKind,
) -> Result<(SpecieTransaction, Txid), PrivacyError> {
    let txid = tx.txid();
    // Checked before the notes change: then nothing changes if it is refused.
    wallet.check_pending_room()?;
    let ours: Vec<bool> = (tx.created_confidential_outputs().iter())
        .map(|created| wallet.owns(&created.owner))
        .collect();
    let part = privacy_mut(wallet);
    for input in &tx.confidential_inputs {
        if let Some(note) = part.notes.get_mut(&input.prevout) {
            debug_assert_eq!(note.state, CoinState::Spendable, "only spendable notes are selected");
            note.state = CoinState::PendingSpend { txid };
        }
    }
    let created = tx.created_confidential_outputs();
    for ((created, opening), ours) in created.iter().zip(openings).zip(ours) {
        if ours && opening.value > 0 {
            let note = Note {
                input: created.to_input(),
                opening: *opening,
                state: CoinState::PendingReceive { txid },
            };
            part.notes.insert(created.outpoint, note);
        }
    }
    let tx = SpecieTransaction::from(tx);
    wallet.record_pending(tx.clone(), kind)?;
    Ok((tx, txid))
}

impl HeldNote for Note {
    fn value(&self) -> u64 {
        self.opening.value
    }
    fn state(&self) -> CoinState {
        self.state
    }
    fn set_state(&mut self, state: CoinState) {
        self.state = state;
    }
    fn uhs_id(&self) -> UhsId {
        self.input.uhs_id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{check_valid, funded_wallet, memory_ledger, rng};
    use specie_wallet::testkit::MemoryLedger;
    use specie_wallet::{Ledger, SubmitStatus, WalletFile};

    fn confirm(wallet: &mut Wallet, ledger: &MemoryLedger, tx: &SpecieTransaction) {
        let status = ledger.submit(std::slice::from_ref(tx), 1000).unwrap().remove(0).status;
        assert_eq!(status, SubmitStatus::Confirmed);
        wallet.on_confirmed(&tx.txid()).unwrap();
    }

    /// The ledger holds the coins `funded_wallet` made up, as if they had been confirmed.
    fn ledger_for(wallet: &Wallet) -> MemoryLedger {
        let ledger = memory_ledger(vec![]);
        ledger.uhs.borrow_mut().extend(wallet.coins().map(|coin| coin.uhs_id()));
        ledger
    }

    #[test]
    fn a_rejected_payment_releases_its_notes_and_drops_its_change() {
        let mut rng = rng(60);
        let mut alice = funded_wallet(&[500], &mut rng);
        let ledger = ledger_for(&alice);
        let (shield, _) = alice.build_shield(300, &[], &mut rng).unwrap();
        check_valid(&shield, &[]).unwrap();
        confirm(&mut alice, &ledger, &shield);
        let to = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
        let (_, payment) = alice.build_confidential_payment(&to, 120, &[], &mut rng).unwrap();
        let hidden = alice.confidential_balance();
        assert_eq!((hidden.spendable, hidden.pending_in, hidden.pending_out), (0, 180, 300));
        assert!(alice.confidential_payment_string_for(&payment.txid).is_some());
        let settled = alice.on_rejected(&payment.txid).unwrap();
        assert_eq!((settled.released, settled.dropped), (300, 180));
        assert_eq!(alice.confidential_balance().spendable, 300);
        assert!(alice.confidential_payment_string_for(&payment.txid).is_none());
        assert!(matches!(
            alice.build_confidential_payment(&to, 301, &[], &mut rng),
            Err(PrivacyError::InsufficientNotes {
                confidential: 300,
                needed: 301,
                ..
            })
        ));
    }

    #[test]
    fn two_notes_pay_in_the_two_in_two_out_shape() {
        let mut rng = rng(61);
        let mut alice = funded_wallet(&[100, 200], &mut rng);
        let ledger = ledger_for(&alice);
        for amount in [100, 200] {
            let (shield, _) = alice.build_shield(amount, &[], &mut rng).unwrap();
            confirm(&mut alice, &ledger, &shield);
        }
        let to = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
        let (tx, payment) = alice.build_confidential_payment(&to, 150, &[], &mut rng).unwrap();
        check_valid(&tx, &[]).unwrap();
        let confidential =
            (tx.capability::<ConfidentialTransaction>()).expect("a confidential payment is a confidential transaction");
        assert_eq!(
            (confidential.confidential_inputs.len(), confidential.owners.len()),
            (2, 2)
        );
        assert_eq!((payment.inputs, payment.change), (2, 150));
        confirm(&mut alice, &ledger, &tx);
        assert!(ledger.uhs.borrow().contains(&payment.payment_string.uhs_id()));
    }

    #[test]
    fn notes_survive_the_file_and_an_old_file_loads_with_none() {
        let mut rng = rng(62);
        let mut alice = funded_wallet(&[500], &mut rng);
        let ledger = ledger_for(&alice);
        let (shield, _) = alice.build_shield(300, &[], &mut rng).unwrap();
        confirm(&mut alice, &ledger, &shield);
        let to = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
        let (_, payment) = alice.build_confidential_payment(&to, 100, &[], &mut rng).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("alice.json");
        WalletFile::create(&path, &alice).unwrap();
        let loaded = WalletFile::load(&path).unwrap();
        assert_eq!(loaded.notes().collect::<Vec<_>>(), alice.notes().collect::<Vec<_>>());
        assert_eq!(
            loaded.confidential_payment_string_for(&payment.txid),
            Some(payment.payment_string)
        );
        // A version-2 file has neither section.
        let mut old = serde_json::to_value(WalletFile::from_wallet(&funded_wallet(&[7], &mut rng))).unwrap();
        old["version"] = 2.into();
        assert!(old.get("notes").is_none());
        std::fs::write(&path, serde_json::to_vec(&old).unwrap()).unwrap();
        let loaded = WalletFile::load(&path).unwrap();
        assert_eq!((loaded.balance().spendable, loaded.notes().count()), (7, 0));
    }

    #[test]
    fn a_note_that_does_not_open_its_commitment_is_refused_without_its_secret() {
        let mut rng = rng(63);
        let mut alice = funded_wallet(&[500], &mut rng);
        let ledger = ledger_for(&alice);
        let (shield, _) = alice.build_shield(300, &[], &mut rng).unwrap();
        confirm(&mut alice, &ledger, &shield);
        let mut document = serde_json::to_value(WalletFile::from_wallet(&alice)).unwrap();
        let blinding = document["notes"][0]["blinding"].as_str().unwrap().to_owned();
        document["notes"][0]["value"] = 301.into();
        let file: WalletFile = serde_json::from_value(document).unwrap();
        let error = file.into_wallet().unwrap_err().to_string();
        assert!(error.contains("does not match its commitment"), "{error}");
        assert!(!error.contains(&blinding) && !error.contains("301"), "{error}");
        assert!(!format!("{alice:?}").contains(&blinding), "Debug hides openings");
    }
}
