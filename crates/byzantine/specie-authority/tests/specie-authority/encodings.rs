//! The authority's log records round-trip, and arbitrary bytes never panic its decoders.

use proptest::prelude::*;
use specie_authority::{Command, Credit, Funding};
use specie_fastpay::{AccountKey, Certificate, CoreAddress, Recipient, SignedOrder, TransferOrder, VoteKind};

fn order() -> impl Strategy<Value = SignedOrder> {
    (
        any::<[u8; 32]>(),
        any::<Option<[u8; 32]>>(),
        any::<[u8; 32]>(),
        any::<u64>(),
        any::<u64>(),
        proptest::collection::vec(any::<u8>(), 0..=64),
        any::<[u8; 32]>(),
    )
        .prop_map(|(sender, core, to, amount, sequence, memo, signature)| SignedOrder {
            order: TransferOrder {
                sender: AccountKey(sender),
                recipient: match core {
                    Some(address) => Recipient::Core(CoreAddress(address)),
                    None => Recipient::Account(AccountKey(to)),
                },
                amount,
                sequence,
                memo,
            },
            signature: [signature, signature].concat().try_into().unwrap(),
        })
}

fn credit() -> impl Strategy<Value = Credit> {
    (any::<[u8; 32]>(), any::<u64>(), any::<[u8; 32]>(), any::<u64>()).prop_map(|(r, amount, s, sequence)| Credit {
        recipient: AccountKey(r),
        amount,
        sender: AccountKey(s),
        sender_sequence: sequence,
    })
}

fn certificate() -> impl Strategy<Value = Certificate> {
    (
        order(),
        any::<[u8; 32]>(),
        any::<bool>(),
        any::<u32>(),
        proptest::collection::btree_set(any::<u16>(), 0..6),
    )
        .prop_map(|(order, committee_id, commit, round, signers)| Certificate {
            kind: if commit { VoteKind::Commit } else { VoteKind::Prepare },
            order,
            committee_id,
            round,
            signatures: signers.into_iter().map(|a| (a, [a as u8; 64])).collect(),
        })
}

fn signature() -> impl Strategy<Value = [u8; 64]> {
    any::<[u8; 32]>().prop_map(|s| [s, s].concat().try_into().unwrap())
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        // Signing commands with the epoch they were signed in, or none (a log from before epochs).
        (order(), any::<[u8; 32]>(), any::<Option<u64>>()).prop_map(|(order, s, epoch)| Command::Vote {
            order,
            signature: [s, s].concat().try_into().unwrap(),
            epoch,
        }),
        certificate().prop_map(|certificate| Command::Confirm { certificate }),
        (order(), any::<u32>(), signature(), any::<Option<u64>>()).prop_map(|(order, round, signature, epoch)| {
            Command::Prepare {
                order,
                round,
                signature,
                epoch,
            }
        }),
        (certificate(), signature(), any::<Option<u64>>()).prop_map(|(certificate, signature, epoch)| Command::Lock {
            certificate,
            signature,
            epoch
        }),
        (any::<[u8; 32]>(), any::<u64>(), any::<u32>()).prop_map(|(account, sequence, round)| Command::EnterRound {
            account: AccountKey(account),
            sequence,
            round
        }),
        (any::<[u8; 32]>(), any::<[u8; 32]>(), any::<u64>()).prop_map(|(id, account, amount)| Command::Fund {
            funding: Funding {
                id,
                account: AccountKey(account),
                amount
            }
        }),
        (any::<u32>(), any::<u64>(), proptest::collection::vec(credit(), 0..8)).prop_map(
            |(from, first_sequence, credits)| Command::Credit {
                from,
                first_sequence,
                credits
            }
        ),
        (any::<u32>(), any::<u64>()).prop_map(|(to, through)| Command::Acked { to, through }),
        any::<u64>().prop_map(|epoch| Command::HandOver { epoch }),
    ]
}

proptest! {
    #[test]
    fn commands_round_trip_and_no_prefix_or_extension_decodes(command in command(), extra in any::<u8>()) {
        let bytes = command.encode();
        prop_assert_eq!(Command::decode(&bytes).unwrap(), command);
        for cut in 0..bytes.len() {
            prop_assert!(Command::decode(&bytes[..cut]).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(extra);
        prop_assert!(Command::decode(&longer).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_command_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(command) = Command::decode(&bytes) {
            prop_assert_eq!(command.encode(), bytes);
        }
    }
}
