//! `specie cluster backup` and `specie cluster restore`: every group's applied state at one cut,
//! written to files, and a new cluster built from them.
//!
//! **The cut.** Each group's leader gives its whole applied state (its role's snapshot encoding,
//! the bytes Raft itself ships to a lagging follower). The states form one consistent cut when
//! no group applied anything while they were read: the backup reads every leader's commit and
//! applied index, every state, and every index again, and keeps the states only if each group
//! had everything committed applied and nothing moved in between. The cluster is then as if it had
//! stopped at that instant, which it survives by design (a full restart keeps every dtxn, the
//! coordinators finishing what they began). To find such a moment under load, the backup holds
//! the sentinels it started for the time it takes (they are stopped and started again, as a
//! rolling restart does; wallets retry), so nothing new enters; in-flight transactions finish.
//!
//! **The restore.** A new cluster with the backup's topology, in a new directory, whose groups are
//! founded afresh (new Raft logs, the same replica ids and addresses) with each group's state as
//! every replica's initial state (`Topology::restored_from`): identical on every replica, as the
//! role contract asks of an initial state, and on every replica added later. It serves the same
//! UHS and ledger of record as the cluster did at the cut.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use specie_raft::ReplicatedStateMachine;

use crate::identity::Identity;
use crate::membership::write_topology;
use crate::operator::{self, ReplicaStatus, StatusError};
use crate::rolling;
use crate::supervisor::{self, io, is_alive, read_pid, Member, SupervisorError, TOPOLOGY_FILE};
use crate::topology::{RestoredFrom, Topology};

/// The file that lists a backup's states; written last, so a backup without it is incomplete.
pub const MANIFEST_FILE: &str = "manifest.json";
const MANIFEST_FORMAT: u32 = 1;
/// Where a restored cluster keeps the states it started from, in its directory.
pub const RESTORED_DIR: &str = "restored-from";
/// How long the backup looks for a moment when no group applies anything.
pub const QUIET_TIMEOUT: Duration = Duration::from_secs(30);
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The most bytes of a manifest read (far above any cluster's).
const MANIFEST_BYTES_MAX: u64 = 1 << 20;

/// What a backup holds, in `manifest.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// When the cut was taken (milliseconds since the Unix epoch).
    pub taken_at_unix_ms: u64,
    pub groups: Vec<GroupState>,
}

/// One group's state at the cut.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupState {
    pub group: String,
    /// The replica that gave it (the leader) and the last entry it had applied.
    pub replica: u64,
    pub applied_index: u64,
    /// The state file's length and SHA-256 (hex).
    pub bytes: u64,
    pub sha256: String,
}

fn state_file(dir: &Path, group: &str) -> PathBuf {
    dir.join(format!("{group}.state"))
}

/// Why a replica of a restored cluster cannot have its group's state.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    #[error(
        "this cluster was restored from {}, and {what} cannot be read there: {source}. Every host that runs a \
         replica of a restored cluster needs the backup's manifest.json and its group's .state file at that path",
        dir.display()
    )]
    Unreadable {
        dir: PathBuf,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the backup in {} is not intact: {reason}. Restore from an intact copy", dir.display())]
    Damaged { dir: PathBuf, reason: String },
}

/// `state` as the group starts from in a restored cluster (the backup's state of `group`), or
/// as it is in any other.
pub(crate) fn seeded<S: ReplicatedStateMachine>(
    topology: &Topology,
    group: &str,
    mut state: S,
) -> Result<S, SeedError> {
    let Some(restored) = &topology.restored_from else {
        return Ok(state);
    };
    let dir = &restored.dir;
    let bytes = read_state(dir, group)?;
    let sha256 = hex::encode(specie_transaction::hash::sha256(&bytes));
    if restored.sha256.get(group) != Some(&sha256) {
        return Err(SeedError::Damaged {
            dir: dir.clone(),
            reason: format!(
                "{group}'s state there has SHA-256 {sha256}, and the cluster file's restored_from lists {}: \
                 it is another backup's. Every replica of a group must start from the same state: copy the \
                 one the cluster was restored from",
                restored.sha256.get(group).map_or("none", String::as_str)
            ),
        });
    }
    state.restore(&bytes).map_err(|refused| SeedError::Damaged {
        dir: dir.clone(),
        reason: format!("{group}'s state is refused by its role: {refused}"),
    })?;
    Ok(state)
}

