//! The message vectors of `docs/wire-protocol.md`: every block marked `<!-- vector: NAME -->`
//! is exactly what the codec writes for the message this file builds for NAME, and decodes back
//! to it. The set of names in the document must equal the set known here, so a vector cannot go
//! unchecked and a message kind cannot lose its vector. Names starting with `raft-` are the Raft
//! RPCs, whose codec is private to `specie-raft`: `crates/infra/specie-raft/tests/wire_vectors.rs`
//! checks those. The `coordinator-command-…` and `archiver-command-…` vectors and the three
//! snapshots are what Raft entries and install-snapshot requests carry (§5.7); the snapshots are
//! built by applying commands and requests to fresh states through the public API.

#[path = "../../../infra/specie-wire/tests/doc_vectors/mod.rs"]
mod doc_vectors;

use std::collections::{BTreeMap, BTreeSet};

use specie_archiver::{
    Archiver, ArchiverCommand, ArchiverConfig, ArchiverStateError, LedgerHead, LedgerRead, LedgerReply, Record,
    SupplyCut,
};
use specie_atomizer::{attested_ids_digest, AttestRequest, ShardAnswer, ShardBlock, ShardMessage};
use specie_authority::{Credit, Message as AuthorityMessage};
use specie_cluster::protocol::{MembershipChange, RoleRequest, RoleResponse, Submission, SubmitOutcome};
use specie_codec::{Decode, Encode};
use specie_coordinator::{Applied, CommandLimits, CoordinatorCommand, CoordinatorState};
use specie_endorsement::{
    AggregatorMessage, CeremonyMessage, Confirmation, Endorsement, EndorserMessage, GroupKey,
    Refusal as EndorseRefusal, RefusalCode,
};
use specie_fastpay::AccountKey;
use specie_role::{Durable, Role};
use specie_shard::{Refusal, ShardRange, ShardRequest, ShardResponse, ShardState, ShardTx, Vote};
use specie_transaction::signing::{keypair_from_secret, parse_xonly, schnorr_verify, xonly_bytes};
use specie_transaction::{CompactTransaction, SpecieTransaction, Txid, UhsId};

/// Every `<!-- vector: NAME -->` block of the document, by name.
fn doc_vectors() -> BTreeMap<String, Vec<u8>> {
    doc_vectors::named_vectors(&doc_vectors::wire_protocol_doc(env!("CARGO_MANIFEST_DIR")))
}

#[derive(Debug, PartialEq)]
enum Message {
    Request(RoleRequest),
    Response(RoleResponse),
    Shard(ShardRequest),
    ShardAnswer(ShardResponse),
    /// A command of a coordinator group's Raft log (§5.7).
    Coordinator(CoordinatorCommand),
    /// A command of the archiver group's Raft log (§5.7).
    Archiver(ArchiverCommand),
}

