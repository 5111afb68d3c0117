//! The Raft RPC vectors of `docs/wire-protocol.md` (the blocks marked `<!-- vector: raft-… -->`):
//! each is exactly what the codec writes for the RPC built here, and decodes back to it; the set
//! of `raft-` names in the document must equal the set known here. The other vectors of that
//! document are checked by `crates/deployment/specie-cluster/tests/wire_vectors.rs`. Also here, because it
//! needs the codec to forge one: a replica refuses a snapshot chunk that skips ahead.
//!
//! The RPC codec is crate-private, and an integration test sees only the public API, so this
//! test compiles the codec's own source file (and the two it depends on) into itself. It checks
//! the very code the crate ships; the codec's unit tests run here a second time as a side effect.

#[path = "../../specie-wire/tests/doc_vectors/mod.rs"]
mod doc_vectors;

#[allow(dead_code, unused_imports)]
#[path = "../src/codec.rs"]
mod codec;
#[allow(dead_code, unused_imports)]
#[path = "../src/runtime.rs"]
mod runtime;
#[allow(dead_code, unused_imports)]
#[path = "../src/types.rs"]
mod types;

use std::collections::{BTreeMap, BTreeSet};

use codec::{RaftRequest, RaftResponse, RequestKind};
use openraft::error::SnapshotMismatch;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{
    CommittedLeaderId, EmptyNode, Entry, EntryPayload, LogId, Membership, SnapshotMeta, SnapshotSegmentId,
    StoredMembership, Vote,
};
use types::Batch;

/// Every `<!-- vector: NAME -->` block of the document, by name.
fn doc_vectors() -> BTreeMap<String, Vec<u8>> {
    doc_vectors::named_vectors(&doc_vectors::wire_protocol_doc(env!("CARGO_MANIFEST_DIR")))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn log_id(term: u64, node: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, node), index)
}

fn membership(configs: &[&[u64]], nodes: &[u64]) -> Membership<u64, EmptyNode> {
    Membership::new(
        configs.iter().map(|c| c.iter().copied().collect()).collect(),
        nodes.iter().copied().collect::<BTreeSet<u64>>(),
    )
}

fn snapshot_meta() -> SnapshotMeta<u64, EmptyNode> {
    SnapshotMeta {
        last_log_id: Some(log_id(3, 1, 40)),
        // Node 4 is a learner: listed as a node, in no voter set.
        last_membership: StoredMembership::new(Some(log_id(1, 1, 1)), membership(&[&[1, 2, 3]], &[1, 2, 3, 4])),
        snapshot_id: "3-1-40-0".into(),
    }
}

fn requests() -> Vec<(&'static str, RaftRequest)> {
    vec![
        (
            "raft-append-entries-request",
            RaftRequest::AppendEntries(AppendEntriesRequest {
                vote: Vote::new_committed(3, 1),
                prev_log_id: Some(log_id(3, 1, 9)),
                leader_commit: Some(log_id(3, 1, 8)),
                entries: vec![
                    Entry {
                        log_id: log_id(3, 1, 10),
                        payload: EntryPayload::Blank,
                    },
                    Entry {
                        log_id: log_id(3, 1, 11),
                        payload: EntryPayload::Normal(Batch(vec![vec![0xaa, 0xbb], vec![0xcc]])),
                    },
                    Entry {
                        log_id: log_id(3, 1, 12),
                        payload: EntryPayload::Membership(membership(&[&[1, 2, 3], &[1, 2, 4]], &[1, 2, 3, 4])),
                    },
                ],
            }),
        ),
        (
            "raft-vote-request",
            RaftRequest::Vote(VoteRequest {
                vote: Vote::new(5, 2),
                last_log_id: Some(log_id(4, 1, 17)),
            }),
        ),
        (
            "raft-install-snapshot-request",
            RaftRequest::InstallSnapshot(InstallSnapshotRequest {
                vote: Vote::new_committed(3, 1),
                meta: snapshot_meta(),
                offset: 0,
                data: vec![1, 2, 3, 4],
                done: true,
            }),
        ),
    ]
}

