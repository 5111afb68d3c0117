//! `specie demo --privacy`: an embedded core keeping the ledger of record, with one auditor with
//! jurisdiction, runs payments at every privacy level. The issuer mints in clear. Users shield
//! part of their money, enrol with the registration authority and turn a coin into an anonymous
//! note, then pay each other in rounds, some transparently, some confidentially (values in
//! Pedersen commitments, proven in range and balanced, encrypted to the auditor) and some
//! anonymously (owners behind commitments to their enrolment ids, spends proven with the RA's
//! credential, values in clear or hidden: [`anonymous`]). A forger submits transactions that
//! cheat in every way the proofs exclude, and all are refused. Users unshield some money and the
//! issuer redeems some. Then:
//!
//! - the passive auditor reads the ledger of record from genesis and reconstructs every
//!   confidential and anonymous payment (payers and payees by enrolment id), which must match
//!   what the wallets know;
//! - the supply audit holds: minted − redeemed = transparent value in the UHS + confidential
//!   value in the UHS (by the wallets' openings, and again by the auditor's reading);
//! - the ledger replays to exactly the UHS.

use crate::supply::{DemoFigures, SupplyCheck};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use secp256k1::Keypair;
use specie_api::TxStatus;
use specie_archiver::Block;
use specie_auditor::{Owner, OwnerView, PassiveAuditor};
use specie_confidential::{AuditorSecret, Opening};
use specie_credential::AuditDirectory;
use specie_endorsement::Endorsement;
use specie_node::endorsement::EndorsementOptions;
use specie_node::{EmbeddedNode, NodeHandle, NodeOptions};
use specie_private_transactions::{ConfidentialInput, ConfidentialPlan, ConfidentialTransaction};
use specie_transaction::signing::schnorr_sign;
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    witness_program_commitment, CreatedOutput, MintTransaction, NonceMode, Output, RedeemTransaction,
    SpecieTransaction, Transaction, Txid, UhsId,
};

use crate::byzantine::value_in_uhs;
use specie_measure::submit::{submit_all, wait_for_outcomes};

mod anonymous;
mod unlinkable;
use anonymous::{AnonymousHolder, AnonymousLevel, ANONYMOUS_FORGERIES};
use specie_measure::error::{BenchError, BenchResult, StepContext};
use specie_measure::fail;
use unlinkable::{KnownUnlinkable, TokenHolder, UnlinkableLevel, UNLINKABLE_FORGERIES};

/// Minted to each user, in clear, as six coins: two shielded, one into the anonymous level, one
/// into the unlinkable level, the rest for transparent payments (and the forger's reserve).
const COIN_VALUE: u64 = 25_000;
const COINS_PER_USER: usize = 6;
/// Coins each user shields (the rest stays transparent).
const SHIELDED_COINS: usize = 2;

pub struct PrivacyDemoOptions {
    pub users: usize,
    pub rounds: usize,
    pub seed: u64,
    pub data_dir: Option<PathBuf>,
    pub json: bool,
    /// How the core orders transactions.
    pub shape: specie_node::CoreShape,
}

/// A confidential output a user can spend: where it is, and its opening.
#[derive(Clone)]
struct Note {
    input: ConfidentialInput,
    opening: Opening,
}

struct User {
    key: Keypair,
    owner: [u8; 32],
    coins: Vec<CreatedOutput>,
    notes: Vec<Note>,
    anonymous: AnonymousHolder,
    unlinkable: TokenHolder,
    /// Coins set aside (the forger's, for a forgery that needs one).
    reserve: Vec<CreatedOutput>,
}

/// A confidential payment as its payer and payee know it: what the auditor must reconstruct.
struct Known {
    payer: Owner,
    /// Each confidential output's owner and value, in order.
    outputs: Vec<(Owner, u64)>,
}

#[derive(Default)]
struct Tally {
    transparent: u64,
    confidential: u64,
    anonymous: u64,
    /// Value that entered the anonymous level from coins.
    anonymous_entered: u64,
    unlinkable: u64,
    /// Value that entered the unlinkable level from coins, and the entries' txids.
    unlinkable_entered: u64,
    unlinkable_entries: Vec<Txid>,
    shielded_value: u64,
    unshielded_value: u64,
    redeemed: u64,
    forged: u64,
    forged_refused: u64,
    forged_codes: std::collections::BTreeMap<String, u64>,
    /// Forgeries that went around the endorsers with an endorsement made up or borrowed.
    forged_endorsements: u64,
    refused_honest: u64,
    known: HashMap<Txid, Known>,
    known_unlinkable: HashMap<Txid, KnownUnlinkable>,
}

