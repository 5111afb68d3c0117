//! What a trader is owed by a withdrawal or a refund, and the check that a payout the exchange
//! served pays exactly that: the wallet's side of the exchange's bridge to the core, where the
//! core's transactions are read.

use specie_codec::Decode;
use specie_exchange::{AssetId, Operation, SignedTransaction, Withdrawal};
use specie_exchange_service::core_bridge::BridgeRefusal;
use specie_transaction::SpecieTransaction;

/// Why a payout the exchange served is not the one the trader is owed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PayoutError {
    #[error("the payout is not a bridge payout of the online core")]
    NotAPayout,
    #[error("the payout is made by bridge key {found}, not by the exchange's {expected}")]
    OtherBridge { expected: String, found: String },
    #[error("the payout's signature does not verify")]
    BadSignature,
    #[error(
        "the payout pays {found_amount} to {found_address} for serial {found_serial}, not the {amount} to \
         {address} for serial {serial} owed"
    )]
    NotOwed {
        amount: u64,
        address: String,
        serial: String,
        found_amount: u64,
        found_address: String,
        found_serial: String,
    },
    #[error("the withdrawal kept in the wallet does not decode as one: {0}")]
    NotAWithdrawal(String),
    #[error("the deposit kept in the wallet is not a core funding")]
    NotAFunding,
    #[error("the deposit cannot be refunded: {0}")]
    NotRefundable(#[from] BridgeRefusal),
}

/// Checks that `payout` (its bytes, as the exchange served them) is the exchange's payout of
/// `owed`: a core bridge payout made by `bridge` (the key the wallet pinned), validly signed, for
/// `owed`'s serial (its account and sequence), address and amount; and returns it. Anything else
/// cannot pay what is owed (the core pays a serial once), so taking the withdrawal or deposit as
/// paid on it could lose it.
pub fn check_payout(payout: &[u8], bridge: &[u8; 32], owed: &Withdrawal) -> Result<SpecieTransaction, PayoutError> {
    let transaction = SpecieTransaction::decode_exact(payout).map_err(|_| PayoutError::NotAPayout)?;
    let SpecieTransaction::BridgePayout(payout) = &transaction else {
        return Err(PayoutError::NotAPayout);
    };
    if payout.authority != *bridge {
        return Err(PayoutError::OtherBridge {
            expected: hex::encode(bridge),
            found: hex::encode(payout.authority),
        });
    }
    if !payout.signature_valid() {
        return Err(PayoutError::BadSignature);
    }
    if (payout.serial, payout.address(), payout.amount()) != (owed.serial(), owed.address, owed.amount) {
        return Err(PayoutError::NotOwed {
            amount: owed.amount,
            address: hex::encode(owed.address),
            serial: hex::encode(owed.serial()),
            found_amount: payout.amount(),
            found_address: hex::encode(payout.address()),
            found_serial: hex::encode(payout.serial),
        });
    }
    Ok(transaction)
}

/// What the withdrawal signed as `transaction` (its canonical bytes, as the wallet keeps them)
/// is owed: its account, sequence, asset, amount and core address.
pub fn owed_by_withdrawal(transaction: &[u8]) -> Result<Withdrawal, PayoutError> {
    let signed = specie_codec::decode_bounded(
        "exchange transaction",
        transaction,
        specie_exchange::SIGNED_TRANSACTION_BYTES_MAX,
        SignedTransaction::decode_from,
    )
    .map_err(|error| PayoutError::NotAWithdrawal(error.to_string()))?;
    let Operation::Withdraw { asset, amount, address } = signed.transaction.operation else {
        return Err(PayoutError::NotAWithdrawal("another operation".into()));
    };
    Ok(Withdrawal {
        account: signed.transaction.account,
        sequence: signed.transaction.sequence,
        asset,
        amount,
        address,
    })
}

