//! Times the registration and spending operations and prints the encodings' sizes:
//! `cargo run --release -p specie-credential --example credential_timing`.
//! The numbers in `docs/credential-format.md` §6 come from this.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_codec::Encode;
use specie_credential::{
    verify_batch, AuditorSecret, EnrolmentId, Identity, Jurisdiction, OwnerAudit, OwnerCommitment, OwnerOpening,
    RegistrationAuthority, SpendProof, UserSecret,
};

const ROUNDS: u32 = 20;
const BATCH: usize = 32;

fn average(total: Duration, count: u32) -> f64 {
    total.as_secs_f64() * 1e3 / f64::from(count)
}

fn main() {
    let mut rng = StdRng::seed_from_u64(1);
    let mut ra = RegistrationAuthority::random(&mut rng);
    let authority = ra.public_key();

    let mut request_ms = Duration::ZERO;
    let mut issue_ms = Duration::ZERO;
    let mut identities = Vec::new();
    let mut request_bytes = 0;
    for id in 0..BATCH as u64 {
        let secret = UserSecret::random(&mut rng);
        let challenge = ra.challenge(EnrolmentId(id), Jurisdiction(276), &mut rng);
        let started = Instant::now();
        let request = secret.enrolment_request(&authority, &challenge, &mut rng);
        request_ms += started.elapsed();
        request_bytes = request.encode().len();
        let started = Instant::now();
        let credential = ra.enrol(&request, &mut rng).unwrap();
        issue_ms += started.elapsed();
        identities.push(Identity::new(secret, credential, &authority).unwrap());
    }
    println!(
        "enrolment request (user)           {:7.3} ms",
        average(request_ms, BATCH as u32)
    );
    println!(
        "enrol: check + issue (RA)          {:7.3} ms",
        average(issue_ms, BATCH as u32)
    );

    let openings: Vec<OwnerOpening> = identities
        .iter()
        .map(|i| OwnerOpening::random(i.enrolment_id(), &mut rng))
        .collect();
    let owners: Vec<OwnerCommitment> = openings.iter().map(OwnerOpening::commitment).collect();
    let message = [7u8; 32];
    let auditor = AuditorSecret::random(&mut rng);

    for auditors in [vec![], vec![auditor.public()]] {
        let started = Instant::now();
        let proofs: Vec<SpendProof> = identities
            .iter()
            .zip(&openings)
            .map(|(i, o)| i.prove_spend(&authority, o, &message, &auditors, &mut rng).unwrap())
            .collect();
        let prove = average(started.elapsed(), BATCH as u32);
        let started = Instant::now();
        for _ in 0..ROUNDS {
            for (proof, owner) in proofs.iter().zip(&owners) {
                proof.verify(&authority, owner, &message).unwrap();
            }
        }
        let single = average(started.elapsed(), ROUNDS * BATCH as u32);
        let items: Vec<_> = proofs.iter().zip(&owners).map(|(p, o)| (p, o, &message)).collect();
        let started = Instant::now();
        for _ in 0..ROUNDS {
            verify_batch(&authority, &items).unwrap();
        }
        let batched = average(started.elapsed(), ROUNDS * BATCH as u32);
        println!(
            "--- spend proof, {} auditor(s): {} bytes",
            auditors.len(),
            proofs[0].encode().len()
        );
        println!("prove                              {prove:7.3} ms");
        println!("verify one by one                  {single:7.3} ms/proof");
        println!(
            "verify in a batch of {BATCH}            {batched:7.3} ms/proof ({:.1}x)",
            single / batched
        );
    }

    let started = Instant::now();
    let audit = OwnerAudit::prove(&openings[0], auditor.public(), &message, &mut rng);
    let prove_audit = started.elapsed();
    let started = Instant::now();
    audit.verify(&owners[0], &message).unwrap();
    println!("--- owner audit: {} bytes", audit.encode().len());
    println!("prove                              {:7.3} ms", average(prove_audit, 1));
    println!(
        "verify                             {:7.3} ms",
        average(started.elapsed(), 1)
    );
    println!("--- sizes (bytes)");
    println!("RA public key {}", authority.encode().len());
    println!("enrolment request {}", request_bytes);
    println!("credential {}", identities[0].credential().encode().len());
    println!("owner commitment {}", owners[0].encode().len());
    println!("owner opening {}", openings[0].encode().len());
    println!("auditor key {}", auditor.public().encode().len());
}
