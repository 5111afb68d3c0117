//! The embedded host: one role on one thread over the local durable log.
//!
//! The loop, for any role: take every call and input at hand (bounded per turn), hand the
//! role's outputs on through the [`Wiring`], make a round's proposals durable with one append
//! and one fsync, apply them, and repeat until a round proposes nothing; then sleep until the
//! next call, input or the role's own deadline. A command is durable before it is applied, so
//! after `kill -9` the same log replays into the same state.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver};
use specie_log::{Log, LogError, LogOptions};
use specie_role::{Durable, Round, Ticket};

/// How long the host sleeps when neither a call, an input nor a deadline is due (any of them
/// wakes it at once; this only bounds how long a lost wake-up could go unnoticed).
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// Most channel messages one turn takes, so outputs keep flowing under load.
const MESSAGES_PER_TURN_MAX: usize = 256;

/// What a deployment plugs into the host for role `R`: how callers' requests become inputs, and
/// where sends, replies and reports go.
pub trait Wiring<R: Durable> {
    /// A caller's request, before the host gives it a ticket.
    type Call: Send;
    /// Who waits for the reply to a call.
    type ReplyTo: Send;

    /// The role's input for `call`, whose reply will carry `ticket`.
    fn input(call: Self::Call, ticket: Ticket) -> R::Input;
    fn send(&mut self, to: R::Peer, message: R::Message);
    fn reply(&mut self, reply_to: Self::ReplyTo, reply: R::Reply);
    fn report(&mut self, report: R::Report);
    /// The end of a round: hand on whatever `send` and `reply` batched.
    fn flush(&mut self) {}
    /// After each turn of an embedded host, on the role's own thread: read what the host's
    /// owner shows of the role's state (its metrics' gauges). Keep it quick.
    fn observe(&mut self, _role: &R) {}
}

/// The callers a host's role has not answered yet, by ticket. Ordered, so that callers left
/// unanswered together (the lead lost) are told in call order: a hash order would make the
/// simulator's runs differ.
pub(crate) struct Callers<T> {
    waiting: BTreeMap<Ticket, T>,
    next_ticket: Ticket,
}

impl<T> Callers<T> {
    pub(crate) fn new() -> Callers<T> {
        Callers {
            waiting: BTreeMap::new(),
            next_ticket: 0,
        }
    }

    /// The ticket the role's reply to this caller will carry.
    pub(crate) fn admit(&mut self, reply_to: T) -> Ticket {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.waiting.insert(ticket, reply_to);
        ticket
    }

    /// Forgets every caller: dropping their reply-to tells them no answer is coming.
    pub(crate) fn clear(&mut self) {
        self.waiting.clear();
    }
}

/// Hands a round's sends, replies and reports on through the wiring; returns its proposals,
/// which are the host's to make durable.
pub(crate) fn hand_on<R: Durable, W: Wiring<R>>(
    wiring: &mut W,
    callers: &mut Callers<W::ReplyTo>,
    round: Round<R>,
) -> Vec<R::Command> {
    for (to, message) in round.sends {
        wiring.send(to, message);
    }
    for (ticket, reply) in round.replies {
        // A ticket no one waits for was answered already: the role answers each once.
        if let Some(reply_to) = callers.waiting.remove(&ticket) {
            wiring.reply(reply_to, reply);
        }
    }
    for report in round.reports {
        wiring.report(report);
    }
    wiring.flush();
    round.proposals
}

/// What callers put on a host's call channel.
pub enum HostMessage<C, T> {
    /// Requests, each with whoever waits for its reply.
    Calls(Vec<(C, T)>),
    /// Finish the current turn and return.
    Stop,
}

/// Why a role could not be brought back from its log.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError<E: std::error::Error + 'static> {
    #[error("{role}: cannot open its log: {source}")]
    Log { role: String, source: LogError },
    #[error("{role}: the snapshot is refused: {source}")]
    Snapshot { role: String, source: E },
    #[error("{role}: log record {index} is refused: {source}")]
    Record { role: String, index: u64, source: E },
    #[error("{role}: the recovered state is inconsistent: {source}")]
    Inconsistent { role: String, source: E },
}

