//! The fault schedule: kill a group's leader at a given time, restart it later.

use super::*;

/// What the fault thread did for one `--kill-leader`.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(crate) struct FaultRecord {
    pub(crate) group: String,
    pub(crate) planned_s: f64,
    pub(crate) replica: Option<u64>,
    pub(crate) pid: Option<u32>,
    pub(crate) killed_at_s: Option<f64>,
    /// When another replica of the group first said it leads (polled every 50 ms until the restart).
    pub(crate) new_leader_at_s: Option<f64>,
    pub(crate) new_leader: Option<u64>,
    pub(crate) restarted_at_s: Option<f64>,
    pub(crate) new_pid: Option<u32>,
    pub(crate) error: Option<String>,
}

pub(crate) fn group_replicas<'a>(topology: &'a Topology, group: &str) -> Option<&'a [specie_cluster::Replica]> {
    topology
        .shard_groups
        .iter()
        .map(|g| (&g.name, &g.replicas))
        .chain(topology.coordinator_groups.iter().map(|g| (&g.name, &g.replicas)))
        .find(|(name, _)| *name == group)
        .map(|(_, replicas)| replicas.as_slice())
}

/// The replica of `group` that says it leads (the highest term if several do).
pub(crate) fn find_leader(
    runtime: &tokio::runtime::Runtime,
    topology: &Topology,
    group: &str,
) -> BenchResult<Option<u64>> {
    let statuses = runtime
        .block_on(operator::replica_statuses(
            topology,
            Some(group),
            Duration::from_millis(1000),
        ))
        .step("cannot ask the replicas for their status")?;
    let leader = statuses
        .iter()
        .filter(|s| s.is_leader())
        .filter_map(|s| Some((s.status.as_ref().ok()?["term"].as_u64().unwrap_or(0), s.id)))
        .max();
    Ok(leader.map(|(_, id)| id))
}

pub(crate) enum Action {
    Kill(usize),
    Restart(usize),
}

/// Finds `group`'s leader (waiting up to 10 s for one) and kills its process with SIGKILL;
/// returns the replica and its pid.
fn kill_leader(
    runtime: &tokio::runtime::Runtime,
    topology: &Topology,
    dir: &Path,
    group: &str,
) -> BenchResult<(u64, u32)> {
    let searching = Instant::now();
    let replica = loop {
        if let Some(replica) = find_leader(runtime, topology, group)? {
            break replica;
        }
        ensure_that!(searching.elapsed() < Duration::from_secs(10), "no leader for 10 s");
        std::thread::sleep(Duration::from_millis(100));
    };
    let name = format!("{group}-{replica}");
    let pid = supervisor::read_pid(dir, &name)
        .filter(|p| supervisor::is_alive(*p))
        .with_step(|| format!("no live process for {name} in {}/pids", dir.display()))?;
    let status = Process::new("kill").args(["-KILL", &pid.to_string()]).status()?;
    ensure_that!(status.success(), "kill -KILL {pid} failed");
    Ok((replica, pid))
}

/// Runs the fault schedule relative to `started`: kills each leader at its time and restarts it
/// `restart_after` later (with `cluster up`'s own mechanism). Once `stop` is set, kills not yet
/// done are skipped and pending restarts happen at once, so the cluster ends at full size.
pub(crate) fn inject_faults(
    dir: &Path,
    topology_path: &Path,
    topology: &Topology,
    faults: Vec<FaultSpec>,
    restart_after: Duration,
    started: Instant,
    stop: &AtomicBool,
) -> Vec<FaultRecord> {
    let mut records: Vec<FaultRecord> = faults
        .iter()
        .map(|f| FaultRecord {
            group: f.group.clone(),
            planned_s: f.at_s,
            ..Default::default()
        })
        .collect();
    if faults.is_empty() {
        return records;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            for record in &mut records {
                record.error = Some(format!("cannot start a runtime: {error}"));
            }
            return records;
        }
    };
    let mut actions: Vec<(Duration, Action)> = faults
        .iter()
        .enumerate()
        .map(|(i, f)| (Duration::from_secs_f64(f.at_s), Action::Kill(i)))
        .collect();
    loop {
        actions.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        let Some((at, action)) = actions.pop() else { break };
        while started.elapsed() < at && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10).min(at.saturating_sub(started.elapsed())));
        }
        let stopping = stop.load(Ordering::Relaxed);
        match action {
            Action::Kill(i) if stopping => records[i].error = Some("the load stopped before this fault".into()),
            Action::Kill(i) => {
                let group = records[i].group.clone();
                let killed = kill_leader(&runtime, topology, dir, &group);
                match killed {
                    Ok((replica, pid)) => {
                        let killed_at = started.elapsed();
                        records[i].replica = Some(replica);
                        records[i].pid = Some(pid);
                        records[i].killed_at_s = Some(killed_at.as_secs_f64());
                        actions.push((killed_at + restart_after, Action::Restart(i)));
                        // Time the election, until the restart is due.
                        while started.elapsed() < killed_at + restart_after {
                            if let Ok(Some(leader)) = find_leader(&runtime, topology, &group) {
                                if leader != replica {
                                    records[i].new_leader = Some(leader);
                                    records[i].new_leader_at_s = Some(started.elapsed().as_secs_f64());
                                    break;
                                }
                            }
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                    Err(error) => records[i].error = Some(format!("{error:#}")),
                }
            }
            Action::Restart(i) => {
                let name = format!("{}-{}", records[i].group, records[i].replica.unwrap_or(0));
                let member = supervisor::members(topology_path, topology)
                    .into_iter()
                    .find(|m| m.name == name);
                let restarted = match member {
                    Some(member) => {
                        supervisor::spawn_member(dir, &member).map_err(|e| BenchError::Failed(e.to_string()))
                    }
                    None => Err(BenchError::Failed(format!("{name} is not a member of the cluster"))),
                };
                match restarted {
                    Ok(pid) => {
                        records[i].new_pid = Some(pid);
                        records[i].restarted_at_s = Some(started.elapsed().as_secs_f64());
                    }
                    Err(error) => records[i].error = Some(format!("restart failed: {error:#}")),
                }
            }
        }
    }
    records
}
