//! One honest authority shard as its host keeps it: the role, its durable log of encoded commands
//! and its latest snapshot. A crash loses the role's memory (tickets waiting, credits not yet
//! sent, timers); the role is rebuilt from the snapshot and the commands after it, exactly as a
//! restarted process would be, and leads again when it restarts.

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
            dirty: true,
        }
    }

    /// Hands the role one input and settles it; a down shard loses it.
    pub fn handle(&mut self, now_ms: u64, input: Input) -> Result<Outputs, HostError> {
        if !self.up {
            return Ok(Outputs::default());
        }
        self.role.handle(now_ms, input);
        self.settle(now_ms)
    }

    /// Fires the role's timer if it is due.
    pub fn tick(&mut self, now_ms: u64) -> Result<Outputs, HostError> {
        if !self.up || self.role.poll_timeout().is_none_or(|at| at > now_ms) {
            return Ok(Outputs::default());
        }
        self.role.handle_timeout(now_ms);
        self.settle(now_ms)
    }

    /// Drains the role round by round: a round's proposals go to the log together, are read
    /// back from their bytes and applied in order, until a round proposes nothing. Then, if
    /// the log has grown long enough, the state is snapshotted and the log truncated.
    fn settle(&mut self, now_ms: u64) -> Result<Outputs, HostError> {
        let mut outputs = Outputs::default();
        loop {
            let round = Round::take(&mut self.role);
            let mut applied = Vec::with_capacity(round.proposals.len());
            for command in round.proposals {
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
            outputs.sends.extend(round.sends);
            outputs.replies.extend(round.replies);
            outputs.reports.extend(round.reports);
            if applied.is_empty() {
                break;
            }
            self.dirty = true;
            outputs.applied.extend(applied);
        }
        if self.log.len() >= self.snapshot_every_commands {
            self.snapshot = Some(self.role.snapshot());
            self.log.clear();
            outputs.snapshot_taken = true;
        }
        Ok(outputs)
    }

    /// Kills the shard and rebuilds its role from the durable log alone, as the restarted
    /// process will find it. Returns whether the rebuilt state is the state it crashed in
    /// (everything applied was durable).
    pub fn crash(&mut self, now_ms: u64, restart_at_ms: u64) -> Result<bool, HostError> {
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
        self.settle(now_ms)
    }
}
