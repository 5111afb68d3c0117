//! The state file: everything the RA accepted, in the texts it exchanged, checked against the
//! RA's key when read back.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use specie_credential::{EnrolmentChallenge, EnrolmentId, EnrolmentRequest, Jurisdiction, Textual, UserPublicKey};

use crate::{RegistrationError, StateDefect, STATE, STATE_BYTES_MAX, STATE_FORMAT, STATE_VERSION};

/// The state file as JSON.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StateFile {
    pub format: String,
    pub version: u32,
    /// The RA's public key (hex of its encoding): a state is only ever used with its own seed.
    pub public_key: String,
    /// The key's epoch: how often the RA moved to a new key to revoke (0 before the first).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub epoch: u64,
    /// The challenges issued and not yet answered (`specie-enrol-challenge1…`).
    pub pending: Vec<String>,
    /// The enrolments signed, by ascending id.
    pub enrolled: Vec<EnrolmentRecord>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EnrolmentRecord {
    pub id: u64,
    pub jurisdiction: u32,
    /// The request the RA signed for (`specie-enrol-request1…`): it holds the user's key.
    pub request: String,
    /// Revoked: no credential of this or a later epoch is issued for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub revoked: bool,
}

fn is_zero(epoch: &u64) -> bool {
    *epoch == 0
}

/// An enrolment the RA signed: its jurisdiction and the request (as text) it signed for.
#[derive(Clone, Debug)]
pub(crate) struct Enrolment {
    pub jurisdiction: Jurisdiction,
    pub request: String,
    pub revoked: bool,
}

/// What a state file holds, checked.
pub(crate) struct Restored {
    pub pending: Vec<EnrolmentChallenge>,
    pub enrolled: BTreeMap<EnrolmentId, (UserPublicKey, Enrolment)>,
}

/// Checks a state file against the RA's key: every text parses, every enrolment's request is for
/// its id and jurisdiction, no id and no key appears twice.
pub(crate) fn restore(state: &StateFile, public_key: &[u8]) -> Result<Restored, StateDefect> {
    if state.format != STATE_FORMAT || state.version != STATE_VERSION {
        return Err(StateDefect::Version {
            format: state.format.clone(),
            version: state.version,
        });
    }
    if state.public_key != hex::encode(public_key) {
        return Err(StateDefect::OtherRa {
            public_key: state.public_key.clone(),
        });
    }
    let mut pending: Vec<EnrolmentChallenge> = Vec::with_capacity(state.pending.len());
    for (at, text) in state.pending.iter().enumerate() {
        let challenge = EnrolmentChallenge::from_text(text).map_err(|source| StateDefect::Challenge {
            at,
            text: text.clone(),
            source,
        })?;
        if pending.iter().any(|c| c.enrolment_id == challenge.enrolment_id) {
            return Err(StateDefect::TwoChallenges {
                id: challenge.enrolment_id,
            });
        }
        pending.push(challenge);
    }
    let mut enrolled = BTreeMap::new();
    let mut keys = BTreeMap::new();
    for record in &state.enrolled {
        let (id, jurisdiction) = (EnrolmentId(record.id), Jurisdiction(record.jurisdiction));
        let request = EnrolmentRequest::from_text(&record.request)
            .map_err(|source| StateDefect::Request { id: record.id, source })?;
        let answered = request.challenge();
        if answered.enrolment_id != id || answered.jurisdiction != jurisdiction {
            return Err(StateDefect::RequestMismatch {
                id: record.id,
                jurisdiction: record.jurisdiction,
                answered: (answered.enrolment_id, answered.jurisdiction),
            });
        }
        if let Some(holder) = keys.insert(request.user_key().to_bytes(), id) {
            return Err(StateDefect::SameKey { holder, id: record.id });
        }
        let enrolment = Enrolment {
            jurisdiction,
            request: record.request.clone(),
            revoked: record.revoked,
        };
        if enrolled.insert(id, (request.user_key(), enrolment)).is_some() {
            return Err(StateDefect::Twice { id: record.id });
        }
    }
    Ok(Restored { pending, enrolled })
}

/// The state file, parsed, if there is one; an error if it is too large or not an RA state.
pub(crate) fn read_state_file(dir: &Path) -> Result<Option<StateFile>, RegistrationError> {
    let path = dir.join(STATE);
    let bytes = match read_bounded(&path, STATE_BYTES_MAX) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(RegistrationError::ReadState { path, source }),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| RegistrationError::NotAState { path, source })
}

/// The file's bytes, refusing one longer than `max`.
pub(crate) fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
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
