//! The unlinkable level (docs/unlinkable-format.md): the wallet's certified tokens, and the
//! transactions that enter, pay within and leave the level. It uses the anonymous level's
//! enrolled identity: the credential proves the spender, its secret keys the serial numbers.
//!
//! * [`UnlinkableWallet::build_enter_unlinkable`]: transparent coins → one token of this wallet.
//! * [`UnlinkableWallet::build_unlinkable_payment`]: certified tokens → a token for the payee (named
//!   by its enrolment id) and a change token; the spend reveals serial numbers, never the tokens.
//!   The payee needs the [`UnlinkablePaymentString`].
//! * [`UnlinkableWallet::build_leave_unlinkable`]: certified tokens → a transparent coin.
//! * [`receive_unlinkable`]: keeps a payee's token only once the node holds its UHS id.
//!
//! A token is spendable once confirmed **and certified**: the wallet asks the certifiers
//! (`crate::session::certify_tokens`) and keeps the combined certificate beside the token.

use rand::{CryptoRng, Rng, RngCore};
use specie_credential::unlinkable::{
    Certificate, CertifierGroup, SpentToken, TokenOpening, UnlinkableKeys, INPUTS_MAX,
};
use specie_credential::{AuditorKey as OwnerAuditorKey, EnrolmentId};
use specie_private_transactions::unlinkable::serial_uhs_id;
use specie_private_transactions::{UnlinkableBuild, UnlinkableTransaction};
use specie_transaction::{Address, NonceMode, OutPoint, Output, SpecieTransaction, Txid, UhsId};
use specie_wallet::{
    select_coins, Balance, CoinState, Ledger, PendingKind, SelectionError, Wallet, WalletError, WalletKey,
};

use crate::error::PrivacyError;
use crate::notes::ReceivedNote;
use crate::part::{balance_of, privacy, privacy_mut, HeldNote};
use crate::unlinkable_payment::UnlinkablePaymentString;

/// An unlinkable token this wallet holds: its opening (as a payment string), its certificate
/// once the certifiers gave it, and its state in the coins' life cycle.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct UnlinkableToken {
    pub payment: UnlinkablePaymentString,
    pub certificate: Option<Certificate>,
    pub state: CoinState,
}

impl UnlinkableToken {
    pub fn value(&self) -> u64 {
        self.payment.value()
    }

    /// Confirmed and certified: it can pay.
    pub fn spendable(&self) -> bool {
        self.state == CoinState::Spendable && self.certificate.is_some()
    }
}

impl HeldNote for UnlinkableToken {
    fn value(&self) -> u64 {
        self.payment.value()
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

/// What an unlinkable transaction must satisfy: the node's certifier group and owner auditors,
/// as the wallet learns them from `GET /v1/info`.
#[derive(Clone, Debug)]
pub struct UnlinkablePolicy {
    pub certifiers: CertifierGroup,
    pub owner_auditors: Vec<OwnerAuditorKey>,
}

/// An unlinkable payment built by [`UnlinkableWallet::build_unlinkable_payment`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnlinkablePayment {
    pub txid: Txid,
    pub to: EnrolmentId,
    pub amount: u64,
    pub change: u64,
    /// What the payee needs; hand it over once the payment is confirmed.
    pub payment_string: UnlinkablePaymentString,
}

/// Checks the payee's token of `payment` against the node and keeps it (uncertified): refused
/// unless it pays this wallet's enrolment id, the node holds its UHS id and not its serial
/// number's (a token spent already). Receiving it twice adds it once.
pub fn receive_unlinkable<L: Ledger + ?Sized>(
    wallet: &mut Wallet,
    ledger: &L,
    payment: &UnlinkablePaymentString,
) -> Result<ReceivedNote, PrivacyError> {
    check_ours(wallet, payment)?;
    let value = payment.value();
    if privacy(wallet).is_some_and(|part| part.unlinkable_tokens.contains_key(&payment.outpoint())) {
        return Ok(ReceivedNote {
            value,
            already_known: true,
        });
    }
    let identity = &(privacy(wallet).and_then(|part| part.identity.as_ref())).ok_or(PrivacyError::NotEnrolled)?;
    let serial = (payment.opening.serial_number(&identity.identity)).ok_or(PrivacyError::AnonymousNotOurs)?;
    // The token must be in the ledger, and its serial number not: a token this wallet spent
    // (from another copy of the file) would otherwise look spendable forever.
    let present = ledger.query_uhs(&[payment.uhs_id(), serial_uhs_id(&serial)])?;
    if present.first() != Some(&true) {
        return Err(PrivacyError::NoteNotAtNode {
            txid: payment.txid,
            index: payment.index,
        });
    }
    if present.get(1) != Some(&false) {
        return Err(PrivacyError::TokenSpent {
            txid: payment.txid,
            index: payment.index,
        });
    }
    let token = UnlinkableToken {
        payment: payment.clone(),
        certificate: None,
        state: CoinState::Spendable,
    };
    privacy_mut(wallet).unlinkable_tokens.insert(payment.outpoint(), token);
    Ok(ReceivedNote {
        value,
        already_known: false,
    })
}

fn check_ours(wallet: &Wallet, payment: &UnlinkablePaymentString) -> Result<(), PrivacyError> {
    use crate::AnonymousWallet;
    match wallet.enrolment_id() {
        None => Err(PrivacyError::NotEnrolled),
        Some(ours) if ours != payment.payee() => Err(PrivacyError::AnonymousNotOurs),
        Some(_) => Ok(()),
    }
}

/// The unlinkable level of a wallet: its tokens, kept in the wallet's [`crate::PrivacyPart`], and
/// the transactions that enter, pay within and leave the level.
pub trait UnlinkableWallet {
    /// The tokens, by outpoint.
    fn unlinkable_tokens(&self) -> impl Iterator<Item = &UnlinkableToken>;

