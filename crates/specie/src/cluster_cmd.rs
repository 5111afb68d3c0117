//! `specie cluster up | status | down`, and the role processes they start.

use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use specie_cluster::operator::{self, ReplicaStatus};
use specie_cluster::{credentials, Shape, Topology};
use specie_transaction::signing::xonly_bytes;

const TOPOLOGY_FILE: &str = "cluster.toml";
/// The demo's issuer key for a cluster made by `cluster up` (secret, mode 0600).
pub const ISSUER_KEY_FILE: &str = "issuer.key";
const START_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Args, Debug)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Start a local cluster on 127.0.0.1: shard groups and coordinator groups replicated by Raft,
    /// and sentinels serving the wallets' HTTP API. Writes DIR/cluster.toml on first use (edit
    /// it to change the topology) and issues what DIR/pki lacks: a cluster CA and one key and
    /// certificate per process, for mutual TLS between all of them (to bring your own CA, see
    /// docs/operator-guide.md). Logs to DIR/logs, and returns once every group has a leader.
    /// Starts only members that are not running, so it also restarts one that died.
    Up(UpArgs),
    /// Show each group's leader, term, commit and applied index, how many connections and
    /// requests each replica refused (which and why: its log in DIR/logs), and
    /// each process's health.
    Status(DirArgs),
    /// Stop every process of the cluster (SIGTERM, then SIGKILL after 10 s). Data stays in DIR.
    Down(DirArgs),
}

#[derive(Args, Debug)]
pub struct DirArgs {
    /// The cluster's directory: cluster.toml, data/, pki/, logs/, pids/.
    #[arg(long, default_value = "./specie-cluster")]
    pub dir: PathBuf,
}

#[derive(Args, Debug)]
pub struct UpArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// Shard groups (only when DIR/cluster.toml does not exist yet; likewise below).
    #[arg(long, default_value_t = 2)]
    pub shard_groups: usize,
    #[arg(long, default_value_t = 1)]
    pub coordinator_groups: usize,
    /// Replicas per group (3 tolerates one failure, 5 two).
    #[arg(long, default_value_t = 3)]
    pub replicas: usize,
    #[arg(long, default_value_t = 2)]
    pub sentinels: usize,
    /// First port of the consecutive range the processes listen on.
    #[arg(long, default_value_t = 18_470)]
    pub base_port: u16,
    /// Another issuer x-only public key (hex) to trust, e.g. from `specie wallet create --issuer`.
    #[arg(long = "issuer", value_name = "HEX")]
    pub issuers: Vec<String>,
}

/// Run one shard group replica of a cluster.
#[derive(Args, Debug)]
pub struct ReplicaArgs {
    /// The cluster file.
    #[arg(long)]
    pub cluster: PathBuf,
    /// The group's name in the cluster file.
    #[arg(long)]
    pub group: String,
    /// This replica's id within the group.
    #[arg(long)]
    pub replica: u64,
}

/// Run one sentinel of a cluster (the wallets' HTTP API).
#[derive(Args, Debug)]
pub struct SentinelArgs {
    #[arg(long)]
    pub cluster: PathBuf,
    /// The sentinel's name in the cluster file.
    #[arg(long)]
    pub name: String,
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

pub fn run_shard(args: ReplicaArgs) -> anyhow::Result<ExitCode> {
    let topology = Topology::load(&args.cluster)?;
    runtime()?.block_on(specie_cluster::shard_replica::run(topology, args.group, args.replica))?;
    Ok(ExitCode::SUCCESS)
}

pub fn run_coordinator(args: ReplicaArgs) -> anyhow::Result<ExitCode> {
    let topology = Topology::load(&args.cluster)?;
    runtime()?.block_on(specie_cluster::coordinator_replica::run(
        topology,
        args.group,
        args.replica,
    ))?;
    Ok(ExitCode::SUCCESS)
}

pub fn run_sentinel(args: SentinelArgs) -> anyhow::Result<ExitCode> {
    let topology = Topology::load(&args.cluster)?;
    runtime()?.block_on(specie_cluster::sentinel::run(topology, args.name))?;
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: ClusterArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ClusterCommand::Up(args) => up(args),
        ClusterCommand::Status(args) => status(&args.dir),
        ClusterCommand::Down(args) => down(&args.dir),
    }
}

/// One process of the cluster: its name, and the arguments that start it.
pub struct Member {
    pub name: String,
    pub args: Vec<String>,
}

