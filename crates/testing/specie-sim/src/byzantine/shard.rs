//! What the world keeps of one honest authority shard besides its host (`specie_host::SimHost`,
//! which owns the role, its durable log and snapshot, the proposals waiting for their fsync,
//! and the crash and restart): when it restarts, whether it changed since the world last
//! audited it, and the role's outputs read back as the world's checks want them.

use specie_authority::{AuthorityShard, Command, Input, Message, Reply, Report, ShardIndex, StateError};
use specie_host::{SimEvent, SimHost, SimRestartError};
use specie_role::{Durable, Ticket};

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
    > + 'static
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
pub(super) type BuildRole<R> = fn(specie_authority::AuthorityConfig, specie_fastpay::SigningKey) -> R;

/// Why the host refused what the role or its log gave it.
pub(super) type HostError = SimRestartError<StateError>;

/// Everything one call produced, by kind.
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

pub(super) struct Shard<R: ShardRole> {
    pub host: SimHost<R>,
    pub restart_at_ms: Option<u64>,
    /// Changed since the world last checked it.
    pub dirty: bool,
}

impl<R: ShardRole> Shard<R> {
    pub fn new(host: SimHost<R>) -> Self {
        Shard {
            host,
            restart_at_ms: None,
            dirty: true,
        }
    }

    /// The running role, or while down the role as recovered from the log.
    pub fn role(&self) -> &R {
        self.host.state().expect("a shard is running or recovered")
    }

    pub fn up(&self) -> bool {
        self.host.is_up()
    }

    pub fn pending(&self) -> usize {
        self.host.pending()
    }

    /// Hands the role one input; proposals of this turn become durable after
    /// `durable_delay_ms` (at once if 0 and nothing else waits).
    pub fn handle(&mut self, now_ms: u64, input: Input, durable_delay_ms: u64) -> Result<Outputs, HostError> {
        let snapshots = self.host.snapshots_taken();
        self.host.set_durable_delay(durable_delay_ms);
        let events = self.host.handle(now_ms, input);
        self.outputs(events, snapshots)
    }

    /// Completes a due fsync and fires the role's timer if it is due.
    pub fn tick(&mut self, now_ms: u64, durable_delay_ms: u64) -> Result<Outputs, HostError> {
        let snapshots = self.host.snapshots_taken();
        self.host.set_durable_delay(durable_delay_ms);
        let events = self.host.tick(now_ms);
        self.outputs(events, snapshots)
    }

    /// Kills the shard and recovers its role from the durable log at once, as the restarted
    /// process will find it. Returns whether that is the state it crashed in.
    pub fn crash(&mut self, now_ms: u64, restart_at_ms: u64) -> Result<bool, HostError> {
        self.host.crash();
        let lossless = self.host.recover(now_ms)?;
        self.restart_at_ms = Some(restart_at_ms);
        self.dirty = true;
        Ok(lossless)
    }

    /// The recovered role leads again and resumes what its durable state says is in flight.
    pub fn restart(&mut self, now_ms: u64) -> Result<Outputs, HostError> {
        let snapshots = self.host.snapshots_taken();
        self.restart_at_ms = None;
        let events = self.host.restart(now_ms)?;
        self.outputs(events, snapshots)
    }

    /// Sorts the host's events by kind, reading the durable commands back from their bytes.
    fn outputs(&mut self, events: Vec<SimEvent<R>>, snapshots_before: u64) -> Result<Outputs, HostError> {
        if let Some(fault) = self.host.take_fault() {
            return Err(fault);
        }
        let mut outputs = Outputs {
            snapshot_taken: self.host.snapshots_taken() > snapshots_before,
            ..Outputs::default()
        };
        for event in events {
            match event {
                SimEvent::Durable(bytes) => {
                    let command = self.role().decode_command(&bytes).map_err(|source| HostError::Record {
                        role: "authority shard".into(),
                        index: outputs.durable.len(),
                        source,
                    })?;
                    outputs.applied.push(command);
                    outputs.durable.push(bytes);
                }
                SimEvent::Send { to, message } => outputs.sends.push((to, message)),
                SimEvent::Reply { ticket, reply } => outputs.replies.push((ticket, reply)),
                SimEvent::Report(report) => outputs.reports.push(report),
            }
        }
        self.dirty |= !outputs.durable.is_empty();
        Ok(outputs)
    }
}