    /// The tokens' values by state (a confirmed token still to be certified counts as spendable).
    fn unlinkable_balance(&self) -> Balance;

    /// Confirmed tokens still waiting for their certificate.
    fn uncertified_tokens(&self) -> Vec<UnlinkablePaymentString>;

    /// The payee's string of pending unlinkable payment `txid`.
    fn unlinkable_payment_string_for(&self, txid: &Txid) -> Option<UnlinkablePaymentString>;

    /// Keeps the certificate of the token at `outpoint`, if it certifies that token under `group`.
    fn keep_certificate(
        &mut self,
        outpoint: &OutPoint,
        certificate: Certificate,
        group: &CertifierGroup,
    ) -> Result<(), PrivacyError>;

    /// Builds an entry into the unlinkable level: `amount` of this wallet's coins into one token
    /// of its own, any excess back as a transparent coin. The value entering is public.
    fn build_enter_unlinkable(
        &mut self,
        amount: u64,
        policy: &UnlinkablePolicy,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Txid), PrivacyError>;

    /// Builds an unlinkable payment of `amount` to enrolment id `to` from this wallet's certified
    /// tokens, the change as a token of its own; the outputs in random order.
    fn build_unlinkable_payment(
        &mut self,
        to: EnrolmentId,
        amount: u64,
        policy: &UnlinkablePolicy,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, UnlinkablePayment), PrivacyError>;

    /// Builds a way out of the unlinkable level: `amount` of this wallet's certified tokens into
    /// a transparent coin of `to`, or of a fresh key of this wallet when `to` is `None`, the rest
    /// back as a token. Returns the change. The coin's value and owner are public.
    fn build_leave_unlinkable(
        &mut self,
        amount: u64,
        to: Option<&Address>,
        policy: &UnlinkablePolicy,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Txid, u64), PrivacyError>;
}

impl UnlinkableWallet for Wallet {
    fn unlinkable_tokens(&self) -> impl Iterator<Item = &UnlinkableToken> {
        privacy(self)
            .into_iter()
            .flat_map(|part| part.unlinkable_tokens.values())
    }

    fn unlinkable_balance(&self) -> Balance {
        balance_of(self.unlinkable_tokens())
    }

    fn uncertified_tokens(&self) -> Vec<UnlinkablePaymentString> {
        (self.unlinkable_tokens())
            .filter(|token| token.state == CoinState::Spendable && token.certificate.is_none())
            .map(|token| token.payment.clone())
            .collect()
    }

    fn unlinkable_payment_string_for(&self, txid: &Txid) -> Option<UnlinkablePaymentString> {
        privacy(self)?.sent_unlinkable.get(txid).cloned()
    }

