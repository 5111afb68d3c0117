//! The replicated host: one role over Raft (`specie-raft`), for any role.
//!
//! Every replica keeps the role inside its Raft state machine ([`RoleMachine`]), and every
//! committed command is applied to it there, on every replica, in log order. The host's loop,
//! which runs beside the replica, does the rest of the contract: when the replica leads (and has
//! applied everything committed before its term) the role leads; it takes callers' requests and
//! peers' messages only then, hands the role's sends, replies and reports on through the
//! [`Wiring`], and proposes each round's commands as one Raft entry. It does not wait for that
//! entry: rounds stay in flight (up to [`PROPOSALS_IN_FLIGHT_MAX`]) and are appended in the order
//! proposed, and the replies that applying them produces are drained when the state machine says
//! it applied something. On losing the lead the role follows: what it never made durable is
//! answered as dropped, and callers still waiting learn nothing (their fate is decided by the
//! log, which the next leader resumes).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use specie_raft::{Leadership, ProposeError, Proposer, Replica, ReplicatedStateMachine, SnapshotRefused};
use specie_role::{Durable, Round};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::embedded::{hand_on, Callers, Wiring};

/// How long the loop sleeps when nothing is due (any input wakes it at once; this only bounds
/// how long a lost wake-up could go unnoticed).
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// Rounds of proposals handed to Raft and not yet answered; beyond this the loop waits for one.
pub const PROPOSALS_IN_FLIGHT_MAX: usize = 32;
/// Most channel messages one turn takes, so outputs keep flowing under load.
const MESSAGES_PER_TURN_MAX: usize = 256;

/// A role as Raft's state machine: committed commands are applied to it on every replica. Its
/// fields are private to this crate, so nothing but `apply`, `restore` and the host's loop (through
/// the role contract) reaches the role.
pub struct RoleMachine<R> {
    role: R,
    /// The lead the role acts under, if it leads. Kept here, under the state machine's lock, and
    /// not only in the host's task: Raft applies a new leader's entries, or installs its
    /// snapshot, on a replica whose host may not yet have seen it lose the lead; the role must
    /// follow before it applies what it did not propose, and take no caller's input after.
    leading: Option<Proposer>,
    epoch: Instant,
    applied: Arc<Notify>,
}

impl<R: Durable> RoleMachine<R> {
    /// `role` in its initial state, following; the same on every replica.
    pub fn new(role: R) -> RoleMachine<R> {
        RoleMachine {
            role,
            leading: None,
            epoch: Instant::now(),
            applied: Arc::new(Notify::new()),
        }
    }

    /// The role, to read (a replica's status, say).
    pub fn role(&self) -> &R {
        &self.role
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn lead(&mut self, now_ms: u64, lead: Proposer) {
        assert!(self.leading.is_none(), "the role already leads");
        self.role.lead(now_ms);
        self.leading = Some(lead);
    }

    fn leads(&self) -> bool {
        self.leading.is_some()
    }

    /// Makes the role follow if it leads; what following produces (callers answered as dropped)
    /// stays in its outputs for the host's next round.
    fn follow(&mut self) {
        if self.leading.take().is_some() {
            self.role.follow();
        }
    }
}

impl<R> ReplicatedStateMachine for RoleMachine<R>
where
    R: Durable + Send + 'static,
{
    fn apply(&mut self, proposer: Proposer, command: &[u8]) -> Vec<u8> {
        if self.leading.is_some_and(|lead| lead != proposer) {
            // Another leader's entry: this lead is over, whatever the host has seen so far.
            self.follow();
        }
        match self.role.decode_command(command) {
            Ok(command) => {
                let now = self.now_ms();
                self.role.apply(now, &command);
            }
            // Only a leader's host proposes, and only commands its role made: a command that does
            // not decode is a bug. Every replica meets it and skips it alike.
            Err(error) => tracing::error!(%error, "skipped a committed command that does not decode"),
        }
        // Whatever applying produced (replies, on the leader) is for the host's loop to hand on.
        self.applied.notify_one();
        Vec::new()
    }

    fn snapshot(&self) -> Vec<u8> {
        self.role.snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), SnapshotRefused> {
        // Only a replica that follows is sent a snapshot (or opens one at start), so the role
        // follows from here on, whether or not the host has seen the lead go.
        self.follow();
        self.role.restore(snapshot).map_err(SnapshotRefused::new)
    }
}

/// Why a call got no answer from the role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// This replica does not lead (`leader`: the one it believes does); nothing was done here.
    #[error("not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<u64> },
    /// The replica lost the lead or stopped while the call was in flight: it may or may not take
    /// effect, as the replicated log decides.
    #[error("the outcome is unknown: the replica lost the lead or stopped")]
    Unknown,
}