impl Message {
    /// The document's name for this message's vector. Exhaustive on purpose: a new message
    /// variant does not compile until it is given a vector name here.
    fn vector_name(&self) -> &'static str {
        match self {
            Message::Request(request) => match request {
                RoleRequest::Raft(_) => "role-raft-request",
                RoleRequest::ShardBatch(_) => "role-shard-batch-request",
                RoleRequest::ShardQuery(_) => "role-shard-query-request",
                RoleRequest::ShardIds => "role-shard-ids-request",
                RoleRequest::Submit(submission) if !submission.endorsements.is_empty() => {
                    "role-endorsed-submit-request"
                }
                RoleRequest::Submit(_) => "role-submit-request",
                RoleRequest::Endorse(_) => "role-endorse-request",
                RoleRequest::Ceremony(_) => "role-ceremony-request",
                RoleRequest::ArchiveWrite(_) => "role-archive-write-request",
                RoleRequest::ArchiveOutcomes(_) => "role-archive-outcomes-request",
                RoleRequest::LedgerRead(_) => "role-ledger-read-request",
                RoleRequest::AtomizerShard(_) => "role-atomizer-shard-request",
                RoleRequest::WrittenAhead(_) => "role-written-ahead-request",
                RoleRequest::Status => "role-status-request",
                RoleRequest::Membership(MembershipChange::AddLearner(_)) => "role-membership-add-learner-request",
                RoleRequest::Membership(MembershipChange::Promote(_)) => "role-membership-promote-request",
                RoleRequest::Membership(MembershipChange::Remove(_)) => "role-membership-remove-request",
                RoleRequest::ReplicaDigest => "role-replica-digest-request",
                RoleRequest::ReplicaSnapshot { .. } => "role-replica-snapshot-request",
                RoleRequest::Authority(AuthorityMessage::Credits { .. }) => "role-credits-request",
                RoleRequest::Authority(AuthorityMessage::CreditAck { .. }) => "role-credit-ack-request",
            },
            Message::Response(response) => match response {
                RoleResponse::Raft(_) => "role-raft-response",
                RoleResponse::ShardBatch(_) => "role-shard-batch-response",
                RoleResponse::ShardQuery(_) => "role-shard-query-response",
                RoleResponse::ShardIds(_) => "role-shard-ids-response",
                RoleResponse::Submitted(_) => "role-submitted-response",
                RoleResponse::Status(_) => "role-status-response",
                RoleResponse::NotLeader(Some(_)) => "role-not-leader-response",
                RoleResponse::NotLeader(None) => "role-not-leader-unknown-response",
                RoleResponse::Taken => "role-taken-response",
                RoleResponse::Endorser(_) => "role-endorser-response",
                RoleResponse::ArchiveBusy => "role-archive-busy-response",
                RoleResponse::Ledger(reply) if matches!(**reply, LedgerReply::Supply(_)) => {
                    "role-ledger-supply-response"
                }
                RoleResponse::Ledger(_) => "role-ledger-response",
                RoleResponse::AtomizerShard(_) => "role-atomizer-shard-response",
                RoleResponse::WrittenAhead(_) => "role-written-ahead-response",
                RoleResponse::Snapshot { .. } => "role-replica-snapshot-response",
            },
            Message::Shard(request) => match request {
                ShardRequest::Prepare { .. } => "shard-prepare",
                ShardRequest::Commit { .. } => "shard-commit",
                ShardRequest::Discard { .. } => "shard-discard",
            },
            Message::ShardAnswer(response) => match response {
                ShardResponse::Prepared { .. } => "shard-prepared",
                ShardResponse::Committed { .. } => "shard-committed",
                ShardResponse::Discarded { .. } => "shard-discarded",
                ShardResponse::Stale { .. } => "shard-stale",
                ShardResponse::Refused { .. } => "shard-refused",
            },
            Message::Coordinator(command) => match command {
                CoordinatorCommand::Prepare { .. } => "coordinator-command-prepare",
                CoordinatorCommand::Commit { .. } => "coordinator-command-commit",
                CoordinatorCommand::Finish { .. } => "coordinator-command-finish",
            },
            Message::Archiver(command) => match command {
                ArchiverCommand::WriteAhead(_) => "archiver-command-write-ahead",
                ArchiverCommand::Settle(_) => "archiver-command-settle",
                ArchiverCommand::Seal => "archiver-command-seal",
            },
        }
    }

    fn encode(&self) -> Vec<u8> {
        match self {
            Message::Request(m) => m.encode(),
            Message::Response(m) => m.encode(),
            Message::Shard(m) => m.encode(),
            Message::ShardAnswer(m) => m.encode(),
            Message::Coordinator(m) => m.encode(),
            Message::Archiver(m) => Archiver::encode_command(m),
        }
    }

    /// Decodes `bytes` as the same type as `self`.
    fn decode_like(&self, bytes: &[u8]) -> Result<Message, String> {
        let text = |e: specie_codec::DecodeError| e.to_string();
        Ok(match self {
            Message::Request(_) => Message::Request(RoleRequest::decode(bytes).map_err(text)?),
            Message::Response(_) => Message::Response(RoleResponse::decode(bytes).map_err(text)?),
            Message::Shard(_) => Message::Shard(ShardRequest::decode_exact(bytes).map_err(text)?),
            Message::ShardAnswer(_) => Message::ShardAnswer(ShardResponse::decode_exact(bytes).map_err(text)?),
            // As a coordinator replica decodes its log: under the default `CommandLimits`.
            Message::Coordinator(_) => Message::Coordinator(
                CoordinatorCommand::decode_exact_with(bytes, &CommandLimits::default()).map_err(text)?,
            ),
            // As an archiver replica decodes its log: under the default `ArchiverConfig`.
            Message::Archiver(_) => Message::Archiver(
                Archiver::new(ArchiverConfig::default())
                    .decode_command(bytes)
                    .map_err(|e| e.to_string())?,
            ),
        })
    }
}

fn id(hex: &str) -> UhsId {
    UhsId(hex::decode(hex).expect("hex").try_into().expect("32 bytes"))
}

