//! `specie cluster rotate-authority`: the FastPay committee moves to its next epoch, in which one
//! seat has a new key (docs/operator-guide.md, "Rotating a FastPay authority's key";
//! docs/byzantine-mode.md, "Committee epochs").
//!
//! 1. A new key for the seat is made beside the old one (`authority-<i>.fastpay.key.next`).
//! 2. The committee record of the next epoch (the same seats, that seat's key replaced) is signed
//!    by every seat whose key this cluster holds, a quorum at least, and appended to the cluster
//!    file's `fastpay_committee.records`: the publication. Sentinels follow the file, so they
//!    check redeems of the new epoch at once; wallets and clients read it from there. The
//!    record is then kept in the ledger, through the core, as a FastPay epoch transaction
//!    (docs/transaction-format.md §5.11): its marker lets the ledger hold one successor of each
//!    committee, so no two records of one epoch can both be published.
//! 3. Every shard of the other authorities is brought the record and enters the epoch, then
//!    the replaced seat's, which answer only once their log is handed over to the seat's new key
//!    (the leader proposes the hand-over as it applies the record): from then on they vote no
//!    more. In that order a quorum runs in one epoch or the other at every moment.
//! 4. The replaced seat's processes are stopped, the new key takes the old one's place (the old
//!    one is gone for good: a retired key that leaks could still sign in its epoch), and they
//!    start again on the same logs, in which the hand-over seats the new key.
//!
//! Payments go on meanwhile at the other seats (a quorum of n − 1 ≥ 2f + 1): a client that hears
//! of the new epoch learns its record and pays again in its name. Interrupted, the command is
//! run again: with the next key kept (`.next`) and its record published, it takes up at step 3
//! (the seat's processes may start with the old key meanwhile, to be handed over); once the
//! seat's shards are handed over (`.next` renamed `.ready`), at step 4.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use specie_committee::http_client::Request;
use specie_committee::{AuthorityReply, HttpCommittee, HttpCommitteeOptions};
use specie_fastpay::{AuthorityIndex, Committee, CommitteeChain, CommitteeRecord, SigningKey};
use specie_fastpay_primary::FastpayEpoch;
use specie_transaction::SpecieTransaction;
use specie_wallet::{NodeClient, SubmitStatus};

use crate::credentials::{self, authority_key_path, authority_next_key_path};
use crate::membership::{change_lock, write_topology};
use crate::supervisor::{self, io, Member, SupervisorError};
use crate::topology::{authority_group_name, FastpayCommitteeConfig, Topology};

/// Prints a step, never failing the rotation (see `membership`'s `say!`).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// How long every shard has to enter the epoch, and the restarted shards to lead again.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

fn group_name(seat: AuthorityIndex, shard: u32) -> String {
    authority_group_name(usize::from(seat), shard as usize)
}

fn rotation_error(authority: AuthorityIndex, reason: impl Into<String>) -> SupervisorError {
    SupervisorError::Rotation {
        authority,
        reason: reason.into(),
    }
}

/// The seat's next key once its shards are handed over to it: only the restart with it is
/// left (`.next` renamed).
fn ready_key_path(pki_dir: &Path, authority: AuthorityIndex) -> PathBuf {
    let mut path = authority_key_path(pki_dir, authority).into_os_string();
    path.push(".ready");
    PathBuf::from(path)
}

/// `specie cluster rotate-authority`: seat `authority` gets a new key in the committee's next
/// epoch, with payments going on. Returns the new epoch.
pub fn rotate_authority(dir: &Path, authority: AuthorityIndex) -> Result<u64, SupervisorError> {
    let _change = change_lock(dir)?;
    let (path, mut topology) = supervisor::load(dir)?;
    let config = committee_config(&topology, authority)?.clone();
    let chain = config
        .chain()
        .map_err(|error| rotation_error(authority, error.to_string()))?;
    let next_path = authority_next_key_path(&topology.pki_dir, authority);
    let ready_path = ready_key_path(&topology.pki_dir, authority);
    if let Some(record) = resumed(&ready_path, &chain, authority)? {
        say!(
            "authority {authority}: taking up the rotation to epoch {}: its shards are handed over; restarting them with {}",
            record.next.epoch(),
            ready_path.display()
        );
        return finish(dir, &path, &topology, authority, &record);
    }
    let record = match resumed(&next_path, &chain, authority)? {
        Some(record) => {
            say!(
                "authority {authority}: taking up the rotation to epoch {} ({} kept)",
                record.next.epoch(),
                next_path.display()
            );
            record
        }
        None => {
            let record = publish(dir, &path, &mut topology, &chain, authority, &next_path)?;
            say!(
                "authority {authority}: epoch {} published in {} (seat {authority}'s new key {})",
                record.next.epoch(),
                path.display(),
                hex::encode(record.next.members()[usize::from(authority)])
            );
            record
        }
    };
    keep_in_ledger(&topology, authority, &record)?;
    enter_everywhere(&client(&config, authority)?, &config, authority, &record)?;
    // The seat's logs are handed over: from here on only the restart with the new key is left,
    // which a second run takes up even if the seat's processes are stopped by then.
    std::fs::rename(&next_path, &ready_path).map_err(io(format!("cannot rename {}", next_path.display())))?;
    finish(dir, &path, &topology, authority, &record)
}