/// Gathers the replies to one caller's batch of calls, one slot per call, and answers the caller
/// once every slot is filled, or at once if one slot learns this replica does not lead. A slot
/// dropped unfilled (the lead was lost) leaves the caller with [`CallError::Unknown`].
pub struct Gather<T> {
    inner: Mutex<Gathering<T>>,
}

struct Gathering<T> {
    replies: Vec<Option<T>>,
    remaining: usize,
    answer: Option<oneshot::Sender<Result<Vec<T>, CallError>>>,
}

/// One call's place in a [`Gather`]: what a replicated wiring's `ReplyTo` holds.
pub struct Slot<T> {
    gather: Arc<Gather<T>>,
    index: usize,
}

/// What the host does with the `ReplyTo` of a call it cannot give the role.
pub trait Refuse {
    /// This replica does not lead; `leader` is the one it believes does.
    fn not_leading(self, leader: Option<u64>);
}

impl<T: Send + 'static> Gather<T> {
    /// `count` slots (at least one) and the receiver of the gathered replies.
    pub fn slots(count: usize) -> (Vec<Slot<T>>, GatherAnswer<T>) {
        assert!(count > 0, "a batch of calls holds at least one call");
        let (answer, receiver) = oneshot::channel();
        let gather = Arc::new(Gather {
            inner: Mutex::new(Gathering {
                replies: (0..count).map(|_| None).collect(),
                remaining: count,
                answer: Some(answer),
            }),
        });
        let slots = (0..count)
            .map(|index| Slot {
                gather: gather.clone(),
                index,
            })
            .collect();
        (slots, GatherAnswer(receiver))
    }
}

impl<T> Slot<T> {
    /// Files this call's reply; the last one answers the caller.
    pub fn fill(self, reply: T) {
        let mut inner = self.gather.inner.lock();
        if inner.replies[self.index].replace(reply).is_none() {
            inner.remaining -= 1;
        }
        if inner.remaining == 0 {
            let replies = inner.replies.iter_mut().map(|r| r.take().expect("filled")).collect();
            if let Some(answer) = inner.answer.take() {
                let _ = answer.send(Ok(replies));
            }
        }
    }
}

impl<T> Refuse for Slot<T> {
    fn not_leading(self, leader: Option<u64>) {
        if let Some(answer) = self.gather.inner.lock().answer.take() {
            let _ = answer.send(Err(CallError::NotLeader { leader }));
        }
    }
}

/// The caller's end of a [`Gather`].
pub struct GatherAnswer<T>(oneshot::Receiver<Result<Vec<T>, CallError>>);

impl<T> GatherAnswer<T> {
    /// Every reply, in call order.
    pub async fn replies(self) -> Result<Vec<T>, CallError> {
        self.0.await.unwrap_or(Err(CallError::Unknown))
    }
}

/// When a replica snapshots, in place of Raft's own policy (which snapshots every replica of a
/// group at the same log index). A snapshot encodes the role's whole state on the apply path, so
/// while it runs the replica applies nothing: on a follower that delays no one (commit needs only
/// its log), on the leader it delays every reply of the group. So followers snapshot on time,
/// each at its own offset, and the leader only when its log has grown several times as long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotPlan {
    /// A follower snapshots once this many entries were applied since its last snapshot (plus a
    /// per-replica offset, so that followers of one group do not pause together).
    pub follower_entries: u64,
    /// The leader's interval, to bound its log.
    pub leader_entries: u64,
}

impl SnapshotPlan {
    /// Followers every `entries`, the leader every four times as many.
    pub fn every(entries: u64) -> SnapshotPlan {
        assert!(entries > 0, "a snapshot plan needs a positive interval");
        SnapshotPlan {
            follower_entries: entries,
            leader_entries: entries.saturating_mul(4),
        }
    }

    fn entries(&self, leading: bool, replica: u64) -> u64 {
        if leading {
            self.leader_entries
        } else {
            // A quarter of the interval per replica id (mod 4): replicas 1, 2 and 3 drift apart.
            self.follower_entries + self.follower_entries / 4 * (replica % 4)
        }
    }
}

/// Why the host's loop ended other than by its callers going away.
#[derive(Debug, thiserror::Error)]
pub enum HostStopped {
    #[error("{role}: its Raft replica stopped")]
    ReplicaStopped { role: String },
    #[error("{role}: the recovered state is inconsistent: {reason}")]
    Inconsistent { role: String, reason: String },
}

