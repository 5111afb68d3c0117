//! `specie cluster restart`: every process of a cluster stopped and started again, one at a
//! time, each ready (`/readyz`) before the next stops. It is how a cluster takes a new build
//! while it serves: install the build, run `cluster restart` with it, and every process comes
//! back as that build (`spawn_member` starts the running program). No group ever misses more than
//! one replica, and a replica that leads goes last in its group, so each group holds a majority
//! and elects at most once. Two builds meet on the wire while it runs: they agree on a protocol
//! version in the handshake, or refuse each other naming both (`specie_wire::version`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use specie_service::health::{probe, Probe};

use crate::identity::Identity;
use crate::supervisor::{self, died_at_start, is_alive, read_pid, Member, SupervisorError};
use crate::topology::Topology;

/// How long a restarted process has to be ready again.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a restart that is about to begin waits for processes that are not ready.
const NOT_READY_WAIT: Duration = Duration::from_secs(5);
/// How long one `/readyz` may take to answer.
const PROBE_TIMEOUT: Duration = Duration::from_millis(1000);
const PROBE_PAUSE: Duration = Duration::from_millis(100);

/// Restarts the cluster's processes (or only `only`) one at a time, as the running program,
/// each ready before the next stops. Refuses to begin while another process is not ready:
/// stopping a replica beside one that is down could leave its group without a majority.
/// Returns how many processes it restarted.
pub fn restart(dir: &Path, only: Option<&str>) -> Result<usize, SupervisorError> {
    let (path, topology) = supervisor::load(dir)?;
    // One change at a time: a second restart, a backup or a membership change beside this one
    // could stop a second replica of a group.
    let _change = crate::membership::change_lock(dir)?;
    let everyone = supervisor::members(&path, &topology);
    if let Some(name) = only {
        if !everyone.iter().any(|m| m.name == name) {
            let names: Vec<&str> = everyone.iter().map(|m| m.name.as_str()).collect();
            return Err(SupervisorError::UnknownMember {
                name: name.to_string(),
                names: names.join(", "),
            });
        }
    }
    let addresses = readiness_addresses(&topology);
    let others: Vec<&Member> = everyone.iter().filter(|m| Some(m.name.as_str()) != only).collect();
    wait_until_ready(&addresses, &others, 0, NOT_READY_WAIT)?;
    let order = restart_order(&topology, everyone.clone())?;
    let chosen: Vec<&Member> = order
        .iter()
        .filter(|m| only.is_none_or(|name| name == m.name))
        .collect();
    // A member that died here has its pid file still, and is started again.
    let elsewhere: Vec<String> = (chosen.iter())
        .filter(|m| read_pid(dir, &m.name).is_none())
        .map(|m| m.name.clone())
        .collect();
    if !elsewhere.is_empty() {
        return Err(SupervisorError::NotStartedHere {
            names: elsewhere,
            dir: dir.to_path_buf(),
        });
    }
    let stop = stop_requested();
    let mut restarted = 0;
    for member in chosen {
        if stop.load(Ordering::Relaxed) {
            return Err(SupervisorError::Interrupted {
                what: format!(
                    "the restart, after {restarted} processes (each ready again); the others run as they were"
                ),
            });
        }
        // Its group's other replicas are ready now, not only when the restart began (one just
        // restarted may be applying what it missed).
        let group = group_of(member);
        let siblings: Vec<&Member> = (everyone.iter())
            .filter(|m| m.name != member.name && group.is_some() && group_of(m) == group)
            .collect();
        wait_until_ready(&addresses, &siblings, restarted, READY_TIMEOUT)?;
        let started = Instant::now();
        supervisor::stop(dir, std::slice::from_ref(member));
        let pid = supervisor::spawn_member(dir, member)?;
        wait_ready(dir, member, &addresses, pid)?;
        println!(
            "{:<28} restarted (pid {pid}), ready again in {:.1} s",
            member.name,
            started.elapsed().as_secs_f64()
        );
        restarted += 1;
    }
    Ok(restarted)
}

/// The replica group `member` belongs to; `None` for a sentinel.
fn group_of(member: &Member) -> Option<&str> {
    match &member.identity {
        Identity::Replica { group, .. } => Some(group),
        _ => None,
    }
}

