//! The online core's transaction format as a capability's service needs it
//! ([`specie_service::CoreTransactions`]): handed to the offline authority and the exchange by
//! whoever starts them, so the capabilities' services never read the core's transactions
//! themselves.

use specie_codec::{Decode, Encode};
use specie_service::{BridgeFundingTerms, CoreTransactions, NotAFunding, PayTo};
use specie_transaction::extension::KIND_BRIDGE_FUND;
use specie_transaction::{witness_program_commitment, BridgePayout, DecodeLimits, SpecieTransaction};

/// The online core's transaction format ([`CORE_FORMAT`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct CoreFormat;

/// The one value of [`CoreFormat`], for a service's `&'static dyn CoreTransactions`.
pub static CORE_FORMAT: CoreFormat = CoreFormat;

fn decoded(bytes: &[u8]) -> Result<SpecieTransaction, NotAFunding> {
    SpecieTransaction::decode_exact(bytes).map_err(|error| NotAFunding::Undecodable {
        reason: error.to_string(),
    })
}

impl CoreTransactions for CoreFormat {
    fn transaction_bytes_max(&self) -> usize {
        DecodeLimits::default().transaction_bytes_max
    }

    fn bridge_funding(&self, bytes: &[u8]) -> Result<BridgeFundingTerms, NotAFunding> {
        let SpecieTransaction::BridgeFunding(funding) = decoded(bytes)? else {
            return Err(NotAFunding::OtherKind {
                wanted: "bridge funding",
                wanted_kind: KIND_BRIDGE_FUND,
            });
        };
        Ok(BridgeFundingTerms {
            authority: funding.authority,
            owners_digest: funding.owners_digest,
            amount: funding.amount,
            marker: funding.marker().0,
            refund_to: funding
                .inputs
                .first()
                .map(|input| input.data.witness_program_commitment),
        })
    }

    fn bridge_payout(&self, bridge: &ed25519_dalek::SigningKey, serial: [u8; 16], to: PayTo, amount: u64) -> Vec<u8> {
        let address = match to {
            PayTo::Commitment(commitment) => commitment,
            PayTo::Key(key) => witness_program_commitment(&key),
        };
        SpecieTransaction::BridgePayout(BridgePayout::new_signed(bridge, serial, address, amount)).encode()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use specie_transaction::{BridgeFunding, Input, NonceMode, OutPoint, Output, Txid};

    fn input_of(owner: &secp256k1::Keypair) -> Input {
        Input {
            prevout: OutPoint {
                txid: Txid([1; 32]),
                index: 0,
            },
            data: Output {
                witness_program_commitment: specie_transaction::witness_program_commitment_of(
                    &owner.x_only_public_key().0,
                ),
                value: 10,
            },
        }
    }

    fn funding() -> BridgeFunding {
        let owner = secp256k1::Keypair::from_seckey_slice(secp256k1::SECP256K1, &[7; 32]).unwrap();
        let input = input_of(&owner);
        BridgeFunding::new_signed(
            [2; 32],
            [3; 32],
            10,
            vec![input],
            vec![],
            &[owner],
            NonceMode::Deterministic,
        )
        .unwrap()
    }

    #[test]
    fn a_bridge_funding_reads_as_its_terms_and_nothing_else_does() {
        let funding = funding();
        let refund_to = funding.inputs[0].data.witness_program_commitment;
        let bytes = SpecieTransaction::BridgeFunding(funding.clone()).encode();
        assert_eq!(
            CORE_FORMAT.bridge_funding(&bytes),
            Ok(BridgeFundingTerms {
                authority: [2; 32],
                owners_digest: [3; 32],
                amount: 10,
                marker: funding.marker().0,
                refund_to: Some(refund_to),
            })
        );
        let payout = CORE_FORMAT.bridge_payout(
            &ed25519_dalek::SigningKey::from_bytes(&[9; 32]),
            [6; 16],
            PayTo::Key([5; 32]),
            1,
        );
        assert!(matches!(
            CORE_FORMAT.bridge_funding(&payout),
            Err(NotAFunding::OtherKind {
                wanted_kind: KIND_BRIDGE_FUND,
                ..
            })
        ));
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(matches!(
            CORE_FORMAT.bridge_funding(&trailing),
            Err(NotAFunding::Undecodable { .. })
        ));
        assert!(matches!(
            CORE_FORMAT.bridge_funding(&[]),
            Err(NotAFunding::Undecodable { .. })
        ));
    }

    #[test]
    fn a_payout_is_the_cores_signed_payout_to_the_commitment_or_the_keys_commitment() {
        let bridge = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
        let key = [5; 32];
        for (to, address) in [
            (PayTo::Commitment([4; 32]), [4; 32]),
            (PayTo::Key(key), witness_program_commitment(&key)),
        ] {
            let bytes = CORE_FORMAT.bridge_payout(&bridge, [6; 16], to, 99);
            let Ok(SpecieTransaction::BridgePayout(payout)) = SpecieTransaction::decode_exact(&bytes) else {
                panic!("a payout");
            };
            assert_eq!(
                (payout.serial, payout.address(), payout.amount()),
                ([6; 16], address, 99)
            );
            assert_eq!(payout.authority, bridge.verifying_key().to_bytes());
            assert!(payout.signature_valid());
            assert_eq!(
                CORE_FORMAT.bridge_payout(&bridge, [6; 16], to, 99),
                bytes,
                "deterministic"
            );
        }
    }
}
