//! What every replica process does whatever its role: open its Raft replica in its own data
//! directory, serve Raft RPCs, role requests and status on its address, and stop on a signal.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use specie_codec::Encode;
use specie_host::{CallError, GatherAnswer, HostStopped, Slot, SnapshotPlan};
use specie_raft::{
    Leadership, MembershipError, Replica, ReplicaConfig, ReplicatedStateMachine, Role, Start, StartError,
};
use specie_wire::{handler_fn, Admit, Handler, InvalidWireLimits, Peer, ServerCounters, ServerSetup, WireLimits};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinError, JoinHandle};

use crate::credentials::{self, CredentialsError};
use crate::identity::{authorize, Identity};
use crate::live;
use crate::protocol::{tag, MembershipChange, RoleRequest, RoleResponse};
use crate::raft_transport::WireRaftTransport;
use crate::topology::{Replica as ReplicaAddress, Topology, UnknownGroup};

/// A running replica and its role's host: what requests are served by once the replica is open.
type Running<S, T> = (Arc<Hosted<S>>, Arc<T>);

/// Who sent a request: the identity its certificate proves, or `None` on an insecure plaintext
/// transport (no authentication, so no authorisation either).
pub type Caller = Option<Arc<Identity>>;

/// Callers' batches waiting for a role's host; beyond this callers wait (backpressure).
pub const ROLE_CALLS_QUEUED_MAX: usize = 1024;

/// Why a role request is answered with an error instead of a response; what the peer reads is
/// its `Display`.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The request was refused after decoding (authorisation, attestation, wrong role).
    #[error("refused: {0}")]
    Refused(String),
    /// The replica lost the lead or stopped while the request was in flight: it may or may not
    /// take effect, as the replicated log decides.
    #[error("the outcome is unknown: the replica lost the lead or stopped")]
    OutcomeUnknown,
    #[error("the role is stopping")]
    Stopping,
    /// The role answered a call with the wrong kind of reply: a bug.
    #[error("internal error: the role answered {0} with the wrong kind of reply")]
    WrongReply(&'static str),
}

/// Why a replica process could not start, or stopped other than on a signal. A replica that
/// stops with an error exits, and its supervisor (or operator) restarts it from its durable state.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error(transparent)]
    UnknownGroup(#[from] UnknownGroup),
    #[error("{identity} is not a replica")]
    NotAReplica { identity: Identity },
    #[error("group {group} has no replica {id}")]
    NoSuchReplica { group: String, id: u64 },
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("invalid wire limits: {0}")]
    WireLimits(#[from] InvalidWireLimits),
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start replica {id} of {group} in {dir}: {source}")]
    Start {
        id: u64,
        group: String,
        dir: String,
        #[source]
        source: StartError,
    },
    #[error("the cluster file has no [atomizer] group: it runs the 2PC shape (`specie cluster up --shape atomizer` makes a cluster of the atomizer shape)")]
    NoAtomizer,
    #[error(transparent)]
    Seed(#[from] crate::backup::SeedError),
    #[error("cannot make replica {id} of {group} a founder: {source}")]
    Found {
        group: String,
        id: u64,
        #[source]
        source: specie_raft::PrepareError,
    },
    #[error("{me}: its role host ended")]
    HostEnded { me: Identity },
    #[error(transparent)]
    HostStopped(#[from] HostStopped),
    #[error("{me}: its role host failed: {source}")]
    HostFailed {
        me: Identity,
        #[source]
        source: JoinError,
    },
}

/// Hands a caller's calls (each with its slot of `gathered`) to a role's host and waits for
/// every reply; `respond` turns them into the response (`None`: a reply of the wrong kind).
pub async fn call_host<S, C, T>(
    hosted: &Hosted<S>,
    host: &mpsc::Sender<Vec<(C, Slot<T>)>>,
    calls: Vec<(C, Slot<T>)>,
    gathered: GatherAnswer<T>,
    request: &'static str,
    respond: impl FnOnce(Vec<T>) -> Option<RoleResponse>,
) -> Result<RoleResponse, ServeError>
where
    S: ReplicatedStateMachine,
{
    if host.send(calls).await.is_err() {
        return Err(ServeError::Stopping);
    }
    match gathered.replies().await {
        Ok(replies) => respond(replies).ok_or(ServeError::WrongReply(request)),
        Err(CallError::NotLeader { .. }) => Ok(hosted.not_leader()),
        Err(CallError::Unknown) => Err(ServeError::OutcomeUnknown),
    }
}

pub fn wire_limits(topology: &Topology) -> WireLimits {
    let limits = &topology.limits;
    WireLimits {
        frame_bytes_max: limits.frame_bytes_max as usize,
        in_flight_max: limits.requests_in_flight_max as usize,
        reconnect_backoff_ms_max: limits.reconnect_backoff_ms_max,
        handshake_timeout_ms: limits.handshake_timeout_ms,
        handshakes_max: limits.handshakes_max as usize,
        ..WireLimits::default()
    }
}

pub fn replica_config(topology: &Topology) -> ReplicaConfig {
    let limits = &topology.limits;
    ReplicaConfig {
        heartbeat_interval_ms: limits.raft_heartbeat_ms,
        election_timeout_min_ms: limits.raft_election_timeout_ms,
        election_timeout_max_ms: limits.raft_election_timeout_ms * 2,
        // The role's host decides when each replica snapshots (specie_host::SnapshotPlan).
        snapshot_every_entries: 0,
        ..ReplicaConfig::default()
    }
}

/// Set to `1` in the environment of a member's process (by `cluster run --listen-any`), it binds
/// the unspecified address (0.0.0.0 or ::) on each port the cluster file gives the member,
/// instead of the file's address: for a container that peers reach at an address that is not
/// its own (a Kubernetes service's cluster IP). Peers still reach it at the file's address.
pub const LISTEN_ANY_ENV: &str = "SPECIE_LISTEN_ANY";

/// Where a member's process binds `address` of the cluster file ([`LISTEN_ANY_ENV`]).
pub fn listen_address(address: SocketAddr) -> SocketAddr {
    match std::env::var_os(LISTEN_ANY_ENV).is_some_and(|value| value == "1") {
        true if address.is_ipv4() => SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, address.port())),
        true => SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, address.port())),
        false => address,
    }
}

