//! The offline cash authority as a Raft group of the cluster: its role
//! ([`specie_offline_authority::OfflineAuthority`]) on the shared replicated host, so every
//! verified history, funding, payout and key rotation is committed to a majority of replicas
//! (one fsync each) before it is answered, and a new leader resumes from the log.
//!
//! It serves, on its wire `address` (mutual TLS), Raft within its group and status. On its `http`
//! address it serves the devices' and the operator's API, the same as `specie offline authority`
//! (`specie_offline_service::service_router`); a replica that does not lead answers 503
//! `not_leader` with the leader's API. It checks each funding's marker in the online core's UHS
//! itself, over the cluster's mutual TLS, as the FastPay authorities do.
use specie_metrics::role::RoleFamily;

use std::net::SocketAddr;
use std::sync::Arc;

use ed25519_dalek::SigningKey;
use specie_host::RoleMachine;
use specie_offline_authority::{OfflineAuthority, Reply};
use specie_offline_service::service::AuthorityService;
use specie_offline_service::AuthorityCall;
use specie_service::{CoreCheckError, CoreTransactions, Pending, Unavailable};
use specie_wire::InvalidWireLimits;

use crate::core_uhs::CoreUhs;
use crate::credentials::{self, CredentialsError};
use crate::host::{serve_replica, spawn_api, wire_limits, ReplicaError, RoleStatus, ServeError};
use crate::identity::Identity;
use crate::protocol::RoleResponse;
use crate::serving_replica::ServingReplica;
use crate::topology::{Topology, OFFLINE_AUTHORITY_GROUP};

/// The offline authority as Raft's state machine.
pub type OfflineMachine = RoleMachine<OfflineAuthority>;

impl RoleStatus for OfflineMachine {
    fn role_status(&self) -> serde_json::Value {
        let books = self.role().books();
        serde_json::json!({ "offline": {
            "funded": books.funded.to_string(),
            "defunded": books.defunded.to_string(),
            "outstanding": books.outstanding.to_string(),
            "expired": books.expired.to_string(),
            "current_period": books.current_period,
            "debtors": books.debts.len(),
        }})
    }

    fn role_gauges(&self) -> Vec<(RoleFamily, f64)> {
        let books = self.role().books();
        let double_spent: u128 = books.debts.iter().map(|debt| debt.value).sum();
        vec![
            (RoleFamily::OfflineFunded, books.funded as f64),
            (RoleFamily::OfflineDefunded, books.defunded as f64),
            (RoleFamily::OfflineOutstanding, books.outstanding as f64),
            (RoleFamily::OfflineExpired, books.expired as f64),
            (RoleFamily::OfflineDoubleSpent, double_spent as f64),
            (RoleFamily::OfflineDebtors, books.debts.len() as f64),
        ]
    }
}

/// Why an offline authority replica could not start, or stopped other than on a signal.
#[derive(Debug, thiserror::Error)]
pub enum OfflineReplicaError {
    #[error("the cluster file has no [offline_authority]: start the cluster with `specie cluster up --offline`")]
    NotInCluster,
    #[error("the offline authority's group has no replica {id}")]
    NoSuchReplica { id: u64 },
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("invalid wire limits: {0}")]
    WireLimits(#[from] InvalidWireLimits),
    #[error("cannot listen on {address} (the offline authority's API): {source}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Replica(#[from] ReplicaError),
}

/// A running offline authority replica: the role's host and what its HTTP API needs.
pub struct OfflineReplica {
    serving: ServingReplica<OfflineAuthority>,
    /// The bridge key, the role's: it signs the payouts the API answers with.
    bridge: SigningKey,
    operator_token: String,
    core: CoreUhs,
}

impl AuthorityService for OfflineReplica {
    fn call(&self, call: AuthorityCall) -> Pending<'_, Result<Reply, Unavailable>> {
        Box::pin(self.serving.ask(call))
    }

    fn bridge_key(&self) -> &SigningKey {
        &self.bridge
    }

    fn core_format(&self) -> &'static dyn CoreTransactions {
        &specie_wallet::CORE_FORMAT
    }

    fn is_operator(&self, token: &str) -> bool {
        specie_offline_service::service::token_matches(&self.operator_token, token)
    }

    /// A cluster's authority has a core: value enters only through it.
    fn operator_funding(&self) -> bool {
        false
    }

    fn in_core(&self, marker: [u8; 32]) -> Pending<'_, Result<bool, CoreCheckError>> {
        Box::pin(self.core.holds_marker(marker))
    }
}

/// Runs replica `id` of the offline authority's group until stopped.
pub async fn run(topology: Topology, id: u64) -> Result<(), OfflineReplicaError> {
    let config = topology
        .offline_authority
        .clone()
        .ok_or(OfflineReplicaError::NotInCluster)?;
    let Some(http) = config.replicas.iter().find(|r| r.id == id).map(|r| r.http) else {
        return Err(OfflineReplicaError::NoSuchReplica { id });
    };
    let me = Identity::offline(OFFLINE_AUTHORITY_GROUP, id);
    let (keys, operator_token) = credentials::offline_authority(&topology)?;
    let bridge = keys.bridge.clone();
    let transport = credentials::transport(&topology, &me)?;
    let core = CoreUhs::new(&topology, &wire_limits(&topology), &transport)?;
    let listener = tokio::net::TcpListener::bind(crate::host::listen_address(http))
        .await
        .map_err(|source| OfflineReplicaError::Listen { address: http, source })?;
    let http_limits = topology.http;
    let replicas = config.wire_replicas();
    serve_replica(
        &topology,
        me,
        &replicas,
        RoleMachine::new(OfflineAuthority::new(keys)),
        move |hosted| {
            let apis = config.replicas.iter().map(|r| (r.id, r.http)).collect();
            let (serving, task) = ServingReplica::start(hosted, apis, specie_offline_service::log_report);
            let replica = Arc::new(OfflineReplica {
                serving,
                bridge,
                operator_token,
                core,
            });
            let router = specie_offline_service::service_router(replica.clone());
            specie_service::announce::announce(format_args!(
                "{OFFLINE_AUTHORITY_GROUP} replica {id}: offline authority API on http://{http}"
            ));
            spawn_api(listener, router, http_limits, "offline authority");
            (replica, task)
        },
        |replica: Arc<OfflineReplica>, caller, request| async move {
            Err::<RoleResponse, ServeError>(replica.serving.hosted.refuse(
                &caller,
                format_args!("the offline authority does not serve {}", request.kind()),
            ))
        },
    )
    .await?;
    Ok(())
}