/// One role, its log and its wiring.
pub struct EmbeddedHost<R: Durable, W: Wiring<R>> {
    name: String,
    role: R,
    wiring: W,
    log: Log,
    snapshot_log_bytes: u64,
    callers: Callers<W::ReplyTo>,
    epoch: Instant,
}

impl<R: Durable, W: Wiring<R>> EmbeddedHost<R, W> {
    /// Opens the log in `dir`, restores `role` (given following, in its initial state) from the
    /// snapshot and the records after it, checks its invariants and makes it lead.
    pub fn recover(
        name: impl Into<String>,
        mut role: R,
        wiring: W,
        dir: &Path,
        options: LogOptions,
        snapshot_log_bytes: u64,
    ) -> Result<Self, RecoverError<R::StateError>> {
        let name = name.into();
        let epoch = Instant::now();
        let (log, recovered) = Log::open(dir, options).map_err(|source| RecoverError::Log {
            role: name.clone(),
            source,
        })?;
        if let Some(snapshot) = &recovered.snapshot {
            role.restore(&snapshot.bytes).map_err(|source| RecoverError::Snapshot {
                role: name.clone(),
                source,
            })?;
        }
        for (index, bytes) in &recovered.records {
            let command = role.decode_command(bytes).map_err(|source| RecoverError::Record {
                role: name.clone(),
                index: *index,
                source,
            })?;
            role.apply(0, &command);
        }
        role.check_invariants().map_err(|source| RecoverError::Inconsistent {
            role: name.clone(),
            source,
        })?;
        if recovered.truncated_tail_bytes > 0 {
            tracing::warn!(
                role = name,
                bytes = recovered.truncated_tail_bytes,
                "dropped a torn, unacknowledged log tail"
            );
        }
        role.lead(0);
        Ok(EmbeddedHost {
            name,
            role,
            wiring,
            log,
            snapshot_log_bytes,
            callers: Callers::new(),
            epoch,
        })
    }

    pub fn role(&self) -> &R {
        &self.role
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Runs the role until [`HostMessage::Stop`] or until every caller and peer is gone, and
    /// returns it (for an audit of its final state). `calls` carries callers' requests; `inputs`
    /// carries peers' messages that need no reply.
    pub fn run(mut self, calls: Receiver<HostMessage<W::Call, W::ReplyTo>>, inputs: Receiver<Vec<R::Input>>) -> R {
        // Whatever the role resumed on taking the lead (re-sent phases, say) goes out first.
        self.settle();
        while !self.turn(&calls, &inputs, IDLE_WAIT) {}
        self.role
    }

    /// Drives the role on peers' messages alone, with no caller admitted, until `done` holds of it
    /// or `limit_ms` passes; true if it holds. A node finishes what its recovery resumed this way
    /// before it serves anyone, so nothing it answers can change under a reader's feet.
    pub fn run_inputs_until(
        &mut self,
        inputs: &Receiver<Vec<R::Input>>,
        done: impl Fn(&R) -> bool,
        limit_ms: u64,
    ) -> bool {
        let deadline = Instant::now() + Duration::from_millis(limit_ms);
        self.settle();
        while !done(&self.role) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.turn(&crossbeam_channel::never(), inputs, left) {
                return false;
            }
        }
        true
    }

