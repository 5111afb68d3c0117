//! specie as a cluster: the roles of Hamilton's 2PC architecture as processes on a network.
//!
//! - [`topology`]: the cluster file every process reads (groups, replicas, addresses, limits).
//! - [`protocol`]: the messages roles exchange over `specie-wire` frames.
//! - [`shard_replica`] / [`coordinator_replica`]: a role's state machine replicated by Raft
//!   (`specie-raft`), serving its peers and callers; only leaders act (Hamilton §4.2).
//! - [`sentinel`]: validates transactions and serves the wallets' HTTP API in front of the cluster.
//! - [`authority_replica`] (its HTTP API is `specie_committee::http_server`): a FastPay authority shard (Byzantine mode) as a
//!   replica group member, serving its clients' HTTP API; the online core is its Primary.
//! - [`offline_replica`]: the offline cash authority as a replica group member, serving devices'
//!   HTTP API; the online core funds it and takes its payouts.
//! - [`group_client`]: leader discovery and fail-over for calls to a replica group.
//! - [`supervisor`] / [`role_process`]: `specie cluster up | status | down` (processes, pid files,
//!   logs) and the entry points of the processes it starts.
//! - [`membership`] / [`live`]: `specie cluster add-replica | remove-replica | replace-replica |
//!   digests`, and how every running process follows the cluster file's membership.
//! - [`backup`]: `specie cluster backup | restore`, every group's state at one cut.
//! - [`packaging`]: `specie cluster package`, the cluster as Compose or Kubernetes files.
//! - [`rolling`]: `specie cluster restart`, one process at a time (how a cluster takes a new build).
//! - [`identity`] / [`credentials`]: who each process is (its certificate's name), what each role
//!   may ask of each other role, and the PKI files that prove it.

pub mod archiver_replica;
pub mod atomizer_replica;
pub mod authority_replica;
pub mod authority_tally;
pub mod backup;
pub mod coordinator_replica;
mod core_uhs;
pub mod credentials;
pub mod endorsing;
pub mod exchange_replica;
pub mod group_client;
mod host;
pub mod hosts;
pub mod identity;
pub mod live;
pub mod membership;
pub mod offline_replica;
pub mod operator;
pub mod ordering_replica;
pub mod packaging;
pub mod protocol;
mod raft_transport;
pub mod role_process;
pub mod rolling;
pub mod rotation;
pub mod sentinel;
mod serving_replica;
pub mod shard_replica;
pub mod supervisor;
pub mod topology;

pub use host::{Caller, Hosted, ReplicaError, RoleStatus, ServeError};
pub use identity::{GroupRole, Identity};
pub use topology::{
    authority_group_name, AtomizerGroupConfig, AuthorityGroup, AuthorityPlace, AuthorityProcesses, AuthorityReplica,
    AuthorityShardGroup, CommitteeShape, EndorsementConfig, ExchangeAsset, ExchangeGroupConfig, ExchangeShape,
    FastpayCommitteeConfig, GroupBridges, InvalidTopology, LedgerOfRecordConfig, Limits, OfflineAuthorityConfig,
    PrivacyConfig, Replica, ReplicaGroup, RestoredFrom, Sentinel, Shape, ShardGroup, Topology, TopologyError,
    TransportMode, UnknownGroup, ARCHIVER_GROUP, ATOMIZER_GROUP, EXCHANGE_GROUP, OFFLINE_AUTHORITY_GROUP,
};
