//! The privacy part's fields of the wallet file, as versions 3 and 4 of the format added them
//! (each absent while empty): `notes` and `sent_confidential` (confidential notes, the payee's
//! strings of pending confidential payments), `identity`, `enrolling`, `anonymous_notes` and
//! `sent_anonymous` (the anonymous level). [`PrivacyKind`] loads them, after the core's fields,
//! checking everything as the core checks its coins: every note opens its commitment and belongs
//! to the wallet (a key of it, or its enrolment id), a note being spent is spent by one of the
//! wallet's pending transactions, and the identity checks out against its RA's key.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use specie_codec::{Decode, Encode};
use specie_confidential::{Opening, Scalar};
use specie_credential::unlinkable::Certificate;
use specie_credential::{Credential, EnrolmentChallenge, Identity, RaPublicKey, Textual, UserSecret};
use specie_private_transactions::{
    AnonymousTransaction, ConfidentialInput, ConfidentialTransaction, UnlinkableTransaction,
};
use specie_transaction::{OutPoint, Txid};
use specie_wallet::{
    file_hex32 as hex32, file_txid as txid_from, CoinState, StateRecord, Wallet, WalletFileError, WalletPart,
    WalletPartKind,
};
use thiserror::Error;

use crate::anonymous::{AnonymousNote, EnrolledIdentity, Enrolling};
use crate::anonymous_payment::AnonymousPaymentString;
use crate::confidential_payment::ConfidentialPaymentString;
use crate::notes::Note;
use crate::part::{PrivacyPart, PRIVACY_PART};
use crate::unlinkable::UnlinkableToken;
use crate::unlinkable_payment::UnlinkablePaymentString;

/// What is wrong in the privacy part of a wallet file (the core's `WalletFileError::Part`). No
/// variant carries a secret: an opening, a seed or a payment string.
#[derive(Debug, Error)]
pub enum PrivacyFileError {
    /// A note's opening does not decode or does not open its commitment. Names the note only:
    /// the opening is secret.
    #[error("note {txid}:{index} has an opening that does not decode or does not match its commitment")]
    BadNote { txid: Txid, index: u64 },
    /// The identity section: the error never carries the secret.
    #[error("its {what} does not decode or does not check out against the registration authority's key")]
    BadIdentity { what: &'static str },
    #[error("anonymous note {txid}:{index} does not decode, or does not pay this wallet's enrolment id")]
    BadAnonymousNote { txid: Txid, index: u64 },
    #[error(
        "unlinkable token {txid}:{index} or its certificate does not decode, or it does not pay this wallet's \
         enrolment id"
    )]
    BadUnlinkableToken { txid: Txid, index: u64 },
    /// A field does not have the shape of its records.
    #[error("its notes or identity do not have the wallet file's shape: {0}")]
    Shape(String),
}

impl From<PrivacyFileError> for WalletFileError {
    fn from(error: PrivacyFileError) -> Self {
        WalletFileError::Part(Box::new(error))
    }
}

/// The privacy part's fields.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct PrivacyFields {
    /// Confidential notes (version 3); absent while the wallet has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    notes: Vec<NoteRecord>,
    /// The payee's string of each pending confidential payment (version 3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    sent_confidential: Vec<SentConfidentialRecord>,
    /// The enrolled identity (version 4); absent until enrolled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    identity: Option<IdentityRecord>,
    /// An enrolment answered and waiting for its credential (version 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    enrolling: Option<EnrollingRecord>,
    /// Anonymous notes (version 4), each its `specie-apay1…` string and state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    anonymous_notes: Vec<AnonymousNoteRecord>,
    /// The payee's string of each pending anonymous payment (version 4).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    sent_anonymous: Vec<SentConfidentialRecord>,
    /// Unlinkable tokens, each its `specie-upay1…` string, certificate and state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    unlinkable_tokens: Vec<UnlinkableTokenRecord>,
    /// The payee's string of each pending unlinkable payment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    sent_unlinkable: Vec<SentConfidentialRecord>,
}

