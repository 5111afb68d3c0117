//! `specie cluster add-replica | remove-replica | replace-replica`: a running group's replicas
//! changed one at a time (docs/operator-guide.md, "Changing a group's replicas").
//!
//! A replica is added as etcd adds a member: under a new id (never one the group had), with a
//! certificate from the cluster's CA, in the cluster file (every process follows it, see
//! [`crate::live`]), started in a directory prepared to join, added to the group as a learner,
//! and promoted to voter only once it has caught up. A replica is removed by the group first
//! (the leader commits the new membership; a leader removing itself steps down), then stopped,
//! and its id retired in the file. A replacement is both, the new replica first, so the group
//! never runs with fewer voters than it had. A replica whose directory was lost is never started
//! again under its id (`specie_raft::Start::Prepared` refuses it): it is replaced.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use specie_log::DirLock;
use specie_log::SyncMode;
use specie_raft::Origin;
use specie_wire::WireError;

use crate::group_client::{GroupClient, ReplicaCallError};
use crate::host::{replica_dir, wire_limits};
use crate::identity::{GroupRole, Identity};
use crate::live::RELOAD_CHECK_MS;
use crate::operator::{self, ReplicaStatus};
use crate::protocol::{MembershipChange, RoleRequest, RoleResponse};
use crate::supervisor::{self, io, Member, SupervisorError};
use crate::topology::{AuthorityReplica, Replica, Topology};

/// Prints a step of a change, never failing it: a closed stdout (`… | head`) must not stop a
/// change half done (a learner left unpromoted), so what cannot be printed is dropped.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// How long a new replica has to catch up with its group before it is promoted.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long one step (a call to the group's leader) may take, leader search included.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// The most replicas a group may have (the topology's limit).
const GROUP_REPLICAS_MAX: usize = 7;

/// `specie cluster add-replica`: a new replica of `group` on this host, caught up and voting.
/// Returns its id.
pub fn add_replica(dir: &Path, group: &str) -> Result<u64, SupervisorError> {
    let _change = change_lock(dir)?;
    add(dir, group)
}

/// `specie cluster remove-replica`: replica `id` out of `group` for good.
pub fn remove_replica(dir: &Path, group: &str, id: u64) -> Result<(), SupervisorError> {
    let _change = change_lock(dir)?;
    remove(dir, group, id)
}

/// `specie cluster replace-replica`: a new replica of `group` added, caught up and voting, then
/// replica `id` removed (it may be dead, or its directory lost). Returns the new replica's id.
pub fn replace_replica(dir: &Path, group: &str, id: u64) -> Result<u64, SupervisorError> {
    let _change = change_lock(dir)?;
    let (_, topology) = supervisor::load(dir)?;
    let (_, replicas) = find_group(&topology, group)?;
    if !replicas.iter().any(|r| r.id == id) {
        return Err(no_such_replica(group, id, &replicas));
    }
    let new = add(dir, group)?;
    remove(dir, group, id)?;
    Ok(new)
}

/// Makes the directories of every group none of whose replicas has one yet: a new cluster's
/// founders. A group some of whose replicas have their directory is running, and a replica of it
/// without one lost it: that replica is left to be refused at start, and replaced.
pub(crate) fn prepare_founders(topology: &Topology) -> Result<(), SupervisorError> {
    for (_, group, replicas) in topology.replica_groups() {
        let ids: Vec<u64> = replicas.iter().map(|r| r.id).collect();
        if ids.iter().any(|id| replica_dir(topology, &group, *id).exists()) {
            continue;
        }
        for id in &ids {
            prepare_founder(topology, &group, &ids, *id).map_err(|error| SupervisorError::Membership {
                group: group.clone(),
                reason: format!(
                    "cannot prepare {}: {error}",
                    replica_dir(topology, &group, *id).display()
                ),
            })?;
        }
    }
    Ok(())
}

/// Makes replica `id`'s directory that of a founder of `group` with `ids`, unless it holds the
/// replica already (then nothing changes): `cluster up`'s founders, and with
/// `Topology::founding` each replica on its own host. True if it made the directory.
pub(crate) fn prepare_founder(
    topology: &Topology,
    group: &str,
    ids: &[u64],
    id: u64,
) -> Result<bool, specie_raft::PrepareError> {
    let origin = Origin::Founding(ids.iter().copied().collect());
    specie_raft::prepare(&replica_dir(topology, group, id), id, &origin, SyncMode::Fsync)
}

