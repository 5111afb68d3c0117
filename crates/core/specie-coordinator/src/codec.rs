//! Byte encodings of coordinator commands (log records) and state (snapshots), in the
//! reference's little-endian, count-prefixed style.

use std::collections::BTreeMap;

use specie_codec::{put_count, put_u64, put_vec, Decode, DecodeError, Encode, Reader};
use specie_shard::{put_votes, read_votes};
use specie_transaction::{CompactTransaction, DecodeLimits};

use crate::state::{ActiveDtxn, CoordinatorCommand, CoordinatorState};

const COMMAND_PREPARE: u8 = 0;
const COMMAND_COMMIT: u8 = 1;
const COMMAND_FINISH: u8 = 2;
const SNAPSHOT_VERSION: u8 = 1;
/// Smallest compact transaction: txid and three empty counts.
const COMPACT_BYTES_MIN: usize = 32 + 3 * 8;

/// Bounds on decoded coordinator records.
#[derive(Clone, Debug)]
pub struct CommandLimits {
    pub dtxn_transactions_max: u64,
    pub dtxns_max: u64,
    pub transaction: DecodeLimits,
}

impl Default for CommandLimits {
    fn default() -> Self {
        CommandLimits {
            dtxn_transactions_max: 100_000,
            dtxns_max: 100_000,
            transaction: DecodeLimits::default(),
        }
    }
}

fn read_txs(reader: &mut Reader<'_>, limits: &CommandLimits) -> Result<Vec<CompactTransaction>, DecodeError> {
    reader.read_vec(
        "dtxn transactions",
        limits.dtxn_transactions_max,
        COMPACT_BYTES_MIN,
        |r| CompactTransaction::decode_from(r, &limits.transaction),
    )
}

impl Encode for CoordinatorCommand {
    fn encode_to(&self, out: &mut Vec<u8>) {
        match self {
            CoordinatorCommand::Prepare { dtxn, txs } => {
                out.push(COMMAND_PREPARE);
                put_u64(out, *dtxn);
                put_vec(out, txs);
            }
            CoordinatorCommand::Commit { dtxn, outcomes } => {
                out.push(COMMAND_COMMIT);
                put_u64(out, *dtxn);
                put_votes(out, outcomes);
            }
            CoordinatorCommand::Finish { dtxns } => {
                out.push(COMMAND_FINISH);
                put_vec(out, dtxns);
            }
        }
    }
}

impl Decode for CoordinatorCommand {
    type Limits = CommandLimits;
    const WHAT: &'static str = "coordinator command";

    fn decode_from(reader: &mut Reader<'_>, limits: &CommandLimits) -> Result<Self, DecodeError> {
        Ok(match reader.read_u8("coordinator command kind")? {
            COMMAND_PREPARE => {
                let dtxn = reader.read_u64("dtxn id")?;
                CoordinatorCommand::Prepare {
                    dtxn,
                    txs: read_txs(reader, limits)?,
                }
            }
            COMMAND_COMMIT => {
                let dtxn = reader.read_u64("dtxn id")?;
                CoordinatorCommand::Commit {
                    dtxn,
                    outcomes: read_votes(reader, limits.dtxn_transactions_max)?,
                }
            }
            COMMAND_FINISH => CoordinatorCommand::Finish {
                dtxns: reader.read_vec("finished dtxns", limits.dtxns_max, 8, |r| r.read_u64("dtxn id"))?,
            },
            kind => {
                return Err(DecodeError::UnknownKind {
                    what: "coordinator command",
                    kind,
                })
            }
        })
    }

    fn encoded_bytes_max(limits: &CommandLimits) -> usize {
        let tx = limits.transaction.compact_transaction_bytes_max as u128;
        (17 + u128::from(limits.dtxn_transactions_max) * tx).min(usize::MAX as u128 / 2) as usize
    }
}

impl CoordinatorState {
    pub fn encode_snapshot(&self) -> Vec<u8> {
        let mut out = vec![SNAPSHOT_VERSION];
        put_u64(&mut out, self.next_dtxn());
        put_count(&mut out, self.active().len());
        for (dtxn, active) in self.active() {
            put_u64(&mut out, *dtxn);
            put_vec(&mut out, &active.txs);
            match &active.outcomes {
                None => out.push(0),
                Some(outcomes) => {
                    out.push(1);
                    put_votes(&mut out, outcomes);
                }
            }
        }
        out
    }

