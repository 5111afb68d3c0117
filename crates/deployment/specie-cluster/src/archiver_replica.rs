//! The ledger of record as a Raft group of the cluster: the archiver role
//! ([`specie_archiver::Archiver`]) on the shared replicated host. Every write-ahead, every batch
//! of outcomes and every sealed block is committed to a majority of replicas before it is
//! answered, and a new leader resumes from the log.
//!
//! It serves, on its wire `address` (mutual TLS), Raft within its group, the sentinels'
//! write-aheads (tag 14), ledger reads (tag 16) for sentinels (which answer the wallets'
//! `/v1/ledger` API with them) and the operator, and the ordering groups' outcomes (tag 15) and
//! question whether a submission is written ahead (tag 18), without which they order nothing.
//! Its leader decides every record from the UHS, read from the shard groups over the cluster's
//! mutual TLS ([`specie_archiver::Archiver`]'s evidence): the outcomes only make records ready.
use specie_metrics::role::RoleFamily;

use std::sync::Arc;
use std::time::Duration;

use specie_archiver::{Archiver, ArchiverInput, ArchiverReply, ArchiverReport};
use specie_host::{RoleCall, RoleMachine};
use specie_service::Unavailable;
use specie_transaction::{Txid, UhsId};

use crate::core_uhs::CoreUhs;
use crate::credentials::{self, CredentialsError};
use crate::host::{serve_replica, wire_limits, Caller, ReplicaError, RoleStatus, ServeError};
use crate::identity::Identity;
use crate::protocol::{RoleRequest, RoleResponse};
use crate::serving_replica::ServingReplica;
use crate::topology::Topology;

/// The archiver as Raft's state machine.
pub type ArchiverMachine = RoleMachine<Archiver>;

impl RoleStatus for ArchiverMachine {
    fn role_status(&self) -> serde_json::Value {
        let head = self.role().head();
        let verdicts = self.role().verdicts();
        serde_json::json!({ "ledger": {
            "verdicts_on_reported": verdicts.reported,
            "verdicts_on_unreported": verdicts.unreported,
            "height": head.height,
            "head": head.head.map(|h| hex::encode(h.hash())),
            "uhs_ids": head.uhs.0,
            "uhs_digest": hex::encode(head.uhs.1),
            "waiting": head.waiting,
            "undecided": head.undecided,
        }})
    }

    /// Read without the head's UHS digest, which sorts the whole UHS.
    fn role_gauges(&self) -> Vec<(RoleFamily, f64)> {
        let role = self.role();
        specie_api::observe::ledger_gauges(role.ledger(), role.undecided()).to_vec()
    }
}

