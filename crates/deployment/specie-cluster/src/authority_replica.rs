//! A FastPay authority shard as a process of the cluster: the authority role
//! ([`specie_authority::AuthorityShard`], counted by [`TalliedShard`]) on the shared replicated
//! host, one Raft group per shard of an authority. The leader makes each round's votes,
//! confirmations, fundings and credits one Raft entry (one fsync per replica) before anyone hears
//! of them, so a vote is durable before it leaves.
//!
//! It serves, on its wire `address` (mutual TLS): Raft within its group, credits and their
//! acknowledgements from the other shards of its own authority (who sent them is the sender's
//! certificate, never the message), and status. On its `http` address it serves the FastPay
//! clients' API ([`specie_committee::http_server`]). It reaches the other shards of its authority to send
//! credits, and the online core's shard groups to find a funding's marker in the UHS before
//! crediting it: it takes no one's word for a funding.
use specie_metrics::role::RoleFamily;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use specie_authority::{AuthorityConfig, AuthorityShard, Input, Message, Reply, Report, ShardIndex};
use specie_committee::http_server::{ShardPlace, Unavailable};
use specie_committee::Call;
use specie_fastpay::Committee;
use specie_host::{CallError, Calls, Gather, HostStopped, ReplicatedHost, RoleMachine, Slot, Wiring};
use specie_role::Ticket;
use specie_service::{CoreCheckError, Pending};
use specie_wire::InvalidWireLimits;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::authority_tally::TalliedShard;
use crate::core_uhs::CoreUhs;
use crate::credentials::{self, CredentialsError};
use crate::group_client::GroupClient;
use crate::host::{
    replica_dir, serve_replica, spawn_api, wire_limits, Caller, Hosted, ReplicaError, RoleStatus, ServeError,
    ROLE_CALLS_QUEUED_MAX,
};
use crate::identity::{GroupRole, Identity};
use crate::protocol::{RoleRequest, RoleResponse};
use crate::topology::{AuthorityGroup, AuthorityPlace, InvalidTopology, Topology, UnknownGroup};

/// Messages from the other shards waiting for the role's host; beyond, senders wait.
const PEER_INPUTS_QUEUED_MAX: usize = 1024;
/// Messages waiting to go to one other shard; beyond, they are dropped (the role resends every
/// credit until it is acknowledged, so a dropped message only delays).
const PEER_MESSAGES_QUEUED_MAX: usize = 64;

/// The authority shard as Raft's state machine.
pub type AuthorityMachine = RoleMachine<TalliedShard>;

/// A 128-bit figure as JSON: a number while it fits in 64 bits, else its decimal string.
fn wide(value: i128) -> serde_json::Value {
    i64::try_from(value).map_or_else(|_| value.to_string().into(), serde_json::Value::from)
}

impl RoleStatus for AuthorityMachine {
    fn role_status(&self) -> serde_json::Value {
        let tallied = self.role();
        let (shard, counts) = (tallied.shard(), tallied.counts());
        let config = shard.config();
        let unacked = i128::try_from(shard.credits_unacked()).unwrap_or(i128::MAX);
        serde_json::json!({ "authority": {
            "authority": config.authority, "shard": config.shard, "shards": config.shards,
            "accounts": counts.accounts, "votes": counts.votes, "confirmed": counts.confirmed,
            "credits_unacked": wide(unacked), "balances": wide(shard.balances()),
            "funded": wide(i128::try_from(shard.funded()).unwrap_or(i128::MAX)),
            "redeemed": wide(i128::try_from(shard.redeemed()).unwrap_or(i128::MAX)),
            "epoch": shard.committee().epoch(), "seated": shard.seated(),
        }})
    }

    fn role_gauges(&self) -> Vec<(RoleFamily, f64)> {
        let tallied = self.role();
        let (shard, counts) = (tallied.shard(), tallied.counts());
        vec![
            (RoleFamily::FastpayAccounts, counts.accounts as f64),
            (RoleFamily::FastpayVotes, counts.votes as f64),
            (RoleFamily::FastpayConfirmed, counts.confirmed as f64),
            (RoleFamily::FastpayBalances, shard.balances() as f64),
            (RoleFamily::FastpayFunded, shard.funded() as f64),
            (RoleFamily::FastpayRedeemed, shard.redeemed() as f64),
            (RoleFamily::FastpayCreditsUnacked, shard.credits_unacked() as f64),
            (RoleFamily::FastpayEpoch, shard.committee().epoch() as f64),
            (RoleFamily::FastpaySeated, f64::from(u8::from(shard.seated()))),
        ]
    }
}

