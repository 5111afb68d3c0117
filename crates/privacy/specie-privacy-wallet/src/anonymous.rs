//! The anonymous level (docs/privacy.md, "Anonymous payments"): the wallet's enrolled identity
//! and the anonymous outputs it can spend.
//!
//! * Enrolment: [`AnonymousWallet::begin_enrolment`] answers the registration authority's challenge with
//!   a fresh secret's proof of possession; [`AnonymousWallet::finish_enrolment`] keeps the credential
//!   once it checks out against the RA's key. One identity per wallet.
//! * [`AnonymousWallet::build_anonymise`]: transparent coins → one anonymous note of this wallet.
//! * [`AnonymousWallet::build_anonymous_payment`]: anonymous notes → a note for the payee (named by its
//!   enrolment id) and a change note, spent with spend proofs of the credential; values in clear
//!   or hidden. The payee needs the [`AnonymousPaymentString`].
//! * [`receive_anonymous`]: keeps a payee's note only once the node holds its UHS id.
//!
//! A note is its payment string (where the output is, the owner's blinding, the value and a
//! hidden value's blinding) and a state in the coins' life cycle ([`CoinState`]).

use std::fmt;

use rand::{CryptoRng, Rng, RngCore};
use specie_credential::{
    AuditorKey as OwnerAuditorKey, Credential, EnrolmentChallenge, EnrolmentId, EnrolmentRequest, Identity,
    OwnerOpening, RaPublicKey, UserSecret,
};
use specie_private_transactions::{AnonymousPlan, AnonymousSpend, AnonymousTransaction, AnonymousValue};
use specie_transaction::{Address, NonceMode, OutPoint, Output, SpecieTransaction, Txid, UhsId};

use specie_wallet::{
    select_coins, Balance, CoinState, Ledger, PendingKind, SelectionError, Wallet, WalletError, WalletKey,
};

use crate::anonymous_payment::AnonymousPaymentString;
use crate::error::PrivacyError;
use crate::notes::{second_input, ReceivedNote, NOTE_INPUTS_MAX};
use crate::part::{balance_of, privacy, privacy_mut, HeldNote};

/// The wallet's enrolled identity: the secret's seed (what the file keeps), the identity it
/// makes with the credential, and the RA that signed it.
#[derive(Clone)]
pub struct EnrolledIdentity {
    pub(crate) seed: [u8; 32],
    pub(crate) identity: Identity,
    pub(crate) authority: RaPublicKey,
}

impl fmt::Debug for EnrolledIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnrolledIdentity")
            .field("enrolment_id", &self.identity.enrolment_id())
            .finish_non_exhaustive()
    }
}

/// An enrolment answered and waiting for the RA's credential.
#[derive(Clone)]
pub struct Enrolling {
    pub(crate) seed: [u8; 32],
    pub(crate) challenge: EnrolmentChallenge,
    pub(crate) authority: RaPublicKey,
}

impl fmt::Debug for Enrolling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Enrolling")
            .field("enrolment_id", &self.challenge.enrolment_id)
            .finish_non_exhaustive()
    }
}

/// An anonymous output this wallet can spend (or will, once confirmed).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AnonymousNote {
    pub payment: AnonymousPaymentString,
    pub state: CoinState,
}

impl AnonymousNote {
    pub fn value(&self) -> u64 {
        self.payment.value
    }

    pub fn hidden(&self) -> bool {
        self.payment.value_blinding.is_some()
    }

    pub fn uhs_id(&self) -> UhsId {
        self.payment.uhs_id()
    }

    pub fn outpoint(&self) -> OutPoint {
        self.payment.outpoint()
    }
}

/// Who must be able to read an anonymous transaction, and how: the node's policy as the wallet
/// learns it from `GET /v1/info`.
#[derive(Clone, Debug, Default)]
pub struct AnonymousPolicy {
    pub value_auditors: Vec<specie_confidential::AuditorKey>,
    pub owner_auditors: Vec<OwnerAuditorKey>,
    /// Values hidden (anonymous and confidential) or in clear (anonymous).
    pub hide_values: bool,
}

