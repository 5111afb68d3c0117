//! `specie demo --offline`: an embedded online core banking for an offline authority (both
//! durable, fsync on), devices funded from core coins, payments from device to device with no
//! network (some payers cheat: they keep copies of what they paid and spend them again),
//! deposits in random order (half the devices take their value back to the core), the payouts
//! presented to the core twice, the double spenders named with evidence anyone can check, then
//! the platform-wide supply audit.

use crate::supply::{DemoFigures, SupplyCheck};
use specie_offline_service::books_body;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use secp256k1::Keypair;
use sha2::{Digest, Sha256};
use specie_api::TxStatus;
use specie_codec::Decode;
use specie_node::{EmbeddedNode, NodeHandle, NodeOptions};
use specie_offline::{funding_owners_digest, Denominations, EvidenceBundle, KeyRing, PublicKey};
use specie_offline_authority::{Books, DepositOutcome, Funding, Input, Refusal, Reply};
use specie_offline_device::{Deposit, DeviceError, DeviceLimits};
use specie_offline_service::{AuthorityCall, AuthorityHandle};
use specie_service::{CoreTransactions, PayTo};
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    witness_program_commitment, BridgeFunding, MintTransaction, NonceMode, Output, SpecieTransaction, UhsId,
};
use specie_wallet::CORE_FORMAT;
use specie_workload::offline::{self, OfflineActor, PaymentChoice, PaymentEnd};

use crate::byzantine::present_twice;
use specie_measure::error::{BenchError, BenchResult, StepContext};
use specie_measure::fail;
use specie_measure::submit::submit_all;

/// Value minted to each user and moved whole into offline cash (8.00: tokens of 5, 2 and 1).
const FUNDING_VALUE: u64 = 800;
/// One-time keys each device has certified at enrolment, and again whenever it runs low.
const KEYS_PER_CERTIFICATION: usize = 64;
/// Deposits handed to the authority together (one batch check, one fsync).
const DEPOSITS_PER_CALL: usize = 256;

pub struct OfflineDemoOptions {
    pub devices: usize,
    pub payments: usize,
    pub cheater_fraction: f64,
    /// Fraction of payments the payee is sent again (both replays must be refused).
    pub replay_fraction: f64,
    pub seed: u64,
    pub data_dir: Option<PathBuf>,
    pub json: bool,
}

/// The users: a core key each (minted to, defunded to) and a device each, by the same index.
struct Users {
    core_keys: Vec<Keypair>,
    actors: Vec<OfflineActor>,
}

#[derive(Default)]
struct Tally {
    payments: u64,
    /// Payments a device refused under its limits, by limit.
    refused_by_limits: BTreeMap<&'static str, u64>,
    copies_spent: u64,
    reissued: u64,
    defunded: u64,
    double_spends_refused: u64,
    double_spent_value: u64,
    debtors: BTreeSet<PublicKey>,
    evidence_checked: u64,
    payouts_confirmed: u64,
    payout_value: u64,
    payout_replays_refused: u64,
    /// Payouts the authority signed, presented to the core at the end.
    payouts: Vec<SpecieTransaction>,
    /// Times a device went online mid-run (its tokens at the hop limit).
    syncs: u64,
    /// Key periods the operator began during the run.
    rotations: u64,
    revoked_refused: u64,
    /// Devices that got a copy of a token they paid away accepted (double spenders).
    double_spenders: BTreeSet<usize>,
    replays_tried: u64,
    replays_refused: u64,
}

