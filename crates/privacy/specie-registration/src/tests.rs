use std::cell::Cell;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_credential::{EnrolError, UserSecret};

use super::*;

fn locked(dir: &Path) -> RegistrationStore {
    RegistrationStore::open_locked(dir, Duration::ZERO, || {}).unwrap()
}

fn init(dir: &Path) -> RegistrationStore {
    RegistrationStore::init(dir, Duration::ZERO, || {}).unwrap()
}

/// `user`'s answer to `challenge`, for the RA with `key`.
fn request(user: u8, key: &RaPublicKey, challenge: &EnrolmentChallenge) -> EnrolmentRequest {
    let mut rng = StdRng::seed_from_u64(u64::from(user));
    UserSecret::from_seed(&[user; 32]).enrolment_request(key, challenge, &mut rng)
}

/// An RA in `dir` with enrolment 7 (jurisdiction 1, user 1) and an open challenge for 8.
fn enrolled_ra(dir: &Path) -> RegistrationStore {
    let mut rng = StdRng::seed_from_u64(1);
    let mut store = init(dir);
    let seven = store.challenge(EnrolmentId(7), Jurisdiction(1), &mut rng).unwrap();
    assert!(!seven.replaced && !seven.enrolled);
    store
        .enrol(&request(1, &store.public_key(), &seven.challenge), &mut rng)
        .unwrap();
    store.challenge(EnrolmentId(8), Jurisdiction(2), &mut rng).unwrap();
    store
}

#[test]
fn init_refuses_to_overwrite_an_ra_or_a_state_without_its_secret() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("ra");
    let key = enrolled_ra(&dir).public_key();
    let files = |name| fs::read(dir.join(name)).unwrap();
    let (secret, state) = (files(SECRET), files(STATE));
    let error = RegistrationStore::init(&dir, Duration::ZERO, || {}).unwrap_err();
    assert!(matches!(error, RegistrationError::AlreadyInitialised { .. }), "{error}");
    assert!(error.to_string().contains("refusing to overwrite it"), "{error}");
    assert_eq!(
        (files(SECRET), files(STATE)),
        (secret, state),
        "a refused init changes nothing"
    );
    assert_eq!(public_key(&dir).unwrap(), key);

    // The secret lost, its state kept: a new RA would strand every credential.
    fs::remove_file(dir.join(SECRET)).unwrap();
    let error = RegistrationStore::init(&dir, Duration::ZERO, || {}).unwrap_err();
    assert!(
        matches!(error, RegistrationError::StateWithoutSecret { enrolments: 1, .. }),
        "{error}"
    );
    assert!(!dir.join(SECRET).exists());
}

#[test]
fn the_state_survives_reopening_and_answers_as_before() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("ra");
    let key = enrolled_ra(&dir).public_key();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        for name in [SECRET, STATE] {
            let mode = fs::metadata(dir.join(name)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{name}");
        }
        assert_eq!(loose_secret_mode(&dir), None);
    }

    let store = RegistrationStore::open(&dir).unwrap();
    assert_eq!(store.public_key(), key);
    assert_eq!(public_key(&dir).unwrap(), key);
    assert_eq!(
        store.enrolled().collect::<Vec<_>>(),
        [(EnrolmentId(7), Jurisdiction(1))]
    );
    let pending: Vec<_> = store.pending().map(|c| (c.enrolment_id, c.jurisdiction)).collect();
    assert_eq!(pending, [(EnrolmentId(8), Jurisdiction(2))]);

    // The reopened RA answers the challenge its predecessor issued, and keeps enrolment 7's key
    // and jurisdiction.
    let mut rng = StdRng::seed_from_u64(2);
    let eight = store.pending().next().unwrap().clone();
    drop(store);
    let mut store = locked(&dir);
    let credential = store.enrol(&request(2, &key, &eight), &mut rng).unwrap();
    assert_eq!(
        (credential.enrolment_id, credential.jurisdiction),
        (EnrolmentId(8), Jurisdiction(2))
    );
    let error = store.challenge(EnrolmentId(7), Jurisdiction(2), &mut rng).unwrap_err();
    assert!(
        matches!(error, RegistrationError::JurisdictionMismatch { .. }),
        "{error}"
    );
    let again = store.challenge(EnrolmentId(7), Jurisdiction(1), &mut rng).unwrap();
    assert!(again.enrolled && !again.replaced);
    let error = store.enrol(&request(3, &key, &again.challenge), &mut rng).unwrap_err();
    assert!(
        matches!(error, RegistrationError::Refused(EnrolError::AlreadyEnrolled { .. })),
        "{error}"
    );
    drop(store);
    assert_eq!(RegistrationStore::open(&dir).unwrap().enrolled().count(), 2);
}