/// Why an authority replica could not start, or stopped other than on a signal.
#[derive(Debug, thiserror::Error)]
pub enum AuthorityReplicaError {
    #[error(transparent)]
    UnknownGroup(#[from] UnknownGroup),
    #[error("group {group} has no replica {id}")]
    NoSuchReplica { group: String, id: u64 },
    #[error("the cluster file's FastPay committee is invalid: {0}")]
    Committee(#[source] InvalidTopology),
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("invalid wire limits: {0}")]
    WireLimits(#[from] InvalidWireLimits),
    #[error("cannot listen on {address} (the FastPay API): {source}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Replica(#[from] ReplicaError),
}

/// Where reports an operator must read are kept: `<replica dir>/evidence/`.
struct EvidenceLocker {
    dir: PathBuf,
    kept: u64,
    /// Authorities some kept evidence convicts already: evidence convicting no one new is only
    /// logged, so that a user colluding with a Byzantine authority (re-sending a proposal whose
    /// justification holds its lies) cannot fill the disk with copies.
    convicted: std::collections::BTreeSet<specie_fastpay::AuthorityIndex>,
}

impl EvidenceLocker {
    /// A fresh file name in the locker: `<what>-<unix ms>-<count>.<extension>`.
    fn file_path(&mut self, what: &str, extension: &str) -> PathBuf {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        self.kept += 1;
        self.dir.join(format!("{what}-{millis}-{}.{extension}", self.kept))
    }

    /// Logs the report and keeps it: evidence as a file `specie byzantine check-evidence`
    /// reads, two conflicting final certificates one after the other in a `.certificates` file,
    /// a channel violation as a line of `channel-violations.log`.
    fn keep(&mut self, name: &str, report: Report) {
        tracing::error!(shard = name, ?report, "authority report");
        let written = std::fs::create_dir_all(&self.dir).and_then(|()| match &report {
            Report::Equivocation(evidence) => {
                let convicts = evidence.convicted().unwrap_or_default();
                if convicts.iter().all(|authority| self.convicted.contains(authority)) {
                    return Ok(());
                }
                self.convicted.extend(convicts);
                let mut bytes = vec![];
                evidence.encode_to(&mut bytes);
                let path = self.file_path("equivocation", "evidence");
                std::fs::write(&path, bytes)?;
                tracing::error!(authority = %name, evidence = %path.display(), "conflicting signatures");
                Ok(())
            }
            Report::ConflictingCertificates(certificates) => {
                let mut bytes = vec![];
                certificates.iter().for_each(|c| c.encode_to(&mut bytes));
                let path = self.file_path("conflict", "certificates");
                std::fs::write(&path, bytes)?;
                tracing::error!(authority = %name, certificates = %path.display(), "two final certificates for one slot");
                Ok(())
            }
            Report::ChannelViolation { from, reason } => {
                let mut log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(self.dir.join("channel-violations.log"))?;
                writeln!(log, "from shard {from}: {reason}")
            }
        });
        if let Err(error) = written {
            tracing::error!(shard = name, %error, dir = %self.dir.display(), "cannot keep a report");
        }
    }
}

/// Calls wait in slots; messages to the other shards of the authority go down one queue each.
struct AuthorityReplicaWiring {
    name: String,
    peers: BTreeMap<ShardIndex, mpsc::Sender<Message>>,
    evidence: EvidenceLocker,
}

impl Wiring<TalliedShard> for AuthorityReplicaWiring {
    type Call = Call;
    type ReplyTo = Slot<Reply>;

    fn input(call: Call, ticket: Ticket) -> Input {
        call.into_input(ticket)
    }

    fn send(&mut self, to: ShardIndex, message: Message) {
        if let Some(peer) = self.peers.get(&to) {
            // Full: dropped; the role resends what is not acknowledged.
            let _ = peer.try_send(message);
        }
    }

    fn reply(&mut self, slot: Slot<Reply>, reply: Reply) {
        slot.fill(reply);
    }

    fn report(&mut self, report: Report) {
        self.evidence.keep(&self.name, report);
    }
}

/// Delivers messages to another shard of the authority, one at a time (in order), to whichever
/// replica of its group leads; a failure is only logged, since the role retransmits.
async fn deliver(group: GroupClient, mut messages: mpsc::Receiver<Message>, timeout: Duration) {
    while let Some(message) = messages.recv().await {
        if let Err(error) = group.call(&RoleRequest::Authority(message), timeout).await {
            tracing::debug!(group = group.name(), %error, "a message to another shard was lost; the role resends");
        }
    }
}

/// Why a call got no answer from the role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorityCallError {
    /// This replica does not lead its group; the leader's replica id, if known.
    NotLeader(Option<u64>),
    /// The lead was lost while the call was in flight: the log decides (retry: orders,
    /// certificates and fundings are idempotent).
    OutcomeUnknown,
    Stopping,
}

/// What starting an authority replica needs besides its Raft replica.
struct Parts {
    place: AuthorityPlace,
    group: AuthorityGroup,
    committee: Arc<Committee>,
    siblings: BTreeMap<String, ShardIndex>,
    peers: Vec<(ShardIndex, GroupClient)>,
    core: CoreUhs,
    evidence_dir: PathBuf,
    timeout: Duration,
}

/// A running authority shard replica: its Raft replica, the ways into its host, and what its
/// HTTP API needs.
pub struct AuthorityReplica {
    pub hosted: Arc<Hosted<AuthorityMachine>>,
    calls: mpsc::Sender<Calls<AuthorityReplicaWiring, TalliedShard>>,
    inputs: mpsc::Sender<Vec<Input>>,
    /// The other shard groups of this authority, by group name: whose credits it takes.
    siblings: BTreeMap<String, ShardIndex>,
    pub place: AuthorityPlace,
    pub group: AuthorityGroup,
    pub committee: Arc<Committee>,
    core: CoreUhs,
}

impl AuthorityReplica {
    fn start(
        hosted: Arc<Hosted<AuthorityMachine>>,
        parts: Parts,
    ) -> (Arc<AuthorityReplica>, JoinHandle<Result<(), HostStopped>>) {
        let (calls, calls_rx) = mpsc::channel(ROLE_CALLS_QUEUED_MAX);
        let (inputs, inputs_rx) = mpsc::channel(PEER_INPUTS_QUEUED_MAX);
        let mut peers = BTreeMap::new();
        for (shard, client) in parts.peers {
            let (queue, messages) = mpsc::channel(PEER_MESSAGES_QUEUED_MAX);
            tokio::spawn(deliver(client, messages, parts.timeout));
            peers.insert(shard, queue);
        }
        let wiring = AuthorityReplicaWiring {
            name: hosted.group.clone(),
            peers,
            evidence: EvidenceLocker {
                dir: parts.evidence_dir,
                kept: 0,
                convicted: Default::default(),
            },
        };
        let mut host = ReplicatedHost::new(hosted.group.clone(), hosted.replica.clone(), wiring);
        if let Some(plan) = hosted.snapshots {
            host = host.with_snapshots(plan);
        }
        let task = tokio::spawn(host.run(calls_rx, inputs_rx));
        let replica = AuthorityReplica {
            hosted,
            calls,
            inputs,
            siblings: parts.siblings,
            place: parts.place,
            group: parts.group,
            committee: parts.committee,
            core: parts.core,
        };
        (Arc::new(replica), task)
    }

