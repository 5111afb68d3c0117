//! `specie cluster up | status | down`: a local cluster as processes on this machine. Writes the
//! cluster file and the PKI on first use, starts one process per replica and sentinel (each the
//! program running now, i.e. the `specie` binary, with its role's arguments), keeps their pids in
//! DIR/pids and their logs in DIR/logs, waits for every group to elect a leader, and stops them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use specie_transaction::signing::xonly_bytes;

use crate::credentials::{self, CredentialsError};
use crate::identity::Identity;
use crate::operator::{self, OperatorError, ReplicaStatus};
use crate::{GroupBridges, GroupRole, InvalidTopology, Shape, Topology, TopologyError};

/// The cluster file in a cluster's directory.
pub const TOPOLOGY_FILE: &str = "cluster.toml";
/// The demo's issuer key for a cluster made by `cluster up` (secret, mode 0600).
pub const ISSUER_KEY_FILE: &str = "issuer.key";
/// Every process's metrics endpoint, as Prometheus's file-based service discovery reads it
/// (`file_sd_configs`), rewritten by every `specie cluster up`.
pub const TARGETS_FILE: &str = "prometheus-targets.json";
const START_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a cluster could not be started, inspected or stopped.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} does not exist: start a cluster with `specie cluster up --dir {dir}`")]
    NoCluster { path: PathBuf, dir: PathBuf },
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error("invalid cluster shape: {0}")]
    Shape(#[source] InvalidTopology),
    #[error(
        "{name} exited as it started, so the cluster cannot come up; the end of {}:\n  {tail}\nFix what it \
         says (a busy port: another cluster or program on it? `specie cluster down --dir` the other one, or use \
         --base-port on a new cluster), then run `specie cluster up` again",
        log.display()
    )]
    DiedAtStart { name: String, log: PathBuf, tail: String },
    #[error(
        "{} was made {made}, and this `up` asks for {flag} {asked}: nothing was started. A cluster's \
         topology is fixed when it is made (its data is laid out for it): run `specie cluster up` without \
         {flag} to start this cluster as it is, or give another --dir for a new one (issuers: add the key to \
         `issuers` in the file, then `cluster down` and `up`)",
        path.display()
    )]
    TopologyFixed {
        path: PathBuf,
        flag: &'static str,
        asked: String,
        /// `with FLAG VALUE`, or `without FLAG`.
        made: String,
    },
    /// Writing keys and certificates failed.
    #[error("{what}: {source}")]
    Credentials {
        what: &'static str,
        /// Boxed: the paths and identities it names would make every `SupervisorError` large.
        #[source]
        source: Box<CredentialsError>,
    },
    #[error("cannot ask the replicas for their status: {0}")]
    Status(#[source] OperatorError),
    #[error("the sentinels' {ceremony} did not finish in {waited_s} s ({finished} of {sentinels} done); see {logs}")]
    CeremonyUnfinished {
        ceremony: &'static str,
        finished: usize,
        sentinels: usize,
        waited_s: u64,
        logs: String,
    },
    #[error("the cluster file has no [endorsement] group key to refresh the shares of")]
    NoEndorsementGroup,
    #[error("the sentinels hold shares of different group keys ({keys:?}): remove every sentinel's endorser.key and run `cluster up` again")]
    GroupKeysDiffer { keys: Vec<String> },
    #[error("no group named '{group}' in this cluster; its groups: {groups}")]
    UnknownGroup { group: String, groups: String },
    #[error("group {group} has no replica {id}; its replicas: {ids:?}")]
    NoSuchReplica { group: String, id: u64, ids: Vec<u64> },
    #[error(
        "another membership change runs on this cluster, or a restart or a backup: {0} (one at a time; wait for \
         it, or for its process to exit)"
    )]
    ChangeRunning(#[source] specie_log::DirLockError),
    #[error("group {group}: {reason}")]
    Membership { group: String, reason: String },
    #[error("this cluster has no member named '{name}' (nor is it `operator`); its members: {names}")]
    UnknownMember { name: String, names: String },
    #[error(
        "{} exists and differs from {}: give an empty directory, or remove it if it is stale",
        path.display(),
        from.display()
    )]
    CredentialsDiffer { path: PathBuf, from: PathBuf },
    #[error("rotating FastPay authority {authority}: {reason}")]
    Rotation { authority: u16, reason: String },
    #[error(
        "not every process is ready, and did not become so, so the restart stopped there ({restarted} \
         restarted before, each ready again; stopping one beside another that is down could leave a group \
         without its majority):\n  {}\nBring them back first (`specie cluster status`, `specie cluster up`), \
         then restart",
        not_ready.join("\n  ")
    )]
    NotWhole { not_ready: Vec<String>, restarted: usize },
    #[error(
        "{} not started from {} (no pid file there), so nothing was restarted: restart a member where it runs \
         (its service manager, `specie cluster run`), one at a time, each ready before the next; or name \
         this host's members with --name",
        names.join(", "),
        dir.display()
    )]
    NotStartedHere { names: Vec<String>, dir: PathBuf },
    #[error(
        "{name} restarted but is not ready after {waited_s} s ({last}); the restart stopped there. See {}",
        log.display()
    )]
    NotReadyAgain {
        name: String,
        waited_s: u64,
        last: String,
        log: PathBuf,
    },
    #[error("interrupted: {what}")]
    Interrupted { what: String },
    /// A cluster that cannot be packaged as it is; the reason says what to change.
    #[error("cannot package the cluster: {reason}")]
    Packaging { reason: String },
    /// A backup that cannot be taken or restored; the reason says what to do.
    #[error("{reason}")]
    Backup { reason: String },
    #[error("only {leaders} of {groups} groups have a leader after {waited_s} s; see {logs}")]
    NoLeaders {
        leaders: usize,
        groups: usize,
        waited_s: u64,
        logs: String,
    },
}

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SupervisorError {
    let what = what.into();
    move |source| SupervisorError::Io { what, source }
}

