//! What specie's benchmarks (`specie-bench`) and its demo (`specie-demo`) share, so that the two
//! build side by side rather than one after the other:
//!
//! - [`ceiling`]: what signing and verifying cost on all cores, the bound every figure is set
//!   beside, measured in the same run;
//! - [`cpu`]: CPU time of the process and of the calling thread;
//! - [`error`]: why a benchmark or the demo stopped without a result (`fail!`, `ensure_that!`);
//! - [`submit`]: transactions handed to an embedded core, every outcome awaited.

pub mod ceiling;
pub mod cpu;
pub mod error;
pub mod submit;

pub use error::{BenchError, BenchResult};