#[test]
fn torn_oversized_foreign_and_missing_states_are_refused_and_left_alone() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("ra");
    drop(enrolled_ra(&dir));
    let state = fs::read_to_string(dir.join(STATE)).unwrap();
    let refused = |text: &str| {
        fs::write(dir.join(STATE), text).unwrap();
        let error = RegistrationStore::open_locked(&dir, Duration::ZERO, || {}).unwrap_err();
        assert_eq!(fs::read_to_string(dir.join(STATE)).unwrap(), text, "never overwritten");
        error
    };

    let torn = refused(&state[..state.len() / 2]);
    assert!(matches!(torn, RegistrationError::NotAState { .. }), "{torn}");
    assert!(torn
        .to_string()
        .ends_with("is damaged (not an RA state): restore it from your backup"));

    let unknown_field = refused(&state.replacen("\"pending\"", "\"extra\": 1, \"pending\"", 1));
    assert!(
        matches!(unknown_field, RegistrationError::NotAState { .. }),
        "{unknown_field}"
    );

    let version = refused(&state.replacen("\"version\": 1", "\"version\": 2", 1));
    assert!(
        matches!(
            version,
            RegistrationError::Damaged {
                defect: StateDefect::Version { version: 2, .. },
                ..
            }
        ),
        "{version}"
    );
    let altered = refused(&state.replacen("specie-enrol-request1", "specie-enrol-request1f", 1));
    assert!(
        matches!(
            altered,
            RegistrationError::Damaged {
                defect: StateDefect::Request { id: 7, .. },
                ..
            }
        ),
        "{altered}"
    );

    // Another RA's state, beside this RA's secret.
    let other = temp.path().join("other");
    drop(init(&other));
    let foreign = refused(&fs::read_to_string(other.join(STATE)).unwrap());
    assert!(
        matches!(
            foreign,
            RegistrationError::Damaged {
                defect: StateDefect::OtherRa { .. },
                ..
            }
        ),
        "{foreign}"
    );
    assert!(std::error::Error::source(&foreign)
        .unwrap()
        .to_string()
        .starts_with("it is the state of another RA"));

    // Larger than the most read: refused before it is parsed.
    let file = File::create(dir.join(STATE)).unwrap();
    file.set_len(STATE_BYTES_MAX + 1).unwrap();
    drop(file);
    let oversized = RegistrationStore::open(&dir).unwrap_err();
    let RegistrationError::ReadState { source, .. } = &oversized else {
        panic!("{oversized}");
    };
    assert_eq!(source.kind(), std::io::ErrorKind::InvalidData, "{source}");

    fs::remove_file(dir.join(STATE)).unwrap();
    let missing = RegistrationStore::open(&dir).unwrap_err();
    assert!(matches!(missing, RegistrationError::StateMissing { .. }), "{missing}");

    fs::write(dir.join(SECRET), "not hex\n").unwrap();
    let bad = public_key(&dir).unwrap_err();
    assert!(matches!(bad, RegistrationError::BadSeed { .. }), "{bad}");
}

#[test]
fn unknown_replayed_and_replaced_challenges_are_refused() {
    let temp = tempfile::tempdir().unwrap();
    let mut store = init(&temp.path().join("ra"));
    let key = store.public_key();
    let mut rng = StdRng::seed_from_u64(3);
    let refused = |store: &mut RegistrationStore, request: &EnrolmentRequest, rng: &mut StdRng| match store
        .enrol(request, rng)
        .unwrap_err()
    {
        RegistrationError::Refused(error) => error,
        other => panic!("{other}"),
    };

    // A challenge this RA never issued (another RA's, for an id it never opened).
    let mut other = init(&temp.path().join("other"));
    let stranger = other.challenge(EnrolmentId(5), Jurisdiction(1), &mut rng).unwrap();
    let unknown = refused(&mut store, &request(1, &key, &stranger.challenge), &mut rng);
    assert_eq!(
        unknown,
        EnrolError::NoChallenge {
            enrolment_id: EnrolmentId(5)
        }
    );

    // A challenge replaced by a newer one for the same id can no longer be answered.
    let first = store.challenge(EnrolmentId(5), Jurisdiction(1), &mut rng).unwrap();
    let second = store.challenge(EnrolmentId(5), Jurisdiction(1), &mut rng).unwrap();
    assert!(second.replaced);
    let replaced = refused(&mut store, &request(1, &key, &first.challenge), &mut rng);
    assert_eq!(
        replaced,
        EnrolError::ChallengeMismatch {
            enrolment_id: EnrolmentId(5)
        }
    );

    // Answered once; the same request again, here and after a reopen, is a replay.
    let answer = request(1, &key, &second.challenge);
    store.enrol(&answer, &mut rng).unwrap();
    let replayed = refused(&mut store, &answer, &mut rng);
    assert_eq!(
        replayed,
        EnrolError::NoChallenge {
            enrolment_id: EnrolmentId(5)
        }
    );
    let dir = store.dir().to_path_buf();
    drop(store);
    let mut store = locked(&dir);
    let message = store.enrol(&answer, &mut rng).unwrap_err().to_string();
    assert!(
        message.starts_with("enrolment refused: no outstanding challenge for enrolment 5"),
        "{message}"
    );
    assert_eq!(store.enrolled().count(), 1, "a refusal records nothing");
}

