//! The messages roles exchange over `specie-wire` frames: one tag byte, then the body in the
//! reference's count-prefixed little-endian style. Documented in docs/wire-protocol.md.

use specie_shard::{ShardRequest, ShardResponse, ShardWireLimits};
use specie_transaction::codec::{put_byte_vec, put_count, put_u64, put_vec, Decode, DecodeError, Encode, Reader};
use specie_transaction::{CompactTransaction, DecodeLimits, UhsId};

const RAFT: u8 = 1;
const SHARD_BATCH: u8 = 2;
const SHARD_QUERY: u8 = 3;
const SHARD_IDS: u8 = 4;
const SUBMIT: u8 = 5;
const STATUS: u8 = 6;
const NOT_LEADER: u8 = 7;

/// A batch of requests carries at most this many items (transactions, ids, shard requests).
pub const BATCH_ITEMS_MAX: u64 = 100_000;
const UHS_ID_BYTES: usize = 32;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleRequest {
    /// A Raft RPC for this process's replica.
    Raft(Vec<u8>),
    /// Coordinator → shard group leader: 2PC requests, made durable as one Raft entry.
    ShardBatch(Vec<ShardRequest>),
    /// Sentinel → shard group leader: which of these ids are in the UHS.
    ShardQuery(Vec<UhsId>),
    /// Every UHS id of the shard, ascending (digests and audits).
    ShardIds,
    /// Sentinel → coordinator group leader: validated compact transactions.
    Submit(Vec<CompactTransaction>),
    /// Operator → any replica: role, Raft metrics, health.
    Status,
}

/// Outcome codes of [`RoleResponse::Submitted`]: the shard vote (0 = confirmed), or these.
pub const OUTCOME_DROPPED: u8 = 0xFE;
pub const OUTCOME_BUSY: u8 = 0xFF;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleResponse {
    Raft(Vec<u8>),
    ShardBatch(Vec<ShardResponse>),
    ShardQuery(Vec<bool>),
    ShardIds(Vec<UhsId>),
    Submitted(Vec<u8>),
    /// JSON, for people and `specie cluster status`.
    Status(String),
    /// Ask the leader instead (its replica id, if known).
    NotLeader(Option<u64>),
}

fn read_bytes_vec(reader: &mut Reader<'_>, what: &'static str) -> Result<Vec<u8>, DecodeError> {
    Ok(reader.read_byte_vec(what, u64::from(u32::MAX))?.to_vec())
}

impl Encode for RoleRequest {
    fn encode_to(&self, out: &mut Vec<u8>) {
        match self {
            RoleRequest::Raft(bytes) => {
                out.push(RAFT);
                put_byte_vec(out, bytes);
            }
            RoleRequest::ShardBatch(requests) => {
                out.push(SHARD_BATCH);
                put_count(out, requests.len());
                for request in requests {
                    put_byte_vec(out, &request.encode());
                }
            }
            RoleRequest::ShardQuery(ids) => {
                out.push(SHARD_QUERY);
                put_vec(out, ids);
            }
            RoleRequest::ShardIds => out.push(SHARD_IDS),
            RoleRequest::Submit(txs) => {
                out.push(SUBMIT);
                put_vec(out, txs);
            }
            RoleRequest::Status => out.push(STATUS),
        }
    }
}

impl RoleRequest {
    pub fn decode(bytes: &[u8]) -> Result<RoleRequest, DecodeError> {
        let mut reader = Reader::new(bytes);
        let request = match reader.read_u8("request tag")? {
            RAFT => RoleRequest::Raft(read_bytes_vec(&mut reader, "raft rpc")?),
            SHARD_BATCH => {
                let limits = ShardWireLimits::default();
                RoleRequest::ShardBatch(reader.read_vec("shard requests", BATCH_ITEMS_MAX, 8, |r| {
                    let bytes = r.read_byte_vec("shard request", u64::from(u32::MAX))?;
                    ShardRequest::decode_exact_with(bytes, &limits)
                })?)
            }
            SHARD_QUERY => RoleRequest::ShardQuery(
                reader.read_vec("ids", BATCH_ITEMS_MAX, UHS_ID_BYTES, |r| UhsId::decode_from(r, &()))?,
            ),
            SHARD_IDS => RoleRequest::ShardIds,
            SUBMIT => {
                let limits = DecodeLimits::default();
                RoleRequest::Submit(reader.read_vec("transactions", BATCH_ITEMS_MAX, 56, |r| {
                    CompactTransaction::decode_from(r, &limits)
                })?)
            }
            STATUS => RoleRequest::Status,
            kind => {
                return Err(DecodeError::UnknownKind {
                    what: "role request",
                    kind,
                })
            }
        };
        reader.finish()?;
        Ok(request)
    }
}