pub(crate) fn credentials(what: &'static str) -> impl FnOnce(CredentialsError) -> SupervisorError {
    move |source| SupervisorError::Credentials {
        what,
        source: Box::new(source),
    }
}

/// The shape of a new cluster (used only when DIR/cluster.toml does not exist yet).
#[derive(Clone, Debug)]
pub struct UpOptions {
    pub dir: PathBuf,
    pub shape: Shape,
    /// More issuer x-only public keys (hex) to trust, besides the one `up` makes.
    pub issuers: Vec<String>,
    /// The flags given on the command line: a cluster that exists already must have what they
    /// ask, or `up` refuses (its topology is fixed at creation).
    pub given: Vec<Given>,
}

/// A flag of `cluster up` given on the command line, with its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Given {
    ShardGroups(usize),
    CoordinatorGroups(usize),
    Atomizer(bool),
    Replicas(usize),
    Sentinels(usize),
    BasePort(u16),
    Authorities(usize),
    AuthorityShards(usize),
    AuthorityReplicas(usize),
    Offline(usize),
    Exchange(usize),
    Endorsement(u16),
    LedgerOfRecord(usize),
    Issuer(String),
}

impl Given {
    /// The flag, what it asks, and what `topology` has, where the two differ.
    fn differs(&self, topology: &Topology) -> Option<(&'static str, String, String)> {
        let committee = topology.fastpay_committee.as_ref();
        let first_authority = committee.and_then(|c| c.authorities.first());
        let count = |n: Option<usize>| n.unwrap_or(0);
        let (flag, asked, has) = match self {
            Given::ShardGroups(n) => ("--shard-groups", n.to_string(), topology.shard_groups.len().to_string()),
            Given::CoordinatorGroups(n) => (
                "--coordinator-groups",
                n.to_string(),
                topology.coordinator_groups.len().to_string(),
            ),
            Given::Atomizer(atomizer) => (
                "--shape",
                if *atomizer { "atomizer" } else { "2pc" }.to_string(),
                topology.shape_name().to_string(),
            ),
            Given::Replicas(n) => (
                "--replicas",
                n.to_string(),
                count(topology.shard_groups.first().map(|g| g.replicas.len())).to_string(),
            ),
            Given::Sentinels(n) => ("--sentinels", n.to_string(), topology.sentinels.len().to_string()),
            Given::BasePort(port) => (
                "--base-port",
                port.to_string(),
                (topology.shard_groups.first().and_then(|g| g.replicas.first()))
                    .map_or_else(String::new, |r| r.address.port().to_string()),
            ),
            Given::Authorities(n) => (
                "--authorities",
                n.to_string(),
                count(committee.map(|c| c.members.len())).to_string(),
            ),
            Given::AuthorityShards(n) => (
                "--authority-shards",
                n.to_string(),
                count(first_authority.map(|a| a.shards.len())).to_string(),
            ),
            Given::AuthorityReplicas(n) => (
                "--authority-replicas",
                n.to_string(),
                count(first_authority.and_then(|a| a.shards.first()).map(|s| s.replicas.len())).to_string(),
            ),
            Given::Offline(n) => (
                "--offline",
                n.to_string(),
                count(topology.offline_authority.as_ref().map(|o| o.replicas.len())).to_string(),
            ),
            Given::Exchange(n) => (
                "--exchange",
                n.to_string(),
                count(topology.exchange.as_ref().map(|e| e.replicas.len())).to_string(),
            ),
            Given::Endorsement(k) => (
                "--endorsement",
                k.to_string(),
                (topology.endorsement.as_ref()).map_or_else(|| "none".into(), |e| e.threshold.to_string()),
            ),
            Given::LedgerOfRecord(n) => (
                "--ledger-of-record",
                n.to_string(),
                count(topology.ledger_of_record.as_ref().map(|l| l.replicas.len())).to_string(),
            ),
            Given::Issuer(key) => {
                let kept = topology.issuers.iter().any(|issuer| issuer.eq_ignore_ascii_case(key));
                (
                    "--issuer",
                    key.clone(),
                    if kept { key.clone() } else { topology.issuers.join(", ") },
                )
            }
        };
        (asked != has).then_some((flag, asked, has))
    }
}