/// A client of the committee's authorities, for the operator's calls.
fn client(config: &FastpayCommitteeConfig, authority: AuthorityIndex) -> Result<HttpCommittee, SupervisorError> {
    let first = config
        .committee()
        .map_err(|error| rotation_error(authority, error.to_string()))?;
    HttpCommittee::new(
        Arc::new(first),
        config.http_addresses(),
        HttpCommitteeOptions::default(),
    )
    .map_err(|error| rotation_error(authority, error.to_string()))
}

/// Step 4: the seat's processes restarted with the ready key, and each shard leading again.
fn finish(
    dir: &Path,
    path: &Path,
    topology: &Topology,
    authority: AuthorityIndex,
    record: &CommitteeRecord,
) -> Result<u64, SupervisorError> {
    let config = committee_config(topology, authority)?;
    restart_with_next_key(
        dir,
        path,
        topology,
        authority,
        &ready_key_path(&topology.pki_dir, authority),
    )?;
    wait_until_leading(&client(config, authority)?, config, authority, record.next.epoch())?;
    say!(
        "authority {authority}: runs with its new key in epoch {}; the old key is deleted",
        record.next.epoch()
    );
    Ok(record.next.epoch())
}

fn committee_config(
    topology: &Topology,
    authority: AuthorityIndex,
) -> Result<&FastpayCommitteeConfig, SupervisorError> {
    let config = topology
        .fastpay_committee
        .as_ref()
        .filter(|config| !config.authorities.is_empty())
        .ok_or_else(|| {
            rotation_error(
                authority,
                "this cluster runs no FastPay committee (start one with `specie cluster up --authorities`)",
            )
        })?;
    if usize::from(authority) >= config.members.len() {
        return Err(rotation_error(
            authority,
            format!(
                "the committee has authorities 0 to {}",
                config.members.len().saturating_sub(1)
            ),
        ));
    }
    Ok(config)
}

/// The record of a rotation that was interrupted after it was published (the next key kept,
/// and the current epoch appointing it); none to take up otherwise (a next key never published
/// is dropped: it was never appointed).
fn resumed(
    next_path: &Path,
    chain: &CommitteeChain,
    authority: AuthorityIndex,
) -> Result<Option<CommitteeRecord>, SupervisorError> {
    if !next_path.exists() {
        return Ok(None);
    }
    let key = read_key(next_path, authority)?;
    let appointed = chain.current().members().get(usize::from(authority)) == Some(&key.verifying_key().to_bytes());
    match (appointed, chain.records().last()) {
        (true, Some(record)) => Ok(Some(record.clone())),
        _ => {
            std::fs::remove_file(next_path).map_err(io(format!("cannot remove {}", next_path.display())))?;
            Ok(None)
        }
    }
}

