//! What every replica process does whatever its role: open its Raft replica in its own data
//! directory, serve Raft RPCs, role requests and status on its address, and stop on a signal.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use specie_raft::{Leadership, Replica, ReplicaConfig, ReplicatedStateMachine, Role};
use specie_transaction::codec::Encode;
use specie_wire::{handler_fn, WireLimits};
use tokio::sync::watch;

use crate::protocol::{RoleRequest, RoleResponse};
use crate::raft_transport::WireRaftTransport;
use crate::topology::{Replica as ReplicaAddress, Topology};

pub fn wire_limits(topology: &Topology) -> WireLimits {
    let limits = &topology.limits;
    WireLimits {
        frame_bytes_max: limits.frame_bytes_max as usize,
        in_flight_max: limits.requests_in_flight_max as usize,
        reconnect_backoff_ms_max: limits.reconnect_backoff_ms_max,
        ..WireLimits::default()
    }
}

pub fn replica_config(topology: &Topology) -> ReplicaConfig {
    let limits = &topology.limits;
    ReplicaConfig {
        heartbeat_interval_ms: limits.raft_heartbeat_ms,
        election_timeout_min_ms: limits.raft_election_timeout_ms,
        election_timeout_max_ms: limits.raft_election_timeout_ms * 2,
        snapshot_every_entries: limits.raft_snapshot_entries,
        ..ReplicaConfig::default()
    }
}

/// Where a replica keeps its files.
pub fn replica_dir(topology: &Topology, group: &str, id: u64) -> PathBuf {
    topology.data_dir.join(format!("{group}-{id}"))
}

/// A running replica, shared by the request handlers.
pub struct Hosted<S: ReplicatedStateMachine> {
    pub group: String,
    pub replica: Replica<S>,
}

impl<S: ReplicatedStateMachine> Hosted<S> {
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
        let mut status = serde_json::json!({
            "group": self.group, "replica": m.id, "role": role, "leader": m.leader, "term": m.term,
            "commit_index": m.commit_index, "applied_index": m.applied_index, "last_log_index": m.last_log_index,
            "snapshot_index": m.snapshot_index, "purged_index": m.purged_index,
        });
        if let (Some(map), serde_json::Value::Object(more)) = (status.as_object_mut(), extra) {
            map.extend(more);
        }
        RoleResponse::Status(status.to_string())
    }
}

/// Starts the replica `id` of `group` and serves `role` requests (everything but Raft and
/// status) until Ctrl-C / SIGTERM. Raft RPCs that arrive before the replica is open are refused;
/// Raft retries them.
pub async fn serve_replica<S, F, Fut>(
    topology: &Topology,
    group: &str,
    replicas: &[ReplicaAddress],
    id: u64,
    state_machine: S,
    after_start: impl FnOnce(Arc<Hosted<S>>),
    role: F,
) -> anyhow::Result<()>
where
    S: ReplicatedStateMachine,
    F: Fn(Arc<Hosted<S>>, RoleRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<RoleResponse, String>> + Send + 'static,
{
    let me = replicas
        .iter()
        .find(|r| r.id == id)
        .with_context(|| format!("group {group} has no replica {id}"))?;
    let limits = wire_limits(topology);
    let hosted: Arc<OnceLock<Arc<Hosted<S>>>> = Arc::new(OnceLock::new());
    let listener = tokio::net::TcpListener::bind(me.address)
        .await
        .with_context(|| format!("cannot listen on {}", me.address))?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let role = Arc::new(role);
    let handler = {
        let hosted = hosted.clone();
        handler_fn(move |bytes: Vec<u8>| {
            let (hosted, role) = (hosted.get().cloned(), role.clone());
            async move {
                let request = RoleRequest::decode(&bytes).map_err(|e| format!("malformed request: {e}"))?;
                let Some(hosted) = hosted else {
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
                    RoleRequest::Status => hosted.status(serde_json::json!({})),
                    other => role(hosted, other).await?,
                };
                Ok(response.encode())
            }
        })
    };
    let server = tokio::spawn(specie_wire::serve(listener, handler, limits.clone(), stop_rx));

    let members: BTreeSet<u64> = replicas.iter().map(|r| r.id).collect();
    let timeout = Duration::from_millis(topology.limits.request_timeout_ms);
    let transport = WireRaftTransport::new(replicas, id, &limits, timeout).map_err(anyhow::Error::msg)?;
    let dir = replica_dir(topology, group, id);
    let replica = Replica::start(replica_config(topology), &dir, id, &members, transport, state_machine)
        .await
        .with_context(|| format!("cannot start replica {id} of {group} in {}", dir.display()))?;
    let shared = Arc::new(Hosted {
        group: group.to_string(),
        replica,
    });
    let _ = hosted.set(shared.clone());
    after_start(shared.clone());
    tracing::info!(group, id, address = %me.address, "replica serving");
    eprintln!("{group} replica {id}: serving on {}", me.address);

    wait_for_stop_signal().await;
    let _ = stop_tx.send(true);
    let _ = server.await;
    drop(hosted);
    if let Ok(hosted) = Arc::try_unwrap(shared) {
        hosted.replica.shutdown().await;
    }
    Ok(())
}

pub async fn wait_for_stop_signal() {
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("signal handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
