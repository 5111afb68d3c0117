//! FROST under the group key: BIP340 compatibility with libsecp256k1, thresholds, the
//! distributed key generation and the proactive refresh as sans-IO flows.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::SeedableRng;
use secp256k1::{schnorr, XOnlyPublicKey, SECP256K1};
use specie_endorsement::frost;
use specie_endorsement::{
    deal, group_key, run_together, sign_together, Ceremony, CeremonyError, CeremonyInput, CeremonyKind, CeremonyReport,
    EndorserId, EndorserKeys, MerkleTree, Threshold,
};
use specie_role::{Role, Round};

fn bip340_verify(key: &[u8; 32], message: &[u8; 32], signature: &frost::Signature) -> bool {
    let bytes: [u8; 64] = signature.serialize().unwrap().try_into().unwrap();
    let key = XOnlyPublicKey::from_byte_array(key).unwrap();
    SECP256K1
        .verify_schnorr(&schnorr::Signature::from_byte_array(bytes), message, &key)
        .is_ok()
}

#[test]
fn frost_signature_is_bip340_under_the_xonly_group_key() {
    // Several dealt groups, so both parities of the group key's y coordinate are exercised.
    let mut parities = [0usize; 2];
    for seed in 0..12 {
        let threshold = Threshold::new(3, 5).unwrap();
        let (keys, public) = deal(threshold, seed).unwrap();
        let compressed = public.verifying_key().serialize().unwrap();
        parities[usize::from(compressed[0] == 0x03)] += 1;
        let key = group_key(&public).unwrap();
        let message = MerkleTree::new(&[[seed as u8; 32]]).message();
        let ids = [EndorserId(1), EndorserId(3), EndorserId(5)];
        let signature = sign_together(&keys, &public, &ids, &message, seed).unwrap();
        assert!(bip340_verify(&key.0, &message, &signature), "seed {seed}");
        let mut other = message;
        other[0] ^= 1;
        assert!(
            !bip340_verify(&key.0, &other, &signature),
            "seed {seed}: a different message"
        );
    }
    assert!(parities[0] > 0 && parities[1] > 0, "both y parities seen: {parities:?}");
}

#[test]
fn fewer_than_k_shares_cannot_sign() {
    let (keys, public) = deal(Threshold::new(3, 5).unwrap(), 1).unwrap();
    let message = [9u8; 32];
    let two = [EndorserId(2), EndorserId(4)];
    assert!(
        sign_together(&keys, &public, &two, &message, 1).is_err(),
        "FROST refuses k - 1 signers"
    );
    // Nor does the secret the k - 1 shares interpolate sign for the group (FROST's reconstruct
    // refuses k - 1 shares, so they are relabelled as a 2-of-n group's to interpolate anyway).
    let shares: Vec<_> = two
        .iter()
        .map(|id| {
            let share = &keys[id].share;
            let (signing, verifying, key) = (*share.signing_share(), *share.verifying_share(), *share.verifying_key());
            frost::keys::KeyPackage::new(*share.identifier(), signing, verifying, key, 2)
        })
        .collect();
    let guess = frost::keys::reconstruct(&shares).unwrap();
    let forged = guess.sign(StdRng::seed_from_u64(5), &message);
    assert!(!bip340_verify(&group_key(&public).unwrap().0, &message, &forged));
}

#[test]
fn a_wrong_key_set_is_refused() {
    let (keys, public) = deal(Threshold::new(3, 5).unwrap(), 2).unwrap();
    let (other_keys, other_public) = deal(Threshold::new(3, 5).unwrap(), 3).unwrap();
    let message = [1u8; 32];
    let ids = [EndorserId(1), EndorserId(2), EndorserId(3)];
    let signature = sign_together(&other_keys, &other_public, &ids, &message, 4).unwrap();
    assert!(!bip340_verify(&group_key(&public).unwrap().0, &message, &signature));
    // Shares of two groups do not aggregate, and FROST names the strangers.
    let mut mixed: BTreeMap<EndorserId, EndorserKeys> = keys.clone();
    mixed.insert(EndorserId(3), other_keys[&EndorserId(3)].clone());
    match sign_together(&mixed, &public, &ids, &message, 5) {
        Err(frost::Error::InvalidSignatureShare { culprits }) => {
            assert_eq!(culprits, vec![EndorserId(3).identifier()])
        }
        other => panic!("expected a bad share from endorser 3, got {other:?}"),
    }
}

