//! `specie cluster up | status | down`, and the role processes they start: their arguments (the
//! work is in `specie_cluster::supervisor` and `specie_cluster::role_process`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use specie_cluster::membership;
use specie_cluster::supervisor::{self, UpOptions};
use specie_cluster::{role_process, CommitteeShape, ExchangeAsset, ExchangeShape, Shape};

#[derive(Args, Debug)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Start a local cluster on 127.0.0.1: shard groups and coordinator groups replicated by Raft,
    /// sentinels serving the wallets' HTTP API, with --authorities a FastPay committee, with
    /// --offline the offline cash authority and with --exchange the exchange. Writes DIR/cluster.toml on first use (edit
    /// it to change the topology) and issues what DIR/pki lacks: a cluster CA and one key and
    /// certificate per process, for mutual TLS between all of them (to bring your own CA, see
    /// docs/operator-guide.md). Logs to DIR/logs, and returns once every group has a leader.
    /// Starts only members that are not running, so it also restarts one that died.
    Up(Box<UpArgs>),
    /// Show each group's leader, term, commit and applied index, how many connections and
    /// requests each replica refused (which and why: its log in DIR/logs), each process's
    /// health, and each FastPay authority shard's accounts, votes, confirmations and
    /// unacknowledged credits.
    Status(DirArgs),
    /// Stop every process of the cluster (SIGTERM, then SIGKILL after 10 s). Data stays in DIR.
    Down(DirArgs),
    /// Give every sentinel a new share of the same endorsement group key (FROST's proactive
    /// refresh, run among the sentinels as their key generation is): restarts the sentinels,
    /// waits until each has replaced its share. Old shares no longer combine with new ones, so
    /// what an attacker learned of fewer than k old shares is worthless afterwards. Every
    /// sentinel must take part.
    RefreshEndorsement(DirArgs),
    /// Add a replica to a running group (one change at a time, under load): a new id the group
    /// never had, a certificate from the cluster's CA, a line in cluster.toml (every process
    /// follows it), the process started on this host on free ports, added as a learner and
    /// promoted to voter once caught up. Prints the new replica's id.
    AddReplica(GroupArgs),
    /// Remove a replica from its group for good: the group's leader commits the new membership
    /// (a leader removing itself steps down), then the process is stopped and its id retired in
    /// cluster.toml, never to be used again. Its data directory is kept.
    RemoveReplica(MemberArgs),
    /// Rebuild a lost, wiped or dead replica under a new id: add-replica, then remove-replica of
    /// the old one, so the group never has fewer voters than before. A replica whose directory
    /// was lost must be replaced, never restarted: it would vote having forgotten its votes.
    ReplaceReplica(MemberArgs),
    /// Compare each shard group's replicas: the size of the UHS each holds itself and SHA-256
    /// over its sorted ids (what `GET /v1/uhs/digest` sums up for the whole cluster). Waits up to
    /// 10 s for followers still applying; exits 2 if a group's replicas still differ. Run it
    /// with no transactions in flight, e.g. after replacing a replica.
    Digests(DirArgs),
    /// Move the FastPay committee to its next epoch with a new key for one authority (a key
    /// that may have leaked, a machine retired), with payments going on: the epoch's committee
    /// record, signed by a quorum of the current seats, is appended to cluster.toml (sentinels
    /// and clients follow it) and kept in the ledger through the core (which keeps one record
    /// per epoch); every authority shard enters the epoch, the authority's own
    /// shards hand their state over to its new key and vote no more; its processes restart with
    /// the new key on the same data, and the old key is deleted. Payers hear of the epoch from
    /// the authorities and pay again in its name. Interrupted, run it again: it takes up where
    /// it stopped. Prints the new epoch.
    RotateAuthority(RotateArgs),
    /// Run one process of the cluster in the foreground, on this host: the member NAME of
    /// DIR/cluster.toml (a replica as `<group>-<replica>`, e.g. shard-0-1 or
    /// authority-2-shard-0-1, or a sentinel, e.g. sentinel-0), binding the addresses the file
    /// gives it and logging to stderr, as a service manager (systemd) or a container runs it.
    /// Each host holds the same cluster.toml, at the same path, and only that member's
    /// credentials (`specie cluster credentials`) in the file's pki_dir. `cluster up` is the
    /// one-host way to start them all; run a member with one or the other, not both
    Run(RunArgs),
    /// Copy what one member of the cluster needs of its PKI, and nothing more, into a directory
    /// to take to that member's host (its pki_dir there): the CA certificate, its certificate
    /// and key, and its role's secrets (a sentinel's attestation key, an authority's seat key,
    /// the offline authority's and the exchange's seeds). NAME `operator`: what `cluster status`
    /// and `cluster digests` need. Prints each file written
    Credentials(CredentialsArgs),
    /// Restart the cluster's processes one at a time, each answering /readyz before the next
    /// stops, group by group with each group's leader last, then the sentinels: how a cluster
    /// takes a new build while it serves (install the build, run `cluster restart` with it:
    /// every process comes back as the program that runs this command). Refuses to begin while
    /// a process is not ready, and before each stop checks the others of its group again;
    /// stops at the first that is not ready again within 60 s. With --name, only that member.
    /// Only members this directory started: one started on another host is restarted there
    Restart(RestartArgs),
    /// Write every group's state at one consistent cut to --out (a new or empty directory):
    /// each group's leader gives its applied state when no group is applying anything, checked
    /// before and after; the sentinels this directory started are held (stopped, then started
    /// again) meanwhile so that a moment comes, and transactions in flight finish. Writes
    /// GROUP.state per group, a copy of cluster.toml, and manifest.json (sizes, SHA-256, the
    /// applied index of each) last. Holds no keys: keep the PKI's backup apart
    Backup(BackupArgs),
    /// Build a new cluster in --dir (new or empty) from a backup: the backup's cluster file
    /// with this directory's data and PKI, the PKI copied from --pki (default: the backed-up
    /// cluster's pki_dir), its groups founded afresh, each replica starting from its group's
    /// state (copied into DIR/restored-from). Then `cluster up --dir DIR` starts it on the
    /// backup's addresses (edit DIR/cluster.toml first to move it), serving the same UHS and
    /// ledger of record as at the cut. The issuer's key is not the cluster's: copy it yourself
    Restore(RestoreArgs),
    /// Write the cluster as container deployments into --out: a Compose file (--target
    /// compose) or Kubernetes objects (--target kubernetes: per member a StatefulSet with a
    /// volume of its own and readiness from /readyz, and a Service whose cluster IP is its
    /// address; the cluster file as a ConfigMap), the cluster file as containers read it
    /// (founding = true, for their first start on empty volumes) and credentials.sh, which puts
    /// each member's credentials, and nothing more, in pki/<member> (and a Secret). Every
    /// member's address in cluster.toml must be the one it will have. No key is written
    Package(PackageArgs),
    /// Exit 0 if member NAME answers /readyz with 200, else 1 with its reason: a health check
    /// for a container or a service manager
    Ready(RunTargetArgs),
}