/// Why an archiver replica could not start, or stopped other than on a signal.
#[derive(Debug, thiserror::Error)]
pub enum ArchiverReplicaError {
    #[error(
        "the cluster file has no [ledger_of_record]: start the cluster with `specie cluster up --ledger-of-record`"
    )]
    NotInCluster,
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("invalid wire limits: {0}")]
    WireLimits(#[from] specie_wire::InvalidWireLimits),
    #[error(transparent)]
    Replica(#[from] ReplicaError),
}

/// Why a round of reconciliation did not finish (the next round tries again).
#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error("the archiver: {0}")]
    Archiver(#[from] ServeError),
    #[error("the shards: {0}")]
    Shards(#[from] crate::group_client::GroupError),
}

/// How often the leader decides from the UHS the records that are ready (what sentinels
/// reported, and what they did not for `decide_after_ms`): the ledger's lag behind the core.
const RECONCILE_INTERVAL_MS: u64 = 250;

struct ArchiverReplica {
    serving: ServingReplica<Archiver>,
}

impl ArchiverReplica {
    async fn ask(&self, call: RoleCall<Archiver>) -> Result<ArchiverReply, ServeError> {
        self.serving.ask(call).await.map_err(|unavailable| match unavailable {
            Unavailable::Stopping => ServeError::Stopping,
            Unavailable::NotLeader { .. } | Unavailable::OutcomeUnknown => ServeError::OutcomeUnknown,
        })
    }

    async fn serve(&self, caller: Caller, request: RoleRequest) -> Result<RoleResponse, ServeError> {
        let hosted = &self.serving.hosted;
        if !hosted.is_leader() {
            return Ok(hosted.not_leader());
        }
        if let RoleRequest::WrittenAhead(asked) = &request {
            // From the applied state, at once: applied means committed, and an ordering group's
            // question need not queue behind the role's calls while a batch waits on it.
            let written = (hosted.replica).with_state(|machine| machine.role().written_ahead(asked));
            return Ok(RoleResponse::WrittenAhead(written));
        }
        let call: RoleCall<Archiver> = match request {
            RoleRequest::ArchiveWrite(records) => Box::new(move |ticket| ArchiverInput::WriteAhead { ticket, records }),
            RoleRequest::ArchiveOutcomes(outcomes) => {
                Box::new(move |ticket| ArchiverInput::Outcomes { ticket, outcomes })
            }
            RoleRequest::LedgerRead(read) => Box::new(move |ticket| ArchiverInput::Read { ticket, read }),
            other => return Err(hosted.refuse(&caller, format_args!("the archiver does not serve {}", other.kind()))),
        };
        Ok(match self.ask(call).await? {
            ArchiverReply::Written | ArchiverReply::Decided => RoleResponse::Taken,
            ArchiverReply::Busy => RoleResponse::ArchiveBusy,
            // Proposed, perhaps committed: never "not the leader", which would have the caller
            // send it again (a report applied twice could decide a committed twin refused).
            ArchiverReply::Dropped => return Err(ServeError::OutcomeUnknown),
            ArchiverReply::Read(reply) => RoleResponse::Ledger(Box::new(reply)),
            ArchiverReply::Stale(_) => return Err(ServeError::WrongReply("a ledger request")),
        })
    }

    /// One round of the leader's reconciliation: the records ready to be decided, what the
    /// shards hold of the ids they create, handed back as evidence.
    async fn reconcile(&self, core: &CoreUhs) -> Result<(), ReconcileError> {
        let ArchiverReply::Stale(stale) = self.ask(Box::new(|ticket| ArchiverInput::Stale { ticket })).await? else {
            return Err(ServeError::WrongReply("the stale records' question").into());
        };
        if stale.is_empty() {
            return Ok(());
        }
        let asked: Vec<Txid> = stale.iter().map(|(txid, _)| *txid).collect();
        let ids: Vec<UhsId> = stale.into_iter().flat_map(|(_, ids)| ids).collect();
        let held = core.holds(&ids).await?;
        let present: Vec<UhsId> = ids
            .into_iter()
            .zip(held)
            .filter(|(_, held)| *held)
            .map(|(id, _)| id)
            .collect();
        self.ask(Box::new(move |ticket| ArchiverInput::Evidence {
            ticket,
            asked,
            present,
        }))
        .await?;
        Ok(())
    }
}

fn log_report(report: &ArchiverReport) {
    tracing::warn!(%report, "archiver");
}

/// Runs replica `id` of the archiver group until stopped.
pub async fn run(topology: Topology, id: u64) -> Result<(), ArchiverReplicaError> {
    let config = topology
        .ledger_of_record
        .clone()
        .ok_or(ArchiverReplicaError::NotInCluster)?;
    let me = Identity::archiver(id);
    let transport = credentials::transport(&topology, &me)?;
    let core = Arc::new(CoreUhs::new(&topology, &wire_limits(&topology), &transport)?);
    serve_replica(
        &topology,
        me,
        &config.replicas,
        RoleMachine::new(Archiver::new(config.archiver())),
        move |hosted| {
            let (serving, task) = ServingReplica::start(hosted, vec![], log_report);
            let replica = Arc::new(ArchiverReplica { serving });
            let reconciling = replica.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(RECONCILE_INTERVAL_MS));
                loop {
                    tick.tick().await;
                    if reconciling.serving.hosted.is_leader() {
                        if let Err(error) = reconciling.reconcile(&core).await {
                            tracing::warn!(%error, "ledger of record: cannot decide stale records yet");
                        }
                    }
                }
            });
            (replica, task)
        },
        |replica: Arc<ArchiverReplica>, caller, request| async move { replica.serve(caller, request).await },
    )
    .await?;
    Ok(())
}