/// The top-level fields the part owns.
const FIELDS: &[&str] = &[
    "notes",
    "sent_confidential",
    "identity",
    "enrolling",
    "anonymous_notes",
    "sent_anonymous",
    "unlinkable_tokens",
    "sent_unlinkable",
];

/// The wallet's enrolled identity. `secret_seed` is as secret as a key: with it and the
/// credential anyone spends this wallet's anonymous notes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IdentityRecord {
    pub secret_seed: String,
    /// The RA's `specie-credential1…` text.
    pub credential: String,
    /// The RA's key, hex of its encoding.
    pub registration_authority: String,
    /// For reading only.
    pub enrolment_id: u64,
}

/// An enrolment answered and waiting for the RA's credential.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EnrollingRecord {
    pub secret_seed: String,
    /// The RA's `specie-enrol-challenge1…` text this wallet answered.
    pub challenge: String,
    pub registration_authority: String,
}

/// An anonymous note.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AnonymousNoteRecord {
    /// The note's `specie-apay1…` string: as secret as the note's value.
    pub payment_string: String,
    pub state: StateRecord,
}

/// An unlinkable token.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UnlinkableTokenRecord {
    /// The token's `specie-upay1…` string: as secret as its value.
    pub payment_string: String,
    /// The certifiers' combined certificate (hex of its encoding), once given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
    pub state: StateRecord,
}

/// A confidential note. The opening (`value`, `blinding`) is as secret as a key: without it the
/// note cannot be spent, and with it anyone learns the value.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NoteRecord {
    pub txid: String,
    pub index: u64,
    /// Witness program commitment of the owning key.
    pub owner: String,
    /// The Pedersen commitment, compressed; checked on load to be the opening's.
    pub commitment: String,
    pub value: u64,
    pub blinding: String,
    /// For reading only: the id to look up at the node.
    pub uhs_id: String,
    pub state: StateRecord,
}

/// The payee's string of a pending private payment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SentConfidentialRecord {
    pub txid: String,
    /// The `specie-cpay1…` (or `specie-apay1…`) string for the payee.
    pub payment_string: String,
}

/// The loader of the privacy part, installed by [`crate::install`].
#[derive(Debug)]
pub struct PrivacyKind;

impl WalletPartKind for PrivacyKind {
    fn name(&self) -> &'static str {
        PRIVACY_PART
    }

    fn fields(&self) -> &'static [&'static str] {
        FIELDS
    }

    fn load(&self, fields: &Map<String, Value>, wallet: &Wallet) -> Result<Box<dyn WalletPart>, WalletFileError> {
        let fields: PrivacyFields = serde_json::from_value(Value::Object(fields.clone()))
            .map_err(|error| PrivacyFileError::Shape(error.to_string()))?;
        let mut part = PrivacyPart::default();
        fields.restore_notes(&mut part, wallet)?;
        fields.restore_anonymous(&mut part, wallet)?;
        fields.restore_unlinkable(&mut part, wallet)?;
        Ok(Box::new(part))
    }

    fn payment_string_decodes(&self, text: &str) -> bool {
        ConfidentialPaymentString::parse(text).is_ok()
            || AnonymousPaymentString::parse(text).is_ok()
            || UnlinkablePaymentString::parse(text).is_ok()
    }
}