    /// One turn: due timeouts, then whatever arrives within `wait_max` (at most until the role's
    /// next deadline), then the outputs. True once told to stop or every caller and peer is gone.
    fn turn(
        &mut self,
        calls: &Receiver<HostMessage<W::Call, W::ReplyTo>>,
        inputs: &Receiver<Vec<R::Input>>,
        wait_max: Duration,
    ) -> bool {
        let now = self.now_ms();
        if self.role.poll_timeout().is_some_and(|deadline| deadline <= now) {
            self.role.handle_timeout(now);
            self.settle();
        }
        let wait = self.role.poll_timeout().map_or(wait_max, |deadline| {
            Duration::from_millis(deadline.saturating_sub(self.now_ms())).min(wait_max)
        });
        let mut stop = false;
        select! {
            recv(inputs) -> message => match message {
                Ok(batch) => self.take_inputs(batch),
                Err(_) => stop = true,
            },
            recv(calls) -> message => stop |= !self.take_message(message.ok()),
            default(wait) => {}
        }
        for batch in inputs.try_iter().take(MESSAGES_PER_TURN_MAX) {
            self.take_inputs(batch);
        }
        for message in calls.try_iter().take(MESSAGES_PER_TURN_MAX) {
            stop |= !self.take_message(Some(message));
        }
        self.settle();
        self.wiring.observe(&self.role);
        stop
    }

    fn take_inputs(&mut self, batch: Vec<R::Input>) {
        let now = self.now_ms();
        for input in batch {
            self.role.handle(now, input);
        }
    }

    /// Hands the calls to the role; false once told to stop (or every caller is gone).
    fn take_message(&mut self, message: Option<HostMessage<W::Call, W::ReplyTo>>) -> bool {
        let Some(HostMessage::Calls(calls)) = message else {
            return false;
        };
        let now = self.now_ms();
        for (call, reply_to) in calls {
            let ticket = self.callers.admit(reply_to);
            self.role.handle(now, W::input(call, ticket));
        }
        true
    }

    /// Empties the role's outputs: sends and replies through the wiring, proposals to the log
    /// (one append and one fsync per round) and back into the role, until nothing is proposed.
    fn settle(&mut self) {
        loop {
            let proposals = hand_on(&mut self.wiring, &mut self.callers, Round::take(&mut self.role));
            if proposals.is_empty() {
                return;
            }
            let records: Vec<Vec<u8>> = proposals.iter().map(R::encode_command).collect();
            for chunk in records.chunks(LogOptions::default().batch_records_max) {
                if let Err(error) = self.log.append_batch(chunk) {
                    fatal(&format!("{}: cannot make its commands durable: {error}", self.name));
                }
            }
            let now = self.now_ms();
            for command in &proposals {
                self.role.apply(now, command);
            }
            if self.log.bytes_since_snapshot() > self.snapshot_log_bytes {
                let last_index = self.log.last_index();
                if let Err(error) = self.log.install_snapshot(last_index, &self.role.snapshot()) {
                    fatal(&format!("{}: cannot write its snapshot: {error}", self.name));
                }
            }
        }
    }
}

/// Runs `host` on a thread of its own, makes `calls` one at a time (each answered, through the
/// wiring's `replies`, before the next is made, so each sees the one before made durable), then
/// stops it with no snapshot or farewell: what a restart then finds is only what the log has, as
/// after `kill -9`. The replies, in order. For tests of a role's durability.
pub fn call_in_turn<R, W>(host: EmbeddedHost<R, W>, calls: Vec<W::Call>, replies: &Receiver<R::Reply>) -> Vec<R::Reply>
where
    R: Durable + Send + 'static,
    W: Wiring<R, ReplyTo = ()> + Send + 'static,
{
    let (calls_tx, calls_rx) = crossbeam_channel::unbounded();
    let thread = std::thread::spawn(move || host.run(calls_rx, crossbeam_channel::never()));
    let answered = calls
        .into_iter()
        .map(|call| {
            calls_tx
                .send(HostMessage::Calls(vec![(call, ())]))
                .expect("the host runs");
            replies.recv().expect("the host answers")
        })
        .collect();
    calls_tx.send(HostMessage::Stop).expect("the host runs");
    thread.join().expect("the host stops");
    answered
}