#[test]
fn a_second_command_waits_for_the_lock_then_gives_up_and_readers_never_change_it() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("ra");
    let holder = init(&dir);

    // A reader is not held up, and may not change anything.
    let mut reader = RegistrationStore::open(&dir).unwrap();
    let mut rng = StdRng::seed_from_u64(4);
    let error = reader.challenge(EnrolmentId(1), Jurisdiction(1), &mut rng).unwrap_err();
    assert!(matches!(error, RegistrationError::ReadOnly { .. }), "{error}");

    // A writer waits for as long as it was told, says so once, and gives up naming the lock.
    let told = Cell::new(0);
    let started = Instant::now();
    let wait = Duration::from_millis(150);
    let error = RegistrationStore::open_locked(&dir, wait, || told.set(told.get() + 1)).unwrap_err();
    assert!(started.elapsed() >= wait);
    assert_eq!(told.get(), 1);
    let RegistrationError::Busy { path, .. } = &error else {
        panic!("{error}");
    };
    assert_eq!(path, &dir.join(LOCK));
    assert!(error.to_string().starts_with("another `specie ra` command still holds"));

    // A holder that lets go within the wait lets the waiter in.
    let waiter = {
        let dir = dir.clone();
        std::thread::spawn(move || RegistrationStore::open_locked(&dir, Duration::from_secs(10), || {}).map(|_| ()))
    };
    std::thread::sleep(Duration::from_millis(50));
    drop(holder);
    waiter.join().unwrap().unwrap();
}

#[test]
fn a_revoked_enrolment_gets_no_credential_and_a_rotation_leaves_it_out() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("ra");
    let mut rng = StdRng::seed_from_u64(3);
    let mut store = enrolled_ra(&dir);
    let eight = store.challenge(EnrolmentId(8), Jurisdiction(2), &mut rng).unwrap();
    store
        .enrol(&request(2, &store.public_key(), &eight.challenge), &mut rng)
        .unwrap();
    let old_key = store.public_key();
    assert!(store.revoke(EnrolmentId(8)).unwrap());
    assert!(!store.revoke(EnrolmentId(8)).unwrap(), "revoked already");
    assert!(matches!(
        store.revoke(EnrolmentId(99)),
        Err(RegistrationError::NotEnrolled { .. })
    ));
    // No challenge for a revoked id, and its enrolled key gets no fresh credential either.
    assert!(matches!(
        store.challenge(EnrolmentId(8), Jurisdiction(2), &mut rng),
        Err(RegistrationError::Revoked { .. })
    ));
    assert!(matches!(
        store.enrol(&request(2, &old_key, &eight.challenge), &mut rng),
        Err(RegistrationError::Revoked { .. })
    ));

    // The rotation: a new key, a credential for 7 only, durable, and 7's user holds it.
    let credentials = store.rotate(&mut rng).unwrap();
    let new_key = store.public_key();
    assert_ne!(new_key, old_key);
    assert_eq!(store.epoch(), 1);
    assert_eq!(
        credentials.iter().map(|c| c.enrolment_id).collect::<Vec<_>>(),
        [EnrolmentId(7)]
    );
    let secret = UserSecret::from_seed(&[1; 32]);
    assert!(credentials[0].verify(&secret, &new_key).is_ok());
    assert!(
        credentials[0].verify(&secret, &old_key).is_err(),
        "bound to the new key"
    );
    drop(store);
    let reopened = locked(&dir);
    assert_eq!((reopened.public_key(), reopened.epoch()), (new_key.clone(), 1));
    assert_eq!(public_key(&dir).unwrap(), new_key, "`specie ra key` prints the new key");
    assert_eq!(reopened.revoked().collect::<Vec<_>>(), [EnrolmentId(8)]);
    assert_eq!(
        reopened.enrolled().count(),
        2,
        "the auditor's directory keeps revoked ids"
    );
}
