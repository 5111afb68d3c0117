//! CPU time from /proc: where the time of a run goes.

use super::*;

/// CPU ticks (user + system) of the cluster's processes, of this process and of the machine.
pub(crate) struct CpuSnapshot {
    pub(crate) at: Instant,
    /// pid → (role, ticks).
    pub(crate) processes: HashMap<u32, (String, u64)>,
    pub(crate) own: u64,
    pub(crate) machine_busy: u64,
    pub(crate) machine_total: u64,
    pub(crate) tcp_active_opens: Option<u64>,
}

/// CPU seconds used between two snapshots.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct CpuUsage {
    pub(crate) wall_s: f64,
    pub(crate) cores: usize,
    /// By role of the cluster's processes ("shard", "coordinator", "sentinel"), those alive at
    /// both snapshots.
    pub(crate) by_role: BTreeMap<String, f64>,
    /// This process: the load generator and the cluster client acting as a sentinel.
    pub(crate) bench_s: f64,
    pub(crate) machine_busy_s: f64,
    pub(crate) machine_busy_percent: f64,
    /// Everything else on the machine (other users, compilers, the kernel's own threads).
    pub(crate) other_s: f64,
    /// TCP connections opened on the machine (`ActiveOpens` in /proc/net/snmp, every process):
    /// about zero when the cluster keeps its connections, whatever the load.
    pub(crate) tcp_connections_opened: Option<u64>,
}

pub(crate) fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// utime + stime from the text of `/proc/PID/stat` (fields 14 and 15; the name in parentheses
/// may hold spaces).
pub(crate) fn parse_process_ticks(stat: &str) -> Option<u64> {
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// `ActiveOpens` (TCP connections this host opened) from the text of `/proc/net/snmp`, whose
/// `Tcp:` lines are a header and then the values.
pub(crate) fn parse_tcp_active_opens(snmp: &str) -> Option<u64> {
    let mut lines = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (header, values) = (lines.next()?, lines.next()?);
    let column = header.split_whitespace().position(|name| name == "ActiveOpens")?;
    values.split_whitespace().nth(column)?.parse().ok()
}

/// (busy, total) ticks of all cores from the text of `/proc/stat` (idle and iowait are not busy).
pub(crate) fn parse_machine_ticks(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let values: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let total: u64 = values.iter().sum();
    let idle = values.get(3)? + values.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

impl CpuSnapshot {
    pub(crate) fn take(dir: &Path, topology_path: &Path, topology: &Topology) -> Option<CpuSnapshot> {
        let (machine_busy, machine_total) = parse_machine_ticks(&std::fs::read_to_string("/proc/stat").ok()?)?;
        let own = parse_process_ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
        let mut processes = HashMap::new();
        for member in supervisor::members(topology_path, topology) {
            let Some(pid) = supervisor::read_pid(dir, &member.name) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            if let Some(ticks) = parse_process_ticks(&stat) {
                processes.insert(pid, (member.args.first().cloned().unwrap_or_default(), ticks));
            }
        }
        let tcp_active_opens = std::fs::read_to_string("/proc/net/snmp")
            .ok()
            .and_then(|snmp| parse_tcp_active_opens(&snmp));
        Some(CpuSnapshot {
            at: Instant::now(),
            processes,
            own,
            machine_busy,
            machine_total,
            tcp_active_opens,
        })
    }

    pub(crate) fn since(&self, start: &CpuSnapshot) -> CpuUsage {
        let tick = clock_ticks_per_second();
        let mut by_role: BTreeMap<String, f64> = BTreeMap::new();
        for (pid, (role, ticks)) in &self.processes {
            if let Some((_, before)) = start.processes.get(pid) {
                *by_role.entry(role.clone()).or_default() += ticks.saturating_sub(*before) as f64 / tick;
            }
        }
        let bench_s = self.own.saturating_sub(start.own) as f64 / tick;
        let machine_busy_s = self.machine_busy.saturating_sub(start.machine_busy) as f64 / tick;
        let machine_total = self.machine_total.saturating_sub(start.machine_total) as f64;
        let ours: f64 = by_role.values().sum::<f64>() + bench_s;
        CpuUsage {
            wall_s: self.at.duration_since(start.at).as_secs_f64(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            by_role,
            bench_s,
            machine_busy_s,
            machine_busy_percent: if machine_total > 0.0 {
                100.0 * machine_busy_s * tick / machine_total
            } else {
                0.0
            },
            other_s: (machine_busy_s - ours).max(0.0),
            tcp_connections_opened: self
                .tcp_active_opens
                .zip(start.tcp_active_opens)
                .map(|(end, start)| end.saturating_sub(start)),
        }
    }
}

impl CpuUsage {
    pub(crate) fn role(&self, role: &str) -> f64 {
        self.by_role.get(role).copied().unwrap_or(0.0)
    }

    pub(crate) fn summary(&self, confirmed: u64) -> String {
        let cluster: f64 = self.by_role.values().sum();
        format!(
            "shards {:.1} s, coordinators {:.1} s, sentinels {:.1} s, bench {:.1} s, other processes {:.1} s \
             (machine {:.0}% busy over {:.1} s × {} cores); cluster {} µs CPU per confirmed tx; {} TCP \
             connections opened on the machine",
            self.role("shard"),
            self.role("coordinator"),
            self.role("sentinel"),
            self.bench_s,
            self.other_s,
            self.machine_busy_percent,
            self.wall_s,
            self.cores,
            if confirmed == 0 {
                "-".to_string()
            } else {
                format!("{:.1}", cluster * 1e6 / confirmed as f64)
            },
            self.tcp_connections_opened.map_or("?".to_string(), |n| n.to_string())
        )
    }

    pub(crate) fn json(&self, confirmed: u64) -> serde_json::Value {
        let per_tx = |seconds: f64| (confirmed > 0).then(|| seconds * 1e6 / confirmed as f64);
        let mut value = serde_json::to_value(self).unwrap_or_default();
        value["us_per_confirmed_tx"] = serde_json::json!({
            "shard": per_tx(self.role("shard")),
            "coordinator": per_tx(self.role("coordinator")),
            "sentinel": per_tx(self.role("sentinel")),
            "bench": per_tx(self.bench_s),
            "cluster": per_tx(self.by_role.values().sum()),
        });
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_parse_from_proc() {
        let stat = "4242 (specie shard (x)) S 1 4242 4242 0 -1 4194560 5000 0 0 0 1234 567 0 0 20 0 9 0 100 0 0";
        assert_eq!(parse_process_ticks(stat), Some(1234 + 567));
        assert_eq!(parse_process_ticks("garbage"), None);
        let machine = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n";
        assert_eq!(parse_machine_ticks(machine), Some((161, 1181)));
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens\nTcp: 1 200 120000 -1 4321 17\nUdp: InDatagrams\nUdp: 5\n";
        assert_eq!(parse_tcp_active_opens(snmp), Some(4321));
        assert_eq!(parse_tcp_active_opens("Tcp: ActiveOpens\n"), None);
    }
}
