//! A shard group member: the shard state machine replicated by Raft. The leader makes each
//! coordinator batch durable as one Raft entry (one fsync per replica) before answering.

use std::sync::Arc;

use specie_codec::{Decode, Encode};
use specie_raft::ReplicatedStateMachine;
use specie_shard::{ShardRange, ShardRequest, ShardResponse, ShardState, ShardWireLimits};

use crate::host::{serve_replica, Caller, Hosted};
use crate::identity::Identity;
use crate::protocol::{RoleRequest, RoleResponse};
use crate::topology::Topology;

pub struct ShardMachine {
    pub state: ShardState,
    limits: ShardWireLimits,
}

impl ShardMachine {
    pub fn new(range: ShardRange) -> Self {
        ShardMachine {
            state: ShardState::new(range),
            limits: ShardWireLimits::default(),
        }
    }
}

impl ReplicatedStateMachine for ShardMachine {
    fn apply(&mut self, command: &[u8]) -> Vec<u8> {
        // Only a leader proposes, and only requests it decoded itself, so this cannot fail; if it
        // ever did, every replica skips the same command and the proposer sees an empty answer.
        match ShardRequest::decode_exact_with(command, &self.limits) {
            Ok(request) => self.state.apply(&request).encode(),
            Err(_) => vec![],
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        self.state.encode_snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        let state = ShardState::decode_snapshot(snapshot).map_err(|e| e.to_string())?;
        if state.range() != self.state.range() {
            return Err(format!(
                "snapshot covers {:?}, this shard owns {:?}",
                state.range(),
                self.state.range()
            ));
        }
        self.state = state;
        Ok(())
    }
}

/// Serves one role request on a shard replica: a coordinator's batch (made durable through Raft
/// first), or a read of the UHS. A replica that does not lead answers `NotLeader`.
pub async fn serve(
    hosted: Arc<Hosted<ShardMachine>>,
    caller: Caller,
    request: RoleRequest,
) -> Result<RoleResponse, String> {
    if !hosted.is_leader() {
        return Ok(hosted.not_leader());
    }
    Ok(match request {
        RoleRequest::ShardBatch(requests) => {
            let commands: Vec<Vec<u8>> = requests.iter().map(Encode::encode).collect();
            let answers = hosted.replica.propose(commands).await.map_err(|e| e.to_string())?;
            let limits = ShardWireLimits::default();
            let responses = answers
                .iter()
                .map(|bytes| ShardResponse::decode_exact_with(bytes, &limits).map_err(|e| e.to_string()))
                .collect::<Result<Vec<_>, String>>()?;
            RoleResponse::ShardBatch(responses)
        }
        // Reads on the leader after apply: a transaction reported confirmed is visible.
        RoleRequest::ShardQuery(ids) => RoleResponse::ShardQuery(
            hosted
                .replica
                .with_state(|m| ids.iter().map(|id| m.state.contains(id)).collect()),
        ),
        RoleRequest::ShardIds => RoleResponse::ShardIds(hosted.replica.with_state(|m| m.state.sorted_ids())),
        other => return Err(hosted.refuse(&caller, format_args!("a shard does not serve {}", other.kind()))),
    })
}

/// Runs replica `id` of shard group `group` until stopped.
pub async fn run(topology: Topology, group: String, id: u64) -> anyhow::Result<()> {
    let shard_group = topology.shard_group(&group).map_err(anyhow::Error::msg)?.clone();
    let range = ShardRange {
        first: shard_group.range[0],
        last: shard_group.range[1],
    };
    serve_replica(
        &topology,
        Identity::shard(&group, id),
        &shard_group.replicas,
        ShardMachine::new(range),
        |_| {},
        serve,
    )
    .await
}