fn read_key(path: &Path, authority: AuthorityIndex) -> Result<SigningKey, SupervisorError> {
    let text = std::fs::read_to_string(path).map_err(io(format!("cannot read {}", path.display())))?;
    let seed = hex::decode(text.trim())
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or_else(|| rotation_error(authority, format!("{} is not a 32-byte hex key", path.display())))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Makes the seat's next key, signs the next epoch's record with every seat's current key this
/// cluster holds (a quorum at least), and appends it to the cluster file.
fn publish(
    dir: &Path,
    path: &Path,
    topology: &mut Topology,
    chain: &CommitteeChain,
    authority: AuthorityIndex,
    next_path: &Path,
) -> Result<CommitteeRecord, SupervisorError> {
    let current: &Committee = chain.current();
    let next = SigningKey::from_bytes(&rand::random::<[u8; 32]>());
    let mut members = current.members().to_vec();
    members[usize::from(authority)] = next.verifying_key().to_bytes();
    let mut record =
        CommitteeRecord::propose(current, members).map_err(|error| rotation_error(authority, error.to_string()))?;
    let mut unsigned = vec![];
    for seat in 0..current.size() as AuthorityIndex {
        match credentials::authority_key(topology, seat) {
            Ok(key) => record.endorse(seat, &key),
            Err(error) => unsigned.push(format!("seat {seat}: {error}")),
        }
    }
    record.check(current).map_err(|error| {
        rotation_error(
            authority,
            format!(
                "the record cannot be signed by a quorum of the current seats ({error}): {}",
                unsigned.join("; ")
            ),
        )
    })?;
    credentials::write_secret(next_path, &hex::encode(next.to_bytes()))
        .map_err(supervisor::credentials("cannot keep the next key"))?;
    let committee = topology.fastpay_committee.as_mut().expect("checked");
    committee.records.push(record.to_hex());
    write_topology(dir, path, topology)?;
    Ok(record)
}

/// How long one submission of the epoch transaction waits to be final.
const SUBMIT_TIMEOUT_MS: u64 = 10_000;

/// Keeps the record in the ledger: a FastPay epoch transaction submitted through the core's
/// sentinels (each in turn while one is busy or down) until it is final, before any authority
/// enters the epoch. Run again, it finds the ledger holding the record: the marker of its
/// previous committee is present, and this cluster file, the one writer of the chain, holds no
/// other successor. A sentinel that knows another successor refuses it (`epoch_conflicts`):
/// the committee endorsed two next epochs, which no rotation from this file does; that and
/// every other refusal stops the rotation before any authority enters the epoch.
fn keep_in_ledger(
    topology: &Topology,
    authority: AuthorityIndex,
    record: &CommitteeRecord,
) -> Result<(), SupervisorError> {
    let epoch = record.next.epoch();
    let tx = SpecieTransaction::from(FastpayEpoch { record: record.clone() });
    let marker = tx.marker().expect("an epoch transaction has a marker");
    let started = Instant::now();
    let mut last = String::from("this cluster has no sentinel");
    let mut waited = false;
    loop {
        for sentinel in &topology.sentinels {
            let url = format!("http://{}", sentinel.http);
            let client = NodeClient::new(&url).map_err(|error| rotation_error(authority, error.to_string()))?;
            let status = match client.submit(std::slice::from_ref(&tx), SUBMIT_TIMEOUT_MS) {
                Ok(results) => results.into_iter().next().map(|result| result.status),
                Err(error) => {
                    last = format!("{url}: {error}");
                    continue;
                }
            };
            match status {
                Some(SubmitStatus::Confirmed) => {
                    say!(
                        "epoch {epoch}: kept in the ledger (transaction {})",
                        hex::encode(tx.txid().0)
                    );
                    return Ok(());
                }
                Some(SubmitStatus::Invalid { code, message, .. } | SubmitStatus::Malformed { code, message }) => {
                    return Err(rotation_error(
                        authority,
                        format!("the core refuses the record of epoch {epoch} ({code}: {message})"),
                    ));
                }
                Some(SubmitStatus::Rejected { code, message }) => {
                    if client.query_uhs(&[marker]).is_ok_and(|present| present == [true]) {
                        say!("epoch {epoch}: the ledger holds its record already");
                        return Ok(());
                    }
                    last = format!("{url}: {message} ({code})");
                }
                Some(other) => last = format!("{url}: {}", other.reason()),
                None => last = format!("{url}: no result"),
            }
        }
        if !waited {
            say!(
                "epoch {epoch}: the core does not take the record yet ({last}); trying for {} s",
                STEP_TIMEOUT.as_secs()
            );
            waited = true;
        }
        if started.elapsed() > STEP_TIMEOUT {
            return Err(rotation_error(
                authority,
                format!(
                    "the core did not keep the record of epoch {epoch} in {} s (last: {last}); the record is published \
                     in the cluster file: once the sentinels answer (`specie cluster up` starts them), run this command \
                     again",
                    STEP_TIMEOUT.as_secs()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Brings every shard of every authority the record, each until it answers that it is in the
/// epoch: the other seats' shards first, all at once, then the replaced seat's (which answer once
/// their logs are handed over, and from then on vote no more). In that order a payer finds a
/// quorum in one epoch or the other at every moment: the replaced seat still votes in the old
/// one until the others are in the new one. The replaced seat's shards must all answer; another
/// seat's shard that cannot be reached now is reported, and clients bring it the record when it
/// answers them in the old epoch's name.
fn enter_everywhere(
    client: &HttpCommittee,
    config: &FastpayCommitteeConfig,
    authority: AuthorityIndex,
    record: &CommitteeRecord,
) -> Result<(), SupervisorError> {
    let epoch = record.next.epoch();
    let shards = |seat: usize| {
        (0..config.authorities[seat].shards.len() as u32).map(move |shard| (seat as AuthorityIndex, shard))
    };
    let others: Vec<(AuthorityIndex, u32)> = (0..config.authorities.len())
        .filter(|seat| *seat != usize::from(authority))
        .flat_map(shards)
        .collect();
    let replaced: Vec<(AuthorityIndex, u32)> = shards(usize::from(authority)).collect();
    for (seat, shard, answer) in enter_all(client, record, &others) {
        match answer {
            Ok(()) => say!("{}: in epoch {epoch}", group_name(seat, shard)),
            Err(reply) => say!(
                "warning: {} did not enter epoch {epoch} yet ({reply:?}); clients bring it the record when they pay",
                group_name(seat, shard)
            ),
        }
    }
    for (seat, shard, answer) in enter_all(client, record, &replaced) {
        if let Err(reply) = answer {
            return Err(rotation_error(
                authority,
                format!(
                    "{} did not enter epoch {epoch} in {} s ({reply:?}); the record is published: if its processes are \
                     down, `specie cluster up` starts them (with the seat's old key, until the rotation ends), then run \
                     this command again",
                    group_name(seat, shard),
                    STEP_TIMEOUT.as_secs()
                ),
            ));
        }
        say!(
            "{}: in epoch {epoch}, handed over to the new key",
            group_name(seat, shard)
        );
    }
    Ok(())
}

/// Brings each of `shards` the record at once, each on a thread of its own, until it is in the
/// epoch or the step's time is out.
fn enter_all(
    client: &HttpCommittee,
    record: &CommitteeRecord,
    shards: &[(AuthorityIndex, u32)],
) -> Vec<(AuthorityIndex, u32, Result<(), Box<AuthorityReply>>)> {
    let epoch = record.next.epoch();
    let started = Instant::now();
    std::thread::scope(|scope| {
        let asks: Vec<_> = shards
            .iter()
            .map(|&(seat, shard)| {
                let request = Request::EnterEpoch {
                    shard,
                    record: Box::new(record.clone()),
                };
                scope.spawn(move || {
                    let answer = ask_until(
                        client,
                        seat,
                        &request,
                        started,
                        |reply| matches!(reply, AuthorityReply::Epoch { epoch: e } if *e >= epoch),
                    );
                    (seat, shard, answer)
                })
            })
            .collect();
        asks.into_iter()
            .map(|ask| ask.join().expect("an ask does not panic"))
            .collect()
    })
}

/// Asks `seat` `request` until `done` holds of the answer or the step's time is out (then the
/// last answer).
fn ask_until(
    client: &HttpCommittee,
    seat: AuthorityIndex,
    request: &Request,
    started: Instant,
    done: impl Fn(&AuthorityReply) -> bool,
) -> Result<(), Box<AuthorityReply>> {
    loop {
        let reply = client.ask(seat, request.clone());
        if done(&reply) {
            return Ok(());
        }
        if started.elapsed() > STEP_TIMEOUT {
            return Err(Box::new(reply));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Stops the seat's processes, puts the next key in the old one's place, starts them again.
fn restart_with_next_key(
    dir: &Path,
    path: &Path,
    topology: &Topology,
    authority: AuthorityIndex,
    next_path: &Path,
) -> Result<(), SupervisorError> {
    let prefix = format!("authority-{authority}-shard-");
    let members: Vec<Member> = supervisor::members(path, topology)
        .into_iter()
        .filter(|member| member.name.starts_with(&prefix))
        .collect();
    let stopped = supervisor::stop(dir, &members);
    say!("authority {authority}: {stopped} processes stopped");
    let next = std::fs::read(next_path).map_err(io(format!("cannot read {}", next_path.display())))?;
    let key_path = authority_key_path(&topology.pki_dir, authority);
    specie_log::secret::write_atomically(&key_path, &next, true)
        .map_err(|error| rotation_error(authority, format!("cannot replace {}: {error}", key_path.display())))?;
    std::fs::remove_file(next_path).map_err(io(format!("cannot remove {}", next_path.display())))?;
    for member in &members {
        supervisor::spawn_member(dir, member)?;
    }
    Ok(())
}

/// Waits until each of the seat's shards leads again and is in `epoch`.
fn wait_until_leading(
    client: &HttpCommittee,
    config: &FastpayCommitteeConfig,
    authority: AuthorityIndex,
    epoch: u64,
) -> Result<(), SupervisorError> {
    let started = Instant::now();
    let shards = config.authorities[usize::from(authority)].shards.len() as u32;
    for shard in 0..shards {
        let request = Request::Epochs {
            shard,
            after: epoch - 1,
        };
        ask_until(
            client,
            authority,
            &request,
            started,
            |reply| matches!(reply, AuthorityReply::Epochs(records) if records.iter().any(|r| r.next.epoch() == epoch)),
        )
        .map_err(|reply| {
            rotation_error(
                authority,
                format!(
                    "{} did not come back in {} s ({reply:?}); see its log",
                    group_name(authority, shard),
                    STEP_TIMEOUT.as_secs()
                ),
            )
        })?;
    }
    Ok(())
}