/// Each response with the kind of request it answers (the bytes alone do not say).
fn responses() -> Vec<(&'static str, RequestKind, RaftResponse)> {
    use AppendEntriesResponse as Append;
    use RequestKind as Kind;
    let segment = |offset| SnapshotSegmentId {
        id: "3-1-40-0".into(),
        offset,
    };
    vec![
        (
            "raft-append-entries-response-success",
            Kind::AppendEntries,
            RaftResponse::AppendEntries(Append::Success),
        ),
        (
            "raft-append-entries-response-partial-success",
            Kind::AppendEntries,
            RaftResponse::AppendEntries(Append::PartialSuccess(Some(log_id(3, 1, 11)))),
        ),
        (
            "raft-append-entries-response-conflict",
            Kind::AppendEntries,
            RaftResponse::AppendEntries(Append::Conflict),
        ),
        (
            "raft-append-entries-response-higher-vote",
            Kind::AppendEntries,
            RaftResponse::AppendEntries(Append::HigherVote(Vote::new(4, 2))),
        ),
        (
            "raft-vote-response",
            Kind::Vote,
            RaftResponse::Vote(VoteResponse {
                vote: Vote::new(5, 2),
                vote_granted: true,
                last_log_id: Some(log_id(4, 1, 17)),
            }),
        ),
        (
            "raft-install-snapshot-response",
            Kind::InstallSnapshot,
            RaftResponse::InstallSnapshot(InstallSnapshotResponse {
                vote: Vote::new_committed(3, 1),
            }),
        ),
        ("raft-response-remote-stopped", Kind::Vote, RaftResponse::RemoteStopped),
        (
            "raft-response-snapshot-mismatch",
            Kind::InstallSnapshot,
            RaftResponse::SnapshotMismatch(SnapshotMismatch {
                expect: segment(4),
                got: segment(8),
            }),
        ),
        (
            "raft-response-malformed-request",
            Kind::Vote,
            RaftResponse::MalformedRequest("malformed raft request: request kind 9".into()),
        ),
    ]
}

/// `RaftRequest` and `AppendEntriesRequest` have no `PartialEq`: compare field by field.
fn same_request(a: &RaftRequest, b: &RaftRequest) -> bool {
    match (a, b) {
        (RaftRequest::AppendEntries(a), RaftRequest::AppendEntries(b)) => {
            (a.vote, a.prev_log_id, a.leader_commit) == (b.vote, b.prev_log_id, b.leader_commit)
                && a.entries == b.entries
        }
        (RaftRequest::Vote(a), RaftRequest::Vote(b)) => a == b,
        (RaftRequest::InstallSnapshot(a), RaftRequest::InstallSnapshot(b)) => a == b,
        _ => false,
    }
}

fn same_response(a: &RaftResponse, b: &RaftResponse) -> bool {
    match (a, b) {
        (RaftResponse::AppendEntries(a), RaftResponse::AppendEntries(b)) => a == b,
        (RaftResponse::Vote(a), RaftResponse::Vote(b)) => a == b,
        (RaftResponse::InstallSnapshot(a), RaftResponse::InstallSnapshot(b)) => a == b,
        (RaftResponse::RemoteStopped, RaftResponse::RemoteStopped) => true,
        (RaftResponse::SnapshotMismatch(a), RaftResponse::SnapshotMismatch(b)) => a == b,
        (RaftResponse::MalformedRequest(a), RaftResponse::MalformedRequest(b)) => a == b,
        _ => false,
    }
}

/// The document's name for a request's or response's kind. Exhaustive on purpose: a new
/// variant does not compile until it is named here (and then needs a vector).
fn request_kind_name(request: &RaftRequest) -> &'static str {
    match request {
        RaftRequest::AppendEntries(_) => "raft-append-entries-request",
        RaftRequest::Vote(_) => "raft-vote-request",
        RaftRequest::InstallSnapshot(_) => "raft-install-snapshot-request",
    }
}

fn response_kind_name(response: &RaftResponse) -> &'static str {
    match response {
        RaftResponse::AppendEntries(AppendEntriesResponse::Success) => "raft-append-entries-response-success",
        RaftResponse::AppendEntries(AppendEntriesResponse::PartialSuccess(_)) => {
            "raft-append-entries-response-partial-success"
        }
        RaftResponse::AppendEntries(AppendEntriesResponse::Conflict) => "raft-append-entries-response-conflict",
        RaftResponse::AppendEntries(AppendEntriesResponse::HigherVote(_)) => "raft-append-entries-response-higher-vote",
        RaftResponse::Vote(_) => "raft-vote-response",
        RaftResponse::InstallSnapshot(_) => "raft-install-snapshot-response",
        RaftResponse::RemoteStopped => "raft-response-remote-stopped",
        RaftResponse::SnapshotMismatch(_) => "raft-response-snapshot-mismatch",
        RaftResponse::MalformedRequest(_) => "raft-response-malformed-request",
    }
}

