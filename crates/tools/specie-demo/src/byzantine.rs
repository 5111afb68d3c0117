//! `specie demo --byzantine`: an embedded online core as FastPay's Primary and a committee of 4
//! authorities (one Byzantine), value moved into the Byzantine mode by core fundings, payments
//! across shards (some owners equivocating), redeems back to the core (each presented twice),
//! then the platform-wide audit.

use crate::supply::{DemoFigures, SupplyCheck};
use specie_fastpay_wallet::supply::{mode_books, CommitteeTotals};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use secp256k1::Keypair;
use specie_api::TxStatus;
use specie_authority::Funding;
use specie_committee::{AuthorityBooks, Behaviour, Call, EmbeddedCommittee, EmbeddedCommitteeOptions, Pipeline};
use specie_fastpay::{
    deterministic_key, AccountKey, AuthorityIndex, CoreAddress, Recipient, SignedOrder, SigningKey, TransferOrder,
};
use specie_fastpay_primary::{FastpayFunding, FastpayRedeem};
use specie_log::LogOptions;
use specie_node::{EmbeddedNode, NodeHandle, NodeOptions};
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    witness_program_commitment, CreatedOutput, MintTransaction, NonceMode, Output, SpecieTransaction, UhsId,
};

use specie_measure::error::{BenchError, BenchResult, StepContext};
use specie_measure::fail;
use specie_measure::submit::submit_all;

/// Value minted to each user and moved whole into the Byzantine mode.
const FUNDING_VALUE: u64 = 10_000;
const AUTHORITIES: u64 = 4;
/// The authority that misbehaves (answers every order with a forged vote).
const BYZANTINE_AUTHORITY: usize = 3;
const SETTLE_WAIT: Duration = Duration::from_secs(30);

pub struct ByzantineDemoOptions {
    pub accounts: usize,
    pub payments: usize,
    pub shards: u32,
    pub equivocation_fraction: f64,
    pub redeem_fraction: f64,
    pub window: usize,
    pub seed: u64,
    pub data_dir: Option<PathBuf>,
    pub json: bool,
}

struct User {
    core_key: Keypair,
    owner: SigningKey,
    account: AccountKey,
    next_sequence: u64,
    /// A Byzantine user: signs two orders for one sequence number, once.
    equivocates: bool,
}

#[derive(Default)]
struct Tally {
    settled: u64,
    to_certificate_us: Vec<u64>,
    to_settlement_us: Vec<u64>,
    refused: BTreeMap<String, u64>,
    equivocations: u64,
    /// Payments that settled in a recovery round (contested slots of equivocating owners).
    recovered: u64,
    redeemed: u64,
    redeemed_value: u64,
    replays_refused: u64,
}

