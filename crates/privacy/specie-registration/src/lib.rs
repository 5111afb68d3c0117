//! The registration authority's durable store (the anonymous privacy level's enrolment,
//! docs/privacy.md "Enrolment: the registration authority"), what `specie ra` drives.
//!
//! The RA lives in a directory: `secret` (its 32-byte seed, hex, 0600), `state.json` (the
//! challenges it issued and not yet saw answered, and every enrolment it signed) and `lock`. The
//! state is one JSON document replaced atomically (temporary file, fsync, rename, fsync of the
//! directory: [`specie_log::secret::write_atomically`]) before anything the RA decided is returned,
//! so nothing the RA handed out is ever lost and the file is never half written. A store that may
//! change takes an exclusive lock (`flock` on `lock`, released when the process ends, however it
//! ends); another command on the same directory waits for it, up to a bound.
//!
//! The lock is `lock`, not `specie_log::DirLock`'s `LOCK`: RA directories made before keep
//! working, and an older `specie ra` running beside a newer one still excludes it. `DirLock` also
//! refuses a directory another process holds at once (a second server on one data directory is a
//! mistake), where the RA's commands queue behind each other.

mod error;
mod lock;
mod state;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::rngs::OsRng;
use rand::{CryptoRng, RngCore};
use specie_codec::Encode;
use specie_credential::{
    Credential, EnrolmentChallenge, EnrolmentId, EnrolmentRequest, Jurisdiction, RaPublicKey, RegistrationAuthority,
    Textual,
};

pub use error::{explain, RegistrationError, StateDefect};
use state::{read_bounded, read_state_file, restore, Enrolment, EnrolmentRecord, StateFile};

/// The seed file, the state file and the lock file in the RA's directory.
pub const SECRET: &str = "secret";
pub const STATE: &str = "state.json";
pub const LOCK: &str = "lock";
/// The state file's `format` and `version`.
pub const STATE_FORMAT: &str = "specie-ra-state";
pub const STATE_VERSION: u32 = 1;
/// The largest state file read or written (about 150 000 enrolments).
pub const STATE_BYTES_MAX: u64 = 64 << 20;
/// The largest seed file read (64 hex digits and a newline; some slack for a CRLF or spaces).
pub const SECRET_BYTES_MAX: u64 = 1024;
/// How long a command waits for another one on the same directory to finish.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// A challenge just issued, and what it changed.
#[derive(Clone, Debug)]
pub struct Challenged {
    /// The challenge to hand to the person (as text: [`Textual::to_text`]).
    pub challenge: EnrolmentChallenge,
    /// An earlier unanswered challenge for the same id was replaced (it can no longer be answered).
    pub replaced: bool,
    /// The id is enrolled already: only its enrolled key can answer (for a fresh credential).
    pub enrolled: bool,
}

/// The RA with its state loaded from its directory.
#[derive(Debug)]
pub struct RegistrationStore {
    dir: PathBuf,
    authority: RegistrationAuthority,
    /// The key's epoch (`RegistrationAuthority::from_seed_epoch`).
    epoch: u64,
    enrolled: BTreeMap<EnrolmentId, Enrolment>,
    /// Held while the state may change (challenge, enrol); `None` when opened for reading.
    lock: Option<File>,
}

impl RegistrationStore {
    /// Makes a new RA in `dir` (created if missing, 0700): a fresh random seed (`dir/secret`,
    /// 0600) and an empty state, the directory locked (waiting up to `wait`, `on_wait` told once).
    /// Refuses a directory that already holds an RA, or an RA's state without its secret.
    pub fn init(dir: &Path, wait: Duration, on_wait: impl FnOnce()) -> Result<RegistrationStore, RegistrationError> {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(|source| RegistrationError::CreateDir {
            dir: dir.to_path_buf(),
            source,
        })?;
        let lock = lock::lock(dir, wait, on_wait)?;
        let secret = dir.join(SECRET);
        if secret.exists() {
            return Err(RegistrationError::AlreadyInitialised {
                dir: dir.to_path_buf(),
                secret,
            });
        }
        if let Some(state) = read_state_file(dir)? {
            if !state.pending.is_empty() || !state.enrolled.is_empty() {
                return Err(RegistrationError::StateWithoutSecret {
                    dir: dir.to_path_buf(),
                    secret,
                    enrolments: state.enrolled.len(),
                });
            }
        }
        let seed: [u8; 32] = rand::Rng::gen(&mut OsRng);
        let store = RegistrationStore {
            dir: dir.to_path_buf(),
            authority: RegistrationAuthority::from_seed(&seed),
            epoch: 0,
            enrolled: BTreeMap::new(),
            lock: Some(lock),
        };
        // The state first: until the seed is in place there is no RA, and `init` may run again.
        store.save()?;
        // Never over a seed (the lock keeps other `init`s out; this keeps out anything else).
        specie_log::secret::write_atomically(&secret, format!("{}\n", hex::encode(seed)).as_bytes(), false)
            .map_err(|source| RegistrationError::WriteSecret { path: secret, source })?;
        Ok(store)
    }

