//! Transactions handed to an embedded core, every outcome awaited: what the demos of every mode
//! and the benchmarks that pay through the core share.

use specie_api::{Completion, TxStatus};
use specie_node::NodeHandle;
use specie_transaction::SpecieTransaction;

use crate::error::{BenchResult, StepContext};

/// Submits transactions to the core and waits for every outcome (the demos of every mode, the privacy benchmark).
pub fn submit_all(core: &NodeHandle, txs: Vec<SpecieTransaction>) -> BenchResult<Vec<TxStatus>> {
    let count = txs.len();
    let numbered = txs.into_iter().enumerate().map(|(n, tx)| (n as u64, tx)).collect();
    wait_for_outcomes(count, |reply| core.submit(numbered, reply))
}

/// Runs `submit`, which hands `count` transactions numbered from 0 to the core, and waits for
/// every outcome, in that order.
pub fn wait_for_outcomes(
    count: usize,
    submit: impl FnOnce(&specie_api::CompletionSender),
) -> BenchResult<Vec<TxStatus>> {
    let (reply, mut completions) = tokio::sync::mpsc::unbounded_channel::<Completion>();
    submit(&reply);
    let mut statuses = vec![TxStatus::Unknown; count];
    for _ in 0..count {
        let completion = completions.blocking_recv().step("the core stopped")?;
        statuses[completion.client_ref as usize] = completion.status;
    }
    Ok(statuses)
}