    /// Serves one wire request: credits or an acknowledgement from another shard of this
    /// authority, which its certificate names (the authorisation table let only those through).
    pub async fn serve(&self, caller: Caller, request: RoleRequest) -> Result<RoleResponse, ServeError> {
        let RoleRequest::Authority(message) = request else {
            return Err(self.hosted.refuse(
                &caller,
                format_args!("an authority shard does not serve {}", request.kind()),
            ));
        };
        let from = match caller.as_deref() {
            Some(Identity::Replica {
                role: GroupRole::Authority,
                group,
                ..
            }) => self.siblings.get(group).copied(),
            _ => None,
        };
        let Some(from) = from else {
            return Err(self.hosted.refuse(
                &caller,
                "credits come only from another shard of this authority, as its certificate proves",
            ));
        };
        if !self.hosted.is_leader() {
            return Ok(self.hosted.not_leader());
        }
        self.inputs
            .send(vec![message.into_input(from)])
            .await
            .map_err(|_| ServeError::Stopping)?;
        Ok(RoleResponse::Taken)
    }

    /// Hands one client call to the role and waits for its reply.
    pub async fn call(&self, call: Call) -> Result<Reply, AuthorityCallError> {
        if !self.hosted.is_leader() {
            return Err(AuthorityCallError::NotLeader(self.hosted.replica.leader()));
        }
        let (mut slots, gathered) = Gather::slots(1);
        let slot = slots.pop().expect("one slot");
        if self.calls.send(vec![(call, slot)]).await.is_err() {
            return Err(AuthorityCallError::Stopping);
        }
        match gathered.replies().await {
            Ok(mut replies) => Ok(replies.pop().expect("one reply")),
            Err(CallError::NotLeader { leader }) => Err(AuthorityCallError::NotLeader(leader)),
            Err(CallError::Unknown) => Err(AuthorityCallError::OutcomeUnknown),
        }
    }

