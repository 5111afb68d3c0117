//! Byte encodings of what the roles say to each other and of an endorser's key material
//! (docs/endorsement-format.md §7): the aggregator's and the endorsers' messages travel between
//! sentinels of a cluster, and a sentinel keeps its share in a file.
//!
//! Every byte decoded here may come from a faulty or hostile peer (mutual TLS authenticates it,
//! it does not make it honest), so each decoder is bounded: counts and lengths are checked
//! against explicit caps and the bytes left before anything is allocated, and a whole message
//! is refused before reading if it exceeds [`Decode::encoded_bytes_max`]. Each value has exactly
//! one encoding: FROST's serializations are re-serialized after decoding and refused unless
//! they reproduce the bytes received, so two peers never disagree on what a message said.

use frost::keys::{KeyPackage, PublicKeyPackage, VerifyingShare};
use frost::round1::SigningCommitments;
use frost::round2::SignatureShare;
use frost::SigningPackage;
use frost_secp256k1_tr as frost;
use specie_codec::{
    put_byte_vec, put_count, put_u32, put_u64, put_vec, Decode, DecodeError, Encode, Reader, U64_BYTES,
};

use crate::keys::{group_key, EndorserId, EndorserKeys, ENDORSERS_MAX};
use crate::merkle::BATCH_TRANSACTIONS_MAX;
use crate::messages::{AggregatorMessage, EndorserMessage, Refusal};

/// The version byte every protocol message starts with.
pub const WIRE_VERSION: u8 = 1;
/// The version byte an encoded [`EndorserKeys`] starts with.
pub const KEYS_VERSION: u8 = 1;

/// FROST's serialization header: its format version byte and the ciphersuite's 4-byte short id.
pub const FROST_HEADER_BYTES: usize = 5;
/// A FROST identifier: one secp256k1 scalar.
pub const FROST_IDENTIFIER_BYTES: usize = 32;
/// A secp256k1 point, SEC1 compressed.
pub const POINT_BYTES: usize = 33;
/// A secp256k1 scalar.
pub const SCALAR_BYTES: usize = 32;
/// FROST's serialization of one endorser's round-1 `SigningCommitments`: header, hiding and
/// binding nonce commitments (71 bytes).
pub const COMMITMENTS_BYTES: usize = FROST_HEADER_BYTES + 2 * POINT_BYTES;
/// FROST's serialization of a `SignatureShare`: one scalar, without a header.
pub const SHARE_BYTES: usize = SCALAR_BYTES;
/// The batch message a signing package carries (`MerkleTree::message`).
pub const BATCH_MESSAGE_BYTES: usize = 32;
/// A `u16` in postcard's variable-length encoding (FROST's `min_signers`) takes up to 3 bytes.
const VARINT_U16_BYTES_MAX: usize = 3;
/// postcard prefixes maps and byte strings with a variable-length count, one byte below 128:
/// at most [`ENDORSERS_MAX`] (64) signers and a 32-byte message stay below it.
pub(crate) const SHORT_COUNT_BYTES: usize = 1;

/// FROST's serialization of a `KeyPackage`: header, identifier, signing share, verifying share,
/// group verifying key, `min_signers` (138 bytes at most).
pub const KEY_PACKAGE_BYTES_MAX: usize =
    FROST_HEADER_BYTES + FROST_IDENTIFIER_BYTES + SCALAR_BYTES + 2 * POINT_BYTES + VARINT_U16_BYTES_MAX;
/// FROST's serialization of a `PublicKeyPackage` of up to [`ENDORSERS_MAX`] endorsers: header,
/// count, (identifier, verifying share) per endorser, group verifying key, optional
/// `min_signers` (4,203 bytes at most).
pub const PUBLIC_KEY_PACKAGE_BYTES_MAX: usize = FROST_HEADER_BYTES
    + SHORT_COUNT_BYTES
    + ENDORSERS_MAX as usize * (FROST_IDENTIFIER_BYTES + POINT_BYTES)
    + POINT_BYTES
    + 1
    + VARINT_U16_BYTES_MAX;