    /// The RA in `dir`, its state restored, for reading only (no lock: what another command is
    /// changing is seen before or after, the file being replaced whole).
    pub fn open(dir: &Path) -> Result<RegistrationStore, RegistrationError> {
        Self::load(dir, None)
    }

    /// The RA in `dir`, locked (waiting up to `wait` for another command, `on_wait` told once),
    /// its state restored, for [`challenge`](Self::challenge) and [`enrol`](Self::enrol).
    pub fn open_locked(
        dir: &Path,
        wait: Duration,
        on_wait: impl FnOnce(),
    ) -> Result<RegistrationStore, RegistrationError> {
        let lock = lock::lock(dir, wait, on_wait)?;
        Self::load(dir, Some(lock))
    }

    fn load(dir: &Path, lock: Option<File>) -> Result<RegistrationStore, RegistrationError> {
        let path = dir.join(STATE);
        let state = read_state_file(dir)?.ok_or_else(|| RegistrationError::StateMissing { path: path.clone() })?;
        let mut authority = RegistrationAuthority::from_seed_epoch(&read_seed(dir)?, state.epoch);
        let restored = restore(&state, &authority.public_key().encode())
            .map_err(|defect| RegistrationError::Damaged { path, defect })?;
        authority.restore(
            restored.pending,
            restored.enrolled.iter().map(|(id, (key, _))| (*id, *key)),
        );
        let enrolled = restored
            .enrolled
            .into_iter()
            .map(|(id, (_, enrolment))| (id, enrolment))
            .collect();
        Ok(RegistrationStore {
            dir: dir.to_path_buf(),
            authority,
            epoch: state.epoch,
            enrolled,
            lock,
        })
    }

    /// The RA's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The RA's public key: what nodes take (`--registration-authority`) and wallets enrol with.
    pub fn public_key(&self) -> RaPublicKey {
        self.authority.public_key()
    }

    /// Opens enrolment `id` after KYC: a fresh challenge, durable before it is returned. A new
    /// challenge for an id replaces an earlier unanswered one; an enrolled id keeps its
    /// jurisdiction (a challenge naming another is refused) and only its enrolled key can answer.
    pub fn challenge(
        &mut self,
        id: EnrolmentId,
        jurisdiction: Jurisdiction,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Challenged, RegistrationError> {
        self.check_writable()?;
        self.check_not_revoked(id)?;
        let enrolled = self.enrolled.get(&id).map(|e| e.jurisdiction);
        if let Some(enrolled) = enrolled.filter(|enrolled| *enrolled != jurisdiction) {
            return Err(RegistrationError::JurisdictionMismatch { id, enrolled });
        }
        let replaced = self.authority.pending().any(|c| c.enrolment_id == id);
        let challenge = self.authority.challenge(id, jurisdiction, rng);
        self.commit()?;
        Ok(Challenged {
            challenge,
            replaced,
            enrolled: enrolled.is_some(),
        })
    }

    /// Checks a wallet's request (it answers the outstanding challenge of its id, proves
    /// possession of its secret, is not a second key for an enrolled id nor a key enrolled for
    /// another id), records the enrolment durably, and returns the credential to hand back.
    pub fn enrol(
        &mut self,
        request: &EnrolmentRequest,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Credential, RegistrationError> {
        self.check_writable()?;
        self.check_not_revoked(request.challenge().enrolment_id)?;
        let credential = self.authority.enrol(request, rng).map_err(RegistrationError::Refused)?;
        let enrolment = Enrolment {
            jurisdiction: credential.jurisdiction,
            request: request.to_text(),
            revoked: false,
        };
        self.enrolled.insert(credential.enrolment_id, enrolment);
        self.commit()?;
        Ok(credential)
    }

    /// The enrolments signed, revoked ones included (an auditor names their past payments), by
    /// ascending id, with their jurisdictions.
    pub fn enrolled(&self) -> impl Iterator<Item = (EnrolmentId, Jurisdiction)> + '_ {
        self.enrolled.iter().map(|(id, e)| (*id, e.jurisdiction))
    }

    /// The enrolments revoked, by ascending id.
    pub fn revoked(&self) -> impl Iterator<Item = EnrolmentId> + '_ {
        (self.enrolled.iter()).filter(|(_, e)| e.revoked).map(|(id, _)| *id)
    }

    /// The key's epoch: 0 until the first [`rotate`](Self::rotate).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Revokes enrolment `id`, durably: no credential is issued for it again, and its challenges
    /// are refused. Its credentials already out stay valid until [`rotate`](Self::rotate).
    /// Returns false if it was revoked already.
    pub fn revoke(&mut self, id: EnrolmentId) -> Result<bool, RegistrationError> {
        self.check_writable()?;
        let enrolment = self
            .enrolled
            .get_mut(&id)
            .ok_or(RegistrationError::NotEnrolled { id })?;
        if enrolment.revoked {
            return Ok(false);
        }
        enrolment.revoked = true;
        self.commit()?;
        Ok(true)
    }