/// The most bytes of a replica's state in one answer to a backup (`RoleRequest::ReplicaSnapshot`):
/// small enough that a state of any size goes in a modest frame, large enough that a gigabyte is a
/// thousand round trips.
pub const STATE_CHUNK_BYTES_MAX: usize = 1 << 20;

/// Where a replica keeps its files.
pub fn replica_dir(topology: &Topology, group: &str, id: u64) -> PathBuf {
    topology.data_dir.join(format!("{group}-{id}"))
}

/// What a replica adds to its status from its role (`specie cluster status`): read under the
/// state machine's lock, so it must be quick.
pub trait RoleStatus {
    fn role_status(&self) -> serde_json::Value {
        serde_json::json!({})
    }

    /// What the role's replicated state is, as a size and a digest that equal states share
    /// (`cluster digests`); `None` for a role that keeps none. Read under the same lock, on an
    /// operator's request only: it may take time in proportion to the state.
    fn replica_digest(&self) -> Option<serde_json::Value> {
        None
    }

    /// What the role holds, as its mode's metric families (read at every scrape, under the
    /// same lock: quick too).
    fn role_gauges(&self) -> Vec<(specie_metrics::role::RoleFamily, f64)> {
        vec![]
    }
}

/// A shard's UHS as `GET /v1/uhs/digest` sums it up, for its range alone.
pub fn uhs_digest_json(sorted: &[specie_transaction::UhsId]) -> serde_json::Value {
    let (ids, sha256) = specie_transaction::hash::uhs_digest(sorted);
    serde_json::json!({ "ids": ids, "sha256_sorted": hex::encode(sha256) })
}

impl RoleStatus for specie_host::RoleMachine<specie_shard::Shard> {
    fn replica_digest(&self) -> Option<serde_json::Value> {
        Some(uhs_digest_json(&self.role().state().sorted_ids()))
    }
}
impl RoleStatus for specie_host::RoleMachine<specie_coordinator::Coordinator> {
    /// The leader's queue and dtxns in flight against their limits (0 on a follower).
    fn role_gauges(&self) -> Vec<(specie_metrics::role::RoleFamily, f64)> {
        specie_api::observe::coordinator_gauges(self.role()).to_vec()
    }
}