/// An anonymous payment built by [`AnonymousWallet::build_anonymous_payment`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnonymousPayment {
    pub txid: Txid,
    pub to: EnrolmentId,
    pub amount: u64,
    pub change: u64,
    pub inputs: usize,
    /// What the payee needs; hand it over once the payment is confirmed.
    pub payment_string: AnonymousPaymentString,
}

/// Checks the payee's note of `payment` against the node and keeps it: refused unless it pays
/// this wallet's enrolment id and the node holds its UHS id. Receiving it twice adds it once.
pub fn receive_anonymous<L: Ledger + ?Sized>(
    wallet: &mut Wallet,
    ledger: &L,
    payment: &AnonymousPaymentString,
) -> Result<ReceivedNote, PrivacyError> {
    wallet.check_anonymous_payment(payment)?;
    let present = ledger.query_uhs(&[payment.uhs_id()])?;
    wallet.accept_anonymous_note(payment, present.first().copied().unwrap_or(false))
}

/// The anonymous level of a wallet (docs/privacy.md, "Anonymous payments"): its identity and
/// its anonymous notes, kept in the wallet's [`crate::PrivacyPart`], and the transactions that
/// enter, pay within and leave the level.
pub trait AnonymousWallet {
    /// Answers `challenge` of the RA whose key is `authority`: a request with a proof of
    /// possession of a secret kept until the credential comes back. Answering again (a lost
    /// request) reuses the secret, so the RA sees the same key.
    fn begin_enrolment(
        &mut self,
        authority: RaPublicKey,
        challenge: EnrolmentChallenge,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<EnrolmentRequest, PrivacyError>;

    /// Keeps `credential` as this wallet's identity, if it is the RA's signature for the secret
    /// and the enrolment this wallet answered.
    fn finish_enrolment(&mut self, credential: Credential) -> Result<EnrolmentId, PrivacyError>;

    /// Replaces the credential of this enrolled wallet with `credential`, which the RA re-issued
    /// under its key `authority` (after a rotation, `specie ra rotate`): the same secret and id.
    fn renew_credential(&mut self, credential: Credential, authority: RaPublicKey)
        -> Result<EnrolmentId, PrivacyError>;

    /// This wallet's enrolment id, once enrolled.
    fn enrolment_id(&self) -> Option<EnrolmentId>;

    /// The enrolment answered and not yet finished, if any.
    fn enrolling_id(&self) -> Option<EnrolmentId>;

    /// The anonymous notes, by outpoint.
    fn anonymous_notes(&self) -> impl Iterator<Item = &AnonymousNote>;

    /// The anonymous notes' values by state.
    fn anonymous_balance(&self) -> Balance;

    /// Builds an entry into the anonymous level: `amount` of this wallet's coins into one
    /// anonymous note of its own, any excess back as a transparent coin.
    fn build_anonymise(
        &mut self,
        amount: u64,
        policy: &AnonymousPolicy,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Txid), PrivacyError>;

    /// Builds an anonymous payment of `amount` to enrolment id `to` from this wallet's notes (in
    /// clear only, when the values are to stay in clear), the change as a note of its own; the
    /// two outputs in random order.
    fn build_anonymous_payment(
        &mut self,
        to: EnrolmentId,
        amount: u64,
        policy: &AnonymousPolicy,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, AnonymousPayment), PrivacyError>;

    /// Builds a way out of the anonymous level: `amount` of this wallet's notes (only notes in
    /// clear, when the values are to stay in clear) into a transparent coin of `to`, or of a
    /// fresh key of this wallet when `to` is `None`, the rest back as a note of its own. Returns
    /// the change. The coin's value and owner are public, and the owner auditors learn who spent
    /// the notes, as for any anonymous spend. Paid to another wallet, the payee needs
    /// [`Wallet::payment_string_for`] the txid, as for a transparent payment.
    fn build_leave_anonymous(
        &mut self,
        amount: u64,
        to: Option<&Address>,
        policy: &AnonymousPolicy,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Txid, u64), PrivacyError>;

    /// The payee's string of pending anonymous payment `txid`.
    fn anonymous_payment_string_for(&self, txid: &Txid) -> Option<AnonymousPaymentString>;

    /// Refuses a payment to another enrolment id than this wallet's.
    fn check_anonymous_payment(&self, payment: &AnonymousPaymentString) -> Result<(), PrivacyError>;

    /// Keeps the note of `payment` as spendable if `present_at_node`; a note held is not added twice.
    fn accept_anonymous_note(
        &mut self,
        payment: &AnonymousPaymentString,
        present_at_node: bool,
    ) -> Result<ReceivedNote, PrivacyError>;

    /// Marks missing the spendable anonymous notes the node no longer holds. Returns their value.
    fn mark_missing_anonymous_notes(&mut self, outpoints: &[OutPoint]) -> u64;
}

impl AnonymousWallet for Wallet {
    fn begin_enrolment(
        &mut self,
        authority: RaPublicKey,
        challenge: EnrolmentChallenge,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<EnrolmentRequest, PrivacyError> {
        let part = privacy(self);
        if let Some(enrolled) = part.and_then(|part| part.identity.as_ref()) {
            return Err(PrivacyError::AlreadyEnrolled {
                enrolment_id: enrolled.identity.enrolment_id().0,
            });
        }
        let seed = match part.and_then(|part| part.enrolling.as_ref()) {
            Some(enrolling) if enrolling.authority == authority => enrolling.seed,
            _ => rng.gen(),
        };
        let request = UserSecret::from_seed(&seed).enrolment_request(&authority, &challenge, rng);
        privacy_mut(self).enrolling = Some(Enrolling {
            seed,
            challenge,
            authority,
        });
        Ok(request)
    }

    fn finish_enrolment(&mut self, credential: Credential) -> Result<EnrolmentId, PrivacyError> {
        let enrolling = (privacy(self).and_then(|part| part.enrolling.as_ref())).ok_or(PrivacyError::NotEnrolling)?;
        if credential.enrolment_id != enrolling.challenge.enrolment_id {
            return Err(PrivacyError::CredentialRefused);
        }
        let identity = Identity::new(UserSecret::from_seed(&enrolling.seed), credential, &enrolling.authority)
            .map_err(|_| PrivacyError::CredentialRefused)?;
        let enrolment_id = identity.enrolment_id();
        let enrolled = EnrolledIdentity {
            seed: enrolling.seed,
            identity,
            authority: enrolling.authority.clone(),
        };
        let part = privacy_mut(self);
        part.identity = Some(enrolled);
        part.enrolling = None;
        Ok(enrolment_id)
    }

    fn renew_credential(
        &mut self,
        credential: Credential,
        authority: RaPublicKey,
    ) -> Result<EnrolmentId, PrivacyError> {
        let enrolled = enrolled(self)?;
        if credential.enrolment_id != enrolled.identity.enrolment_id() {
            return Err(PrivacyError::RenewalRefused);
        }
        let identity = Identity::new(UserSecret::from_seed(&enrolled.seed), credential, &authority)
            .map_err(|_| PrivacyError::RenewalRefused)?;
        let renewed = EnrolledIdentity {
            seed: enrolled.seed,
            identity,
            authority,
        };
        privacy_mut(self).identity = Some(renewed);
        Ok(enrolled_id_of(self))
    }

    fn enrolment_id(&self) -> Option<EnrolmentId> {
        let enrolled = privacy(self)?.identity.as_ref()?;
        Some(enrolled.identity.enrolment_id())
    }

    fn enrolling_id(&self) -> Option<EnrolmentId> {
        let enrolling = privacy(self)?.enrolling.as_ref()?;
        Some(enrolling.challenge.enrolment_id)
    }

    fn anonymous_notes(&self) -> impl Iterator<Item = &AnonymousNote> {
        privacy(self).into_iter().flat_map(|part| part.anonymous_notes.values())
    }

    fn anonymous_balance(&self) -> Balance {
        balance_of(self.anonymous_notes())
    }

    fn build_anonymise(
        &mut self,
        amount: u64,
        policy: &AnonymousPolicy,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Txid), PrivacyError> {
        let enrolled = enrolled(self)?;
        let (authority, ours) = (enrolled.authority.clone(), enrolled.identity.enrolment_id());
        let spending = self.spend(amount, rng)?;
        let plan = AnonymousPlan {
            transparent_inputs: spending.inputs,
            anonymous_inputs: vec![],
            outputs: vec![(OwnerOpening::random(ours, rng), amount)],
            transparent_outputs: spending.change_output,
            hide_values: policy.hide_values,
            value_auditors: policy.value_auditors.clone(),
            owner_auditors: policy.owner_auditors.clone(),
        };
        let (tx, openings) = plan.prove_and_sign(&spending.owners, None, &authority, NonceMode::Randomized, rng)?;
        if let Some(key) = spending.change_key {
            self.add_key(key);
        }
        record_anonymous(self, tx, &plan, &openings, PendingKind::Anonymise { amount })
    }

    fn build_anonymous_payment(
        &mut self,
        to: EnrolmentId,
        amount: u64,
        policy: &AnonymousPolicy,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, AnonymousPayment), PrivacyError> {
        self.check_pending_room()?;
        let ours = enrolled(self)?.identity.enrolment_id();
        let (notes, total) = select_anonymous_notes(self, amount, policy.hide_values)?;
        let payee = (OwnerOpening::random(to, rng), amount);
        let change = (OwnerOpening::random(ours, rng), total - amount);
        // No change output in clear when nothing is left: a clear value of 0 is refused.
        let payee_position = usize::from(change.1 > 0 && rng.gen_bool(0.5));
        let outputs = match (change.1 > 0 || policy.hide_values, payee_position) {
            (false, _) => vec![payee],
            (true, 0) => vec![payee, change],
            (true, _) => vec![change, payee],
        };
        let plan = plan_spending_notes(&notes, outputs, vec![], policy);
        let (tx, openings) = prove_spending(self, &plan, rng)?;
        let payment_string = created_payment(&tx, &plan, &openings, payee_position);
        let kind = PendingKind::AnonymousPayment { to: to.0, amount };
        let (tx, txid) = record_anonymous(self, tx, &plan, &openings, kind)?;
        privacy_mut(self).sent_anonymous.insert(txid, payment_string);
        let payment = AnonymousPayment {
            txid,
            to,
            amount,
            change: total - amount,
            inputs: notes.len(),
            payment_string,
        };
        Ok((tx, payment))
    }

    fn build_leave_anonymous(
        &mut self,
        amount: u64,
        to: Option<&Address>,
        policy: &AnonymousPolicy,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Txid, u64), PrivacyError> {
        self.check_pending_room()?;
        let ours = enrolled(self)?.identity.enrolment_id();
        let (notes, total) = select_anonymous_notes(self, amount, policy.hide_values)?;
        let change = total - amount;
        let (commitment, coin_key, kind) = match to {
            Some(to) => (
                to.witness_program_commitment(),
                None,
                PendingKind::Payment { to: *to, amount },
            ),
            None => {
                let key = WalletKey::random(rng)?;
                (key.commitment(), Some(key), PendingKind::LeaveAnonymous { amount })
            }
        };
        // No change output in clear when nothing is left: a clear value of 0 is refused.
        let outputs = match change > 0 || policy.hide_values {
            true => vec![(OwnerOpening::random(ours, rng), change)],
            false => vec![],
        };
        let coin = Output {
            witness_program_commitment: commitment,
            value: amount,
        };
        let plan = plan_spending_notes(&notes, outputs, vec![coin], policy);
        let (tx, openings) = prove_spending(self, &plan, rng)?;
        if let Some(key) = coin_key {
            self.add_key(key);
        }
        let (tx, txid) = record_anonymous(self, tx, &plan, &openings, kind)?;
        Ok((tx, txid, change))
    }

    fn anonymous_payment_string_for(&self, txid: &Txid) -> Option<AnonymousPaymentString> {
        privacy(self)?.sent_anonymous.get(txid).copied()
    }

    fn check_anonymous_payment(&self, payment: &AnonymousPaymentString) -> Result<(), PrivacyError> {
        match self.enrolment_id() {
            None => Err(PrivacyError::NotEnrolled),
            Some(ours) if ours != payment.payee() => Err(PrivacyError::AnonymousNotOurs),
            Some(_) => Ok(()),
        }
    }

    fn accept_anonymous_note(
        &mut self,
        payment: &AnonymousPaymentString,
        present_at_node: bool,
    ) -> Result<ReceivedNote, PrivacyError> {
        self.check_anonymous_payment(payment)?;
        let value = payment.value;
        if privacy(self).is_some_and(|part| part.anonymous_notes.contains_key(&payment.outpoint())) {
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
        let note = AnonymousNote {
            payment: *payment,
            state: CoinState::Spendable,
        };
        privacy_mut(self).anonymous_notes.insert(payment.outpoint(), note);
        Ok(ReceivedNote {
            value,
            already_known: false,
        })
    }

    fn mark_missing_anonymous_notes(&mut self, outpoints: &[OutPoint]) -> u64 {
        match self.part_mut::<crate::PrivacyPart>() {
            Some(part) => crate::part::mark_missing(&mut part.anonymous_notes, outpoints),
            None => 0,
        }
    }
}

fn enrolled_id_of(wallet: &Wallet) -> EnrolmentId {
    wallet.enrolment_id().expect("enrolled")
}

fn enrolled(wallet: &Wallet) -> Result<&EnrolledIdentity, PrivacyError> {
    (privacy(wallet).and_then(|part| part.identity.as_ref())).ok_or(PrivacyError::NotEnrolled)
}

/// Proves `plan`'s spends of this wallet's notes with its credential, and signs it.
fn prove_spending(
    wallet: &Wallet,
    plan: &AnonymousPlan,
    rng: &mut (impl RngCore + CryptoRng),
) -> Result<(AnonymousTransaction, Vec<Option<specie_confidential::Opening>>), PrivacyError> {
    let enrolled = enrolled(wallet)?;
    let proven = plan.prove_and_sign(
        &[],
        Some(&enrolled.identity),
        &enrolled.authority,
        NonceMode::Randomized,
        rng,
    )?;
    Ok(proven)
}

/// Spendable notes worth at least `amount` (only notes in clear for a payment in clear), with a
/// second one when one suffices, as for confidential notes.
fn select_anonymous_notes(
    wallet: &Wallet,
    amount: u64,
    hide_values: bool,
) -> Result<(Vec<AnonymousNote>, u64), PrivacyError> {
    if amount == 0 {
        return Err(WalletError::ZeroAmount.into());
    }
    let candidates: Vec<AnonymousNote> = (wallet.anonymous_notes())
        .filter(|note| note.state == CoinState::Spendable && (hide_values || !note.hidden()))
        .copied()
        .collect();
    let values: Vec<u64> = candidates.iter().map(AnonymousNote::value).collect();
    let unit = wallet.hrp().to_owned();
    let available: u64 = values.iter().fold(0u64, |sum, v| sum.saturating_add(*v));
    let selection = select_coins(&values, amount, NOTE_INPUTS_MAX).map_err(|error| match error {
        SelectionError::Insufficient { .. } => PrivacyError::InsufficientAnonymousNotes {
            available,
            needed: amount,
            unit: wallet.hrp().to_owned(),
        },
        other => WalletError::from_selection(other, unit, || unreachable!("not an insufficiency")).into(),
    })?;
    let (chosen, total) = second_input(selection.chosen, selection.total, &values);
    Ok((chosen.iter().map(|&index| candidates[index]).collect(), total))
}

/// Records a built anonymous transaction: its notes become `PendingSpend`, its outputs that pay
/// this wallet's id new `PendingReceive` notes, its transparent side as for any transaction.
fn record_anonymous(
    wallet: &mut Wallet,
    tx: AnonymousTransaction,
    plan: &AnonymousPlan,
    openings: &[Option<specie_confidential::Opening>],
    kind: PendingKind,
) -> Result<(SpecieTransaction, Txid), PrivacyError> {
    let txid = tx.txid();
    // Checked before the notes change: then nothing changes if it is refused.
    wallet.check_pending_room()?;
    let ours = wallet.enrolment_id();
    let part = privacy_mut(wallet);
    for input in &tx.anonymous_inputs {
        if let Some(note) = part.anonymous_notes.get_mut(&input.prevout) {
            debug_assert_eq!(note.state, CoinState::Spendable, "only spendable notes are selected");
            note.state = CoinState::PendingSpend { txid };
        }
    }
    for position in 0..plan.outputs.len() {
        let payment = created_payment(&tx, plan, openings, position);
        if Some(payment.payee()) == ours && payment.value > 0 {
            let note = AnonymousNote {
                payment,
                state: CoinState::PendingReceive { txid },
            };
            part.anonymous_notes.insert(payment.outpoint(), note);
        }
    }
    let tx = SpecieTransaction::from(tx);
    wallet.record_pending(tx.clone(), kind)?;
    Ok((tx, txid))
}

impl HeldNote for AnonymousNote {
    fn value(&self) -> u64 {
        self.payment.value
    }
    fn state(&self) -> CoinState {
        self.state
    }
    fn set_state(&mut self, state: CoinState) {
        self.state = state;
    }
    fn uhs_id(&self) -> UhsId {
        self.payment.uhs_id()
    }
}

/// A plan spending `notes` (with spend proofs of the wallet's credential) into `outputs`, owned
/// behind commitments, and `transparent_outputs`, under `policy`.
fn plan_spending_notes(
    notes: &[AnonymousNote],
    outputs: Vec<(OwnerOpening, u64)>,
    transparent_outputs: Vec<Output>,
    policy: &AnonymousPolicy,
) -> AnonymousPlan {
    AnonymousPlan {
        transparent_inputs: vec![],
        anonymous_inputs: (notes.iter())
            .map(|note| AnonymousSpend {
                input: note.payment.to_input(),
                owner: note.payment.owner,
                value: note.payment.value_opening(),
            })
            .collect(),
        outputs,
        transparent_outputs,
        hide_values: policy.hide_values,
        value_auditors: policy.value_auditors.clone(),
        owner_auditors: policy.owner_auditors.clone(),
    }
}

/// The payment string of the plan's output `position` in `tx`.
fn created_payment(
    tx: &AnonymousTransaction,
    plan: &AnonymousPlan,
    openings: &[Option<specie_confidential::Opening>],
    position: usize,
) -> AnonymousPaymentString {
    let created = tx.created_anonymous_outputs()[position];
    let (owner, value) = plan.outputs[position];
    let value_blinding = match created.value {
        AnonymousValue::Clear(_) => None,
        AnonymousValue::Hidden(_) => openings[position].map(|opening| opening.blinding),
    };
    AnonymousPaymentString {
        txid: created.outpoint.txid,
        index: created.outpoint.index,
        owner,
        value,
        value_blinding,
    }
}
