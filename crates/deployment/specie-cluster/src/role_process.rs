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

/// Loads the cluster file, and runs `role` on its topology on a two-thread runtime, following
/// the file's membership changes ([`crate::live`]).
fn run_role<F, E>(
    cluster: &Path,
    role: impl FnOnce(Topology) -> F,
    error: impl FnOnce(E) -> RoleProcessError,
) -> Result<(), RoleProcessError>
where
    F: std::future::Future<Output = Result<(), E>>,
{
    let topology = Topology::load(cluster)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(RoleProcessError::Runtime)?;
    runtime.block_on(async {
        crate::live::follow(cluster.to_path_buf(), &topology);
        role(topology).await.map_err(error)
    })
}

/// Runs replica `replica` of shard group `group` of the cluster in the file `cluster`.
pub fn run_shard(cluster: &Path, group: String, replica: u64) -> Result<(), RoleProcessError> {
    run_role(
        cluster,
        |topology| shard_replica::run(topology, group, replica),
        RoleProcessError::Replica,
    )
}

/// Runs replica `replica` of coordinator group `group` of the cluster in the file `cluster`.
pub fn run_coordinator(cluster: &Path, group: String, replica: u64) -> Result<(), RoleProcessError> {
    run_role(
        cluster,
        |topology| coordinator_replica::run(topology, group, replica),
        RoleProcessError::Replica,
    )
}

/// Runs replica `replica` of the atomizer group (the atomizer shape) of the cluster in the file
/// `cluster`.
pub fn run_atomizer(cluster: &Path, replica: u64) -> Result<(), RoleProcessError> {
    run_role(
        cluster,
        |topology| atomizer_replica::run(topology, replica),
        RoleProcessError::Replica,
    )
}

/// Runs the sentinel `name` of the cluster in the file `cluster`.
pub fn run_sentinel(cluster: &Path, name: String, compromised: bool) -> Result<(), RoleProcessError> {
    run_role(
        cluster,
        |topology| sentinel::run(topology, name, compromised),
        RoleProcessError::Sentinel,
    )
}

/// Runs replica `replica` of FastPay authority shard group `group` of the cluster in the file
/// `cluster`.
pub fn run_authority(cluster: &Path, group: String, replica: u64) -> Result<(), RoleProcessError> {
    run_role(
        cluster,
        |topology| authority_replica::run(topology, group, replica),
        RoleProcessError::Authority,
    )
}

/// Runs replica `replica` of the offline authority's group of the cluster in the file `cluster`.
pub fn run_offline_authority(cluster: &Path, replica: u64) -> Result<(), RoleProcessError> {
    run_role(
        cluster,
        |topology| offline_replica::run(topology, replica),
        RoleProcessError::Offline,
    )
}

/// Runs replica `replica` of the exchange's group of the cluster in the file `cluster`.
pub fn run_exchange(cluster: &Path, replica: u64) -> Result<(), RoleProcessError> {
    run_role(
        cluster,
        |topology| exchange_replica::run(topology, replica),
        RoleProcessError::Exchange,
    )
}

/// Runs replica `replica` of the archiver group (the ledger of record) of the cluster in the
/// file `cluster`.
pub fn run_archiver(cluster: &Path, replica: u64) -> Result<(), RoleProcessError> {
    run_role(
        cluster,
        |topology| archiver_replica::run(topology, replica),
        RoleProcessError::Archiver,
    )
}