pub fn members(topology_path: &Path, topology: &Topology) -> Vec<Member> {
    let file = topology_path.display().to_string();
    let mut members = vec![];
    let groups = [
        (
            "shard",
            topology
                .shard_groups
                .iter()
                .map(|g| (&g.name, &g.replicas))
                .collect::<Vec<_>>(),
        ),
        (
            "coordinator",
            topology
                .coordinator_groups
                .iter()
                .map(|g| (&g.name, &g.replicas))
                .collect(),
        ),
    ];
    for (role, groups) in groups {
        for (group, replicas) in groups {
            for replica in replicas {
                members.push(Member {
                    name: format!("{group}-{}", replica.id),
                    args: vec![
                        role.into(),
                        "--cluster".into(),
                        file.clone(),
                        "--group".into(),
                        group.clone(),
                        "--replica".into(),
                        replica.id.to_string(),
                    ],
                });
            }
        }
    }
    for sentinel in &topology.sentinels {
        members.push(Member {
            name: sentinel.name.clone(),
            args: vec![
                "sentinel".into(),
                "--cluster".into(),
                file.clone(),
                "--name".into(),
                sentinel.name.clone(),
            ],
        });
    }
    members
}

fn pid_file(dir: &Path, name: &str) -> PathBuf {
    dir.join("pids").join(format!("{name}.pid"))
}

pub fn read_pid(dir: &Path, name: &str) -> Option<u32> {
    std::fs::read_to_string(pid_file(dir, name)).ok()?.trim().parse().ok()
}

pub fn is_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| stat.contains(") Z "))
}

/// Starts one member in the background, its output appended to DIR/logs/NAME.log.
pub fn spawn_member(dir: &Path, member: &Member) -> anyhow::Result<u32> {
    use std::os::unix::process::CommandExt;
    std::fs::create_dir_all(dir.join("logs"))?;
    std::fs::create_dir_all(dir.join("pids"))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("logs").join(format!("{}.log", member.name)))?;
    let child = Process::new(std::env::current_exe()?)
        .args(&member.args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        // Its own process group: a Ctrl-C meant for the caller does not stop the cluster.
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {}", member.name))?;
    std::fs::write(pid_file(dir, &member.name), child.id().to_string())?;
    Ok(child.id())
}

fn load(dir: &Path) -> anyhow::Result<(PathBuf, Topology)> {
    let path = dir.join(TOPOLOGY_FILE);
    if !path.exists() {
        bail!(
            "{} does not exist: start a cluster with `specie cluster up --dir {}`",
            path.display(),
            dir.display()
        );
    }
    let topology = Topology::load(&path)?;
    Ok((std::fs::canonicalize(&path)?, topology))
}

