//! The simulated host: one role inside a deterministic simulation, for any role.
//!
//! The world owns time and the network; this host owns the rest of the contract, as the
//! embedded host does over a real disk: a round's proposals are appended to the role's durable
//! log (memory that survives a crash here) before they are applied, and the role's outputs are
//! handed back to the world, in order, to route, drop, delay or record. A crash loses the role's
//! memory and keeps its log; a restart rebuilds the role from the log and checks it comes back
//! exactly as it crashed.
//!
//! A world may also ask for more of a real host's behaviour: a slow fsync (proposals wait for
//! their durability while the role keeps taking inputs, and a crash loses them), periodic
//! snapshots that truncate the log, a check that every command reads back from its log bytes as
//! itself, and a recovery at the moment of the crash, so the state a restart will find can be
//! compared and audited while the role is down.

use specie_role::{Durable, Round, Ticket};

/// What a simulated role did, in the order it did it.
#[derive(Debug)]
pub enum SimEvent<R: Durable> {
    /// A command reached the durable log (its canonical bytes) and was then applied.
    Durable(Vec<u8>),
    Send {
        to: R::Peer,
        message: R::Message,
    },
    Reply {
        ticket: Ticket,
        reply: R::Reply,
    },
    Report(R::Report),
}

/// Why a role's log does not rebuild the role that wrote it.
#[derive(Debug, thiserror::Error)]
pub enum SimRestartError<E: std::error::Error + 'static> {
    #[error("{role}: log record {index} is refused: {source}")]
    Record { role: String, index: usize, source: E },
    #[error("{role}: command {index} of the log does not read back from its bytes as itself")]
    RoundTrip { role: String, index: usize },
    #[error("{role}: the snapshot is refused: {source}")]
    Snapshot { role: String, source: E },
    #[error("{role}: the recovered state is inconsistent: {source}")]
    Inconsistent { role: String, source: E },
    #[error("{role}: restarted into a different state than it crashed in")]
    Diverged { role: String },
}

/// Whether a decoded command is the command that was encoded.
type SameCommand<R> = fn(&<R as specie_role::Role>::Command, &<R as specie_role::Role>::Command) -> bool;

/// One role, its durable log and how to build it afresh.
pub struct SimHost<R: Durable> {
    name: String,
    fresh: Box<dyn Fn() -> R>,
    /// `None` while crashed.
    role: Option<R>,
    /// While crashed, after [`SimHost::recover`]: the role rebuilt from the log, following.
    recovered: Option<R>,
    /// The state as of the last snapshot (if any), and the commands applied since, encoded.
    snapshot: Option<Vec<u8>>,
    log: Vec<Vec<u8>>,
    /// The replicated state at the moment of the crash, to compare the restart with.
    crashed_snapshot: Option<Vec<u8>>,
    /// Snapshot (and truncate the log) once it holds this many commands; `None`: never.
    snapshot_every: Option<usize>,
    snapshots_taken: u64,
    /// How long the proposals of the next turns wait for their fsync (0: at once).
    durable_delay_ms: u64,
    /// Proposals waiting for their fsync, in order, and when it completes.
    pending: Vec<R::Command>,
    durable_at_ms: Option<u64>,
    same_command: Option<SameCommand<R>>,
    /// The first command that did not read back as itself, until taken.
    fault: Option<SimRestartError<R::StateError>>,
}

impl<R: Durable> SimHost<R> {
    /// A role built by `fresh` (following, in its initial state), made to lead at time 0.
    pub fn start(name: impl Into<String>, fresh: impl Fn() -> R + 'static) -> SimHost<R> {
        let mut role = fresh();
        role.lead(0);
        SimHost {
            name: name.into(),
            fresh: Box::new(fresh),
            role: Some(role),
            recovered: None,
            snapshot: None,
            log: Vec::new(),
            crashed_snapshot: None,
            snapshot_every: None,
            snapshots_taken: 0,
            durable_delay_ms: 0,
            pending: Vec::new(),
            durable_at_ms: None,
            same_command: None,
            fault: None,
        }
    }

    /// Snapshots the state and truncates the log whenever it holds `commands` commands and
    /// nothing waits for durability.
    pub fn snapshot_every(mut self, commands: usize) -> Self {
        self.snapshot_every = Some(commands);
        self
    }

