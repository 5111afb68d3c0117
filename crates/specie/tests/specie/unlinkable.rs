//! The unlinkable level in a cluster (docs/unlinkable-format.md): the sentinels take kind `0x0a`
//! under the topology's privacy section with a certifier group; a coin enters the level, the
//! certifiers certify the token only once the cluster's UHS holds it (they ask the sentinel), it
//! is paid on unlinkably, and a second spend of the same token is refused by the shards as a
//! serial number that exists.

use crate::cluster_harness;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use specie_codec::Encode;
use specie_credential::unlinkable::{deal_certifiers, CertificateShare, SpentToken, TokenOpening, UnlinkableKeys};
use specie_credential::{AuditorSecret, EnrolmentId, Identity, Jurisdiction, RegistrationAuthority, UserSecret};
use specie_private_transactions::{certify_if_in_ledger, UnlinkableBuild};
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{witness_program_commitment, MintTransaction, NonceMode, Output, SpecieTransaction, UhsId};

const ALICE: EnrolmentId = EnrolmentId(7);
const BOB: EnrolmentId = EnrolmentId(8);

#[test]
fn a_cluster_refuses_the_second_spend_of_an_unlinkable_token() {
    let (_temp, dir, base, _down) = cluster_harness::start_cluster(1);
    let url = format!("http://127.0.0.1:{}", base + 9);
    let mut rng = StdRng::seed_from_u64(38);
    let issuer = keypair_from_secret(&[0x31; 32]).unwrap();
    let coin_key = keypair_from_secret(&[0x32; 32]).unwrap();
    let mut ra = RegistrationAuthority::from_seed(&[0x33; 32]);
    let secret = UserSecret::from_seed(&[0x35; 32]);
    let challenge = ra.challenge(ALICE, Jurisdiction(1), &mut rng);
    let request = secret.enrolment_request(&ra.public_key(), &challenge, &mut rng);
    let credential = ra.enrol(&request, &mut rng).unwrap();
    let alice = Identity::new(secret, credential, &ra.public_key()).unwrap();
    let owner_auditor = AuditorSecret::from_seed(&[0x34; 32]).public();
    let (group, certifiers) = deal_certifiers(2, 3, &mut rng).unwrap();

    // The operator adds the issuer and the privacy section with the certifier group, and
    // restarts the cluster.
    cluster_harness::specie(&["cluster", "down", "--dir", &dir]);
    let file = std::path::Path::new(&dir).join("cluster.toml");
    let mut topology = specie_cluster::Topology::load(&file).unwrap();
    topology.issuers = vec![hex::encode(xonly_bytes(&issuer))];
    topology.privacy = Some(specie_cluster::PrivacyConfig {
        auditors: vec![],
        registration_authority: Some(hex::encode(ra.public_key().encode())),
        owner_auditors: vec![hex::encode(owner_auditor.encode())],
        active_auditors: vec![],
        certifiers: Some(hex::encode(group.encode())),
    });
    std::fs::write(&file, topology.to_toml()).unwrap();
    cluster_harness::specie(&["cluster", "up", "--dir", &dir, "--base-port", &base.to_string()]);

    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        rng.gen(),
        vec![Output {
            witness_program_commitment: witness_program_commitment(&xonly_bytes(&coin_key)),
            value: 1_000,
        }],
        &issuer,
        NonceMode::Deterministic,
    ));
    cluster_harness::confirm_in_core(&url, std::slice::from_ref(&mint));
    let authority = ra.public_key();
    let keys = UnlinkableKeys {
        authority: &authority,
        certifiers: &group,
    };
    let build = |spent, outputs, transparent_inputs| UnlinkableBuild {
        transparent_inputs,
        spent,
        outputs,
        transparent_outputs: vec![],
        owner_auditors: vec![owner_auditor],
    };
    let token = TokenOpening::random(ALICE, 1_000, &mut rng);
    let entry = build(vec![], vec![token.clone()], vec![mint.created_outputs()[0].to_input()])
        .prove_and_sign(&[coin_key], &alice, &keys, NonceMode::Deterministic, &mut rng)
        .unwrap();
    let created = entry.created_tokens()[0];
    // Before the entry is confirmed, no certifier answers for the token.
    let in_ledger = |id: &UhsId| {
        let body: serde_json::Value = ureq::get(&format!("{url}/v1/uhs/{}", hex::encode(id.0)))
            .call()
            .unwrap()
            .into_json()
            .unwrap();
        body["present"] == true
    };
    let ask = |certifiers: &[specie_credential::unlinkable::CertifierSecret]| -> Vec<CertificateShare> {
        (certifiers.iter())
            .filter_map(|c| certify_if_in_ledger(c, &created.outpoint, &created.token, in_ledger).ok())
            .collect()
    };
    assert!(ask(&certifiers).is_empty(), "certified before the ledger held it");
    cluster_harness::confirm_in_core(&url, &[SpecieTransaction::from(entry)]);
    let certificate = token.certificate(&group, &ask(&certifiers[1..])).unwrap();

    let spend = |rng: &mut StdRng| {
        let spent = vec![SpentToken {
            opening: &token,
            certificate: &certificate,
        }];
        let outputs = vec![
            TokenOpening::random(BOB, 600, rng),
            TokenOpening::random(ALICE, 400, rng),
        ];
        SpecieTransaction::from(
            build(spent, outputs, vec![])
                .prove_and_sign(&[], &alice, &keys, NonceMode::Randomized, rng)
                .unwrap(),
        )
    };
    let (first, second) = (spend(&mut rng), spend(&mut rng));
    assert_ne!(first.compact().txid, second.compact().txid);
    cluster_harness::confirm_in_core(&url, &[first]);
    let refused = cluster_harness::submit_results(&url, &[second]);
    assert_eq!(refused[0]["status"], "rejected", "{refused:?}");
    assert_eq!(refused[0]["code"], "output_already_exists", "{refused:?}");
}
