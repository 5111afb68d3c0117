//! The role contract: what every protocol role of specie (shard, coordinator, and the roles of
//! the modes to come) promises its hosts, in the sans-IO style of quinn-proto.
//!
//! A role is a deterministic state machine. It never reads a clock, a socket or a file: its
//! host hands it inputs together with the current time, polls it for outputs, and asks it when
//! it next needs to be woken. The same role therefore runs embedded (over the local durable
//! log), replicated (over Raft) and under the simulator, and each of those hosts is written
//! once for every role.
//!
//! The host's side of the contract, in order:
//! 1. Give the role its inputs ([`Role::handle`]) and, when [`Role::poll_timeout`]'s deadline
//!    has passed, [`Role::handle_timeout`].
//! 2. Drain [`Role::poll_output`] (or [`Round::take`]). Make every [`Output::Propose`] of the
//!    round durable *together* (one fsync or one Raft entry), then hand each back, in order, to
//!    [`Role::apply`]; applying may produce more outputs, so repeat until a round proposes
//!    nothing. Deliver [`Output::Send`]s to peers (in any order, possibly never: the role
//!    retries what it needs), [`Output::Reply`]s to the callers that sent the tickets, and
//!    surface [`Output::Report`]s to the operator.
//! 3. Sleep until the next input or [`Role::poll_timeout`], whichever comes first.
//!
//! A replicated host calls [`Role::lead`] when its replica becomes leader (after applying
//! every earlier command) and [`Role::follow`] when it loses the lead; an embedded host leads
//! from the start.

/// Identifies a caller's request across the role, so the host can route the reply back. Chosen
/// by the host; opaque to the role.
pub type Ticket = u64;

/// What a role asks its host to do.
#[derive(Debug)]
pub enum Output<R: Role + ?Sized> {
    /// Make this command durable, then pass it to [`Role::apply`].
    Propose(R::Command),
    /// Deliver `message` to peer `to`. Delivery is best effort: the role owns retries.
    Send { to: R::Peer, message: R::Message },
    /// Answer the caller whose input carried `ticket`.
    Reply { ticket: Ticket, reply: R::Reply },
    /// Something an operator must see (a peer's refusal or forged answer, an outcome no caller
    /// waits for). It changes nothing in the role.
    Report(R::Report),
}

/// A protocol role: a deterministic state machine driven by its host.
pub trait Role {
    /// What the role makes durable through its host before acting on it.
    type Command;
    /// What callers and peers hand the role (decoded and authorised by the host).
    type Input;
    /// Whom the role sends to.
    type Peer;
    /// What the role sends to a peer.
    type Message;
    /// What the role answers a caller.
    type Reply;
    /// What the role tells the operator.
    type Report;

    /// Starts acting as the leader: resume whatever the durable state says is in flight.
    fn lead(&mut self, now_ms: u64);

    /// Stops acting as the leader; work not yet durable is answered as dropped.
    fn follow(&mut self);

    /// Takes one input.
    fn handle(&mut self, now_ms: u64, input: Self::Input);

    /// Takes a command the host has made durable (in proposal order).
    fn apply(&mut self, now_ms: u64, command: &Self::Command);

    /// Called once [`Role::poll_timeout`]'s deadline has passed.
    fn handle_timeout(&mut self, now_ms: u64);

    /// The next output, if any.
    fn poll_output(&mut self) -> Option<Output<Self>>;

    /// When the role next needs [`Role::handle_timeout`], in the host's milliseconds; `None`
    /// while it waits only for inputs. Hosts sleep until then instead of polling on a tick.
    fn poll_timeout(&self) -> Option<u64>;
}

/// Every output a role has ready, sorted the way hosts hand them on.
#[derive(Debug)]
pub struct Round<R: Role + ?Sized> {
    /// To be made durable together, in this order, then applied in this order.
    pub proposals: Vec<R::Command>,
    pub sends: Vec<(R::Peer, R::Message)>,
    pub replies: Vec<(Ticket, R::Reply)>,
    pub reports: Vec<R::Report>,
}

impl<R: Role + ?Sized> Round<R> {
    /// Drains the role's outputs.
    pub fn take(role: &mut R) -> Round<R> {
        let mut round = Round {
            proposals: Vec::new(),
            sends: Vec::new(),
            replies: Vec::new(),
            reports: Vec::new(),
        };
        while let Some(output) = role.poll_output() {
            match output {
                Output::Propose(command) => round.proposals.push(command),
                Output::Send { to, message } => round.sends.push((to, message)),
                Output::Reply { ticket, reply } => round.replies.push((ticket, reply)),
                Output::Report(report) => round.reports.push(report),
            }
        }
        round
    }
}

/// A role whose commands and state can be written down: what a host needs to keep it on a
/// durable log (embedded) or a replicated one (Raft), and to bring it back after a crash.
pub trait Durable: Role {
    /// Why bytes from the log or a snapshot were refused, or the state is inconsistent.
    type StateError: std::error::Error + Send + Sync + 'static;

    /// The command's canonical bytes, as the log stores them.
    fn encode_command(command: &Self::Command) -> Vec<u8>;

    /// A command read back from the log (bounded by the role's own limits).
    fn decode_command(&self, bytes: &[u8]) -> Result<Self::Command, Self::StateError>;

    /// The replicated state's canonical bytes: equal states give equal snapshots.
    fn snapshot(&self) -> Vec<u8>;

    /// Replaces the replicated state with a snapshot's. Called only while following.
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), Self::StateError>;

    /// Checks the state's invariants; hosts call it after recovery and, in debug builds, after
    /// every round of applied commands.
    fn check_invariants(&self) -> Result<(), Self::StateError>;
}