#[test]
fn every_documented_raft_vector_is_what_the_codec_writes_and_reads() {
    let doc = doc_vectors();
    let vector = |name: &str| {
        doc.get(name)
            .unwrap_or_else(|| panic!("vector {name} is missing from the document"))
    };
    let mut known = BTreeSet::new();
    for (name, request) in requests() {
        assert_eq!(
            request_kind_name(&request),
            name,
            "the message built for {name} is of another kind"
        );
        assert!(known.insert(name), "two messages for vector {name}");
        let bytes = vector(name);
        assert_eq!(
            hex(&codec::encode_request(&request)),
            hex(bytes),
            "vector {name}: encode"
        );
        let decoded = codec::decode_request(bytes).unwrap_or_else(|e| panic!("vector {name}: {e}"));
        assert!(same_request(&decoded, &request), "vector {name}: decode");
    }
    for (name, kind, response) in responses() {
        assert_eq!(
            response_kind_name(&response),
            name,
            "the message built for {name} is of another kind"
        );
        assert!(known.insert(name), "two messages for vector {name}");
        let bytes = vector(name);
        assert_eq!(
            hex(&codec::encode_response(&response)),
            hex(bytes),
            "vector {name}: encode"
        );
        let decoded = codec::decode_response(kind, bytes).unwrap_or_else(|e| panic!("vector {name}: {e}"));
        assert!(
            same_response(&decoded, &response),
            "vector {name}: decode as {kind:?}: {decoded:?}"
        );
        // Kinds 1–3 read the same whatever the request was; kind 0 depends on it.
        if !matches!(
            response,
            RaftResponse::AppendEntries(_) | RaftResponse::Vote(_) | RaftResponse::InstallSnapshot(_)
        ) {
            for other in [
                RequestKind::AppendEntries,
                RequestKind::Vote,
                RequestKind::InstallSnapshot,
            ] {
                let decoded = codec::decode_response(other, bytes).unwrap_or_else(|e| panic!("vector {name}: {e}"));
                assert!(same_response(&decoded, &response), "vector {name}: decode as {other:?}");
            }
        }
    }
    let documented: BTreeSet<&str> = doc
        .keys()
        .map(String::as_str)
        .filter(|n| n.starts_with("raft-"))
        .collect();
    assert_eq!(
        documented, known,
        "raft- vectors in the document vs. messages this test checks"
    );
}

/// A role that keeps nothing: enough to host a replica that receives RPCs.
#[derive(Default)]
struct Nothing;

impl specie_raft::ReplicatedStateMachine for Nothing {
    fn apply(&mut self, _proposer: specie_raft::Proposer, _command: &[u8]) -> Vec<u8> {
        vec![]
    }
    fn snapshot(&self) -> Vec<u8> {
        vec![]
    }
    fn restore(&mut self, _snapshot: &[u8]) -> Result<(), specie_raft::SnapshotRefused> {
        Ok(())
    }
}

/// openraft writes a snapshot chunk at its offset into a buffer padded with zeros, so a chunk
/// claiming an offset of 2^40 would allocate a terabyte: a chunk must continue the stream, and
/// one that skips ahead is answered with the offset the replica expects, allocating nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_chunk_that_skips_ahead_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let network = specie_faultnet::FaultNetwork::reliable(1);
    let members: BTreeSet<u64> = [1, 2, 3].into();
    let replica = specie_raft::Replica::start(
        specie_raft::ReplicaConfig::default(),
        dir.path(),
        2,
        specie_raft::Start::Found(members.clone()),
        network.transport(2),
        Nothing,
    )
    .await
    .unwrap();
    let chunk = |offset: u64, data: Vec<u8>, done: bool| {
        codec::encode_request(&RaftRequest::InstallSnapshot(InstallSnapshotRequest {
            vote: Vote::new_committed(3, 1),
            meta: snapshot_meta(),
            offset,
            data,
            done,
        }))
    };
    let answer = |bytes: Vec<u8>| codec::decode_response(RequestKind::InstallSnapshot, &bytes).unwrap();
    let handler = replica.rpc_handler();
    match answer(handler.handle(&chunk(1 << 40, vec![1], false)).await) {
        RaftResponse::SnapshotMismatch(mismatch) => {
            assert_eq!((mismatch.expect.offset, mismatch.got.offset), (0, 1 << 40))
        }
        other => panic!("{other:?}"),
    }
    // The stream itself is accepted chunk by chunk, a re-sent chunk included; skipping past
    // what arrived is not.
    for (offset, data) in [(0, vec![0; 4]), (4, vec![0; 4]), (4, vec![0; 4])] {
        let response = answer(handler.handle(&chunk(offset, data, false)).await);
        assert!(matches!(response, RaftResponse::InstallSnapshot(_)), "{response:?}");
    }
    match answer(handler.handle(&chunk(9, vec![0], false)).await) {
        RaftResponse::SnapshotMismatch(mismatch) => assert_eq!(mismatch.expect.offset, 8),
        other => panic!("{other:?}"),
    }
    replica.shutdown().await;
}
