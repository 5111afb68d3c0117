//! Transfer orders: what an account owner signs to move value out of a Byzantine-mode account.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};
use specie_codec::{put_u32, put_u64, DecodeError, Reader};
use thiserror::Error;

use crate::{read_version, ENCODING_VERSION, PUBLIC_KEY_BYTES, SIGNATURE_BYTES};

/// Longest memo an order may carry (FastPay's "optional user-provided data").
pub const MEMO_BYTES_MAX: usize = 64;

/// The longest canonical signed-order encoding: version, sender, recipient kind and key, amount,
/// sequence, memo length, the longest memo, the owner's signature.
pub const SIGNED_ORDER_BYTES_MAX: usize = 1 + PUBLIC_KEY_BYTES + 1 + 32 + 8 + 8 + 4 + MEMO_BYTES_MAX + SIGNATURE_BYTES;

/// Signed by owners: this prefix before the order's encoding keeps an order signature from ever
/// being valid as any other kind of specie signature.
const ORDER_DOMAIN: &[u8] = b"specie/fastpay/transfer-order/v1";

/// A Byzantine-mode account: its owner's Ed25519 public key, which is also its address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccountKey(pub [u8; PUBLIC_KEY_BYTES]);

/// An online-core address: the witness program commitment of the output a redeem creates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CoreAddress(pub [u8; 32]);

/// Where a transfer order sends its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Recipient {
    /// Another Byzantine-mode account.
    Account(AccountKey),
    /// Back to the online core (a redeem, FastPay's "Primary transfer order").
    Core(CoreAddress),
}

const RECIPIENT_ACCOUNT: u8 = 0;
const RECIPIENT_CORE: u8 = 1;

/// A transfer order: "move `amount` from `sender` to `recipient`, as my `sequence`-th transfer".
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TransferOrder {
    pub sender: AccountKey,
    pub recipient: Recipient,
    pub amount: u64,
    pub sequence: u64,
    pub memo: Vec<u8>,
}

/// Why an order is refused before any account is looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Error)]
pub enum OrderError {
    #[error("the amount must be positive")]
    ZeroAmount,
    #[error("memo of {bytes} bytes, more than {MEMO_BYTES_MAX}")]
    MemoTooLong { bytes: usize },
    #[error("the sender is not a valid Ed25519 public key")]
    BadSenderKey,
    #[error("the sender's key is weak (small order)")]
    WeakSenderKey,
    #[error("the owner's signature does not verify")]
    BadSignature,
}

impl TransferOrder {
    /// The canonical encoding: version, sender, recipient kind and bytes, amount, sequence,
    /// `u32` memo length and memo.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(ENCODING_VERSION);
        out.extend_from_slice(&self.sender.0);
        match self.recipient {
            Recipient::Account(account) => {
                out.push(RECIPIENT_ACCOUNT);
                out.extend_from_slice(&account.0);
            }
            Recipient::Core(address) => {
                out.push(RECIPIENT_CORE);
                out.extend_from_slice(&address.0);
            }
        }
        put_u64(out, self.amount);
        put_u64(out, self.sequence);
        put_u32(out, self.memo.len() as u32);
        out.extend_from_slice(&self.memo);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<TransferOrder, DecodeError> {
        read_version(reader, "transfer order")?;
        let sender = AccountKey(reader.read_array("order sender")?);
        let recipient = match reader.read_u8("order recipient kind")? {
            RECIPIENT_ACCOUNT => Recipient::Account(AccountKey(reader.read_array("order recipient")?)),
            RECIPIENT_CORE => Recipient::Core(CoreAddress(reader.read_array("order recipient")?)),
            kind => {
                return Err(DecodeError::UnknownKind {
                    what: "order recipient kind",
                    kind,
                })
            }
        };
        let amount = reader.read_u64("order amount")?;
        let sequence = reader.read_u64("order sequence")?;
        let memo_bytes = reader.read_u32_count("order memo", MEMO_BYTES_MAX as u64, 1)?;
        let memo = reader.read_bytes("order memo", memo_bytes)?.to_vec();
        Ok(TransferOrder {
            sender,
            recipient,
            amount,
            sequence,
            memo,
        })
    }

    /// What the owner signs: the domain, then the encoding.
    pub fn signing_bytes(&self) -> Vec<u8> {
        let mut bytes = ORDER_DOMAIN.to_vec();
        self.encode_to(&mut bytes);
        bytes
    }

    /// The order's identity in votes and certificates: SHA-256 of its signing bytes. Two
    /// orders are the same order exactly when their digests are equal.
    pub fn digest(&self) -> [u8; 32] {
        Sha256::digest(self.signing_bytes()).into()
    }

