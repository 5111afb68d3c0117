//! A whole committee in one process: every shard of every authority on its own embedded host
//! (its own log directory, one fsync per round), shards of one authority wired by channels.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{unbounded, Receiver, Sender};
use specie_authority::{AuthorityConfig, AuthorityShard, Input, Message, Reply, Report, ShardIndex};
use specie_fastpay::{AuthorityIndex, Committee, SigningKey};
use specie_host::{EmbeddedHost, HostMessage, RecoverError, Wiring};
use specie_log::LogOptions;
use specie_role::Ticket;

use crate::call::Call;
use thiserror::Error;

/// An authority's reply, tagged with the caller's own number for the request.
#[derive(Clone, Debug)]
pub struct Answer {
    pub tag: u64,
    pub authority: AuthorityIndex,
    pub reply: Reply,
}

/// How an embedded authority behaves: honest, or one of the faults the demo and tests inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    Honest,
    /// Answers every vote with a corrupted signature (a forged vote).
    ForgesVotes,
    /// Never answers (down, or withholding its votes and confirmations).
    Silent,
}

/// How to run the committee.
#[derive(Clone, Debug)]
pub struct EmbeddedCommitteeOptions {
    pub data_dir: PathBuf,
    pub shards: u32,
    pub behaviours: Vec<Behaviour>,
    pub log: LogOptions,
    pub snapshot_log_bytes: u64,
    pub credit_retransmit_ms: u64,
    pub channel_credits_max: usize,
}