/// The part's fields of the wallet file: none while it is empty.
pub(crate) fn to_fields(part: &PrivacyPart) -> Map<String, Value> {
    let sent = |txid: &Txid, payment_string: String| SentConfidentialRecord {
        txid: txid.to_string(),
        payment_string,
    };
    let fields = PrivacyFields {
        notes: part.notes.values().map(NoteRecord::from_note).collect(),
        sent_confidential: (part.sent_confidential.iter())
            .map(|(txid, payment)| sent(txid, payment.encode()))
            .collect(),
        identity: part.identity.as_ref().map(|enrolled| IdentityRecord {
            secret_seed: hex::encode(enrolled.seed),
            credential: enrolled.identity.credential().to_text(),
            registration_authority: hex::encode(enrolled.authority.encode()),
            enrolment_id: enrolled.identity.enrolment_id().0,
        }),
        enrolling: part.enrolling.as_ref().map(|enrolling| EnrollingRecord {
            secret_seed: hex::encode(enrolling.seed),
            challenge: enrolling.challenge.to_text(),
            registration_authority: hex::encode(enrolling.authority.encode()),
        }),
        anonymous_notes: (part.anonymous_notes.values())
            .map(|note| AnonymousNoteRecord {
                payment_string: note.payment.encode(),
                state: StateRecord::from(note.state),
            })
            .collect(),
        sent_anonymous: (part.sent_anonymous.iter())
            .map(|(txid, payment)| sent(txid, payment.encode()))
            .collect(),
        unlinkable_tokens: (part.unlinkable_tokens.values())
            .map(|token| UnlinkableTokenRecord {
                payment_string: token.payment.encode(),
                certificate: token.certificate.as_ref().map(|c| hex::encode(c.encode())),
                state: StateRecord::from(token.state),
            })
            .collect(),
        sent_unlinkable: (part.sent_unlinkable.iter())
            .map(|(txid, payment)| sent(txid, payment.encode()))
            .collect(),
    };
    match serde_json::to_value(fields) {
        Ok(Value::Object(map)) => map,
        _ => unreachable!("the records serialize to a JSON object"),
    }
}

impl PrivacyFields {
    /// The notes and the strings of pending confidential payments.
    fn restore_notes(&self, part: &mut PrivacyPart, wallet: &Wallet) -> Result<(), WalletFileError> {
        for record in &self.notes {
            let note = record.to_note(wallet)?;
            let outpoint = note.outpoint();
            if part.notes.insert(outpoint, note).is_some() {
                return Err(WalletFileError::DuplicateCoin {
                    txid: outpoint.txid,
                    index: outpoint.index,
                });
            }
        }
        for record in &self.sent_confidential {
            let txid = txid_from(&record.txid, "sent confidential payment txid")?;
            // The error names the transaction only: the string holds the payee's opening.
            let payment = ConfidentialPaymentString::parse(&record.payment_string)
                .map_err(|_| WalletFileError::BadSentPayment { txid })?;
            part.sent_confidential.insert(txid, payment);
        }
        Ok(())
    }

    /// The identity, an enrolment under way, the anonymous notes (each paying the wallet's id,
    /// and if being spent, by one of its pending transactions) and the strings of pending
    /// anonymous payments.
    fn restore_anonymous(&self, part: &mut PrivacyPart, wallet: &Wallet) -> Result<(), WalletFileError> {
        if let Some(record) = &self.identity {
            part.identity = Some(record.to_identity()?);
        }
        if let Some(record) = &self.enrolling {
            let bad = |what| move |_| PrivacyFileError::BadIdentity { what };
            part.enrolling = Some(Enrolling {
                seed: hex32(&record.secret_seed, "enrolment secret seed")?,
                challenge: EnrolmentChallenge::from_text(&record.challenge).map_err(bad("enrolment challenge"))?,
                authority: ra_key_from(&record.registration_authority)?,
            });
        }
        let ours = part.identity.as_ref().map(|enrolled| enrolled.identity.enrolment_id());
        for record in &self.anonymous_notes {
            let note = record.to_note(ours, wallet)?;
            let payment = note.payment;
            if part.anonymous_notes.insert(payment.outpoint(), note).is_some() {
                return Err(WalletFileError::DuplicateCoin {
                    txid: payment.txid,
                    index: payment.index,
                });
            }
        }
        for record in &self.sent_anonymous {
            let txid = txid_from(&record.txid, "sent anonymous payment txid")?;
            let payment = AnonymousPaymentString::parse(&record.payment_string)
                .map_err(|_| WalletFileError::BadSentPayment { txid })?;
            part.sent_anonymous.insert(txid, payment);
        }
        Ok(())
    }
}