/// The longest text a [`Refusal::Frost`] carries, in bytes.
pub const REFUSAL_TEXT_BYTES_MAX: usize = 256;
/// The longest [`RefusalCode`], in bytes.
pub const REFUSAL_CODE_BYTES_MAX: usize = 64;

/// FROST's serialization of a `SigningPackage` of up to `signers_max` signers (clamped to
/// [`ENDORSERS_MAX`]): header, count, (identifier, commitments) per signer, the message's
/// length and the 32-byte message: `5 + 1 + 103 × signers + 1 + 32` bytes (6,631 for 64).
pub const fn signing_package_bytes_max(signers_max: u16) -> usize {
    let signers = if signers_max < ENDORSERS_MAX {
        signers_max
    } else {
        ENDORSERS_MAX
    } as usize;
    FROST_HEADER_BYTES
        + SHORT_COUNT_BYTES
        + signers * (FROST_IDENTIFIER_BYTES + COMMITMENTS_BYTES)
        + SHORT_COUNT_BYTES
        + BATCH_MESSAGE_BYTES
}

const TAG_COMMIT: u8 = 1;
const TAG_SIGN: u8 = 2;

const TAG_COMMITMENTS: u8 = 1;
const TAG_SHARE: u8 = 2;
const TAG_REFUSED: u8 = 3;

const TAG_INVALID: u8 = 1;
const TAG_UNKNOWN_SESSION: u8 = 2;
const TAG_SESSION_REUSED: u8 = 3;
const TAG_WRONG_MESSAGE: u8 = 4;
const TAG_WRONG_COMMITMENTS: u8 = 5;
const TAG_BAD_BATCH_SIZE: u8 = 6;
const TAG_FROST: u8 = 7;

/// Version, tag and session: the head of every protocol message.
const MESSAGE_HEAD_BYTES: usize = 1 + 1 + U64_BYTES;
/// A refused item's index in the batch.
const INDEX_BYTES: usize = 4;

/// The bounds an [`AggregatorMessage`] is decoded within.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageLimits<L> {
    /// The bounds of one batch item.
    pub items: L,
    /// The most items a `Sign` carries; above [`BATCH_TRANSACTIONS_MAX`] counts as it.
    pub batch_items_max: u32,
    /// The most signers a signing package carries; above [`ENDORSERS_MAX`] counts as it.
    pub signers_max: u16,
}

impl<L> MessageLimits<L> {
    fn batch_items(&self) -> u32 {
        self.batch_items_max.min(BATCH_TRANSACTIONS_MAX as u32)
    }

    fn signers(&self) -> u16 {
        self.signers_max.min(ENDORSERS_MAX)
    }
}

impl<L: Default> Default for MessageLimits<L> {
    fn default() -> Self {
        MessageLimits {
            items: L::default(),
            batch_items_max: BATCH_TRANSACTIONS_MAX as u32,
            signers_max: ENDORSERS_MAX,
        }
    }
}

/// The bounds an [`EndorserMessage`] (or a [`Refusal`]) is decoded within.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyLimits<L> {
    /// The bounds of one refusal reason.
    pub reasons: L,
    /// The most items a `Refusal::Invalid` names; above [`BATCH_TRANSACTIONS_MAX`] counts as it.
    pub refused_items_max: u32,
}

impl<L> ReplyLimits<L> {
    fn refused_items(&self) -> u32 {
        self.refused_items_max.min(BATCH_TRANSACTIONS_MAX as u32)
    }
}

impl<L: Default> Default for ReplyLimits<L> {
    fn default() -> Self {
        ReplyLimits {
            reasons: L::default(),
            refused_items_max: BATCH_TRANSACTIONS_MAX as u32,
        }
    }
}

/// `text` cut to at most [`REFUSAL_TEXT_BYTES_MAX`] bytes at a character boundary, so that it
/// fits a [`Refusal::Frost`] on the wire.
pub fn refusal_text(text: &str) -> String {
    truncated(text).to_string()
}

