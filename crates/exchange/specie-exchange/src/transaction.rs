//! What a trader signs: one operation of one account, with a sequence number, under the
//! exchange's identity (so a transaction signed for one exchange is worthless on another). Every
//! parameter travels in the transaction itself: nothing in a block reads what another transaction
//! of the same block wrote, which is what lets a block's transactions commute (SPEEDEX §3).

use ed25519_dalek::{Signer, SigningKey};
use specie_clearing::LimitPrice;
use specie_codec::{put_u64, DecodeError, Reader};

/// An account's number, chosen by whoever creates it.
pub type AccountId = u64;
/// An asset's index in the exchange's asset list (`usd` = 0, …).
pub type AssetId = u16;

/// Signed by an account's key: this transaction, on this exchange.
const TRANSACTION_DOMAIN: &[u8] = b"specie/exchange/transaction/v1";
/// The first byte of every transaction's encoding.
pub const TRANSACTION_VERSION: u8 = 1;
/// Every signed transaction's largest encoding: version, account, sequence, tag, the largest
/// operation (a withdrawal: asset, amount, core address), signature.
pub const SIGNED_TRANSACTION_BYTES_MAX: usize = 1 + 8 + 8 + 1 + 42 + 64;

const TAG_CREATE_ACCOUNT: u8 = 1;
const TAG_SELL_OFFER: u8 = 2;
const TAG_CANCEL_OFFER: u8 = 3;
const TAG_PAYMENT: u8 = 4;
const TAG_WITHDRAW: u8 = 5;

/// One operation. Offers are sell offers only: limit buy offers make clearing PPAD-hard
/// (SPEEDEX Appendix H).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A new account `id` with `key`, usable from the next block.
    CreateAccount { id: AccountId, key: [u8; 32] },
    /// Sell `amount` of `sell` for `buy`, at no less than `limit` units of `buy` per unit; the
    /// amount is locked until the offer trades or is cancelled. The offer is known by
    /// (pair, limit, account, this transaction's sequence).
    SellOffer {
        sell: AssetId,
        buy: AssetId,
        amount: u64,
        limit: LimitPrice,
    },
    /// Cancel this account's resting offer made by the transaction of `sequence`; what is left of
    /// it is unlocked.
    CancelOffer {
        sell: AssetId,
        buy: AssetId,
        limit: LimitPrice,
        sequence: u64,
    },
    /// Pay `amount` of `asset` to the existing account `to`.
    Payment { to: AccountId, asset: AssetId, amount: u64 },
    /// Take `amount` of `asset` out of the exchange, to `address` on the asset's online core (a
    /// witness program commitment, as a core output names its owner: what the payout's one
    /// output pays): the block's execution records a payout the exchange signs for that core.
    Withdraw {
        asset: AssetId,
        amount: u64,
        address: [u8; 32],
    },
}

/// A transaction before it is signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transaction {
    pub account: AccountId,
    /// Above the account's last used sequence number, by at most the exchange's window; each
    /// number is used once (SPEEDEX §K.4).
    pub sequence: u64,
    pub operation: Operation,
}

/// A transaction and its account key's Ed25519 signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SignedTransaction {
    pub transaction: Transaction,
    pub signature: [u8; 64],
}

impl Transaction {
    /// Version, account, sequence, tag, then the operation's fields (integers little-endian).
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(TRANSACTION_VERSION);
        put_u64(out, self.account);
        put_u64(out, self.sequence);
        match self.operation {
            Operation::CreateAccount { id, key } => {
                out.push(TAG_CREATE_ACCOUNT);
                put_u64(out, id);
                out.extend_from_slice(&key);
            }
            Operation::SellOffer {
                sell,
                buy,
                amount,
                limit,
            } => {
                out.push(TAG_SELL_OFFER);
                put_pair(out, sell, buy);
                put_u64(out, amount);
                put_u64(out, limit.0);
            }
            Operation::CancelOffer {
                sell,
                buy,
                limit,
                sequence,
            } => {
                out.push(TAG_CANCEL_OFFER);
                put_pair(out, sell, buy);
                put_u64(out, limit.0);
                put_u64(out, sequence);
            }
            Operation::Payment { to, asset, amount } => {
                out.push(TAG_PAYMENT);
                put_u64(out, to);
                out.extend_from_slice(&asset.to_le_bytes());
                put_u64(out, amount);
            }
            Operation::Withdraw { asset, amount, address } => {
                out.push(TAG_WITHDRAW);
                out.extend_from_slice(&asset.to_le_bytes());
                put_u64(out, amount);
                out.extend_from_slice(&address);
            }
        }
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<Transaction, DecodeError> {
        reader.read_version("exchange transaction", TRANSACTION_VERSION)?;
        let account = reader.read_u64("account")?;
        let sequence = reader.read_u64("sequence")?;
        let operation = match reader.read_u8("operation")? {
            TAG_CREATE_ACCOUNT => Operation::CreateAccount {
                id: reader.read_u64("new account")?,
                key: reader.read_array("new account key")?,
            },
            TAG_SELL_OFFER => {
                let (sell, buy) = read_pair(reader)?;
                Operation::SellOffer {
                    sell,
                    buy,
                    amount: reader.read_u64("amount")?,
                    limit: LimitPrice(reader.read_u64("limit price")?),
                }
            }
            TAG_CANCEL_OFFER => {
                let (sell, buy) = read_pair(reader)?;
                Operation::CancelOffer {
                    sell,
                    buy,
                    limit: LimitPrice(reader.read_u64("limit price")?),
                    sequence: reader.read_u64("offer sequence")?,
                }
            }
            TAG_PAYMENT => Operation::Payment {
                to: reader.read_u64("payee")?,
                asset: u16::from_le_bytes(reader.read_array("asset")?),
                amount: reader.read_u64("amount")?,
            },
            TAG_WITHDRAW => Operation::Withdraw {
                asset: u16::from_le_bytes(reader.read_array("asset")?),
                amount: reader.read_u64("amount")?,
                address: reader.read_array("core address")?,
            },
            tag => {
                return Err(DecodeError::Invalid {
                    what: "exchange transaction",
                    reason: format!("unknown operation {tag:#04x}"),
                })
            }
        };
        Ok(Transaction {
            account,
            sequence,
            operation,
        })
    }