    pub fn decode_snapshot(bytes: &[u8], limits: &CommandLimits) -> Result<CoordinatorState, DecodeError> {
        let mut reader = Reader::new(bytes);
        let version = reader.read_u8("coordinator snapshot version")?;
        if version != SNAPSHOT_VERSION {
            return Err(DecodeError::UnsupportedVersion {
                what: "coordinator snapshot",
                version,
                supported: SNAPSHOT_VERSION,
            });
        }
        let next_dtxn = reader.read_u64("next dtxn")?;
        let count = reader.read_count("active dtxns", limits.dtxns_max, 8 + 8 + 1)?;
        let mut active = BTreeMap::new();
        for _ in 0..count {
            let dtxn = reader.read_u64("dtxn id")?;
            let txs = read_txs(&mut reader, limits)?;
            let outcomes = match reader.read_bool("outcomes present")? {
                false => None,
                true => Some(read_votes(&mut reader, limits.dtxn_transactions_max)?),
            };
            // Strictly ascending, as the encoder writes them: a repeated or reordered id is not ours.
            let ascending = active.last_key_value().is_none_or(|(&last, _)| last < dtxn);
            let consistent = dtxn < next_dtxn && outcomes.as_ref().is_none_or(|o| o.len() == txs.len());
            if !ascending || !consistent {
                return Err(DecodeError::NonCanonical {
                    what: "coordinator snapshot",
                    reason: "inconsistent dtxn",
                });
            }
            active.insert(dtxn, ActiveDtxn { txs, outcomes });
        }
        reader.finish()?;
        Ok(CoordinatorState::from_parts(next_dtxn, active))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use specie_shard::Vote;
    use specie_transaction::{Txid, UhsId};

    use super::*;

    fn compact() -> impl Strategy<Value = CompactTransaction> {
        let ids = || prop::collection::vec(any::<[u8; 32]>().prop_map(UhsId), 0..3);
        (any::<[u8; 32]>(), ids(), ids()).prop_map(|(txid, spent, created)| CompactTransaction {
            txid: Txid(txid),
            spent,
            created,
            ..Default::default()
        })
    }

    fn command() -> impl Strategy<Value = CoordinatorCommand> {
        let vote = (0u8..5).prop_map(|b| Vote::from_u8(b).unwrap());
        prop_oneof![
            (any::<u64>(), prop::collection::vec(compact(), 0..4))
                .prop_map(|(dtxn, txs)| CoordinatorCommand::Prepare { dtxn, txs }),
            (any::<u64>(), prop::collection::vec(vote, 0..6))
                .prop_map(|(dtxn, outcomes)| CoordinatorCommand::Commit { dtxn, outcomes }),
            prop::collection::vec(any::<u64>(), 0..6).prop_map(|dtxns| CoordinatorCommand::Finish { dtxns }),
        ]
    }

    proptest! {
        #[test]
        fn command_round_trips(command in command()) {
            prop_assert_eq!(CoordinatorCommand::decode_exact(&command.encode()).unwrap(), command);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = CoordinatorCommand::decode_exact(&bytes);
            let _ = CoordinatorState::decode_snapshot(&bytes, &CommandLimits::default());
            let huge = CommandLimits {
                dtxn_transactions_max: u64::MAX,
                dtxns_max: u64::MAX,
                transaction: DecodeLimits::default(),
            };
            let _ = CoordinatorCommand::decode_exact_with(&bytes, &huge);
            let _ = CoordinatorState::decode_snapshot(&bytes, &huge);
        }

        /// Valid commands and snapshots with a few bytes overwritten and a cut: whatever decodes
        /// is canonical, and a decoded state takes further commands without panicking.
        #[test]
        fn mutated_encodings_never_panic(
            commands in prop::collection::vec(command(), 1..12),
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut state = CoordinatorState::default();
            for command in &commands {
                state.apply(command);
            }
            let limits = CommandLimits::default();
            for (i, mut bytes) in [commands[0].encode(), state.encode_snapshot()].into_iter().enumerate() {
                for (at, byte) in &flips {
                    let at = at.index(bytes.len());
                    bytes[at] = *byte;
                }
                for candidate in [&bytes[..], &bytes[..cut.index(bytes.len() + 1)]] {
                    if i == 0 {
                        if let Ok(command) = CoordinatorCommand::decode_exact(candidate) {
                            prop_assert_eq!(command.encode(), candidate);
                            state.clone().apply(&command);
                        }
                    } else if let Ok(mut decoded) = CoordinatorState::decode_snapshot(candidate, &limits) {
                        prop_assert_eq!(decoded.encode_snapshot(), candidate);
                        for command in &commands {
                            decoded.apply(command);
                        }
                    }
                }
            }
        }

        #[test]
        fn state_snapshot_round_trips(commands in prop::collection::vec(command(), 0..20)) {
            let mut state = CoordinatorState::default();
            for command in &commands {
                state.apply(command);
            }
            let bytes = state.encode_snapshot();
            prop_assert_eq!(CoordinatorState::decode_snapshot(&bytes, &CommandLimits::default()).unwrap(), state);
        }
    }
}