impl PrivacyFields {
    /// The unlinkable tokens (each paying the wallet's id, and if being spent, by one of its
    /// pending transactions, which reveals the token's serial number) and the strings of pending
    /// unlinkable payments.
    fn restore_unlinkable(&self, part: &mut PrivacyPart, wallet: &Wallet) -> Result<(), WalletFileError> {
        for record in &self.unlinkable_tokens {
            let token = record.to_token(part.identity.as_ref().map(|e| &e.identity), wallet)?;
            let outpoint = token.payment.outpoint();
            if part.unlinkable_tokens.insert(outpoint, token).is_some() {
                return Err(WalletFileError::DuplicateCoin {
                    txid: outpoint.txid,
                    index: outpoint.index,
                });
            }
        }
        for record in &self.sent_unlinkable {
            let txid = txid_from(&record.txid, "sent unlinkable payment txid")?;
            let payment = UnlinkablePaymentString::parse(&record.payment_string)
                .map_err(|_| WalletFileError::BadSentPayment { txid })?;
            part.sent_unlinkable.insert(txid, payment);
        }
        Ok(())
    }
}

impl UnlinkableTokenRecord {
    fn to_token(&self, ours: Option<&Identity>, wallet: &Wallet) -> Result<UnlinkableToken, WalletFileError> {
        let payment =
            UnlinkablePaymentString::parse(&self.payment_string).map_err(|_| PrivacyFileError::BadIdentity {
                what: "unlinkable token",
            })?;
        let bad = || -> WalletFileError {
            PrivacyFileError::BadUnlinkableToken {
                txid: payment.txid,
                index: payment.index,
            }
            .into()
        };
        let serial = ours
            .and_then(|identity| payment.opening.serial_number(identity))
            .ok_or_else(bad)?;
        let certificate = match &self.certificate {
            None => None,
            Some(text) => Some(
                (hex::decode(text).ok())
                    .and_then(|bytes| Certificate::decode_exact(&bytes).ok())
                    .ok_or_else(bad)?,
            ),
        };
        let spends = |txid: &Txid| {
            wallet.pending_tx(txid).is_some_and(|pending| {
                (pending.tx.capability::<UnlinkableTransaction>())
                    .is_some_and(|tx| tx.proof.serial_numbers().any(|spent| *spent == serial))
            })
        };
        let state = note_state(&self.state, "unlinkable token state txid", spends, |_| bad())?;
        Ok(UnlinkableToken {
            payment,
            certificate,
            state,
        })
    }
}

fn ra_key_from(text: &str) -> Result<RaPublicKey, PrivacyFileError> {
    hex::decode(text)
        .ok()
        .and_then(|bytes| RaPublicKey::decode_exact(&bytes).ok())
        .ok_or(PrivacyFileError::BadIdentity {
            what: "registration authority key",
        })
}

/// A note's state, checked, if it is being spent, to be spent by `txid`'s pending transaction
/// as `spends` says; `spent_by_unknown` is the error otherwise.
fn note_state(
    record: &StateRecord,
    what: &str,
    spends: impl FnOnce(&Txid) -> bool,
    spent_by_unknown: impl FnOnce(Txid) -> WalletFileError,
) -> Result<CoinState, WalletFileError> {
    Ok(match record {
        StateRecord::Spendable => CoinState::Spendable,
        StateRecord::PendingSpend { txid } => {
            let txid = txid_from(txid, what)?;
            if !spends(&txid) {
                return Err(spent_by_unknown(txid));
            }
            CoinState::PendingSpend { txid }
        }
        StateRecord::PendingReceive { txid } => CoinState::PendingReceive {
            txid: txid_from(txid, what)?,
        },
        StateRecord::Missing => CoinState::Missing,
    })
}