impl Encode for RoleResponse {
    fn encode_to(&self, out: &mut Vec<u8>) {
        match self {
            RoleResponse::Raft(bytes) => {
                out.push(RAFT);
                put_byte_vec(out, bytes);
            }
            RoleResponse::ShardBatch(responses) => {
                out.push(SHARD_BATCH);
                put_count(out, responses.len());
                for response in responses {
                    put_byte_vec(out, &response.encode());
                }
            }
            RoleResponse::ShardQuery(present) => {
                out.push(SHARD_QUERY);
                put_byte_vec(out, &present.iter().map(|p| u8::from(*p)).collect::<Vec<u8>>());
            }
            RoleResponse::ShardIds(ids) => {
                out.push(SHARD_IDS);
                put_vec(out, ids);
            }
            RoleResponse::Submitted(outcomes) => {
                out.push(SUBMIT);
                put_byte_vec(out, outcomes);
            }
            RoleResponse::Status(json) => {
                out.push(STATUS);
                put_byte_vec(out, json.as_bytes());
            }
            RoleResponse::NotLeader(leader) => {
                out.push(NOT_LEADER);
                put_u64(out, leader.unwrap_or(0));
            }
        }
    }
}

impl RoleResponse {
    pub fn decode(bytes: &[u8]) -> Result<RoleResponse, DecodeError> {
        let mut reader = Reader::new(bytes);
        let response = match reader.read_u8("response tag")? {
            RAFT => RoleResponse::Raft(read_bytes_vec(&mut reader, "raft rpc")?),
            SHARD_BATCH => {
                let limits = ShardWireLimits::default();
                RoleResponse::ShardBatch(reader.read_vec("shard responses", BATCH_ITEMS_MAX, 8, |r| {
                    let bytes = r.read_byte_vec("shard response", u64::from(u32::MAX))?;
                    ShardResponse::decode_exact_with(bytes, &limits)
                })?)
            }
            SHARD_QUERY => {
                let flags = reader.read_byte_vec("presence flags", BATCH_ITEMS_MAX)?;
                RoleResponse::ShardQuery(
                    flags
                        .iter()
                        .map(|&f| Reader::new(&[f]).read_bool("presence flag"))
                        .collect::<Result<_, _>>()?,
                )
            }
            SHARD_IDS => {
                RoleResponse::ShardIds(reader.read_vec("ids", u64::MAX, UHS_ID_BYTES, |r| UhsId::decode_from(r, &()))?)
            }
            SUBMIT => RoleResponse::Submitted(reader.read_byte_vec("outcomes", BATCH_ITEMS_MAX)?.to_vec()),
            STATUS => {
                let bytes = reader.read_byte_vec("status", 1 << 20)?;
                let text = String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::NonCanonical {
                    what: "status",
                    reason: "not UTF-8",
                })?;
                RoleResponse::Status(text)
            }
            NOT_LEADER => {
                let leader = reader.read_u64("leader id")?;
                RoleResponse::NotLeader((leader != 0).then_some(leader))
            }
            kind => {
                return Err(DecodeError::UnknownKind {
                    what: "role response",
                    kind,
                })
            }
        };
        reader.finish()?;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use specie_shard::{ShardTx, Vote};
    use specie_transaction::Txid;

    use super::*;

    #[test]
    fn every_message_round_trips_and_garbage_is_refused() {
        let id = UhsId([7; 32]);
        let requests = vec![
            RoleRequest::Raft(vec![1, 2, 3]),
            RoleRequest::ShardBatch(vec![
                ShardRequest::Prepare {
                    dtxn: 4,
                    txs: vec![ShardTx {
                        index: 0,
                        spent: vec![id],
                        created: vec![],
                    }],
                },
                ShardRequest::Commit {
                    dtxn: 4,
                    complete: vec![true],
                },
            ]),
            RoleRequest::ShardQuery(vec![id, id]),
            RoleRequest::ShardIds,
            RoleRequest::Submit(vec![CompactTransaction {
                txid: Txid([1; 32]),
                spent: vec![id],
                ..Default::default()
            }]),
            RoleRequest::Status,
        ];
        for request in requests {
            let bytes = request.encode();
            assert_eq!(RoleRequest::decode(&bytes).unwrap(), request);
            for cut in 0..bytes.len() {
                assert!(RoleRequest::decode(&bytes[..cut]).is_err());
            }
        }
        let responses = vec![
            RoleResponse::Raft(vec![9]),
            RoleResponse::ShardBatch(vec![ShardResponse::Prepared {
                dtxn: 1,
                votes: vec![Vote::Yes, Vote::InputMissing],
            }]),
            RoleResponse::ShardQuery(vec![true, false]),
            RoleResponse::ShardIds(vec![id]),
            RoleResponse::Submitted(vec![0, 1, OUTCOME_BUSY]),
            RoleResponse::Status("{}".into()),
            RoleResponse::NotLeader(Some(2)),
            RoleResponse::NotLeader(None),
        ];
        for response in responses {
            assert_eq!(RoleResponse::decode(&response.encode()).unwrap(), response);
        }
        assert!(RoleRequest::decode(&[0xee]).is_err());
        assert!(RoleRequest::decode(&[SUBMIT, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
    }
}
