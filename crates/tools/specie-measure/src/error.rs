//! What a benchmark or the demo can fail with.

use std::error::Error;
use std::fmt::Display;

/// Why a benchmark or the demo stopped without a result.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A step failed on an error from below it (I/O, the node, the cluster, PostgreSQL); `what`
    /// says which step, `source` why.
    #[error("{what}: {source}")]
    Step {
        what: String,
        #[source]
        source: Box<dyn Error + Send + Sync>,
    },
    /// The options asked for something the benchmark cannot do.
    #[error("{0}")]
    InvalidOptions(String),
    /// What the benchmark measures did not hold up (a refused swap, a failed preload, a lossy
    /// run), or it was interrupted.
    #[error("{0}")]
    Failed(String),
}

pub type BenchResult<T> = Result<T, BenchError>;

/// Names the step an error from below happened in, turning it into a [`BenchError::Step`].
pub trait StepContext<T> {
    fn step(self, what: impl Display) -> BenchResult<T>;
    fn with_step<D: Display>(self, what: impl FnOnce() -> D) -> BenchResult<T>;
}

impl<T, E: Into<Box<dyn Error + Send + Sync>>> StepContext<T> for Result<T, E> {
    fn step(self, what: impl Display) -> BenchResult<T> {
        self.map_err(|source| BenchError::Step {
            what: what.to_string(),
            source: source.into(),
        })
    }

    fn with_step<D: Display>(self, what: impl FnOnce() -> D) -> BenchResult<T> {
        self.map_err(|source| BenchError::Step {
            what: what().to_string(),
            source: source.into(),
        })
    }
}

impl<T> StepContext<T> for Option<T> {
    fn step(self, what: impl Display) -> BenchResult<T> {
        self.ok_or_else(|| BenchError::Failed(what.to_string()))
    }

    fn with_step<D: Display>(self, what: impl FnOnce() -> D) -> BenchResult<T> {
        self.ok_or_else(|| BenchError::Failed(what().to_string()))
    }
}

/// An error from below with no step to name: the error's own message says enough.
macro_rules! from_below {
    ($($source:ty => $what:literal),* $(,)?) => {$(
        impl From<$source> for BenchError {
            fn from(source: $source) -> BenchError {
                BenchError::Step { what: $what.to_string(), source: Box::new(source) }
            }
        }
    )*};
}

from_below! {
    std::io::Error => "I/O",
    serde_json::Error => "JSON",
    specie_cluster::TopologyError => "the cluster file",
    specie_api::BackendError => "the backend",
    hdrhistogram::CreationError => "histogram",
    hdrhistogram::AdditionError => "histogram",
    hdrhistogram::RecordError => "histogram",
    std::num::ParseIntError => "a number",
}

#[cfg(feature = "postgres")]
from_below! {
    tokio_postgres::Error => "PostgreSQL",
}

/// Returns early with [`BenchError::Failed`].
#[macro_export]
macro_rules! fail {
    ($($message:tt)*) => {
        return Err($crate::error::BenchError::Failed(format!($($message)*)))
    };
}

/// Returns early with [`BenchError::Failed`] unless the condition holds.
#[macro_export]
macro_rules! ensure_that {
    ($condition:expr, $($message:tt)*) => {
        let holds: bool = $condition;
        if !holds {
            return Err($crate::error::BenchError::Failed(format!($($message)*)));
        }
    };
}