    /// Field checks that need no account state (FastPay's "amount is positive").
    pub fn check_fields(&self) -> Result<(), OrderError> {
        if self.amount == 0 {
            return Err(OrderError::ZeroAmount);
        }
        if self.memo.len() > MEMO_BYTES_MAX {
            return Err(OrderError::MemoTooLong { bytes: self.memo.len() });
        }
        Ok(())
    }

    /// The sender's key, parsed and refused if weak.
    pub fn sender_key(&self) -> Result<VerifyingKey, OrderError> {
        let key = VerifyingKey::from_bytes(&self.sender.0).map_err(|_| OrderError::BadSenderKey)?;
        if key.is_weak() {
            return Err(OrderError::WeakSenderKey);
        }
        Ok(key)
    }

    pub fn sign(self, owner: &SigningKey) -> SignedOrder {
        debug_assert_eq!(owner.verifying_key().to_bytes(), self.sender.0, "signed by its sender");
        let signature = owner.sign(&self.signing_bytes()).to_bytes();
        SignedOrder { order: self, signature }
    }
}

/// A transfer order with its owner's signature.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SignedOrder {
    pub order: TransferOrder,
    pub signature: [u8; SIGNATURE_BYTES],
}

impl SignedOrder {
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        self.order.encode_to(out);
        out.extend_from_slice(&self.signature);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<SignedOrder, DecodeError> {
        let order = TransferOrder::decode_from(reader)?;
        let signature = reader.read_array("order signature")?;
        Ok(SignedOrder { order, signature })
    }

    /// Field checks, then the owner's signature, verified strictly (one order at a time: an
    /// authority signs only what this accepts).
    pub fn check(&self) -> Result<(), OrderError> {
        self.order.check_fields()?;
        let key = self.order.sender_key()?;
        key.verify_strict(&self.order.signing_bytes(), &Signature::from_bytes(&self.signature))
            .map_err(|_| OrderError::BadSignature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_keys::account_key;
    use proptest::prelude::*;

    fn arbitrary_order() -> impl Strategy<Value = TransferOrder> {
        (
            any::<[u8; 32]>(),
            any::<bool>(),
            any::<[u8; 32]>(),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..=MEMO_BYTES_MAX),
        )
            .prop_map(|(sender, to_core, to, amount, sequence, memo)| TransferOrder {
                sender: AccountKey(sender),
                recipient: if to_core {
                    Recipient::Core(CoreAddress(to))
                } else {
                    Recipient::Account(AccountKey(to))
                },
                amount,
                sequence,
                memo,
            })
    }

    proptest! {
        #[test]
        fn orders_round_trip_and_every_strict_prefix_is_refused(order in arbitrary_order(), signature in any::<[u8; 32]>()) {
            let signed = SignedOrder { order, signature: [signature, signature].concat().try_into().unwrap() };
            let mut bytes = Vec::new();
            signed.encode_to(&mut bytes);
            let mut reader = Reader::new(&bytes);
            prop_assert_eq!(SignedOrder::decode_from(&mut reader).unwrap(), signed);
            prop_assert!(reader.finish().is_ok());
            for cut in 0..bytes.len() {
                let mut reader = Reader::new(&bytes[..cut]);
                prop_assert!(SignedOrder::decode_from(&mut reader).is_err());
            }
        }
    }

    #[test]
    fn an_order_verifies_only_with_its_owners_signature_over_exactly_its_fields() {
        let owner = account_key(1);
        let order = TransferOrder {
            sender: AccountKey(owner.verifying_key().to_bytes()),
            recipient: Recipient::Account(AccountKey(account_key(2).verifying_key().to_bytes())),
            amount: 5,
            sequence: 0,
            memo: b"rent".to_vec(),
        };
        let signed = order.clone().sign(&owner);
        assert_eq!(signed.check(), Ok(()));

        let mut changed = signed.clone();
        changed.order.amount = 6;
        assert_eq!(changed.check(), Err(OrderError::BadSignature));
        let by_other = order.clone().sign_unchecked(&account_key(3));
        assert_eq!(by_other.check(), Err(OrderError::BadSignature));
        let zero = TransferOrder { amount: 0, ..order }.sign(&owner);
        assert_eq!(zero.check(), Err(OrderError::ZeroAmount));
    }

    impl TransferOrder {
        fn sign_unchecked(self, key: &SigningKey) -> SignedOrder {
            let signature = key.sign(&self.signing_bytes()).to_bytes();
            SignedOrder { order: self, signature }
        }
    }
}
