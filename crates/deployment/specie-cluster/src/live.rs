//! The cluster file as a running process follows it. A membership change (`specie cluster
//! add-replica`, `remove-replica`, `replace-replica`) rewrites the file, and every process of the
//! cluster re-reads it within [`RELOAD_CHECK_MS`]: who is a member (admission, authorisation),
//! where each replica listens (Raft peers, group clients). Likewise the FastPay committee's records
//! of later epochs (`specie cluster rotate-authority`): sentinels check redeems of the new epoch.
//! Only the groups' replica lists, the retired identities and the committee records are taken
//! from a re-read file; anything else changed in it takes effect when
//! the process restarts, and a warning says so.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::watch;

use crate::topology::Topology;

/// How often a process looks at its cluster file for a membership change.
pub const RELOAD_CHECK_MS: u64 = 250;

struct Live {
    topology: watch::Receiver<Arc<Topology>>,
    /// Bumped at each membership change taken from the file.
    generation: AtomicU64,
}

static LIVE: OnceLock<Live> = OnceLock::new();

/// Makes this process follow the cluster file at `path`, of which `topology` is the content it
/// started with. Call once, within a tokio runtime; later calls change nothing.
pub fn follow(path: PathBuf, topology: &Topology) {
    let (sender, receiver) = watch::channel(Arc::new(topology.clone()));
    let live = Live {
        topology: receiver,
        generation: AtomicU64::new(0),
    };
    if LIVE.set(live).is_err() {
        return;
    }
    tokio::spawn(async move {
        let mut last = std::fs::read(&path).ok();
        loop {
            tokio::time::sleep(Duration::from_millis(RELOAD_CHECK_MS)).await;
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            if last.as_ref() == Some(&bytes) {
                continue;
            }
            last = Some(bytes);
            let read = match Topology::load(&path) {
                Ok(read) => read,
                Err(error) => {
                    tracing::warn!(%error, "the cluster file changed but does not load; keeping the membership as it was");
                    continue;
                }
            };
            let now = sender.borrow().clone();
            let merged = now.with_membership_of(&read);
            if merged != read {
                tracing::warn!(
                    path = %path.display(),
                    "the cluster file changed beyond group membership; those changes take effect when this process restarts"
                );
            }
            if merged != *now {
                tracing::info!(path = %path.display(), "group membership changed in the cluster file");
                sender.send_replace(Arc::new(merged));
                if let Some(live) = LIVE.get() {
                    live.generation.fetch_add(1, Ordering::Release);
                }
            }
        }
    });
}

/// The topology as this process now knows it: the followed file's membership, or `started`
/// (what the caller was given) in a process that follows no file (tests, operator tools).
pub fn current(started: &Arc<Topology>) -> Arc<Topology> {
    followed().unwrap_or_else(|| started.clone())
}

/// The followed file's topology, if this process follows one.
pub fn followed() -> Option<Arc<Topology>> {
    LIVE.get().map(|live| live.topology.borrow().clone())
}

/// Every change this process takes from its cluster file, as it happens (none: it follows no
/// file).
pub fn subscribe() -> Option<watch::Receiver<Arc<Topology>>> {
    LIVE.get().map(|live| live.topology.clone())
}

/// Changes at each membership change this process takes from its cluster file.
pub fn generation() -> u64 {
    LIVE.get().map_or(0, |live| live.generation.load(Ordering::Acquire))
}