pub fn run(args: &ByzantineDemoOptions) -> BenchResult<ExitCode> {
    if args.accounts < 2 || args.accounts > 10_000 || args.window == 0 || args.shards == 0 {
        return Err(BenchError::InvalidOptions(
            "--accounts must be 2..=10000, --window and --shards at least 1".into(),
        ));
    }
    if !(0.0..=0.5).contains(&args.equivocation_fraction) || !(0.0..=0.5).contains(&args.redeem_fraction) {
        return Err(BenchError::InvalidOptions(
            "--equivocation-fraction and --redeem-fraction must each be between 0 and 0.5".into(),
        ));
    }
    let temp = tempfile::Builder::new().prefix("specie-demo-byzantine-").tempdir()?;
    let root = args.data_dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    let mut rng = StdRng::seed_from_u64(args.seed);
    let authority_keys: Vec<SigningKey> = (0..AUTHORITIES)
        .map(|i| deterministic_key("demo-authority", i))
        .collect();
    let mut behaviours = vec![Behaviour::Honest; AUTHORITIES as usize];
    behaviours[BYZANTINE_AUTHORITY] = Behaviour::ForgesVotes;
    let committee_options = EmbeddedCommitteeOptions {
        data_dir: root.join("byzantine"),
        shards: args.shards,
        behaviours,
        log: LogOptions::default(),
        snapshot_log_bytes: 64 << 20,
        credit_retransmit_ms: 100,
        channel_credits_max: 100_000,
    };
    let committee =
        EmbeddedCommittee::start(&committee_options, &authority_keys, 1).step("cannot start the committee")?;
    let issuer = Keypair::new_global(&mut rng);
    let mut node_options = NodeOptions::new(root.join("core"));
    node_options.issuers = vec![hex::encode(xonly_bytes(&issuer))];
    node_options.fastpay_committee = Some((**committee.committee()).clone());
    let node = EmbeddedNode::open(node_options).step("cannot start the embedded core")?;
    let core = node.handle();

    let mut users = make_users(args, &mut rng);
    let started = Instant::now();
    fund_from_core(&core, &committee, &issuer, &users, &mut rng)?;
    let mut tally = Tally::default();
    let mut redeems = Vec::new();
    stream_payments(args, &committee, &mut users, &mut rng, &mut tally, &mut redeems)?;
    redeem_to_core(&core, &redeems, &mut tally)?;
    let elapsed = started.elapsed();
    let reports = committee.reports();
    let committee_id = committee.committee().id();
    let books: Vec<AuthorityBooks> = committee
        .stop()
        .iter()
        .map(|shards| AuthorityBooks::of(shards))
        .collect();
    let core_value = core_value(&core, &redeems)?;
    let ledger = crate::payments::check_ledger_of_record(&core)?.step("the demo's core keeps a ledger of record")?;
    node.shutdown();
    let mut audit = Audit::check(args, &books, core_value, &tally, reports.len());
    let figures = DemoFigures::new(&issuer, audit.minted.into(), 0, core_value.into(), 0);
    let honest = usize::from(BYZANTINE_AUTHORITY == 0);
    let totals = CommitteeTotals {
        balances: books[honest].balances,
        moving: books[honest].in_flight,
        funded: books[honest].funded,
        redeemed: books[honest].redeemed,
    };
    let name = format!("FastPay authority {honest}");
    let committee_books = mode_books(name, hex::encode(committee_id), vec![], &totals, &ledger.supply);
    let supply = SupplyCheck::new(None, ledger.supply, vec![committee_books], &figures);
    audit.ok = audit.ok && supply.ok();
    audit.supply = Some(supply);
    report(args, &tally, &audit, elapsed);
    Ok(if audit.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn make_users(args: &ByzantineDemoOptions, rng: &mut StdRng) -> Vec<User> {
    let equivocating = ((args.accounts as f64 * args.equivocation_fraction).ceil() as usize).min(args.accounts - 2);
    (0..args.accounts as u64)
        .map(|n| {
            let owner = deterministic_key(&format!("demo-owner-{}", args.seed), n);
            User {
                core_key: Keypair::new_global(rng),
                account: AccountKey(owner.verifying_key().to_bytes()),
                owner,
                next_sequence: 0,
                equivocates: (n as usize) < equivocating,
            }
        })
        .collect()
}

/// Mints to every user's core key, moves each minted output whole into the user's Byzantine-mode
/// account by a core funding, and has every authority credit each funding once it finds the
/// funding's marker in the core's UHS (the bridge's check; never a client's word).
fn fund_from_core(
    core: &NodeHandle,
    committee: &EmbeddedCommittee,
    issuer: &Keypair,
    users: &[User],
    rng: &mut StdRng,
) -> BenchResult<()> {
    let outputs: Vec<Output> = users
        .iter()
        .map(|user| Output {
            witness_program_commitment: witness_program_commitment(&xonly_bytes(&user.core_key)),
            value: FUNDING_VALUE,
        })
        .collect();
    let mint = MintTransaction::new_signed(rng.gen(), outputs, issuer, NonceMode::Deterministic);
    let minted = SpecieTransaction::Mint(mint.clone()).created_outputs();
    if submit_all(core, vec![SpecieTransaction::Mint(mint)])? != [TxStatus::Confirmed] {
        fail!("the mint was not confirmed");
    }
    let committee_id = committee.committee().id();
    let fundings: Vec<FastpayFunding> = users
        .iter()
        .zip(&minted)
        .map(|(user, output): (&User, &CreatedOutput)| {
            FastpayFunding::new_signed(
                committee_id,
                user.account,
                FUNDING_VALUE,
                vec![output.to_input()],
                vec![],
                std::slice::from_ref(&user.core_key),
                NonceMode::Deterministic,
            )
        })
        .collect::<Result<_, _>>()
        .step("cannot sign a funding")?;
    let statuses = submit_all(core, fundings.iter().cloned().map(SpecieTransaction::from).collect())?;
    if statuses.iter().any(|s| *s != TxStatus::Confirmed) {
        fail!("a funding was not confirmed: {statuses:?}");
    }
    let claims: Vec<_> = fundings.iter().map(FastpayFunding::claim).collect();
    let markers: Vec<UhsId> = claims.iter().map(|c| c.marker).collect();
    let present = core.query_uhs(&markers).step("cannot query the core")?;
    let (answers_tx, answers) = crossbeam_channel::unbounded();
    for (n, (claim, present)) in claims.iter().zip(present).enumerate() {
        if !present {
            fail!("funding {n}'s marker is not in the core's UHS");
        }
        let funding = Funding {
            id: claim.marker.0,
            account: claim.account,
            amount: claim.amount,
        };
        committee.broadcast(&Call::Fund(funding), n as u64, &answers_tx);
    }
    for _ in 0..claims.len() * AUTHORITIES as usize {
        answers
            .recv_timeout(SETTLE_WAIT)
            .step("an authority did not credit a funding")?;
    }
    Ok(())
}

fn order(user: &User, recipient: Recipient, amount: u64) -> SignedOrder {
    TransferOrder {
        sender: user.account,
        recipient,
        amount,
        sequence: user.next_sequence,
        memo: Vec::new(),
    }
    .sign(&user.owner)
}

/// One planned payment: the orders its owner signed for the slot, the one it wants first, and
/// the authorities that get the second one first (an owner who equivocates splits them).
struct Planned {
    sender: usize,
    orders: Vec<SignedOrder>,
    split: Vec<AuthorityIndex>,
}

/// Plans one payment from a random user not already paying; an equivocating owner signs a
/// second order for the same sequence number and sends it to half the committee first.
fn plan_payment(
    args: &ByzantineDemoOptions,
    users: &[User],
    busy: &BTreeSet<usize>,
    authorities: usize,
    rng: &mut StdRng,
    tally: &mut Tally,
) -> Option<Planned> {
    let sender = rng.gen_range(0..users.len());
    if busy.contains(&sender) {
        return None;
    }
    let to = (sender + rng.gen_range(1..users.len())) % users.len();
    let amount = rng.gen_range(1..=20);
    let redeem = rng.gen_bool(args.redeem_fraction);
    let recipient = if redeem {
        Recipient::Core(CoreAddress(witness_program_commitment(&xonly_bytes(
            &users[sender].core_key,
        ))))
    } else {
        Recipient::Account(users[to].account)
    };
    let first = order(&users[sender], recipient, amount);
    if users[sender].equivocates && rng.gen_bool(0.5) {
        tally.equivocations += 1;
        let other = order(
            &users[sender],
            Recipient::Account(users[(to + 1) % users.len()].account),
            amount,
        );
        let mut split: Vec<AuthorityIndex> = (0..authorities as AuthorityIndex).collect();
        split.shuffle(rng);
        split.truncate(authorities / 2);
        return Some(Planned {
            sender,
            orders: vec![first, other],
            split,
        });
    }
    Some(Planned {
        sender,
        orders: vec![first],
        split: Vec::new(),
    })
}

fn stream_payments(
    args: &ByzantineDemoOptions,
    committee: &EmbeddedCommittee,
    users: &mut [User],
    rng: &mut StdRng,
    tally: &mut Tally,
    redeems: &mut Vec<FastpayRedeem>,
) -> BenchResult<()> {
    let bar = if args.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(args.payments as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} payments {pos}/{len} [{bar:40}] {per_sec} {msg}").expect("template"),
    );
    let mut pipeline = Pipeline::new(committee);
    let mut tags: BTreeMap<u64, usize> = BTreeMap::new();
    let mut busy: BTreeSet<usize> = BTreeSet::new();
    // The answers to an equivocating owner's second orders: nobody waits for them.
    let (unheard, _) = crossbeam_channel::unbounded();
    let mut planned = 0usize;
    let mut quiet_since = Instant::now();
    while planned < args.payments || !tags.is_empty() {
        // A few random picks per turn: a busy sender is skipped, not waited for.
        for _ in 0..args.window.min(4 * users.len()) {
            if planned >= args.payments || tags.len() >= args.window {
                break;
            }
            let authorities = committee.committee().size();
            let Some(plan) = plan_payment(args, users, &busy, authorities, rng, tally) else {
                continue;
            };
            planned += 1;
            for &authority in &plan.split {
                committee.call(authority, Call::Transfer(plan.orders[1].clone()), u64::MAX, &unheard);
            }
            let tag = pipeline.submit_orders(&users[plan.sender].owner, plan.orders);
            tags.insert(tag, plan.sender);
            busy.insert(plan.sender);
        }
        let ended = pipeline.poll(Duration::from_millis(200));
        if ended.is_empty() && quiet_since.elapsed() > SETTLE_WAIT {
            // Even an owner who equivocated gets its account back (recovery rounds).
            if !tags.is_empty() {
                fail!("{} payments never ended", tags.len());
            }
            break;
        }
        for (tag, outcome) in ended {
            quiet_since = Instant::now();
            let sender = tags.remove(&tag).expect("a payment of ours");
            busy.remove(&sender);
            bar.inc(1);
            match outcome {
                Ok(settlement) => {
                    let order = &settlement.certificate.order.order;
                    users[sender].next_sequence = order.sequence + 1;
                    tally.settled += 1;
                    tally.recovered += u64::from(settlement.round > 0);
                    tally
                        .to_certificate_us
                        .push(settlement.to_certificate.as_micros() as u64);
                    tally.to_settlement_us.push(settlement.to_settlement.as_micros() as u64);
                    if let Recipient::Core(_) = order.recipient {
                        redeems.push(FastpayRedeem::new(settlement.certificate));
                    }
                }
                Err(error) => *tally.refused.entry(refusal_reason(&error)).or_default() += 1,
            }
        }
    }
    bar.finish_and_clear();
    Ok(())
}

fn refusal_reason(error: &specie_committee::PaymentError) -> String {
    let specie_committee::PaymentError::Refused { refusals } = error else {
        return error.to_string();
    };
    // One entry per kind of refusal, whatever the sequence numbers and however many said it.
    let mut reasons: Vec<String> = refusals
        .iter()
        .map(|(_, why)| {
            why.split(':')
                .next()
                .unwrap_or(why)
                .replace(|c: char| c.is_ascii_digit(), "")
        })
        .map(|why| why.trim_end().trim_end_matches("number").trim_end().to_string())
        .collect();
    reasons.sort();
    reasons.dedup();
    reasons.join(" / ")
}

/// Presents every certified redeem to the core, then presents each again: the second is refused.
fn redeem_to_core(core: &NodeHandle, redeems: &[FastpayRedeem], tally: &mut Tally) -> BenchResult<()> {
    let txs: Vec<SpecieTransaction> = redeems.iter().cloned().map(SpecieTransaction::from).collect();
    let presented = present_twice(core, &txs, "a certified redeem")?;
    (tally.redeemed, tally.redeemed_value, tally.replays_refused) =
        (presented.confirmed, presented.value, presented.replays_refused);
    Ok(())
}

/// What presenting transactions to the core twice came to.
pub(crate) struct PresentedTwice {
    pub confirmed: u64,
    /// The value of the outputs the confirmed transactions created.
    pub value: u64,
    pub replays_refused: u64,
}

/// Presents `txs` to the core (each must be confirmed), then each again: the demos' check that
/// value comes back into the core once (the redeem and payout markers).
pub(crate) fn present_twice(core: &NodeHandle, txs: &[SpecieTransaction], what: &str) -> BenchResult<PresentedTwice> {
    let mut presented = PresentedTwice {
        confirmed: 0,
        value: 0,
        replays_refused: 0,
    };
    for (tx, status) in txs.iter().zip(submit_all(core, txs.to_vec())?) {
        if status != TxStatus::Confirmed {
            fail!("{what} was not confirmed: {status:?}");
        }
        presented.confirmed += 1;
        presented.value += tx.outputs().iter().map(|output| output.value).sum::<u64>();
    }
    presented.replays_refused = submit_all(core, txs.to_vec())?
        .iter()
        .filter(|s| **s != TxStatus::Confirmed)
        .count() as u64;
    Ok(presented)
}

/// The value of the outputs the redeems created that the core still holds.
fn core_value(core: &NodeHandle, redeems: &[FastpayRedeem]) -> BenchResult<u64> {
    let txs: Vec<SpecieTransaction> = redeems.iter().cloned().map(SpecieTransaction::from).collect();
    value_held_by_core(core, &txs)
}

/// The value of the outputs `txs` created that the core still holds (the demos' audits).
pub(crate) fn value_held_by_core(core: &NodeHandle, txs: &[SpecieTransaction]) -> BenchResult<u64> {
    let outputs: Vec<(UhsId, u64)> = txs
        .iter()
        .flat_map(SpecieTransaction::created_outputs)
        .map(|o| (o.uhs_id, o.output.value))
        .collect();
    value_in_uhs(core, &outputs)
}

/// The total value of those of `outputs` (UHS id and value) the core's UHS holds.
pub(crate) fn value_in_uhs(core: &NodeHandle, outputs: &[(UhsId, u64)]) -> BenchResult<u64> {
    let ids: Vec<UhsId> = outputs.iter().map(|(id, _)| *id).collect();
    let present = core.query_uhs(&ids).step("cannot query the core")?;
    Ok(outputs
        .iter()
        .zip(present)
        .filter(|(_, p)| *p)
        .map(|((_, v), _)| v)
        .sum())
}

struct Audit {
    minted: u64,
    core_spendable: u64,
    byzantine_held: i128,
    books_balanced: bool,
    authorities_agree: bool,
    replays_refused: bool,
    /// The supply report at the end, set beside this audit.
    supply: Option<SupplyCheck>,
    ok: bool,
}

impl Audit {
    /// minted = core spendable outputs + value held in the Byzantine mode (balances and credits
    /// between shards, at every authority alike); every redeem confirmed once.
    fn check(
        args: &ByzantineDemoOptions,
        books: &[AuthorityBooks],
        core_spendable: u64,
        tally: &Tally,
        reports: usize,
    ) -> Audit {
        let minted = FUNDING_VALUE * args.accounts as u64;
        let held = |b: &AuthorityBooks| b.balances + b.in_flight as i128;
        let byzantine_held = held(&books[0]);
        let books_balanced = books.iter().all(AuthorityBooks::balanced);
        let authorities_agree = books
            .iter()
            .all(|b| held(b) == byzantine_held && b.funded == u128::from(minted));
        let replays_refused = tally.replays_refused == tally.redeemed;
        let sums = i128::from(core_spendable) + byzantine_held == i128::from(minted);
        Audit {
            minted,
            core_spendable,
            byzantine_held,
            books_balanced,
            authorities_agree,
            replays_refused,
            supply: None,
            ok: sums && books_balanced && authorities_agree && replays_refused && reports == 0,
        }
    }
}

fn percentile(values: &mut [u64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_unstable();
    let index = ((values.len() as f64 - 1.0) * p).round() as usize;
    values[index] as f64 / 1000.0
}

fn report(args: &ByzantineDemoOptions, tally: &Tally, audit: &Audit, elapsed: Duration) {
    let (mut cert, mut settle) = (tally.to_certificate_us.clone(), tally.to_settlement_us.clone());
    let summary = serde_json::json!({
        "mode": "byzantine",
        "authorities": AUTHORITIES,
        "byzantine_authority": BYZANTINE_AUTHORITY,
        "shards_per_authority": args.shards,
        "accounts": args.accounts,
        "payments_settled": tally.settled,
        "payments_per_second": tally.settled as f64 / elapsed.as_secs_f64(),
        "to_certificate_ms": { "p50": percentile(&mut cert, 0.5), "p99": percentile(&mut cert, 0.99) },
        "to_settlement_ms": { "p50": percentile(&mut settle, 0.5), "p99": percentile(&mut settle, 0.99) },
        "refused": tally.refused,
        "owners_equivocating": tally.equivocations,
        "recovered_in_a_later_round": tally.recovered,
        "redeemed": { "count": tally.redeemed, "value": tally.redeemed_value, "replays_refused": tally.replays_refused },
        "audit": {
            "minted": audit.minted,
            "core_spendable": audit.core_spendable,
            "byzantine_held": audit.byzantine_held,
            "books_balanced": audit.books_balanced,
            "authorities_agree": audit.authorities_agree,
            "replays_refused": audit.replays_refused,
            "supply": audit.supply.as_ref().map(SupplyCheck::json),
            "ok": audit.ok,
        },
    });
    if args.json {
        println!("{summary}");
        return;
    }
    println!("byzantine mode: 4 authorities × {} shards (authority {BYZANTINE_AUTHORITY} forges its votes), embedded core as Primary, fsync on", args.shards);
    println!(
        "settled {} payments in {:.1} s ({:.0}/s); order→certificate p50 {:.1} ms p99 {:.1} ms; →settlement p50 {:.1} ms p99 {:.1} ms",
        tally.settled,
        elapsed.as_secs_f64(),
        summary["payments_per_second"].as_f64().unwrap_or(0.0),
        summary["to_certificate_ms"]["p50"].as_f64().unwrap_or(0.0),
        summary["to_certificate_ms"]["p99"].as_f64().unwrap_or(0.0),
        summary["to_settlement_ms"]["p50"].as_f64().unwrap_or(0.0),
        summary["to_settlement_ms"]["p99"].as_f64().unwrap_or(0.0),
    );
    println!(
        "owners equivocating: {}, payments settled in a recovery round: {}; refused: {:?}",
        tally.equivocations, tally.recovered, tally.refused
    );
    println!(
        "redeemed to the core: {} ({} units); the same certificates presented again: {} refused",
        tally.redeemed, tally.redeemed_value, tally.replays_refused
    );
    if let Some(supply) = &audit.supply {
        supply.print();
    }
    println!(
        "audit {}: minted {} = core spendable {} + held in the Byzantine mode {}; books balanced: {}; authorities agree: {}",
        if audit.ok { "OK" } else { "FAILED" },
        audit.minted,
        audit.core_spendable,
        audit.byzantine_held,
        audit.books_balanced,
        audit.authorities_agree
    );
}