#[derive(Args, Debug)]
pub struct PackageArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// compose or kubernetes.
    #[arg(long, value_parser = ["compose", "kubernetes"])]
    pub target: String,
    /// Where to write the files (made if missing; files of the same names are replaced).
    #[arg(long)]
    pub out: PathBuf,
    /// The container image (the repository's Containerfile builds it).
    #[arg(long, default_value = specie_cluster::packaging::DEFAULT_IMAGE)]
    pub image: String,
}

#[derive(Args, Debug)]
pub struct RunTargetArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The member, as `cluster status` lists it.
    #[arg(long)]
    pub name: String,
}

#[derive(Args, Debug)]
pub struct BackupArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// Where to write the backup (a new or empty directory).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// The backup (a directory `cluster backup --out` wrote).
    #[arg(long)]
    pub from: PathBuf,
    /// The new cluster's directory (new or empty).
    #[arg(long)]
    pub dir: PathBuf,
    /// The cluster's PKI (its ca.crt, certificates and keys), if not at the backed-up cluster's pki_dir.
    #[arg(long)]
    pub pki: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct RestartArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// Only this member (`<group>-<replica>` or a sentinel's name), once the others are ready.
    #[arg(long)]
    pub name: Option<String>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The member to run, as `cluster status` lists it: `<group>-<replica>` or a sentinel's name.
    #[arg(long)]
    pub name: String,
    /// Bind 0.0.0.0 (or ::) on the ports the file gives the member, not the file's address
    /// itself: for a container that peers reach at an address that is not its own (a Kubernetes
    /// service's cluster IP). Peers still use the file's addresses.
    #[arg(long)]
    pub listen_any: bool,
}

