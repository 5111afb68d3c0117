//! Why the registration authority's store refused, or could not do, what it was asked.

use std::path::PathBuf;

use specie_credential::{EnrolError, EnrolmentId, Jurisdiction, TextError};
use specie_log::secret::SecretFileError;

/// Why an RA directory could not be made, opened, read or changed. The messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    #[error("cannot create the RA directory {}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{} already holds a registration authority ({} exists): refusing to overwrite it \
         (`specie ra key --dir {}` prints its public key)",
        dir.display(),
        secret.display(),
        dir.display()
    )]
    AlreadyInitialised { dir: PathBuf, secret: PathBuf },
    #[error(
        "{} holds an RA's state ({enrolments} enrolments) but not its secret: restore {} from your \
         backup rather than making a new RA",
        dir.display(),
        secret.display()
    )]
    StateWithoutSecret {
        dir: PathBuf,
        secret: PathBuf,
        enrolments: usize,
    },
    #[error("cannot write the secret seed {}", path.display())]
    WriteSecret {
        path: PathBuf,
        #[source]
        source: SecretFileError,
    },
    #[error(
        "cannot read the RA's secret seed {} (is {} an RA directory? `specie ra init` makes one)",
        path.display(),
        dir.display()
    )]
    ReadSecret {
        path: PathBuf,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} does not hold a 32-byte hex seed", path.display())]
    BadSeed { path: PathBuf },
    #[error(
        "{} is missing: the RA's state is lost; restore it from your backup (a new RA is made with \
         `specie ra init`)",
        path.display()
    )]
    StateMissing { path: PathBuf },
    #[error("cannot read {}", path.display())]
    ReadState {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is damaged (not an RA state): restore it from your backup", path.display())]
    NotAState {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{} is damaged: restore it from your backup", path.display())]
    Damaged {
        path: PathBuf,
        #[source]
        defect: StateDefect,
    },
    #[error("cannot encode the RA's state")]
    EncodeState(#[source] serde_json::Error),
    #[error(
        "the RA's state would grow past {} MiB, the most it reads back: nothing was changed",
        crate::STATE_BYTES_MAX >> 20
    )]
    StateTooLarge,
    #[error("cannot write {}", path.display())]
    WriteState {
        path: PathBuf,
        #[source]
        source: SecretFileError,
    },
    #[error("cannot open the lock {}", path.display())]
    OpenLock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot lock {}", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("another `specie ra` command still holds {} after {waited_s} s", path.display())]
    Busy { path: PathBuf, waited_s: u64 },
    /// A change asked of a store opened for reading only ([`crate::RegistrationStore::open`]).
    #[error("the RA in {} was opened for reading only: nothing was changed", dir.display())]
    ReadOnly { dir: PathBuf },
    #[error(
        "enrolment {} is enrolled under jurisdiction {}: a new challenge for it must name the \
         same (--jurisdiction {})",
        id.0,
        enrolled.0,
        enrolled.0
    )]
    JurisdictionMismatch { id: EnrolmentId, enrolled: Jurisdiction },
    /// The RA refused the request (the state is unchanged).
    #[error("enrolment refused: {}", explain(.0))]
    Refused(EnrolError),
    #[error("enrolment {} is not enrolled with this RA: nothing to revoke", id.0)]
    NotEnrolled { id: EnrolmentId },
    #[error(
        "enrolment {} is revoked: this RA issues it no credential again (a person who must come back is enrolled \
         under a new id)",
        id.0
    )]
    Revoked { id: EnrolmentId },
    #[error("the RA's key epochs are exhausted")]
    EpochsExhausted,
}

/// What is wrong with a state file that parses as JSON.
#[derive(Debug, thiserror::Error)]
pub enum StateDefect {
    #[error(
        "it is not a version {} RA state (format {format:?}, version {version})",
        crate::STATE_VERSION
    )]
    Version { format: String, version: u32 },
    #[error("it is the state of another RA (public key {public_key}) than the one whose secret is here")]
    OtherRa { public_key: String },
    #[error("outstanding challenge {at}: {text:?}")]
    Challenge {
        at: usize,
        text: String,
        #[source]
        source: TextError,
    },
    #[error("two outstanding challenges for enrolment {}", id.0)]
    TwoChallenges { id: EnrolmentId },
    #[error("the request of enrolment {id}")]
    Request {
        id: u64,
        #[source]
        source: TextError,
    },
    #[error(
        "enrolment {id} (jurisdiction {jurisdiction}) holds a request for enrolment {} (jurisdiction {})",
        answered.0.0,
        answered.1.0
    )]
    RequestMismatch {
        id: u64,
        jurisdiction: u32,
        answered: (EnrolmentId, Jurisdiction),
    },
    #[error("enrolments {} and {id} hold the same key", holder.0)]
    SameKey { holder: EnrolmentId, id: u64 },
    #[error("enrolment {id} is recorded twice")]
    Twice { id: u64 },
}

/// Why the RA refused, with what to do about it.
pub fn explain(error: &EnrolError) -> String {
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