    fn keep_certificate(
        &mut self,
        outpoint: &OutPoint,
        certificate: Certificate,
        group: &CertifierGroup,
    ) -> Result<(), PrivacyError> {
        let token = (privacy_mut(self).unlinkable_tokens.get_mut(outpoint)).ok_or(PrivacyError::NoSuchToken)?;
        certificate
            .check(&token.payment.opening, group)
            .map_err(|_| PrivacyError::CertificateRefused)?;
        token.certificate = Some(certificate);
        Ok(())
    }

    fn build_enter_unlinkable(
        &mut self,
        amount: u64,
        policy: &UnlinkablePolicy,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Txid), PrivacyError> {
        let ours = enrolled_id(self)?;
        let spending = self.spend(amount, rng)?;
        let build = UnlinkableBuild {
            transparent_inputs: spending.inputs,
            spent: vec![],
            outputs: vec![TokenOpening::random(ours, amount, rng)],
            transparent_outputs: spending.change_output,
            owner_auditors: policy.owner_auditors.clone(),
        };
        let tx = prove(self, &build, &spending.owners, policy, rng)?;
        if let Some(key) = spending.change_key {
            self.add_key(key);
        }
        record_unlinkable(self, tx, &[], &build.outputs, PendingKind::EnterUnlinkable { amount })
    }

    fn build_unlinkable_payment(
        &mut self,
        to: EnrolmentId,
        amount: u64,
        policy: &UnlinkablePolicy,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, UnlinkablePayment), PrivacyError> {
        self.check_pending_room()?;
        let ours = enrolled_id(self)?;
        let (tokens, total) = select_tokens(self, amount)?;
        let change = total - amount;
        let mut outputs = vec![TokenOpening::random(to, amount, rng)];
        if change > 0 {
            outputs.push(TokenOpening::random(ours, change, rng));
        }
        let payee_position = usize::from(outputs.len() == 2 && rng.gen_bool(0.5));
        outputs.swap(0, payee_position);
        let spent = spent_tokens(&tokens);
        let build = UnlinkableBuild {
            transparent_inputs: vec![],
            spent,
            outputs,
            transparent_outputs: vec![],
            owner_auditors: policy.owner_auditors.clone(),
        };
        let tx = prove(self, &build, &[], policy, rng)?;
        let created = tx.created_tokens()[payee_position];
        let payment_string = UnlinkablePaymentString {
            txid: created.outpoint.txid,
            index: created.outpoint.index,
            opening: build.outputs[payee_position].clone(),
        };
        let kind = PendingKind::UnlinkablePayment { to: to.0, amount };
        let (tx, txid) = record_unlinkable(self, tx, &outpoints(&tokens), &build.outputs, kind)?;
        privacy_mut(self).sent_unlinkable.insert(txid, payment_string.clone());
        let payment = UnlinkablePayment {
            txid,
            to,
            amount,
            change,
            payment_string,
        };
        Ok((tx, payment))
    }

    fn build_leave_unlinkable(
        &mut self,
        amount: u64,
        to: Option<&Address>,
        policy: &UnlinkablePolicy,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Txid, u64), PrivacyError> {
        self.check_pending_room()?;
        let ours = enrolled_id(self)?;
        let (tokens, total) = select_tokens(self, amount)?;
        let change = total - amount;
        let (commitment, coin_key, kind) = match to {
            Some(to) => (
                to.witness_program_commitment(),
                None,
                PendingKind::Payment { to: *to, amount },
            ),
            None => {
                let key = WalletKey::random(rng)?;
                (key.commitment(), Some(key), PendingKind::LeaveUnlinkable { amount })
            }
        };
        let outputs = match change > 0 {
            true => vec![TokenOpening::random(ours, change, rng)],
            false => vec![],
        };
        let build = UnlinkableBuild {
            transparent_inputs: vec![],
            spent: spent_tokens(&tokens),
            outputs,
            transparent_outputs: vec![Output {
                witness_program_commitment: commitment,
                value: amount,
            }],
            owner_auditors: policy.owner_auditors.clone(),
        };
        let tx = prove(self, &build, &[], policy, rng)?;
        if let Some(key) = coin_key {
            self.add_key(key);
        }
        let (tx, txid) = record_unlinkable(self, tx, &outpoints(&tokens), &build.outputs, kind)?;
        Ok((tx, txid, change))
    }
}

fn enrolled_id(wallet: &Wallet) -> Result<EnrolmentId, PrivacyError> {
    use crate::AnonymousWallet;
    wallet.enrolment_id().ok_or(PrivacyError::NotEnrolled)
}

fn outpoints(tokens: &[UnlinkableToken]) -> Vec<OutPoint> {
    tokens.iter().map(|token| token.payment.outpoint()).collect()
}

fn spent_tokens(tokens: &[UnlinkableToken]) -> Vec<SpentToken<'_>> {
    (tokens.iter())
        .map(|token| SpentToken {
            opening: &token.payment.opening,
            certificate: token.certificate.as_ref().expect("only certified tokens are selected"),
        })
        .collect()
}