#[derive(Args, Debug)]
pub struct CredentialsArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The member whose credentials to copy (`<group>-<replica>`, a sentinel's name), or
    /// `operator`.
    #[arg(long)]
    pub name: String,
    /// Where to copy them (made private if new; files already there must be the same).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct RotateArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The authority (its seat in the committee, 0 first) that gets a new key.
    #[arg(long)]
    pub authority: u16,
}

#[derive(Args, Debug)]
pub struct GroupArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The group, as `cluster status` names it (shard-0, coordinator-0, offline-authority,
    /// exchange, archiver, atomizer, authority-0-shard-0, …).
    #[arg(long)]
    pub group: String,
}

#[derive(Args, Debug)]
pub struct MemberArgs {
    #[command(flatten)]
    pub group: GroupArgs,
    /// The replica's id in its group (the `replica` column of `cluster status`).
    #[arg(long)]
    pub replica: u64,
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
    /// Shard groups [default: 2]. This flag and those below shape a new cluster: on a DIR whose
    /// cluster.toml exists, a flag that asks for something else than the cluster has is refused.
    #[arg(long)]
    pub shard_groups: Option<usize>,
    /// Coordinator groups (the 2PC shape). Sentinels send each group batches in turn and every
    /// shard serves all of them at once, so 2PC's work spreads over the groups [default: one per
    /// 8 cores of this machine, at least 1 and at most one per shard group].
    #[arg(long)]
    pub coordinator_groups: Option<usize>,
    /// How the core orders transactions: `2pc`, coordinator groups running two-phase commit
    /// across the shard groups (Hamilton §4, the most throughput), or `atomizer`, one atomizer
    /// group ordering every transaction into blocks the shard groups apply (Hamilton §5, one
    /// global order; docs/atomizer-shape.md). Chosen at creation [default: 2pc].
    #[arg(long, value_enum)]
    pub shape: Option<crate::node_cmd::ShapeArg>,
    /// Replicas per group (3 tolerates one failure, 5 two) [default: 3].
    #[arg(long)]
    pub replicas: Option<usize>,
    /// Sentinels, each serving the wallets' HTTP API [default: 2].
    #[arg(long)]
    pub sentinels: Option<usize>,
    /// First port of the consecutive range the processes listen on [default: 18470].
    #[arg(long)]
    pub base_port: Option<u16>,
    /// Another issuer x-only public key (hex) to trust, e.g. from `specie wallet create --issuer`.
    #[arg(long = "issuer", value_name = "HEX")]
    pub issuers: Vec<String>,
    /// Also run a FastPay committee (Byzantine mode) of this many authorities beside the online
    /// core, which is its Primary (`--authorities` alone: 4). Each authority's signing key is
    /// made in DIR/pki; its shards serve FastPay clients over HTTP (docs/api.md).
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "4")]
    pub authorities: Option<usize>,
    /// Shards per authority (with --authorities) [default: 2].
    #[arg(long)]
    pub authority_shards: Option<usize>,
    /// Replicas per authority shard (with --authorities): 1 is durable already (every vote is
    /// committed before it leaves), 3 survive the loss of one machine [default: 1].
    #[arg(long)]
    pub authority_replicas: Option<usize>,
    /// Also run the offline cash authority as a Raft group of this many replicas beside the
    /// online core (`--offline` alone: 3, which survive the loss of one). Its seed and operator
    /// token are made in DIR/pki; the sentinels bank for its bridge key; devices reach it over
    /// HTTP (`specie offline device --authority URL,URL,…`).
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "3")]
    pub offline: Option<usize>,
    /// Also run the exchange between currencies (SPEEDEX batch auctions) as a Raft group of this
    /// many replicas (`--exchange` alone: 3). It trades the cluster's own currency (usd) and each
    /// --exchange-asset; its seed is made in DIR/pki; the sentinels bank for its bridge key, and
    /// so must each other currency's core (`specie node --exchange <BRIDGE-KEY>`, printed by
    /// `cluster up`). Traders reach it over HTTP (`specie exchange … --exchange URL,URL,…`).
    /// Example: specie cluster up --exchange --exchange-asset eur=http://127.0.0.1:8471
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "3")]
    pub exchange: Option<usize>,
    /// (with --exchange) Another currency to trade: its name and the HTTP API of the online core
    /// that mints it, NAME=URL; at least one.
    #[arg(long = "exchange-asset", value_name = "NAME=URL", requires = "exchange")]
    pub exchange_assets: Vec<String>,
    /// Make the sentinels a threshold group of endorsers: a transaction reaches the core only
    /// with one FROST signature of K of them, each having validated it (so one compromised
    /// sentinel cannot have anything committed). The sentinels make their key shares among
    /// themselves at first start (FROST's distributed key generation over mutual TLS; each keeps
    /// its share in DIR/data/SENTINEL/endorser.key), and `up` writes the group key they agree on
    /// into the cluster file before it starts the coordinators, which verify every endorsement
    /// under it. Needs 1 ≤ K ≤ --sentinels; e.g. --sentinels 3 --endorsement 2.
    #[arg(long, value_name = "K")]
    pub endorsement: Option<u16>,
    /// Also keep the ledger of record (every confirmed transaction, with its endorsements, in
    /// hash-chained blocks that replay to the shards' UHS) in an archiver group of this many
    /// replicas (`--ledger-of-record` alone: 3, which survive the loss of one). Sentinels write each
    /// transaction ahead to it before a coordinator sees it; wallets and auditors read it at
    /// /v1/ledger on any sentinel. Chosen at creation: a ledger started later could not replay.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "3")]
    pub ledger_of_record: Option<usize>,
}