fn dkg(threshold: Threshold, seed: u8) -> BTreeMap<EndorserId, EndorserKeys> {
    let participants = threshold
        .endorsers()
        .map(|id| {
            (
                id,
                Ceremony::new(id, threshold, CeremonyKind::Generate, 1_000, [seed ^ id.0 as u8; 32]),
            )
        })
        .collect();
    run_together(participants)
        .into_iter()
        .map(|(id, outcome)| (id, outcome.expect("DKG succeeds")))
        .collect()
}

fn refresh(
    keys: &BTreeMap<EndorserId, EndorserKeys>,
    threshold: Threshold,
    seed: u8,
) -> BTreeMap<EndorserId, EndorserKeys> {
    let participants = keys
        .iter()
        .map(|(id, old)| {
            let kind = CeremonyKind::Refresh {
                old: Box::new(old.clone()),
            };
            (*id, Ceremony::new(*id, threshold, kind, 1_000, [seed ^ id.0 as u8; 32]))
        })
        .collect();
    run_together(participants)
        .into_iter()
        .map(|(id, outcome)| (id, outcome.expect("refresh succeeds")))
        .collect()
}

#[test]
fn dkg_gives_every_endorser_a_share_of_one_bip340_key() {
    let threshold = Threshold::new(3, 5).unwrap();
    let keys = dkg(threshold, 0x40);
    assert_eq!(keys.len(), 5);
    let key = keys[&EndorserId(1)].group_key();
    assert!(keys
        .values()
        .all(|k| k.group_key() == key && k.public == keys[&EndorserId(1)].public));
    let public = keys[&EndorserId(1)].public.clone();
    let message = [3u8; 32];
    for subset in [[1, 2, 3], [1, 4, 5], [2, 3, 5], [3, 4, 5]] {
        let ids = subset.map(EndorserId);
        let signature = sign_together(&keys, &public, &ids, &message, 7).unwrap();
        assert!(bip340_verify(&key.0, &message, &signature), "subset {subset:?}");
    }
    assert!(sign_together(&keys, &public, &[EndorserId(1), EndorserId(2)], &message, 7).is_err());
    // A second run is a different group.
    assert_ne!(dkg(threshold, 0x41)[&EndorserId(1)].group_key(), key);
}

#[test]
fn refresh_keeps_the_group_key_and_retires_the_old_shares() {
    let threshold = Threshold::new(3, 5).unwrap();
    let old = dkg(threshold, 0x10);
    let new = refresh(&old, threshold, 0x20);
    let key = old[&EndorserId(1)].group_key();
    assert!(new.values().all(|k| k.group_key() == key), "the group key is unchanged");
    assert!(
        new.iter()
            .all(|(id, k)| k.share.signing_share() != old[id].share.signing_share()),
        "every share changed"
    );
    let public = new[&EndorserId(1)].public.clone();
    let message = [5u8; 32];
    let ids = [EndorserId(1), EndorserId(2), EndorserId(3)];
    let signature = sign_together(&new, &public, &ids, &message, 1).unwrap();
    assert!(
        bip340_verify(&key.0, &message, &signature),
        "new shares sign for the same key"
    );
    // Two new shares and one old one: FROST refuses the old share under the new public shares...
    let mut mixed = new.clone();
    mixed.insert(EndorserId(3), old[&EndorserId(3)].clone());
    assert!(sign_together(&mixed, &public, &ids, &message, 2).is_err());
    // ...and even computed without that check, the mix does not make a valid signature: the
    // secret they interpolate is not the group's.
    let shares: Vec<_> = ids.iter().map(|id| mixed[id].share.clone()).collect();
    let interpolated = frost::keys::reconstruct(&shares).unwrap();
    let forged = interpolated.sign(StdRng::seed_from_u64(3), &message);
    assert!(!bip340_verify(&key.0, &message, &forged));
    // k new shares interpolate the group secret, as the old k did.
    let shares: Vec<_> = ids.iter().map(|id| new[id].share.clone()).collect();
    let secret = frost::keys::reconstruct(&shares).unwrap();
    assert!(bip340_verify(
        &key.0,
        &message,
        &secret.sign(StdRng::seed_from_u64(4), &message)
    ));
}