pub(crate) fn change_lock(dir: &Path) -> Result<DirLock, SupervisorError> {
    supervisor::load(dir)?;
    DirLock::acquire(&dir.join("membership-change"), 0).map_err(SupervisorError::ChangeRunning)
}

fn membership_error(group: &str, reason: impl Into<String>) -> SupervisorError {
    SupervisorError::Membership {
        group: group.to_string(),
        reason: reason.into(),
    }
}

fn no_such_replica(group: &str, id: u64, replicas: &[Replica]) -> SupervisorError {
    SupervisorError::NoSuchReplica {
        group: group.to_string(),
        id,
        ids: replicas.iter().map(|r| r.id).collect(),
    }
}

/// `group`'s role and replicas, or an error that lists the groups there are.
fn find_group(topology: &Topology, group: &str) -> Result<(GroupRole, Vec<Replica>), SupervisorError> {
    let groups = topology.replica_groups();
    match groups.iter().find(|(_, name, _)| name == group) {
        Some((role, _, replicas)) => Ok((*role, replicas.clone())),
        None => Err(SupervisorError::UnknownGroup {
            group: group.to_string(),
            groups: groups
                .iter()
                .map(|(_, name, _)| name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

fn add(dir: &Path, group: &str) -> Result<u64, SupervisorError> {
    let (path, mut topology) = supervisor::load(dir)?;
    let (role, replicas) = find_group(&topology, group)?;
    if replicas.len() >= GROUP_REPLICAS_MAX {
        return Err(membership_error(
            group,
            format!("it has {GROUP_REPLICAS_MAX} replicas, the most a group may have: remove one first"),
        ));
    }
    let statuses = group_statuses(&topology, group)?;
    let leader = leader_status(group, &statuses)?;
    if let Some(learner) = leader["membership"]["learners"].as_array().and_then(|l| l.first()) {
        return Err(membership_error(
            group,
            format!(
                "replica {learner} is still being added (a learner); finish that first: \
                 `specie cluster remove-replica --group {group} --replica {learner}` drops it"
            ),
        ));
    }
    let id = next_id(&topology, role, group, &replicas);
    let first = replicas.first().expect("a group has replicas");
    let with_metrics = first.metrics.is_some();
    let addresses = free_addresses(first.address.ip(), 2)?;
    list_replica(&mut topology, group, id, addresses, with_metrics);
    topology
        .validate()
        .map_err(|problem| membership_error(group, format!("the new replica makes the file invalid: {problem}")))?;
    write_topology(dir, &path, &topology)?;
    let identity = Identity::Replica {
        role,
        group: group.to_string(),
        id,
    };
    let rollback = |reason: String| -> SupervisorError {
        // The id was listed but never voted: retire it, so no later replica is confused with it.
        let undone = unlist(dir, group, id);
        let undone = undone.map_or_else(|e| format!(" (and undoing it failed: {e})"), |()| String::new());
        membership_error(group, format!("replica {id} was not added: {reason}{undone}"))
    };
    let replica_dir = replica_dir(&topology, group, id);
    if let Err(error) = specie_raft::prepare(&replica_dir, id, &Origin::Joining, SyncMode::Fsync) {
        return Err(rollback(format!("cannot prepare {}: {error}", replica_dir.display())));
    }
    let member = supervisor::members(&path, &topology)
        .into_iter()
        .find(|m| m.name == format!("{group}-{id}"))
        .expect("the member just listed");
    let pid = supervisor::spawn_member(dir, &member)?;
    say!("{group}: started replica {id} ({identity}, pid {pid}) as a learner; catching up…");
    // Every process re-reads the file within RELOAD_CHECK_MS; the leader must know where the
    // learner listens before it sends it the log (it would retry until then anyway).
    std::thread::sleep(Duration::from_millis(4 * RELOAD_CHECK_MS));
    if let Err(error) = step(&topology, group, MembershipChange::AddLearner(id)) {
        supervisor::stop(dir, std::slice::from_ref(&member));
        return Err(rollback(error.to_string()));
    }
    let started = Instant::now();
    loop {
        if !supervisor::is_alive(pid) {
            return Err(supervisor::died_at_start(dir, &member.name));
        }
        match step(&topology, group, MembershipChange::Promote(id)) {
            Ok(_) => break,
            Err(error) if started.elapsed() > CATCH_UP_TIMEOUT => {
                return Err(membership_error(
                    group,
                    format!(
                        "replica {id} did not catch up in {} s ({error}); it stays a learner: \
                         see {}/logs/{}.log, or drop it with `specie cluster remove-replica --group {group} --replica {id}`",
                        CATCH_UP_TIMEOUT.as_secs(),
                        dir.display(),
                        member.name
                    ),
                ))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
    say!(
        "{group}: replica {id} caught up and votes ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    Ok(id)
}

fn remove(dir: &Path, group: &str, id: u64) -> Result<(), SupervisorError> {
    let (_, topology) = supervisor::load(dir)?;
    let (role, replicas) = find_group(&topology, group)?;
    if !replicas.iter().any(|r| r.id == id) {
        return Err(no_such_replica(group, id, &replicas));
    }
    if replicas.len() == 1 {
        return Err(membership_error(group, format!("replica {id} is its only replica")));
    }
    let membership = step(&topology, group, MembershipChange::Remove(id))?;
    say!("{group}: replica {id} removed; the group is now {membership}");
    let identity = Identity::Replica {
        role,
        group: group.to_string(),
        id,
    };
    let member = Member {
        name: format!("{group}-{id}"),
        identity: identity.clone(),
        args: vec![],
    };
    let stopped = supervisor::stop(dir, &[member]);
    unlist(dir, group, id)?;
    say!(
        "{group}: {identity} retired{}; its data stays in {} (delete it when you no longer need it)",
        if stopped > 0 { " and stopped" } else { "" },
        replica_dir(&topology, group, id).display()
    );
    Ok(())
}

/// Takes replica `id` out of `group`'s list in the cluster file and retires its identity.
fn unlist(dir: &Path, group: &str, id: u64) -> Result<(), SupervisorError> {
    let (path, mut topology) = supervisor::load(dir)?;
    let (role, _) = find_group(&topology, group)?;
    let identity = Identity::Replica {
        role,
        group: group.to_string(),
        id,
    };
    topology.remove_replica(group, id);
    if !topology.is_retired(&identity) {
        topology.retired.push(identity.to_string());
    }
    write_topology(dir, &path, &topology)
}

/// A replica id `group` never had: above every current and retired one.
fn next_id(topology: &Topology, role: GroupRole, group: &str, replicas: &[Replica]) -> u64 {
    let retired = (topology.retired.iter()).filter_map(|name| match Identity::parse(name) {
        Some(Identity::Replica { role: r, group: g, id }) if r == role && g == group => Some(id),
        _ => None,
    });
    replicas.iter().map(|r| r.id).chain(retired).max().unwrap_or(0) + 1
}

/// `count` ports free now on `ip`.
fn free_addresses(ip: IpAddr, count: usize) -> Result<Vec<SocketAddr>, SupervisorError> {
    let listeners = (0..count)
        .map(|_| std::net::TcpListener::bind((ip, 0)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(io(format!("cannot find a free port on {ip}")))?;
    listeners
        .iter()
        .map(|l| l.local_addr())
        .collect::<Result<_, _>>()
        .map_err(io("cannot read a bound port"))
}

/// Lists replica `id` in `group` at `addresses` (wire, metrics or HTTP API, as the group's
/// replicas have).
fn list_replica(topology: &mut Topology, group: &str, id: u64, addresses: Vec<SocketAddr>, with_metrics: bool) {
    let [address, second] = addresses[..] else {
        unreachable!("two addresses asked");
    };
    topology.add_replica(
        group,
        Replica {
            id,
            address,
            metrics: with_metrics.then_some(second),
        },
        AuthorityReplica {
            id,
            address,
            http: second,
        },
    );
}

/// Writes the file whole and renames it into place, so a process re-reading it never sees half.
pub(crate) fn write_topology(dir: &Path, path: &Path, topology: &Topology) -> Result<(), SupervisorError> {
    let temporary = path.with_extension("toml.new");
    std::fs::write(&temporary, topology.to_toml()).map_err(io(format!("cannot write {}", temporary.display())))?;
    std::fs::rename(&temporary, path).map_err(io(format!("cannot replace {}", path.display())))?;
    crate::credentials::ensure_pki(topology).map_err(supervisor::credentials("cannot issue the new certificates"))?;
    supervisor::write_scrape_targets(dir, topology)
}

fn group_statuses(topology: &Topology, group: &str) -> Result<Vec<ReplicaStatus>, SupervisorError> {
    runtime()?
        .block_on(operator::replica_statuses(
            topology,
            Some(group),
            Duration::from_secs(2),
        ))
        .map_err(SupervisorError::Status)
}

/// The leader's status among `statuses`, or why there is none.
fn leader_status(group: &str, statuses: &[ReplicaStatus]) -> Result<serde_json::Value, SupervisorError> {
    statuses
        .iter()
        .find(|s| s.is_leader())
        .and_then(|s| s.status.as_ref().ok().cloned())
        .ok_or_else(|| {
            membership_error(
                group,
                "it has no leader now: a change needs one (see `specie cluster status`)",
            )
        })
}

/// One step, sent to the group's leader as the operator; the membership after it, as its JSON.
/// A refusal is final (each step is idempotent on the group's side, so a step that did happen is
/// not refused when asked again); no leader, or a lost answer, is asked again until
/// [`STEP_TIMEOUT`].
fn step(topology: &Topology, group: &str, change: MembershipChange) -> Result<String, SupervisorError> {
    let (role, replicas) = find_group(topology, group)?;
    let transport = crate::credentials::transport(topology, &Identity::Operator)
        .map_err(supervisor::credentials("cannot read the operator's certificate"))?;
    let client = GroupClient::new(role, group, &replicas, &wire_limits(topology), &transport)
        .map_err(|error| membership_error(group, error.to_string()))?;
    let runtime = runtime()?;
    let started = Instant::now();
    let mut last = String::from("no leader");
    while started.elapsed() < STEP_TIMEOUT {
        let statuses = group_statuses(topology, group)?;
        if let Some(leader) = statuses.iter().find(|s| s.is_leader()) {
            let request = RoleRequest::Membership(change);
            match runtime.block_on(client.call_replica(leader.id, &request, STEP_TIMEOUT / 4)) {
                Ok(RoleResponse::Status(membership)) => return Ok(membership),
                Ok(RoleResponse::NotLeader(_)) => last = format!("replica {} no longer leads", leader.id),
                Ok(other) => return Err(membership_error(group, format!("unexpected answer {other:?}"))),
                Err(ReplicaCallError::Wire(WireError::Remote { message })) => {
                    return Err(membership_error(group, message))
                }
                Err(error) => last = error.to_string(),
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(membership_error(
        group,
        format!("no leader took the change in {} s ({last})", STEP_TIMEOUT.as_secs()),
    ))
}

fn runtime() -> Result<tokio::runtime::Runtime, SupervisorError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io("cannot start a runtime"))
}

/// How long `cluster digests` waits for a group's replicas to agree (followers applying the
/// last entries) before it reports them different.
const DIGESTS_AGREE_TIMEOUT: Duration = Duration::from_secs(10);

/// `specie cluster digests`: each shard replica's own UHS (its size and SHA-256 over its sorted
/// ids), so that an operator sees a group's replicas hold the same state, after a replacement
/// above all. Returns whether every group's replicas agree.
pub fn digests(dir: &Path) -> Result<bool, SupervisorError> {
    let (_, topology) = supervisor::load(dir)?;
    let runtime = runtime()?;
    let started = Instant::now();
    let (digests, disagreeing) = loop {
        let digests = runtime
            .block_on(operator::replica_digests(&topology, Duration::from_secs(5)))
            .map_err(SupervisorError::Status)?;
        let mut by_group: std::collections::BTreeMap<&str, std::collections::BTreeSet<String>> = Default::default();
        for digest in &digests {
            let seen = match &digest.status {
                Ok(json) => json.to_string(),
                Err(error) => format!("no answer: {error}"),
            };
            by_group.entry(digest.group.as_str()).or_default().insert(seen);
        }
        let disagreeing: Vec<String> = (by_group.iter())
            .filter(|(_, seen)| seen.len() > 1)
            .map(|(group, _)| group.to_string())
            .collect();
        if disagreeing.is_empty() || started.elapsed() > DIGESTS_AGREE_TIMEOUT {
            break (digests, disagreeing);
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    println!(
        "{:<20} {:>7} {:>10}  sha256 over the sorted UHS ids",
        "group", "replica", "ids"
    );
    for digest in &digests {
        match &digest.status {
            Ok(json) => println!(
                "{:<20} {:>7} {:>10}  {}",
                digest.group,
                digest.id,
                json["ids"].as_u64().map_or("?".to_string(), |ids| ids.to_string()),
                json["sha256_sorted"].as_str().unwrap_or("?")
            ),
            Err(error) => println!("{:<20} {:>7} {:>10}  no answer: {error}", digest.group, digest.id, "-"),
        }
    }
    if disagreeing.is_empty() {
        println!("every group's replicas hold the same UHS");
    } else {
        println!(
            "DIFFER: {} (after {} s; with transactions in flight followers may lag: run it again when idle)",
            disagreeing.join(", "),
            DIGESTS_AGREE_TIMEOUT.as_secs()
        );
    }
    Ok(disagreeing.is_empty())
}