/// A running replica, shared by the request handlers.
pub struct Hosted<S: ReplicatedStateMachine> {
    pub group: String,
    pub replica: Arc<Replica<S>>,
    /// What the wire server turned away, and requests refused by the authorisation table or by
    /// the role's own checks of its input.
    pub refused: Arc<ServerCounters>,
    /// When the role's host has this replica snapshot; `None`: Raft's own policy.
    pub snapshots: Option<SnapshotPlan>,
    /// The state a backup is reading in chunks, and the applied index it is of
    /// ([`Hosted::state_chunk`]).
    pub backup_state: std::sync::Mutex<Option<(u64, Arc<Vec<u8>>)>>,
}

impl<S: ReplicatedStateMachine> Hosted<S> {
    pub fn new(group: impl Into<String>, replica: Replica<S>) -> Hosted<S> {
        Hosted {
            group: group.into(),
            replica: Arc::new(replica),
            refused: Arc::default(),
            snapshots: None,
            backup_state: std::sync::Mutex::new(None),
        }
    }

    /// Bytes `offset..` (at most `chunk_bytes_max`) of the replica's whole applied state, with the
    /// applied index and length of the state they are cut from. The state is encoded at offset 0
    /// and kept for the chunks that follow while nothing more is applied; the last chunk lets it
    /// go. A state that changed between chunks shows in their applied indexes.
    pub fn state_chunk(&self, offset: u64, chunk_bytes_max: usize) -> RoleResponse {
        let applied_index = self.replica.metrics().applied_index.unwrap_or(0);
        let mut kept = self.backup_state.lock().unwrap_or_else(|e| e.into_inner());
        let state = match &*kept {
            Some((at, state)) if *at == applied_index && offset > 0 => state.clone(),
            _ => Arc::new(self.replica.with_state(|state| state.snapshot())),
        };
        let total_bytes = state.len() as u64;
        let start = offset.min(total_bytes) as usize;
        let end = start.saturating_add(chunk_bytes_max).min(state.len());
        let chunk = state[start..end].to_vec();
        *kept = (end < state.len()).then_some((applied_index, state));
        RoleResponse::Snapshot {
            applied_index,
            total_bytes,
            chunk,
        }
    }

    pub fn is_leader(&self) -> bool {
        matches!(*self.replica.leadership().borrow(), Leadership::Leader { .. })
    }

    pub fn not_leader(&self) -> RoleResponse {
        RoleResponse::NotLeader(self.replica.leader())
    }

    pub fn status(&self, extra: serde_json::Value) -> RoleResponse {
        let m = self.replica.metrics();
        let role = match m.role {
            Role::Leader => "leader",
            Role::Candidate => "candidate",
            Role::Follower => "follower",
            Role::Learner => "learner",
            Role::Stopped => "stopped",
        };
        let refused: serde_json::Map<String, serde_json::Value> = self
            .refused
            .snapshot()
            .into_iter()
            .map(|(name, count)| (name.to_string(), count.into()))
            .collect();
        let lag: serde_json::Map<String, serde_json::Value> = (self.replica.replication_lag().into_iter())
            .map(|(node, behind)| (node.to_string(), behind.into()))
            .collect();
        let mut status = serde_json::json!({
            "group": self.group, "replica": m.id, "role": role, "leader": m.leader, "term": m.term,
            "commit_index": m.commit_index, "applied_index": m.applied_index, "last_log_index": m.last_log_index,
            "snapshot_index": m.snapshot_index, "purged_index": m.purged_index, "refused": refused,
            "membership": membership_json(&self.replica.membership()), "replication_lag": lag,
        });
        if let (Some(map), serde_json::Value::Object(more)) = (status.as_object_mut(), extra) {
            map.extend(more);
        }
        RoleResponse::Status(status.to_string())
    }

    /// Counts and logs a request the role refused after decoding it.
    pub fn refuse(&self, caller: &Caller, reason: impl std::fmt::Display) -> ServeError {
        ServeError::Refused(refuse(&self.refused, caller, reason))
    }
}