pub fn up(args: UpArgs) -> anyhow::Result<ExitCode> {
    let dir = &args.dir.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(TOPOLOGY_FILE);
    if !path.exists() {
        let issuer = secp256k1::Keypair::new_global(&mut rand::thread_rng());
        credentials::write_secret(&dir.join(ISSUER_KEY_FILE), &hex::encode(issuer.secret_bytes()))?;
        let mut issuers = vec![hex::encode(xonly_bytes(&issuer))];
        issuers.extend(args.issuers.iter().map(|k| k.to_ascii_lowercase()));
        let shape = Shape {
            shard_groups: args.shard_groups,
            coordinator_groups: args.coordinator_groups,
            replicas: args.replicas,
            sentinels: args.sentinels,
            base_port: args.base_port,
        };
        let dir = std::fs::canonicalize(dir)?;
        let attestation_keys = (0..shape.sentinels)
            .map(|i| credentials::create_attestation_key(&dir.join("pki"), &Shape::sentinel_name(i)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let topology = Topology::local(shape, &dir, issuers, attestation_keys).map_err(anyhow::Error::msg)?;
        std::fs::write(&path, topology.to_toml())?;
        println!("wrote {} (edit it to change the topology)", path.display());
    }
    let (path, topology) = load(dir)?;
    let issued = credentials::ensure_pki(&topology)?;
    if !issued.is_empty() {
        println!(
            "issued {} PKI files in {} (mutual TLS between every process)",
            issued.len(),
            topology.pki_dir.display()
        );
    }
    // Idempotent: starts only what is not running, so it also restarts a member that died.
    let stopped: Vec<Member> = members(&path, &topology)
        .into_iter()
        .filter(|m| !read_pid(dir, &m.name).is_some_and(is_alive))
        .collect();
    for member in &stopped {
        spawn_member(dir, member)?;
    }
    println!(
        "started {} processes; waiting for every group to elect a leader…",
        stopped.len()
    );
    let started = Instant::now();
    loop {
        let (leaders, groups) = leaders_elected(&topology)?;
        if leaders == groups {
            break;
        }
        if started.elapsed() > START_TIMEOUT {
            bail!(
                "only {leaders} of {groups} groups have a leader after {} s; see {}/logs",
                START_TIMEOUT.as_secs(),
                dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    println!("cluster up in {:.1} s", started.elapsed().as_secs_f64());
    for sentinel in &topology.sentinels {
        println!("  {}: http://{}", sentinel.name, sentinel.http);
    }
    let first = &topology.sentinels[0].http;
    println!("wallets:  specie wallet --node http://{first} …");
    println!("demo:     specie demo --cluster {}", dir.display());
    println!("status:   specie cluster status --dir {}", dir.display());
    Ok(ExitCode::SUCCESS)
}

fn replica_statuses(topology: &Topology) -> anyhow::Result<Vec<ReplicaStatus>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(operator::replica_statuses(topology, None, Duration::from_millis(1000)))
}

fn leaders_elected(topology: &Topology) -> anyhow::Result<(usize, usize)> {
    let statuses = replica_statuses(topology)?;
    let groups: std::collections::BTreeSet<&String> = statuses.iter().map(|s| &s.group).collect();
    let leading: std::collections::BTreeSet<&String> =
        statuses.iter().filter(|s| s.is_leader()).map(|s| &s.group).collect();
    Ok((leading.len(), groups.len()))
}

fn status(dir: &Path) -> anyhow::Result<ExitCode> {
    let (_, topology) = load(dir)?;
    let mut healthy = true;
    println!(
        "{:<16} {:>7} {:>8} {:>10} {:>6} {:>9} {:>9} {:>9} {:>8}  health",
        "group", "replica", "pid", "role", "term", "leader", "commit", "applied", "refused"
    );
    for ReplicaStatus { group, id, status } in replica_statuses(&topology)? {
        let pid = read_pid(dir, &format!("{group}-{id}"));
        let pid_text = pid.map_or("-".into(), |p| p.to_string());
        match status {
            Ok(s) => {
                let show = |v: &serde_json::Value| if v.is_null() { "-".to_string() } else { v.to_string() };
                println!(
                    "{group:<16} {id:>7} {pid_text:>8} {:>10} {:>6} {:>9} {:>9} {:>9} {:>8}  ok",
                    s["role"].as_str().unwrap_or("?"),
                    show(&s["term"]),
                    show(&s["leader"]),
                    show(&s["commit_index"]),
                    show(&s["applied_index"]),
                    // Everything the replica turned away: strangers, non-members, requests.
                    s["refused"]
                        .as_object()
                        .map_or(0, |counts| counts.values().filter_map(|v| v.as_u64()).sum::<u64>()),
                );
            }
            Err(error) => {
                healthy = false;
                println!(
                    "{group:<16} {id:>7} {pid_text:>8} {:>10} {:>6} {:>9} {:>9} {:>9} {:>8}  DOWN ({error})",
                    "-", "-", "-", "-", "-", "-"
                );
            }
        }
    }
    for sentinel in &topology.sentinels {
        let up = std::net::TcpStream::connect_timeout(&sentinel.http, Duration::from_millis(500)).is_ok();
        healthy &= up;
        println!(
            "{:<16} http://{:<22} {}",
            sentinel.name,
            sentinel.http,
            if up { "ok" } else { "DOWN" }
        );
    }
    Ok(if healthy { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

fn signal(pid: u32, name: &str) {
    let _ = Process::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status();
}

pub fn down(dir: &Path) -> anyhow::Result<ExitCode> {
    let (path, topology) = load(dir)?;
    let running: Vec<(String, u32)> = members(&path, &topology)
        .into_iter()
        .filter_map(|m| read_pid(dir, &m.name).filter(|p| is_alive(*p)).map(|p| (m.name, p)))
        .collect();
    for (_, pid) in &running {
        signal(*pid, "TERM");
    }
    let started = Instant::now();
    while running.iter().any(|(_, pid)| is_alive(*pid)) && started.elapsed() < STOP_TIMEOUT {
        std::thread::sleep(Duration::from_millis(100));
    }
    for (name, pid) in &running {
        if is_alive(*pid) {
            eprintln!("{name} did not stop in {} s; killing it", STOP_TIMEOUT.as_secs());
            signal(*pid, "KILL");
        }
        let _ = std::fs::remove_file(pid_file(dir, name));
    }
    println!(
        "stopped {} processes; data kept in {}",
        running.len(),
        topology.data_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
