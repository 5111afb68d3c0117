//! Accountable safety against a careful cheat: authorities that sign two conflicting orders with
//! signatures that a certificate's batch verification accepts but strict verification refuses
//! (a small-order component in the nonce point R) are convicted all the same.

use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use sha2::{Digest, Sha512};
use specie_fastpay::{
    deterministic_key, AccountKey, Certificate, Committee, CoreAddress, DoubleVote, Evidence, Recipient, SignedOrder,
    SigningKey, TransferOrder, VoteStatement,
};

/// The point (0, −1): order 2, so `z · T` vanishes exactly when the batch multiplier z is even.
fn order_two_point() -> EdwardsPoint {
    let mut y_minus_one = [0xff; 32];
    y_minus_one[0] = 0xec;
    y_minus_one[31] = 0x7f;
    CompressedEdwardsY(y_minus_one).decompress().unwrap()
}

/// An Ed25519 signature by `key` whose nonce point is `r·B + T`: the signer's choice, not the
/// deterministic nonce. Verifies cofactored, never strictly.
fn torsioned_signature(key: &SigningKey, message: &[u8], nonce: u64) -> [u8; 64] {
    let expanded = Sha512::digest(key.to_bytes());
    let mut secret: [u8; 32] = expanded[..32].try_into().unwrap();
    secret[0] &= 248;
    secret[31] &= 127;
    secret[31] |= 64;
    let secret = Scalar::from_bytes_mod_order(secret);
    let r = Scalar::from(nonce);
    let nonce_point = (r * ED25519_BASEPOINT_POINT + order_two_point()).compress();
    let k = Scalar::from_hash(
        Sha512::new()
            .chain_update(nonce_point.as_bytes())
            .chain_update(key.verifying_key().as_bytes())
            .chain_update(message),
    );
    let mut signature = [0u8; 64];
    signature[..32].copy_from_slice(nonce_point.as_bytes());
    signature[32..].copy_from_slice((r + k * secret).as_bytes());
    signature
}

fn order_of(owner: &SigningKey, recipient: Recipient) -> SignedOrder {
    TransferOrder {
        sender: AccountKey(owner.verifying_key().to_bytes()),
        recipient,
        amount: 10,
        sequence: 0,
        memo: Vec::new(),
    }
    .sign(owner)
}

/// A certificate of `order` by `honest` (deterministic signatures) and `cheats` (torsioned
/// ones), ground over nonces until batch verification accepts it.
fn cheating_certificate(
    committee: &Committee,
    authorities: &[SigningKey],
    order: &SignedOrder,
    honest: u16,
    cheats: [u16; 2],
) -> Certificate {
    let statement = VoteStatement {
        kind: specie_fastpay::VoteKind::Commit,
        committee_id: committee.id(),
        round: 0,
        order_digest: order.order.digest(),
    };
    let message = statement.signing_bytes();
    // Each try passes with probability 1/4 (both multipliers even): 64 tries all fail with
    // probability (3/4)^64 ≈ 1e-8, and the outcome is deterministic anyway.
    for attempt in 1..=64u64 {
        let mut signatures = vec![(honest, statement.sign(&authorities[usize::from(honest)]))];
        for cheat in cheats {
            let signature = torsioned_signature(
                &authorities[usize::from(cheat)],
                &message,
                1000 * attempt + u64::from(cheat),
            );
            assert!(
                !statement.verify(committee.key(cheat).unwrap(), &signature),
                "never strictly valid"
            );
            signatures.push((cheat, signature));
        }
        signatures.sort_by_key(|(authority, _)| *authority);
        let certificate = Certificate {
            kind: specie_fastpay::VoteKind::Commit,
            order: order.clone(),
            committee_id: committee.id(),
            round: 0,
            signatures,
        };
        if certificate.check(committee).is_ok() {
            return certificate;
        }
    }
    panic!("no nonce made the batch equation accept the torsioned signatures");
}

#[test]
fn double_signers_whose_votes_only_batch_verify_are_convicted() {
    let authorities: Vec<SigningKey> = (0..4).map(|i| deterministic_key("authority", i)).collect();
    let committee = Committee::new(1, authorities.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap();
    let owner = deterministic_key("account", 0);
    let paid = order_of(&owner, Recipient::Account(AccountKey([7; 32])));
    let redeemed = order_of(&owner, Recipient::Core(CoreAddress([0x11; 32])));

    let first = cheating_certificate(&committee, &authorities, &paid, 0, [1, 2]);
    let second = cheating_certificate(&committee, &authorities, &redeemed, 3, [1, 2]);
    let evidence = Evidence {
        committee: committee.clone(),
        double_votes: DoubleVote::from_certificates(&first, &second),
    };
    assert_eq!(evidence.convicted(), Ok(vec![1, 2]));

    // Cofactored verification frames no one: authority 0's honest vote on `paid` paired with a
    // signature it never made on `redeemed` is refused.
    let mut framed = evidence.double_votes[0].clone();
    framed.authority = 0;
    framed.first.signature = first.signatures[0].1;
    assert!(framed.check(&committee).is_err());
}