/// Run one replica of a group of a cluster: a shard, coordinator or FastPay authority shard group.
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
    /// DANGEROUS, for fault tests and demonstrations only: act as a compromised sentinel that
    /// validates nothing and endorses whatever it is asked to (what the threshold must stop).
    #[arg(long, hide = true)]
    pub compromised: bool,
}

pub fn run_shard(args: ReplicaArgs) -> anyhow::Result<ExitCode> {
    role_process::run_shard(&args.cluster, args.group, args.replica)?;
    Ok(ExitCode::SUCCESS)
}

pub fn run_coordinator(args: ReplicaArgs) -> anyhow::Result<ExitCode> {
    role_process::run_coordinator(&args.cluster, args.group, args.replica)?;
    Ok(ExitCode::SUCCESS)
}

pub fn run_authority(args: ReplicaArgs) -> anyhow::Result<ExitCode> {
    role_process::run_authority(&args.cluster, args.group, args.replica)?;
    Ok(ExitCode::SUCCESS)
}

fn backup(args: &BackupArgs) -> anyhow::Result<ExitCode> {
    let taken = specie_cluster::backup::backup(&args.dir.dir, &args.out)?;
    print_manifest(&taken.manifest);
    println!(
        "backed up {} groups into {}; {} sentinels held for {:.1} s",
        taken.manifest.groups.len(),
        args.out.display(),
        taken.sentinels_held,
        taken.held_for.as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

fn restore(args: &RestoreArgs) -> anyhow::Result<ExitCode> {
    let manifest = specie_cluster::backup::restore(&args.from, &args.dir, args.pki.as_deref())?;
    print_manifest(&manifest);
    println!(
        "restored {} groups into {}; start it with `specie cluster up --dir {}`",
        manifest.groups.len(),
        args.dir.display(),
        args.dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn package(args: &PackageArgs) -> anyhow::Result<ExitCode> {
    use specie_cluster::packaging::{package, Target};
    let target = match args.target.as_str() {
        "compose" => Target::Compose,
        _ => Target::Kubernetes,
    };
    for path in package(&args.dir.dir, &args.out, target, &args.image)? {
        println!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn ready(args: &RunTargetArgs) -> anyhow::Result<ExitCode> {
    use specie_service::health::Probe;
    match specie_cluster::hosts::ready(&args.dir.dir, &args.name)? {
        Probe::Ready => Ok(ExitCode::SUCCESS),
        Probe::NotReady(why) | Probe::Unreachable(why) => {
            eprintln!("{} is not ready: {why}", args.name);
            Ok(ExitCode::from(1))
        }
    }
}

fn print_manifest(manifest: &specie_cluster::backup::Manifest) {
    println!(
        "{:<24} {:>7} {:>9} {:>12}  sha256",
        "group", "replica", "applied", "bytes"
    );
    for group in &manifest.groups {
        println!(
            "{:<24} {:>7} {:>9} {:>12}  {}",
            group.group, group.replica, group.applied_index, group.bytes, group.sha256
        );
    }
}

/// A group a cluster has one of has one name: `--group` must be it.
fn check_single_group(args: &ReplicaArgs, name: &str, what: &str) -> anyhow::Result<()> {
    if args.group != name {
        anyhow::bail!("{what} group is named '{name}', not '{}'", args.group);
    }
    Ok(())
}

pub fn run_offline_authority(args: ReplicaArgs) -> anyhow::Result<ExitCode> {
    check_single_group(
        &args,
        specie_cluster::OFFLINE_AUTHORITY_GROUP,
        "the offline authority's",
    )?;
    role_process::run_offline_authority(&args.cluster, args.replica)?;
    Ok(ExitCode::SUCCESS)
}

pub fn run_exchange(args: ReplicaArgs) -> anyhow::Result<ExitCode> {
    check_single_group(&args, specie_cluster::EXCHANGE_GROUP, "the exchange's")?;
    role_process::run_exchange(&args.cluster, args.replica)?;
    Ok(ExitCode::SUCCESS)
}

pub fn run_atomizer(args: ReplicaArgs) -> anyhow::Result<ExitCode> {
    check_single_group(&args, specie_cluster::ATOMIZER_GROUP, "the atomizer's")?;
    role_process::run_atomizer(&args.cluster, args.replica)?;
    Ok(ExitCode::SUCCESS)
}

pub fn run_archiver(args: ReplicaArgs) -> anyhow::Result<ExitCode> {
    check_single_group(&args, specie_cluster::ARCHIVER_GROUP, "the archiver's")?;
    role_process::run_archiver(&args.cluster, args.replica)?;
    Ok(ExitCode::SUCCESS)
}

/// The exchange group `cluster up` asks for: `--exchange [N]` and each `--exchange-asset NAME=URL`.
fn exchange_shape(replicas: Option<usize>, assets: &[String]) -> anyhow::Result<Option<ExchangeShape>> {
    let Some(replicas) = replicas else {
        return Ok(None);
    };
    let other_assets = assets
        .iter()
        .map(|asset| {
            let (name, url) = asset.split_once('=').ok_or_else(|| {
                anyhow::anyhow!("--exchange-asset {asset}: expected NAME=URL, e.g. eur=http://127.0.0.1:8471")
            })?;
            Ok(ExchangeAsset {
                name: name.to_string(),
                core: Some(url.to_string()),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if other_assets.is_empty() {
        anyhow::bail!("--exchange needs at least one --exchange-asset NAME=URL besides the cluster's own currency");
    }
    Ok(Some(ExchangeShape { replicas, other_assets }))
}

pub fn run_sentinel(args: SentinelArgs) -> anyhow::Result<ExitCode> {
    role_process::run_sentinel(&args.cluster, args.name, args.compromised)?;
    Ok(ExitCode::SUCCESS)
}

/// What `cluster up` asks: the shape of a new cluster (defaults where a flag is not given), and
/// the flags given, which an existing cluster must match.
fn up_options(args: UpArgs) -> anyhow::Result<UpOptions> {
    use supervisor::Given;
    let defaults = Shape::default();
    let committee_defaults = CommitteeShape::default();
    let atomizer = args.shape.map(|shape| shape == crate::node_cmd::ShapeArg::Atomizer);
    let replicas = args.replicas.unwrap_or(defaults.replicas);
    let given: Vec<Given> = [
        args.shard_groups.map(Given::ShardGroups),
        args.coordinator_groups.map(Given::CoordinatorGroups),
        atomizer.map(Given::Atomizer),
        args.replicas.map(Given::Replicas),
        args.sentinels.map(Given::Sentinels),
        args.base_port.map(Given::BasePort),
        args.authorities.map(Given::Authorities),
        args.authority_shards.map(Given::AuthorityShards),
        args.authority_replicas.map(Given::AuthorityReplicas),
        args.offline.map(Given::Offline),
        args.exchange.map(Given::Exchange),
        args.endorsement.map(Given::Endorsement),
        args.ledger_of_record.map(Given::LedgerOfRecord),
    ]
    .into_iter()
    .flatten()
    .chain(args.issuers.iter().cloned().map(Given::Issuer))
    .collect();
    let shard_groups = args.shard_groups.unwrap_or(defaults.shard_groups);
    let coordinator_groups = match args.coordinator_groups {
        Some(groups) => groups,
        None => {
            let (groups, cores) = default_coordinator_groups(shard_groups);
            if !args.dir.dir.join(specie_cluster::supervisor::TOPOLOGY_FILE).exists() && atomizer != Some(true) {
                println!(
                    "{groups} coordinator group(s): the default for {cores} cores (one per 8, at most one per shard group); --coordinator-groups N to choose"
                );
            }
            groups
        }
    };
    Ok(UpOptions {
        dir: args.dir.dir,
        shape: Shape {
            shard_groups,
            coordinator_groups,
            replicas,
            sentinels: args.sentinels.unwrap_or(defaults.sentinels),
            base_port: args.base_port.unwrap_or(defaults.base_port),
            committee: args.authorities.map(|authorities| CommitteeShape {
                authorities,
                shards: args.authority_shards.unwrap_or(committee_defaults.shards),
                replicas: args.authority_replicas.unwrap_or(committee_defaults.replicas),
            }),
            offline_replicas: args.offline.unwrap_or(0),
            exchange: exchange_shape(args.exchange, &args.exchange_assets)?,
            endorsement_threshold: args.endorsement,
            ledger_replicas: args.ledger_of_record.unwrap_or(0),
            atomizer_replicas: if atomizer == Some(true) { replicas } else { 0 },
        },
        issuers: args.issuers,
        given,
    })
}

/// The coordinator groups a new cluster gets unless told: one per 8 cores of this machine, at
/// least 1 and at most one per shard group (a group adds three processes; below 8 cores they
/// would share the cores the first group already uses). Returns the groups and the cores.
fn default_coordinator_groups(shard_groups: usize) -> (usize, usize) {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    (specie_coordinator::default_coordinators(shard_groups, cores), cores)
}

pub fn run(args: ClusterArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ClusterCommand::Up(args) => {
            supervisor::up(&up_options(*args)?)?;
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Status(args) => Ok(if supervisor::status(&args.dir)? {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(2)
        }),
        ClusterCommand::Down(args) => {
            supervisor::down(&args.dir)?;
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::RefreshEndorsement(args) => {
            supervisor::refresh_endorsement(&args.dir)?;
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::AddReplica(args) => {
            let id = membership::add_replica(&args.dir.dir, &args.group)?;
            println!("{id}");
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::RemoveReplica(args) => {
            membership::remove_replica(&args.group.dir.dir, &args.group.group, args.replica)?;
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Digests(args) => Ok(if membership::digests(&args.dir)? {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(2)
        }),
        ClusterCommand::RotateAuthority(args) => {
            let epoch = specie_cluster::rotation::rotate_authority(&args.dir.dir, args.authority)?;
            println!("{epoch}");
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Backup(args) => backup(&args),
        ClusterCommand::Restore(args) => restore(&args),
        ClusterCommand::Package(args) => package(&args),
        ClusterCommand::Ready(args) => ready(&args),
        ClusterCommand::Restart(args) => {
            let restarted = specie_cluster::rolling::restart(&args.dir.dir, args.name.as_deref())?;
            println!("restarted {restarted} processes, one at a time; each was ready before the next stopped");
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::Run(args) => Err(specie_cluster::hosts::run(&args.dir.dir, &args.name, args.listen_any).into()),
        ClusterCommand::Credentials(args) => {
            let written = specie_cluster::hosts::export_credentials(&args.dir.dir, &args.name, &args.out)?;
            if written.is_empty() {
                eprintln!("{} holds {}'s credentials already", args.out.display(), args.name);
            }
            for path in written {
                println!("{}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        ClusterCommand::ReplaceReplica(args) => {
            let id = membership::replace_replica(&args.group.dir.dir, &args.group.group, args.replica)?;
            println!("{id}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