/// What the refund of `funding` (a deposit of `asset`) is owed: the funding's amount, to its
/// first input's owner, under the refund's id (docs: `specie_exchange::bridge`).
pub fn owed_by_refund(asset: AssetId, funding: &SpecieTransaction) -> Result<Withdrawal, PayoutError> {
    let SpecieTransaction::BridgeFunding(funding) = funding else {
        return Err(PayoutError::NotAFunding);
    };
    let (account, sequence) = specie_exchange::refund_id(asset, &funding.marker().0);
    let address = funding
        .inputs
        .first()
        .map(|input| input.data.witness_program_commitment)
        .ok_or(BridgeRefusal::NoInput)?;
    Ok(Withdrawal {
        account,
        sequence,
        asset,
        amount: funding.amount,
        address,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use specie_codec::Encode;
    use specie_exchange::Transaction;
    use specie_exchange_service::core_bridge::bridge_payout;
    use specie_wallet::CORE_FORMAT;

    fn bridge() -> ed25519_dalek::SigningKey {
        ed25519_dalek::SigningKey::from_bytes(&[6; 32])
    }

    fn paid(withdrawal: &Withdrawal, by: &ed25519_dalek::SigningKey) -> Vec<u8> {
        bridge_payout(&CORE_FORMAT, withdrawal, by)
    }

    /// A withdrawal's payout is taken only if it is the one owed: the pinned bridge key's, validly
    /// signed, for the withdrawal's serial, address and amount.
    #[test]
    fn a_payout_is_checked_against_what_is_owed() {
        let key = bridge();
        let mut bytes = Vec::new();
        Transaction {
            account: 7,
            sequence: 9,
            operation: Operation::Withdraw {
                asset: 1,
                amount: 40,
                address: [5; 32],
            },
        }
        .sign(&[1; 32], &key)
        .encode_to(&mut bytes);
        let owed = owed_by_withdrawal(&bytes).unwrap();
        assert_eq!((owed.account, owed.sequence, owed.amount), (7, 9, 40));
        let bridge_key = key.verifying_key().to_bytes();
        let payout = paid(&owed, &key);
        assert_eq!(
            check_payout(&payout, &bridge_key, &owed).map(|payout| payout.encode()),
            Ok(payout.clone())
        );
        let other_key = ed25519_dalek::SigningKey::from_bytes(&[8; 32]);
        assert!(matches!(
            check_payout(&paid(&owed, &other_key), &bridge_key, &owed),
            Err(PayoutError::OtherBridge { .. })
        ));
        // An older payout of the same account (another sequence), or another amount: not owed.
        for other in [
            Withdrawal { sequence: 8, ..owed },
            Withdrawal { amount: 41, ..owed },
            Withdrawal {
                address: [4; 32],
                ..owed
            },
        ] {
            let error = check_payout(&paid(&other, &key), &bridge_key, &owed).unwrap_err();
            assert!(matches!(error, PayoutError::NotOwed { .. }), "{error}");
        }
        let mut forged = payout.clone();
        *forged.last_mut().unwrap() ^= 1;
        assert_eq!(
            check_payout(&forged, &bridge_key, &owed),
            Err(PayoutError::BadSignature)
        );
        assert_eq!(
            check_payout(&payout[1..], &bridge_key, &owed),
            Err(PayoutError::NotAPayout)
        );
        assert!(owed_by_withdrawal(&[1, 2, 3]).is_err());
    }

    /// A refund is owed the funding's amount, to its first input's owner, under the refund id.
    #[test]
    fn a_refund_is_owed_to_the_fundings_first_input() {
        let mut rng = rand::thread_rng();
        let mut wallet = specie_wallet::Wallet::new("usd", false, &mut rng).unwrap();
        let address = wallet.latest_address().unwrap();
        let output = specie_transaction::Output {
            witness_program_commitment: address.witness_program_commitment(),
            value: 100,
        };
        let payment = specie_wallet::PaymentString::new(
            specie_transaction::Txid([3; 32]),
            vec![specie_wallet::PaidOutput { index: 0, output }],
        );
        let id = payment.created_outputs()[0].uhs_id;
        wallet.import_payment(&payment, &[id]).unwrap();
        let bridge_key = bridge().verifying_key().to_bytes();
        let funding = wallet.build_bridge_funding(bridge_key, [2; 32], 60, &mut rng).unwrap();
        let owed = owed_by_refund(1, &funding).unwrap();
        assert_eq!(owed.amount, 60);
        assert_eq!(owed.address, address.witness_program_commitment());
        assert_eq!(
            (owed.account, owed.sequence),
            specie_exchange::refund_id(1, &funding.marker().unwrap().0)
        );
        let payout = paid(&owed, &bridge());
        let taken = check_payout(&payout, &bridge_key, &owed).unwrap();
        let other_asset = owed_by_refund(0, &funding).unwrap();
        assert!(check_payout(&payout, &bridge_key, &other_asset).is_err());
        assert_eq!(owed_by_refund(1, &taken), Err(PayoutError::NotAFunding));
    }
}
