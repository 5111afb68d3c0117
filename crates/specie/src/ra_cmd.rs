//! `specie ra …`: the registration authority's operator tool (the anonymous privacy level's
//! enrolment, docs/privacy.md "Enrolment: the registration authority").
//!
//! The RA lives in a directory: `secret` (its 32-byte seed, hex, 0600), `state.json` (the
//! challenges it issued and not yet saw answered, and every enrolment it signed) and `lock`. The
//! state is one JSON document replaced atomically (temporary file, fsync, rename, fsync of the
//! directory) before anything the RA decided is printed, so nothing the RA printed is ever lost
//! and the file is never half written. Commands that change it take an exclusive lock (`flock`
//! on `lock`, released when the process ends, however it ends).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use rand::rngs::OsRng;
use serde::{Deserialize, Serialize};
use specie_codec::Encode;
use specie_credential::{
    EnrolError, EnrolmentChallenge, EnrolmentId, EnrolmentRequest, Jurisdiction, RegistrationAuthority, Textual,
    UserPublicKey,
};

/// The seed file, the state file and the lock file in the RA's directory.
const SECRET: &str = "secret";
const STATE: &str = "state.json";
const LOCK: &str = "lock";
/// The state file's `format` and `version`.
const STATE_FORMAT: &str = "specie-ra-state";
const STATE_VERSION: u32 = 1;
/// The largest state file read or written (about 150 000 enrolments).
pub const STATE_BYTES_MAX: u64 = 64 << 20;
/// The largest seed file read (64 hex digits and a newline; some slack for a CRLF or spaces).
const SECRET_BYTES_MAX: u64 = 1024;
/// How long a command waits for another one on the same directory to finish.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Shown after `specie ra --help`: the flow, and what to protect.
const RA_HELP: &str = "\
The flow, for a person KYC (done by you, out of band) mapped to enrolment id 7:
  specie ra init                       # once: makes ./ra, prints the RA's public key
  specie ra challenge --id 7           # prints specie-enrol-challenge1…: hand it to the person
                                       # (their wallet answers with specie-enrol-request1…)
  specie ra enrol specie-enrol-request1…     # checks it, prints specie-credential1…: hand it back
  specie ra list --jurisdiction 1 > ids      # the enrolled ids: an auditor's --directory
Every node that takes anonymous transactions runs with
`specie node --registration-authority <THE RA'S PUBLIC KEY>`.

Nothing the RA printed is lost: its state (DIR/state.json) is replaced atomically and synced
before a challenge or a credential is printed, and one command at a time holds DIR/lock.

Protect DIR/secret: whoever holds it can sign a credential for any enrolment id, and so spend
any anonymous output whose opening it learns (as its payer, or from a payment string); and a
lost one cannot be replaced (every credential and every node names
its public key). Back up DIR (secret and state.json) after every change. The state's outstanding
challenges let whoever reads them enrol in someone else's place: keep it as private as the secret.";

#[derive(Args)]
#[command(after_help = RA_HELP)]
pub struct RaArgs {
    /// The RA's directory: its secret seed (`secret`), its state (`state.json`), its lock.
    #[arg(long, global = true, default_value = "./ra", value_name = "DIR")]
    dir: PathBuf,
    #[command(subcommand)]
    command: RaCommand,
}