pub fn run(args: &PrivacyDemoOptions) -> BenchResult<ExitCode> {
    if !(2..=1000).contains(&args.users) || args.rounds == 0 || args.rounds > 1000 {
        return Err(BenchError::InvalidOptions(
            "--wallets must be 2..=1000 and --rounds 1..=1000".into(),
        ));
    }
    let temp = tempfile::Builder::new().prefix("specie-demo-privacy-").tempdir()?;
    let root = args.data_dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    // The run is made from its seed: a core left by an earlier run already holds its mints.
    if std::fs::read_dir(root.join("core")).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(BenchError::InvalidOptions(format!(
            "{} already holds a demo's core (an earlier run with this --data-dir); give an empty or new directory, or remove it",
            root.display()
        )));
    }
    let mut rng = StdRng::seed_from_u64(args.seed);
    let issuer = Keypair::new_global(&mut rng);
    let auditor = AuditorSecret::random(&mut rng);
    let (level, holders) = AnonymousLevel::enrol(args.users, auditor.public(), &mut rng);
    let unlinkable = UnlinkableLevel::deal(&level, &mut rng)?;
    let mut options = NodeOptions::new(root.join("core"));
    options.issuers = vec![hex::encode(xonly_bytes(&issuer))];
    options.ledger_of_record = Some(true);
    options.shape = Some(args.shape);
    options.auditors = vec![auditor.public().to_bytes()];
    options.registration_authority = Some(level.authority.clone());
    options.owner_auditors = vec![level.owner_auditor.public()];
    options.certifiers = Some(unlinkable.group.clone());
    options.endorsement = Some(EndorsementOptions {
        k: ENDORSERS_K,
        n: ENDORSERS_N,
        seed: args.seed,
        compromised: vec![COMPROMISED_ENDORSER],
    });
    let node = EmbeddedNode::open(options).step("cannot start the embedded core")?;
    let core = node.handle();
    let started = Instant::now();
    let progress = progress_bar(args);

    let mut users = mint(&core, &issuer, holders, &mut rng)?;
    let mut tally = Tally::default();
    shield(&core, &mut users, &auditor, &mut tally, &mut rng)?;
    level.enter(&core, &mut users, &mut tally, &mut rng)?;
    unlinkable.enter(&core, &mut users, &mut tally, &mut rng)?;
    progress.inc(1);
    for _ in 0..args.rounds {
        pay_round(&core, &mut users, &auditor, &mut tally, &mut rng)?;
        level.pay_round(&core, &mut users, &mut tally, &mut rng)?;
        unlinkable.pay_round(&core, &mut users, &mut tally, &mut rng)?;
        forge(&core, &users, &auditor, &mut tally, &mut rng)?;
        level.forge(&core, &users, &mut tally, &mut rng)?;
        unlinkable.forge(&core, &users, &mut tally, &mut rng)?;
        progress.inc(1);
    }
    unshield_and_redeem(&core, &mut users, &issuer, &auditor, &mut tally, &mut rng)?;
    progress.finish_and_clear();
    let elapsed = started.elapsed();
    let audit = audit(
        &core,
        &users,
        (&auditor, &level),
        &tally,
        (&issuer, args.users as u64 * COINS_PER_USER as u64 * COIN_VALUE),
    )?;
    node.shutdown();
    report(args, &tally, &audit, elapsed);
    Ok(if audit.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn progress_bar(args: &PrivacyDemoOptions) -> ProgressBar {
    if args.json {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(args.rounds as u64 + 1);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} rounds of payments and forgeries {elapsed}")
            .expect("template"),
    );
    bar
}

fn owner_of(key: &Keypair) -> [u8; 32] {
    witness_program_commitment(&xonly_bytes(key))
}

/// Mints `COINS_PER_USER` coins to every user (one per enrolled holder), in clear.
fn mint(
    core: &NodeHandle,
    issuer: &Keypair,
    holders: Vec<AnonymousHolder>,
    rng: &mut StdRng,
) -> BenchResult<Vec<User>> {
    let keys: Vec<Keypair> = holders.iter().map(|_| Keypair::new_global(rng)).collect();
    let outputs: Vec<Output> = keys
        .iter()
        .flat_map(|key| {
            std::iter::repeat_n(
                Output {
                    witness_program_commitment: owner_of(key),
                    value: COIN_VALUE,
                },
                COINS_PER_USER,
            )
        })
        .collect();
    let mut mints = vec![];
    for chunk in outputs.chunks(400) {
        mints.push(SpecieTransaction::Mint(MintTransaction::new_signed(
            rng.gen(),
            chunk.to_vec(),
            issuer,
            NonceMode::Randomized,
        )));
    }
    let created: Vec<CreatedOutput> = mints.iter().flat_map(SpecieTransaction::created_outputs).collect();
    expect_confirmed(submit_all(core, mints)?, "a mint")?;
    Ok(keys
        .into_iter()
        .zip(created.chunks(COINS_PER_USER))
        .zip(holders)
        .map(|((key, coins), anonymous)| User {
            owner: owner_of(&key),
            key,
            coins: coins.to_vec(),
            notes: vec![],
            anonymous,
            unlinkable: TokenHolder::default(),
            reserve: vec![],
        })
        .collect())
}

