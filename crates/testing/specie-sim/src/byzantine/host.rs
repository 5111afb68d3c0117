//! One honest authority shard as its host keeps it: the role, its durable log of encoded commands
//! and its latest snapshot, and the proposals waiting for their fsync. A crash loses the role's
//! memory (tickets waiting, credits not yet sent, timers) and whatever was not yet durable; the
//! role is rebuilt from the snapshot and the commands after it, exactly as a restarted process
//! would be, and leads again when it restarts.

use specie_authority::{
    AuthorityConfig, AuthorityShard, Command, Input, Message, Reply, Report, ShardIndex, StateError,
};
use specie_fastpay::SigningKey;
use specie_role::{Durable, Round, Ticket};

/// What the world needs of a shard's role: the authority role itself, or (in the planted-bug
/// test) a wrapper around it.
pub(super) trait ShardRole:
    Durable<
    Command = Command,
    Input = Input,
    Peer = ShardIndex,
    Message = Message,
    Reply = Reply,
    Report = Report,
    StateError = StateError,
>
{
    /// The authority shard inside, for the world's audits.
    fn shard(&self) -> &AuthorityShard;
}

impl ShardRole for AuthorityShard {
    fn shard(&self) -> &AuthorityShard {
        self
    }
}

/// How a fresh role is made (following, in its initial state).
pub(super) type BuildRole<R> = fn(AuthorityConfig, SigningKey) -> R;

/// Why the host refused what the role or its log gave it.
#[derive(Debug, thiserror::Error)]
pub(super) enum HostError {
    #[error("log record refused: {0}")]
    Record(StateError),
    #[error("command {command:?} does not read back from its log bytes as itself")]
    RoundTrip { command: Box<Command> },
    #[error("snapshot refused: {0}")]
    Snapshot(StateError),
    #[error("recovered state is inconsistent: {0}")]
    Inconsistent(StateError),
}

/// Everything one settle produced, after the round's proposals were made durable and applied.
#[derive(Default)]
pub(super) struct Outputs {
    /// The applied commands' log bytes, in order (for the trace).
    pub durable: Vec<Vec<u8>>,
    pub applied: Vec<Command>,
    pub sends: Vec<(ShardIndex, Message)>,
    pub replies: Vec<(Ticket, Reply)>,
    pub reports: Vec<Report>,
    pub snapshot_taken: bool,
}

pub(super) struct ShardHost<R: ShardRole> {
    build: BuildRole<R>,
    config: AuthorityConfig,
    key: SigningKey,
    /// While down: the role as recovered from the log, following, fed nothing.
    pub role: R,
    pub up: bool,
    pub restart_at_ms: Option<u64>,
    /// The state as of the last snapshot, and the commands applied since, encoded.
    snapshot: Option<Vec<u8>>,
    log: Vec<Vec<u8>>,
    snapshot_every_commands: usize,
    /// Proposals waiting for their fsync (or commit), in order, and when it completes: the
    /// role keeps taking inputs meanwhile, as the embedded host does within a turn and the
    /// replicated one until an entry commits. A crash loses them.
    pending: Vec<Command>,
    pub durable_at_ms: Option<u64>,
    /// Changed since the world last checked it.
    pub dirty: bool,
}

impl<R: ShardRole> ShardHost<R> {
    pub fn start(
        build: BuildRole<R>,
        config: AuthorityConfig,
        key: SigningKey,
        snapshot_every_commands: usize,
    ) -> Self {
        let mut role = build(config.clone(), key.clone());
        role.lead(0);
        ShardHost {
            build,
            config,
            key,
            role,
            up: true,
            restart_at_ms: None,
            snapshot: None,
            log: Vec::new(),
            snapshot_every_commands,
            pending: Vec::new(),
            durable_at_ms: None,
            dirty: true,
        }
    }

    /// Commands proposed and not yet durable.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Hands the role one input and settles it; a down shard loses it. Proposals of this turn
    /// become durable after `durable_delay_ms` (at once if 0 and nothing else waits).
    pub fn handle(&mut self, now_ms: u64, input: Input, durable_delay_ms: u64) -> Result<Outputs, HostError> {
        let mut outputs = Outputs::default();
        if self.up {
            self.role.handle(now_ms, input);
            self.settle(now_ms, durable_delay_ms, &mut outputs)?;
        }
        Ok(outputs)
    }