    /// The running role; `None` while crashed.
    pub fn role(&self) -> Option<&R> {
        self.role.as_ref()
    }

    /// The running role, or while crashed the role [`SimHost::recover`] rebuilt.
    pub fn state(&self) -> Option<&R> {
        self.role.as_ref().or(self.recovered.as_ref())
    }

    pub fn is_up(&self) -> bool {
        self.role.is_some()
    }

    /// How long the proposals of the following turns wait for their fsync (0: none).
    pub fn set_durable_delay(&mut self, delay_ms: u64) {
        self.durable_delay_ms = delay_ms;
    }

    /// Commands proposed and not yet durable.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// When the waiting proposals become durable, if any wait.
    pub fn durable_at(&self) -> Option<u64> {
        self.durable_at_ms
    }

    /// How many snapshots truncated the log so far.
    pub fn snapshots_taken(&self) -> u64 {
        self.snapshots_taken
    }

    /// Why a command did not read back from its log bytes as itself, once (see
    /// [`SimHost::check_round_trip`]).
    pub fn take_fault(&mut self) -> Option<SimRestartError<R::StateError>> {
        self.fault.take()
    }

    /// Gives the role an input and settles it; a crashed role loses the input.
    pub fn handle(&mut self, now_ms: u64, input: R::Input) -> Vec<SimEvent<R>> {
        self.handle_all(now_ms, [input])
    }

    /// Gives the role every input of one turn, then settles it once, as the embedded host does
    /// with the calls it takes together (so a role that batches its work sees the batch); a
    /// crashed role loses them.
    pub fn handle_all(&mut self, now_ms: u64, inputs: impl IntoIterator<Item = R::Input>) -> Vec<SimEvent<R>> {
        let Some(role) = self.role.as_mut() else {
            return Vec::new();
        };
        for input in inputs {
            role.handle(now_ms, input);
        }
        self.settle(now_ms, self.durable_delay_ms, Vec::new())
    }

    /// Completes a due fsync, fires the role's timer if its deadline has passed, and settles it.
    pub fn tick(&mut self, now_ms: u64) -> Vec<SimEvent<R>> {
        let mut events = Vec::new();
        if self.role.is_none() {
            return events;
        }
        if self.durable_at_ms.is_some_and(|at| at <= now_ms) {
            self.make_durable(now_ms, &mut events);
        }
        if let Some(role) = self.role.as_mut() {
            if role.poll_timeout().is_some_and(|deadline| deadline <= now_ms) {
                role.handle_timeout(now_ms);
            }
        }
        self.settle(now_ms, self.durable_delay_ms, events)
    }

    /// Drains the role's outputs; a round's proposals are made durable, then applied, until a
    /// round proposes nothing, or join those waiting for a slow fsync. Then, if the log has
    /// grown long enough and nothing waits, the state is snapshotted and the log truncated.
    fn settle(&mut self, now_ms: u64, durable_delay_ms: u64, mut events: Vec<SimEvent<R>>) -> Vec<SimEvent<R>> {
        while let Some(role) = self.role.as_mut() {
            let round = Round::take(role);
            let proposed = !round.proposals.is_empty();
            self.pending.extend(round.proposals);
            let wait = proposed && (durable_delay_ms > 0 || self.durable_at_ms.is_some());
            if wait {
                self.durable_at_ms.get_or_insert(now_ms + durable_delay_ms.max(1));
            } else if proposed {
                self.make_durable(now_ms, &mut events);
            }
            events.extend(
                round
                    .sends
                    .into_iter()
                    .map(|(to, message)| SimEvent::Send { to, message }),
            );
            events.extend(
                round
                    .replies
                    .into_iter()
                    .map(|(ticket, reply)| SimEvent::Reply { ticket, reply }),
            );
            events.extend(round.reports.into_iter().map(SimEvent::Report));
            if !proposed || wait {
                break;
            }
        }
        let due = self.snapshot_every.is_some_and(|every| self.log.len() >= every);
        if let Some(role) = self.role.as_ref().filter(|_| due && self.pending.is_empty()) {
            self.snapshot = Some(role.snapshot());
            self.log.clear();
            self.snapshots_taken += 1;
        }
        events
    }

