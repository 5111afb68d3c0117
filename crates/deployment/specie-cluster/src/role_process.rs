//! The processes `specie cluster up` starts: one shard, coordinator, atomizer, FastPay authority
//! shard, offline authority, exchange or archiver replica, or one sentinel, each on its own two-thread runtime until it is stopped.

use std::path::Path;

use crate::archiver_replica::{self, ArchiverReplicaError};
use crate::authority_replica::AuthorityReplicaError;
use crate::exchange_replica::{self, ExchangeReplicaError};
use crate::offline_replica::{self, OfflineReplicaError};
use crate::sentinel::SentinelError;
use crate::{
    atomizer_replica, authority_replica, coordinator_replica, sentinel, shard_replica, ReplicaError, Topology,
    TopologyError,
};

/// Why a role process could not start, or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RoleProcessError {
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error("cannot start a runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    #[error(transparent)]
    Sentinel(#[from] SentinelError),
    #[error(transparent)]
    Authority(#[from] AuthorityReplicaError),
    #[error(transparent)]
    Offline(#[from] OfflineReplicaError),
    #[error(transparent)]
    Exchange(#[from] ExchangeReplicaError),
    #[error(transparent)]
    Archiver(#[from] ArchiverReplicaError),
}

fn runtime() -> Result<tokio::runtime::Runtime, RoleProcessError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(RoleProcessError::Runtime)
}

/// Runs replica `replica` of shard group `group` of the cluster in the file `cluster`.
pub fn run_shard(cluster: &Path, group: String, replica: u64) -> Result<(), RoleProcessError> {
    let topology = Topology::load(cluster)?;
    runtime()?
        .block_on(shard_replica::run(topology, group, replica))
        .map_err(RoleProcessError::Replica)
}

/// Runs replica `replica` of coordinator group `group` of the cluster in the file `cluster`.
pub fn run_coordinator(cluster: &Path, group: String, replica: u64) -> Result<(), RoleProcessError> {
    let topology = Topology::load(cluster)?;
    runtime()?
        .block_on(coordinator_replica::run(topology, group, replica))
        .map_err(RoleProcessError::Replica)
}

/// Runs replica `replica` of the atomizer group (the atomizer shape) of the cluster in the file
/// `cluster`.
pub fn run_atomizer(cluster: &Path, replica: u64) -> Result<(), RoleProcessError> {
    let topology = Topology::load(cluster)?;
    runtime()?
        .block_on(atomizer_replica::run(topology, replica))
        .map_err(RoleProcessError::Replica)
}

/// Runs the sentinel `name` of the cluster in the file `cluster`.
pub fn run_sentinel(cluster: &Path, name: String, compromised: bool) -> Result<(), RoleProcessError> {
    let topology = Topology::load(cluster)?;
    runtime()?
        .block_on(sentinel::run(topology, name, compromised))
        .map_err(RoleProcessError::Sentinel)
}

/// Runs replica `replica` of FastPay authority shard group `group` of the cluster in the file
/// `cluster`.
pub fn run_authority(cluster: &Path, group: String, replica: u64) -> Result<(), RoleProcessError> {
    let topology = Topology::load(cluster)?;
    runtime()?
        .block_on(authority_replica::run(topology, group, replica))
        .map_err(RoleProcessError::Authority)
}

/// Runs replica `replica` of the offline authority's group of the cluster in the file `cluster`.
pub fn run_offline_authority(cluster: &Path, replica: u64) -> Result<(), RoleProcessError> {
    let topology = Topology::load(cluster)?;
    runtime()?
        .block_on(offline_replica::run(topology, replica))
        .map_err(RoleProcessError::Offline)
}

/// Runs replica `replica` of the exchange's group of the cluster in the file `cluster`.
pub fn run_exchange(cluster: &Path, replica: u64) -> Result<(), RoleProcessError> {
    let topology = Topology::load(cluster)?;
    runtime()?
        .block_on(exchange_replica::run(topology, replica))
        .map_err(RoleProcessError::Exchange)
}

/// Runs replica `replica` of the archiver group (the ledger of record) of the cluster in the
/// file `cluster`.
pub fn run_archiver(cluster: &Path, replica: u64) -> Result<(), RoleProcessError> {
    let topology = Topology::load(cluster)?;
    runtime()?
        .block_on(archiver_replica::run(topology, replica))
        .map_err(RoleProcessError::Archiver)
}