    /// The HTTP API of the replica `leader` of this group, for a client sent elsewhere.
    pub fn http_of(&self, leader: Option<u64>) -> Option<SocketAddr> {
        let leader = leader?;
        let followed = crate::live::followed().and_then(|topology| topology.http_of(&self.group.name, leader));
        followed.or_else(|| self.group.replicas.iter().find(|r| r.id == leader).map(|r| r.http))
    }
}

impl specie_committee::http_server::AuthorityService for AuthorityReplica {
    fn committee(&self) -> &Committee {
        &self.committee
    }

    fn place(&self) -> ShardPlace {
        ShardPlace {
            authority: self.place.authority,
            shard: self.place.shard,
            shards: self.group.shards,
            replica: self.hosted.replica.id(),
        }
    }

    fn ready(&self) -> Result<(), Unavailable> {
        if self.hosted.is_leader() {
            return Ok(());
        }
        Err(self.not_leader(self.hosted.replica.leader()))
    }

    fn call(&self, call: Call) -> Pending<'_, Result<Reply, Unavailable>> {
        Box::pin(async move {
            AuthorityReplica::call(self, call).await.map_err(|error| match error {
                AuthorityCallError::NotLeader(leader) => self.not_leader(leader),
                AuthorityCallError::OutcomeUnknown => Unavailable::OutcomeUnknown,
                AuthorityCallError::Stopping => Unavailable::Stopping,
            })
        })
    }

    fn in_core(&self, marker: [u8; 32]) -> Pending<'_, Result<bool, CoreCheckError>> {
        Box::pin(self.core.holds_marker(marker))
    }
}

impl AuthorityReplica {
    /// Where a caller of a replica that does not lead should go.
    fn not_leader(&self, leader: Option<u64>) -> Unavailable {
        Unavailable::NotLeader {
            leader,
            leader_http: self.http_of(leader).map(|address| address.to_string()),
        }
    }
}

/// Everything replica `id` of `group` needs from the cluster file, its PKI and its peers.
fn parts(topology: &Topology, group: &AuthorityGroup, id: u64) -> Result<Parts, AuthorityReplicaError> {
    let me = &Identity::authority(&group.name, id);
    let committee_config = topology
        .fastpay_committee
        .as_ref()
        .expect("an authority group is in a committee");
    let committee = Arc::new(committee_config.committee().map_err(AuthorityReplicaError::Committee)?);
    let limits = wire_limits(topology);
    let transport = credentials::transport(topology, me)?;
    let timeout = Duration::from_millis(topology.limits.request_timeout_ms);
    let mut siblings = BTreeMap::new();
    let mut peers = vec![];
    for sibling in topology.authority_groups() {
        if sibling.place.authority != group.place.authority || sibling.place.shard == group.place.shard {
            continue;
        }
        let client = GroupClient::new(
            GroupRole::Authority,
            &sibling.name,
            &sibling.wire_replicas(),
            &limits,
            &transport,
        )?;
        siblings.insert(sibling.name.clone(), sibling.place.shard);
        peers.push((sibling.place.shard, client));
    }
    Ok(Parts {
        place: group.place,
        group: group.clone(),
        committee,
        siblings,
        peers,
        core: CoreUhs::new(topology, &limits, &transport)?,
        evidence_dir: replica_dir(topology, &group.name, id).join("evidence"),
        timeout,
    })
}

