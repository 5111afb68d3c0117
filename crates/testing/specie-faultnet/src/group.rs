//! A role replicated by Raft in one process, for tests: a group of replicas over the reliable
//! network, each running the role on the replicated host; calls go to whoever leads, through
//! elections; a replica can be crashed (cut off and dropped with whatever it had in flight).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use specie_host::{CallError, Gather, ReplicatedHost, RoleMachine, Slot, Wiring};
use specie_raft::{NodeId, Replica, ReplicaConfig, Start};
use specie_role::Durable;
use tokio::sync::mpsc;

use crate::FaultNetwork;

type Calls<C, T> = mpsc::Sender<Vec<(C, Slot<T>)>>;

/// A running replica, where its callers send, and where its peers send.
struct Member<R: Durable, C, T> {
    replica: Arc<Replica<RoleMachine<R>>>,
    calls: Calls<C, T>,
    inputs: mpsc::Sender<Vec<R::Input>>,
}

/// A Raft group of one role.
pub struct RoleGroup<R, W>
where
    R: Durable + Send + 'static,
    W: Wiring<R, ReplyTo = Slot<R::Reply>>,
{
    network: FaultNetwork,
    replicas: BTreeMap<NodeId, Member<R, W::Call, R::Reply>>,
    _dir: tempfile::TempDir,
}

impl<R, W> RoleGroup<R, W>
where
    R: Durable + Send + 'static,
    R::Command: Send + Sync,
    R::Input: Send,
    R::Reply: Send,
    W: Wiring<R, ReplyTo = Slot<R::Reply>> + Send + 'static,
    W::Call: Send,
{
    /// Starts `replicas` replicas of the role `role()` makes, each with the wiring `wiring()`.
    pub async fn start(name: &str, replicas: u64, role: impl Fn() -> R, wiring: impl Fn() -> W) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let network = FaultNetwork::reliable(7);
        let members: BTreeSet<NodeId> = (1..=replicas).collect();
        let config = ReplicaConfig {
            heartbeat_interval_ms: 50,
            election_timeout_min_ms: 300,
            election_timeout_max_ms: 600,
            ..ReplicaConfig::default()
        };
        let mut started = BTreeMap::new();
        for &id in &members {
            let replica = Replica::start(
                config.clone(),
                &dir.path().join(format!("replica-{id}")),
                id,
                Start::Found(members.clone()),
                network.transport(id),
                RoleMachine::new(role()),
            )
            .await
            .expect("a replica starts");
            network.register(id, replica.rpc_handler());
            let replica = Arc::new(replica);
            let (calls, calls_rx) = mpsc::channel(64);
            let (inputs, inputs_rx) = mpsc::channel(64);
            let host = ReplicatedHost::new(format!("{name}/replica-{id}"), replica.clone(), wiring());
            tokio::spawn(host.run(calls_rx, inputs_rx));
            started.insert(id, Member { replica, calls, inputs });
        }
        RoleGroup {
            network,
            replicas: started,
            _dir: dir,
        }
    }

    /// The one replica that leads, once there is one (at most 10 s).
    pub async fn leader(&self) -> NodeId {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let leaders: Vec<NodeId> = self
                .replicas
                .iter()
                .filter(|(_, member)| member.replica.is_leader())
                .map(|(id, _)| *id)
                .collect();
            if let [leader] = leaders[..] {
                return leader;
            }
            assert!(Instant::now() < deadline, "no single leader: {leaders:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Calls whoever leads, through elections, until it answers (at most 10 s).
    pub async fn call(&self, make: impl Fn() -> W::Call) -> R::Reply {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let leader = self.leader().await;
            let (mut slots, answer) = Gather::slots(1);
            let calls = &self.replicas[&leader].calls;
            if calls.send(vec![(make(), slots.remove(0))]).await.is_ok() {
                match answer.replies().await {
                    Ok(mut replies) => return replies.remove(0),
                    Err(CallError::NotLeader { .. } | CallError::Unknown) => {}
                }
            }
            assert!(Instant::now() < deadline, "no answer");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Hands peers' messages to whichever replica leads now, as a network would: lost if none
    /// does.
    pub async fn input(&self, inputs: Vec<R::Input>) {
        let leader = self.replicas.values().find(|member| member.replica.is_leader());
        if let Some(member) = leader {
            let _ = member.inputs.send(inputs).await;
        }
    }

    /// Reads every running replica's role, in replica order.
    pub fn read_roles<T>(&self, read: impl Fn(&R) -> T) -> Vec<T> {
        self.replicas
            .values()
            .map(|member| member.replica.with_state(|machine| read(machine.role())))
            .collect()
    }

    /// Crashes replica `id`: cut off and dropped with whatever it had in flight.
    pub async fn crash(&mut self, id: NodeId) {
        self.network.unregister(id);
        let member = self.replicas.remove(&id).expect("a running replica");
        member.replica.shutdown().await;
    }
}