#[test]
fn a_dealt_group_refreshes_too() {
    let threshold = Threshold::new(2, 3).unwrap();
    let (old, _) = deal(threshold, 77).unwrap();
    let new = refresh(&old, threshold, 0x33);
    assert!(new.values().all(|k| k.group_key() == old[&EndorserId(1)].group_key()));
}

#[test]
fn an_equivocating_participant_fails_the_confirmation() {
    let threshold = Threshold::new(2, 3).unwrap();
    let mut participants: BTreeMap<EndorserId, Ceremony> = threshold
        .endorsers()
        .map(|id| {
            (
                id,
                Ceremony::new(id, threshold, CeremonyKind::Generate, 1_000, [id.0 as u8; 32]),
            )
        })
        .collect();
    // Endorser 3 shows endorser 1 a different round-1 package (from a second polynomial) than
    // it shows endorser 2.
    let mut starts = BTreeMap::new();
    for (id, ceremony) in participants.iter_mut() {
        ceremony.handle(0, CeremonyInput::Start);
        starts.insert(*id, Round::take(ceremony).sends);
    }
    let mut twin = Ceremony::new(EndorserId(3), threshold, CeremonyKind::Generate, 1_000, [99; 32]);
    twin.handle(0, CeremonyInput::Start);
    let twin_sends = Round::take(&mut twin).sends;
    let mut queue = Vec::new();
    for (from, sends) in starts {
        for (to, message) in sends {
            let message = if from == EndorserId(3) && to == EndorserId(1) {
                twin_sends.iter().find(|(t, _)| *t == to).unwrap().1.clone()
            } else {
                message
            };
            queue.push((from, to, message));
        }
    }
    let mut failures = Vec::new();
    while !queue.is_empty() {
        for (from, to, message) in std::mem::take(&mut queue) {
            let ceremony = participants.get_mut(&to).unwrap();
            ceremony.handle(1, CeremonyInput::FromPeer { from, message });
            let round = Round::take(ceremony);
            queue.extend(round.sends.into_iter().map(|(t, m)| (to, t, m)));
            failures.extend(
                round
                    .reports
                    .into_iter()
                    .filter(|r| matches!(r, CeremonyReport::Failed(_))),
            );
        }
    }
    assert!(!failures.is_empty(), "someone notices");
    assert!(
        participants.values().all(|c| c.outcome().is_none()),
        "no one finishes with a split key"
    );
}

#[test]
fn a_silent_participant_times_the_ceremony_out() {
    let threshold = Threshold::new(2, 3).unwrap();
    let mut ceremony = Ceremony::new(EndorserId(1), threshold, CeremonyKind::Generate, 500, [1; 32]);
    ceremony.handle(100, CeremonyInput::Start);
    Round::take(&mut ceremony);
    assert_eq!(ceremony.poll_timeout(), Some(600));
    ceremony.handle_timeout(600);
    let reports = Round::take(&mut ceremony).reports;
    assert_eq!(
        reports,
        vec![CeremonyReport::Failed(CeremonyError::Timeout {
            round: 1,
            missing: vec![EndorserId(2), EndorserId(3)]
        })]
    );
}
