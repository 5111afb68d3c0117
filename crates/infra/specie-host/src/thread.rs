//! A role on the embedded host, on a thread of its own, for callers that are not its peers: a
//! service's HTTP handlers (async) and demos (blocking). A call is a function from the ticket the
//! host gives it to the role's input; its reply comes back on a one-shot channel. Calls handed
//! over together are taken in one turn of the host, so a role that batches its work (signature
//! checks, one fsync per turn) sees them as one batch.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::Sender;
use specie_log::LogOptions;
use specie_role::{Durable, Ticket};

use crate::embedded::{EmbeddedHost, HostMessage, RecoverError, Wiring};

/// One call: the role's input, once the host gives it a ticket.
pub type RoleCall<R> = Box<dyn FnOnce(Ticket) -> <R as specie_role::Role>::Input + Send>;
type ReplyTo<R> = tokio::sync::oneshot::Sender<<R as specie_role::Role>::Reply>;

/// Replies to whoever waits; reports to the given function; a role on a thread has no peers.
struct ThreadWiring<R: Durable> {
    report: Box<dyn FnMut(R::Report) + Send>,
}

impl<R> Wiring<R> for ThreadWiring<R>
where
    R: Durable<Peer = std::convert::Infallible, Message = std::convert::Infallible>,
    R::Reply: Send,
{
    type Call = RoleCall<R>;
    type ReplyTo = ReplyTo<R>;

    fn input(call: RoleCall<R>, ticket: Ticket) -> R::Input {
        call(ticket)
    }

    fn send(&mut self, to: std::convert::Infallible, _message: std::convert::Infallible) {
        match to {}
    }

    fn reply(&mut self, reply_to: ReplyTo<R>, reply: R::Reply) {
        // A caller that went away (its connection closed) needs no answer.
        let _ = reply_to.send(reply);
    }

    fn report(&mut self, report: R::Report) {
        (self.report)(report);
    }
}

/// Why a role's thread could not start.
#[derive(Debug, thiserror::Error)]
pub enum RoleThreadError<E: std::error::Error + 'static> {
    #[error(transparent)]
    Recover(#[from] Box<RecoverError<E>>),
    #[error("cannot start the {name} thread: {source}")]
    Spawn { name: String, source: std::io::Error },
}

/// The running role: hand it calls; stop it.
pub struct RoleThread<R: Durable> {
    calls: Sender<HostMessage<RoleCall<R>, ReplyTo<R>>>,
    thread: Arc<Mutex<Option<JoinHandle<R>>>>,
}

impl<R: Durable> Clone for RoleThread<R> {
    fn clone(&self) -> Self {
        RoleThread {
            calls: self.calls.clone(),
            thread: self.thread.clone(),
        }
    }
}

impl<R> RoleThread<R>
where
    R: Durable<Peer = std::convert::Infallible, Message = std::convert::Infallible> + Send + 'static,
    R::Input: 'static,
    R::Reply: Send + 'static,
    R::Report: 'static,
{
    /// Recovers `role` (in its initial state) from the log in `log_dir` and runs it on a thread
    /// named `name`.
    pub fn start(
        name: &str,
        role: R,
        log_dir: &Path,
        options: LogOptions,
        snapshot_log_bytes: u64,
        report: impl FnMut(R::Report) + Send + 'static,
    ) -> Result<RoleThread<R>, RoleThreadError<R::StateError>> {
        let wiring = ThreadWiring {
            report: Box::new(report),
        };
        let host = EmbeddedHost::recover(name, role, wiring, log_dir, options, snapshot_log_bytes)
            .map_err(|error| RoleThreadError::Recover(Box::new(error)))?;
        let (calls, received) = crossbeam_channel::unbounded();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || host.run(received, crossbeam_channel::never()))
            .map_err(|source| RoleThreadError::Spawn {
                name: name.into(),
                source,
            })?;
        Ok(RoleThread {
            calls,
            thread: Arc::new(Mutex::new(Some(thread))),
        })
    }

    /// The role's answer to `input`, once it is durable; none if the role stopped.
    pub async fn call(&self, input: impl FnOnce(Ticket) -> R::Input + Send + 'static) -> Option<R::Reply> {
        let (reply_to, reply) = tokio::sync::oneshot::channel();
        let call: RoleCall<R> = Box::new(input);
        self.calls.send(HostMessage::Calls(vec![(call, reply_to)])).ok()?;
        reply.await.ok()
    }

    /// The answers to `calls`, handed over together so the host takes them in one turn, waited
    /// for on this thread (not from an async task). `None` where the role stopped first.
    pub fn call_together(&self, calls: Vec<RoleCall<R>>) -> Vec<Option<R::Reply>> {
        let (batch, replies): (Vec<_>, Vec<_>) = calls
            .into_iter()
            .map(|call| {
                let (reply_to, reply) = tokio::sync::oneshot::channel();
                ((call, reply_to), reply)
            })
            .unzip();
        if self.calls.send(HostMessage::Calls(batch)).is_err() {
            return replies.iter().map(|_| None).collect();
        }
        replies.into_iter().map(|reply| reply.blocking_recv().ok()).collect()
    }

    /// [`RoleThread::call_together`] of one call.
    pub fn call_blocking(&self, input: impl FnOnce(Ticket) -> R::Input + Send + 'static) -> Option<R::Reply> {
        self.call_together(vec![Box::new(input)]).pop().flatten()
    }

    /// Finishes the turn in progress and stops the thread; the role as it stopped, the first
    /// time (for an audit of its final state).
    pub fn stop(&self) -> Option<R> {
        let _ = self.calls.send(HostMessage::Stop);
        let thread = self.thread.lock().ok().and_then(|mut thread| thread.take())?;
        thread.join().ok()
    }
}