#[derive(Debug, Error)]
pub enum StartError {
    #[error("{behaviours} behaviours for {authorities} authorities")]
    Behaviours { behaviours: usize, authorities: usize },
    #[error("at least one shard per authority")]
    NoShards,
    #[error(transparent)]
    Recover(#[from] RecoverError<specie_authority::StateError>),
    #[error("cannot start a shard thread: {0}")]
    Thread(#[from] std::io::Error),
}

struct ShardWiring {
    authority: AuthorityIndex,
    shard: ShardIndex,
    behaviour: Behaviour,
    /// This authority's shards' input channels, by shard index.
    peers: Vec<Sender<Vec<Input>>>,
    reports: Sender<(AuthorityIndex, Report)>,
}

impl Wiring<AuthorityShard> for ShardWiring {
    type Call = Call;
    type ReplyTo = (u64, Sender<Answer>);

    fn input(call: Call, ticket: Ticket) -> Input {
        call.into_input(ticket)
    }

    fn send(&mut self, to: ShardIndex, message: Message) {
        // A stopped peer loses the message; the channel's retransmission covers it.
        let _ = self.peers[to as usize].send(vec![message.into_input(self.shard)]);
    }

    fn reply(&mut self, (tag, reply_to): (u64, Sender<Answer>), mut reply: Reply) {
        match (self.behaviour, &mut reply) {
            (Behaviour::Silent, _) => return,
            (Behaviour::ForgesVotes, Reply::Voted(vote)) => vote.signature[7] ^= 0x5a,
            _ => {}
        }
        // A caller that stopped waiting (it had its quorum) is not an error.
        let _ = reply_to.send(Answer {
            tag,
            authority: self.authority,
            reply,
        });
    }

    fn report(&mut self, report: Report) {
        tracing::warn!(
            authority = self.authority,
            shard = self.shard,
            ?report,
            "authority report"
        );
        let _ = self.reports.send((self.authority, report));
    }
}

/// Where a shard's peers put the messages for it.
type ShardInputs = Sender<Vec<Input>>;
type ShardCalls = Sender<HostMessage<Call, (u64, Sender<Answer>)>>;

/// Every shard of every authority, running.
pub struct EmbeddedCommittee {
    committee: Arc<Committee>,
    shards: u32,
    calls: Vec<Vec<ShardCalls>>,
    threads: Vec<JoinHandle<AuthorityShard>>,
    reports: Receiver<(AuthorityIndex, Report)>,
}

impl EmbeddedCommittee {
    /// Recovers every shard from `data_dir/authority-A/shard-S` (empty on first start) and runs it.
    pub fn start(
        options: &EmbeddedCommitteeOptions,
        keys: &[SigningKey],
        epoch: u64,
    ) -> Result<EmbeddedCommittee, StartError> {
        if options.behaviours.len() != keys.len() {
            return Err(StartError::Behaviours {
                behaviours: options.behaviours.len(),
                authorities: keys.len(),
            });
        }
        if options.shards == 0 {
            return Err(StartError::NoShards);
        }
        let members = keys.iter().map(|key| key.verifying_key().to_bytes()).collect();
        let committee = Arc::new(Committee::new(epoch, members).expect("distinct generated authority keys"));
        let (reports_tx, reports) = unbounded();
        let mut calls = Vec::new();
        let mut threads = Vec::new();
        for (authority, key) in keys.iter().enumerate() {
            let (peers, inputs): (Vec<ShardInputs>, Vec<Receiver<Vec<Input>>>) =
                (0..options.shards).map(|_| unbounded()).unzip();
            let mut authority_calls = Vec::new();
            for (shard, inputs_rx) in inputs.into_iter().enumerate() {
                let config = AuthorityConfig {
                    committee: (*committee).clone(),
                    authority: authority as AuthorityIndex,
                    shard: shard as ShardIndex,
                    shards: options.shards,
                    credit_retransmit_ms: options.credit_retransmit_ms,
                    channel_credits_max: options.channel_credits_max,
                };
                let wiring = ShardWiring {
                    authority: authority as AuthorityIndex,
                    shard: shard as ShardIndex,
                    behaviour: options.behaviours[authority],
                    peers: peers.clone(),
                    reports: reports_tx.clone(),
                };
                let name = format!("authority-{authority}/shard-{shard}");
                let host = EmbeddedHost::recover(
                    name.clone(),
                    AuthorityShard::new(config, key.clone()),
                    wiring,
                    &shard_dir(&options.data_dir, authority, shard),
                    options.log.clone(),
                    options.snapshot_log_bytes,
                )?;
                let (calls_tx, calls_rx) = unbounded();
                threads.push(
                    std::thread::Builder::new()
                        .name(name)
                        .spawn(move || host.run(calls_rx, inputs_rx))?,
                );
                authority_calls.push(calls_tx);
            }
            calls.push(authority_calls);
        }
        Ok(EmbeddedCommittee {
            committee,
            shards: options.shards,
            calls,
            threads,
            reports,
        })
    }

    pub fn committee(&self) -> &Arc<Committee> {
        &self.committee
    }

    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// Sends `call` to `authority`'s shard for its account; the answer goes to `reply_to`.
    pub fn call(&self, authority: AuthorityIndex, call: Call, tag: u64, reply_to: &Sender<Answer>) {
        let shard = call.shard(self.shards);
        let message = HostMessage::Calls(vec![(call, (tag, reply_to.clone()))]);
        // A stopped shard (or one that does not exist) drops the call: the caller sees no
        // answer, as from a dead authority.
        if let Some(inbox) = self.calls[usize::from(authority)].get(shard as usize) {
            let _ = inbox.send(message);
        }
    }

    /// Sends `call` to every authority.
    pub fn broadcast(&self, call: &Call, tag: u64, reply_to: &Sender<Answer>) {
        for authority in 0..self.calls.len() {
            self.call(authority as AuthorityIndex, call.clone(), tag, reply_to);
        }
    }

    /// What the authorities reported (conflicting certificates, channel violations) so far.
    pub fn reports(&self) -> Vec<(AuthorityIndex, Report)> {
        self.reports.try_iter().collect()
    }

    /// Stops every shard and returns them, by authority then shard, for the audit.
    pub fn stop(self) -> Vec<Vec<AuthorityShard>> {
        for authority in &self.calls {
            for shard in authority {
                let _ = shard.send(HostMessage::Stop);
            }
        }
        let mut roles = self
            .threads
            .into_iter()
            .map(|t| t.join().expect("a shard thread panicked"));
        (0..self.calls.len())
            .map(|_| roles.by_ref().take(self.shards as usize).collect())
            .collect()
    }
}

fn shard_dir(root: &Path, authority: usize, shard: usize) -> PathBuf {
    root.join(format!("authority-{authority}"))
        .join(format!("shard-{shard}"))
}
