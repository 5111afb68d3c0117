//! Threshold endorsement (Fabric CBDC's endorsement policy, seed 003; issue 12): a transaction
//! is valid for the online core when k of the n endorsers (sentinels) signed it, as one FROST
//! signature that is an ordinary BIP340 signature under the group's x-only key.
//!
//! Endorsers sign batches: the Merkle root of a batch of transaction digests ([`merkle`]), and
//! every transaction carries the batch's signature and its path ([`Endorsement`], format in
//! docs/endorsement-format.md). A shard, the atomizer or an auditor checks one signature per
//! batch ([`EndorsementVerifier`]) and a path per transaction.
//!
//! The protocol roles are pure state machines behind `specie_role::Role`: the [`Aggregator`]
//! (batches, FROST's two rounds, time-outs and retries with another k-subset), the [`Endorser`]
//! (validates through a [`Validator`], keeps its nonces, never reuses one) and the [`Ceremony`]
//! (distributed key generation and proactive refresh, three rounds each). Randomness comes in
//! as seeds from the host; nothing here reads a clock, a socket or a file.

pub mod aggregator;
pub mod ceremony;
pub mod ceremony_wire;
pub mod endorser;
pub mod format;
pub mod keys;
pub mod merkle;
pub mod messages;
pub mod replies;
pub mod wire;

pub use aggregator::{Aggregator, AggregatorConfig, AggregatorInput, AggregatorReport, EndorseReply};
pub use ceremony::{
    run_together, Ceremony, CeremonyError, CeremonyInput, CeremonyKind, CeremonyMessage, CeremonyReport, Confirmation,
};
pub use ceremony_wire::{
    round1_package_bytes_max, CEREMONY_VERSION, CONFIRMATION_BYTES, PROOF_OF_KNOWLEDGE_BYTES, ROUND1_PACKAGE_BYTES_MAX,
    ROUND2_PACKAGE_BYTES,
};
pub use endorser::{Endorser, EndorserConfig, EndorserInput, EndorserReport};
pub use format::{
    Endorsement, EndorsementVerifier, GroupKey, VerifyError, ENDORSEMENT_BYTES_MAX, ENDORSEMENT_BYTES_MIN,
    ENDORSEMENT_VERSION, SIGNATURE_BYTES,
};
pub use frost_secp256k1_tr as frost;
pub use keys::{deal, group_key, sign_together, EndorserId, EndorserKeys, KeyError, Threshold, ENDORSERS_MAX};
pub use merkle::{Hash, MerkleTree, BATCH_TRANSACTIONS_MAX, PATH_SIBLINGS_MAX};
pub use messages::{
    AggregatorId, AggregatorMessage, BatchItem, EndorserMessage, Reason, Refusal, SessionId, Validator,
};
pub use replies::{Answered, Replies};
pub use wire::{
    refusal_text, signing_package_bytes_max, MessageLimits, RefusalCode, ReplyLimits, COMMITMENTS_BYTES, KEYS_VERSION,
    KEY_PACKAGE_BYTES_MAX, PUBLIC_KEY_PACKAGE_BYTES_MAX, REFUSAL_CODE_BYTES_MAX, REFUSAL_TEXT_BYTES_MAX, SHARE_BYTES,
    WIRE_VERSION,
};