fn truncated(text: &str) -> &str {
    let mut end = text.len().min(REFUSAL_TEXT_BYTES_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Why a validator refused an item, as it travels: 1 to 64 bytes of `[a-z0-9_]` (a sentinel's
/// `ValidationError::code()`), so a hostile endorser cannot make an aggregator log or store
/// arbitrary text.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RefusalCode(String);

impl RefusalCode {
    /// `code`, if it is 1 to [`REFUSAL_CODE_BYTES_MAX`] bytes of `[a-z0-9_]`.
    pub fn new(code: &str) -> Option<RefusalCode> {
        let allowed = |byte: &u8| byte.is_ascii_lowercase() || byte.is_ascii_digit() || *byte == b'_';
        let fits = (1..=REFUSAL_CODE_BYTES_MAX).contains(&code.len());
        (fits && code.as_bytes().iter().all(allowed)).then(|| RefusalCode(code.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RefusalCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Encode for RefusalCode {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_byte_vec(out, self.0.as_bytes());
    }
}

impl Decode for RefusalCode {
    type Limits = ();
    const WHAT: &'static str = "refusal code";

    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        let bytes = reader.read_byte_vec(Self::WHAT, REFUSAL_CODE_BYTES_MAX as u64)?;
        std::str::from_utf8(bytes)
            .ok()
            .and_then(RefusalCode::new)
            .ok_or_else(|| DecodeError::Invalid {
                what: Self::WHAT,
                reason: "a refusal code is 1 to 64 bytes of [a-z0-9_]".to_string(),
            })
    }

    fn encoded_bytes_max(_limits: &()) -> usize {
        U64_BYTES + REFUSAL_CODE_BYTES_MAX
    }
}

/// Reads a length-prefixed FROST serialization of at most `bytes_max` bytes and refuses it
/// unless FROST serializes what it decoded to exactly those bytes.
pub(crate) fn read_frost<T>(
    reader: &mut Reader<'_>,
    what: &'static str,
    bytes_max: usize,
    deserialize: impl FnOnce(&[u8]) -> Result<T, frost::Error>,
    serialize: impl FnOnce(&T) -> Result<Vec<u8>, frost::Error>,
) -> Result<T, DecodeError> {
    let bytes = reader.read_byte_vec(what, bytes_max as u64)?;
    frost_canonical(bytes, what, deserialize, serialize)
}

/// FROST's value of `bytes`, refused unless FROST serializes it back to exactly `bytes`.
pub(crate) fn frost_canonical<T>(
    bytes: &[u8],
    what: &'static str,
    deserialize: impl FnOnce(&[u8]) -> Result<T, frost::Error>,
    serialize: impl FnOnce(&T) -> Result<Vec<u8>, frost::Error>,
) -> Result<T, DecodeError> {
    let value = deserialize(bytes).map_err(|error| DecodeError::Invalid {
        what,
        reason: error.to_string(),
    })?;
    match serialize(&value) {
        Ok(again) if again == bytes => Ok(value),
        _ => Err(DecodeError::NonCanonical {
            what,
            reason: "FROST serializes the decoded value to other bytes",
        }),
    }
}

fn read_signing_package(reader: &mut Reader<'_>, signers_max: u16) -> Result<SigningPackage, DecodeError> {
    const WHAT: &str = "signing package";
    let package = read_frost(
        reader,
        WHAT,
        signing_package_bytes_max(signers_max),
        SigningPackage::deserialize,
        SigningPackage::serialize,
    )?;
    let signers = package.signing_commitments().len();
    if signers == 0 || signers > usize::from(signers_max) {
        return Err(DecodeError::Invalid {
            what: WHAT,
            reason: format!("{signers} signers, not 1 to {signers_max}"),
        });
    }
    // Anything else is not a batch message, and the cap above assumes 32 bytes.
    if package.message().len() != BATCH_MESSAGE_BYTES {
        return Err(DecodeError::Invalid {
            what: WHAT,
            reason: format!(
                "a {}-byte message, not a 32-byte batch message",
                package.message().len()
            ),
        });
    }
    Ok(package)
}

impl<I: Encode> Encode for AggregatorMessage<I> {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(WIRE_VERSION);
        match self {
            AggregatorMessage::Commit { session } => {
                out.push(TAG_COMMIT);
                put_u64(out, *session);
            }
            AggregatorMessage::Sign {
                session,
                items,
                package,
            } => {
                out.push(TAG_SIGN);
                put_u64(out, *session);
                put_vec(out, items);
                let package = package
                    .serialize()
                    .expect("a signing package holds commitments FROST made or decoded, never the identity");
                put_byte_vec(out, &package);
            }
        }
    }
}

impl<I: Decode> Decode for AggregatorMessage<I> {
    type Limits = MessageLimits<I::Limits>;
    const WHAT: &'static str = "coordinator message";

    fn decode_from(reader: &mut Reader<'_>, limits: &Self::Limits) -> Result<Self, DecodeError> {
        reader.read_version("coordinator message version", WIRE_VERSION)?;
        let tag = reader.read_u8("coordinator message kind")?;
        if tag != TAG_COMMIT && tag != TAG_SIGN {
            return Err(DecodeError::UnknownKind {
                what: Self::WHAT,
                kind: tag,
            });
        }
        let session = reader.read_u64("coordinator message session")?;
        if tag == TAG_COMMIT {
            return Ok(AggregatorMessage::Commit { session });
        }
        // Items are at least one byte each: read_vec checks the count against the bytes left.
        let items = reader.read_vec("batch items", u64::from(limits.batch_items()), 1, |reader| {
            I::decode_from(reader, &limits.items)
        })?;
        let package = read_signing_package(reader, limits.signers())?;
        Ok(AggregatorMessage::Sign {
            session,
            items,
            package,
        })
    }

    fn encoded_bytes_max(limits: &Self::Limits) -> usize {
        let items_bytes = (limits.batch_items() as usize).saturating_mul(I::encoded_bytes_max(&limits.items));
        (MESSAGE_HEAD_BYTES + U64_BYTES + U64_BYTES + signing_package_bytes_max(limits.signers()))
            .saturating_add(items_bytes)
    }
}

impl<R: Encode> Encode for Refusal<R> {
    fn encode_to(&self, out: &mut Vec<u8>) {
        match self {
            Refusal::Invalid { items } => {
                out.push(TAG_INVALID);
                put_count(out, items.len());
                for (index, reason) in items {
                    put_u32(out, *index);
                    reason.encode_to(out);
                }
            }
            Refusal::UnknownSession => out.push(TAG_UNKNOWN_SESSION),
            Refusal::SessionReused => out.push(TAG_SESSION_REUSED),
            Refusal::WrongMessage => out.push(TAG_WRONG_MESSAGE),
            Refusal::WrongCommitments => out.push(TAG_WRONG_COMMITMENTS),
            Refusal::BadBatchSize { items, items_max } => {
                out.push(TAG_BAD_BATCH_SIZE);
                put_u64(out, *items as u64);
                put_u64(out, *items_max as u64);
            }
            Refusal::Frost(text) => {
                out.push(TAG_FROST);
                // Cut here too, so that whatever a caller built encodes to decodable bytes.
                put_byte_vec(out, truncated(text).as_bytes());
            }
        }
    }
}

fn read_refused_items<R: Decode>(
    reader: &mut Reader<'_>,
    limits: &ReplyLimits<R::Limits>,
) -> Result<Vec<(u32, R)>, DecodeError> {
    const WHAT: &str = "refused items";
    let count = reader.read_count(WHAT, u64::from(limits.refused_items()), INDEX_BYTES)?;
    if count == 0 {
        return Err(DecodeError::Invalid {
            what: WHAT,
            reason: "an invalid-items refusal names at least one item".to_string(),
        });
    }
    let mut items: Vec<(u32, R)> = Vec::with_capacity(count);
    for _ in 0..count {
        let index = reader.read_u32("refused item index")?;
        // Increasing, as the endorser lists them: one encoding per set of refused items.
        if items.last().is_some_and(|(previous, _)| *previous >= index) {
            return Err(DecodeError::NonCanonical {
                what: WHAT,
                reason: "indices must increase strictly",
            });
        }
        items.push((index, R::decode_from(reader, &limits.reasons)?));
    }
    Ok(items)
}

fn read_usize(reader: &mut Reader<'_>, what: &'static str) -> Result<usize, DecodeError> {
    let value = reader.read_u64(what)?;
    usize::try_from(value).map_err(|_| DecodeError::Invalid {
        what,
        reason: format!("{value} does not fit this platform's usize"),
    })
}

impl<R: Decode> Decode for Refusal<R> {
    type Limits = ReplyLimits<R::Limits>;
    const WHAT: &'static str = "refusal";

    fn decode_from(reader: &mut Reader<'_>, limits: &Self::Limits) -> Result<Self, DecodeError> {
        Ok(match reader.read_u8("refusal kind")? {
            TAG_INVALID => Refusal::Invalid {
                items: read_refused_items(reader, limits)?,
            },
            TAG_UNKNOWN_SESSION => Refusal::UnknownSession,
            TAG_SESSION_REUSED => Refusal::SessionReused,
            TAG_WRONG_MESSAGE => Refusal::WrongMessage,
            TAG_WRONG_COMMITMENTS => Refusal::WrongCommitments,
            TAG_BAD_BATCH_SIZE => Refusal::BadBatchSize {
                items: read_usize(reader, "refused batch size")?,
                items_max: read_usize(reader, "refused batch size limit")?,
            },
            TAG_FROST => {
                let bytes = reader.read_byte_vec("FROST refusal text", REFUSAL_TEXT_BYTES_MAX as u64)?;
                let text = std::str::from_utf8(bytes).map_err(|_| DecodeError::Invalid {
                    what: "FROST refusal text",
                    reason: "not UTF-8".to_string(),
                })?;
                Refusal::Frost(text.to_string())
            }
            kind => return Err(DecodeError::UnknownKind { what: Self::WHAT, kind }),
        })
    }

    fn encoded_bytes_max(limits: &Self::Limits) -> usize {
        let item_bytes = INDEX_BYTES.saturating_add(R::encoded_bytes_max(&limits.reasons));
        let invalid = U64_BYTES.saturating_add((limits.refused_items() as usize).saturating_mul(item_bytes));
        let bad_batch_size = 2 * U64_BYTES;
        let frost = U64_BYTES + REFUSAL_TEXT_BYTES_MAX;
        1 + invalid.max(bad_batch_size).max(frost)
    }
}

impl<R: Encode> Encode for EndorserMessage<R> {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(WIRE_VERSION);
        match self {
            EndorserMessage::Commitments { session, commitments } => {
                out.push(TAG_COMMITMENTS);
                put_u64(out, *session);
                let bytes = commitments
                    .serialize()
                    .expect("commitments FROST made or decoded are never the identity");
                put_byte_vec(out, &bytes);
            }
            EndorserMessage::Share { session, share } => {
                out.push(TAG_SHARE);
                put_u64(out, *session);
                put_byte_vec(out, &share.serialize());
            }
            EndorserMessage::Refused { session, refusal } => {
                out.push(TAG_REFUSED);
                put_u64(out, *session);
                refusal.encode_to(out);
            }
        }
    }
}

impl<R: Decode> Decode for EndorserMessage<R> {
    type Limits = ReplyLimits<R::Limits>;
    const WHAT: &'static str = "endorser message";

    fn decode_from(reader: &mut Reader<'_>, limits: &Self::Limits) -> Result<Self, DecodeError> {
        reader.read_version("endorser message version", WIRE_VERSION)?;
        let tag = reader.read_u8("endorser message kind")?;
        if !(TAG_COMMITMENTS..=TAG_REFUSED).contains(&tag) {
            return Err(DecodeError::UnknownKind {
                what: Self::WHAT,
                kind: tag,
            });
        }
        let session = reader.read_u64("endorser message session")?;
        Ok(match tag {
            TAG_COMMITMENTS => EndorserMessage::Commitments {
                session,
                commitments: Box::new(read_frost(
                    reader,
                    "signing commitments",
                    COMMITMENTS_BYTES,
                    SigningCommitments::deserialize,
                    SigningCommitments::serialize,
                )?),
            },
            TAG_SHARE => EndorserMessage::Share {
                session,
                share: read_frost(
                    reader,
                    "signature share",
                    SHARE_BYTES,
                    SignatureShare::deserialize,
                    |share| Ok(share.serialize()),
                )?,
            },
            _ => EndorserMessage::Refused {
                session,
                refusal: Refusal::decode_from(reader, limits)?,
            },
        })
    }

    fn encoded_bytes_max(limits: &Self::Limits) -> usize {
        let commitments = U64_BYTES + COMMITMENTS_BYTES;
        let share = U64_BYTES + SHARE_BYTES;
        let refused = Refusal::<R>::encoded_bytes_max(limits);
        MESSAGE_HEAD_BYTES.saturating_add(commitments.max(share).max(refused))
    }
}

impl Encode for EndorserKeys {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(KEYS_VERSION);
        out.extend_from_slice(&self.id.0.to_le_bytes());
        let share = self
            .share
            .serialize()
            .expect("a key package's points were checked when it was made");
        put_byte_vec(out, &share);
        let public = self
            .public
            .serialize()
            .expect("a public key package's points were checked when it was made");
        put_byte_vec(out, &public);
    }
}

impl Decode for EndorserKeys {
    type Limits = ();
    const WHAT: &'static str = "endorser keys";

    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        reader.read_version("endorser keys version", KEYS_VERSION)?;
        let id = u16::from_le_bytes(reader.read_array::<2>("endorser id")?);
        if !(1..=ENDORSERS_MAX).contains(&id) {
            return Err(DecodeError::Invalid {
                what: "endorser id",
                reason: format!("{id} is not between 1 and {ENDORSERS_MAX}"),
            });
        }
        let share = read_frost(
            reader,
            "key package",
            KEY_PACKAGE_BYTES_MAX,
            KeyPackage::deserialize,
            KeyPackage::serialize,
        )?;
        let public = read_frost(
            reader,
            "public key package",
            PUBLIC_KEY_PACKAGE_BYTES_MAX,
            PublicKeyPackage::deserialize,
            PublicKeyPackage::serialize,
        )?;
        let keys = EndorserKeys {
            id: EndorserId(id),
            share,
            public,
        };
        check_keys(&keys).map_err(|reason| DecodeError::Invalid {
            what: Self::WHAT,
            reason: reason.to_string(),
        })?;
        Ok(keys)
    }

    fn encoded_bytes_max(_limits: &()) -> usize {
        1 + 2 + U64_BYTES + KEY_PACKAGE_BYTES_MAX + U64_BYTES + PUBLIC_KEY_PACKAGE_BYTES_MAX
    }
}

/// Whether a share, its id and a public package belong together: a file holding another
/// endorser's share, or another group's (or refresh period's) public package, would make an
/// endorser whose every share fails the aggregator's check.
fn check_keys(keys: &EndorserKeys) -> Result<(), &'static str> {
    let (share, public) = (&keys.share, &keys.public);
    if *share.identifier() != keys.id.identifier() {
        return Err("the key package belongs to another endorser id");
    }
    if VerifyingShare::from(*share.signing_share()) != *share.verifying_share() {
        return Err("the key package's verifying share is not its signing share's");
    }
    if share.verifying_key() != public.verifying_key() {
        return Err("the key package's group key is not the public package's");
    }
    if group_key(public).is_err() {
        return Err("the public package's group key is not a valid BIP340 key");
    }
    if public.verifying_shares().len() > usize::from(ENDORSERS_MAX) {
        return Err("the public package holds more than ENDORSERS_MAX verifying shares");
    }
    if public.verifying_shares().get(share.identifier()) != Some(share.verifying_share()) {
        return Err("the public package does not hold this endorser's verifying share");
    }
    if public.min_signers().is_some_and(|k| k != *share.min_signers()) {
        return Err("the key package's threshold is not the public package's");
    }
    Ok(())
}
