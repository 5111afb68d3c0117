use specie_transaction::UhsId;

use crate::DtxnId;

/// One compact transaction as one shard sees it: only the ids this shard owns.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ShardTx {
    /// Position of the transaction in its dtxn, so coordinator and shard agree on which is which.
    pub index: u32,
    pub spent: Vec<UhsId>,
    pub created: Vec<UhsId>,
}

/// Everything a coordinator asks of a shard. Each is made durable before it is applied.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ShardRequest {
    /// Lock the inputs (and reserve the outputs) of every transaction whose ids are all free.
    Prepare { dtxn: DtxnId, txs: Vec<ShardTx> },
    /// One flag per transaction of this shard's prepare, in the same order: true applies the
    /// swap, false only releases what was locked.
    Commit { dtxn: DtxnId, complete: Vec<bool> },
    /// The coordinator has every commit answer: forget the dtxn. `finished_below` is the
    /// coordinator's watermark: every dtxn below it is finished, so late duplicates of their
    /// requests can be recognised without remembering each one forever.
    Discard { dtxn: DtxnId, finished_below: DtxnId },
}

impl ShardRequest {
    pub fn dtxn(&self) -> DtxnId {
        match self {
            ShardRequest::Prepare { dtxn, .. }
            | ShardRequest::Commit { dtxn, .. }
            | ShardRequest::Discard { dtxn, .. } => *dtxn,
        }
    }
}

/// A shard's verdict on one transaction at prepare.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[repr(u8)]
pub enum Vote {
    /// Every owned input was present and free and is now locked; every owned output was absent
    /// and free and is now reserved.
    Yes = 0,
    /// An input is not in the UHS: already spent, or never existed.
    InputMissing = 1,
    /// An input is locked by a transaction in flight (a concurrent conflicting spend).
    InputLocked = 2,
    /// An output already exists: only a replayed mint can do this.
    OutputExists = 3,
    /// An output is reserved by a transaction in flight (the same mint submitted twice at once).
    OutputLocked = 4,
}

impl Vote {
    pub fn from_u8(byte: u8) -> Option<Vote> {
        Some(match byte {
            0 => Vote::Yes,
            1 => Vote::InputMissing,
            2 => Vote::InputLocked,
            3 => Vote::OutputExists,
            4 => Vote::OutputLocked,
            _ => return None,
        })
    }

    /// Stable machine-readable name, used in APIs and summaries.
    pub fn code(self) -> &'static str {
        match self {
            Vote::Yes => "ok",
            Vote::InputMissing => "input_spent_or_unknown",
            Vote::InputLocked => "input_locked_by_concurrent_spend",
            Vote::OutputExists => "output_already_exists",
            Vote::OutputLocked => "output_locked_by_concurrent_transaction",
        }
    }
}

/// A shard's answer to one request.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ShardResponse {
    Prepared {
        dtxn: DtxnId,
        votes: Vec<Vote>,
    },
    Committed {
        dtxn: DtxnId,
    },
    Discarded {
        dtxn: DtxnId,
    },
    /// The request is for a dtxn this shard has already discarded: a duplicate or late message.
    Stale {
        dtxn: DtxnId,
    },
    /// The request breaks the protocol (misrouted id, wrong phase, bad lengths). Nothing changed.
    Refused {
        dtxn: DtxnId,
        reason: Refusal,
    },
}

