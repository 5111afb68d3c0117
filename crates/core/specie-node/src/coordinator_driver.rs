use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossbeam_channel::{select, Receiver, Sender};
use specie_codec::{Decode, Encode};
use specie_coordinator::{
    CommandLimits, Coordinator, CoordinatorCommand, CoordinatorConfig, CoordinatorOutput, CoordinatorState, Tag,
    TxResult,
};
use specie_shard::{ShardRequest, ShardResponse};
use specie_transaction::CompactTransaction;

use crate::node::{Completion, CompletionSender, TxStatus};
use crate::shard_driver::{fatal, ShardInbox};

/// How often the coordinator wakes without input, to cut waiting batches and retry shards.
const TICK_MS: u64 = 5;
/// Most inbox messages one loop iteration takes, so replies keep flowing under load.
const INBOX_BATCH_MAX: usize = 256;

pub struct Submission {
    pub client_ref: u64,
    pub compact: CompactTransaction,
    pub reply: CompletionSender,
}

pub enum CoordinatorInbox {
    Submit(Vec<Submission>),
    Stop,
}

/// Responses from shard `.0`.
pub type CoordinatorResponses = (usize, Vec<ShardResponse>);

struct Ticket {
    client_ref: u64,
    reply: CompletionSender,
}

pub struct CoordinatorDriver {
    coordinator: Coordinator,
    log: specie_log::Log,
    snapshot_log_bytes: u64,
    tickets: HashMap<Tag, Ticket>,
    next_tag: Tag,
    epoch: Instant,
}

impl CoordinatorDriver {
    pub fn recover(
        config: CoordinatorConfig,
        dir: &Path,
        options: specie_log::LogOptions,
        snapshot_log_bytes: u64,
    ) -> anyhow::Result<Self> {
        let epoch = Instant::now();
        let (log, recovered) = specie_log::Log::open(dir, options).context("cannot open the coordinator log")?;
        let limits = CommandLimits::default();
        let mut state = match &recovered.snapshot {
            Some(snapshot) => {
                CoordinatorState::decode_snapshot(&snapshot.bytes, &limits).context("corrupt coordinator snapshot")?
            }
            None => CoordinatorState::default(),
        };
        for (index, bytes) in &recovered.records {
            let command = CoordinatorCommand::decode_exact_with(bytes, &limits)
                .with_context(|| format!("coordinator log record {index} does not decode"))?;
            state.apply(&command);
        }
        if !state.active().is_empty() {
            tracing::info!(dtxns = state.active().len(), "resuming dtxns that were in flight");
        }
        let mut coordinator = Coordinator::new(config, state);
        coordinator.become_leader(epoch.elapsed().as_millis() as u64);
        Ok(CoordinatorDriver {
            coordinator,
            log,
            snapshot_log_bytes,
            tickets: HashMap::new(),
            next_tag: 0,
            epoch,
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn run(
        mut self,
        submissions: Receiver<CoordinatorInbox>,
        responses: Receiver<(usize, Vec<ShardResponse>)>,
        shards: Vec<Sender<ShardInbox>>,
    ) {
        let tick = Duration::from_millis(TICK_MS);
        // Re-sent phases of resumed dtxns.
        self.drain(&shards);
        loop {
            let mut stop = false;
            select! {
                recv(responses) -> message => if let Ok((shard, batch)) = message { self.on_responses(shard, batch) },
                recv(submissions) -> message => match message {
                    Ok(CoordinatorInbox::Submit(batch)) => self.on_submissions(batch),
                    Ok(CoordinatorInbox::Stop) | Err(_) => stop = true,
                },
                default(tick) => {}
            }
            for (shard, batch) in responses.try_iter().take(INBOX_BATCH_MAX) {
                self.on_responses(shard, batch);
            }
            for message in submissions.try_iter().take(INBOX_BATCH_MAX) {
                match message {
                    CoordinatorInbox::Submit(batch) => self.on_submissions(batch),
                    CoordinatorInbox::Stop => stop = true,
                }
            }
            let now = self.now_ms();
            self.coordinator.tick(now);
            self.drain(&shards);
            if stop {
                return;
            }
        }
    }

    fn on_responses(&mut self, shard: usize, batch: Vec<ShardResponse>) {
        let now = self.now_ms();
        for response in batch {
            self.coordinator.on_shard_response(shard, response, now);
        }
    }

    fn on_submissions(&mut self, batch: Vec<Submission>) {
        let now = self.now_ms();
        for submission in batch {
            let tag = self.next_tag;
            self.next_tag += 1;
            let txid = submission.compact.txid;
            match self.coordinator.submit(tag, submission.compact, now) {
                Ok(()) => {
                    self.tickets.insert(
                        tag,
                        Ticket {
                            client_ref: submission.client_ref,
                            reply: submission.reply,
                        },
                    );
                }
                Err(error) => {
                    tracing::debug!(%error, "submission refused");
                    let _ = submission.reply.send(Completion {
                        client_ref: submission.client_ref,
                        txid,
                        status: TxStatus::Busy,
                    });
                }
            }
        }
    }

    /// Empties the coordinator's outputs: requests go to shards (one message per shard),
    /// outcomes to clients, and proposals to the log (one fsync for all of them) and back in.
    fn drain(&mut self, shards: &[Sender<ShardInbox>]) {
        loop {
            let mut proposals: Vec<CoordinatorCommand> = vec![];
            let mut sends: Vec<Vec<ShardRequest>> = vec![vec![]; shards.len()];
            while let Some(output) = self.coordinator.poll() {
                match output {
                    CoordinatorOutput::Propose(command) => proposals.push(command),
                    CoordinatorOutput::Send { shard, request } => sends[shard].push(request),
                    CoordinatorOutput::Outcome { tag, txid, result } => self.deliver(tag, txid, result),
                    CoordinatorOutput::ShardRefused { shard, response } => {
                        tracing::error!(shard, ?response, "shard refused a request: protocol bug");
                    }
                }
            }
            for (shard, requests) in sends.into_iter().enumerate().filter(|(_, r)| !r.is_empty()) {
                let _ = shards[shard].send(ShardInbox::Requests(requests));
            }
            if proposals.is_empty() {
                return;
            }
            let records: Vec<Vec<u8>> = proposals.iter().map(Encode::encode).collect();
            if let Err(error) = self.log.append_batch(&records) {
                fatal(&format!("coordinator: cannot make its decisions durable: {error}"));
            }
            let now = self.now_ms();
            for command in &proposals {
                self.coordinator.apply(command, now);
            }
            if self.log.bytes_since_snapshot() > self.snapshot_log_bytes {
                let last_index = self.log.last_index();
                if let Err(error) = self
                    .log
                    .install_snapshot(last_index, &self.coordinator.state().encode_snapshot())
                {
                    fatal(&format!("coordinator: cannot write snapshot: {error}"));
                }
            }
        }
    }

    fn deliver(&mut self, tag: Option<Tag>, txid: specie_transaction::Txid, result: TxResult) {
        let Some(ticket) = tag.and_then(|tag| self.tickets.remove(&tag)) else {
            return; // Accepted before a restart: its client learns the outcome from the UHS.
        };
        let status = match result {
            TxResult::Confirmed => TxStatus::Confirmed,
            TxResult::Rejected(vote) => TxStatus::Rejected(vote),
            TxResult::Dropped => TxStatus::Dropped,
        };
        let _ = ticket.reply.send(Completion {
            client_ref: ticket.client_ref,
            txid,
            status,
        });
    }
}