    /// Moves to the next epoch's key and signs a fresh credential under it for every enrolment
    /// not revoked (same key, id and jurisdiction), durably before they are returned. The nodes
    /// then take the new key (`specie node --reconfigure --registration-authority`): credentials
    /// of earlier epochs, the revoked ones' among them, no longer verify. Challenges still open
    /// must be answered again (an answer is bound to the RA's key).
    pub fn rotate(&mut self, rng: &mut (impl RngCore + CryptoRng)) -> Result<Vec<Credential>, RegistrationError> {
        self.check_writable()?;
        let epoch = self.epoch.checked_add(1).ok_or(RegistrationError::EpochsExhausted)?;
        let mut authority = RegistrationAuthority::from_seed_epoch(&read_seed(&self.dir)?, epoch);
        authority.restore(self.authority.pending().cloned(), self.authority.enrolled());
        let mut credentials = Vec::new();
        for (id, enrolment) in self.enrolled.iter().filter(|(_, e)| !e.revoked) {
            let credential =
                (authority.reissue(*id, enrolment.jurisdiction, rng)).map_err(RegistrationError::Refused)?;
            credentials.push(credential);
        }
        (self.authority, self.epoch) = (authority, epoch);
        self.commit()?;
        Ok(credentials)
    }

    fn check_not_revoked(&self, id: EnrolmentId) -> Result<(), RegistrationError> {
        match self.enrolled.get(&id) {
            Some(enrolment) if enrolment.revoked => Err(RegistrationError::Revoked { id }),
            _ => Ok(()),
        }
    }

    /// The challenges issued and not yet answered, by ascending id.
    pub fn pending(&self) -> impl Iterator<Item = &EnrolmentChallenge> + '_ {
        self.authority.pending()
    }

    fn check_writable(&self) -> Result<(), RegistrationError> {
        match self.lock {
            Some(_) => Ok(()),
            None => Err(RegistrationError::ReadOnly { dir: self.dir.clone() }),
        }
    }

    /// Saves a change; if it cannot be saved, nothing of it is handed out, and this store is taken
    /// back to what the file says (so that no later save records it either).
    fn commit(&mut self) -> Result<(), RegistrationError> {
        let Err(error) = self.save() else {
            return Ok(());
        };
        *self = Self::load(&self.dir, self.lock.take())?;
        Err(error)
    }

    /// Writes the state atomically and durably (see the crate's comment).
    fn save(&self) -> Result<(), RegistrationError> {
        let state = StateFile {
            format: STATE_FORMAT.to_string(),
            version: STATE_VERSION,
            public_key: hex::encode(self.authority.public_key().encode()),
            epoch: self.epoch,
            pending: self.authority.pending().map(Textual::to_text).collect(),
            enrolled: self
                .enrolled
                .iter()
                .map(|(id, e)| EnrolmentRecord {
                    id: id.0,
                    jurisdiction: e.jurisdiction.0,
                    request: e.request.clone(),
                    revoked: e.revoked,
                })
                .collect(),
        };
        let mut bytes = serde_json::to_vec_pretty(&state).map_err(RegistrationError::EncodeState)?;
        bytes.push(b'\n');
        if bytes.len() as u64 > STATE_BYTES_MAX {
            return Err(RegistrationError::StateTooLarge);
        }
        let path = self.dir.join(STATE);
        specie_log::secret::write_atomically(&path, &bytes, true)
            .map_err(|source| RegistrationError::WriteState { path, source })
    }
}

/// The public key of the RA in `dir`: its seed's, of the epoch its state names.
pub fn public_key(dir: &Path) -> Result<RaPublicKey, RegistrationError> {
    let epoch = read_state_file(dir)?.map_or(0, |state| state.epoch);
    Ok(RegistrationAuthority::from_seed_epoch(&read_seed(dir)?, epoch).public_key())
}

/// The permission bits (`mode & 0o777`) of `dir/secret` if others than its owner may use it;
/// `None` when it is its owner's alone (or cannot be looked at).
pub fn loose_secret_mode(dir: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        let metadata = fs::metadata(dir.join(SECRET)).ok()?;
        let mode = std::os::unix::fs::PermissionsExt::mode(&metadata.permissions());
        (mode & 0o077 != 0).then_some(mode & 0o777)
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

/// The seed in `dir/secret`.
fn read_seed(dir: &Path) -> Result<[u8; 32], RegistrationError> {
    let path = dir.join(SECRET);
    let bytes = read_bounded(&path, SECRET_BYTES_MAX).map_err(|source| RegistrationError::ReadSecret {
        path: path.clone(),
        dir: dir.to_path_buf(),
        source,
    })?;
    std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| hex::decode(text.trim()).ok())
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or(RegistrationError::BadSeed { path })
}

#[cfg(test)]
mod tests;
