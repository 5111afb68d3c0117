use std::path::Path;

use anyhow::Context;
use crossbeam_channel::{Receiver, Sender};
use specie_codec::{Decode, Encode};
use specie_shard::{ShardRange, ShardRequest, ShardResponse, ShardState, ShardStats, ShardWireLimits};
use specie_transaction::UhsId;

use crate::coordinator_driver::CoordinatorResponses;

/// Most messages one loop iteration takes from the inbox: bounds a batch's memory and latency.
const INBOX_BATCH_MAX: usize = 4096;

pub enum ShardInbox {
    Requests(Vec<ShardRequest>),
    Query { ids: Vec<UhsId>, reply: Sender<Vec<bool>> },
    Stats { reply: Sender<ShardStats> },
    SortedIds { reply: Sender<Vec<UhsId>> },
    Stop,
}

/// Runs one shard: every batch of requests is appended to the shard's log with one fsync, then
/// applied, then answered. Reads (queries) are answered after the writes received before them.
pub struct ShardDriver {
    index: usize,
    state: ShardState,
    log: specie_log::Log,
    snapshot_log_bytes: u64,
}

impl ShardDriver {
    pub fn recover(
        index: usize,
        range: ShardRange,
        dir: &Path,
        options: specie_log::LogOptions,
        snapshot_log_bytes: u64,
    ) -> anyhow::Result<ShardDriver> {
        let (log, recovered) =
            specie_log::Log::open(dir, options).with_context(|| format!("cannot open the log of shard {index}"))?;
        let mut state = match &recovered.snapshot {
            Some(snapshot) => ShardState::decode_snapshot(&snapshot.bytes)
                .with_context(|| format!("shard {index}: corrupt snapshot"))?,
            None => ShardState::new(range),
        };
        anyhow::ensure!(
            state.range() == range,
            "shard {index}: snapshot covers {:?}, expected {range:?}",
            state.range()
        );
        let limits = ShardWireLimits::default();
        for (log_index, bytes) in &recovered.records {
            let request = ShardRequest::decode_exact_with(bytes, &limits)
                .with_context(|| format!("shard {index}: log record {log_index} does not decode"))?;
            state.apply(&request);
        }
        state
            .check_invariants()
            .map_err(|e| anyhow::anyhow!("shard {index}: recovered state is inconsistent: {e}"))?;
        if recovered.truncated_tail_bytes > 0 {
            tracing::warn!(
                shard = index,
                bytes = recovered.truncated_tail_bytes,
                "dropped a torn, unacknowledged log tail"
            );
        }
        Ok(ShardDriver {
            index,
            state,
            log,
            snapshot_log_bytes,
        })
    }

    pub fn run(mut self, inbox: Receiver<ShardInbox>, coordinator: Sender<CoordinatorResponses>) {
        while let Ok(first) = inbox.recv() {
            let mut requests = vec![];
            let mut reads = vec![];
            let mut stop = false;
            for message in std::iter::once(first).chain(inbox.try_iter().take(INBOX_BATCH_MAX)) {
                match message {
                    ShardInbox::Requests(batch) => requests.extend(batch),
                    ShardInbox::Stop => stop = true,
                    read => reads.push(read),
                }
            }
            if !requests.is_empty() {
                let responses = self.apply_durably(&requests);
                // Discarded needs no answer: the coordinator has already moved on.
                let responses: Vec<ShardResponse> = responses
                    .into_iter()
                    .filter(|r| !matches!(r, ShardResponse::Discarded { .. }))
                    .collect();
                if !responses.is_empty() && coordinator.send((self.index, responses)).is_err() {
                    return; // The coordinator is gone: the node is stopping.
                }
            }
            for read in reads {
                match read {
                    ShardInbox::Query { ids, reply } => {
                        let _ = reply.send(ids.iter().map(|id| self.state.contains(id)).collect());
                    }
                    ShardInbox::Stats { reply } => {
                        let _ = reply.send(self.state.stats());
                    }
                    ShardInbox::SortedIds { reply } => {
                        let _ = reply.send(self.state.sorted_ids());
                    }
                    ShardInbox::Requests(_) | ShardInbox::Stop => unreachable!("sorted above"),
                }
            }
            if stop {
                return;
            }
        }
    }

    fn apply_durably(&mut self, requests: &[ShardRequest]) -> Vec<ShardResponse> {
        let records: Vec<Vec<u8>> = requests.iter().map(Encode::encode).collect();
        for chunk in records.chunks(specie_log::LogOptions::default().batch_records_max) {
            if let Err(error) = self.log.append_batch(chunk) {
                fatal(&format!("shard {}: cannot make requests durable: {error}", self.index));
            }
        }
        let responses = requests.iter().map(|request| self.state.apply(request)).collect();
        if self.log.bytes_since_snapshot() > self.snapshot_log_bytes {
            let last_index = self.log.last_index();
            if let Err(error) = self.log.install_snapshot(last_index, &self.state.encode_snapshot()) {
                fatal(&format!("shard {}: cannot write snapshot: {error}", self.index));
            }
        }
        responses
    }
}

/// A role that cannot make its state durable must not answer anyone: it stops the process, and
/// recovery replays what did reach the disk. Answering after a failed fsync could report a
/// transaction confirmed that a restart would forget.
pub(crate) fn fatal(message: &str) -> ! {
    tracing::error!("{message}");
    eprintln!("fatal: {message}");
    std::process::exit(70);
}
