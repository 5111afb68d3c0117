//! A role whose callers reach it over an HTTP API, replicated by a Raft group of the cluster (the
//! offline authority, the exchange): calls wait in slots until what they changed is committed,
//! and a replica that does not lead sends its caller to the leader's API.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use specie_host::{CallError, Calls, Gather, HostStopped, ReplicatedHost, RoleCall, RoleMachine, Slot, Wiring};
use specie_role::{Durable, Role, Ticket};
use specie_service::Unavailable;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::host::{Hosted, ROLE_CALLS_QUEUED_MAX};

/// A role such a group can host: callers only, no peers, its values movable across threads.
pub trait ServedRole:
    Durable
    + Role<Peer = Infallible, Message = Infallible, Command: Send + Sync, Input: Send, Reply: Send, Report: Send>
    + Send
    + 'static
{
}

impl<R> ServedRole for R where
    R: Durable
        + Role<Peer = Infallible, Message = Infallible, Command: Send + Sync, Input: Send, Reply: Send, Report: Send>
        + Send
        + 'static
{
}

/// Calls wait in slots; the role sends nothing to peers; its reports go to `report`.
pub struct CallWiring<R: Role> {
    report: fn(&R::Report),
}

impl<R: ServedRole> Wiring<R> for CallWiring<R> {
    type Call = RoleCall<R>;
    type ReplyTo = Slot<R::Reply>;

    fn input(call: RoleCall<R>, ticket: Ticket) -> R::Input {
        call(ticket)
    }

    fn send(&mut self, to: Infallible, _message: Infallible) {
        match to {}
    }

    fn reply(&mut self, slot: Slot<R::Reply>, reply: R::Reply) {
        slot.fill(reply);
    }

    fn report(&mut self, report: R::Report) {
        (self.report)(&report);
    }
}

/// One replica of such a group: its Raft replica, the way into its host, and each replica's
/// HTTP API (where a follower sends callers).
pub struct ServingReplica<R: ServedRole> {
    pub hosted: Arc<Hosted<RoleMachine<R>>>,
    calls: mpsc::Sender<Calls<CallWiring<R>, R>>,
    http: Vec<(u64, SocketAddr)>,
}

impl<R: ServedRole> ServingReplica<R> {
    /// Starts the role's host on `hosted`; `http` lists each replica's API by replica id.
    pub fn start(
        hosted: Arc<Hosted<RoleMachine<R>>>,
        http: Vec<(u64, SocketAddr)>,
        report: fn(&R::Report),
    ) -> (ServingReplica<R>, JoinHandle<Result<(), HostStopped>>) {
        let (calls, calls_rx) = mpsc::channel(ROLE_CALLS_QUEUED_MAX);
        let mut host = ReplicatedHost::new(hosted.group.clone(), hosted.replica.clone(), CallWiring { report });
        if let Some(plan) = hosted.snapshots {
            host = host.with_snapshots(plan);
        }
        // The role takes no peer messages: its inputs all come as calls.
        let (_no_inputs, inputs_rx) = mpsc::channel(1);
        let task = tokio::spawn(host.run(calls_rx, inputs_rx));
        (ServingReplica { hosted, calls, http }, task)
    }

    fn not_leader(&self, leader: Option<u64>) -> Unavailable {
        let leader_http = leader.and_then(|leader| {
            let followed = crate::live::followed().and_then(|topology| topology.http_of(&self.hosted.group, leader));
            followed.or_else(|| self.http.iter().find(|(id, _)| *id == leader).map(|(_, http)| *http))
        });
        Unavailable::NotLeader {
            leader_http: leader_http.map(|http| http.to_string()),
        }
    }

    /// The role's answer to `call`, once what it changed is committed.
    pub async fn ask(&self, call: RoleCall<R>) -> Result<R::Reply, Unavailable> {
        if !self.hosted.is_leader() {
            return Err(self.not_leader(self.hosted.replica.leader()));
        }
        let (mut slots, gathered) = Gather::slots(1);
        let slot = slots.pop().expect("one slot");
        if self.calls.send(vec![(call, slot)]).await.is_err() {
            return Err(Unavailable::Stopping);
        }
        match gathered.replies().await {
            Ok(mut replies) => Ok(replies.pop().expect("one reply")),
            Err(CallError::NotLeader { leader }) => Err(self.not_leader(leader)),
            Err(CallError::Unknown) => Err(Unavailable::OutcomeUnknown),
        }
    }
}