    /// What the account's key signs: the domain, the exchange's identity, the encoding.
    pub fn signing_bytes(&self, exchange: &[u8; 32]) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(TRANSACTION_DOMAIN.len() + 32 + SIGNED_TRANSACTION_BYTES_MAX);
        bytes.extend_from_slice(TRANSACTION_DOMAIN);
        bytes.extend_from_slice(exchange);
        self.encode_to(&mut bytes);
        bytes
    }

    pub fn sign(self, exchange: &[u8; 32], key: &SigningKey) -> SignedTransaction {
        SignedTransaction {
            signature: key.sign(&self.signing_bytes(exchange)).to_bytes(),
            transaction: self,
        }
    }
}

impl SignedTransaction {
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        self.transaction.encode_to(out);
        out.extend_from_slice(&self.signature);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<SignedTransaction, DecodeError> {
        Ok(SignedTransaction {
            transaction: Transaction::decode_from(reader)?,
            signature: reader.read_array("signature")?,
        })
    }
}

fn put_pair(out: &mut Vec<u8>, sell: AssetId, buy: AssetId) {
    out.extend_from_slice(&sell.to_le_bytes());
    out.extend_from_slice(&buy.to_le_bytes());
}

fn read_pair(reader: &mut Reader<'_>) -> Result<(AssetId, AssetId), DecodeError> {
    Ok((
        u16::from_le_bytes(reader.read_array("sold asset")?),
        u16::from_le_bytes(reader.read_array("bought asset")?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn operation() -> impl Strategy<Value = Operation> {
        prop_oneof![
            (any::<u64>(), any::<[u8; 32]>()).prop_map(|(id, key)| Operation::CreateAccount { id, key }),
            (any::<u16>(), any::<u16>(), any::<u64>(), any::<u64>()).prop_map(|(sell, buy, amount, limit)| {
                Operation::SellOffer {
                    sell,
                    buy,
                    amount,
                    limit: LimitPrice(limit),
                }
            }),
            (any::<u16>(), any::<u16>(), any::<u64>(), any::<u64>()).prop_map(|(sell, buy, limit, sequence)| {
                Operation::CancelOffer {
                    sell,
                    buy,
                    limit: LimitPrice(limit),
                    sequence,
                }
            }),
            (any::<u64>(), any::<u16>(), any::<u64>()).prop_map(|(to, asset, amount)| Operation::Payment {
                to,
                asset,
                amount
            }),
            (any::<u16>(), any::<u64>(), any::<[u8; 32]>()).prop_map(|(asset, amount, address)| Operation::Withdraw {
                asset,
                amount,
                address
            }),
        ]
    }

    proptest! {
        /// One encoding per transaction, within the bound, decoded back to itself.
        #[test]
        fn every_transaction_round_trips(account: u64, sequence: u64, operation in operation(), signature: [u8; 32]) {
            let signed = SignedTransaction {
                transaction: Transaction { account, sequence, operation },
                signature: [signature, signature].concat().try_into().unwrap(),
            };
            let mut bytes = Vec::new();
            signed.encode_to(&mut bytes);
            prop_assert!(bytes.len() <= SIGNED_TRANSACTION_BYTES_MAX);
            let decoded = specie_codec::decode_bounded("t", &bytes, SIGNED_TRANSACTION_BYTES_MAX, SignedTransaction::decode_from);
            prop_assert_eq!(decoded, Ok(signed));
        }

        /// Arbitrary bytes never panic the decoder, and what decodes re-encodes to them.
        #[test]
        fn arbitrary_bytes_decode_canonically_or_not_at_all(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
            if let Ok(signed) = specie_codec::decode_bounded("t", &bytes, SIGNED_TRANSACTION_BYTES_MAX, SignedTransaction::decode_from) {
                let mut again = Vec::new();
                signed.encode_to(&mut again);
                prop_assert_eq!(again, bytes);
            }
        }
    }
}
