//! The simulated host: one role inside a deterministic simulation, for any role.
//!
//! The world owns time and the network; this host owns the rest of the contract, as the
//! embedded host does over a real disk: a round's proposals are appended to the role's durable
//! log (memory that survives a crash here) before they are applied, and the role's outputs are
//! handed back to the world, in order, to route, drop, delay or record. A crash loses the role's
//! memory and keeps its log; a restart rebuilds the role from the log and checks it comes back
//! exactly as it crashed.

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

/// Why a restarted role is not the role that crashed.
#[derive(Debug, thiserror::Error)]
pub enum SimRestartError<E: std::error::Error + 'static> {
    #[error("{role}: log record {index} is refused: {source}")]
    Record { role: String, index: usize, source: E },
    #[error("{role}: the recovered state is inconsistent: {source}")]
    Inconsistent { role: String, source: E },
    #[error("{role}: restarted into a different state than it crashed in")]
    Diverged { role: String },
}

/// One role, its durable log and how to build it afresh.
pub struct SimHost<R: Durable> {
    name: String,
    fresh: Box<dyn Fn() -> R>,
    /// `None` while crashed.
    role: Option<R>,
    log: Vec<Vec<u8>>,
    /// The replicated state at the moment of the crash, to compare the restart with.
    crashed_snapshot: Option<Vec<u8>>,
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
            log: Vec::new(),
            crashed_snapshot: None,
        }
    }

    /// The running role; `None` while crashed.
    pub fn role(&self) -> Option<&R> {
        self.role.as_ref()
    }

    pub fn is_up(&self) -> bool {
        self.role.is_some()
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
        self.settle(now_ms)
    }

    /// Fires the role's timer if its deadline has passed, and settles it.
    pub fn tick(&mut self, now_ms: u64) -> Vec<SimEvent<R>> {
        if let Some(role) = self.role.as_mut() {
            if role.poll_timeout().is_some_and(|deadline| deadline <= now_ms) {
                role.handle_timeout(now_ms);
            }
        }
        self.settle(now_ms)
    }

    /// Drains the role's outputs; a round's proposals are made durable, then applied, until a
    /// round proposes nothing.
    fn settle(&mut self, now_ms: u64) -> Vec<SimEvent<R>> {
        let mut events = Vec::new();
        let Some(role) = self.role.as_mut() else {
            return events;
        };
        loop {
            let round = Round::take(role);
            let proposed = !round.proposals.is_empty();
            for command in &round.proposals {
                let bytes = R::encode_command(command);
                self.log.push(bytes.clone());
                events.push(SimEvent::Durable(bytes));
            }
            for command in &round.proposals {
                role.apply(now_ms, command);
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
            if !proposed {
                return events;
            }
        }
    }

    /// Kills the role: its memory, timers and unsent outputs are gone; its log stays. False if
    /// it was already down.
    pub fn crash(&mut self) -> bool {
        let Some(role) = self.role.take() else {
            return false;
        };
        self.crashed_snapshot = Some(role.snapshot());
        true
    }

    /// Rebuilds the role from its log, checks it is the state it crashed in and consistent,
    /// makes it lead and settles what it resumes.
    pub fn restart(&mut self, now_ms: u64) -> Result<Vec<SimEvent<R>>, SimRestartError<R::StateError>> {
        assert!(self.role.is_none(), "{}: restarted while running", self.name);
        let mut role = (self.fresh)();
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
        Ok(self.settle(now_ms))
    }
}
