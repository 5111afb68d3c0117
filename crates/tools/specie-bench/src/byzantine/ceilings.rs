//! The signature work an authority must do, measured on one core in the same run: the bound on
//! what its CPU per order can come down to.

use std::time::Duration;

use specie_fastpay::{
    deterministic_key, AccountKey, Certificate, Committee, Recipient, SigningKey, TransferOrder, VoteStatement,
};

use crate::ceiling::per_cpu_second;

/// Operations per second of one core's CPU time (the measuring thread's own CPU time, so other
/// processes on the machine do not lower them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Ceilings {
    /// Ed25519 signatures (an authority's vote).
    pub sign_per_s: f64,
    /// Strict single verifications (`verify_strict`, the owner's signature on a transfer order).
    pub verify_strict_per_s: f64,
    /// Certificates checked as an authority checks a confirmation order ([`Certificate::check`]:
    /// one batch verification of every authority's signature (the fast path) and the owner's).
    pub certificate_check_per_s: f64,
}

impl Ceilings {
    /// Signature work of one transfer order at one authority: verify the owner's signature,
    /// sign the vote.
    pub fn transfer_work_us(&self) -> f64 {
        1e6 / self.verify_strict_per_s + 1e6 / self.sign_per_s
    }

    /// Signature work of one confirmation order at one authority: check the certificate.
    pub fn confirm_work_us(&self) -> f64 {
        1e6 / self.certificate_check_per_s
    }
}

/// A committee of `authorities`, an order, its vote statement and its fast-path certificate.
pub(crate) struct Specimen {
    pub keys: Vec<SigningKey>,
    pub committee: Committee,
    pub statement: VoteStatement,
    pub certificate: Certificate,
}

impl Specimen {
    pub fn new(authorities: usize) -> Specimen {
        let keys: Vec<SigningKey> = (0..authorities as u64)
            .map(|n| deterministic_key("bench-ceiling-authority", n))
            .collect();
        let members = keys.iter().map(|k| k.verifying_key().to_bytes()).collect();
        let committee = Committee::new(1, members).expect("distinct generated keys");
        let owner = deterministic_key("bench-ceiling-account", 0);
        let order = TransferOrder {
            sender: AccountKey(owner.verifying_key().to_bytes()),
            recipient: Recipient::Account(AccountKey(
                deterministic_key("bench-ceiling-account", 1).verifying_key().to_bytes(),
            )),
            amount: 1,
            sequence: 0,
            memo: Vec::new(),
        }
        .sign(&owner);
        let statement = VoteStatement {
            kind: specie_fastpay::VoteKind::Prepare,
            committee_id: committee.id(),
            round: 0,
            order_digest: order.order.digest(),
        };
        // Every member's prepare: the fast path's final certificate, the one a payment carries
        // when all authorities answer.
        let signatures = keys
            .iter()
            .enumerate()
            .map(|(authority, key)| (authority as u16, statement.sign(key)))
            .collect();
        let certificate = Certificate {
            kind: specie_fastpay::VoteKind::Prepare,
            order,
            committee_id: committee.id(),
            round: 0,
            signatures,
        };
        Specimen {
            keys,
            committee,
            statement,
            certificate,
        }
    }
}

/// Measures each ceiling for `seconds` of this thread's CPU time.
pub(crate) fn measure(seconds: f64) -> Ceilings {
    let specimen = Specimen::new(4);
    let key = &specimen.keys[0];
    let verifying = key.verifying_key();
    let signature = specimen.statement.sign(key);
    assert!(specimen.statement.verify(&verifying, &signature));
    assert_eq!(specimen.certificate.check(&specimen.committee), Ok(()));
    let duration = Duration::from_secs_f64(seconds);
    Ceilings {
        sign_per_s: per_cpu_second(duration, || {
            std::hint::black_box(specimen.statement.sign(key));
        }),
        verify_strict_per_s: per_cpu_second(duration, || {
            assert!(specimen.statement.verify(&verifying, &signature));
        }),
        certificate_check_per_s: per_cpu_second(duration, || {
            assert!(specimen.certificate.check(&specimen.committee).is_ok());
        }),
    }
}
