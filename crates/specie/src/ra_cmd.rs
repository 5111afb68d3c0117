//! `specie ra …`: the registration authority's operator tool (the anonymous privacy level's
//! enrolment, docs/privacy.md "Enrolment: the registration authority"): arguments, and what each
//! command prints. The RA's directory, its durable state and its lock are
//! `specie_registration::RegistrationStore`'s: nothing is printed before the state is saved.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Context};
use clap::{Args, Subcommand};
use rand::rngs::OsRng;
use specie_codec::Encode;
use specie_credential::{EnrolmentId, EnrolmentRequest, Jurisdiction, RaPublicKey, Textual};
use specie_registration::{RegistrationStore, LOCK_WAIT, SECRET};

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

To revoke, for enrolment 9:
  specie ra revoke --id 9              # no credential is issued for 9 again
  specie ra rotate --out ./epoch-1     # the next key; a fresh credential for every other id,
                                       # one file each, to hand back (`specie wallet enrol
                                       # --credential`); prints the new key for
                                       # `specie node --reconfigure --registration-authority`
Once the nodes take the new key, id 9's credential (of the old key) no longer verifies: its
anonymous notes and unlinkable tokens cannot be spent.

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
    /// Revoke enrolment N: no credential is issued for it again and its challenges are refused.
    /// Its credential already out stays valid until `specie ra rotate` moves to a new key and
    /// the nodes take it.
    Revoke {
        /// The enrolment id to revoke.
        #[arg(long)]
        id: u64,
    },
    /// Move to the RA's next key (derived from the same secret seed) and sign a fresh credential
    /// under it for every enrolment not revoked, written to OUT/<id>.credential (durable in the
    /// state before any is written). Prints the new public key: run every node with `specie
    /// node --reconfigure --registration-authority <KEY>`, and hand each credential back to its
    /// wallet (`specie wallet enrol --credential <TEXT>`). From then on every credential of an
    /// earlier key, the revoked ones' among them, is refused.
    Rotate {
        /// A directory to create for the credentials (it must not exist yet).
        #[arg(long)]
        out: PathBuf,
    },
    /// Print the enrolled ids, one per line: the directory (`specie audit show --directory
    /// FILE`) of an auditor who oversees them (revoked ids too: their past payments are named).
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
            let key = specie_registration::public_key(dir)?;
            warn_of_a_loose_secret(dir);
            println!("{}", key_hex(&key));
        }
        RaCommand::Challenge { id, jurisdiction } => challenge(dir, EnrolmentId(id), Jurisdiction(jurisdiction))?,
        RaCommand::Enrol { request } => enrol(dir, &request)?,
        RaCommand::List { jurisdiction, json } => list(dir, jurisdiction.map(Jurisdiction), json)?,
        RaCommand::Revoke { id } => revoke(dir, EnrolmentId(id))?,
        RaCommand::Rotate { out } => rotate(dir, &out)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn key_hex(key: &RaPublicKey) -> String {
    hex::encode(key.encode())
}

/// Said once while a command waits for another one on the same directory.
fn waiting(dir: &Path) -> impl FnOnce() + '_ {
    move || {
        eprintln!(
            "waiting for another `specie ra` command on {} to finish…",
            dir.display()
        )
    }
}

/// The RA in `dir`, locked for a change.
fn open_locked(dir: &Path) -> anyhow::Result<RegistrationStore> {
    let store = RegistrationStore::open_locked(dir, LOCK_WAIT, waiting(dir))?;
    warn_of_a_loose_secret(dir);
    Ok(store)
}

fn warn_of_a_loose_secret(dir: &Path) {
    if let Some(mode) = specie_registration::loose_secret_mode(dir) {
        eprintln!(
            "warning: {} is readable by others (mode {mode:o}): `chmod 600` it",
            dir.join(SECRET).display()
        );
    }
}