/// Proves `build` with this wallet's credential under `policy`, signing its transparent inputs
/// with `signers`.
fn prove(
    wallet: &Wallet,
    build: &UnlinkableBuild<'_>,
    signers: &[secp256k1::Keypair],
    policy: &UnlinkablePolicy,
    rng: &mut (impl RngCore + CryptoRng),
) -> Result<UnlinkableTransaction, PrivacyError> {
    let enrolled = (privacy(wallet).and_then(|part| part.identity.as_ref())).ok_or(PrivacyError::NotEnrolled)?;
    let keys = UnlinkableKeys {
        authority: &enrolled.authority,
        certifiers: &policy.certifiers,
    };
    Ok(build.prove_and_sign(signers, &enrolled.identity, &keys, NonceMode::Randomized, rng)?)
}

/// Certified spendable tokens worth at least `amount`, at most [`INPUTS_MAX`].
fn select_tokens(wallet: &Wallet, amount: u64) -> Result<(Vec<UnlinkableToken>, u64), PrivacyError> {
    if amount == 0 {
        return Err(WalletError::ZeroAmount.into());
    }
    let candidates: Vec<UnlinkableToken> = wallet.unlinkable_tokens().filter(|t| t.spendable()).cloned().collect();
    let values: Vec<u64> = candidates.iter().map(UnlinkableToken::value).collect();
    let available = values.iter().fold(0u64, |sum, v| sum.saturating_add(*v));
    let unit = wallet.hrp().to_owned();
    let uncertified = wallet.uncertified_tokens().len();
    let selection = select_coins(&values, amount, INPUTS_MAX).map_err(|error| match error {
        SelectionError::Insufficient { .. } => PrivacyError::InsufficientTokens {
            available,
            needed: amount,
            unit: unit.clone(),
            uncertified,
        },
        other => WalletError::from_selection(other, unit.clone(), || unreachable!("not an insufficiency")).into(),
    })?;
    Ok((
        selection.chosen.iter().map(|&i| candidates[i].clone()).collect(),
        selection.total,
    ))
}

/// Records a built unlinkable transaction: its tokens become `PendingSpend`, the new tokens that
/// are this wallet's `PendingReceive` (uncertified), its transparent side as for any transaction.
fn record_unlinkable(
    wallet: &mut Wallet,
    tx: UnlinkableTransaction,
    spent: &[OutPoint],
    outputs: &[TokenOpening],
    kind: PendingKind,
) -> Result<(SpecieTransaction, Txid), PrivacyError> {
    let txid = tx.txid();
    // Checked before the tokens change: then nothing changes if it is refused.
    wallet.check_pending_room()?;
    let ours = enrolled_id(wallet)?;
    let part = privacy_mut(wallet);
    for outpoint in spent {
        if let Some(token) = part.unlinkable_tokens.get_mut(outpoint) {
            debug_assert!(token.spendable(), "only spendable tokens are selected");
            token.state = CoinState::PendingSpend { txid };
        }
    }
    for (created, opening) in tx.created_tokens().iter().zip(outputs) {
        if opening.owner() == ours {
            let payment = UnlinkablePaymentString {
                txid,
                index: created.outpoint.index,
                opening: opening.clone(),
            };
            let token = UnlinkableToken {
                payment,
                certificate: None,
                state: CoinState::PendingReceive { txid },
            };
            part.unlinkable_tokens.insert(created.outpoint, token);
        }
    }
    let tx = SpecieTransaction::from(tx);
    wallet.record_pending(tx.clone(), kind)?;
    Ok((tx, txid))
}