fn expect_confirmed(statuses: Vec<TxStatus>, what: &str) -> BenchResult<()> {
    match statuses.iter().find(|s| **s != TxStatus::Confirmed) {
        Some(status) => fail!("{what} was not confirmed: {}", status.code()),
        None => Ok(()),
    }
}

/// Proves every plan in parallel (a confidential proof takes milliseconds of one core each).
fn prove_all(
    plans: Vec<(ConfidentialPlan, Keypair, Vec<Keypair>)>,
    seed: u64,
) -> BenchResult<Vec<(ConfidentialTransaction, Vec<Opening>)>> {
    plans
        .into_par_iter()
        .enumerate()
        .map(|(n, (plan, _, keys))| {
            let mut rng = StdRng::seed_from_u64(seed ^ (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            plan.prove_and_sign(&keys, NonceMode::Randomized, &mut rng)
                .map_err(|error| BenchError::Failed(format!("cannot prove a confidential transaction: {error}")))
        })
        .collect()
}

/// Submits proven transactions, every one of which must be confirmed.
fn submit_proven(core: &NodeHandle, proven: &[(ConfidentialTransaction, Vec<Opening>)], what: &str) -> BenchResult<()> {
    let txs = proven
        .iter()
        .map(|(tx, _)| SpecieTransaction::from(tx.clone()))
        .collect();
    expect_confirmed(submit_all(core, txs)?, what)
}

/// Every user shields `SHIELDED_COINS` of their coins into two notes of their own.
fn shield(
    core: &NodeHandle,
    users: &mut [User],
    auditor: &AuditorSecret,
    tally: &mut Tally,
    rng: &mut StdRng,
) -> BenchResult<()> {
    let plans: Vec<_> = users
        .iter_mut()
        .map(|user| {
            let coins: Vec<CreatedOutput> = user.coins.drain(..SHIELDED_COINS).collect();
            let total: u64 = coins.iter().map(|c| c.output.value).sum();
            let plan = ConfidentialPlan {
                transparent_inputs: coins.iter().map(CreatedOutput::to_input).collect(),
                confidential_inputs: vec![],
                outputs: vec![(user.owner, total / 3), (user.owner, total - total / 3)],
                transparent_outputs: vec![],
                auditors: vec![auditor.public()],
            };
            (plan, user.key, vec![user.key; SHIELDED_COINS])
        })
        .collect();
    let proven = prove_all(plans, rng.gen())?;
    tally.shielded_value = proven.iter().map(|(tx, _)| tx.proof.public_in()).sum();
    submit_proven(core, &proven, "a shielding")?;
    for (user, (tx, openings)) in users.iter_mut().zip(proven) {
        receive_notes(user, &tx, &openings, 0..openings.len());
        tally.confidential += 1;
    }
    Ok(())
}

/// The notes of `tx` at the given output positions, with their openings, now `user`'s.
fn receive_notes(user: &mut User, tx: &ConfidentialTransaction, openings: &[Opening], outputs: std::ops::Range<usize>) {
    let created = tx.created_confidential_outputs();
    for i in outputs {
        user.notes.push(Note {
            input: created[i].to_input(),
            opening: openings[i],
        });
    }
}

/// One payment from every user: confidential if they hold a note, otherwise transparent, to a
/// random other user, of a random part of what they spend, with the change back to themselves.
fn pay_round(
    core: &NodeHandle,
    users: &mut [User],
    auditor: &AuditorSecret,
    tally: &mut Tally,
    rng: &mut StdRng,
) -> BenchResult<()> {
    let count = users.len();
    let mut confidential_plans = vec![];
    let mut confidential_payees = vec![];
    let mut transparent = vec![];
    for payer in 0..count {
        let payee = (payer + rng.gen_range(1..count)) % count;
        let payee_owner = users[payee].owner;
        let user = &mut users[payer];
        let can_pay_in_clear = user.coins.iter().any(|c| c.output.value >= 2);
        // Half the payments at each level, as far as what the payer holds allows.
        let confidential = !user.notes.is_empty() && (!can_pay_in_clear || rng.gen_bool(0.5));
        if let Some(note) = confidential.then(|| user.notes.remove(0)) {
            let amount = rng.gen_range(0..=note.opening.value);
            let plan = ConfidentialPlan {
                transparent_inputs: vec![],
                outputs: vec![(payee_owner, amount), (user.owner, note.opening.value - amount)],
                confidential_inputs: vec![(note.input, note.opening)],
                transparent_outputs: vec![],
                auditors: vec![auditor.public()],
            };
            confidential_plans.push((plan, user.key, vec![user.key]));
            confidential_payees.push((payer, payee));
        } else if let Some(at) = user.coins.iter().position(|c| c.output.value >= 2) {
            let coin = user.coins.remove(at);
            let amount = rng.gen_range(1..coin.output.value);
            let mut tx = Transaction {
                inputs: vec![coin.to_input()],
                outputs: vec![
                    Output {
                        witness_program_commitment: payee_owner,
                        value: amount,
                    },
                    Output {
                        witness_program_commitment: user.owner,
                        value: coin.output.value - amount,
                    },
                ],
                witnesses: vec![],
            };
            tx.sign(&[user.key], NonceMode::Randomized)
                .map_err(|error| BenchError::Failed(error.to_string()))?;
            transparent.push((payer, payee, SpecieTransaction::Transfer(tx)));
        }
    }
    let proven = prove_all(confidential_plans, rng.gen())?;
    let mut txs: Vec<SpecieTransaction> = proven
        .iter()
        .map(|(tx, _)| SpecieTransaction::from(tx.clone()))
        .collect();
    txs.extend(transparent.iter().map(|(_, _, tx)| tx.clone()));
    let statuses = submit_all(core, txs)?;
    let (confidential_statuses, transparent_statuses) = statuses.split_at(proven.len());
    for (((tx, openings), (payer, payee)), status) in proven.iter().zip(&confidential_payees).zip(confidential_statuses)
    {
        if *status != TxStatus::Confirmed {
            tally.refused_honest += 1;
            continue;
        }
        tally.confidential += 1;
        receive_notes(&mut users[*payee], tx, openings, 0..1);
        receive_notes(&mut users[*payer], tx, openings, 1..2);
        tally.known.insert(
            tx.txid(),
            Known {
                payer: Owner::Key(users[*payer].owner),
                outputs: tx
                    .owners
                    .iter()
                    .map(|owner| Owner::Key(*owner))
                    .zip(openings.iter().map(|o| o.value))
                    .collect(),
            },
        );
    }
    for ((payer, payee, tx), status) in transparent.iter().zip(transparent_statuses) {
        if *status != TxStatus::Confirmed {
            tally.refused_honest += 1;
            continue;
        }
        tally.transparent += 1;
        let created = tx.created_outputs();
        users[*payee].coins.push(created[0]);
        users[*payer].coins.push(created[1]);
    }
    Ok(())
}

/// The ways a forger tries to cheat; every one must be refused.
const FORGERIES: [&str; 7] = [
    "transplanted proof",
    "clear output beyond the proof",
    "auditor left out",
    "tampered range proof",
    "replayed transaction",
    "endorsement by a key outside the group",
    "another transaction's endorsement",
];
/// The endorsement group: 3 of 4 endorsers must sign, and endorser 4 is compromised (it signs
/// whatever it is sent).
const ENDORSERS_K: u16 = 3;
const ENDORSERS_N: u16 = 4;
const COMPROMISED_ENDORSER: u16 = 4;

/// The forger (user 0) submits one forgery of each kind, built from a note it holds.
fn forge(
    core: &NodeHandle,
    users: &[User],
    auditor: &AuditorSecret,
    tally: &mut Tally,
    rng: &mut StdRng,
) -> BenchResult<()> {
    let forger = &users[0];
    let Some(note) = forger.notes.first() else {
        return Ok(());
    };
    let honest = ConfidentialPlan {
        transparent_inputs: vec![],
        confidential_inputs: vec![(note.input, note.opening)],
        outputs: vec![(forger.owner, note.opening.value)],
        transparent_outputs: vec![],
        auditors: vec![auditor.public()],
    };
    let prove = |plan: &ConfidentialPlan, rng: &mut StdRng| {
        plan.prove_and_sign(&[forger.key], NonceMode::Randomized, rng)
            .map(|(tx, _)| tx)
            .map_err(|error| BenchError::Failed(error.to_string()))
    };
    let resign = |tx: &mut ConfidentialTransaction| {
        tx.sign(&[forger.key], NonceMode::Randomized)
            .map_err(|error| BenchError::Failed(error.to_string()))
    };
    let mut forged = vec![];
    // A proof made for another transaction: the note paid to a second key of the forger.
    let mut transplanted = prove(&honest, rng)?;
    transplanted.owners[0] = owner_of(&Keypair::new_global(rng));
    resign(&mut transplanted)?;
    forged.push(transplanted);
    // Money printed in clear: a transparent output the proof does not account for.
    let mut printing = prove(&honest, rng)?;
    printing.transparent_outputs.push(Output {
        witness_program_commitment: forger.owner,
        value: 1_000_000,
    });
    resign(&mut printing)?;
    forged.push(printing);
    // The auditor with jurisdiction left out.
    let mut hidden = honest.clone();
    hidden.auditors = vec![AuditorSecret::random(rng).public()];
    forged.push(prove(&hidden, rng)?);
    // A range proof tampered with (what an out-of-range value would need).
    let tx = prove(&honest, rng)?;
    let mut bytes = specie_codec::Encode::encode(&SpecieTransaction::from(tx));
    let at = bytes.len() - 200;
    bytes[at] ^= 0x01;
    let decoded = <SpecieTransaction as specie_codec::Decode>::decode_exact(&bytes);
    match decoded
        .as_ref()
        .ok()
        .and_then(|tx| tx.capability::<ConfidentialTransaction>())
    {
        Some(tampered) => {
            let mut tampered = tampered.clone();
            resign(&mut tampered)?;
            forged.push(tampered);
        }
        // Not even a transaction any more: refused before any sentinel sees it.
        _ => count_forgery(tally, "undecodable"),
    }
    let printing = SpecieTransaction::from(forged[1].clone());
    let mut txs: Vec<SpecieTransaction> = forged.into_iter().map(SpecieTransaction::from).collect();
    // A replay of a confidential payment the shards already applied.
    let confirmed = tally.known.keys().next().copied();
    let confirmed = confirmed.and_then(|txid| core.ledger_transaction(txid).ok().flatten());
    if let Some(entry) = &confirmed {
        txs.push(entry.record.transaction().clone());
    }
    let mut statuses = submit_all(core, txs)?;
    // The compromised sentinel goes around the endorsers, straight to the core's gate, with the
    // money-printing transaction: endorsed by a key outside the group, or by another
    // transaction's genuine endorsement.
    let mut around = vec![(printing.clone(), outsider_endorsement(&printing, rng))];
    if let Some(endorsement) = confirmed.as_ref().and_then(|entry| entry.record.endorsement()) {
        around.push((printing, endorsement.clone()));
    }
    tally.forged_endorsements += around.len() as u64;
    statuses.extend(submit_endorsed_all(core, around)?);
    for status in statuses {
        if status == TxStatus::Confirmed {
            tally.forged += 1;
        } else {
            count_forgery(tally, status.code());
        }
    }
    Ok(())
}

/// An endorsement of `tx` alone in its batch, signed by a key outside the endorsers' group.
fn outsider_endorsement(tx: &SpecieTransaction, rng: &mut StdRng) -> Endorsement {
    let digest = tx.compact().attestation_message();
    let message = specie_endorsement::merkle::MerkleTree::new(&[digest]).message();
    Endorsement {
        signature: schnorr_sign(&Keypair::new_global(rng), &message, NonceMode::Randomized),
        leaf_count: 1,
        index: 0,
        siblings: vec![],
    }
}

/// Hands endorsed transactions to the core's gate and waits for every outcome.
fn submit_endorsed_all(core: &NodeHandle, txs: Vec<(SpecieTransaction, Endorsement)>) -> BenchResult<Vec<TxStatus>> {
    let count = txs.len();
    let numbered = txs
        .into_iter()
        .enumerate()
        .map(|(n, (tx, e))| (n as u64, tx, e))
        .collect();
    wait_for_outcomes(count, |reply| core.submit_endorsed(numbered, reply))
}

fn count_forgery(tally: &mut Tally, code: &str) {
    tally.forged += 1;
    tally.forged_refused += 1;
    *tally.forged_codes.entry(code.to_string()).or_default() += 1;
}

/// Every user unshields their first note whole into a coin of their own (a zero note as the
/// confidential change a transfer must have); then the issuer redeems one coin of every fourth
/// user.
fn unshield_and_redeem(
    core: &NodeHandle,
    users: &mut [User],
    issuer: &Keypair,
    auditor: &AuditorSecret,
    tally: &mut Tally,
    rng: &mut StdRng,
) -> BenchResult<()> {
    let mut plans = vec![];
    let mut who = vec![];
    for (index, user) in users.iter_mut().enumerate() {
        let Some(at) = user.notes.iter().position(|n| n.opening.value > 0) else {
            continue;
        };
        let note = user.notes.remove(at);
        let plan = ConfidentialPlan {
            transparent_inputs: vec![],
            confidential_inputs: vec![(note.input, note.opening)],
            outputs: vec![(user.owner, 0)],
            transparent_outputs: vec![Output {
                witness_program_commitment: user.owner,
                value: note.opening.value,
            }],
            auditors: vec![auditor.public()],
        };
        plans.push((plan, user.key, vec![user.key]));
        who.push(index);
    }
    let proven = prove_all(plans, rng.gen())?;
    submit_proven(core, &proven, "an unshielding")?;
    for ((tx, openings), index) in proven.iter().zip(who) {
        tally.confidential += 1;
        tally.unshielded_value += tx.proof.public_out();
        let user = &mut users[index];
        user.coins.extend(SpecieTransaction::from(tx.clone()).created_outputs());
        receive_notes(user, tx, openings, 0..1);
    }
    let mut redeems = vec![];
    for user in users.iter_mut().step_by(4) {
        let Some(coin) = user.coins.pop() else { continue };
        let redeem = RedeemTransaction::new_signed(
            coin.output.value,
            vec![coin.to_input()],
            vec![],
            &[user.key],
            issuer,
            NonceMode::Randomized,
        )
        .map_err(|error| BenchError::Failed(error.to_string()))?;
        tally.redeemed += coin.output.value;
        redeems.push(SpecieTransaction::Redeem(redeem));
    }
    expect_confirmed(submit_all(core, redeems)?, "a redeem")
}

struct Audit {
    minted: u64,
    redeemed: u64,
    transparent_held: u64,
    confidential_held: u64,
    anonymous_held: u64,
    unlinkable_held: u64,
    /// The unlinkable level's total as the auditor reads it (what entered less what left).
    auditor_unlinkable: u64,
    auditor_held: u64,
    auditor_unreadable: usize,
    reconstructed: u64,
    reconstructed_mismatches: u64,
    unreadable_payments: u64,
    /// Ledger records whose endorsement verifies under the group key, and those that do not.
    endorsed_records: u64,
    unendorsed_records: u64,
    forged_endorsements: u64,
    ledger_blocks: u64,
    ledger_replays_to_uhs: bool,
    forgeries_refused: bool,
    honest_refused: u64,
    supply: SupplyCheck,
}

impl Audit {
    fn supply_ok(&self) -> bool {
        let circulating = self.minted - self.redeemed;
        self.transparent_held + self.confidential_held + self.anonymous_held + self.unlinkable_held == circulating
            && self.auditor_held == circulating
            && self.auditor_unlinkable == self.unlinkable_held
            && self.auditor_unreadable == 0
    }

    fn auditor_ok(&self) -> bool {
        self.reconstructed_mismatches == 0 && self.unreadable_payments == 0
    }

    fn ok(&self) -> bool {
        self.supply_ok()
            && self.auditor_ok()
            && self.ledger_replays_to_uhs
            && self.forgeries_refused
            && self.honest_refused == 0
            && self.unendorsed_records == 0
            && self.forged_endorsements > 0
            && self.supply.ok()
    }
}

fn audit(
    core: &NodeHandle,
    users: &[User],
    (secret, level): (&AuditorSecret, &AnonymousLevel),
    tally: &Tally,
    (issuer, minted): (&Keypair, u64),
) -> BenchResult<Audit> {
    let coins: Vec<(UhsId, u64)> = users
        .iter()
        .flat_map(|u| u.coins.iter().chain(&u.reserve).map(|c| (c.uhs_id, c.output.value)))
        .collect();
    let notes: Vec<(UhsId, u64)> = users
        .iter()
        .flat_map(|u| u.notes.iter().map(|n| (n.input.uhs_id(), n.opening.value)))
        .collect();
    let ledger = crate::payments::check_ledger_of_record(core)?.step("the demo's core keeps a ledger of record")?;
    let anonymous_notes: Vec<(UhsId, u64)> = users.iter().flat_map(|u| u.anonymous.held()).collect();
    let view = OwnerView {
        secret: level.owner_auditor.clone(),
        directory: AuditDirectory::new(users.iter().map(|u| u.anonymous.id)),
    };
    let mut auditor = PassiveAuditor::new(secret.clone(), COIN_VALUE).with_owner_view(view);
    let (mut reconstructed, mut mismatches, mut unreadable) = (0, 0, 0);
    let (mut endorsed_records, mut unendorsed_records) = (0, 0);
    let group_key = core
        .endorsement_group_key()
        .step("the demo's core has an endorsement group")?;
    for height in 1..=ledger.blocks {
        let block: Block = core
            .ledger_block(height)
            .step("cannot read the ledger")?
            .step("a block below the head is missing")?;
        for record in &block.records {
            let digest = record.compact().attestation_message();
            match record.endorsement().map(|e| e.verify(&group_key, &digest)) {
                Some(Ok(())) => endorsed_records += 1,
                _ => unendorsed_records += 1,
            }
        }
        for seen in auditor
            .read(block.header.height, block.records.iter().map(|r| r.transaction()))
            .map_err(|error| BenchError::Failed(error.to_string()))?
        {
            let unnamed = seen.outputs.iter().any(|p| p.owner == Owner::Unknown);
            if (seen.confidential && !seen.readable()) || ((seen.anonymous || seen.unlinkable) && unnamed) {
                unreadable += 1;
            }
            if let Some(agrees) = agrees_with_wallets(&seen, tally) {
                reconstructed += 1;
                mismatches += u64::from(!agrees);
            }
        }
    }
    let (auditor_held, auditor_unreadable) = auditor.holdings();
    let transparent_held = value_in_uhs(core, &coins)?;
    let confidential_held = value_in_uhs(core, &notes)?;
    let anonymous_held = value_in_uhs(core, &anonymous_notes)?;
    let mut unlinkable_held = 0;
    for user in users {
        unlinkable_held += user.unlinkable.unspent_value(core, user.anonymous.identity())?;
    }
    let hidden = u128::from(confidential_held) + u128::from(anonymous_held) + u128::from(unlinkable_held);
    let figures = DemoFigures::new(
        issuer,
        minted.into(),
        tally.redeemed.into(),
        transparent_held.into(),
        hidden,
    );
    Ok(Audit {
        minted,
        redeemed: tally.redeemed,
        transparent_held,
        confidential_held,
        anonymous_held,
        unlinkable_held,
        auditor_unlinkable: auditor.unlinkable_pool(),
        auditor_held,
        auditor_unreadable,
        reconstructed,
        reconstructed_mismatches: mismatches,
        unreadable_payments: unreadable,
        endorsed_records,
        unendorsed_records,
        forged_endorsements: tally.forged_endorsements,
        ledger_blocks: ledger.blocks,
        ledger_replays_to_uhs: ledger.replays_to_uhs,
        forgeries_refused: tally.forged > 0 && tally.forged == tally.forged_refused,
        honest_refused: tally.refused_honest,
        supply: SupplyCheck::new(None, ledger.supply, vec![], &figures),
    })
}

/// Whether the auditor's reading of a payment the wallets know names the same payer and payees
/// with the same values; `None` for a transaction the wallets did not record as a private payment.
fn agrees_with_wallets(seen: &specie_auditor::Audited, tally: &Tally) -> Option<bool> {
    let payer = seen.inputs.first().map(|p| p.owner);
    let outputs: Vec<(Owner, u64)> = seen
        .outputs
        .iter()
        .map(|p| (p.owner, p.value.unwrap_or(u64::MAX)))
        .collect();
    if let Some(known) = tally.known_unlinkable.get(&seen.txid) {
        return Some(payer == Some(known.payer) && outputs == known.payees);
    }
    let known = tally.known.get(&seen.txid)?;
    Some(payer == Some(known.payer) && outputs == known.outputs)
}

/// The demo's figures as one JSON object (`--json`).
fn json_summary(args: &PrivacyDemoOptions, tally: &Tally, audit: &Audit, elapsed: Duration) -> serde_json::Value {
    serde_json::json!({
        "users": args.users,
        "shape": args.shape.name(),
        "rounds": args.rounds,
        "elapsed_s": elapsed.as_secs_f64(),
        "transparent_payments": tally.transparent,
        "confidential_transactions": tally.confidential,
        "anonymous_transactions": tally.anonymous,
        "anonymous_entered": tally.anonymous_entered,
        "unlinkable_transactions": tally.unlinkable,
        "unlinkable_entered": tally.unlinkable_entered,
        "shielded_value": tally.shielded_value,
        "unshielded_value": tally.unshielded_value,
        "forgeries": tally.forged,
        "forgeries_refused": tally.forged_refused,
        "forgery_codes": tally.forged_codes,
        "honest_refused": tally.refused_honest,
        "auditor_reconstructed": audit.reconstructed,
        "auditor_mismatches": audit.reconstructed_mismatches,
        "minted": audit.minted,
        "redeemed": audit.redeemed,
        "transparent_held": audit.transparent_held,
        "confidential_held": audit.confidential_held,
        "anonymous_held": audit.anonymous_held,
        "unlinkable_held": audit.unlinkable_held,
        "auditor_unlinkable": audit.auditor_unlinkable,
        "auditor_held": audit.auditor_held,
        "ledger_blocks": audit.ledger_blocks,
        "ledger_replays_to_uhs": audit.ledger_replays_to_uhs,
        "endorsers": format!("{ENDORSERS_K} of {ENDORSERS_N}, endorser {COMPROMISED_ENDORSER} compromised"),
        "forged_endorsements": audit.forged_endorsements,
        "ledger_records_endorsed": audit.endorsed_records,
        "ledger_records_unendorsed": audit.unendorsed_records,
        "supply": audit.supply.json(),
        "audit_ok": audit.ok(),
    })
}

fn report(args: &PrivacyDemoOptions, tally: &Tally, audit: &Audit, elapsed: Duration) {
    let mark = |ok: bool| if ok { "ok" } else { "FAILED" };
    if args.json {
        let summary = json_summary(args, tally, audit, elapsed);
        println!("{summary}");
        return;
    }
    println!(
        "specie demo --privacy: {} users, {} rounds, embedded core ({}) with the ledger of record, threshold endorsement and one auditor, in {:.1} s",
        args.users,
        args.rounds,
        args.shape,
        elapsed.as_secs_f64()
    );
    println!(
        "  payments     {} transparent, {} confidential transactions ({} shielded in clear, {} unshielded), \
         {} anonymous transactions ({} entered from coins; values in clear for half the users, hidden for the rest), \
         {} unlinkable transactions ({} entered from coins; spent by serial number, tokens certified by 2 of 3 certifiers)",
        tally.transparent,
        tally.confidential,
        tally.shielded_value,
        tally.unshielded_value,
        tally.anonymous,
        tally.anonymous_entered,
        tally.unlinkable,
        tally.unlinkable_entered
    );
    let codes: Vec<String> = tally.forged_codes.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    println!(
        "  forgeries    {} submitted ({}), {} refused ({})  [{}]",
        tally.forged,
        FORGERIES
            .iter()
            .chain(&ANONYMOUS_FORGERIES)
            .chain(&UNLINKABLE_FORGERIES)
            .copied()
            .collect::<Vec<_>>()
            .join(", "),
        tally.forged_refused,
        codes.join(", "),
        mark(audit.forgeries_refused)
    );
    println!(
        "  auditor      reconstructed {} confidential, anonymous and unlinkable payments from the ledger (owners by enrolment id, every new token's value, the level's total exact): {} differ from the wallets, {} unreadable  [{}]",
        audit.reconstructed,
        audit.reconstructed_mismatches,
        audit.unreadable_payments,
        mark(audit.auditor_ok())
    );
    println!(
        "  ledger       {} blocks replay to exactly the shards' UHS  [{}]",
        audit.ledger_blocks,
        mark(audit.ledger_replays_to_uhs)
    );
    println!(
        "  supply       minted {} - redeemed {} = {}; wallets hold {} in clear + {} confidential + {} anonymous + {} unlinkable; the auditor reads {} (the unlinkable level's {} by what entered and left it)  [{}]",
        audit.minted,
        audit.redeemed,
        audit.minted - audit.redeemed,
        audit.transparent_held,
        audit.confidential_held,
        audit.anonymous_held,
        audit.unlinkable_held,
        audit.auditor_held,
        audit.auditor_unlinkable,
        mark(audit.supply_ok())
    );
    println!(
        "  endorsement  {ENDORSERS_K} of {ENDORSERS_N} endorsers sign each batch (endorser {COMPROMISED_ENDORSER} compromised, signing anything); \
         {} forged endorsements refused at the core's gate; {} of {} ledger records carry an endorsement that verifies  [{}]",
        audit.forged_endorsements,
        audit.endorsed_records,
        audit.endorsed_records + audit.unendorsed_records,
        mark(audit.unendorsed_records == 0 && audit.forged_endorsements > 0)
    );
    audit.supply.print();
    println!(
        "  audit        {}",
        if audit.ok() {
            "OK: no money was created or destroyed, and the auditor sees every confidential, anonymous and unlinkable payment"
        } else {
            "FAILED"
        }
    );
}