#[derive(Subcommand)]
enum RaCommand {
    /// Make a new RA in DIR (created if missing, 0700): a fresh random secret seed (DIR/secret,
    /// 0600) and an empty state. Prints its public key (hex), what `specie node
    /// --registration-authority` takes and wallets enrol with. Refuses a DIR that already holds
    /// an RA.
    Init,
    /// Print the RA's public key (hex) again.
    Key,
    /// After KYC mapped a person to enrolment id N: open enrolment N and print the challenge
    /// text to hand them (their wallet answers it). A new challenge for N replaces an earlier
    /// unanswered one. For an id already enrolled, only its enrolled key can answer (a wallet
    /// that lost its credential gets a fresh one).
    Challenge {
        /// The enrolment id KYC assigned to the person (unique per person).
        #[arg(long)]
        id: u64,
        /// The jurisdiction to file them under (an ISO 3166 numeric code, say), signed into
        /// their credential. An enrolled id keeps its jurisdiction.
        #[arg(long, default_value_t = 1)]
        jurisdiction: u32,
    },
    /// Check a wallet's enrolment request (it answers the outstanding challenge of its id, proves
    /// possession of its secret, is not a second key for an enrolled id nor a key enrolled for
    /// another id), record the enrolment durably, and print the credential text to hand back.
    /// Exits 1, saying why, if the request is refused.
    Enrol {
        /// The `specie-enrol-request1…` text, or `-` to read it from standard input.
        request: String,
    },
    /// Print the enrolled ids, one per line: the directory (`specie audit show --directory
    /// FILE`) of an auditor who oversees them.
    List {
        /// Only the enrolments of this jurisdiction.
        #[arg(long)]
        jurisdiction: Option<u32>,
        /// One JSON object: the enrolments and the outstanding challenges, each with its
        /// jurisdiction.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: RaArgs) -> anyhow::Result<ExitCode> {
    let dir = args.dir.as_path();
    match args.command {
        RaCommand::Init => init(dir)?,
        RaCommand::Key => {
            let authority = RegistrationAuthority::from_seed(&read_seed(dir)?);
            println!("{}", hex::encode(authority.public_key().encode()));
        }
        RaCommand::Challenge { id, jurisdiction } => challenge(dir, EnrolmentId(id), Jurisdiction(jurisdiction))?,
        RaCommand::Enrol { request } => enrol(dir, &request)?,
        RaCommand::List { jurisdiction, json } => list(dir, jurisdiction.map(Jurisdiction), json)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The state file as JSON: everything the RA accepted, in the texts it exchanged.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    format: String,
    version: u32,
    /// The RA's public key (hex of its encoding): a state is only ever used with its own seed.
    public_key: String,
    /// The challenges issued and not yet answered (`specie-enrol-challenge1…`).
    pending: Vec<String>,
    /// The enrolments signed, by ascending id.
    enrolled: Vec<EnrolmentRecord>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnrolmentRecord {
    id: u64,
    jurisdiction: u32,
    /// The request the RA signed for (`specie-enrol-request1…`): it holds the user's key.
    request: String,
}

/// An enrolment the RA signed: its jurisdiction and the request (as text) it signed for.
struct Enrolment {
    jurisdiction: Jurisdiction,
    request: String,
}

/// The RA with its state loaded from its directory.
struct Ra {
    dir: PathBuf,
    authority: RegistrationAuthority,
    enrolled: BTreeMap<EnrolmentId, Enrolment>,
    /// Held while the state may change (challenge, enrol).
    _lock: Option<File>,
}

fn init(dir: &Path) -> anyhow::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .with_context(|| format!("cannot create the RA directory {}", dir.display()))?;
    let lock = lock(dir)?;
    if dir.join(SECRET).exists() {
        bail!(
            "{} already holds a registration authority ({} exists): refusing to overwrite it \
             (`specie ra key --dir {}` prints its public key)",
            dir.display(),
            dir.join(SECRET).display(),
            dir.display()
        );
    }
    if let Some(state) = read_state_file(dir)? {
        if !state.pending.is_empty() || !state.enrolled.is_empty() {
            bail!(
                "{} holds an RA's state ({} enrolments) but not its secret: restore {} from your \
                 backup rather than making a new RA",
                dir.display(),
                state.enrolled.len(),
                dir.join(SECRET).display()
            );
        }
    }
    let seed: [u8; 32] = rand::Rng::gen(&mut OsRng);
    let ra = Ra {
        dir: dir.to_path_buf(),
        authority: RegistrationAuthority::from_seed(&seed),
        enrolled: BTreeMap::new(),
        _lock: Some(lock),
    };
    // The state first: until the seed is in place there is no RA, and `init` may run again.
    ra.save()?;
    write_atomically(dir, SECRET, format!("{}\n", hex::encode(seed)).as_bytes())
        .with_context(|| format!("cannot write the secret seed {}", dir.join(SECRET).display()))?;
    println!("{}", hex::encode(ra.authority.public_key().encode()));
    eprintln!(
        "registration authority made in {}; the line above is its public key, for `specie node \
         --registration-authority`. Keep {} secret and backed up: it signs every credential.",
        dir.display(),
        dir.join(SECRET).display()
    );
    Ok(())
}

fn challenge(dir: &Path, id: EnrolmentId, jurisdiction: Jurisdiction) -> anyhow::Result<()> {
    let mut ra = Ra::open(dir, true)?;
    let enrolled = ra.enrolled.get(&id).map(|e| e.jurisdiction);
    if let Some(enrolled) = enrolled.filter(|enrolled| *enrolled != jurisdiction) {
        bail!(
            "enrolment {} is enrolled under jurisdiction {}: a new challenge for it must name the \
             same (--jurisdiction {})",
            id.0,
            enrolled.0,
            enrolled.0
        );
    }
    let replaced = ra.authority.pending().any(|c| c.enrolment_id == id);
    let challenge = ra.authority.challenge(id, jurisdiction, &mut OsRng);
    ra.save()?;
    println!("{}", challenge.to_text());
    eprintln!(
        "enrolment {} opened (jurisdiction {}): hand the line above to the person KYC mapped to it; \
         their wallet answers with a specie-enrol-request1… text for `specie ra enrol`",
        id.0, jurisdiction.0
    );
    if replaced {
        eprintln!("the earlier challenge for enrolment {} can no longer be answered", id.0);
    }
    if enrolled.is_some() {
        eprintln!(
            "enrolment {} is already enrolled: only its enrolled key can answer (it gets a fresh credential)",
            id.0
        );
    }
    Ok(())
}

fn enrol(dir: &Path, text: &str) -> anyhow::Result<()> {
    let text = if text == "-" {
        let mut input = String::new();
        std::io::stdin()
            .take(64 * 1024)
            .read_to_string(&mut input)
            .context("cannot read the request from standard input")?;
        input
    } else {
        text.to_string()
    };
    let request = EnrolmentRequest::from_text(&text)
        .map_err(|error| anyhow!("not an enrolment request (specie-enrol-request1…): {error}"))?;
    let mut ra = Ra::open(dir, true)?;
    let credential = ra
        .authority
        .enrol(&request, &mut OsRng)
        .map_err(|error| anyhow!("enrolment refused: {}", explain(&error)))?;
    let id = credential.enrolment_id;
    ra.enrolled.insert(
        id,
        Enrolment {
            jurisdiction: credential.jurisdiction,
            request: request.to_text(),
        },
    );
    ra.save()?;
    println!("{}", credential.to_text());
    eprintln!(
        "enrolment {} signed (jurisdiction {}): hand the credential above back to its wallet",
        id.0, credential.jurisdiction.0
    );
    Ok(())
}

/// Why the RA refused, with what to do about it.
fn explain(error: &EnrolError) -> String {
    match error {
        EnrolError::NoChallenge { enrolment_id: id } => format!(
            "no outstanding challenge for enrolment {}: it was never opened or was already answered \
             (after KYC, `specie ra challenge --id {}` opens it)",
            id.0, id.0
        ),
        EnrolError::ChallengeMismatch { enrolment_id: id } => format!(
            "the request answers another challenge than the outstanding one for enrolment {} \
             (an earlier challenge replaced since, or another RA's)",
            id.0
        ),
        EnrolError::PossessionProofInvalid { enrolment_id: id } => format!(
            "the proof of possession of the user secret for enrolment {} does not hold (made for \
             another RA's key, or altered)",
            id.0
        ),
        EnrolError::AlreadyEnrolled { enrolment_id: id } => format!(
            "enrolment {} is already enrolled with another key (one key per enrolment id)",
            id.0
        ),
        EnrolError::KeyAlreadyEnrolled { holder } => format!(
            "this key is already enrolled for enrolment {} (one enrolment id per key)",
            holder.0
        ),
        EnrolError::Signing(_) => error.to_string(),
    }
}

fn list(dir: &Path, jurisdiction: Option<Jurisdiction>, json: bool) -> anyhow::Result<()> {
    let ra = Ra::open(dir, false)?;
    let selected = |j: &Jurisdiction| jurisdiction.is_none_or(|wanted| wanted == *j);
    let enrolled = ra.enrolled.iter().filter(|(_, e)| selected(&e.jurisdiction));
    if !json {
        let mut out = std::io::stdout().lock();
        for (id, _) in enrolled {
            writeln!(out, "{}", id.0)?;
        }
        return Ok(());
    }
    let entry = |id: EnrolmentId, j: Jurisdiction| serde_json::json!({"id": id.0, "jurisdiction": j.0});
    let enrolled: Vec<_> = enrolled.map(|(id, e)| entry(*id, e.jurisdiction)).collect();
    let pending: Vec<_> = ra
        .authority
        .pending()
        .filter(|c| selected(&c.jurisdiction))
        .map(|c| entry(c.enrolment_id, c.jurisdiction))
        .collect();
    println!("{}", serde_json::json!({"enrolled": enrolled, "pending": pending}));
    Ok(())
}

impl Ra {
    /// The RA in `dir`, its state restored; with the directory's lock if `locked`.
    fn open(dir: &Path, locked: bool) -> anyhow::Result<Ra> {
        let lock = locked.then(|| lock(dir)).transpose()?;
        let mut authority = RegistrationAuthority::from_seed(&read_seed(dir)?);
        let path = dir.join(STATE);
        let state = read_state_file(dir)?.ok_or_else(|| {
            anyhow!(
                "{} is missing: the RA's state is lost; restore it from your backup (a new RA is \
                 made with `specie ra init`)",
                path.display()
            )
        })?;
        let restored = restore(&state, &authority.public_key().encode())
            .with_context(|| format!("{} is damaged: restore it from your backup", path.display()))?;
        authority.restore(
            restored.pending,
            restored.enrolled.iter().map(|(id, (key, _))| (*id, *key)),
        );
        let enrolled = restored
            .enrolled
            .into_iter()
            .map(|(id, (_, enrolment))| (id, enrolment))
            .collect();
        Ok(Ra {
            dir: dir.to_path_buf(),
            authority,
            enrolled,
            _lock: lock,
        })
    }

    /// Writes the state atomically and durably (see the module's comment).
    fn save(&self) -> anyhow::Result<()> {
        let state = StateFile {
            format: STATE_FORMAT.to_string(),
            version: STATE_VERSION,
            public_key: hex::encode(self.authority.public_key().encode()),
            pending: self.authority.pending().map(Textual::to_text).collect(),
            enrolled: self
                .enrolled
                .iter()
                .map(|(id, e)| EnrolmentRecord {
                    id: id.0,
                    jurisdiction: e.jurisdiction.0,
                    request: e.request.clone(),
                })
                .collect(),
        };
        let mut bytes = serde_json::to_vec_pretty(&state)?;
        bytes.push(b'\n');
        anyhow::ensure!(
            bytes.len() as u64 <= STATE_BYTES_MAX,
            "the RA's state would grow past {} MiB, the most it reads back: nothing was changed",
            STATE_BYTES_MAX >> 20
        );
        let path = self.dir.join(STATE);
        write_atomically(&self.dir, STATE, &bytes).with_context(|| format!("cannot write {}", path.display()))
    }
}

/// What a state file holds, checked.
struct Restored {
    pending: Vec<EnrolmentChallenge>,
    enrolled: BTreeMap<EnrolmentId, (UserPublicKey, Enrolment)>,
}

/// Checks a state file against the RA's key: every text parses, every enrolment's request is for
/// its id and jurisdiction, no id and no key appears twice.
fn restore(state: &StateFile, public_key: &[u8]) -> anyhow::Result<Restored> {
    anyhow::ensure!(
        state.format == STATE_FORMAT && state.version == STATE_VERSION,
        "it is not a version {STATE_VERSION} RA state (format {:?}, version {})",
        state.format,
        state.version
    );
    anyhow::ensure!(
        state.public_key == hex::encode(public_key),
        "it is the state of another RA (public key {}) than the one whose secret is here",
        state.public_key
    );
    let mut pending = Vec::with_capacity(state.pending.len());
    for (at, text) in state.pending.iter().enumerate() {
        let challenge =
            EnrolmentChallenge::from_text(text).with_context(|| format!("outstanding challenge {at}: {text:?}"))?;
        anyhow::ensure!(
            !pending
                .iter()
                .any(|c: &EnrolmentChallenge| c.enrolment_id == challenge.enrolment_id),
            "two outstanding challenges for enrolment {}",
            challenge.enrolment_id.0
        );
        pending.push(challenge);
    }
    let mut enrolled = BTreeMap::new();
    let mut keys = BTreeMap::new();
    for record in &state.enrolled {
        let (id, jurisdiction) = (EnrolmentId(record.id), Jurisdiction(record.jurisdiction));
        let request = EnrolmentRequest::from_text(&record.request)
            .with_context(|| format!("the request of enrolment {}", record.id))?;
        let answered = request.challenge();
        anyhow::ensure!(
            answered.enrolment_id == id && answered.jurisdiction == jurisdiction,
            "enrolment {} (jurisdiction {}) holds a request for enrolment {} (jurisdiction {})",
            record.id,
            record.jurisdiction,
            answered.enrolment_id.0,
            answered.jurisdiction.0
        );
        if let Some(holder) = keys.insert(request.user_key().to_bytes(), id) {
            bail!("enrolments {} and {} hold the same key", holder.0, record.id);
        }
        let enrolment = Enrolment {
            jurisdiction,
            request: record.request.clone(),
        };
        if enrolled.insert(id, (request.user_key(), enrolment)).is_some() {
            bail!("enrolment {} is recorded twice", record.id);
        }
    }
    Ok(Restored { pending, enrolled })
}

/// The state file, parsed, if there is one; an error if it is too large or not an RA state.
fn read_state_file(dir: &Path) -> anyhow::Result<Option<StateFile>> {
    let path = dir.join(STATE);
    let bytes = match read_bounded(&path, STATE_BYTES_MAX) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
    };
    let state = serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{} is damaged (not an RA state): restore it from your backup",
            path.display()
        )
    })?;
    Ok(Some(state))
}