/// A role that cannot make its state durable must not answer anyone: it stops the process, and
/// recovery replays what did reach the disk. Answering after a failed fsync could report a
/// transaction confirmed that a restart would forget.
fn fatal(message: &str) -> ! {
    tracing::error!("{message}");
    eprintln!("fatal: {message}");
    std::process::exit(70);
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;
    use crate::test_role::Counter;

    struct Replies(crossbeam_channel::Sender<u64>);

    impl Wiring<Counter> for Replies {
        type Call = u64;
        type ReplyTo = ();
        fn input(amount: u64, ticket: Ticket) -> (Ticket, u64) {
            (ticket, amount)
        }
        fn send(&mut self, to: Infallible, _message: Infallible) {
            match to {}
        }
        fn reply(&mut self, (): (), total: u64) {
            self.0.send(total).unwrap();
        }
        fn report(&mut self, report: Infallible) {
            match report {}
        }
    }

    /// Runs a host over `dir`, makes the calls, and returns the replies in order.
    fn run_calls(dir: &Path, snapshot_log_bytes: u64, amounts: &[u64]) -> Vec<u64> {
        let (replies_tx, replies) = crossbeam_channel::unbounded();
        let host = EmbeddedHost::recover(
            "counter",
            Counter::default(),
            Replies(replies_tx),
            dir,
            LogOptions::default(),
            snapshot_log_bytes,
        )
        .unwrap();
        call_in_turn(host, amounts.to_vec(), &replies)
    }

    #[test]
    fn replies_follow_durable_commands_and_a_restart_replays_them() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(run_calls(dir.path(), u64::MAX, &[1, 2, 3]), [1, 3, 6]);
        assert_eq!(
            run_calls(dir.path(), u64::MAX, &[4]),
            [10],
            "the log replays into the same total"
        );
    }

    #[test]
    fn a_restart_restores_from_the_snapshot_and_the_records_after_it() {
        let dir = tempfile::tempdir().unwrap();
        // A snapshot after every round.
        assert_eq!(run_calls(dir.path(), 0, &[5, 6]), [5, 11]);
        assert_eq!(run_calls(dir.path(), u64::MAX, &[1]), [12]);
        assert_eq!(run_calls(dir.path(), 0, &[1]), [13]);
    }

    #[test]
    fn run_inputs_until_drives_peer_messages_to_the_condition_and_gives_up_at_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let (replies_tx, replies) = crossbeam_channel::unbounded();
        let mut host = EmbeddedHost::recover(
            "counter",
            Counter::default(),
            Replies(replies_tx),
            dir.path(),
            LogOptions::default(),
            u64::MAX,
        )
        .unwrap();
        let (inputs_tx, inputs) = crossbeam_channel::unbounded();
        // Ticket 9 was admitted by no caller: its reply goes nowhere.
        inputs_tx.send(vec![(9, 4), (9, 3)]).unwrap();
        assert!(host.run_inputs_until(&inputs, |c| c.total == 7, 10_000));
        assert!(
            replies.try_recv().is_err(),
            "no caller was admitted, so no one is answered"
        );
        assert!(
            !host.run_inputs_until(&inputs, |c| c.total == 8, 50),
            "nothing more arrives"
        );
        drop(inputs_tx);
        assert!(
            !host.run_inputs_until(&inputs, |c| c.total == 8, 10_000),
            "every peer is gone"
        );
        assert_eq!(
            run_calls(dir.path(), u64::MAX, &[1]),
            [8],
            "what it applied was made durable"
        );
    }

    #[test]
    fn a_record_that_does_not_decode_stops_recovery_with_its_index() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = Log::open(dir.path(), LogOptions::default()).unwrap();
        log.append_batch(&[7u64.to_le_bytes().to_vec(), vec![1, 2, 3]]).unwrap();
        drop(log);
        let (replies_tx, _replies) = crossbeam_channel::unbounded();
        let refused = EmbeddedHost::recover(
            "counter",
            Counter::default(),
            Replies(replies_tx),
            dir.path(),
            LogOptions::default(),
            0,
        );
        assert!(
            matches!(refused, Err(RecoverError::Record { index: 2, .. })),
            "{:?}",
            refused.err()
        );
    }
}