fn init(dir: &Path) -> anyhow::Result<()> {
    let store = RegistrationStore::init(dir, LOCK_WAIT, waiting(dir))?;
    println!("{}", key_hex(&store.public_key()));
    eprintln!(
        "registration authority made in {}; the line above is its public key, for `specie node \
         --registration-authority`. Keep {} secret and backed up: it signs every credential.",
        dir.display(),
        dir.join(SECRET).display()
    );
    Ok(())
}

fn challenge(dir: &Path, id: EnrolmentId, jurisdiction: Jurisdiction) -> anyhow::Result<()> {
    let mut store = open_locked(dir)?;
    let challenged = store.challenge(id, jurisdiction, &mut OsRng)?;
    println!("{}", challenged.challenge.to_text());
    eprintln!(
        "enrolment {} opened (jurisdiction {}): hand the line above to the person KYC mapped to it; \
         their wallet answers with a specie-enrol-request1… text for `specie ra enrol`",
        id.0, jurisdiction.0
    );
    if challenged.replaced {
        eprintln!("the earlier challenge for enrolment {} can no longer be answered", id.0);
    }
    if challenged.enrolled {
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
    let mut store = open_locked(dir)?;
    let credential = store.enrol(&request, &mut OsRng)?;
    println!("{}", credential.to_text());
    eprintln!(
        "enrolment {} signed (jurisdiction {}): hand the credential above back to its wallet",
        credential.enrolment_id.0, credential.jurisdiction.0
    );
    Ok(())
}

fn revoke(dir: &Path, id: EnrolmentId) -> anyhow::Result<()> {
    let mut store = open_locked(dir)?;
    if store.revoke(id)? {
        eprintln!(
            "enrolment {} revoked: no credential is issued for it again. Its credential stays valid until `specie \
             ra rotate` moves to a new key and the nodes take it",
            id.0
        );
    } else {
        eprintln!("enrolment {} was revoked already", id.0);
    }
    Ok(())
}

fn rotate(dir: &Path, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir(out).with_context(|| {
        format!(
            "cannot create {} (give a directory that does not exist yet, so no credential is overwritten)",
            out.display()
        )
    })?;
    let mut store = open_locked(dir)?;
    let credentials = store.rotate(&mut OsRng)?;
    for credential in &credentials {
        let path = out.join(format!("{}.credential", credential.enrolment_id.0));
        std::fs::write(&path, format!("{}\n", credential.to_text())).with_context(|| {
            format!(
                "cannot write {} (run `specie ra rotate` again to reissue)",
                path.display()
            )
        })?;
    }
    println!("{}", key_hex(&store.public_key()));
    eprintln!(
        "the RA moved to key epoch {}: its public key is above, for `specie node --reconfigure \
         --registration-authority`; {} credentials (every enrolment but the {} revoked) are in {}, one per id, to \
         hand back for `specie wallet enrol --credential`",
        store.epoch(),
        credentials.len(),
        store.revoked().count(),
        out.display()
    );
    Ok(())
}

fn list(dir: &Path, jurisdiction: Option<Jurisdiction>, json: bool) -> anyhow::Result<()> {
    let store = RegistrationStore::open(dir)?;
    warn_of_a_loose_secret(dir);
    let selected = |j: &Jurisdiction| jurisdiction.is_none_or(|wanted| wanted == *j);
    let enrolled = store.enrolled().filter(|(_, j)| selected(j));
    if !json {
        let mut out = std::io::stdout().lock();
        for (id, _) in enrolled {
            writeln!(out, "{}", id.0)?;
        }
        return Ok(());
    }
    let entry = |id: EnrolmentId, j: Jurisdiction| serde_json::json!({"id": id.0, "jurisdiction": j.0});
    let enrolled: Vec<_> = enrolled.map(|(id, j)| entry(id, j)).collect();
    let pending: Vec<_> = store
        .pending()
        .filter(|c| selected(&c.jurisdiction))
        .map(|c| entry(c.enrolment_id, c.jurisdiction))
        .collect();
    println!("{}", serde_json::json!({"enrolled": enrolled, "pending": pending}));
    Ok(())
}