/// UHS ids of the scenario of docs/transaction-format.md §8.
fn alice_100() -> UhsId {
    id("ab032aac0e497e536ec5e4a082e97b07f3af477ae7b55982ce84df575fa643ad")
}
fn bob_60() -> UhsId {
    id("6491377574af2a5b5ae6e0fc0c869815c1943034e7b225064444c2d056ec63d5")
}
fn alice_40() -> UhsId {
    id("1d76b33226a4b11fbb9392341d8ea3451d40c2ad27153866ecd257f9a94c509d")
}
fn bob_50() -> UhsId {
    id("d9f715f8bd33f35fb1a5ed0a91a85521a168e6d8d87c784df7c475921fb7025c")
}
/// The mint's replay marker (`mint_marker`).
fn mint_marker() -> UhsId {
    id("252843cbeae924296a6ecbafbc3cf8bfb63c9429c7ab3af179c223d886597551")
}

/// The compact transaction of the issuer's mint (`mint_compact_ser` of
/// docs/transaction-format.md §8): alice's 100, bob's 50 and the replay marker.
fn mint_compact() -> CompactTransaction {
    CompactTransaction {
        txid: Txid(hex_array(
            "5012fba1fe2a49f3008502aebdfc78508f50f305576b1f5e98ac0ce86c94709e",
        )),
        spent: vec![],
        created: vec![alice_100(), bob_50(), mint_marker()],
        attestations: Default::default(),
    }
}

/// The compact transaction of alice paying bob 60 (`transfer_compact_ser` of
/// docs/transaction-format.md §8).
fn transfer_compact() -> CompactTransaction {
    CompactTransaction {
        txid: Txid(
            hex::decode("d69db00ad0ab83395e0b012098faccce42d700ec0a2152e304dae30ce8e2738b")
                .expect("hex")
                .try_into()
                .expect("32 bytes"),
        ),
        spent: vec![alice_100()],
        created: vec![bob_60(), alice_40()],
        attestations: Default::default(),
    }
}

/// The issuer's mint as the issuer signed it (`mint_ser` of docs/transaction-format.md §8).
const MINT_SER: &str = "ff5350434558540101000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f0200000000000000da24aa23a493b40070ab2b078e87302dc86244e5e75d702df5182cad469a33e76400000000000000ca8793c887f62b66780df2b2700b5d17094ef3267d72c6128de6af680e33ea3d3200000000000000531fe6068134503d2723133227c867ac8fa6c83c537e9a44c3c5bdbdcb1fe337e165933313b8d5bf1593da6a99b078225005a7674c336d14519e779f932215a6f5c4703af79406d8829864f6c9bb3d56979d1bd48fd6c8920ac6053fcbf1d5ab";

/// The ledger of record's record of the mint: no sentinel attestation, no threshold
/// endorsement.
fn mint_record() -> Record {
    let mint = SpecieTransaction::decode_exact(&hex::decode(MINT_SER).expect("hex")).expect("the mint");
    let compact = mint.compact();
    assert_eq!(compact, mint_compact(), "mint_compact_ser is the mint's compact form");
    Record::new(mint, &compact).expect("its own compact form")
}

/// The archiver group's log of the vectors (§5.7): the mint written ahead, settled from the UHS
/// as committed, and a seal.
fn archiver_commands() -> Vec<ArchiverCommand> {
    vec![
        ArchiverCommand::WriteAhead(vec![mint_record()]),
        ArchiverCommand::Settle(vec![(mint_compact().txid, true)]),
        ArchiverCommand::Seal,
    ]
}

/// An archiver replica that applied `archiver_commands` (as a follower): block 1 holds the mint.
fn archiver_state() -> Archiver {
    let mut archiver = Archiver::new(ArchiverConfig::default());
    for command in archiver_commands() {
        archiver.apply(0, &command);
    }
    archiver.check_invariants().expect("a consistent archiver");
    let head = archiver.head();
    assert_eq!((head.height, head.waiting, head.undecided), (1, 0, 0));
    archiver
}

/// What the archiver group answers a read of its head after `archiver_commands`.
fn ledger_head() -> LedgerHead {
    archiver_state().head()
}

/// The sentinel of docs/transaction-format.md §8: secret key 0x04 × 32.
const SENTINEL_SECRET: [u8; 32] = [4; 32];
const SENTINEL_XONLY: &str = "462779ad4aad39514614751a71085f2f10e1c7a593e4e030efb5b8721ce55b0b";
/// That sentinel's BIP-340 signature (no auxiliary randomness) over the submission message of
/// `[transfer_compact()]`: fixed bytes in the vector, checked to verify by
/// `the_submission_message_is_the_documented_hash_and_attestations_verify`.
const SUBMIT_SIGNATURE: &str = "b774ad9589d5ce4fab51419f318b6ede365624fd49d3e603c352e9c4638dd0e723235cd20f4ce596ee2a9bcc44ad9b8b1b3bdd4f89c92242b7a6b3e957002496";