fn read_manifest(dir: &Path) -> Result<Manifest, SeedError> {
    let path = dir.join(MANIFEST_FILE);
    let unreadable = |source| SeedError::Unreadable {
        dir: dir.to_path_buf(),
        what: MANIFEST_FILE.to_string(),
        source,
    };
    let text = read_at_most(&path, MANIFEST_BYTES_MAX).map_err(unreadable)?;
    let manifest: Manifest = serde_json::from_slice(&text).map_err(|e| SeedError::Damaged {
        dir: dir.to_path_buf(),
        reason: format!("{MANIFEST_FILE} does not parse: {e}"),
    })?;
    if manifest.format != MANIFEST_FORMAT {
        return Err(SeedError::Damaged {
            dir: dir.to_path_buf(),
            reason: format!(
                "{MANIFEST_FILE} is of format {}, this build reads {MANIFEST_FORMAT}",
                manifest.format
            ),
        });
    }
    Ok(manifest)
}

/// `path`, refused past `bytes_max` bytes.
fn read_at_most(path: &Path, bytes_max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = vec![];
    std::fs::File::open(path)?.take(bytes_max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > bytes_max {
        return Err(std::io::Error::other(format!("it is larger than {bytes_max} bytes")));
    }
    Ok(bytes)
}

/// The state of `group` in the backup in `dir`, checked against its manifest.
fn read_state(dir: &Path, group: &str) -> Result<Vec<u8>, SeedError> {
    let manifest = read_manifest(dir)?;
    let damaged = |reason: String| SeedError::Damaged {
        dir: dir.to_path_buf(),
        reason,
    };
    let listed = (manifest.groups.iter())
        .find(|g| g.group == group)
        .ok_or_else(|| damaged(format!("{MANIFEST_FILE} lists no state of group {group}")))?;
    let path = state_file(dir, group);
    let bytes = read_at_most(&path, listed.bytes).map_err(|source| SeedError::Unreadable {
        dir: dir.to_path_buf(),
        what: path.display().to_string(),
        source,
    })?;
    let sha256 = hex::encode(specie_transaction::hash::sha256(&bytes));
    if bytes.len() as u64 != listed.bytes || sha256 != listed.sha256 {
        return Err(damaged(format!(
            "{} is {} bytes with SHA-256 {sha256}; the manifest lists {} bytes with {}",
            path.display(),
            bytes.len(),
            listed.bytes,
            listed.sha256
        )));
    }
    Ok(bytes)
}

/// Where a group stood: its leader, the leader's term, and the index it had applied.
type Position = (u64, u64, u64);

/// Each group's position, if every group has a leader of the newest term any of its replicas
/// reports (an old leader cut off from its group may still think it leads) that has applied
/// everything it knows committed; otherwise each group that has not, and why.
fn quiet_positions(statuses: &[ReplicaStatus]) -> Result<BTreeMap<String, Position>, Vec<String>> {
    let mut positions = BTreeMap::new();
    let groups: std::collections::BTreeSet<&String> = statuses.iter().map(|s| &s.group).collect();
    let mut moving = vec![];
    for group in groups {
        let answers: Vec<(u64, &serde_json::Value)> = (statuses.iter())
            .filter(|s| &s.group == group)
            .filter_map(|s| Some((s.id, s.status.as_ref().ok()?)))
            .collect();
        let newest_term = answers.iter().filter_map(|(_, s)| s["term"].as_u64()).max();
        let leader = (answers.iter())
            .find(|(_, s)| s["role"] == "leader" && s["term"].as_u64() == newest_term)
            .map(|(id, s)| (*id, *s));
        let why = match leader {
            None if answers.is_empty() => "no replica answered".to_string(),
            None => "it has no leader of its newest term".to_string(),
            Some((id, status)) => {
                let index = |name: &str| status[name].as_u64();
                match (index("commit_index"), index("applied_index"), newest_term) {
                    (Some(commit), Some(applied), Some(term)) if commit == applied => {
                        positions.insert(group.clone(), (id, term, applied));
                        continue;
                    }
                    (commit, applied, _) => format!("its leader applies (committed {commit:?}, applied {applied:?})"),
                }
            }
        };
        moving.push(format!("{group}: {why}"));
    }
    match moving.is_empty() {
        true => Ok(positions),
        false => Err(moving),
    }
}

type Cut = (BTreeMap<String, Position>, Vec<(String, Vec<u8>)>);

/// Every group's state at one moment when none applied anything (see the module's doc).
async fn take_cut(topology: &Topology, stop: &AtomicBool) -> Result<Cut, SupervisorError> {
    let statuses = || async {
        operator::replica_statuses(topology, None, CALL_TIMEOUT)
            .await
            .map_err(SupervisorError::Status)
    };
    let started = Instant::now();
    loop {
        let moving = match quiet_positions(&statuses().await?) {
            Ok(before) => {
                let leaders = before
                    .iter()
                    .map(|(group, (leader, _, _))| (group.clone(), *leader))
                    .collect();
                let states = operator::replica_states(topology, &leaders, CALL_TIMEOUT)
                    .await
                    .map_err(SupervisorError::Status)?;
                let mut read = vec![];
                let mut moved = vec![];
                for (group, state) in states {
                    match state {
                        Ok((applied, state)) if before[&group].2 == applied => read.push((group, state)),
                        Ok(_) | Err(StatusError::StateMoved { .. }) => moved.push(format!("{group}: it moved")),
                        Err(error) => {
                            return Err(SupervisorError::Backup {
                                reason: format!("no backup taken: {group}'s leader did not give its state: {error}"),
                            })
                        }
                    }
                }
                match quiet_positions(&statuses().await?) {
                    Ok(_) if !moved.is_empty() => moved,
                    Ok(after) if after == before => return Ok((before, read)),
                    Ok(after) => (before.keys())
                        .filter(|group| after.get(*group) != before.get(*group))
                        .map(|group| format!("{group}: it moved"))
                        .collect(),
                    Err(moving) => moving,
                }
            }
            Err(moving) => moving,
        };
        if started.elapsed() > QUIET_TIMEOUT {
            return Err(SupervisorError::Backup {
                reason: format!(
                    "no backup taken: no moment in {} s when every group had a leader that had applied all it \
                     committed and stood still ({}). A group without a leader needs its replicas back \
                     (`cluster status`); one that kept moving, that nothing submits to the cluster (sentinels \
                     started on other hosts, the load): then run it again",
                    QUIET_TIMEOUT.as_secs(),
                    moving.join("; ")
                ),
            });
        }
        if stop.load(Ordering::Relaxed) {
            return Err(SupervisorError::Interrupted {
                what: "no backup taken".to_string(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// [`take_cut`] on a runtime of its own.
fn take_cut_blocking(topology: &Topology, stop: &AtomicBool) -> Result<Cut, SupervisorError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io("cannot start a runtime"))?;
    runtime.block_on(take_cut(topology, stop))
}

/// What `backup` did.
pub struct Taken {
    pub manifest: Manifest,
    /// The sentinels it held, and for how long (stopped to ready again).
    pub sentinels_held: usize,
    pub held_for: Duration,
}

/// `specie cluster backup`: every group's state at one cut, written to `out` (a new or empty
/// directory) with the cluster file, the manifest last.
pub fn backup(dir: &Path, out: &Path) -> Result<Taken, SupervisorError> {
    let (path, topology) = supervisor::load(dir)?;
    let _change = crate::membership::change_lock(dir)?;
    refuse_unless_empty(out)?;
    std::fs::create_dir_all(out).map_err(io(format!("cannot create {}", out.display())))?;
    let paused: Vec<Member> = (supervisor::members(&path, &topology).into_iter())
        .filter(|m| matches!(m.identity, Identity::Sentinel { .. }))
        .filter(|m| read_pid(dir, &m.name).is_some_and(is_alive))
        .collect();
    // From here Ctrl-C and SIGTERM no longer end the process: it gives the sentinels back first.
    let stop = rolling::stop_requested();
    let held = Instant::now();
    supervisor::stop(dir, &paused);
    let cut = take_cut_blocking(&topology, &stop);
    let addresses = rolling::readiness_addresses(&topology);
    let not_back: Vec<String> = (paused.iter())
        .filter_map(|member| {
            let back =
                supervisor::spawn_member(dir, member).and_then(|pid| rolling::wait_ready(dir, member, &addresses, pid));
            back.err().map(|error| error.to_string())
        })
        .collect();
    let held_for = held.elapsed();
    let written = cut.and_then(|cut| write_backup(&path, out, cut));
    match (written, not_back.is_empty()) {
        (Ok(manifest), true) => Ok(Taken {
            manifest,
            sentinels_held: paused.len(),
            held_for,
        }),
        (written, _) => Err(SupervisorError::Backup {
            reason: format!(
                "{}{}",
                match written {
                    Ok(_) => format!("the backup is written to {}, but ", out.display()),
                    Err(error) => format!("{error}; and "),
                },
                match not_back.is_empty() {
                    true => "every sentinel is back".to_string(),
                    false => format!("not every sentinel held came back: {}", not_back.join("; ")),
                }
            ),
        }),
    }
}

/// Writes the cut into `out`: each group's state, the cluster file, the manifest last.
fn write_backup(path: &Path, out: &Path, (positions, states): Cut) -> Result<Manifest, SupervisorError> {
    let mut groups = vec![];
    for (group, state) in states {
        write_synced(&state_file(out, &group), &state)?;
        let (replica, _, applied_index) = positions[&group];
        groups.push(GroupState {
            group,
            replica,
            applied_index,
            bytes: state.len() as u64,
            sha256: hex::encode(specie_transaction::hash::sha256(&state)),
        });
    }
    let file = std::fs::read(path).map_err(io(format!("cannot read {}", path.display())))?;
    write_synced(&out.join(TOPOLOGY_FILE), &file)?;
    let taken_at_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64);
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        taken_at_unix_ms,
        groups,
    };
    let text = serde_json::to_string_pretty(&manifest).expect("a manifest serialises");
    write_synced(&out.join(MANIFEST_FILE), (text + "\n").as_bytes())?;
    Ok(manifest)
}

/// `bytes` in a new file at `path` (readable by its owner alone), on disk before it is named.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), SupervisorError> {
    specie_log::secret::write_atomically(path, bytes, false).map_err(|error| SupervisorError::Backup {
        reason: format!("cannot write {}: {error}", path.display()),
    })
}

fn refuse_unless_empty(dir: &Path) -> Result<(), SupervisorError> {
    let occupied = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some());
    match occupied {
        true => Err(SupervisorError::Backup {
            reason: format!("{} is not empty: give a new directory", dir.display()),
        }),
        false => Ok(()),
    }
}

/// `specie cluster restore`: a new cluster in `dir` (new or empty) from the backup in `from`:
/// its cluster file with this directory's data and PKI, the backup's PKI copied from `pki`
/// (default: the backed-up cluster's `pki_dir`), and each sentinel's endorsement share from the
/// backed-up cluster's data directory; the backup's states copied into `dir/restored-from`, where
/// its replicas start from. Start it with `cluster up --dir`. Returns the manifest.
pub fn restore(from: &Path, dir: &Path, pki: Option<&Path>) -> Result<Manifest, SupervisorError> {
    if !from.join(MANIFEST_FILE).is_file() {
        return Err(SupervisorError::Backup {
            reason: format!(
                "{} holds no {MANIFEST_FILE}, so it is no backup (or an unfinished one: a backup writes its \
                 manifest last); give a directory that `specie cluster backup --out` wrote",
                from.display()
            ),
        });
    }
    let manifest = read_manifest(from).map_err(seed_error)?;
    for group in &manifest.groups {
        read_state(from, &group.group).map_err(seed_error)?;
    }
    let backed_up = Topology::load(&from.join(TOPOLOGY_FILE))?;
    let listed: Vec<&str> = manifest.groups.iter().map(|g| g.group.as_str()).collect();
    for (_, group, _) in backed_up.replica_groups() {
        if !listed.contains(&group.as_str()) {
            return Err(seed_error(SeedError::Damaged {
                dir: from.to_path_buf(),
                reason: format!("{MANIFEST_FILE} lists no state of group {group}"),
            }));
        }
    }
    refuse_unless_empty(dir)?;
    std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let dir = dir
        .canonicalize()
        .map_err(io(format!("cannot resolve {}", dir.display())))?;
    // The cluster keeps its own copy of the states it starts from: its replicas need them for
    // as long as they have no snapshot of their own, and replicas added later always do.
    let seeds = dir.join(RESTORED_DIR);
    copy_file(&from.join(MANIFEST_FILE), &seeds.join(MANIFEST_FILE))?;
    for group in &manifest.groups {
        copy_file(&state_file(from, &group.group), &state_file(&seeds, &group.group))?;
    }
    let mut topology = backed_up.clone();
    topology.data_dir = dir.join("data");
    topology.pki_dir = dir.join("pki");
    topology.restored_from = Some(RestoredFrom {
        dir: seeds,
        sha256: (manifest.groups.iter())
            .map(|g| (g.group.clone(), g.sha256.clone()))
            .collect(),
    });
    copy_files(pki.unwrap_or(&backed_up.pki_dir), &topology.pki_dir)?;
    // The sentinels' shares of the endorsement group key: without them the sentinels would make
    // a new group key, under which the restored ledger's endorsements do not verify.
    for sentinel in topology.sentinels.iter().filter(|_| topology.endorsement.is_some()) {
        let share = crate::credentials::endorser_keys_path(&backed_up, &sentinel.name);
        if !share.exists() {
            return Err(SupervisorError::Backup {
                reason: format!(
                    "{}'s share of the endorsement group key is not at {}: put it there (the backed-up \
                     cluster's data directory) and restore again",
                    sentinel.name,
                    share.display()
                ),
            });
        }
        copy_file(
            &share,
            &crate::credentials::endorser_keys_path(&topology, &sentinel.name),
        )?;
    }
    write_topology(&dir, &dir.join(TOPOLOGY_FILE), &topology)?;
    Ok(manifest)
}

fn seed_error(error: SeedError) -> SupervisorError {
    SupervisorError::Backup {
        reason: error.to_string(),
    }
}

/// Copies the files directly in `from` into `to` (made private), keeping their permissions.
fn copy_files(from: &Path, to: &Path) -> Result<(), SupervisorError> {
    let entries = std::fs::read_dir(from).map_err(io(format!(
        "cannot read the cluster's PKI in {} (give its copy with --pki)",
        from.display()
    )))?;
    for entry in entries {
        let entry = entry.map_err(io(format!("cannot read {}", from.display())))?;
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            copy_file(&entry.path(), &to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

fn copy_file(from: &Path, to: &Path) -> Result<(), SupervisorError> {
    use std::os::unix::fs::DirBuilderExt;
    let parent = to.parent().expect("a file in a directory");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(parent)
        .map_err(io(format!("cannot create {}", parent.display())))?;
    std::fs::copy(from, to).map_err(io(format!("cannot copy {} to {}", from.display(), to.display())))?;
    Ok(())
}