pub fn run(args: &OfflineDemoOptions) -> BenchResult<ExitCode> {
    let fraction = |f: f64| (0.0..=0.5).contains(&f);
    if args.devices < 2 || args.devices > 5_000 || !fraction(args.cheater_fraction) || !fraction(args.replay_fraction) {
        return Err(BenchError::InvalidOptions(
            "--wallets must be 2..=5000, --cheater-fraction and --replay-fraction between 0 and 0.5".into(),
        ));
    }
    let temp = tempfile::Builder::new().prefix("specie-demo-offline-").tempdir()?;
    let root = args.data_dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    let mut rng = StdRng::seed_from_u64(args.seed);
    let authority =
        AuthorityHandle::open(&root.join("offline"), 64 << 20).step("cannot start the offline authority")?;
    let issuer = Keypair::new_global(&mut rng);
    let mut node_options = NodeOptions::new(root.join("core"));
    node_options.issuers = vec![hex::encode(xonly_bytes(&issuer))];
    node_options.offline_authority = Some(authority.bridge());
    let node = EmbeddedNode::open(node_options).step("cannot start the embedded core")?;
    let core = node.handle();
    let Reply::Keys(ring) = ask(&authority, |ticket| Input::Keys { ticket })? else {
        fail!("the authority did not show its keys");
    };
    // Devices take the ring only signed by the bridge key the core banks for.
    ring.check(Some(&authority.bridge()))
        .step("the authority's key ring is not signed by its bridge key")?;
    let ring = ring.ring;

    let started = Instant::now();
    let mut users = make_users(args, &mut rng);
    enrol(&authority, &mut users)?;
    fund_from_core(&core, &authority, &issuer, &mut users, &ring, &mut rng)?;
    let mut tally = Tally::default();
    let mut ring = ring;
    pay_offline(args, &authority, &mut users, &mut ring, &mut rng, &mut tally, started)?;
    deposit_all(&authority, &mut users, &ring, &mut rng, &mut tally)?;
    let payouts = std::mem::take(&mut tally.payouts);
    present_payouts(&core, &payouts, &mut tally)?;
    let evidence_file = check_evidence(&authority, &users, &ring, &root, &mut tally)?;
    let elapsed = started.elapsed();
    let books = books(&authority)?;
    let core_value = core_value(&core, &payouts)?;
    let ledger = crate::payments::check_ledger_of_record(&core)?.step("the demo's core keeps a ledger of record")?;
    authority.stop();
    node.shutdown();
    let mut audit = Audit::check(args, &users, &books, core_value, &tally);
    let figures = DemoFigures::new(&issuer, audit.minted.into(), 0, core_value.into(), 0);
    let bridge = hex::encode(authority.bridge());
    let mode_books =
        specie_offline_bridge::supply::mode_books(&books_body(&books), "the offline authority".into(), &bridge);
    audit.supply = Some(SupplyCheck::new(None, ledger.supply, vec![mode_books], &figures));
    audit.ok = audit.ok && audit.supply.as_ref().is_some_and(SupplyCheck::ok);
    let kept = args.data_dir.is_some();
    report(args, &tally, &audit, elapsed, evidence_file.filter(|_| kept).as_deref());
    Ok(if audit.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn make_users(args: &OfflineDemoOptions, rng: &mut StdRng) -> Users {
    let cheaters = (args.devices as f64 * args.cheater_fraction).ceil() as usize;
    let core_keys: Vec<Keypair> = (0..args.devices).map(|_| Keypair::new_global(rng)).collect();
    let actors = core_keys
        .iter()
        .enumerate()
        .map(|(n, key)| OfflineActor::new(args.seed, n, n < cheaters, DeviceLimits::default(), xonly_bytes(key)))
        .collect();
    Users { core_keys, actors }
}

/// Hands `calls` to the authority together and returns its answers in order.
fn ask_together(authority: &AuthorityHandle, calls: Vec<AuthorityCall>) -> BenchResult<Vec<Reply>> {
    authority
        .call_together(calls)
        .into_iter()
        .map(|reply| reply.step("the offline authority stopped"))
        .collect()
}

fn ask(authority: &AuthorityHandle, call: impl FnOnce(u64) -> Input + Send + 'static) -> BenchResult<Reply> {
    let mut replies = ask_together(authority, vec![Box::new(call)])?;
    Ok(replies.remove(0))
}

/// Registers every device's identity (the registrar's step) and certifies a first set of keys.
fn enrol(authority: &AuthorityHandle, users: &mut Users) -> BenchResult<()> {
    let calls: Vec<AuthorityCall> = users
        .actors
        .iter()
        .map(|actor| {
            let identity = actor.device.identity();
            Box::new(move |ticket| Input::Register { ticket, identity }) as AuthorityCall
        })
        .collect();
    for reply in ask_together(authority, calls)? {
        if reply != Reply::Registered {
            fail!("a registration was refused: {reply:?}");
        }
    }
    for actor in &mut users.actors {
        certify(authority, actor)?;
    }
    Ok(())
}

fn certify(authority: &AuthorityHandle, actor: &mut OfflineActor) -> BenchResult<()> {
    let bindings = actor.device.bindings(KEYS_PER_CERTIFICATION);
    match ask(authority, move |ticket| Input::Certify { ticket, bindings })? {
        Reply::Certified { certificates } => {
            actor.device.certified(&certificates);
            Ok(())
        }
        // A named double spender gets no more keys: it can still pay and deposit, not receive.
        Reply::Refused(Refusal::Convicted { .. }) if actor.cheater => Ok(()),
        other => fail!("a certification was refused: {other:?}"),
    }
}

/// Mints to every user's core key, moves each minted output whole into offline cash by a core
/// funding naming the device's keys, and has the authority issue tokens for each once the
/// funding's marker is in the core's UHS (the bridge's check, not the device's word).
fn fund_from_core(
    core: &NodeHandle,
    authority: &AuthorityHandle,
    issuer: &Keypair,
    users: &mut Users,
    ring: &KeyRing,
    rng: &mut StdRng,
) -> BenchResult<()> {
    let outputs: Vec<Output> = users
        .core_keys
        .iter()
        .map(|key| Output {
            witness_program_commitment: witness_program_commitment(&xonly_bytes(key)),
            value: FUNDING_VALUE,
        })
        .collect();
    let mint = MintTransaction::new_signed(rng.gen(), outputs, issuer, NonceMode::Deterministic);
    let minted = SpecieTransaction::Mint(mint.clone()).created_outputs();
    if submit_all(core, vec![SpecieTransaction::Mint(mint)])? != [TxStatus::Confirmed] {
        fail!("the mint was not confirmed");
    }
    let tokens = Denominations::default().split(FUNDING_VALUE).len();
    let mut fundings = Vec::with_capacity(minted.len());
    for ((actor, key), output) in users.actors.iter_mut().zip(&users.core_keys).zip(&minted) {
        let owners = actor
            .device
            .funding_owners(tokens)
            .step("a device has no keys to fund")?;
        let funding = BridgeFunding::new_signed(
            authority.bridge(),
            funding_owners_digest(&owners),
            FUNDING_VALUE,
            vec![output.to_input()],
            vec![],
            std::slice::from_ref(key),
            NonceMode::Deterministic,
        )
        .step("cannot sign a funding")?;
        fundings.push((funding, owners));
    }
    let txs = fundings
        .iter()
        .map(|(funding, _)| SpecieTransaction::BridgeFunding(funding.clone()))
        .collect();
    let statuses = submit_all(core, txs)?;
    if statuses.iter().any(|s| *s != TxStatus::Confirmed) {
        fail!("a funding was not confirmed: {statuses:?}");
    }
    let markers: Vec<UhsId> = fundings.iter().map(|(funding, _)| funding.marker()).collect();
    let present = core.query_uhs(&markers).step("cannot query the core")?;
    let mut calls: Vec<AuthorityCall> = Vec::with_capacity(fundings.len());
    for ((funding, owners), present) in fundings.into_iter().zip(present) {
        if !present {
            fail!("a funding's marker is not in the core's UHS");
        }
        let (bridge, marker) = (authority.bridge(), funding.marker().0);
        let funding = Funding::from_core(
            &funding.authority,
            &funding.owners_digest,
            funding.amount,
            marker,
            &bridge,
            owners,
        )
        .step("a funding the authority refuses")?;
        calls.push(Box::new(move |ticket| Input::Fund { ticket, funding }));
    }
    for (actor, reply) in users.actors.iter_mut().zip(ask_together(authority, calls)?) {
        let Reply::Funded { issuances } = reply else {
            fail!("a funding was refused: {reply:?}");
        };
        actor
            .device
            .receive_issued(&issuances, ring)
            .step("a device refused its issued tokens")?;
    }
    Ok(())
}

/// Payments between random devices, offline. A cheater keeps copies of what it pays now and
/// then and spends them again later. A payee running low on keys certifies more first (it was
/// online); a payment over a device's limits is refused by the device, and counted.
fn pay_offline(
    args: &OfflineDemoOptions,
    authority: &AuthorityHandle,
    users: &mut Users,
    ring: &mut KeyRing,
    rng: &mut StdRng,
    tally: &mut Tally,
    started: Instant,
) -> BenchResult<()> {
    let bar = match args.json {
        true => ProgressBar::hidden(),
        false => ProgressBar::new(args.payments as u64),
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} offline payments {pos}/{len} [{bar:40}] {per_sec}").expect("template"),
    );
    let actors = &mut users.actors;
    let mut attempts = 0usize;
    while (tally.payments as usize) < args.payments && attempts < args.payments.saturating_mul(20) {
        attempts += 1;
        // The operator rotates the keys twice during the run (a third and two thirds in):
        // older tokens keep passing within their spend window.
        if tally.rotations < 2 && tally.payments as usize >= (tally.rotations as usize + 1) * args.payments / 3 {
            let Reply::Keys(rotated) = ask(authority, |ticket| Input::Rotate { ticket })? else {
                fail!("the rotation was refused");
            };
            rotated
                .check(Some(&authority.bridge()))
                .step("the rotated key ring is not signed by the bridge key")?;
            *ring = rotated.ring;
            tally.rotations += 1;
        }
        let ring = &*ring;
        let payer = rng.gen_range(0..actors.len());
        let payee = (payer + rng.gen_range(1..actors.len())) % actors.len();
        if actors[payee].device.keys_left() < 2 {
            certify(authority, &mut actors[payee])?;
        }
        let choice = PaymentChoice {
            pick: rng.gen(),
            spend_copy: rng.gen_bool(0.5),
            keeps_it: rng.gen_bool(0.1),
            keep_copy: rng.gen_bool(0.3),
            nonce: rng.gen(),
        };
        let now_ms = started.elapsed().as_millis() as u64;
        let copy = choice.spend_copy && actors[payer].cheater;
        match offline::pay(actors, payer, payee, choice, ring, now_ms) {
            Ok(PaymentEnd::Paid { tokens, .. }) => {
                tally.payments += 1;
                tally.copies_spent += u64::from(copy);
                if copy {
                    tally.double_spenders.insert(payer);
                }
                if rng.gen_bool(args.replay_fraction) {
                    replay(actors, payee, &tokens, choice.nonce, ring, now_ms, tally)?;
                }
                bar.inc(1);
            }
            Ok(PaymentEnd::NothingPayable { hop_limit: true }) => sync(authority, actors, payer, ring, tally, now_ms)?,
            Ok(PaymentEnd::RevokedRefused) => tally.revoked_refused += 1,
            Ok(_) => {}
            Err(DeviceError::HoldingLimit { .. }) => *tally.refused_by_limits.entry("holding").or_default() += 1,
            Err(DeviceError::PaymentLimit { .. }) => *tally.refused_by_limits.entry("per_payment").or_default() += 1,
            Err(error) => fail!("an honest payee refused a payment: {error}"),
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// A payment received is sent again: to its payee under the same nonce (the request is closed),
/// and to another request of the same payee (the proof signs the first nonce). Both refused.
fn replay(
    actors: &mut [OfflineActor],
    payee: usize,
    tokens: &[specie_offline::Token],
    nonce: [u8; 16],
    ring: &KeyRing,
    now_ms: u64,
    tally: &mut Tally,
) -> BenchResult<()> {
    let device = &mut actors[payee].device;
    tally.replays_tried += 1;
    if device.receive(&nonce, tokens, ring, now_ms).is_ok() {
        fail!("a payment sent again under its own nonce was accepted");
    }
    tally.replays_refused += 1;
    let amount: u64 = tokens
        .iter()
        .map(|token| {
            ring.issuing_key(&token.issuance.issuing_key)
                .map_or(0, |(value, _)| value)
        })
        .sum();
    let fresh = Sha256::digest(nonce)[..16].try_into().expect("16 bytes");
    // The payee may be out of keys or over its holding limit: then there is no request to
    // replay against.
    if device.request(amount, fresh, now_ms).is_err() {
        return Ok(());
    }
    tally.replays_tried += 1;
    let accepted = device.receive(&fresh, tokens, ring, now_ms).is_ok();
    device.cancel_request(&fresh);
    if accepted {
        fail!("a payment replayed to a fresh request was accepted");
    }
    tally.replays_refused += 1;
    Ok(())
}

/// Every device deposits all it holds (even-numbered devices back to their core address, the
/// others for fresh tokens) and every cheater its copies, in one random order: whichever copy
/// of a double-spent token arrives first is paid, and the cheater is named either way.
fn deposit_all(
    authority: &AuthorityHandle,
    users: &mut Users,
    ring: &KeyRing,
    rng: &mut StdRng,
    tally: &mut Tally,
) -> BenchResult<()> {
    let mut deposits = Vec::new();
    for (n, (actor, key)) in users.actors.iter_mut().zip(&users.core_keys).enumerate() {
        actor.device.deposit_all(xonly_bytes(key), n % 2 == 0);
        if actor.cheater {
            actor.deposit_copies();
        }
        deposits.extend(actor.pending().into_iter().map(|deposit| (n, deposit)));
    }
    deposits.shuffle(rng);
    settle_deposits(authority, &mut users.actors, &deposits, ring, tally)
}

/// A device goes online: more keys if it runs low, the revocation list, and its tokens deposited
/// for fresh ones (tokens at the hop limit must go back to the authority before they pass on).
fn sync(
    authority: &AuthorityHandle,
    actors: &mut [OfflineActor],
    n: usize,
    ring: &KeyRing,
    tally: &mut Tally,
    now_ms: u64,
) -> BenchResult<()> {
    actors[n].device.forget_stale_keys(ring);
    if actors[n].device.keys_left() < KEYS_PER_CERTIFICATION / 2 {
        certify(authority, &mut actors[n])?;
    }
    let from = actors[n].device.revocations_seen();
    let Reply::Revocations { serials, .. } = ask(authority, move |ticket| Input::Revocations { ticket, from })? else {
        fail!("no revocation list");
    };
    actors[n].device.synced(&serials, now_ms);
    tally.syncs += 1;
    let deposits: Vec<(usize, Deposit)> = actors[n]
        .device
        .deposit_all([0; 32], false)
        .into_iter()
        .map(|deposit| (n, deposit))
        .collect();
    settle_deposits(authority, actors, &deposits, ring, tally)
}

/// Hands `deposits` (device, deposit) to the authority in batches and gives each device its
/// answer: fresh tokens, a payout for the core (kept for later), or the refusal of a double
/// spend with the spender named.
fn settle_deposits(
    authority: &AuthorityHandle,
    actors: &mut [OfflineActor],
    deposits: &[(usize, Deposit)],
    ring: &KeyRing,
    tally: &mut Tally,
) -> BenchResult<()> {
    for chunk in deposits.chunks(DEPOSITS_PER_CALL) {
        let calls: Vec<AuthorityCall> = chunk
            .iter()
            .map(|(_, deposit)| {
                let deposit = deposit.clone();
                Box::new(move |ticket| Input::Deposit {
                    ticket,
                    token: Box::new(deposit.token),
                    statement: deposit.statement,
                    instruction: deposit.instruction,
                }) as AuthorityCall
            })
            .collect();
        for ((n, deposit), reply) in chunk.iter().zip(ask_together(authority, calls)?) {
            let reissued = match reply {
                Reply::Deposited(DepositOutcome::Reissued { issuances }) => {
                    tally.reissued += 1;
                    issuances
                }
                Reply::Deposited(DepositOutcome::Defunded {
                    serial,
                    address,
                    amount,
                }) => {
                    // Signed as the authority's service signs it: through the core's format, by
                    // the bridge key, to the address.
                    tally.defunded += 1;
                    let payout = CORE_FORMAT.bridge_payout(authority.bridge_key(), serial, PayTo::Key(address), amount);
                    tally
                        .payouts
                        .push(SpecieTransaction::decode_exact(&payout).step("a payout the core's format wrote")?);
                    Vec::new()
                }
                Reply::Deposited(DepositOutcome::DoubleSpent { debtor, value, .. }) => {
                    tally.double_spends_refused += 1;
                    tally.double_spent_value += value;
                    tally.debtors.insert(debtor);
                    Vec::new()
                }
                other => fail!("device {n}'s deposit: {other:?}"),
            };
            actors[*n]
                .answered(&deposit.link(), &reissued, ring)
                .step("a device refused its re-issued tokens")?;
        }
    }
    Ok(())
}

/// Presents every payout to the core, then each again: the second is refused (its marker).
fn present_payouts(core: &NodeHandle, payouts: &[SpecieTransaction], tally: &mut Tally) -> BenchResult<()> {
    let presented = present_twice(core, payouts, "a payout")?;
    (
        tally.payouts_confirmed,
        tally.payout_value,
        tally.payout_replays_refused,
    ) = (presented.confirmed, presented.value, presented.replays_refused);
    Ok(())
}

/// Fetches the evidence against every identity the deposits named and checks it as a third
/// party would (against the key ring only). Writes it as one bundle for
/// `specie offline check-evidence`.
fn check_evidence(
    authority: &AuthorityHandle,
    users: &Users,
    ring: &KeyRing,
    root: &Path,
    tally: &mut Tally,
) -> BenchResult<Option<PathBuf>> {
    let mut double_spends = Vec::new();
    for &identity in &tally.debtors {
        let Reply::Evidence(evidence) = ask(authority, move |ticket| Input::Evidence { ticket, identity })? else {
            fail!("no evidence answer");
        };
        for double_spend in evidence {
            let convicted = double_spend.check(ring).step("evidence that convicts no one")?;
            if convicted.identity != identity {
                fail!("evidence against one identity names another");
            }
            tally.evidence_checked += 1;
            double_spends.push(double_spend);
        }
    }
    let honest: BTreeSet<PublicKey> = users
        .actors
        .iter()
        .filter(|actor| !actor.cheater)
        .map(|actor| actor.device.identity())
        .collect();
    if let Some(named) = tally.debtors.iter().find(|debtor| honest.contains(*debtor)) {
        fail!("an honest device was named: {}", hex::encode(named));
    }
    if double_spends.is_empty() {
        return Ok(None);
    }
    double_spends.truncate(specie_offline::BUNDLE_DOUBLE_SPENDS_MAX);
    let bundle = EvidenceBundle {
        ring: ring.clone(),
        double_spends,
    };
    let mut bytes = Vec::new();
    bundle.encode_to(&mut bytes);
    let path = root.join("evidence.bin");
    std::fs::write(&path, bytes)?;
    Ok(Some(path))
}

fn books(authority: &AuthorityHandle) -> BenchResult<Books> {
    match ask(authority, |ticket| Input::Books { ticket })? {
        Reply::Books(books) => Ok(*books),
        other => fail!("no books: {other:?}"),
    }
}

/// The value of the payout outputs the core holds.
fn core_value(core: &NodeHandle, payouts: &[SpecieTransaction]) -> BenchResult<u64> {
    crate::byzantine::value_held_by_core(core, payouts)
}

struct Audit {
    minted: u64,
    core_spendable: u64,
    offline_outstanding: u128,
    devices_hold: u128,
    books_balanced: bool,
    replays_refused: bool,
    /// Every device that got a copy accepted is named (no honest one is: checked with the
    /// evidence).
    double_spenders_named: bool,
    /// The supply report at the end, set beside this audit.
    supply: Option<SupplyCheck>,
    ok: bool,
}

impl Audit {
    /// minted = core spendable outputs + offline value outstanding; what the authority counts
    /// as outstanding is exactly what the devices hold; per key, value paid back never exceeds
    /// value issued; every payout replay refused.
    fn check(args: &OfflineDemoOptions, users: &Users, books: &Books, core_spendable: u64, tally: &Tally) -> Audit {
        let minted = FUNDING_VALUE * args.devices as u64;
        let devices_hold: u128 = users.actors.iter().map(|a| u128::from(a.device.balance())).sum();
        let books_balanced = books.by_key.iter().all(|key| key.paid <= key.issued)
            && books.funded == u128::from(minted)
            && books.defunded == u128::from(tally.payout_value);
        let replays_refused =
            tally.payout_replays_refused == tally.payouts_confirmed && tally.replays_refused == tally.replays_tried;
        let double_spenders_named = tally
            .double_spenders
            .iter()
            .all(|&n| tally.debtors.contains(&users.actors[n].device.identity()));
        let sums = u128::from(core_spendable) + books.outstanding == u128::from(minted);
        Audit {
            minted,
            core_spendable,
            offline_outstanding: books.outstanding,
            devices_hold,
            books_balanced,
            replays_refused,
            double_spenders_named,
            supply: None,
            ok: sums && devices_hold == books.outstanding && books_balanced && replays_refused && double_spenders_named,
        }
    }
}

fn report(args: &OfflineDemoOptions, tally: &Tally, audit: &Audit, elapsed: Duration, evidence: Option<&Path>) {
    let summary = serde_json::json!({
        "mode": "offline",
        "devices": args.devices,
        "cheaters": (args.devices as f64 * args.cheater_fraction).ceil() as u64,
        "payments": tally.payments,
        "copies_spent_again": tally.copies_spent,
        "double_spenders": tally.double_spenders.len(),
        "replays": { "tried": tally.replays_tried, "refused": tally.replays_refused },
        "syncs": tally.syncs,
        "key_rotations": tally.rotations,
        "revoked_tokens_refused": tally.revoked_refused,
        "refused_by_device_limits": tally.refused_by_limits,
        "deposits": {
            "reissued": tally.reissued,
            "defunded": tally.defunded,
            "double_spends_refused": tally.double_spends_refused,
            "double_spent_value": tally.double_spent_value,
        },
        "named": tally.debtors.iter().map(hex::encode).collect::<Vec<_>>(),
        "evidence_checked": tally.evidence_checked,
        "payouts": { "confirmed": tally.payouts_confirmed, "value": tally.payout_value, "replays_refused": tally.payout_replays_refused },
        "seconds": elapsed.as_secs_f64(),
        "audit": {
            "minted": audit.minted,
            "core_spendable": audit.core_spendable,
            "offline_outstanding": audit.offline_outstanding.to_string(),
            "devices_hold": audit.devices_hold.to_string(),
            "books_balanced": audit.books_balanced,
            "replays_refused": audit.replays_refused,
            "double_spenders_named": audit.double_spenders_named,
            "supply": audit.supply.as_ref().map(SupplyCheck::json),
            "ok": audit.ok,
        },
    });
    if args.json {
        println!("{summary}");
        return;
    }
    println!(
        "offline cash: {} devices ({} cheating), an embedded core banking for the offline authority, fsync on",
        args.devices, summary["cheaters"]
    );
    println!(
        "{} payments device to device in {:.1} s ({} spent a copy again); refused by device limits: {:?}",
        tally.payments,
        elapsed.as_secs_f64(),
        tally.copies_spent,
        tally.refused_by_limits
    );
    println!(
        "{} syncs (tokens at the hop limit back to the authority, revocations fetched); {} key rotations; {} revoked tokens refused by payees; {} of {} replayed payments refused",
        tally.syncs, tally.rotations, tally.revoked_refused, tally.replays_refused, tally.replays_tried
    );
    println!(
        "deposits: {} re-issued, {} back to the core; {} double spends refused ({} units); {} of {} double spenders named (no honest device), {} pieces of evidence checked",
        tally.reissued,
        tally.defunded,
        tally.double_spends_refused,
        tally.double_spent_value,
        tally.debtors.len(),
        tally.double_spenders.len(),
        tally.evidence_checked
    );
    println!(
        "payouts: {} confirmed by the core ({} units); the same payouts presented again: {} refused",
        tally.payouts_confirmed, tally.payout_value, tally.payout_replays_refused
    );
    if let Some(path) = evidence {
        println!(
            "check the evidence yourself: specie offline check-evidence {}",
            path.display()
        );
    }
    if let Some(supply) = &audit.supply {
        supply.print();
    }
    println!(
        "audit {}: minted {} = core spendable {} + offline outstanding {}; devices hold {}; books balanced: {}",
        if audit.ok { "OK" } else { "FAILED" },
        audit.minted,
        audit.core_spendable,
        audit.offline_outstanding,
        audit.devices_hold,
        audit.books_balanced
    );
}