/// Runs replica `id` of authority shard group `group` until stopped.
pub async fn run(topology: Topology, group: String, id: u64) -> Result<(), AuthorityReplicaError> {
    let authority_group = topology.authority_group(&group)?;
    let Some(http) = authority_group.replicas.iter().find(|r| r.id == id).map(|r| r.http) else {
        return Err(AuthorityReplicaError::NoSuchReplica { group, id });
    };
    let me = Identity::authority(&group, id);
    let parts = parts(&topology, &authority_group, id)?;
    let key = credentials::authority_key(&topology, parts.place.authority)?;
    let committee_config = topology.fastpay_committee.as_ref().expect("checked by parts");
    let config = AuthorityConfig {
        committee: (*parts.committee).clone(),
        authority: parts.place.authority,
        shard: parts.place.shard,
        shards: authority_group.shards,
        credit_retransmit_ms: committee_config.credit_retransmit_ms,
        channel_credits_max: committee_config.channel_credits_max as usize,
    };
    let machine = RoleMachine::new(TalliedShard::new(AuthorityShard::new(config, key)));
    let listener = tokio::net::TcpListener::bind(crate::host::listen_address(http))
        .await
        .map_err(|source| AuthorityReplicaError::Listen { address: http, source })?;
    let http_limits = topology.http;
    serve_replica(
        &topology,
        me,
        &authority_group.wire_replicas(),
        machine,
        move |hosted| {
            let (replica, task) = AuthorityReplica::start(hosted, parts);
            let router = specie_committee::http_server::router(replica.clone())
                .merge(specie_committee::http_server::openapi().router());
            specie_service::announce::announce(format_args!(
                "{} replica {id}: FastPay API on http://{http}",
                replica.group.name
            ));
            spawn_api(listener, router, http_limits, "FastPay");
            (replica, task)
        },
        |replica: Arc<AuthorityReplica>, caller, request| async move { replica.serve(caller, request).await },
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use specie_fastpay::{
        deterministic_key, AccountKey, Certificate, DoubleVote, Evidence, Recipient, TransferOrder, Vote, VoteStatement,
    };

    use super::*;

    /// Two certificates of one payer's sequence number 0, for different orders, both signed by
    /// authorities 0 to 2 of a committee of 4.
    fn conflicting_certificates(committee: &Committee, keys: &[specie_fastpay::SigningKey]) -> Vec<DoubleVote> {
        let owner = deterministic_key("account", 1);
        let certificate = |amount: u64| {
            let order = TransferOrder {
                sender: AccountKey(owner.verifying_key().to_bytes()),
                recipient: Recipient::Account(AccountKey([9; 32])),
                amount,
                sequence: 0,
                memo: vec![],
            }
            .sign(&owner);
            let statement = VoteStatement {
                committee_id: committee.id(),
                kind: specie_fastpay::VoteKind::Prepare,
                round: 0,
                order_digest: order.order.digest(),
            };
            let votes: Vec<Vote> = (0..3u16)
                .map(|a| Vote {
                    authority: a,
                    statement,
                    signature: statement.sign(&keys[usize::from(a)]),
                })
                .collect();
            Certificate::from_votes(order, &votes)
        };
        DoubleVote::from_certificates(&certificate(1), &certificate(2))
    }

    #[test]
    fn reports_are_kept_as_evidence_check_evidence_reads_and_as_log_lines() {
        let keys: Vec<_> = (0..4).map(|i| deterministic_key("authority", i)).collect();
        let committee = Committee::new(1, keys.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut locker = EvidenceLocker {
            dir: dir.path().join("evidence"),
            kept: 0,
            convicted: Default::default(),
        };
        let double_votes = conflicting_certificates(&committee, &keys);
        assert_eq!(double_votes.len(), 3);
        let kept = Evidence {
            committee: committee.clone(),
            double_votes: double_votes.clone(),
            broken_promises: Vec::new(),
        };
        locker.keep("authority-0-shard-0", Report::Equivocation(Box::new(kept.clone())));
        // The same convictions again (a re-sent proposal, say) add no file.
        locker.keep("authority-0-shard-0", Report::Equivocation(Box::new(kept)));
        locker.keep(
            "authority-0-shard-0",
            Report::ChannelViolation {
                from: 1,
                reason: "an acknowledgement of credits never sent",
            },
        );
        let files: Vec<PathBuf> = std::fs::read_dir(dir.path().join("evidence"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        let evidence_files: Vec<&PathBuf> = files
            .iter()
            .filter(|path| path.extension().is_some_and(|e| e == "evidence"))
            .collect();
        assert_eq!(evidence_files.len(), 1, "{files:?}");
        let evidence_file = evidence_files[0];
        let bytes = std::fs::read(evidence_file).unwrap();
        let evidence = specie_fastpay::decode_exact("evidence", &bytes, 1 << 20, Evidence::decode_from).unwrap();
        assert_eq!(evidence.committee, committee);
        assert_eq!(evidence.double_votes, double_votes);
        assert_eq!(evidence.convicted(), Ok(vec![0, 1, 2]));
        let log = std::fs::read_to_string(dir.path().join("evidence").join("channel-violations.log")).unwrap();
        assert_eq!(log, "from shard 1: an acknowledgement of credits never sent\n");
    }
}