    /// Completes a due fsync and fires the role's timer if it is due.
    pub fn tick(&mut self, now_ms: u64, durable_delay_ms: u64) -> Result<Outputs, HostError> {
        let mut outputs = Outputs::default();
        if !self.up {
            return Ok(outputs);
        }
        let mut woke = false;
        if self.durable_at_ms.is_some_and(|at| at <= now_ms) {
            self.make_durable(now_ms, &mut outputs)?;
            woke = true;
        }
        if self.role.poll_timeout().is_some_and(|at| at <= now_ms) {
            self.role.handle_timeout(now_ms);
            woke = true;
        }
        if woke {
            self.settle(now_ms, durable_delay_ms, &mut outputs)?;
        }
        Ok(outputs)
    }

    /// Drains the role round by round. A round's proposals join those waiting for durability;
    /// unless they must wait, they go to the log together, are read back from their bytes and
    /// applied in order, until a round proposes nothing. Then, if the log has grown long
    /// enough and nothing waits, the state is snapshotted and the log truncated.
    fn settle(&mut self, now_ms: u64, durable_delay_ms: u64, outputs: &mut Outputs) -> Result<(), HostError> {
        loop {
            let round = Round::take(&mut self.role);
            outputs.sends.extend(round.sends);
            outputs.replies.extend(round.replies);
            outputs.reports.extend(round.reports);
            if round.proposals.is_empty() {
                break;
            }
            self.pending.extend(round.proposals);
            if durable_delay_ms > 0 || self.durable_at_ms.is_some() {
                self.durable_at_ms.get_or_insert(now_ms + durable_delay_ms.max(1));
                break;
            }
            self.make_durable(now_ms, outputs)?;
        }
        if self.pending.is_empty() && self.log.len() >= self.snapshot_every_commands {
            self.snapshot = Some(self.role.snapshot());
            self.log.clear();
            outputs.snapshot_taken = true;
        }
        Ok(())
    }

    /// The waiting proposals reach the log (their canonical bytes, read back) and are applied.
    fn make_durable(&mut self, now_ms: u64, outputs: &mut Outputs) -> Result<(), HostError> {
        self.durable_at_ms = None;
        let mut applied = Vec::with_capacity(self.pending.len());
        for command in std::mem::take(&mut self.pending) {
            let bytes = R::encode_command(&command);
            let decoded = self.role.decode_command(&bytes).map_err(HostError::Record)?;
            if decoded != command {
                return Err(HostError::RoundTrip {
                    command: Box::new(command),
                });
            }
            self.log.push(bytes.clone());
            outputs.durable.push(bytes);
            applied.push(decoded);
        }
        for command in &applied {
            self.role.apply(now_ms, command);
        }
        self.dirty = true;
        outputs.applied.extend(applied);
        Ok(())
    }

    /// Kills the shard (what waited for durability is lost) and rebuilds its role from the
    /// durable log alone, as the restarted process will find it. Returns whether the rebuilt
    /// state is the state it crashed in (everything applied was durable).
    pub fn crash(&mut self, now_ms: u64, restart_at_ms: u64) -> Result<bool, HostError> {
        self.pending.clear();
        self.durable_at_ms = None;
        let crashed = self.role.snapshot();
        let mut role = (self.build)(self.config.clone(), self.key.clone());
        if let Some(snapshot) = &self.snapshot {
            role.restore(snapshot).map_err(HostError::Snapshot)?;
        }
        for bytes in &self.log {
            let command = role.decode_command(bytes).map_err(HostError::Record)?;
            role.apply(now_ms, &command);
        }
        // Whatever replaying produced belongs to the previous life (its callers are gone).
        drop(Round::take(&mut role));
        role.check_invariants().map_err(HostError::Inconsistent)?;
        let lossless = role.snapshot() == crashed;
        self.role = role;
        self.up = false;
        self.restart_at_ms = Some(restart_at_ms);
        self.dirty = true;
        Ok(lossless)
    }

    /// The recovered role leads again and resumes what its durable state says is in flight.
    pub fn restart(&mut self, now_ms: u64) -> Result<Outputs, HostError> {
        self.up = true;
        self.restart_at_ms = None;
        self.role.lead(now_ms);
        let mut outputs = Outputs::default();
        self.settle(now_ms, 0, &mut outputs)?;
        Ok(outputs)
    }
}