impl IdentityRecord {
    fn to_identity(&self) -> Result<EnrolledIdentity, WalletFileError> {
        let seed = hex32(&self.secret_seed, "identity secret seed")?;
        let authority = ra_key_from(&self.registration_authority)?;
        let bad = |_| PrivacyFileError::BadIdentity { what: "credential" };
        let credential = Credential::from_text(&self.credential).map_err(bad)?;
        let identity = Identity::new(UserSecret::from_seed(&seed), credential, &authority)
            .map_err(|_| PrivacyFileError::BadIdentity { what: "credential" })?;
        Ok(EnrolledIdentity {
            seed,
            identity,
            authority,
        })
    }
}

impl AnonymousNoteRecord {
    /// The note, checked to pay enrolment id `ours` and, if being spent, to be spent by one of
    /// `wallet`'s pending transactions.
    fn to_note(
        &self,
        ours: Option<specie_credential::EnrolmentId>,
        wallet: &Wallet,
    ) -> Result<AnonymousNote, WalletFileError> {
        let payment = AnonymousPaymentString::parse(&self.payment_string)
            .map_err(|_| PrivacyFileError::BadIdentity { what: "anonymous note" })?;
        let bad = || -> WalletFileError {
            PrivacyFileError::BadAnonymousNote {
                txid: payment.txid,
                index: payment.index,
            }
            .into()
        };
        if ours != Some(payment.payee()) {
            return Err(bad());
        }
        let input = payment.to_input();
        let spends = |txid: &Txid| {
            wallet.pending_tx(txid).is_some_and(|pending| {
                (pending.tx.capability::<AnonymousTransaction>()).is_some_and(|tx| tx.anonymous_inputs.contains(&input))
            })
        };
        let state = note_state(&self.state, "anonymous note state txid", spends, |_| bad())?;
        Ok(AnonymousNote { payment, state })
    }
}

impl NoteRecord {
    fn from_note(note: &Note) -> Self {
        NoteRecord {
            txid: note.input.prevout.txid.to_string(),
            index: note.input.prevout.index,
            owner: hex::encode(note.input.owner),
            commitment: hex::encode(note.input.commitment),
            value: note.opening.value,
            blinding: hex::encode(note.opening.blinding.as_bytes()),
            uhs_id: note.uhs_id().to_string(),
            state: StateRecord::from(note.state),
        }
    }

    /// The note, checked to open its commitment, to belong to a key of `wallet` and, if marked
    /// as being spent, to be spent by one of `wallet`'s pending transactions.
    fn to_note(&self, wallet: &Wallet) -> Result<Note, WalletFileError> {
        let prevout = OutPoint {
            txid: txid_from(&self.txid, "note txid")?,
            index: self.index,
        };
        let bad = || PrivacyFileError::BadNote {
            txid: prevout.txid,
            index: prevout.index,
        };
        let blinding: Option<[u8; 32]> = hex::decode(&self.blinding).ok().and_then(|bytes| bytes.try_into().ok());
        let blinding = blinding
            .and_then(|bytes| Option::<Scalar>::from(Scalar::from_canonical_bytes(bytes)))
            .ok_or_else(bad)?;
        let opening = Opening {
            value: self.value,
            blinding,
        };
        let input = ConfidentialInput {
            prevout,
            owner: hex32(&self.owner, "note owner")?,
            commitment: hex32(&self.commitment, "note commitment")?,
        };
        if opening.commitment().to_bytes() != input.commitment {
            return Err(bad().into());
        }
        if !wallet.owns(&input.owner) {
            return Err(WalletFileError::NotOwned {
                txid: prevout.txid,
                index: prevout.index,
            });
        }
        let spends = |txid: &Txid| {
            wallet.pending_tx(txid).is_some_and(|pending| {
                (pending.tx.capability::<ConfidentialTransaction>())
                    .is_some_and(|tx| tx.confidential_inputs.contains(&input))
            })
        };
        let spent_by_unknown = |spender| WalletFileError::SpentByUnknown {
            txid: prevout.txid,
            index: prevout.index,
            spender,
        };
        let state = note_state(&self.state, "note state txid", spends, spent_by_unknown)?;
        Ok(Note { input, opening, state })
    }
}