/// The seed in `dir/secret`.
fn read_seed(dir: &Path) -> anyhow::Result<[u8; 32]> {
    let path = dir.join(SECRET);
    let bytes = read_bounded(&path, SECRET_BYTES_MAX).with_context(|| {
        format!(
            "cannot read the RA's secret seed {} (is {} an RA directory? `specie ra init` makes one)",
            path.display(),
            dir.display()
        )
    })?;
    #[cfg(unix)]
    if let Ok(metadata) = fs::metadata(&path) {
        let mode = std::os::unix::fs::PermissionsExt::mode(&metadata.permissions());
        if mode & 0o077 != 0 {
            eprintln!(
                "warning: {} is readable by others (mode {:o}): `chmod 600` it",
                path.display(),
                mode & 0o777
            );
        }
    }
    std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| hex::decode(text.trim()).ok())
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .with_context(|| format!("{} does not hold a 32-byte hex seed", path.display()))
}

/// The file's bytes, refusing one longer than `max`.
fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(path)?.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("it is larger than {max} bytes, the most read"),
        ));
    }
    Ok(bytes)
}

/// Replaces `dir/name` with `bytes` (0600): written to `name.tmp`, synced, renamed over, and the
/// directory synced, so that after a crash the file holds the old bytes or the new ones.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, dir.join(name))?;
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// The directory's exclusive lock, waiting up to [`LOCK_WAIT`] for another command to finish.
fn lock(dir: &Path) -> anyhow::Result<File> {
    let path = dir.join(LOCK);
    let mut options = OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options
        .open(&path)
        .with_context(|| format!("cannot open the lock {}", path.display()))?;
    let started = Instant::now();
    let mut told = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(fs::TryLockError::WouldBlock) if started.elapsed() < LOCK_WAIT => {
                if !std::mem::replace(&mut told, true) {
                    eprintln!(
                        "waiting for another `specie ra` command on {} to finish…",
                        dir.display()
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(fs::TryLockError::WouldBlock) => bail!(
                "another `specie ra` command still holds {} after {} s",
                path.display(),
                LOCK_WAIT.as_secs()
            ),
            Err(fs::TryLockError::Error(error)) => {
                return Err(error).with_context(|| format!("cannot lock {}", path.display()))
            }
        }
    }
}
