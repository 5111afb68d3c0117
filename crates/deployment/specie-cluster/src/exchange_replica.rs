//! The exchange between currencies as a Raft group of the cluster: its role
//! ([`specie_exchange::ExchangeRole`]) on the shared replicated host, so every block and deposit
//! is committed to a majority of replicas (one fsync each) before it is answered, and a new
//! leader resumes from the log; a replica that restarts replays (or installs a snapshot of) the
//! same blocks to the same state hash.
//!
//! It serves, on its wire `address` (mutual TLS), Raft within its group and status. On its `http`
//! address it serves traders the same API as `specie exchange serve`
//! (`specie_exchange_service::router`); a replica that does not lead answers 503 `not_leader`
//! with the leader's API. It checks each deposit's marker itself: in this cluster's shards over
//! mutual TLS for the cluster's own currency, and over HTTP in the core of every other currency.
use specie_metrics::role::RoleFamily;

use std::net::SocketAddr;
use std::sync::Arc;

use ed25519_dalek::SigningKey;
use specie_exchange::{ExchangeConfig, ExchangeReply, ExchangeRole, Ledger, RoleLimits};
use specie_exchange_service::service::ExchangeService;
use specie_host::{RoleCall, RoleMachine};
use specie_service::{CoreCheckError, CoreTransactions, Pending, Unavailable};
use specie_wire::InvalidWireLimits;

use crate::core_uhs::CoreUhs;
use crate::credentials::{self, CredentialsError};
use crate::host::{serve_replica, spawn_api, wire_limits, ReplicaError, RoleStatus, ServeError};
use crate::identity::Identity;
use crate::protocol::RoleResponse;
use crate::serving_replica::ServingReplica;
use crate::topology::{ExchangeGroupConfig, Topology, EXCHANGE_GROUP};

/// The exchange as Raft's state machine.
pub type ExchangeMachine = RoleMachine<ExchangeRole>;

impl RoleStatus for ExchangeMachine {
    fn role_status(&self) -> serde_json::Value {
        let ledger = self.role().ledger();
        serde_json::json!({ "exchange": {
            "height": ledger.height(),
            "state_hash": hex::encode(ledger.state_hash()),
            "accounts": ledger.account_count(),
            "offers": ledger.offer_count(),
        }})
    }

    fn role_gauges(&self) -> Vec<(RoleFamily, f64)> {
        let ledger = self.role().ledger();
        vec![
            (RoleFamily::ExchangeHeight, ledger.height() as f64),
            (RoleFamily::ExchangeAccounts, ledger.account_count() as f64),
            (RoleFamily::ExchangeOffers, ledger.offer_count() as f64),
        ]
    }
}

/// Why an exchange replica could not start, or stopped other than on a signal.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeReplicaError {
    #[error("the cluster file has no [exchange]: start the cluster with `specie cluster up --exchange`")]
    NotInCluster,
    #[error("the exchange's group has no replica {id}")]
    NoSuchReplica { id: u64 },
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("invalid wire limits: {0}")]
    WireLimits(#[from] InvalidWireLimits),
    #[error("cannot listen on {address} (the exchange's API): {source}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the exchange's genesis: {0}")]
    Genesis(Box<specie_exchange::LedgerError>),
    #[error(transparent)]
    Replica(#[from] ReplicaError),
}

/// A running exchange replica: the role's host and what its HTTP API needs.
pub struct ExchangeReplica {
    serving: ServingReplica<ExchangeRole>,
    id: [u8; 32],
    bridge: SigningKey,
    config: ExchangeGroupConfig,
    core: CoreUhs,
}

impl ExchangeService for ExchangeReplica {
    fn call(&self, call: RoleCall<ExchangeRole>) -> Pending<'_, Result<ExchangeReply, Unavailable>> {
        Box::pin(self.serving.ask(call))
    }

    fn id(&self) -> [u8; 32] {
        self.id
    }

    fn bridge(&self) -> &SigningKey {
        &self.bridge
    }

    fn asset_names(&self) -> Vec<String> {
        self.config.assets.iter().map(|a| a.name.clone()).collect()
    }

    fn core_format(&self) -> &'static dyn CoreTransactions {
        &specie_wallet::CORE_FORMAT
    }

    fn in_core(&self, asset: usize, marker: [u8; 32]) -> Pending<'_, Result<bool, CoreCheckError>> {
        let core_url = self.config.assets.get(asset).map(|a| a.core.clone());
        Box::pin(async move {
            match core_url {
                None => Err(CoreCheckError::NoCore),
                // The cluster's own currency: its shards, over mutual TLS.
                Some(None) => self.core.holds_marker(marker).await,
                Some(Some(url)) => specie_wallet::core_api(&url).holds(marker).await,
            }
        })
    }
}

/// The exchange's ledger rules: its identity, assets, and blocks no larger than a Raft frame
/// carries with room for an append's other entries.
fn exchange_config(topology: &Topology, exchange: &ExchangeGroupConfig, id: [u8; 32]) -> ExchangeConfig {
    let mut config = ExchangeConfig::new(id, exchange.assets.len());
    let frame_bytes_max = topology.limits.frame_bytes_max as usize;
    while config.command_bytes_max() > frame_bytes_max / 4 && config.block_transactions_max > 1_000 {
        config.block_transactions_max /= 2;
    }
    config
}

/// Runs replica `id` of the exchange's group until stopped.
pub async fn run(topology: Topology, id: u64) -> Result<(), ExchangeReplicaError> {
    let config = topology.exchange.clone().ok_or(ExchangeReplicaError::NotInCluster)?;
    let Some(http) = config.replicas.iter().find(|r| r.id == id).map(|r| r.http) else {
        return Err(ExchangeReplicaError::NoSuchReplica { id });
    };
    let me = Identity::exchange(id);
    let (exchange_id, bridge) = credentials::exchange_keys(&topology)?;
    let transport = credentials::transport(&topology, &me)?;
    let core = CoreUhs::new(&topology, &wire_limits(&topology), &transport)?;
    let listener = tokio::net::TcpListener::bind(crate::host::listen_address(http))
        .await
        .map_err(|source| ExchangeReplicaError::Listen { address: http, source })?;
    let ledger = Ledger::genesis(exchange_config(&topology, &config, exchange_id), vec![])
        .map_err(|error| ExchangeReplicaError::Genesis(Box::new(error)))?;
    let limits = RoleLimits {
        block_interval_ms: config.block_interval_ms,
        ..RoleLimits::default()
    };
    let http_limits = topology.http;
    let replicas = config.wire_replicas();
    serve_replica(
        &topology,
        me,
        &replicas,
        RoleMachine::new(ExchangeRole::new(ledger, limits)),
        move |hosted| {
            let apis = config.replicas.iter().map(|r| (r.id, r.http)).collect();
            let (serving, task) = ServingReplica::start(hosted, apis, specie_exchange_service::log_report);
            let replica = Arc::new(ExchangeReplica {
                serving,
                id: exchange_id,
                bridge,
                config,
                core,
            });
            let router = specie_exchange_service::router(replica.clone());
            specie_service::announce::announce(format_args!(
                "{EXCHANGE_GROUP} replica {id}: exchange API on http://{http}"
            ));
            spawn_api(listener, router, http_limits, "exchange");
            (replica, task)
        },
        |replica: Arc<ExchangeReplica>, caller, request| async move {
            Err::<RoleResponse, ServeError>(
                replica
                    .serving
                    .hosted
                    .refuse(&caller, format_args!("the exchange does not serve {}", request.kind())),
            )
        },
    )
    .await?;
    Ok(())
}