/// What callers put on a replicated host's call channel: requests, each with whoever waits.
pub type Calls<W, R> = Vec<(<W as Wiring<R>>::Call, <W as Wiring<R>>::ReplyTo)>;

/// One role on one Raft replica, and its wiring.
pub struct ReplicatedHost<R: Durable + Send + 'static, W: Wiring<R>> {
    name: String,
    replica: Arc<Replica<RoleMachine<R>>>,
    wiring: W,
    applied: Arc<Notify>,
    epoch: Instant,
    callers: Callers<W::ReplyTo>,
    /// The term in which the role leads, while it does.
    leading_term: Option<u64>,
    proposals: JoinSet<Result<Vec<Vec<u8>>, ProposeError>>,
    snapshots: Option<SnapshotPlan>,
    /// The applied index at which this host last asked for a snapshot.
    snapshot_asked_at: Option<u64>,
}

impl<R, W> ReplicatedHost<R, W>
where
    R: Durable + Send + 'static,
    W: Wiring<R>,
    W::ReplyTo: Refuse,
{
    pub fn new(name: impl Into<String>, replica: Arc<Replica<RoleMachine<R>>>, wiring: W) -> Self {
        let (applied, epoch) = replica.with_state(|machine| (machine.applied.clone(), machine.epoch));
        ReplicatedHost {
            name: name.into(),
            replica,
            wiring,
            applied,
            epoch,
            callers: Callers::new(),
            leading_term: None,
            proposals: JoinSet::new(),
            snapshots: None,
            snapshot_asked_at: None,
        }
    }

    /// Snapshots by `plan` (the replica's own automatic snapshots should be off).
    pub fn with_snapshots(mut self, plan: SnapshotPlan) -> Self {
        self.snapshots = Some(plan);
        self
    }

    /// Asks Raft for a snapshot when the plan says this replica is due.
    fn snapshot_if_due(&mut self) {
        let Some(plan) = self.snapshots else { return };
        let metrics = self.replica.metrics();
        let Some(applied) = metrics.applied_index else { return };
        let since = metrics.snapshot_index.max(self.snapshot_asked_at).unwrap_or(0);
        if applied < since + plan.entries(self.leading_term.is_some(), self.replica.id()) {
            return;
        }
        self.snapshot_asked_at = Some(applied);
        let replica = self.replica.clone();
        tokio::spawn(async move {
            if let Err(error) = replica.trigger_snapshot().await {
                tracing::warn!(%error, "could not start a snapshot");
            }
        });
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Runs the role until every caller is gone (`Ok`) or the replica stops. `calls` carries
    /// callers' requests; `inputs` carries peers' messages that need no reply (dropped while the
    /// role does not lead: they answer an earlier leader).
    pub async fn run(
        mut self,
        mut calls: mpsc::Receiver<Calls<W, R>>,
        mut inputs: mpsc::Receiver<Vec<R::Input>>,
    ) -> Result<(), HostStopped> {
        let mut leadership = self.replica.leadership();
        loop {
            let now = *leadership.borrow_and_update();
            self.track(now)?;
            self.settle().await;
            let deadline = self
                .replica
                .with_state(|machine| machine.role.poll_timeout())
                .map_or(Instant::now() + IDLE_WAIT, |at| self.epoch + Duration::from_millis(at));
            tokio::select! {
                changed = leadership.changed() => if changed.is_err() {
                    self.track(Leadership::Stopped)?;
                },
                // Only applying brings a snapshot due: the plan is checked here, not on every wake.
                () = self.applied.notified() => self.snapshot_if_due(),
                message = calls.recv() => {
                    let Some(batch) = message else {
                        self.track(Leadership::NotLeader { term: 0, leader: None })?;
                        return Ok(());
                    };
                    self.take_calls(batch);
                    for batch in std::iter::from_fn(|| calls.try_recv().ok()).take(MESSAGES_PER_TURN_MAX) {
                        self.take_calls(batch);
                    }
                }
                Some(batch) = inputs.recv() => {
                    self.take_inputs(batch);
                    for batch in std::iter::from_fn(|| inputs.try_recv().ok()).take(MESSAGES_PER_TURN_MAX) {
                        self.take_inputs(batch);
                    }
                }
                Some(done) = self.proposals.join_next(), if !self.proposals.is_empty() => self.proposed(done),
                () = tokio::time::sleep_until(deadline) => {
                    let now = self.now_ms();
                    self.replica.with_machine(|machine| {
                        if machine.leads() && machine.role.poll_timeout().is_some_and(|at| at <= now) {
                            machine.role.handle_timeout(now);
                        }
                    });
                }
            }
        }
    }

    /// Makes the role lead or follow as the replica does.
    fn track(&mut self, leadership: Leadership) -> Result<(), HostStopped> {
        match leadership {
            Leadership::Leader { term } if self.leading_term == Some(term) => Ok(()),
            Leadership::Leader { term } => {
                // Lead lost and won again between two looks: the role follows in between, so
                // nothing it proposed in the old term is expected to apply.
                self.follow();
                if !self.proposals.is_empty() {
                    // Handed to Raft under an earlier lead and not yet resolved: Raft may still
                    // append one in this term (it takes proposals in order, and may have won
                    // this term before reaching it). The role leads once every one is applied or
                    // refused, so a leading role applies only commands it proposed as leader.
                    return Ok(());
                }
                let now = self.now_ms();
                let checked = self.replica.with_machine(|machine| {
                    machine.role.check_invariants()?;
                    machine.lead(
                        now,
                        Proposer {
                            term,
                            node: self.replica.id(),
                        },
                    );
                    Ok::<(), R::StateError>(())
                });
                if let Err(error) = checked {
                    return Err(HostStopped::Inconsistent {
                        role: self.name.clone(),
                        reason: error.to_string(),
                    });
                }
                self.leading_term = Some(term);
                tracing::info!(role = self.name, term, "leading");
                Ok(())
            }
            Leadership::NotLeader { .. } => {
                self.follow();
                Ok(())
            }
            Leadership::Stopped => {
                self.follow();
                Err(HostStopped::ReplicaStopped {
                    role: self.name.clone(),
                })
            }
        }
    }

    fn follow(&mut self) {
        if self.leading_term.take().is_none() {
            return;
        }
        tracing::info!(role = self.name, "lost the lead");
        // Outputs ready before the lead was lost (replies of applied commands) still go out; what
        // a follower would propose is dropped.
        let ready = self.replica.with_machine(|machine| Round::take(&mut machine.role));
        hand_on(&mut self.wiring, &mut self.callers, ready);
        let dropped = self.replica.with_machine(|machine| {
            machine.follow();
            Round::take(&mut machine.role)
        });
        hand_on(&mut self.wiring, &mut self.callers, dropped);
        // Still waiting: proposed, so the log decides; dropping their reply-to tells them so.
        // The proposals themselves stay in flight until Raft resolves them (see `track`).
        self.callers.clear();
    }

    fn take_calls(&mut self, batch: Calls<W, R>) {
        let now = self.now_ms();
        let (host_leads, callers) = (self.leading_term.is_some(), &mut self.callers);
        let refused = self.replica.with_machine(|machine| {
            if !(host_leads && machine.leads()) {
                return Some(batch);
            }
            for (call, reply_to) in batch {
                machine.role.handle(now, W::input(call, callers.admit(reply_to)));
            }
            None
        });
        if let Some(batch) = refused {
            let leader = self.replica.leader().filter(|leader| *leader != self.replica.id());
            for (_, reply_to) in batch {
                reply_to.not_leading(leader);
            }
        }
    }

    fn take_inputs(&mut self, batch: Vec<R::Input>) {
        let now = self.now_ms();
        let host_leads = self.leading_term.is_some();
        self.replica.with_machine(|machine| {
            if host_leads && machine.leads() {
                for input in batch {
                    machine.role.handle(now, input);
                }
            }
        });
    }

    /// Hands the role's outputs on and proposes its commands (one Raft entry per round, split
    /// only at the replica's batch limits).
    async fn settle(&mut self) {
        let round = self.replica.with_machine(|machine| Round::take(&mut machine.role));
        let proposals = hand_on(&mut self.wiring, &mut self.callers, round);
        if proposals.is_empty() {
            return;
        }
        if self.leading_term.is_none() {
            // The contract forbids it; proposing from a follower would append to no log anyway.
            tracing::error!(role = self.name, "a following role proposed; dropped");
            debug_assert!(false, "{}: a following role proposed", self.name);
            return;
        }
        let (commands_max, bytes_max) = self.replica.batch_limits();
        let mut batch: Vec<Vec<u8>> = Vec::new();
        let mut batch_bytes = 0;
        for command in &proposals {
            let bytes = R::encode_command(command);
            if !batch.is_empty() && (batch.len() == commands_max || batch_bytes + bytes.len() > bytes_max) {
                self.submit(std::mem::take(&mut batch)).await;
                batch_bytes = 0;
            }
            batch_bytes += bytes.len();
            batch.push(bytes);
        }
        self.submit(batch).await;
    }

    async fn submit(&mut self, batch: Vec<Vec<u8>>) {
        while self.proposals.len() >= PROPOSALS_IN_FLIGHT_MAX {
            if let Some(done) = self.proposals.join_next().await {
                self.proposed(done);
            }
        }
        match self.replica.submit(batch).await {
            Ok(answer) => {
                self.proposals.spawn(answer);
            }
            // The replica lost the lead or stopped: the leadership watch says so next.
            Err(error) => tracing::warn!(role = self.name, %error, "could not propose"),
        }
    }

    fn proposed(&mut self, done: Result<Result<Vec<Vec<u8>>, ProposeError>, tokio::task::JoinError>) {
        match done {
            Ok(Ok(_)) => {}
            // Lost the lead, or the outcome is unknown: the replicated log decides what happened,
            // and the leadership watch tells the loop if this replica no longer leads.
            Ok(Err(error)) => tracing::warn!(role = self.name, %error, "a proposal did not complete"),
            Err(error) => tracing::warn!(role = self.name, %error, "a proposal's task failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use specie_role::{Role, Ticket};

    use super::*;
    use crate::test_role::Counter;

    /// Raft may install a leader's snapshot before the host's task sees the lead go: the role
    /// must follow before its state is replaced, and take no input after.
    #[test]
    fn a_snapshot_installed_under_a_leading_role_makes_it_follow_first() {
        let mut machine = RoleMachine::new(Counter::default());
        machine.lead(0, Proposer { term: 1, node: 1 });
        machine.restore(&7u64.to_le_bytes()).unwrap();
        assert!(!machine.leads() && !machine.role.leading);
        assert_eq!(machine.role.total, 7);
        machine.lead(1, Proposer { term: 3, node: 1 });
        assert!(machine.role.leading, "it leads again once the host says so");
    }

    /// Raft may apply a new leader's entries on a replica whose host still has its role leading:
    /// the role follows first (a leading Counter would take the entry for its own proposal and
    /// find no caller to answer), and its own entries it applies as leader.
    #[test]
    fn another_leaders_entry_makes_a_leading_role_follow_before_applying_it() {
        let mine = Proposer { term: 2, node: 1 };
        let mut machine = RoleMachine::new(Counter::default());
        machine.lead(0, mine);
        machine.role.handle(0, (Ticket::default(), 5));
        machine.apply(mine, &5u64.to_le_bytes());
        assert!(machine.leads(), "its own entry");
        machine.apply(Proposer { term: 2, node: 3 }, &4u64.to_le_bytes());
        assert!(!machine.leads() && !machine.role.leading);
        assert_eq!(machine.role.total, 9);
    }

    #[test]
    fn followers_of_a_group_snapshot_at_different_intervals_and_the_leader_least_often() {
        let plan = SnapshotPlan::every(1000);
        let followers: Vec<u64> = (1..=3).map(|replica| plan.entries(false, replica)).collect();
        assert_eq!(followers, [1250, 1500, 1750]);
        assert!((1..=3).all(|replica| plan.entries(true, replica) == 4000));
    }

    #[tokio::test]
    async fn a_gather_answers_once_every_slot_is_filled_in_call_order() {
        let (slots, answer) = Gather::slots(3);
        let mut slots = slots.into_iter();
        let (first, second, third) = (slots.next().unwrap(), slots.next().unwrap(), slots.next().unwrap());
        third.fill("c");
        first.fill("a");
        second.fill("b");
        assert_eq!(answer.replies().await, Ok(vec!["a", "b", "c"]));
    }

    #[tokio::test]
    async fn a_slot_dropped_unfilled_leaves_the_outcome_unknown() {
        let (slots, answer) = Gather::slots(2);
        let mut slots = slots.into_iter();
        slots.next().unwrap().fill(1);
        drop(slots);
        assert_eq!(answer.replies().await, Err(CallError::Unknown));
    }

    #[tokio::test]
    async fn one_refused_slot_answers_not_leader_at_once() {
        let (slots, answer) = Gather::<u8>::slots(2);
        let mut slots = slots.into_iter();
        let kept = slots.next().unwrap();
        slots.next().unwrap().not_leading(Some(3));
        assert_eq!(answer.replies().await, Err(CallError::NotLeader { leader: Some(3) }));
        // The other slot may still be filled; no one listens any more.
        kept.fill(7);
    }
}
