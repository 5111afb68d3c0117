//! The two shapes of the online core as the cluster world deploys them. What differs between a
//! coordinator group over 2PC shard groups and an atomizer group over UHS shard groups is only
//! how their machines begin and what "at rest" means for them; the world runs either through
//! [`SimShape`], so both meet the same faults and the same checks.

use specie_atomizer::{Atomizer, AtomizerConfig, UhsShard};
use specie_cluster::coordinator_replica::{coordinator_machine, OrderingRole};
use specie_cluster::shard_replica::{shard_machine, ShardGroupRole};
use specie_cluster::Identity;
use specie_coordinator::{Coordinator, CoordinatorConfig};
use specie_host::RoleMachine;
use specie_shard::{Shard, ShardRange};
use specie_transaction::UhsId;

/// What a shard replica holds, compared across a group's replicas once the cluster is at rest.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ShardView {
    /// The last block applied: only the atomizer shape's shards advance by blocks.
    pub height: Option<u64>,
    pub ids: Vec<UhsId>,
}

/// A shape of the core, named by its ordering role: what the cluster world needs beyond what the
/// cluster's own replicas need.
pub(super) trait SimShape: OrderingRole + Sized {
    type Shard: ShardGroupRole;
    /// Everything a replica of the ordering group starts from, the same on each.
    type Config: Clone + Send + 'static;
    /// What the world calls itself in a violation.
    const WORLD: &'static str;
    /// The ordering group's name, in its replicas' `Hosted` and in descriptions.
    const GROUP: &'static str;
    /// Who a replica of the ordering group named `group` is to the shard groups it calls: the
    /// authorisation table admits only the shape's own ordering role to a shard.
    fn identity(group: &str) -> Identity;
    fn machine(config: Self::Config) -> RoleMachine<Self>;
    fn shard_machine(range: ShardRange) -> RoleMachine<Self::Shard>;
    /// The leader's role has nothing left to decide or to tell a shard.
    fn idle(&self) -> bool;
    fn describe(&self) -> String;
    /// Blocks the role has made durable: the atomizer's height (2PC makes none).
    fn blocks(&self) -> u64;
    fn shard_view(shard: &Self::Shard) -> ShardView;
    /// A shard group's leader holds nothing for a transaction still undecided.
    fn shard_idle(shard: &Self::Shard) -> bool;
    fn shard_describe(shard: &Self::Shard) -> String;
}

impl SimShape for Coordinator {
    type Shard = Shard;
    type Config = CoordinatorConfig;
    const WORLD: &'static str = "cluster";
    const GROUP: &'static str = "coordinator";

    fn identity(group: &str) -> Identity {
        Identity::coordinator(group, 1)
    }

    fn machine(config: CoordinatorConfig) -> RoleMachine<Coordinator> {
        coordinator_machine(config)
    }

    fn shard_machine(range: ShardRange) -> RoleMachine<Shard> {
        shard_machine(range)
    }

    fn idle(&self) -> bool {
        self.state().active().is_empty()
    }

    fn describe(&self) -> String {
        format!("{} dtxns active", self.state().active().len())
    }

    fn blocks(&self) -> u64 {
        0
    }

    fn shard_view(shard: &Shard) -> ShardView {
        ShardView {
            height: None,
            ids: shard.state().sorted_ids(),
        }
    }

    fn shard_idle(shard: &Shard) -> bool {
        shard.state().stats().locked_ids == 0
    }

    fn shard_describe(shard: &Shard) -> String {
        format!("{:?}", shard.state().stats())
    }
}

impl SimShape for Atomizer {
    type Shard = UhsShard;
    type Config = AtomizerConfig;
    const WORLD: &'static str = "atomizer cluster";
    const GROUP: &'static str = "atomizer";

    fn identity(_group: &str) -> Identity {
        Identity::atomizer(1)
    }

    fn machine(config: AtomizerConfig) -> RoleMachine<Atomizer> {
        RoleMachine::new(Atomizer::new(config))
    }

    fn shard_machine(range: ShardRange) -> RoleMachine<UhsShard> {
        RoleMachine::new(UhsShard::new(range))
    }

    /// Confirmations wait for every shard to apply the block, so once nothing is admitted and
    /// every shard is caught up, every caller has its answer.
    fn idle(&self) -> bool {
        self.admitted() == 0 && self.shards_caught_up()
    }

    fn describe(&self) -> String {
        format!(
            "height {}, {} admitted, shards caught up: {}",
            self.height(),
            self.admitted(),
            self.shards_caught_up()
        )
    }

    fn blocks(&self) -> u64 {
        self.height()
    }

    fn shard_view(shard: &UhsShard) -> ShardView {
        ShardView {
            height: Some(shard.height()),
            ids: shard.sorted_ids(),
        }
    }

    /// A UHS shard locks nothing: it attests and applies whole blocks.
    fn shard_idle(_shard: &UhsShard) -> bool {
        true
    }

    fn shard_describe(shard: &UhsShard) -> String {
        format!("height {}, {} ids", shard.height(), shard.sorted_ids().len())
    }
}
