use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossbeam_channel::{select, Receiver, Sender};
use specie_codec::{Decode, Encode};
use specie_coordinator::{
    CommandLimits, Coordinator, CoordinatorCommand, CoordinatorConfig, CoordinatorInput, CoordinatorReport,
    CoordinatorState, Tag, TxOutcome, TxResult,
};
use specie_role::{Role, Round};
use specie_shard::{ShardRequest, ShardResponse};
use specie_transaction::CompactTransaction;

use crate::node::{Completion, CompletionSender, TxStatus};
use crate::shard_driver::{fatal, ShardInbox};

/// How long the coordinator sleeps when neither an input nor a deadline is due (it wakes at once
/// on an input; this only bounds how long a lost wake-up could go unnoticed).
const IDLE_WAIT: Duration = Duration::from_secs(1);
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
    next_ticket: Tag,
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
        coordinator.lead(epoch.elapsed().as_millis() as u64);
        Ok(CoordinatorDriver {
            coordinator,
            log,
            snapshot_log_bytes,
            tickets: HashMap::new(),
            next_ticket: 0,
            epoch,
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Runs the coordinator role until told to stop: takes every input at hand, hands its
    /// outputs on, and otherwise sleeps until the next input or the role's own deadline.
    pub fn run(
        mut self,
        submissions: Receiver<CoordinatorInbox>,
        responses: Receiver<(usize, Vec<ShardResponse>)>,
        shards: Vec<Sender<ShardInbox>>,
    ) {
        // Re-sent phases of resumed dtxns.
        self.drain(&shards);
        loop {
            let now = self.now_ms();
            if self.coordinator.poll_timeout().is_some_and(|deadline| deadline <= now) {
                self.coordinator.handle_timeout(now);
                self.drain(&shards);
            }
            let wait = self.coordinator.poll_timeout().map_or(IDLE_WAIT, |deadline| {
                Duration::from_millis(deadline.saturating_sub(self.now_ms()))
            });
            let mut stop = false;
            select! {
                recv(responses) -> message => if let Ok((shard, batch)) = message { self.on_responses(shard, batch) },
                recv(submissions) -> message => match message {
                    Ok(CoordinatorInbox::Submit(batch)) => self.on_submissions(batch),
                    Ok(CoordinatorInbox::Stop) | Err(_) => stop = true,
                },
                default(wait) => {}
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
            self.drain(&shards);
            if stop {
                return;
            }
        }
    }

    fn on_responses(&mut self, shard: usize, batch: Vec<ShardResponse>) {
        let now = self.now_ms();
        for response in batch {
            self.coordinator
                .handle(now, CoordinatorInput::ShardAnswer { shard, response });
        }
    }

    fn on_submissions(&mut self, batch: Vec<Submission>) {
        let now = self.now_ms();
        for submission in batch {
            let ticket = self.next_ticket;
            self.next_ticket += 1;
            self.tickets.insert(
                ticket,
                Ticket {
                    client_ref: submission.client_ref,
                    reply: submission.reply,
                },
            );
            let tx = submission.compact;
            self.coordinator.handle(now, CoordinatorInput::Submit { ticket, tx });
        }
    }

    /// Empties the coordinator's outputs: requests go to shards (one message per shard),
    /// outcomes to clients, and proposals to the log (one fsync for all of them) and back in.
    fn drain(&mut self, shards: &[Sender<ShardInbox>]) {
        loop {
            let round = Round::take(&mut self.coordinator);
            let mut sends: Vec<Vec<ShardRequest>> = vec![vec![]; shards.len()];
            for (shard, request) in round.sends {
                sends[shard].push(request);
            }
            for (shard, requests) in sends.into_iter().enumerate().filter(|(_, r)| !r.is_empty()) {
                let _ = shards[shard].send(ShardInbox::Requests(requests));
            }
            for (ticket, outcome) in round.replies {
                self.deliver(ticket, outcome);
            }
            for report in round.reports {
                if let CoordinatorReport::ShardRefused { shard, response } = report {
                    tracing::error!(shard, ?response, "shard refused a request: protocol bug");
                }
            }
            if round.proposals.is_empty() {
                return;
            }
            let records: Vec<Vec<u8>> = round.proposals.iter().map(Encode::encode).collect();
            if let Err(error) = self.log.append_batch(&records) {
                fatal(&format!("coordinator: cannot make its decisions durable: {error}"));
            }
            let now = self.now_ms();
            for command in &round.proposals {
                Role::apply(&mut self.coordinator, now, command);
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

    fn deliver(&mut self, ticket: Tag, outcome: TxOutcome) {
        let Some(waiting) = self.tickets.remove(&ticket) else {
            return;
        };
        let status = match outcome.result {
            TxResult::Confirmed => TxStatus::Confirmed,
            TxResult::Rejected(vote) => TxStatus::Rejected(vote),
            TxResult::Dropped => TxStatus::Dropped,
            TxResult::Refused(error) => {
                tracing::debug!(%error, "submission refused");
                TxStatus::Busy
            }
        };
        let _ = waiting.reply.send(Completion {
            client_ref: waiting.client_ref,
            txid: outcome.txid,
            status,
        });
    }
}