impl ShardResponse {
    pub fn dtxn(&self) -> DtxnId {
        match self {
            ShardResponse::Prepared { dtxn, .. }
            | ShardResponse::Committed { dtxn }
            | ShardResponse::Discarded { dtxn }
            | ShardResponse::Stale { dtxn }
            | ShardResponse::Refused { dtxn, .. } => *dtxn,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum Refusal {
    #[error("an id in the request is owned by another shard")]
    NotOwned,
    #[error("commit names a dtxn this shard never prepared")]
    NotPrepared,
    #[error("commit flag count does not match the prepared transactions")]
    CommitLengthMismatch,
    #[error("commit completes a transaction this shard voted against")]
    CompletesRejected,
    #[error("prepare lists transaction indexes out of order or twice")]
    BadTxIndexes,
    #[error("discard names a dtxn that is not committed")]
    DiscardBeforeCommit,
    /// A discard's `finished_below` would forget a dtxn this shard has prepared but not yet
    /// committed (its locks would leak forever). Refused with nothing changed, so a forged or
    /// buggy watermark cannot take the shard group down.
    #[error("discard's watermark passes a dtxn that is prepared but not committed")]
    WatermarkPassesUncommitted,
}

impl Refusal {
    pub fn from_u8(byte: u8) -> Option<Refusal> {
        Some(match byte {
            0 => Refusal::NotOwned,
            1 => Refusal::NotPrepared,
            2 => Refusal::CommitLengthMismatch,
            3 => Refusal::CompletesRejected,
            4 => Refusal::BadTxIndexes,
            5 => Refusal::DiscardBeforeCommit,
            6 => Refusal::WatermarkPassesUncommitted,
            _ => return None,
        })
    }

    pub fn to_u8(self) -> u8 {
        match self {
            Refusal::NotOwned => 0,
            Refusal::NotPrepared => 1,
            Refusal::CommitLengthMismatch => 2,
            Refusal::CompletesRejected => 3,
            Refusal::BadTxIndexes => 4,
            Refusal::DiscardBeforeCommit => 5,
            Refusal::WatermarkPassesUncommitted => 6,
        }
    }
}

/// Bounds on decoded shard messages. A prepare carries at most one dtxn's transactions.
#[derive(Clone, Copy, Debug)]
pub struct ShardWireLimits {
    pub dtxn_transactions_max: u64,
    /// Per transaction and per side (spent or created) at one shard.
    pub tx_ids_max: u64,
}

impl Default for ShardWireLimits {
    fn default() -> Self {
        let transaction = specie_transaction::DecodeLimits::default();
        ShardWireLimits {
            dtxn_transactions_max: 100_000,
            // A mint creates one id more than it has outputs (its replay marker).
            tx_ids_max: transaction.inputs_max.max(transaction.outputs_max) + 1,
        }
    }
}

mod codec {
    use specie_codec::{put_count, put_u64, put_vec, Decode, DecodeError, Encode, Reader};
    use specie_transaction::UhsId;

    use super::{Refusal, ShardRequest, ShardResponse, ShardTx, ShardWireLimits, Vote};

    const UHS_ID_BYTES: usize = 32;
    const REQUEST_PREPARE: u8 = 0;
    const REQUEST_COMMIT: u8 = 1;
    const REQUEST_DISCARD: u8 = 2;
    const RESPONSE_PREPARED: u8 = 0;
    const RESPONSE_COMMITTED: u8 = 1;
    const RESPONSE_DISCARDED: u8 = 2;
    const RESPONSE_STALE: u8 = 3;
    const RESPONSE_REFUSED: u8 = 4;

    impl Encode for ShardTx {
        fn encode_to(&self, out: &mut Vec<u8>) {
            put_u64(out, u64::from(self.index));
            put_vec(out, &self.spent);
            put_vec(out, &self.created);
        }
    }

    pub(crate) fn read_ids(reader: &mut Reader<'_>, what: &'static str, max: u64) -> Result<Vec<UhsId>, DecodeError> {
        reader.read_vec(what, max, UHS_ID_BYTES, |r| UhsId::decode_from(r, &()))
    }

    impl Decode for ShardTx {
        type Limits = ShardWireLimits;
        const WHAT: &'static str = "shard transaction";

        fn decode_from(reader: &mut Reader<'_>, limits: &ShardWireLimits) -> Result<Self, DecodeError> {
            let index = reader.read_u64("shard transaction index")?;
            let index = u32::try_from(index).map_err(|_| DecodeError::CountTooLarge {
                what: "shard transaction index",
                count: index,
                max: u32::MAX.into(),
            })?;
            Ok(ShardTx {
                index,
                spent: read_ids(reader, "shard transaction spent ids", limits.tx_ids_max)?,
                created: read_ids(reader, "shard transaction created ids", limits.tx_ids_max)?,
            })
        }

        fn encoded_bytes_max(limits: &ShardWireLimits) -> usize {
            let ids = 2 * u128::from(limits.tx_ids_max) * UHS_ID_BYTES as u128;
            (24 + ids).min(usize::MAX as u128 / 2) as usize
        }
    }

    impl Encode for ShardRequest {
        fn encode_to(&self, out: &mut Vec<u8>) {
            match self {
                ShardRequest::Prepare { dtxn, txs } => {
                    out.push(REQUEST_PREPARE);
                    put_u64(out, *dtxn);
                    put_vec(out, txs);
                }
                ShardRequest::Commit { dtxn, complete } => {
                    out.push(REQUEST_COMMIT);
                    put_u64(out, *dtxn);
                    put_count(out, complete.len());
                    out.extend(complete.iter().map(|&done| u8::from(done)));
                }
                ShardRequest::Discard { dtxn, finished_below } => {
                    out.push(REQUEST_DISCARD);
                    put_u64(out, *dtxn);
                    put_u64(out, *finished_below);
                }
            }
        }
    }

    impl Decode for ShardRequest {
        type Limits = ShardWireLimits;
        const WHAT: &'static str = "shard request";

        fn decode_from(reader: &mut Reader<'_>, limits: &ShardWireLimits) -> Result<Self, DecodeError> {
            let kind = reader.read_u8("shard request kind")?;
            let dtxn = reader.read_u64("dtxn id")?;
            Ok(match kind {
                REQUEST_PREPARE => {
                    // Smallest shard transaction: index and two empty id vectors.
                    let txs = reader.read_vec("prepare transactions", limits.dtxn_transactions_max, 24, |r| {
                        ShardTx::decode_from(r, limits)
                    })?;
                    ShardRequest::Prepare { dtxn, txs }
                }
                REQUEST_COMMIT => {
                    let flags = reader.read_byte_vec("commit flags", limits.dtxn_transactions_max)?;
                    let complete = flags
                        .iter()
                        .map(|&flag| Reader::new(&[flag]).read_bool("commit flag"))
                        .collect::<Result<_, _>>()?;
                    ShardRequest::Commit { dtxn, complete }
                }
                REQUEST_DISCARD => ShardRequest::Discard {
                    dtxn,
                    finished_below: reader.read_u64("finished_below")?,
                },
                kind => {
                    return Err(DecodeError::UnknownKind {
                        what: "shard request",
                        kind,
                    })
                }
            })
        }

        fn encoded_bytes_max(limits: &ShardWireLimits) -> usize {
            let tx = ShardTx::encoded_bytes_max(limits) as u128;
            (17 + u128::from(limits.dtxn_transactions_max) * tx).min(usize::MAX as u128 / 2) as usize
        }
    }

    impl Encode for ShardResponse {
        fn encode_to(&self, out: &mut Vec<u8>) {
            match self {
                ShardResponse::Prepared { dtxn, votes } => {
                    out.push(RESPONSE_PREPARED);
                    put_u64(out, *dtxn);
                    put_votes(out, votes);
                }
                ShardResponse::Committed { dtxn } => {
                    out.push(RESPONSE_COMMITTED);
                    put_u64(out, *dtxn);
                }
                ShardResponse::Discarded { dtxn } => {
                    out.push(RESPONSE_DISCARDED);
                    put_u64(out, *dtxn);
                }
                ShardResponse::Stale { dtxn } => {
                    out.push(RESPONSE_STALE);
                    put_u64(out, *dtxn);
                }
                ShardResponse::Refused { dtxn, reason } => {
                    out.push(RESPONSE_REFUSED);
                    put_u64(out, *dtxn);
                    out.push(reason.to_u8());
                }
            }
        }
    }

    /// Votes as a byte vector, one byte each (also the coordinator's outcome encoding).
    pub fn put_votes(out: &mut Vec<u8>, votes: &[Vote]) {
        put_count(out, votes.len());
        out.extend(votes.iter().map(|vote| *vote as u8));
    }

    pub fn read_votes(reader: &mut Reader<'_>, max: u64) -> Result<Vec<Vote>, DecodeError> {
        let bytes = reader.read_byte_vec("votes", max)?;
        bytes
            .iter()
            .map(|&b| Vote::from_u8(b).ok_or(DecodeError::UnknownKind { what: "vote", kind: b }))
            .collect()
    }

    impl Decode for ShardResponse {
        type Limits = ShardWireLimits;
        const WHAT: &'static str = "shard response";

        fn decode_from(reader: &mut Reader<'_>, limits: &ShardWireLimits) -> Result<Self, DecodeError> {
            let kind = reader.read_u8("shard response kind")?;
            let dtxn = reader.read_u64("dtxn id")?;
            Ok(match kind {
                RESPONSE_PREPARED => ShardResponse::Prepared {
                    dtxn,
                    votes: read_votes(reader, limits.dtxn_transactions_max)?,
                },
                RESPONSE_COMMITTED => ShardResponse::Committed { dtxn },
                RESPONSE_DISCARDED => ShardResponse::Discarded { dtxn },
                RESPONSE_STALE => ShardResponse::Stale { dtxn },
                RESPONSE_REFUSED => {
                    let byte = reader.read_u8("refusal reason")?;
                    let reason = Refusal::from_u8(byte).ok_or(DecodeError::UnknownKind {
                        what: "refusal reason",
                        kind: byte,
                    })?;
                    ShardResponse::Refused { dtxn, reason }
                }
                kind => {
                    return Err(DecodeError::UnknownKind {
                        what: "shard response",
                        kind,
                    })
                }
            })
        }

        fn encoded_bytes_max(limits: &ShardWireLimits) -> usize {
            (17 + u128::from(limits.dtxn_transactions_max)).min(usize::MAX as u128 / 2) as usize
        }
    }
}

pub(crate) use codec::read_ids;
pub use codec::{put_votes, read_votes};

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use specie_codec::{Decode, Encode};

    use super::*;

    fn ids() -> impl Strategy<Value = Vec<UhsId>> {
        prop::collection::vec(any::<[u8; 32]>().prop_map(UhsId), 0..4)
    }

    fn request() -> impl Strategy<Value = ShardRequest> {
        let tx = (any::<u32>(), ids(), ids()).prop_map(|(index, spent, created)| ShardTx { index, spent, created });
        prop_oneof![
            (any::<u64>(), prop::collection::vec(tx, 0..5)).prop_map(|(dtxn, txs)| ShardRequest::Prepare { dtxn, txs }),
            (any::<u64>(), prop::collection::vec(any::<bool>(), 0..9))
                .prop_map(|(dtxn, complete)| ShardRequest::Commit { dtxn, complete }),
            (any::<u64>(), any::<u64>())
                .prop_map(|(dtxn, finished_below)| ShardRequest::Discard { dtxn, finished_below }),
        ]
    }

    fn response() -> impl Strategy<Value = ShardResponse> {
        let vote = (0u8..5).prop_map(|b| Vote::from_u8(b).unwrap());
        prop_oneof![
            (any::<u64>(), prop::collection::vec(vote, 0..9))
                .prop_map(|(dtxn, votes)| ShardResponse::Prepared { dtxn, votes }),
            any::<u64>().prop_map(|dtxn| ShardResponse::Committed { dtxn }),
            any::<u64>().prop_map(|dtxn| ShardResponse::Discarded { dtxn }),
            any::<u64>().prop_map(|dtxn| ShardResponse::Stale { dtxn }),
            (any::<u64>(), 0u8..7).prop_map(|(dtxn, r)| ShardResponse::Refused {
                dtxn,
                reason: Refusal::from_u8(r).unwrap()
            }),
        ]
    }

    proptest! {
        #[test]
        fn request_round_trips(request in request()) {
            let bytes = request.encode();
            prop_assert_eq!(ShardRequest::decode_exact(&bytes).unwrap(), request);
        }

        #[test]
        fn response_round_trips(response in response()) {
            let bytes = response.encode();
            prop_assert_eq!(ShardResponse::decode_exact(&bytes).unwrap(), response);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = ShardRequest::decode_exact(&bytes);
            let _ = ShardResponse::decode_exact(&bytes);
            let _ = ShardTx::decode_exact(&bytes);
            let _ = read_votes(&mut specie_codec::Reader::new(&bytes), 100);
            // Decoding under tight and under huge limits must not panic either.
            let tight = ShardWireLimits { dtxn_transactions_max: 2, tx_ids_max: 1 };
            let huge = ShardWireLimits { dtxn_transactions_max: u64::MAX, tx_ids_max: u64::MAX };
            for limits in [tight, huge] {
                let _ = ShardRequest::decode_exact_with(&bytes, &limits);
                let _ = ShardResponse::decode_exact_with(&bytes, &limits);
            }
        }

        /// Valid encodings with a few bytes overwritten and a cut: the inputs most likely to get
        /// past the first checks of a decoder.
        #[test]
        fn mutated_encodings_never_panic(
            request in request(),
            response in response(),
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            for mut bytes in [request.encode(), response.encode()] {
                for (at, byte) in &flips {
                    let at = at.index(bytes.len());
                    bytes[at] = *byte;
                }
                for candidate in [&bytes[..], &bytes[..cut.index(bytes.len() + 1)]] {
                    if let Ok(decoded) = ShardRequest::decode_exact(candidate) {
                        prop_assert_eq!(decoded.encode(), candidate, "canonical");
                    }
                    if let Ok(decoded) = ShardResponse::decode_exact(candidate) {
                        prop_assert_eq!(decoded.encode(), candidate, "canonical");
                    }
                }
            }
        }
    }

    #[test]
    fn refusal_bytes_are_stable() {
        let all = [
            (Refusal::NotOwned, 0),
            (Refusal::NotPrepared, 1),
            (Refusal::CommitLengthMismatch, 2),
            (Refusal::CompletesRejected, 3),
            (Refusal::BadTxIndexes, 4),
            (Refusal::DiscardBeforeCommit, 5),
            (Refusal::WatermarkPassesUncommitted, 6),
        ];
        for (refusal, byte) in all {
            assert_eq!(refusal.to_u8(), byte);
            assert_eq!(Refusal::from_u8(byte), Some(refusal));
            let response = ShardResponse::Refused {
                dtxn: 3,
                reason: refusal,
            };
            assert_eq!(response.encode().last(), Some(&byte));
            assert_eq!(ShardResponse::decode_exact(&response.encode()).unwrap(), response);
        }
        assert!((7..=u8::MAX).all(|byte| Refusal::from_u8(byte).is_none()));
    }

    #[test]
    fn forged_counts_are_refused_before_allocation() {
        let mut bytes = vec![0u8]; // prepare
        bytes.extend_from_slice(&7u64.to_le_bytes());
        bytes.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(ShardRequest::decode_exact(&bytes).is_err());
        let mut bytes = vec![0u8];
        bytes.extend_from_slice(&7u64.to_le_bytes());
        bytes.extend_from_slice(&50_000u64.to_le_bytes());
        assert!(
            ShardRequest::decode_exact(&bytes).is_err(),
            "count beyond the bytes present"
        );
    }
}
