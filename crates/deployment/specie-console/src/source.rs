//! What the console shows, read from a cluster (its directory: the topology and the operator's
//! credentials) or from one embedded node (its URL). Every read is live: nothing is cached but
//! the charts' samples.

use std::path::PathBuf;
use std::time::Duration;

use specie_cluster::operator::{self, ReplicaStatus};
use specie_cluster::supervisor;
use specie_cluster::topology::Topology;

use crate::fetch::{self, FetchError};

/// How long the console waits for one replica's status.
const STATUS_TIMEOUT: Duration = Duration::from_millis(1000);

/// Where the console reads the platform.
#[derive(Clone, Debug)]
pub enum Source {
    /// A cluster's directory (`specie cluster up --dir`), on the operator's host.
    Cluster { dir: PathBuf },
    /// One embedded node's API (`specie node`).
    Node { url: String },
}

/// Why the console cannot read its source at all.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Cluster(#[from] supervisor::SupervisorError),
    #[error(transparent)]
    Operator(#[from] operator::OperatorError),
}

/// Why a read of the platform got nothing to show.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("the cluster file names no sentinel")]
    NoSentinel,
    #[error("the service has no replica URL")]
    NoReplica,
}

/// One process the overview lists, with what it said of itself.
pub struct Member {
    pub group: String,
    pub replica: String,
    /// Its own status JSON, or why there is none.
    pub status: Result<serde_json::Value, String>,
}

/// A sentinel (or the node) and whether it is ready.
pub struct Endpoint {
    pub name: String,
    pub url: String,
    /// `Ok(())` ready, or why not.
    pub ready: Result<(), String>,
}

impl Source {
    /// The cluster's topology, read again each time (`add-replica` changes it).
    pub fn topology(&self) -> Result<Option<Topology>, SourceError> {
        match self {
            Source::Cluster { dir } => Ok(Some(supervisor::load(dir)?.1)),
            Source::Node { .. } => Ok(None),
        }
    }

    /// The wallets' API: each sentinel's, or the node's.
    pub fn api_urls(&self) -> Result<Vec<(String, String)>, SourceError> {
        Ok(match self.topology()? {
            Some(topology) => (topology.sentinels.iter())
                .map(|s| (s.name.clone(), format!("http://{}", s.http)))
                .collect(),
            None => match self {
                Source::Node { url } => vec![("node".to_string(), url.trim_end_matches('/').to_string())],
                Source::Cluster { .. } => vec![],
            },
        })
    }

    /// The API a wallet of this console talks to: the first sentinel's, or the node's.
    pub fn wallet_node(&self) -> Result<Option<String>, SourceError> {
        Ok(self.api_urls()?.into_iter().next().map(|(_, url)| url))
    }

    /// Every replica of every group with its status (none for a node).
    pub async fn replicas(&self) -> Result<Vec<Member>, SourceError> {
        let Some(topology) = self.topology()? else {
            return Ok(vec![]);
        };
        let statuses = operator::replica_statuses(&topology, None, STATUS_TIMEOUT).await?;
        Ok(statuses.into_iter().map(member).collect())
    }

    /// Each sentinel (or the node) and whether it answers `/readyz`.
    pub fn endpoints(&self) -> Result<Vec<Endpoint>, SourceError> {
        let readiness = |url: &str| match fetch::text(&format!("{url}/readyz")) {
            Ok(_) => Ok(()),
            Err(FetchError::Status { body, .. }) => Err(body),
            Err(error) => Err(error.to_string()),
        };
        Ok(self
            .api_urls()?
            .into_iter()
            .map(|(name, url)| Endpoint {
                ready: readiness(&url),
                name,
                url,
            })
            .collect())
    }

    /// `GET path` on the first sentinel (or the node) that answers it.
    pub fn api_json(&self, path: &str) -> Result<serde_json::Value, ReadError> {
        let mut last = ReadError::NoSentinel;
        for (_, url) in self.api_urls()? {
            match fetch::json(&format!("{url}{path}")) {
                Ok(value) => return Ok(value),
                // An answer is an answer: another sentinel would give the same.
                Err(error @ FetchError::Status { .. }) => return Err(error.into()),
                Err(error) => last = error.into(),
            }
        }
        Err(last)
    }

    /// `GET path` on the first of a replicated service's replicas (`urls`, comma-separated) that
    /// answers it: the offline authority, the exchange.
    pub fn service_json(urls: &str, path: &str) -> Result<serde_json::Value, ReadError> {
        let mut last = ReadError::NoReplica;
        for url in urls.split(',').filter(|u| !u.is_empty()) {
            match fetch::json(&format!("{url}{path}")) {
                Ok(value) => return Ok(value),
                Err(error) => last = error.into(),
            }
        }
        Err(last)
    }
}

fn member(status: ReplicaStatus) -> Member {
    Member {
        group: status.group,
        replica: status.id.to_string(),
        status: status.status.map_err(|error| error.to_string()),
    }
}