/// docs/endorsement-format.md §6's `single-endorsement-0`: an endorsement's bytes (of another
/// digest than this transaction's; the coordinator, not the decoder, verifies it).
/// The group key of docs/endorsement-format.md's vectors.
const ENDORSEMENT_GROUP_KEY: &str = "f4641cc6d368e09ee50b7493496c4fee63af7bc14de45403f1d5b4c5a7e1b85b";
const ENDORSEMENT: &str = "01a43c0bf72b2cba376d14d7b9ececeefe7229fd9839286910c2c4bb9a1762b898f46d1e93639da316c795e9d5768cec455469eea333bd6cecdcbbdb009fa4709b010000000000000000";

fn hex_array<const N: usize>(text: &str) -> [u8; N] {
    hex::decode(text).expect("hex").try_into().expect("length")
}

fn submit_vector_message() -> Submission {
    Submission {
        sentinel: hex_array(SENTINEL_XONLY),
        signature: hex_array(SUBMIT_SIGNATURE),
        txs: vec![transfer_compact()],
        endorsements: vec![],
    }
}

/// One message per vector of the document (but the `raft-` ones). To add a vector, add its
/// message here, one line, and the block to the document.
fn messages(doc: &BTreeMap<String, Vec<u8>>) -> Vec<Message> {
    let raft = |name: &str| {
        doc.get(name)
            .unwrap_or_else(|| panic!("vector {name} in the document"))
            .clone()
    };
    let commit = ShardRequest::Commit {
        dtxn: 7,
        complete: vec![true, false],
    };
    let discard = ShardRequest::Discard {
        dtxn: 5,
        finished_below: 5,
    };
    vec![
        // Tag 1 carries the Raft codec's bytes unchanged.
        Message::Request(RoleRequest::Raft(raft("raft-vote-request"))),
        Message::Response(RoleResponse::Raft(raft("raft-vote-response"))),
        Message::Request(RoleRequest::ShardBatch(vec![commit.clone(), discard.clone()])),
        Message::Response(RoleResponse::ShardBatch(vec![
            ShardResponse::Committed { dtxn: 7 },
            ShardResponse::Discarded { dtxn: 5 },
        ])),
        Message::Request(RoleRequest::ShardQuery(vec![bob_60(), alice_100()])),
        Message::Response(RoleResponse::ShardQuery(vec![true, false])),
        Message::Request(RoleRequest::ShardIds),
        Message::Response(RoleResponse::ShardIds(vec![alice_40(), bob_60()])),
        Message::Request(RoleRequest::Submit(submit_vector_message())),
        Message::Request(RoleRequest::Submit(Submission {
            endorsements: vec![
                Endorsement::decode_exact(&hex::decode(ENDORSEMENT).expect("hex")).expect("an endorsement")
            ],
            ..submit_vector_message()
        })),
        Message::Request(RoleRequest::Endorse(Box::new(AggregatorMessage::Commit { session: 7 }))),
        Message::Request(RoleRequest::Ceremony(Box::new(CeremonyMessage::Confirm(
            Confirmation {
                transcript: [0x11; 32],
                group_key: GroupKey(hex_array(ENDORSEMENT_GROUP_KEY)),
                public_shares: [0x22; 32],
            },
        )))),
        Message::Response(RoleResponse::Endorser(Box::new(EndorserMessage::Refused {
            session: 7,
            refusal: EndorseRefusal::Invalid {
                items: vec![(1, RefusalCode::new("unknown_issuer").expect("a code"))],
            },
        }))),
        Message::Response(RoleResponse::Submitted(vec![
            SubmitOutcome::Confirmed,
            SubmitOutcome::Rejected(Vote::InputMissing),
            SubmitOutcome::Dropped,
            SubmitOutcome::Busy,
        ])),
        Message::Request(RoleRequest::Status),
        Message::Request(RoleRequest::Membership(MembershipChange::AddLearner(4))),
        Message::Request(RoleRequest::Membership(MembershipChange::Promote(4))),
        Message::Request(RoleRequest::Membership(MembershipChange::Remove(1))),
        Message::Request(RoleRequest::ReplicaDigest),
        Message::Request(RoleRequest::ReplicaSnapshot { offset: 4 }),
        Message::Response(RoleResponse::Snapshot {
            applied_index: 96,
            total_bytes: 8,
            chunk: vec![0xde, 0xad, 0xbe, 0xef],
        }),
        Message::Response(RoleResponse::Status(r#"{"role":"leader"}"#.into())),
        Message::Response(RoleResponse::NotLeader(Some(2))),
        Message::Response(RoleResponse::NotLeader(None)),
        Message::Request(RoleRequest::Authority(AuthorityMessage::Credits {
            first_sequence: 7,
            credits: vec![Credit {
                recipient: AccountKey([0x11; 32]),
                amount: 5,
                sender: AccountKey([0x22; 32]),
                sender_sequence: 3,
            }],
        })),
        Message::Request(RoleRequest::Authority(AuthorityMessage::CreditAck { through: 8 })),
        Message::Response(RoleResponse::Taken),
        Message::Shard(ShardRequest::Prepare {
            dtxn: 7,
            txs: vec![ShardTx {
                index: 0,
                spent: vec![alice_100()],
                created: vec![bob_60(), alice_40()],
            }],
        }),
        Message::Shard(commit),
        Message::Shard(discard),
        Message::ShardAnswer(ShardResponse::Prepared {
            dtxn: 7,
            votes: vec![Vote::Yes, Vote::InputLocked],
        }),
        Message::ShardAnswer(ShardResponse::Committed { dtxn: 7 }),
        Message::ShardAnswer(ShardResponse::Discarded { dtxn: 7 }),
        Message::ShardAnswer(ShardResponse::Stale { dtxn: 3 }),
        Message::ShardAnswer(ShardResponse::Refused {
            dtxn: 9,
            reason: Refusal::NotPrepared,
        }),
        // Three commands of the coordinator's log of `coordinator_commands`.
        Message::Coordinator(CoordinatorCommand::Prepare {
            dtxn: 1,
            txs: vec![transfer_compact()],
        }),
        Message::Coordinator(CoordinatorCommand::Commit {
            dtxn: 2,
            outcomes: vec![Vote::InputLocked],
        }),
        Message::Coordinator(CoordinatorCommand::Finish { dtxns: vec![2] }),
        // The ledger of record's (§5.2, §5.3): a batch of one record written ahead, the
        // outcomes of a batch of two, a dispute read and the head after `archiver_commands`.
        Message::Request(RoleRequest::ArchiveWrite(vec![mint_record()])),
        Message::Request(RoleRequest::ArchiveOutcomes(vec![
            (mint_compact().txid, true),
            (transfer_compact().txid, false),
        ])),
        Message::Request(RoleRequest::LedgerRead(LedgerRead::Dispute(
            transfer_compact().txid,
            Some(1),
        ))),
        // A coordinator's question before it orders alice's payment to bob and a mint whose
        // record was written ahead in another compact form (the transfer's created ids): the
        // payment is written ahead, the mint is not.
        Message::Request(RoleRequest::WrittenAhead(vec![
            (transfer_compact().txid, transfer_compact().attestation_message()),
            (mint_compact().txid, {
                let mut other = mint_compact();
                other.created = transfer_compact().created;
                other.attestation_message()
            }),
        ])),
        Message::Response(RoleResponse::WrittenAhead(vec![true, false])),
        Message::Response(RoleResponse::ArchiveBusy),
        Message::Response(RoleResponse::Ledger(Box::new(LedgerReply::Head(ledger_head())))),
        Message::Response(RoleResponse::Ledger(Box::new(LedgerReply::Supply(Box::new(
            SupplyCut {
                head: ledger_head(),
                supply: archiver_state().ledger().supply().clone(),
            },
        ))))),
        // The atomizer shape's (§5.2, §5.3): a round to shard 0 of 2, which owns the ids of
        // alice's payment to bob below 0x80 (the two it creates), and its answers.
        Message::Request(RoleRequest::AtomizerShard(vec![
            ShardMessage::Attest(AttestRequest {
                round: 1,
                ids: vec![bob_60(), alice_40()],
            }),
            ShardMessage::Block(ShardBlock {
                height: 2,
                spent: vec![],
                created: vec![bob_60(), alice_40()],
            }),
        ])),
        Message::Response(RoleResponse::AtomizerShard(vec![
            ShardAnswer::Attested {
                round: 1,
                asked: attested_ids_digest(&[bob_60(), alice_40()]),
                height: 1,
                present: vec![false, false],
            },
            ShardAnswer::Applied { height: 2 },
        ])),
    ]
    .into_iter()
    .chain(archiver_commands().into_iter().map(Message::Archiver))
    .collect()
}

/// The story behind the snapshot vectors (§5.7), on a two-shard cluster: dtxn 0 is the mint of
/// docs/transaction-format.md §8; dtxn 1 alice's payment to bob; dtxn 2 the same payment
/// submitted again while dtxn 1 holds its ids; dtxn 3 the mint replayed. The coordinator has
/// finished 0 and 2, decided 1 and is preparing 3.
fn coordinator_commands() -> Vec<CoordinatorCommand> {
    use CoordinatorCommand::{Commit, Finish, Prepare};
    vec![
        Prepare {
            dtxn: 0,
            txs: vec![mint_compact()],
        },
        Commit {
            dtxn: 0,
            outcomes: vec![Vote::Yes],
        },
        Finish { dtxns: vec![0] },
        Prepare {
            dtxn: 1,
            txs: vec![transfer_compact()],
        },
        Prepare {
            dtxn: 2,
            txs: vec![transfer_compact()],
        },
        // Shard 0 voted `OutputLocked`, shard 1 `InputLocked`: the coordinator keeps the latter.
        Commit {
            dtxn: 2,
            outcomes: vec![Vote::InputLocked],
        },
        Finish { dtxns: vec![2] },
        Commit {
            dtxn: 1,
            outcomes: vec![Vote::Yes],
        },
        Prepare {
            dtxn: 3,
            txs: vec![mint_compact()],
        },
    ]
}

fn coordinator_snapshot_state() -> CoordinatorState {
    let mut state = CoordinatorState::default();
    for command in coordinator_commands() {
        assert_eq!(state.apply(&command), Applied::Changed, "{command:?}");
    }
    state
}

/// The same story at shard 0 of two (UHS ids whose first two bytes are 0000..=7fff: the
/// mint's marker, bob's 60 and alice's 40), request by request with the answers it gives.
/// Discards arrive out of order: dtxn 2's before dtxn 1's.
fn shard_snapshot_state() -> ShardState {
    let range = ShardRange::partition(2).expect("two shards")[0];
    assert_eq!(range, ShardRange { first: 0, last: 0x7fff });
    let mut shard = ShardState::new(range);
    let mint = ShardTx {
        index: 0,
        spent: vec![],
        created: vec![mint_marker()],
    };
    let transfer = ShardTx {
        index: 0,
        spent: vec![],
        created: vec![bob_60(), alice_40()],
    };
    let prepare = |dtxn, tx: &ShardTx| ShardRequest::Prepare {
        dtxn,
        txs: vec![tx.clone()],
    };
    let commit = |dtxn, done| ShardRequest::Commit {
        dtxn,
        complete: vec![done],
    };
    let prepared = |dtxn, vote| ShardResponse::Prepared {
        dtxn,
        votes: vec![vote],
    };
    let steps = [
        (prepare(0, &mint), prepared(0, Vote::Yes)),
        (commit(0, true), ShardResponse::Committed { dtxn: 0 }),
        (
            ShardRequest::Discard {
                dtxn: 0,
                finished_below: 1,
            },
            ShardResponse::Discarded { dtxn: 0 },
        ),
        (prepare(1, &transfer), prepared(1, Vote::Yes)),
        (prepare(2, &transfer), prepared(2, Vote::OutputLocked)),
        (commit(2, false), ShardResponse::Committed { dtxn: 2 }),
        (
            ShardRequest::Discard {
                dtxn: 2,
                finished_below: 1,
            },
            ShardResponse::Discarded { dtxn: 2 },
        ),
        (commit(1, true), ShardResponse::Committed { dtxn: 1 }),
        (prepare(3, &mint), prepared(3, Vote::OutputExists)),
    ];
    for (request, answer) in steps {
        assert_eq!(shard.apply(0, &request), answer, "{request:?}");
    }
    shard.check_invariants().expect("a consistent shard");
    shard
}

/// The snapshot vectors: name, the bytes `encode_snapshot` writes for the state built here, and
/// what decoding the document's bytes and encoding the result again gives.
type SnapshotCheck = (&'static str, Vec<u8>, fn(&[u8]) -> Result<Vec<u8>, String>);

fn snapshots() -> Vec<SnapshotCheck> {
    fn coordinator(bytes: &[u8]) -> Result<Vec<u8>, String> {
        let state = CoordinatorState::decode_snapshot(bytes, &CommandLimits::default()).map_err(|e| e.to_string())?;
        assert_eq!(state, coordinator_snapshot_state(), "coordinator-snapshot: decode");
        Ok(state.encode_snapshot())
    }
    fn shard(bytes: &[u8]) -> Result<Vec<u8>, String> {
        let state = ShardState::decode_snapshot(bytes).map_err(|e| e.to_string())?;
        assert_eq!(state.range(), shard_snapshot_state().range());
        assert_eq!(state.sorted_ids(), shard_snapshot_state().sorted_ids());
        assert_eq!(state.stats(), shard_snapshot_state().stats());
        Ok(state.encode_snapshot())
    }
    fn archiver(bytes: &[u8]) -> Result<Vec<u8>, String> {
        let mut state = Archiver::new(ArchiverConfig::default());
        state.restore(bytes).map_err(|e| e.to_string())?;
        assert_eq!(state.head(), archiver_state().head(), "archiver-snapshot: decode");
        Ok(state.snapshot())
    }
    vec![
        (
            "coordinator-snapshot",
            coordinator_snapshot_state().encode_snapshot(),
            coordinator,
        ),
        ("shard-snapshot", shard_snapshot_state().encode_snapshot(), shard),
        ("archiver-snapshot", archiver_state().snapshot(), archiver),
    ]
}

#[test]
fn every_documented_vector_is_what_the_codec_writes_and_reads() {
    let doc = doc_vectors();
    let messages = messages(&doc);
    let mut known = BTreeSet::new();
    for message in &messages {
        let name = message.vector_name();
        assert!(known.insert(name), "two messages for vector {name}");
        let bytes = doc
            .get(name)
            .unwrap_or_else(|| panic!("vector {name} is missing from the document"));
        assert_eq!(
            hex::encode(message.encode()),
            hex::encode(bytes),
            "vector {name}: encode"
        );
        assert_eq!(
            message.decode_like(bytes).as_ref(),
            Ok(message),
            "vector {name}: decode"
        );
    }
    for (name, encoded, reencode) in snapshots() {
        assert!(known.insert(name), "two states for vector {name}");
        let bytes = doc
            .get(name)
            .unwrap_or_else(|| panic!("vector {name} is missing from the document"));
        assert_eq!(hex::encode(&encoded), hex::encode(bytes), "vector {name}: encode");
        assert_eq!(
            reencode(bytes).map(hex::encode),
            Ok(hex::encode(bytes)),
            "vector {name}: decode and encode again"
        );
    }
    let documented: BTreeSet<&str> = doc
        .keys()
        .map(String::as_str)
        .filter(|n| !n.starts_with("raft-"))
        .collect();
    assert_eq!(
        documented, known,
        "vectors in the document vs. messages this test checks"
    );
}

/// The signed message of a submission as docs/wire-protocol.md defines it ("Submit (tag 5)"):
/// SHA-256("specie/submission/v1\0" ‖ count u64 LE ‖ each transaction's attestation message).
/// The expected hashes were computed independently (Python's hashlib) from the document's
/// definition and transaction-format.md §8's `transfer_compact_ser`.
#[test]
fn the_submission_message_is_the_documented_hash_and_attestations_verify() {
    let transfer = transfer_compact();
    assert_eq!(
        hex::encode(transfer.attestation_message()),
        "8c23e0502b81e35b9898c77f18910e5a4f85a5bf4c138e8ee77d339840894411",
        "SHA-256 of transfer_compact_ser"
    );
    assert_eq!(
        hex::encode(Submission::message(&[])),
        "a9d2ab04000ae9bd63dad038bfba5c90a72697784148c027e56b9f636a07967e",
        "an empty submission"
    );
    let expected: [u8; 32] = hex_array("0195f2d52f1479770e2bc35fd9261fee0c2d95bc4b1979f71aa7276314f4c42c");
    assert_eq!(
        hex::encode(Submission::message(std::slice::from_ref(&transfer))),
        hex::encode(expected),
        "a submission of the transfer"
    );

    // The vector's fixed signature is a real one: the documented submission verifies.
    let sentinel = keypair_from_secret(&SENTINEL_SECRET).expect("a valid secret key");
    assert_eq!(hex::encode(xonly_bytes(&sentinel)), SENTINEL_XONLY);
    let documented = submit_vector_message();
    assert_eq!(documented.verify([documented.sentinel].iter()), Ok(()));

    // What a sentinel sends: its key, and a signature over exactly the documented message.
    let attested = Submission::attest(vec![transfer], &sentinel);
    assert_eq!(attested.sentinel, xonly_bytes(&sentinel));
    assert_eq!(attested.verify([xonly_bytes(&sentinel)].iter()), Ok(()));
    let key = parse_xonly(&attested.sentinel).expect("an x-only key");
    assert!(schnorr_verify(&key, &expected, &attested.signature));
    assert!(attested.verify([[0x11; 32]].iter()).is_err(), "another sentinel's key");
}

/// The decoders refuse what §5.7 says they refuse: each vector of a snapshot with one field
/// broken. (The crates' own tests cover more; these tie the document's list to the code.)
#[test]
fn snapshot_decoders_refuse_what_the_document_says() {
    let edit = |bytes: &[u8], at: usize, with: &[u8]| {
        let mut bytes = bytes.to_vec();
        bytes[at..at + with.len()].copy_from_slice(with);
        bytes
    };
    let shard = shard_snapshot_state().encode_snapshot();
    let end = shard.len();
    let refused = [
        ("version 3", edit(&shard, 0, &[3])),
        ("range.last above 0xffff", edit(&shard, 9, &0x1_0000u64.to_le_bytes())),
        (
            "range.first above range.last",
            edit(&shard, 1, &0x8000u64.to_le_bytes()),
        ),
        ("a UHS id repeated", edit(&shard, 25 + 32, &shard[25..25 + 32])),
        // The last record starts 98 bytes before the end: dtxn 3 becomes 1.
        (
            "dtxn ids not strictly ascending",
            edit(&shard, end - 98, &1u64.to_le_bytes()),
        ),
        ("committed flag 2", edit(&shard, end - 17, &[2])),
        (
            "a discarded dtxn below the watermark",
            edit(&shard, end - 8, &0u64.to_le_bytes()),
        ),
        (
            "a dtxn both live and discarded",
            edit(&shard, end - 8, &3u64.to_le_bytes()),
        ),
    ];
    assert!(ShardState::decode_snapshot(&shard).is_ok());
    for (what, bytes) in refused {
        assert!(
            ShardState::decode_snapshot(&bytes).is_err(),
            "shard snapshot accepted: {what}"
        );
    }

    let coordinator = coordinator_snapshot_state().encode_snapshot();
    // The last active dtxn (3: the mint, preparing) is its last 8 + 8 + 152 + 1 bytes.
    let last = coordinator.len() - (8 + 8 + 152 + 1);
    let limits = CommandLimits::default();
    let refused = [
        ("version 0", edit(&coordinator, 0, &[0])),
        (
            "an active dtxn at next_dtxn",
            edit(&coordinator, 1, &3u64.to_le_bytes()),
        ),
        (
            "dtxn ids not strictly ascending",
            edit(&coordinator, last, &1u64.to_le_bytes()),
        ),
        ("decided flag 2", edit(&coordinator, coordinator.len() - 1, &[2])),
    ];
    assert!(CoordinatorState::decode_snapshot(&coordinator, &limits).is_ok());
    for (what, bytes) in refused {
        assert!(
            CoordinatorState::decode_snapshot(&bytes, &limits).is_err(),
            "coordinator snapshot accepted: {what}"
        );
    }
    let archiver = archiver_state().snapshot();
    let restore = |bytes: &[u8]| Archiver::new(ArchiverConfig::default()).restore(bytes);
    // Block 1's header starts after the version and the block count; its records root after
    // the header's version, height, previous header and record count.
    let header = 1 + 8;
    let records_root = header + 1 + 8 + 32 + 4;
    // The same state with one undecided record (the snapshot ends with the undecided count).
    let undecided = |copies: u32| {
        let mut bytes = archiver[..archiver.len() - 8].to_vec();
        bytes.extend_from_slice(&1u64.to_le_bytes());
        bytes.extend_from_slice(&mint_record().encode());
        bytes.extend_from_slice(&copies.to_le_bytes());
        bytes
    };
    let refused = [
        ("version 2", edit(&archiver, 0, &[2])),
        (
            "a first block at height 2",
            edit(&archiver, header + 1, &2u64.to_le_bytes()),
        ),
        (
            "a header that does not commit to its records",
            edit(&archiver, records_root, &[0; 32]),
        ),
    ];
    assert!(restore(&archiver).is_ok());
    for (what, bytes) in refused {
        assert!(restore(&bytes).is_err(), "archiver snapshot accepted: {what}");
    }
    assert!(
        matches!(restore(&undecided(0)), Err(ArchiverStateError::NoCopies { .. })),
        "archiver snapshot accepted: an undecided record with 0 copies"
    );
}
