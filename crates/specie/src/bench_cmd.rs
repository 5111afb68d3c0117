//! `specie bench …`: the arguments of each benchmark (the benchmarks are in `specie-bench`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

use clap::{Args, Subcommand, ValueEnum};
use specie_bench::byzantine::ByzantineOptions;
use specie_bench::cluster::{ClusterBenchOptions, FaultSpec, LoadMode};
use specie_bench::geo::{GeoOptions, RoundTrips};
use specie_bench::postgres::{ClientLevels, PostgresOptions};
use specie_bench::swap::{SwapOptions, ValidateOptions};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Sentinel validation of 2-in/2-out transactions on all cores, beside the raw BIP-340
    /// verification ceiling measured in the same run (target: at least 90% of it).
    Validate(ValidateArgs),
    /// Compact 2-in/2-out transactions per second through the 2PC engine (coordinator + shards,
    /// durable logs, fsync on), without sentinels, as in Hamilton §6.1.
    Swap(SwapArgs),
    /// The same swap workload against PostgreSQL (a stored function over a table of UHS ids, fsync
    /// on), beside specie's figure measured in the same run, as in Hamilton §6.1. Needs a specie
    /// built with `--features postgres`.
    Postgres(PostgresArgs),
    /// Closed- or open-loop swap load against a running cluster (`specie cluster up`), with
    /// optional leader kills: per-second throughput, latency histogram, JSON and SVG charts.
    Cluster(ClusterBenchArgs),
    /// The cluster across three regions, as Hamilton ran it (§6), on this machine: the same swap
    /// load over loopback and with wide-area round trips injected, beside Hamilton's latency.
    ///
    ///   The clusters: two fresh ones of the same shape and limits, DIR/loopback and DIR/geo
    ///     (`specie cluster up`; DIR is a temporary directory removed at the end unless --keep),
    ///     each --shard-groups shard groups and 1 coordinator group of 3 replicas, fsync on.
    ///     Replica i of every group is in region i; the sentinels and the load generator are in
    ///     region 0.
    ///
    ///   The regions: for each replica and each other region, this process runs a TCP relay on
    ///     a fresh 127.0.0.1 port that forwards to the replica and holds every chunk of bytes for
    ///     half the round trip between the two regions, each way (latency, not a bandwidth cap:
    ///     bytes read 1 ms apart leave 1 ms apart). Each region gets a copy of the cluster file,
    ///     DIR/geo/cluster-region-R.toml, in which the other regions' replicas are at their
    ///     relays for R; the geo cluster is stopped as soon as it is up and each member restarted
    ///     with its region's file. TLS names each peer by certificate, not address, so the relays
    ///     are transparent. --rtt-ms sets the round trips r0-r1,r0-r2,r1-r2; the default is
    ///     Hamilton's Virginia-Ohio 12 ms, Virginia-Oregon 62 ms, Ohio-Oregon 51 ms.
    ///
    ///   The runs: `specie bench cluster`'s closed loop (compact 2-in/2-out swaps straight to the
    ///     coordinator group, --window in flight) for --seconds on the loopback cluster (the
    ///     baseline), then on the geo cluster. Each run's result.json and charts go to
    ///     OUT/loopback and OUT/geo, the comparison to OUT/geo.json.
    ///
    ///   The window: a closed loop's throughput is window / latency (Little's law). The
    ///     coordinators hold at most dtxns_in_flight_max x batch_transactions_max swaps in their
    ///     dtxns (4 x 2000 by default; --dtxns-in-flight changes the first), and whatever is
    ///     beyond only queues. The default window is that pipeline plus what 100 000 tx/s puts
    ///     on the way during two of the longest round trips, at least 20 000: 21 000 with the
    ///     defaults, 45 000 with --dtxns-in-flight 16. The same window is used in both runs.
    ///
    ///   Printed: mean and peak tx/s of each run and the geo/loopback ratio; p50 and p99 latency
    ///     beside Hamilton's p50 < 500 ms and p99 < 1 s; window / tx/s (what a closed loop's
    ///     latency is mostly made of); CPU of the cluster and of this process (which runs the load
    ///     and the relays); which region each group's leader was in (it changes from run to run,
    ///     and a coordinator leader far from the load costs latency); what the relays carried.
    ///
    /// On 2 cores the defaults take about a minute. It exits non-zero if either run lost ids or
    /// a member died; a member holding over 2 GiB of memory stops the run.
    #[command(verbatim_doc_comment)]
    Geo(GeoArgs),
    /// The Byzantine mode (FastPay): a committee of 4 authorities on durable hosts, fsync on.
    ///
    /// Measured beside the signature ceilings of the same run and the reference implementation's
    /// figures. What each figure is:
    ///
    ///   Ceilings on one core: Ed25519 signatures, strict single verifications (verify_strict) and
    ///     certificate checks (one batch verification of the 4 authority signatures of a fast-path
    ///     certificate and the owner's, as a confirmation order is checked) per second of the measuring thread's own
    ///     CPU time, so other processes on the machine do not lower them. Signature work per order
    ///     per authority follows: a transfer order needs one strict verification and one signature,
    ///     a confirmation order one certificate check.
    ///
    ///   Committee throughput: 4 authorities × --shards shards, each shard on its own host and log
    ///     (one fsync per round: group commit), all in this process. --orders accounts are funded
    ///     and one transfer order from each is signed beforehand (the client's signing is not
    ///     measured); each order goes to all 4 authorities with --window orders in flight and is
    ///     done when all 4 votes are back. Then each order's 4 votes make its final certificate
    ///     (the fast path), sent to all 4 the same way. committee/s is orders completed per second;
    ///     per-authority equivalent/s is that × 4, what one authority would do with the machine to
    ///     itself at the same CPU per order.
    ///
    ///   CPU µs/order/authority: the process's CPU time (getrusage) less the driving thread's,
    ///     during the phase, divided by orders × 4 authorities; CPU / work divides it by the
    ///     signature work above (1.0 would mean signatures are all an authority does).
    ///
    ///   What bounds it: the share of the machine's cores this process had during the phase
    ///     (its CPU time / (seconds × cores): other processes take the rest); the committee's
    ///     rate with the cores to itself (cores / (4 × CPU per order per authority)); and its rate
    ///     if signing and verifying were all the authorities did (cores / (4 × signature work)),
    ///     which no implementation of the protocol beats on this machine.
    ///
    ///   Payment latency: the client's pipeline (each vote checked, the certificate from the first
    ///     quorum, then confirmation) with --latency-window payments in flight: p50 and p99 from
    ///     sending the order to holding the certificate, and to a quorum having settled it. Once
    ///     with all 4 authorities up, once with one silent (it still works but never answers: f = 1
    ///     down); the p99 ratio compares them.
    ///
    ///   Against the reference: FastPay's own implementation, in memory without persistence, on a
    ///     2-core machine of this kind: a committee of 4 on the 2 cores does 8.1k transfer and 3.8k
    ///     confirmation orders/s, ~55 and ~120 µs CPU per order per authority; one authority alone
    ///     32.7k and 15.5k/s. Targets: at least 1.5× the committee rates with persistence on, and
    ///     CPU per order within 1.5× of the signature work. Each is printed as met or below target;
    ///     the committee rates both as measured and with the cores to itself.
    ///
    /// Every committee's books are audited when it stops. The defaults take about a minute.
    #[command(verbatim_doc_comment)]
    Byzantine(ByzantineArgs),
    /// Offline cash: the authority's deposits and device-to-device payments, beside the Ed25519
    /// ceilings measured in the same run and the prototype's 5,143 tokens/s.
    ///
    ///   Ceilings: strict single verifications, batch verification (128 signatures a batch, as
    ///     the authority's batches of 64 deposits make it) and signatures per second of one
    ///     core's CPU time; batch verification on all cores by the wall clock.
    ///
    ///   Authority: --tokens tokens with 3-signature chains (the issuance, one hop, the deposit
    ///     statement, as the prototype's Table I) deposited through the real role in memory, in
    ///     turns of 256 as a host hands them, every deposit applied (the token's tree, the books):
    ///     on one thread (target: 4x the prototype) and on every core (target: 80% of the batch
    ///     ceiling at 2 signature checks per token: the authority looks its own issuance and
    ///     certificates up instead of verifying them). Once defunded (checks only), once re-issued
    ///     (one signature more per token). Then re-issued through the embedded host over a real
    ///     log, fsync on.
    ///
    ///   Payment: a device signs a hop and the payee checks the whole chain strictly.
    #[command(verbatim_doc_comment)]
    Offline(OfflineBenchArgs),
    /// The exchange (SPEEDEX): clearing time and quality per book size, and block execution with
    /// state hashing and fsync on, beside the reference's figures and the Ed25519 ceiling.
    ///
    ///   Clearing: for each --assets x --offers cell, books drawn from the synthetic workload (sell
    ///     offers within ±2% of drifting valuations, as the exchange would rest them) cleared by
    ///     the proposer's compute (Tatonnement raced on 2 threads, the LP, exact integer repair)
    ///     with the exchange's own parameters (fee 2^-15, mu 2^-10, 100 ms budget), --runs times
    ///     (half as many at 100k offers, a quarter above): median, p99, max. A time-out is a run
    ///     whose Tatonnement missed its criterion within the budget; its clearing must still be
    ///     valid: every clearing is checked exactly and the refused ones counted (must be 0).
    ///     Quality (§6.2): unrealized/realized utility, share of the in-the-money value traded.
    ///     Book preparation (Ledger::supply), the copy of the books every block makes, and the
    ///     check are timed apart. Against the reference (50 assets, 2 cores: median 1.5 s at 500
    ///     offers with 1 of 5 timed out, 123 ms at 10k, 198 ms at 100k, 275 ms at 500k) and the
    ///     target: p99 under 50 ms at 50 assets at every size, never a time-out.
    ///
    ///   Ceiling: Ed25519 strict verifications per second of one core's CPU time, and on every
    ///     thread by the wall clock (the exchange verifies every transaction's signature).
    ///
    ///   Execution: --blocks blocks of --block-transactions payments, then as many of offers
    ///     (crossing: they trade), signed beforehand, applied with Ledger::apply (signatures,
    ///     screen, clearing check, effects, trades, the Merkle state hash) to a ledger of
    ///     --accounts accounts with --execution-assets assets, each block appended to a real log
    ///     with fdatasync; on a pool of one thread, then of --threads. Transactions per second
    ///     applied and durable (apply then fdatasync), per thread against the paper's ~10k
    ///     payments/s per thread (target: 2x), and as a share of the verification ceiling. Each
    ///     block's time broken down: signatures, screen, supply+check (timed apart on the same
    ///     block), the empty block (apply of a block with no transactions: the books' copy and the
    ///     state hash's top, which every block pays), the rest (effects, trades, the rehash of what
    ///     they touched), the log.
    ///
    /// The defaults take about 1-2 minutes in release on 2 cores and about 1 GiB of memory.
    #[command(verbatim_doc_comment)]
    Exchange(ExchangeBenchArgs),
    /// The privacy levels (transparent, confidential, anonymous, anonymous and confidential,
    /// unlinkable), beside the primitives measured in the same run and the paper's Table 2.
    ///
    ///   Primitives, per CPU second of one core: a BIP-340 verification; a confidential
    ///     2-output transfer's proofs (range, balance, auditor validity) verified alone and in
    ///     batches of 32; a wallet proving and signing a 2-in/2-out confidential transaction;
    ///     the anonymous spend proof and the unlinkable transfer proof alone and in batches.
    ///   Sentinel validation of 2-in/2-out transactions of each level, on one core (CPU time)
    ///     and on all cores (wall clock), and what one costs in BIP-340 verifications.
    ///   The four levels beside the paper's Table 2 (ms of one core per validation, alone and
    ///     in the sentinel's batches) and the targets.
    ///   The ledger of record: confirmed 2-in/2-out records sealed, applied, encoded and
    ///     appended with one fsync per block of 1000.
    ///   End to end: --payments 2-in/2-out payments of each level submitted to an embedded node
    ///     (fsync on, ledger of record on, one auditor), from submission to confirmation.
    ///
    /// Targets: confidential verification <= 5 ms on one core and proving <= 20 ms (issue 12;
    /// the Go reference, fabric-token-sdk: ~90 ms and ~175 ms); validation per core <= 2 ms
    /// anonymous, <= 7 ms anonymous and confidential, <= 10 ms unlinkable, unlinkable proving
    /// <= 100 ms (issue 38; the paper: 4.2, 13.6 and 19.7 ms). About 2 minutes on 2 cores.
    #[command(verbatim_doc_comment)]
    Privacy(PrivacyBenchArgs),
    /// One workload at 1, 2, 4, … cores (up to this machine's), each run a fresh process pinned
    /// to its cores, with its own ceiling measured inside the pinned run: throughput, speed-up and
    /// efficiency against linear, the share of the ceiling, and each thread's CPU, naming the
    /// busiest thread with its CPU µs per transaction and the throughput that caps (the serial
    /// stage). On 2 cores the curve is short, but the busiest thread still shows.
    Scale(ScaleArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ScaleWorkloadArg {
    /// `specie demo`: the embedded node, ledger of record on, signed payments, the audit.
    Demo,
    /// `specie bench swap`: the 2PC engine alone (coordinator and shards, fsync on).
    Swap,
    /// `specie bench validate`: the sentinel's validation of 2-in/2-out transactions.
    Validate,
    /// `specie cluster up` (on a free range of ports, or --base-port) then `specie bench cluster`: the replicated
    /// cluster, 3-way Raft with fsync, closed-loop swaps; every member's threads counted.
    Cluster,
    /// `specie bench byzantine`: a FastPay committee of 4 authorities (--payments orders).
    Byzantine,
    /// `specie bench offline`: the offline authority's deposits (--payments tokens).
    Offline,
    /// `specie bench exchange`: SPEEDEX's execution phase, payments on every core.
    Exchange,
    /// `specie bench privacy`: confidential 2-in/2-out validation on every core.
    Privacy,
}

#[derive(Args, Debug)]
pub struct ScaleArgs {
    #[arg(long, value_enum, default_value = "demo")]
    pub workload: ScaleWorkloadArg,
    /// Core counts, comma-separated [default: 1, 2, 4, … and this machine's count].
    #[arg(long, value_delimiter = ',')]
    pub cores: Vec<usize>,
    /// Payments per demo run; orders per byzantine run; tokens per offline run.
    #[arg(long, default_value_t = 20_000)]
    pub payments: u64,
    /// Seconds per swap, validate or cluster run.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Print the curve as one JSON object (every thread of every run included).
    #[arg(long)]
    pub json: bool,
    /// Also write the curve as an SVG chart to this file.
    #[arg(long, value_name = "FILE")]
    pub chart: Option<PathBuf>,
    /// (--workload cluster) First port of the cluster each run starts [default: a free range].
    #[arg(long)]
    pub base_port: Option<u16>,
}

#[derive(Args, Debug)]
pub struct PrivacyBenchArgs {
    /// Milliseconds each per-second figure is measured for.
    #[arg(long, default_value_t = 1_500)]
    pub measure_ms: u64,
    /// 2-in/2-out payments of each level submitted end to end (each confidential one is proven
    /// beforehand, not measured).
    #[arg(long, default_value_t = 400)]
    pub payments: usize,
    /// Print the figures as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ExchangeBenchArgs {
    /// Asset counts of the clearing cells, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10,50")]
    pub assets: Vec<usize>,
    /// Open offers of the clearing cells, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0,10,500,1000,10000,100000,500000")]
    pub offers: Vec<usize>,
    /// Clearing runs per cell up to 10k offers (half as many at 100k, a quarter above; each run
    /// draws its own book).
    #[arg(long, default_value_t = 50)]
    pub runs: usize,
    /// Accounts of the execution ledger.
    #[arg(long, default_value_t = 1_000_000)]
    pub accounts: usize,
    /// Assets of the execution ledger (the paper's payment runs: 50).
    #[arg(long, default_value_t = 50)]
    pub execution_assets: usize,
    /// Transactions per block in the execution phase.
    #[arg(long, default_value_t = 50_000)]
    pub block_transactions: usize,
    /// Blocks of each kind (payments, offers) on each thread count.
    #[arg(long, default_value_t = 2)]
    pub blocks: usize,
    /// Threads of the all-cores runs [default: every core].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seconds of CPU time to measure the ceiling.
    #[arg(long, default_value_t = 2.0)]
    pub ceiling_seconds: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct OfflineBenchArgs {
    /// Tokens deposited in each phase.
    #[arg(long, default_value_t = 20_000)]
    pub tokens: usize,
    /// Seconds of CPU time to measure each ceiling.
    #[arg(long, default_value_t = 2.0)]
    pub ceiling_seconds: f64,
    /// Device-to-device payments timed.
    #[arg(long, default_value_t = 2_000)]
    pub payments: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ByzantineArgs {
    /// Shards per authority (each its own host, log and thread) [default: this machine's cores
    /// divided among the 4 authorities, at least 2: each shard is one thread, so fewer would
    /// leave cores idle].
    #[arg(long)]
    pub shards: Option<u32>,
    /// Transfer orders, one from each of as many funded accounts; then as many confirmations.
    #[arg(long, default_value_t = 20_000)]
    pub orders: usize,
    /// Orders in flight in the throughput phases (the reference's in-flight parameter).
    #[arg(long, default_value_t = 1_000)]
    pub window: usize,
    /// Seconds of CPU time to measure each ceiling.
    #[arg(long, default_value_t = 2.0)]
    pub ceiling_seconds: f64,
    /// Payments in each latency run.
    #[arg(long, default_value_t = 5_000)]
    pub latency_payments: usize,
    /// Payments in flight in the latency runs.
    #[arg(long, default_value_t = 50)]
    pub latency_window: usize,
    /// Measure without fsync (never in production; shows what persistence costs).
    #[arg(long)]
    pub no_fsync: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Seconds to measure each figure.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct SwapArgs {
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    #[arg(long, default_value_t = 2)]
    pub shards: usize,
    /// UHS ids created before measuring.
    #[arg(long, default_value_t = 500_000)]
    pub preload: usize,
    /// Compact transactions in flight.
    #[arg(long, default_value_t = 20_000)]
    pub window: usize,
    /// Measure without fsync (never in production).
    #[arg(long)]
    pub no_fsync: bool,
    /// Also run the same roles on the replicated host, as one-replica Raft groups in this process
    /// (what embedded mode would cost through the cluster's path), and print the ratio.
    #[arg(long, conflicts_with = "no_fsync")]
    pub also_one_replica_raft: bool,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    Ok(match args.command {
        BenchCommand::Scale(args) => {
            use specie_bench::scale::{ScaleOptions, ScaleWorkload};
            let workload = match args.workload {
                ScaleWorkloadArg::Demo => ScaleWorkload::Demo,
                ScaleWorkloadArg::Swap => ScaleWorkload::Swap,
                ScaleWorkloadArg::Validate => ScaleWorkload::Validate,
                ScaleWorkloadArg::Cluster => ScaleWorkload::Cluster,
                ScaleWorkloadArg::Byzantine => ScaleWorkload::Byzantine,
                ScaleWorkloadArg::Offline => ScaleWorkload::Offline,
                ScaleWorkloadArg::Exchange => ScaleWorkload::Exchange,
                ScaleWorkloadArg::Privacy => ScaleWorkload::Privacy,
            };
            let mut options = ScaleOptions::new(workload, args.cores, args.payments, args.seconds);
            options.json = args.json;
            options.chart = args.chart;
            options.base_port = args.base_port;
            specie_bench::scale::run(&options)?;
            ExitCode::SUCCESS
        }
        BenchCommand::Validate(args) => specie_bench::swap::validate(ValidateOptions {
            seconds: args.seconds,
            json: args.json,
        })?,
        BenchCommand::Swap(args) => specie_bench::swap::swap(SwapOptions {
            seconds: args.seconds,
            shards: args.shards,
            preload: args.preload,
            window: args.window,
            no_fsync: args.no_fsync,
            also_one_replica_raft: args.also_one_replica_raft,
            json: args.json,
        })?,
        BenchCommand::Postgres(args) => specie_bench::postgres::run(args.into())?,
        BenchCommand::Cluster(args) => specie_bench::cluster::run(args.into())?,
        BenchCommand::Geo(args) => specie_bench::geo::run(args.into())?,
        BenchCommand::Byzantine(args) => specie_bench::byzantine::run(ByzantineOptions {
            shards: args.shards.unwrap_or_else(specie_bench::byzantine::default_shards),
            orders: args.orders,
            window: args.window,
            ceiling_seconds: args.ceiling_seconds,
            latency_payments: args.latency_payments,
            latency_window: args.latency_window,
            no_fsync: args.no_fsync,
            json: args.json,
        })?,
        BenchCommand::Offline(args) => specie_bench::offline::run(specie_bench::offline::OfflineOptions {
            tokens: args.tokens,
            ceiling_seconds: args.ceiling_seconds,
            payments: args.payments,
            json: args.json,
        })?,
        BenchCommand::Privacy(args) => specie_bench::privacy::run(&specie_bench::privacy::PrivacyBenchOptions {
            measure_ms: args.measure_ms,
            payments: args.payments,
            json: args.json,
        })?,
        BenchCommand::Exchange(args) => specie_bench::exchange::run(specie_bench::exchange::ExchangeBenchOptions {
            assets: args.assets,
            offers: args.offers,
            runs: args.runs,
            accounts: args.accounts,
            execution_assets: args.execution_assets,
            block_transactions: args.block_transactions,
            blocks: args.blocks,
            threads: args
                .threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)),
            ceiling_seconds: args.ceiling_seconds,
            seed: args.seed,
            json: args.json,
        })?,
    })
}

#[derive(Args, Debug)]
pub struct PostgresArgs {
    /// Seconds to measure specie, and PostgreSQL at each client count (after a short warm-up).
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// UHS ids preloaded into each system before measuring.
    #[arg(long, default_value_t = 1_000_000)]
    pub preload: usize,
    /// PostgreSQL client connections to try, comma-separated; the best level is the figure.
    #[arg(long, default_value = "16,32,64,128,256", value_parser = ClientLevels::from_str)]
    pub clients: ClientLevels,
    /// Seconds of uncounted swaps at the largest client count before the first level: they
    /// absorb the full-page images PostgreSQL logs on each page's first change after the
    /// preload's checkpoint, which would otherwise all be charged to the first level.
    #[arg(long, default_value_t = 5.0)]
    pub warmup: f64,
    /// Directory holding initdb, pg_ctl and postgres [default: the one on PATH, else the newest
    /// /usr/lib/postgresql/*/bin].
    #[arg(long)]
    pub pg_bin: Option<PathBuf>,
    /// System user the throwaway server runs as when this command runs as root (PostgreSQL
    /// refuses to run as root).
    #[arg(long, default_value = "postgres")]
    pub pg_user: String,
    /// PostgreSQL commit_delay in microseconds (group commit: durability unchanged).
    #[arg(long, default_value_t = 0)]
    pub commit_delay: u32,
    /// Shards of specie's embedded node (as `bench swap --shards`), and shard groups of the
    /// replicated cluster.
    #[arg(long, default_value_t = 2)]
    pub shards: usize,
    /// Replicas per group of the replicated cluster (3 = three-way replication, as Hamilton's
    /// comparison); 0 measures the embedded node only.
    #[arg(long, default_value_t = 3)]
    pub replicas: usize,
    /// specie compact transactions in flight, as `bench swap --window` and `bench cluster --window`.
    #[arg(long, default_value_t = 20_000)]
    pub window: usize,
    #[arg(long)]
    pub json: bool,
}

impl From<PostgresArgs> for PostgresOptions {
    fn from(args: PostgresArgs) -> PostgresOptions {
        PostgresOptions {
            seconds: args.seconds,
            preload: args.preload,
            clients: args.clients,
            warmup: args.warmup,
            pg_bin: args.pg_bin,
            pg_user: args.pg_user,
            commit_delay: args.commit_delay,
            shards: args.shards,
            replicas: args.replicas,
            window: args.window,
            json: args.json,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Keep `--window` transactions in flight.
    Closed,
    /// Submit `--rate` transactions per second whatever the completions.
    Open,
}

#[derive(Args, Debug)]
pub struct ClusterBenchArgs {
    /// The running cluster's directory (as given to `specie cluster up --dir`).
    #[arg(long, default_value = "./specie-cluster")]
    pub dir: PathBuf,
    /// Seconds of load (after the preload).
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    #[arg(long, value_enum, default_value_t = Mode::Closed)]
    pub mode: Mode,
    /// Closed loop: transactions kept in flight.
    #[arg(long, default_value_t = 20_000)]
    pub window: usize,
    /// Open loop: transactions submitted per second (required with --mode open).
    #[arg(long, value_name = "TPS")]
    pub rate: Option<f64>,
    /// Open loop: hard cap on transactions in flight; what is due beyond it is counted as not sent.
    #[arg(long, default_value_t = 100_000)]
    pub in_flight_max: usize,
    /// Kill -9 the current leader of GROUP at SECONDS into the load, and restart it
    /// --restart-after seconds later (repeatable), e.g. --kill-leader shard-0@8.
    #[arg(long = "kill-leader", value_name = "GROUP@SECONDS", value_parser = FaultSpec::from_str)]
    pub kill_leader: Vec<FaultSpec>,
    /// Seconds between a kill and the restart of the killed replica.
    #[arg(long, default_value_t = 4.0)]
    pub restart_after: f64,
    /// UHS ids created before the load starts (the generator's pool; at least twice --window).
    #[arg(long, default_value_t = 200_000)]
    pub preload: usize,
    /// Transactions per submission to the coordinator group.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Where to write result.json, throughput.svg and latency.svg [default: DIR/bench].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Measure what mutual TLS costs: run the load once per round, restarting the cluster before
    /// each round with `transport = "mutual-tls"` and `"insecure-plaintext"` in turn (TLS,
    /// plaintext, TLS, …), and report each transport's median and the cost. The cluster file is
    /// set back to mutual-tls at the end, even on error, and the cluster restarted with it.
    #[arg(long, conflicts_with = "kill_leader")]
    pub compare_transport: bool,
    /// With --compare-transport: rounds per transport (at least 2).
    #[arg(long, default_value_t = 2, requires = "compare_transport")]
    pub rounds: usize,
    /// With --compare-transport: seconds to wait after each restart, before the preload.
    #[arg(long, default_value_t = 2.0, requires = "compare_transport")]
    pub settle: f64,
}

impl From<Mode> for LoadMode {
    fn from(mode: Mode) -> LoadMode {
        match mode {
            Mode::Closed => LoadMode::Closed,
            Mode::Open => LoadMode::Open,
        }
    }
}

impl From<ClusterBenchArgs> for ClusterBenchOptions {
    fn from(args: ClusterBenchArgs) -> ClusterBenchOptions {
        ClusterBenchOptions {
            dir: args.dir,
            seconds: args.seconds,
            mode: args.mode.into(),
            window: args.window,
            rate: args.rate,
            in_flight_max: args.in_flight_max,
            kill_leader: args.kill_leader,
            restart_after: args.restart_after,
            preload: args.preload,
            batch: args.batch,
            out: args.out,
            compare_transport: args.compare_transport,
            rounds: args.rounds,
            settle: args.settle,
        }
    }
}

#[derive(Args, Debug)]
pub struct GeoArgs {
    /// Where to make the two clusters, DIR/loopback and DIR/geo (neither may exist) [default: a
    /// temporary directory, removed at the end unless --keep].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the temporary directory (the clusters' data, logs, region files and results).
    #[arg(long)]
    pub keep: bool,
    /// Seconds of load in each run (loopback, then geo), after its preload.
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    /// Round trips between the regions in ms: r0-r1,r0-r2,r1-r2 (Hamilton §6: Virginia-Ohio,
    /// Virginia-Oregon, Ohio-Oregon).
    #[arg(long = "rtt-ms", value_name = "A,B,C", default_value = "12,62,51", value_parser = RoundTrips::from_str)]
    pub rtt_ms: RoundTrips,
    /// Transactions in flight in both runs [default: dtxns_in_flight_max x 2000 + 100 000 tx/s x
    /// 2 x the longest round trip, rounded up to a thousand, at least 20 000: 21 000 with the
    /// default limits and round trips].
    #[arg(long)]
    pub window: Option<usize>,
    /// Shard groups of the cluster (plus 1 coordinator group; 3 replicas each).
    #[arg(long, default_value_t = 2)]
    pub shard_groups: usize,
    /// First port of each cluster (they run one after the other) [default: a free range each].
    #[arg(long)]
    pub base_port: Option<u16>,
    /// Transactions per submission to the coordinator group.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// The coordinator's pipeline depth: `limits.dtxns_in_flight_max` of both clusters (each is
    /// restarted once with it) [default: the cluster's default, 4].
    #[arg(long, value_name = "N")]
    pub dtxns_in_flight: Option<u32>,
    /// Put every group's leader in region R (0, 1 or 2) by rotating the group's replicas over
    /// the regions: the leader is the one elected when the geo cluster first came up, which a
    /// restart keeps [default: replica i in region i, wherever the leader is; `cluster up`
    /// mostly elects replica 3, i.e. region 2, the farthest from the load].
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u8).range(0..=2))]
    pub leader_region: Option<u8>,
    /// Where each run's result.json and charts go, and geo.json [default: DIR/bench].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the comparison as one JSON object (the progress goes to stderr).
    #[arg(long)]
    pub json: bool,
}

impl From<GeoArgs> for GeoOptions {
    fn from(args: GeoArgs) -> GeoOptions {
        GeoOptions {
            dir: args.dir,
            keep: args.keep,
            seconds: args.seconds,
            round_trips: args.rtt_ms,
            window: args.window,
            shard_groups: args.shard_groups,
            base_port: args.base_port,
            batch: args.batch,
            dtxns_in_flight: args.dtxns_in_flight,
            leader_region: args.leader_region.map(usize::from),
            out: args.out,
            json: args.json,
        }
    }
}
