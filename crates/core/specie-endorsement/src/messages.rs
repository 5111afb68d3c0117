//! What the aggregator and the endorsers say to each other, and what a validator plugs in.
//!
//! These are typed values handed to the roles by their hosts, which decode and authenticate
//! them (every internal connection is mutually authenticated, docs/wire-protocol.md §6); the
//! FROST values inside carry FROST's own serialization.

use std::fmt::Debug;

use frost::round1::SigningCommitments;
use frost::round2::SignatureShare;
use frost::SigningPackage;
use frost_secp256k1_tr as frost;

use crate::merkle::Hash;

/// One signing attempt of one aggregator. An aggregator never reuses one; an endorser answers
/// a repeated request within a session identically and refuses a different one.
pub type SessionId = u64;

/// Identifies an aggregator to an endorser (chosen by the deployment).
pub type AggregatorId = u32;

/// A transaction as a batch carries it: the aggregator only needs its digest.
pub trait BatchItem: Clone + Debug {
    /// The 32-byte digest the batch's Merkle tree commits to. For the online core, the compact
    /// transaction's attestation message (docs/transaction-format.md §2).
    fn digest(&self) -> Hash;
}

/// A bare digest is its own item: for endorsing digests whose validation happened elsewhere.
impl BatchItem for Hash {
    fn digest(&self) -> Hash {
        *self
    }
}

/// Why a validator refuses an item: any cloneable, comparable, printable value.
pub trait Reason: Clone + Debug + PartialEq {}

impl<T: Clone + Debug + PartialEq> Reason for T {}

/// An endorser's validation of what it is asked to sign: the sentinel's transaction checks plug
/// in here. It runs on the items the endorser received, never on digests the aggregator
/// computed, so an aggregator cannot slip a transaction past it.
pub trait Validator {
    type Item: BatchItem;
    /// Why an item is refused (the sentinel's refusal reason).
    type Reason: Reason;

    /// Whether this endorser would attest `item` on its own.
    fn validate(&mut self, item: &Self::Item) -> Result<(), Self::Reason>;
}

/// What an aggregator asks an endorser.
#[derive(Clone, Debug, PartialEq)]
pub enum AggregatorMessage<I> {
    /// Round 1: make fresh nonces for `session` and send their commitments.
    Commit { session: SessionId },
    /// Round 2: sign the batch `items`, whose batch message `package` carries together with the
    /// commitments of the chosen signers.
    Sign {
        session: SessionId,
        items: Vec<I>,
        package: SigningPackage,
    },
}

/// What an endorser answers an aggregator.
#[derive(Clone, Debug, PartialEq)]
pub enum EndorserMessage<R> {
    /// Boxed: commitments are two points, ten times the other answers.
    Commitments {
        session: SessionId,
        commitments: Box<SigningCommitments>,
    },
    Share {
        session: SessionId,
        share: SignatureShare,
    },
    Refused {
        session: SessionId,
        refusal: Refusal<R>,
    },
}

impl<R> EndorserMessage<R> {
    pub fn session(&self) -> SessionId {
        match self {
            EndorserMessage::Commitments { session, .. }
            | EndorserMessage::Share { session, .. }
            | EndorserMessage::Refused { session, .. } => *session,
        }
    }
}

/// Why an endorser did not sign.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal<R> {
    /// These items (by index in the batch) failed the endorser's validation.
    Invalid { items: Vec<(u32, R)> },
    /// The endorser holds no nonces for the session (never asked, expired or evicted).
    UnknownSession,
    /// The endorser already signed a different package in this session: signing again would
    /// reuse its nonces, which reveals its share.
    SessionReused,
    /// The package's message is not the batch message of the items sent with it.
    WrongMessage,
    /// The package does not carry this endorser's commitments for the session.
    WrongCommitments,
    /// The batch is empty or larger than the endorser accepts.
    BadBatchSize { items: usize, items_max: usize },
    /// FROST refused to sign (e.g. fewer than k signers in the package): its error's text, at
    /// most [`crate::wire::REFUSAL_TEXT_BYTES_MAX`] bytes, since a `frost::Error` cannot be
    /// rebuilt from bytes received from another process.
    Frost(String),
}