/// Counts and logs a refused request; the reason for the peer.
fn refuse(counters: &ServerCounters, caller: &Caller, reason: impl std::fmt::Display) -> String {
    counters.requests_refused.fetch_add(1, Ordering::Relaxed);
    let peer = caller.as_deref().map_or("anonymous".to_string(), ToString::to_string);
    tracing::warn!(%peer, %reason, "request refused");
    reason.to_string()
}

/// Starts the replica `me` (of a group listed in `replicas`) and serves `role` requests
/// (everything but Raft and status) until Ctrl-C / SIGTERM. Only peers whose certificates name a
/// member of the topology are admitted, and each request is checked against the authorisation
/// table before it is decoded. Raft RPCs that arrive before the replica is open are refused;
/// Raft retries them.
pub async fn serve_replica<S, T, F, Fut>(
    topology: &Topology,
    me: Identity,
    replicas: &[ReplicaAddress],
    state_machine: S,
    start_host: impl FnOnce(Arc<Hosted<S>>) -> (Arc<T>, JoinHandle<Result<(), HostStopped>>),
    role: F,
) -> Result<(), ReplicaError>
where
    S: ReplicatedStateMachine + RoleStatus,
    T: Send + Sync + 'static,
    F: Fn(Arc<T>, Caller, RoleRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<RoleResponse, ServeError>> + Send + 'static,
{
    let Identity::Replica {
        role: group_role,
        group,
        id,
    } = me.clone()
    else {
        return Err(ReplicaError::NotAReplica { identity: me });
    };
    let Some((address, metrics)) = replicas.iter().find(|r| r.id == id).map(|r| (r.address, r.metrics)) else {
        return Err(ReplicaError::NoSuchReplica { group, id });
    };
    let limits = wire_limits(topology);
    let transport = credentials::transport(topology, &me)?;
    let hosted: Arc<OnceLock<Running<S, T>>> = Arc::new(OnceLock::new());
    let listener = tokio::net::TcpListener::bind(listen_address(address))
        .await
        .map_err(|source| ReplicaError::Listen { address, source })?;
    let started = ready_once_started::<S>(group.clone());
    if let Some(metrics) = metrics {
        serve_metrics(metrics, topology.http).await?;
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let counters: Arc<ServerCounters> = Arc::default();
    let admit = admit_members(
        topology.clone(),
        Arc::new(me.clone()),
        hosted.clone(),
        counters.clone(),
        Arc::new(role),
    );
    let setup = ServerSetup {
        limits: limits.clone(),
        transport: transport.clone(),
        counters: counters.clone(),
    };
    let server = tokio::spawn(specie_wire::serve(listener, admit, setup, stop_rx));

    let timeout = Duration::from_millis(topology.limits.request_timeout_ms);
    let raft_transport = WireRaftTransport::new(group_role, &group, topology, limits, transport, timeout);
    let dir = replica_dir(topology, &group, id);
    let state_machine = first_state(topology, &group, replicas, id, state_machine)?;
    let replica = Replica::start(
        replica_config(topology),
        &dir,
        id,
        Start::Prepared,
        raft_transport,
        state_machine,
    )
    .await
    .map_err(|source| ReplicaError::Start {
        id,
        group: group.clone(),
        dir: dir.display().to_string(),
        source,
    })?;
    let shared = Arc::new(Hosted {
        refused: counters,
        snapshots: Some(SnapshotPlan::every(topology.limits.raft_snapshot_entries)),
        ..Hosted::new(group.clone(), replica)
    });
    observe(&shared);
    let _ = started.set(shared.replica.clone());
    let (role_host, host) = start_host(shared.clone());
    let _ = hosted.set((shared.clone(), role_host));
    tracing::info!(%me, %address, "replica serving");
    specie_service::announce::announce(format_args!("{group} replica {id}: serving on {address} as {me}"));

    // A replica whose Raft core or role host stopped must not linger half alive: it exits with
    // an error, and its supervisor (or operator) restarts it from its durable state.
    let ended = tokio::select! {
        () = wait_for_stop_signal() => None,
        ended = host => Some(ended),
    };
    let _ = stop_tx.send(true);
    let _ = server.await;
    shared.replica.shutdown().await;
    match ended {
        None => Ok(()),
        Some(Ok(Ok(()))) => Err(ReplicaError::HostEnded { me }),
        Some(Ok(Err(stopped))) => Err(stopped.into()),
        Some(Err(panicked)) => Err(ReplicaError::HostFailed { me, source: panicked }),
    }
}

/// The state a replica starts from before its own log and snapshots: its group's state in the
/// backup a restored cluster was built from, or the role's initial state. With
/// `Topology::founding` on, a replica whose directory holds none first becomes a founder.
fn first_state<S: ReplicatedStateMachine>(
    topology: &Topology,
    group: &str,
    replicas: &[ReplicaAddress],
    id: u64,
    state_machine: S,
) -> Result<S, ReplicaError> {
    if topology.founding {
        found_if_new(topology, group, replicas, id)?;
    }
    Ok(crate::backup::seeded(topology, group, state_machine)?)
}

/// With `Topology::founding` on: a replica whose directory holds none is a founder of its group
/// with the replicas the file lists, starting on a host of its own.
fn found_if_new(topology: &Topology, group: &str, replicas: &[ReplicaAddress], id: u64) -> Result<(), ReplicaError> {
    tracing::warn!(
        "the cluster file has `founding = true`: remove it once every member has started, or a replica whose \
         directory is lost would found its group again under its old id"
    );
    let ids: Vec<u64> = replicas.iter().map(|r| r.id).collect();
    let made = crate::membership::prepare_founder(topology, group, &ids, id).map_err(|source| ReplicaError::Found {
        group: group.to_string(),
        id,
        source,
    })?;
    if made {
        tracing::info!(group, id, founders = ?ids, "prepared a new directory: this replica founds its group");
    }
    Ok(())
}

/// Admits members of the topology (and, on an insecure plaintext transport, anyone), and gives
/// each connection a handler that checks every request against the authorisation table.
fn admit_members<S, T, F, Fut>(
    topology: Topology,
    me: Arc<Identity>,
    hosted: Arc<OnceLock<Running<S, T>>>,
    counters: Arc<ServerCounters>,
    role: Arc<F>,
) -> Admit
where
    S: ReplicatedStateMachine + RoleStatus,
    T: Send + Sync + 'static,
    F: Fn(Arc<T>, Caller, RoleRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<RoleResponse, ServeError>> + Send + 'static,
{
    let topology = Arc::new(topology);
    Arc::new(move |peer: &Peer| {
        // The membership this admission was decided on; requests check it again only once the
        // followed file has changed it.
        let admitted_at = live::generation();
        let caller: Caller = match &peer.name {
            None => None,
            Some(name) => {
                let identity = Identity::parse(name).ok_or_else(|| format!("'{name}' is not a specie identity"))?;
                if !identity.is_member_of(&live::current(&topology)) {
                    return Err(format!("{identity} is not a member of this cluster"));
                }
                Some(Arc::new(identity))
            }
        };
        specie_metrics::wire::handshake_admitted(caller.as_deref().map_or("unauthenticated", Identity::role_label));
        Ok(request_handler(
            caller,
            admitted_at,
            topology.clone(),
            me.clone(),
            hosted.clone(),
            counters.clone(),
            role.clone(),
        ))
    })
}

fn request_handler<S, T, F, Fut>(
    caller: Caller,
    admitted_at: u64,
    topology: Arc<Topology>,
    me: Arc<Identity>,
    hosted: Arc<OnceLock<Running<S, T>>>,
    counters: Arc<ServerCounters>,
    role: Arc<F>,
) -> Handler
where
    S: ReplicatedStateMachine + RoleStatus,
    T: Send + Sync + 'static,
    F: Fn(Arc<T>, Caller, RoleRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<RoleResponse, ServeError>> + Send + 'static,
{
    // The newest membership this connection's peer was found a member of.
    let member_at = Arc::new(std::sync::atomic::AtomicU64::new(admitted_at));
    handler_fn(move |bytes: Vec<u8>| {
        let (member_at, caller, topology, me, hosted, counters, role) = (
            member_at.clone(),
            caller.clone(),
            topology.clone(),
            me.clone(),
            hosted.get().cloned(),
            counters.clone(),
            role.clone(),
        );
        async move {
            let Some(&request_tag) = bytes.first() else {
                return Err(ServeError::Refused(refuse(&counters, &caller, "empty request")).to_string());
            };
            if let Some(peer) = &caller {
                // A replica removed from its group since it connected is a member no more: asked
                // again once per membership change, not per request.
                let generation = live::generation();
                if member_at.load(Ordering::Acquire) != generation {
                    if !peer.is_member_of(&live::current(&topology)) {
                        counters.requests_refused.fetch_add(1, Ordering::Relaxed);
                        return Err(format!("{peer} is no longer a member of this cluster"));
                    }
                    member_at.store(generation, Ordering::Release);
                }
                // Decided on the tag alone: a refused request is never decoded.
                if let Err(refusal) = authorize(&topology, &me, peer, request_tag) {
                    counters.requests_refused.fetch_add(1, Ordering::Relaxed);
                    specie_metrics::wire::authorization_refused(peer.role_label());
                    tracing::warn!(%peer, request = tag::name(request_tag), "request refused: not authorised");
                    return Err(format!("not authorised: {refusal}"));
                }
            }
            let request = RoleRequest::decode(&bytes).map_err(|error| {
                ServeError::Refused(refuse(&counters, &caller, format_args!("malformed request: {error}"))).to_string()
            })?;
            let Some((hosted, role_host)) = hosted else {
                // Still opening its log: a role request certainly did not execute here, and
                // "not the leader" tells callers to try another replica rather than report
                // the outcome unknown. Raft retries its own RPCs.
                return match request {
                    RoleRequest::Raft(_) => Err("the replica is still starting".to_string()),
                    _ => Ok(RoleResponse::NotLeader(None).encode()),
                };
            };
            let response = match request {
                RoleRequest::Raft(rpc) => RoleResponse::Raft(hosted.replica.rpc_handler().handle(&rpc).await),
                RoleRequest::Status => hosted.status(hosted.replica.with_state(RoleStatus::role_status)),
                RoleRequest::Membership(change) => change_membership(&hosted, change)
                    .await
                    .map_err(|error| error.to_string())?,
                RoleRequest::ReplicaSnapshot { offset } => {
                    // At most half a frame, leaving room for everything around it.
                    let chunk_bytes_max = STATE_CHUNK_BYTES_MAX.min(topology.limits.frame_bytes_max as usize / 2);
                    hosted.state_chunk(offset, chunk_bytes_max)
                }
                RoleRequest::ReplicaDigest => match hosted.replica.with_state(RoleStatus::replica_digest) {
                    Some(digest) => RoleResponse::Status(digest.to_string()),
                    None => {
                        return Err(
                            ServeError::Refused(refuse(&counters, &caller, "this role keeps no digest")).to_string(),
                        )
                    }
                },
                other => role(role_host, caller, other)
                    .await
                    .map_err(|error| error.to_string())?,
            };
            Ok(response.encode())
        }
    })
}

/// A learner is promoted once within this many entries of its leader's log.
pub const PROMOTE_LAG_ENTRIES_MAX: u64 = 64;

/// One step of a membership change, on this replica (which must lead): the group's membership
/// afterwards, as JSON.
async fn change_membership<S: ReplicatedStateMachine>(
    hosted: &Hosted<S>,
    change: MembershipChange,
) -> Result<RoleResponse, ServeError> {
    let replica = &hosted.replica;
    let changed = match change {
        MembershipChange::AddLearner(id) => replica.add_learner(id).await,
        MembershipChange::Promote(id) => replica.promote(id, PROMOTE_LAG_ENTRIES_MAX).await,
        MembershipChange::Remove(id) => replica.remove(id).await,
    };
    match changed {
        Ok(membership) => {
            tracing::info!(group = %hosted.group, ?change, ?membership, "membership changed");
            Ok(RoleResponse::Status(membership_json(&membership).to_string()))
        }
        Err(MembershipError::NotLeader { leader }) => Ok(RoleResponse::NotLeader(leader)),
        Err(refused) => {
            tracing::warn!(group = %hosted.group, ?change, %refused, "membership change refused");
            Err(ServeError::Refused(format!("membership change: {refused}")))
        }
    }
}

fn membership_json(membership: &specie_raft::Membership) -> serde_json::Value {
    serde_json::json!({
        "voters": membership.voters, "learners": membership.learners, "changing": membership.changing,
    })
}

/// Serves only what the template adds to every port (`/metrics`, `/livez`, `/readyz`, and
/// `/openapi.json` describing them) on `address`: a replica whose role has no HTTP API of its
/// own.
async fn serve_metrics(address: std::net::SocketAddr, limits: specie_service::HttpLimits) -> Result<(), ReplicaError> {
    let listener = tokio::net::TcpListener::bind(listen_address(address))
        .await
        .map_err(|source| ReplicaError::Listen { address, source })?;
    let doc = specie_service::ApiDoc::new(
        "specie replica operations",
        "A cluster replica whose role has no HTTP API of its own (a shard, a coordinator, an \
         archiver): its metrics and health only (docs/operator-guide.md, \"Metrics and health\").",
    );
    spawn_api(listener, doc.router(), limits, "metrics");
    Ok(())
}

/// A replica behind less than this many committed entries is caught up (ready).
pub const READY_APPLY_LAG_ENTRIES_MAX: u64 = 1_000;

/// Makes the replica seen: its role's state, its Raft view and its wire server's counters read
/// at every scrape, its leader changes counted.
fn observe<S: ReplicatedStateMachine + RoleStatus>(hosted: &Arc<Hosted<S>>) {
    let replica = hosted.replica.clone();
    specie_metrics::role::watch(move || replica.with_state(RoleStatus::role_gauges));
    let replica = hosted.replica.clone();
    specie_metrics::raft::watch(move || {
        let m = replica.metrics();
        let membership = replica.membership();
        specie_metrics::raft::RaftView {
            term: m.term,
            is_leader: m.role == Role::Leader,
            leader: m.leader,
            commit_index: m.commit_index,
            applied_index: m.applied_index,
            last_log_index: m.last_log_index,
            snapshot_index: m.snapshot_index,
            log_appends: m.log_appends,
            log_syncs: m.log_syncs,
            replication_lag: replica.replication_lag(),
            voters: membership.voters.len() as u64,
            learners: membership.learners.len() as u64,
            membership_changing: membership.changing,
        }
    });
    let refused = hosted.refused.clone();
    specie_metrics::wire::watch(move || refused.snapshot().to_vec());
    let mut leadership = hosted.replica.leadership();
    let replica = hosted.replica.clone();
    tokio::spawn(async move {
        let mut leader = replica.leader();
        while leadership.changed().await.is_ok() {
            let now = replica.leader();
            if now != leader {
                specie_metrics::raft::leader_changed();
                leader = now;
            }
        }
    });
}

/// Adds the replica's readiness check: not ready while it opens its log (until the replica is
/// set in the cell returned), then only while its group has a leader and it has applied what it
/// knows committed (within [`READY_APPLY_LAG_ENTRIES_MAX`]).
fn ready_once_started<S: ReplicatedStateMachine>(group: String) -> Arc<OnceLock<Arc<Replica<S>>>> {
    let started: Arc<OnceLock<Arc<Replica<S>>>> = Arc::default();
    let replica = started.clone();
    specie_service::health::add_check("raft", move || {
        let not_ready = |reason: String| Err(specie_service::health::NotReady(reason));
        let Some(replica) = replica.get() else {
            return not_ready("starting: the replica is opening its log".to_string());
        };
        let m = replica.metrics();
        if m.leader.is_none() {
            return not_ready(format!("group {group} has no leader"));
        }
        let lag = m.commit_index.unwrap_or(0).saturating_sub(m.applied_index.unwrap_or(0));
        if lag > READY_APPLY_LAG_ENTRIES_MAX {
            return not_ready(format!(
                "{lag} committed entries not applied yet (ready within {READY_APPLY_LAG_ENTRIES_MAX})"
            ));
        }
        Ok(())
    });
    started
}

pub async fn wait_for_stop_signal() {
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("signal handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

/// Serves a replica's HTTP API on `listener` until the process is told to stop; `what` names the
/// API in the log if it stops on an error.
pub fn spawn_api(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: specie_service::HttpLimits,
    what: &'static str,
) {
    tokio::spawn(async move {
        let served = specie_service::server::serve(listener, router, limits, wait_for_stop_signal()).await;
        if let Err(error) = served {
            tracing::error!(%error, "the {what} API stopped");
        }
    });
}