/// Waits until every one of `members` answers `/readyz` with 200 (a replica that just came back
/// may fall behind for a moment while it applies what it missed); refuses, naming each that is
/// not, after `wait`.
fn wait_until_ready(
    addresses: &BTreeMap<String, SocketAddr>,
    members: &[&Member],
    restarted: usize,
    wait: Duration,
) -> Result<(), SupervisorError> {
    let started = Instant::now();
    loop {
        let not_ready: Vec<String> = (members.iter())
            .filter_map(|m| match readiness(addresses, &m.name) {
                Probe::Ready => None,
                Probe::NotReady(why) | Probe::Unreachable(why) => Some(format!("{}: {why}", m.name)),
            })
            .collect();
        if not_ready.is_empty() {
            return Ok(());
        }
        if started.elapsed() >= wait {
            return Err(SupervisorError::NotWhole { not_ready, restarted });
        }
        std::thread::sleep(PROBE_PAUSE);
    }
}

/// Set once Ctrl-C or SIGTERM arrives, which from now on no longer end this process: a member
/// stopped for a restart is always started again before the caller looks at the flag.
pub(crate) fn stop_requested() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    let (registered, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
            return;
        };
        runtime.block_on(async {
            let stopped = crate::host::wait_for_stop_signal();
            tokio::pin!(stopped);
            // Polled once, its handlers are in place.
            let already = tokio::select! {
                biased;
                () = &mut stopped => true,
                () = std::future::ready(()) => false,
            };
            let _ = registered.send(());
            if !already {
                stopped.await;
            }
        });
        set.store(true, Ordering::Relaxed);
    });
    let _ = wait.recv_timeout(Duration::from_secs(1));
    flag
}

/// Where each member answers `/readyz`, by member name.
pub(crate) fn readiness_addresses(topology: &Topology) -> BTreeMap<String, SocketAddr> {
    (topology.scrape_targets().into_iter())
        .map(|target| {
            let name = match target.replica.is_empty() {
                true => target.group,
                false => format!("{}-{}", target.group, target.replica),
            };
            (name, target.address)
        })
        .collect()
}

pub(crate) fn readiness(addresses: &BTreeMap<String, SocketAddr>, name: &str) -> Probe {
    match addresses.get(name) {
        Some(address) => probe(*address, PROBE_TIMEOUT),
        None => Probe::Unreachable(
            "the cluster file gives it no HTTP address (add `metrics = \"IP:PORT\"` to its entry)".to_string(),
        ),
    }
}

/// Every member, each group's replicas together with its leader last, the sentinels after every
/// group.
fn restart_order(topology: &Topology, everyone: Vec<Member>) -> Result<Vec<Member>, SupervisorError> {
    let statuses = supervisor::replica_statuses(topology)?;
    let leads = |member: &Member| match &member.identity {
        Identity::Replica { group, id, .. } => statuses
            .iter()
            .any(|s| &s.group == group && s.id == *id && s.is_leader()),
        _ => false,
    };
    let mut order = everyone;
    // Group by group (by name), followers before the leader; sentinels (no group) last.
    order.sort_by_key(|member| {
        (
            group_of(member).is_none(),
            group_of(member).map(str::to_string),
            leads(member),
        )
    });
    Ok(order)
}

/// Waits until `member`, just started as `pid`, answers `/readyz` with 200.
pub(crate) fn wait_ready(
    dir: &Path,
    member: &Member,
    addresses: &BTreeMap<String, SocketAddr>,
    pid: u32,
) -> Result<(), SupervisorError> {
    let started = Instant::now();
    loop {
        let answer = readiness(addresses, &member.name);
        if answer == Probe::Ready {
            return Ok(());
        }
        if !is_alive(pid) {
            return Err(died_at_start(dir, &member.name));
        }
        if started.elapsed() > READY_TIMEOUT {
            let (Probe::NotReady(last) | Probe::Unreachable(last)) = answer else {
                unreachable!("ready returned above")
            };
            return Err(SupervisorError::NotReadyAgain {
                name: member.name.clone(),
                waited_s: READY_TIMEOUT.as_secs(),
                last,
                log: dir.join("logs").join(format!("{}.log", member.name)),
            });
        }
        std::thread::sleep(PROBE_PAUSE);
    }
}