    /// The waiting proposals reach the log (their canonical bytes) and are then applied.
    fn make_durable(&mut self, now_ms: u64, events: &mut Vec<SimEvent<R>>) {
        self.durable_at_ms = None;
        let Some(role) = self.role.as_mut() else {
            return;
        };
        let commands = std::mem::take(&mut self.pending);
        for command in &commands {
            let bytes = R::encode_command(command);
            if let Some(same) = self.same_command.filter(|_| self.fault.is_none()) {
                let index = self.log.len();
                self.fault = match role.decode_command(&bytes) {
                    Ok(decoded) if same(&decoded, command) => None,
                    Ok(_) => Some(SimRestartError::RoundTrip {
                        role: self.name.clone(),
                        index,
                    }),
                    Err(source) => Some(SimRestartError::Record {
                        role: self.name.clone(),
                        index,
                        source,
                    }),
                };
            }
            self.log.push(bytes.clone());
            events.push(SimEvent::Durable(bytes));
        }
        for command in &commands {
            role.apply(now_ms, command);
        }
    }

    /// Kills the role: its memory, timers, unsent outputs and the proposals waiting for their
    /// fsync are gone; its log stays. False if it was already down.
    pub fn crash(&mut self) -> bool {
        let Some(role) = self.role.take() else {
            return false;
        };
        self.pending.clear();
        self.durable_at_ms = None;
        self.crashed_snapshot = Some(role.snapshot());
        true
    }

    /// While crashed: rebuilds the role from its log now, as the restarted process will find it
    /// (what replaying produced belongs to the previous life and is dropped), and checks it is
    /// consistent. Returns whether it is the state it crashed in; the next restart resumes it
    /// as it is, without comparing again.
    pub fn recover(&mut self, now_ms: u64) -> Result<bool, SimRestartError<R::StateError>> {
        assert!(self.role.is_none(), "{}: recovered while running", self.name);
        let mut role = self.rebuild(now_ms)?;
        drop(Round::take(&mut role));
        let lossless = self
            .crashed_snapshot
            .take()
            .is_none_or(|crashed| crashed == role.snapshot());
        self.recovered = Some(role);
        Ok(lossless)
    }

    /// The role as its snapshot and log rebuild it, checked consistent.
    fn rebuild(&self, now_ms: u64) -> Result<R, SimRestartError<R::StateError>> {
        let mut role = (self.fresh)();
        if let Some(snapshot) = &self.snapshot {
            role.restore(snapshot).map_err(|source| SimRestartError::Snapshot {
                role: self.name.clone(),
                source,
            })?;
        }
        for (index, bytes) in self.log.iter().enumerate() {
            let command = role.decode_command(bytes).map_err(|source| SimRestartError::Record {
                role: self.name.clone(),
                index,
                source,
            })?;
            role.apply(now_ms, &command);
        }
        role.check_invariants()
            .map_err(|source| SimRestartError::Inconsistent {
                role: self.name.clone(),
                source,
            })?;
        Ok(role)
    }

    /// Rebuilds the role from its log (unless [`SimHost::recover`] did), checks it is the state
    /// it crashed in and consistent, makes it lead and settles what it resumes.
    pub fn restart(&mut self, now_ms: u64) -> Result<Vec<SimEvent<R>>, SimRestartError<R::StateError>> {
        assert!(self.role.is_none(), "{}: restarted while running", self.name);
        let mut role = match self.recovered.take() {
            Some(role) => role,
            None => self.rebuild(now_ms)?,
        };
        if self
            .crashed_snapshot
            .take()
            .is_some_and(|crashed| crashed != role.snapshot())
        {
            return Err(SimRestartError::Diverged {
                role: self.name.clone(),
            });
        }
        role.lead(now_ms);
        self.role = Some(role);
        Ok(self.settle(now_ms, 0, Vec::new()))
    }
}

impl<R: Durable> SimHost<R>
where
    R::Command: PartialEq,
{
    /// Checks that every command reads back from its log bytes as itself, when it becomes
    /// durable; a command that does not is a fault ([`SimHost::take_fault`]).
    pub fn check_round_trip(mut self) -> Self {
        self.same_command = Some(|decoded, command| decoded == command);
        self
    }
}