impl UpOptions {
    /// `specie cluster up --dir DIR` with every default: 2 shard groups, 1 coordinator group, 3
    /// replicas, 2 sentinels, ports from 18470.
    pub fn with_defaults(dir: &Path) -> UpOptions {
        UpOptions {
            dir: dir.to_path_buf(),
            shape: Shape::default(),
            issuers: vec![],
            given: vec![],
        }
    }
}

/// One process of the cluster: its name, and the arguments that start it.
#[derive(Clone, Debug)]
pub struct Member {
    pub name: String,
    /// Who it is to its peers (its certificate's name).
    pub identity: Identity,
    pub args: Vec<String>,
}

pub fn members(topology_path: &Path, topology: &Topology) -> Vec<Member> {
    let file = topology_path.display().to_string();
    let mut members = vec![];
    for (role, group, replicas) in topology.replica_groups() {
        // The hidden subcommand that runs one replica of a group of this role.
        let command = match role {
            GroupRole::Shard => "shard",
            GroupRole::Coordinator => "coordinator",
            GroupRole::Authority => "authority",
            GroupRole::Offline => "offline-authority",
            GroupRole::Exchange => "exchange-replica",
            GroupRole::Archiver => "archiver",
            GroupRole::Atomizer => "atomizer",
        };
        for replica in replicas {
            members.push(Member {
                name: format!("{group}-{}", replica.id),
                identity: Identity::Replica {
                    role,
                    group: group.clone(),
                    id: replica.id,
                },
                args: vec![
                    command.into(),
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
    for sentinel in &topology.sentinels {
        members.push(Member {
            name: sentinel.name.clone(),
            identity: Identity::sentinel(&sentinel.name),
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

/// Starts one member in the background (the running program, with the member's arguments), its
/// output appended to DIR/logs/NAME.log.
pub fn spawn_member(dir: &Path, member: &Member) -> Result<u32, SupervisorError> {
    use std::os::unix::process::CommandExt;
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).map_err(io(format!("cannot create {}", logs.display())))?;
    let pids = dir.join("pids");
    std::fs::create_dir_all(&pids).map_err(io(format!("cannot create {}", pids.display())))?;
    let log_path = logs.join(format!("{}.log", member.name));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(io(format!("cannot open {}", log_path.display())))?;
    let program = std::env::current_exe().map_err(io("cannot find the running program"))?;
    let child = Command::new(program)
        .args(&member.args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(io("cannot share the log file"))?)
        .stderr(log)
        // Its own process group: a Ctrl-C meant for the caller does not stop the cluster.
        .process_group(0)
        .spawn()
        .map_err(io(format!("cannot start {}", member.name)))?;
    let pid_path = pid_file(dir, &member.name);
    std::fs::write(&pid_path, child.id().to_string()).map_err(io(format!("cannot write {}", pid_path.display())))?;
    Ok(child.id())
}

/// The cluster file of the cluster in `dir` (canonical path) and its topology.
pub fn load(dir: &Path) -> Result<(PathBuf, Topology), SupervisorError> {
    let path = dir.join(TOPOLOGY_FILE);
    if !path.exists() {
        return Err(SupervisorError::NoCluster {
            path,
            dir: dir.to_path_buf(),
        });
    }
    let topology = Topology::load(&path)?;
    let canonical = std::fs::canonicalize(&path).map_err(io(format!("cannot resolve {}", path.display())))?;
    Ok((canonical, topology))
}

/// Writes a new cluster file (and the issuer and attestation keys it names) for `options`.
fn create(options: &UpOptions, path: &Path) -> Result<(), SupervisorError> {
    let dir = &options.dir;
    let issuer = secp256k1::Keypair::new_global(&mut rand::thread_rng());
    credentials::write_secret(&dir.join(ISSUER_KEY_FILE), &hex::encode(issuer.secret_bytes()))
        .map_err(credentials("cannot write the issuer key"))?;
    let mut issuers = vec![hex::encode(xonly_bytes(&issuer))];
    issuers.extend(options.issuers.iter().map(|k| k.to_ascii_lowercase()));
    let dir = std::fs::canonicalize(dir).map_err(io(format!("cannot resolve {}", dir.display())))?;
    let attestation_keys = (0..options.shape.sentinels)
        .map(|i| credentials::create_attestation_key(&dir.join("pki"), &Shape::sentinel_name(i)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(credentials("cannot create the sentinels' attestation keys"))?;
    let authorities = options.shape.committee.map_or(0, |c| c.authorities);
    let authority_keys = (0..authorities)
        .map(|i| {
            let index = u16::try_from(i).map_err(|_| {
                SupervisorError::Shape(InvalidTopology::FastpayCommittee(
                    specie_fastpay::CommitteeError::TooMany { members: authorities },
                ))
            })?;
            credentials::create_authority_key(&dir.join("pki"), index)
                .map_err(credentials("cannot create the FastPay authorities' signing keys"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let offline_bridge = (options.shape.offline_replicas > 0)
        .then(|| credentials::create_offline_authority(&dir.join("pki")))
        .transpose()
        .map_err(credentials(
            "cannot create the offline authority's seed and operator token",
        ))?;
    let exchange_bridge = options
        .shape
        .exchange
        .is_some()
        .then(|| credentials::create_exchange(&dir.join("pki")))
        .transpose()
        .map_err(credentials("cannot create the exchange's seed"))?;
    let bridges = GroupBridges {
        offline: offline_bridge,
        exchange: exchange_bridge,
    };
    let topology = Topology::local(
        options.shape.clone(),
        &dir,
        issuers,
        attestation_keys,
        authority_keys,
        bridges,
    )
    .map_err(SupervisorError::Shape)?;
    std::fs::write(path, topology.to_toml()).map_err(io(format!("cannot write {}", path.display())))?;
    println!("wrote {} (edit it to change the topology)", path.display());
    Ok(())
}

/// `specie cluster up`: creates the cluster on first use, issues missing credentials, starts
/// every member that is not running and waits until every group has a leader.
pub fn up(options: &UpOptions) -> Result<(), SupervisorError> {
    let dir = &options.dir;
    std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let path = dir.join(TOPOLOGY_FILE);
    let existed = path.exists();
    if !existed {
        create(options, &path)?;
    }
    let (path, topology) = load(dir)?;
    if existed {
        if let Some((flag, asked, has)) = options.given.iter().find_map(|given| given.differs(&topology)) {
            let made = match has.as_str() {
                "0" | "none" => format!("without {flag}"),
                _ => format!("with {flag} {has}"),
            };
            return Err(SupervisorError::TopologyFixed {
                path,
                flag,
                asked,
                made,
            });
        }
    }
    let issued = credentials::ensure_pki(&topology).map_err(credentials("cannot issue the cluster's certificates"))?;
    if !issued.is_empty() {
        println!(
            "issued {} PKI files in {} (mutual TLS between every process)",
            issued.len(),
            topology.pki_dir.display()
        );
    }
    write_scrape_targets(dir, &topology)?;
    crate::membership::prepare_founders(&topology)?;
    // Idempotent: starts only what is not running, so it also restarts a member that died.
    let is_stopped = |m: &Member| !read_pid(dir, &m.name).is_some_and(is_alive);
    let mut started_count = 0;
    let (path, topology) = if topology.endorsement.as_ref().is_some_and(|e| e.group_key.is_none()) {
        // The sentinels make the group key first; the coordinators start once the file names it.
        let sentinels: Vec<Member> = members(&path, &topology)
            .into_iter()
            .filter(|m| topology.sentinels.iter().any(|s| s.name == m.name))
            .filter(is_stopped)
            .collect();
        for member in &sentinels {
            spawn_member(dir, member)?;
        }
        started_count += sentinels.len();
        println!(
            "started the {} sentinels: their key generation ceremony…",
            topology.sentinels.len()
        );
        record_group_key(dir, &path, topology)?;
        load(dir)?
    } else {
        (path, topology)
    };
    let stopped: Vec<Member> = members(&path, &topology).into_iter().filter(is_stopped).collect();
    let mut spawned = vec![];
    for member in &stopped {
        spawned.push((member.name.as_str(), spawn_member(dir, member)?));
    }
    started_count += stopped.len();
    println!("started {started_count} processes; waiting for every group to elect a leader…");
    let started = Instant::now();
    loop {
        if let Some(&(name, _)) = spawned.iter().find(|(_, pid)| !is_alive(*pid)) {
            return Err(died_at_start(dir, name));
        }
        let (leaders, groups, answered) = leaders_elected(&topology)?;
        // Every replica started must answer too: one that dies after its group elected
        // (a directory refused at start) is reported, not left for `status` to find.
        let replicas_answer = (spawned.iter())
            .all(|(name, _)| answered.contains(*name) || topology.sentinels.iter().any(|s| s.name == *name));
        if leaders == groups && replicas_answer {
            break;
        }
        if started.elapsed() > START_TIMEOUT {
            return Err(SupervisorError::NoLeaders {
                leaders,
                groups,
                waited_s: START_TIMEOUT.as_secs(),
                logs: format!("{}/logs", dir.display()),
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    println!("cluster up in {:.1} s", started.elapsed().as_secs_f64());
    print_where_to_reach(dir, &topology);
    Ok(())
}

/// A process `up` started that exited before its group had a leader, with the end of its log
/// (where it says why: a busy port, a locked directory, a bad file).
pub(crate) fn died_at_start(dir: &Path, name: &str) -> SupervisorError {
    let log = dir.join("logs").join(format!("{name}.log"));
    let text = std::fs::File::open(&log)
        .and_then(|file| {
            use std::io::{Read, Seek, SeekFrom};
            let mut file = file;
            let length = file.metadata()?.len();
            file.seek(SeekFrom::Start(length.saturating_sub(LOG_TAIL_BYTES)))?;
            let mut bytes = Vec::new();
            file.take(LOG_TAIL_BYTES).read_to_end(&mut bytes)?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        })
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|line| !line.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n  ");
    SupervisorError::DiedAtStart {
        name: name.to_string(),
        log,
        tail,
    }
}

/// [`TARGETS_FILE`]: one target group per process, labelled with its role, group and replica.
pub(crate) fn write_scrape_targets(dir: &Path, topology: &Topology) -> Result<(), SupervisorError> {
    let groups: Vec<serde_json::Value> = (topology.scrape_targets().into_iter())
        .map(|target| {
            serde_json::json!({
                "targets": [target.address.to_string()],
                "labels": {"role": target.role, "group": target.group, "replica": target.replica},
            })
        })
        .collect();
    let path = dir.join(TARGETS_FILE);
    let text = serde_json::to_string_pretty(&groups).expect("JSON values serialise");
    std::fs::write(&path, text + "\n").map_err(io(format!("cannot write {}", path.display())))
}

/// Where each service of the cluster `up` started listens, and the commands that reach them.
fn print_where_to_reach(dir: &Path, topology: &Topology) {
    println!(
        "  metrics: {} processes answer /metrics, /livez and /readyz; Prometheus scrapes them from {} \
         (file_sd_configs; see docs/operator-guide.md, \"Metrics and health\")",
        topology.scrape_targets().len(),
        dir.join(TARGETS_FILE).display()
    );
    for sentinel in &topology.sentinels {
        println!("  {}: http://{}", sentinel.name, sentinel.http);
    }
    for group in topology.authority_groups() {
        let http: Vec<String> = group.replicas.iter().map(|r| format!("http://{}", r.http)).collect();
        println!("  {} (FastPay): {}", group.name, http.join(" "));
    }
    if let Some(offline) = &topology.offline_authority {
        println!(
            "  offline authority: {} (operator token in {})",
            offline.http_urls(),
            credentials::offline_operator_token_path(&topology.pki_dir).display()
        );
        println!("devices:  specie offline device --authority {} …", offline.http_urls());
    }
    if let Some(exchange) = &topology.exchange {
        let assets: Vec<&str> = exchange.assets.iter().map(|a| a.name.as_str()).collect();
        println!(
            "  exchange ({}): {} (bridge key {})",
            assets.join(", "),
            exchange.http_urls(),
            exchange.bridge
        );
        println!(
            "traders:  specie exchange account --exchange {} …",
            exchange.http_urls()
        );
    }
    let first = &topology.sentinels[0].http;
    if let Some(ledger) = &topology.ledger_of_record {
        println!(
            "  ledger of record: {} archiver replicas; read it at http://{first}/v1/ledger",
            ledger.replicas.len()
        );
    }
    if let Some(atomizer) = &topology.atomizer {
        println!(
            "  shape: atomizer ({} replicas order every transaction into blocks; window {} blocks)",
            atomizer.replicas.len(),
            atomizer.window_blocks
        );
    }
    println!("wallets:  specie wallet --node http://{first} …");
    println!("demo:     specie demo --cluster {}", dir.display());
    println!("status:   specie cluster status --dir {}", dir.display());
}

pub(crate) fn replica_statuses(topology: &Topology) -> Result<Vec<ReplicaStatus>, SupervisorError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io("cannot start a runtime"))?;
    runtime
        .block_on(operator::replica_statuses(topology, None, Duration::from_millis(1000)))
        .map_err(SupervisorError::Status)
}

/// How many groups have a leader, of how many, and which replicas (`group-id`) answered.
fn leaders_elected(topology: &Topology) -> Result<(usize, usize, BTreeSet<String>), SupervisorError> {
    let statuses = replica_statuses(topology)?;
    let groups: BTreeSet<&String> = statuses.iter().map(|s| &s.group).collect();
    let leading: BTreeSet<&String> = statuses.iter().filter(|s| s.is_leader()).map(|s| &s.group).collect();
    let answered = (statuses.iter())
        .filter(|s| s.status.is_ok())
        .map(|s| format!("{}-{}", s.group, s.id))
        .collect();
    Ok((leading.len(), groups.len(), answered))
}

/// How long the sentinels have for their key generation ceremony.
const CEREMONY_TIMEOUT: Duration = Duration::from_secs(60);

/// Waits until every sentinel holds its share of one group key, and writes that key into the
/// cluster file (`[endorsement] group_key`), which coordinators verify endorsements under.
fn record_group_key(dir: &Path, path: &Path, mut topology: Topology) -> Result<(), SupervisorError> {
    let started = Instant::now();
    let keys = loop {
        let shares = (topology.sentinels.iter())
            .map(|s| credentials::endorser_keys(&topology, &s.name))
            .collect::<Result<Vec<_>, _>>()
            .map_err(credentials("cannot read a sentinel's share"))?;
        let finished: Vec<_> = shares.into_iter().flatten().collect();
        if finished.len() == topology.sentinels.len() {
            break finished;
        }
        if started.elapsed() > CEREMONY_TIMEOUT {
            return Err(SupervisorError::CeremonyUnfinished {
                ceremony: "key generation",
                finished: finished.len(),
                sentinels: topology.sentinels.len(),
                waited_s: CEREMONY_TIMEOUT.as_secs(),
                logs: format!("{}/logs", dir.display()),
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut group_keys: Vec<String> = keys.iter().map(|k| hex::encode(k.group_key().0)).collect();
    group_keys.dedup();
    let [group_key] = group_keys.as_slice() else {
        return Err(SupervisorError::GroupKeysDiffer { keys: group_keys });
    };
    println!(
        "the sentinels' group key: {group_key} ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    if let Some(endorsement) = topology.endorsement.as_mut() {
        endorsement.group_key = Some(group_key.clone());
    }
    std::fs::write(path, topology.to_toml()).map_err(io(format!("cannot write {}", path.display())))
}

/// `specie cluster status`: prints each replica's and sentinel's state; returns whether every
/// one answered.
/// How much of a process's log `up` shows when it died at start.
const LOG_TAIL_BYTES: u64 = 4096;
const LOG_TAIL_LINES: usize = 8;

/// Why `status` does not count an answering process as this cluster's.
const NOT_OURS: &str = "the process this directory started is not running; another process answers on its port: \
                        another cluster? `specie cluster up` restarts this one's";

/// Why `status`, in a directory that started nothing, does not count an answering sentinel.
const NOT_THIS_NETWORK: &str = "it answers, but not with this cluster's network_id: another cluster on its address?";

pub fn status(dir: &Path) -> Result<bool, SupervisorError> {
    let (_, topology) = load(dir)?;
    let mut healthy = true;
    println!(
        "{:<20} {:>7} {:>8} {:>10} {:>6} {:>9} {:>9} {:>9} {:>8}  health",
        "group", "replica", "pid", "role", "term", "leader", "commit", "applied", "refused"
    );
    // A directory that started processes (`cluster up`) counts only the answers of its own; one
    // that started none (an operator's host, members run by `cluster run` on their hosts)
    // counts every answer: over mutual TLS, only a holder of this cluster's certificates can.
    let started_here = dir.join("pids").read_dir().is_ok_and(|mut pids| pids.next().is_some());
    let ours = |name: &str| !started_here || read_pid(dir, name).is_some_and(is_alive);
    let statuses = replica_statuses(&topology)?;
    for ReplicaStatus { group, id, status } in &statuses {
        let (group, id) = (group.as_str(), *id);
        let pid = read_pid(dir, &format!("{group}-{id}"));
        let pid_text = pid.map_or("-".into(), |p| p.to_string());
        match status {
            // An answer on its address from a process this directory did not start (another
            // cluster on the same ports) says nothing about this cluster.
            Ok(_) if !ours(&format!("{group}-{id}")) => {
                healthy = false;
                println!(
                    "{group:<20} {id:>7} {pid_text:>8} {:>10} {:>6} {:>9} {:>9} {:>9} {:>8}  DOWN ({NOT_OURS})",
                    "-", "-", "-", "-", "-", "-"
                );
            }
            Ok(s) => {
                let show = |v: &serde_json::Value| if v.is_null() { "-".to_string() } else { v.to_string() };
                println!(
                    "{group:<20} {id:>7} {pid_text:>8} {:>10} {:>6} {:>9} {:>9} {:>9} {:>8}  ok",
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
                    "{group:<20} {id:>7} {pid_text:>8} {:>10} {:>6} {:>9} {:>9} {:>9} {:>8}  DOWN ({error})",
                    "-", "-", "-", "-", "-", "-"
                );
            }
        }
    }
    healthy &= print_sentinels(dir, &topology, started_here);
    if let Some(endorsement) = &topology.endorsement {
        println!(
            "endorsement: {} of {} sentinels sign each transaction; group key {}",
            endorsement.threshold,
            topology.sentinels.len(),
            endorsement
                .group_key
                .as_deref()
                .unwrap_or("not made yet (the sentinels' key generation)")
        );
    }
    print_authority_figures(&topology, &statuses);
    print_offline_figures(&statuses);
    print_exchange_figures(&statuses);
    print_ledger_figures(&statuses);
    print_atomizer_figures(&statuses);
    Ok(healthy)
}

/// `status`'s line per sentinel (and its endorser's address); returns whether each is up and
/// this cluster's: one this directory started, alive; or, started elsewhere, serving the
/// cluster's network id (sentinels answer over plain HTTP, unlike the replicas' mutual TLS).
fn print_sentinels(dir: &Path, topology: &Topology, started_here: bool) -> bool {
    let mut healthy = true;
    let answers = |address: &std::net::SocketAddr| {
        std::net::TcpStream::connect_timeout(address, Duration::from_millis(500)).is_ok()
    };
    // Started elsewhere, a sentinel is this cluster's if it serves the cluster's network id.
    let serves_ours = |sentinel: &crate::topology::Sentinel| {
        let Some(network_id) = &topology.network_id else {
            return true;
        };
        let info = specie_wallet::NodeClient::new(&format!("http://{}", sentinel.http)).and_then(|node| node.info());
        info.is_ok_and(|info| info.network_id.as_ref() == Some(network_id))
    };
    for sentinel in &topology.sentinels {
        let up = answers(&sentinel.http);
        let not_ours = match started_here {
            true => !read_pid(dir, &sentinel.name).is_some_and(is_alive),
            false => up && !serves_ours(sentinel),
        };
        let not_ours = not_ours.then_some(if started_here { NOT_OURS } else { NOT_THIS_NETWORK });
        healthy &= up && not_ours.is_none();
        let health = match (up, not_ours) {
            (false, _) => "DOWN".to_string(),
            (true, None) => "ok".to_string(),
            (true, Some(why)) => format!("DOWN ({why})"),
        };
        print!("{:<20} http://{:<22} {health}", sentinel.name, sentinel.http);
        match sentinel.endorser.filter(|_| topology.endorsement.is_some()) {
            Some(endorser) => {
                let up = answers(&endorser);
                healthy &= up;
                println!("  endorser {endorser} {}", if up { "ok" } else { "DOWN" });
            }
            None => println!(),
        }
    }
    healthy
}

/// The atomizer shape: the atomizer replicas' block height and the height each shard replica
/// applied; a shard group behind the atomizer's leader is catching up (or stuck: see its log).
fn print_atomizer_figures(statuses: &[ReplicaStatus]) {
    let answered: Vec<_> = answered_in(statuses, |_| true)
        .into_iter()
        .filter_map(|(status, s)| {
            let figures = s.get("atomizer").or_else(|| s.get("uhs_shard"))?;
            Some((status, s["role"] == "leader", figures))
        })
        .collect();
    if answered.is_empty() {
        return;
    }
    println!();
    println!(
        "{:<20} {:>7} {:>8} {:>9} {:>12}",
        "atomizer shape", "replica", "height", "admitted", "shards at it"
    );
    for (ReplicaStatus { group, id, .. }, leads, figures) in answered {
        let show = |v: &serde_json::Value| if v.is_null() { "-".to_string() } else { v.to_string() };
        // Only the atomizer's leader tracks the shards and admits transactions.
        let (admitted, caught_up) = match leads {
            true => (show(&figures["admitted"]), show(&figures["shards_caught_up"])),
            false => ("-".to_string(), "-".to_string()),
        };
        println!(
            "{group:<20} {id:>7} {:>8} {admitted:>9} {caught_up:>12}",
            show(&figures["height"]),
        );
    }
}

/// The ledger of record as each archiver replica holds it: equal heads at equal heights say the
/// replicas agree; the UHS digest is the one the shards' must equal once nothing is undecided.
fn print_ledger_figures(statuses: &[ReplicaStatus]) {
    let answered = answered_in(statuses, |group| group == crate::ARCHIVER_GROUP);
    if answered.is_empty() {
        return;
    }
    println!();
    println!(
        "{:<10} {:>7} {:>8} {:<16} {:>10} {:<16} {:>8} {:>9}",
        "ledger", "replica", "height", "head", "uhs ids", "uhs digest", "waiting", "undecided"
    );
    for (ReplicaStatus { group, id, .. }, s) in answered {
        let ledger = &s["ledger"];
        let short = |v: &serde_json::Value| v.as_str().map_or("-".to_string(), |h| h.chars().take(16).collect());
        println!(
            "{group:<10} {id:>7} {:>8} {:<16} {:>10} {:<16} {:>8} {:>9}",
            ledger["height"].to_string(),
            short(&ledger["head"]),
            ledger["uhs_ids"].to_string(),
            short(&ledger["uhs_digest"]),
            ledger["waiting"].to_string(),
            ledger["undecided"].to_string(),
        );
    }
}

/// The replicas of the groups `wanted` picks that answered, with their status.
fn answered_in(
    statuses: &[ReplicaStatus],
    wanted: impl Fn(&String) -> bool,
) -> Vec<(&ReplicaStatus, &serde_json::Value)> {
    statuses
        .iter()
        .filter(|s| wanted(&s.group))
        .filter_map(|s| Some((s, s.status.as_ref().ok()?)))
        .collect()
}

/// The offline authority's books, from each replica's copy of its role.
fn print_offline_figures(statuses: &[ReplicaStatus]) {
    let answered = answered_in(statuses, |group| group == crate::OFFLINE_AUTHORITY_GROUP);
    if answered.is_empty() {
        return;
    }
    println!();
    println!(
        "{:<20} {:>7} {:>14} {:>14} {:>14} {:>7} {:>8}",
        "offline authority", "replica", "funded", "defunded", "outstanding", "period", "debtors"
    );
    for (ReplicaStatus { group, id, .. }, s) in answered {
        let books = &s["offline"];
        let show = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
        println!(
            "{group:<20} {id:>7} {:>14} {:>14} {:>14} {:>7} {:>8}",
            show(&books["funded"]),
            show(&books["defunded"]),
            show(&books["outstanding"]),
            show(&books["current_period"]),
            show(&books["debtors"]),
        );
    }
}

/// The exchange's height and state hash, from each replica's copy of its ledger: equal hashes
/// at equal heights say the replicas agree.
fn print_exchange_figures(statuses: &[ReplicaStatus]) {
    let answered = answered_in(statuses, |group| group == crate::EXCHANGE_GROUP);
    if answered.is_empty() {
        return;
    }
    println!();
    println!(
        "{:<20} {:>7} {:>9} {:>9} {:>9}  state hash",
        "exchange", "replica", "height", "accounts", "offers"
    );
    for (ReplicaStatus { group, id, .. }, s) in answered {
        let ledger = &s["exchange"];
        let show = |field: &str| ledger[field].to_string();
        println!(
            "{group:<20} {id:>7} {:>9} {:>9} {:>9}  {}",
            show("height"),
            show("accounts"),
            show("offers"),
            ledger["state_hash"].as_str().unwrap_or("?"),
        );
    }
}

/// The FastPay authority shards' own figures, from each replica's copy of its role.
fn print_authority_figures(topology: &Topology, statuses: &[ReplicaStatus]) {
    let groups: BTreeSet<String> = topology.authority_groups().into_iter().map(|g| g.name).collect();
    let answered = answered_in(statuses, |group| groups.contains(group));
    if answered.is_empty() {
        return;
    }
    println!();
    println!(
        "{:<20} {:>7} {:>5} {:>6} {:>9} {:>9} {:>9} {:>14} {:>14}",
        "fastpay shard", "replica", "epoch", "seated", "accounts", "votes", "confirmed", "credits unacked", "funded"
    );
    for (ReplicaStatus { group, id, .. }, s) in answered {
        let authority = &s["authority"];
        let show = |v: &serde_json::Value| if v.is_null() { "-".to_string() } else { v.to_string() };
        println!(
            "{group:<20} {id:>7} {:>5} {:>6} {:>9} {:>9} {:>9} {:>14} {:>14}",
            show(&authority["epoch"]),
            show(&authority["seated"]),
            show(&authority["accounts"]),
            show(&authority["votes"]),
            show(&authority["confirmed"]),
            show(&authority["credits_unacked"]),
            show(&authority["funded"]),
        );
    }
}

fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status();
}

/// `specie cluster down`: SIGTERM to every running member, SIGKILL to any still alive after
/// [`STOP_TIMEOUT`]. The data stays.
pub fn down(dir: &Path) -> Result<(), SupervisorError> {
    let (path, topology) = load(dir)?;
    let stopped = stop(dir, &members(&path, &topology));
    println!(
        "stopped {stopped} processes; data kept in {}",
        topology.data_dir.display()
    );
    Ok(())
}

/// Stops `members` that run (SIGTERM, then SIGKILL after `STOP_TIMEOUT`); how many ran.
pub(crate) fn stop(dir: &Path, members: &[Member]) -> usize {
    let running: Vec<(&str, u32)> = members
        .iter()
        .filter_map(|m| {
            read_pid(dir, &m.name)
                .filter(|p| is_alive(*p))
                .map(|p| (m.name.as_str(), p))
        })
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
    running.len()
}

/// `specie cluster refresh-endorsement`: new shares of the same group key for every sentinel
/// (FROST's proactive refresh, among the sentinels as their key generation is). Each sentinel is
/// told by a marker in its data directory, restarted, runs the refresh with the others, replaces
/// its share and removes the marker. Old shares stop combining with new ones, so whatever an
/// attacker learned of fewer than k old shares is worthless afterwards.
pub fn refresh_endorsement(dir: &Path) -> Result<(), SupervisorError> {
    let (path, topology) = load(dir)?;
    let listed = (topology.endorsement.as_ref())
        .and_then(|e| e.group_key.clone())
        .ok_or(SupervisorError::NoEndorsementGroup)?;
    for sentinel in &topology.sentinels {
        let marker = credentials::refresh_marker_path(&topology, &sentinel.name);
        std::fs::write(&marker, b"refresh\n").map_err(io(format!("cannot write {}", marker.display())))?;
    }
    let sentinels: Vec<Member> = members(&path, &topology)
        .into_iter()
        .filter(|m| topology.sentinels.iter().any(|s| s.name == m.name))
        .collect();
    stop(dir, &sentinels);
    for member in &sentinels {
        spawn_member(dir, member)?;
    }
    println!("restarted the {} sentinels: their refresh ceremony…", sentinels.len());
    let started = Instant::now();
    let pending = || {
        (topology.sentinels.iter())
            .filter(|s| credentials::refresh_marker_path(&topology, &s.name).exists())
            .count()
    };
    while pending() > 0 {
        if started.elapsed() > CEREMONY_TIMEOUT {
            return Err(SupervisorError::CeremonyUnfinished {
                ceremony: "refresh of their shares",
                finished: topology.sentinels.len() - pending(),
                sentinels: topology.sentinels.len(),
                waited_s: CEREMONY_TIMEOUT.as_secs(),
                logs: format!("{}/logs", dir.display()),
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for sentinel in &topology.sentinels {
        // Each share is checked against the listed group key, so it did not change.
        credentials::endorser_keys(&topology, &sentinel.name)
            .map_err(credentials("a refreshed share does not check"))?;
    }
    println!(
        "refreshed every sentinel's share in {:.1} s; group key {listed} unchanged",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
