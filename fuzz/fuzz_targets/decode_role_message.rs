//! Feeds arbitrary bytes to every decoder a cluster process runs on a peer's input (besides the
//! frame codec, which `decode_frame` covers): role requests and answers
//! (`specie_cluster::protocol`), the shard messages they carry (`specie_shard`), and the
//! certificate names identities are read from (`specie_cluster::identity`).
//!
//! The first byte selects the decoder (taken modulo 7, so every input selects one); the rest is
//! the input:
//!
//! | selector | decoder | checks |
//! |---:|---|---|
//! | 0 | `RoleRequest::decode` | re-encodes to the input; a `Submit`'s transactions decode alone too; `Submission::verify` does not panic and refuses with a fixed key |
//! | 1 | `RoleResponse::decode` | re-encodes to the input |
//! | 2 | `ShardRequest::decode_exact_with` | default and tight limits: re-encodes to the input; a tight decode is within its limits and equals the default decode; a default decode within tight limits decodes under them too |
//! | 3 | `ShardResponse::decode_exact_with` | as for 2 |
//! | 4 | `Identity::parse` (input as UTF-8, if it is) | prints back (`to_string`) to exactly the input and parses again to the same identity |
//! | 5 | a Raft RPC request (`specie_raft::fuzzing`) | re-encodes to the input |
//! | 6 | a Raft RPC answer, as the answer to each kind of request | re-encodes to the input |
//!
//! Nothing may panic, and no decoder may allocate beyond a small multiple of the input.

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_cluster::identity::Identity;
use specie_cluster::protocol::{AttestationError, RoleRequest, RoleResponse, Submission};
use specie_shard::{ShardRequest, ShardResponse, ShardWireLimits};
use specie_codec::{Decode, Encode};
use specie_transaction::CompactTransaction;

const SELECT_ROLE_REQUEST: u8 = 0;
const SELECT_ROLE_RESPONSE: u8 = 1;
const SELECT_SHARD_REQUEST: u8 = 2;
const SELECT_SHARD_RESPONSE: u8 = 3;
const SELECT_IDENTITY: u8 = 4;
const SELECT_RAFT_REQUEST: u8 = 5;
const SELECT_RAFT_RESPONSE: u8 = 6;
const SELECTORS: u8 = 7;

/// The fixed attestation key a coordinator trusts here: the x coordinate of secp256k1's generator
/// (the x-only public key of secret key 1), a valid point, so that an input naming it reaches the
/// signature check. Nobody signs with it in the corpus, so every submission must be refused.
const TRUSTED_SENTINEL: [u8; 32] = [
    0x79, 0xbe, 0x66, 0x7e, 0xf9, 0xdc, 0xbb, 0xac, 0x55, 0xa0, 0x62, 0x95, 0xce, 0x87, 0x0b, 0x07, 0x02, 0x9b, 0xfc,
    0xdb, 0x2d, 0xce, 0x28, 0xd9, 0x59, 0xf2, 0x81, 0x5b, 0x16, 0xf8, 0x17, 0x98,
];

/// Small limits, so that the fuzzer reaches every limit check: at most two transactions per dtxn
/// and one id per side, and the degenerate zero limits.
const TIGHT: [ShardWireLimits; 2] = [
    ShardWireLimits {
        dtxn_transactions_max: 2,
        tx_ids_max: 1,
    },
    ShardWireLimits {
        dtxn_transactions_max: 0,
        tx_ids_max: 0,
    },
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    match selector % SELECTORS {
        SELECT_ROLE_REQUEST => role_request(bytes),
        SELECT_ROLE_RESPONSE => role_response(bytes),
        SELECT_SHARD_REQUEST => shard_message::<ShardRequest>(bytes, request_within),
        SELECT_SHARD_RESPONSE => shard_message::<ShardResponse>(bytes, response_within),
        SELECT_IDENTITY => identity(bytes),
        SELECT_RAFT_REQUEST => {
            if let Some(again) = specie_raft::fuzzing::reencode_request(bytes) {
                assert_eq!(again, bytes, "Raft request re-encoding differs from its input");
            }
        }
        SELECT_RAFT_RESPONSE => {
            for again in specie_raft::fuzzing::reencode_responses(bytes) {
                assert_eq!(again, bytes, "Raft response re-encoding differs from its input");
            }
        }
        _ => unreachable!(),
    }
});

fn role_request(bytes: &[u8]) {
    let Ok(request) = RoleRequest::decode(bytes) else {
        return;
    };
    assert_eq!(
        request.encode(),
        bytes,
        "RoleRequest re-encoding differs from its input"
    );
    let _ = request.kind();
    if let RoleRequest::Submit(submission) = &request {
        submit(submission);
    }
}

fn submit(submission: &Submission) {
    // Each transaction of a submit is one a sentinel could have sent alone.
    for tx in &submission.txs {
        assert_eq!(
            CompactTransaction::decode_exact(&tx.encode()).as_ref(),
            Ok(tx),
            "a compact transaction accepted inside a submit is refused alone"
        );
    }
    // A coordinator that trusts only the fixed key: whatever the input, it is refused, and by
    // the key check unless the input names the fixed key.
    let verdict = submission.verify([&TRUSTED_SENTINEL].into_iter());
    match verdict {
        Err(AttestationError::UntrustedKey { .. }) => assert_ne!(submission.sentinel, TRUSTED_SENTINEL),
        Err(AttestationError::BadSignature) => assert_eq!(submission.sentinel, TRUSTED_SENTINEL),
        Ok(()) => panic!("a submission verified under the fixed key, which nobody signs with"),
    }
    // A coordinator that trusts whatever key the input names: parses the key and checks the
    // signature over the transactions. Must not panic; the result is whatever it is (a valid
    // signature cannot be forged, but a seed may carry one).
    let _ = submission.verify([&submission.sentinel].into_iter());
}

fn role_response(bytes: &[u8]) {
    let Ok(response) = RoleResponse::decode(bytes) else {
        return;
    };
    assert_eq!(
        response.encode(),
        bytes,
        "RoleResponse re-encoding differs from its input"
    );
}

fn shard_message<T>(bytes: &[u8], within: fn(&T, &ShardWireLimits) -> bool)
where
    T: Decode<Limits = ShardWireLimits> + Encode + PartialEq + std::fmt::Debug,
{
    let default = T::decode_exact_with(bytes, &ShardWireLimits::default());
    if let Ok(value) = &default {
        assert_eq!(value.encode(), bytes, "{} re-encoding differs from its input", T::WHAT);
    }
    for limits in &TIGHT {
        match T::decode_exact_with(bytes, limits) {
            Ok(value) => {
                assert_eq!(value.encode(), bytes, "{} re-encoding differs from its input", T::WHAT);
                assert!(
                    within(&value, limits),
                    "{} decoded beyond {limits:?}: {value:?}",
                    T::WHAT
                );
                assert_eq!(
                    default.as_ref(),
                    Ok(&value),
                    "{} decodes under {limits:?} but not under the default limits",
                    T::WHAT
                );
            }
            Err(error) => {
                if let Ok(value) = &default {
                    assert!(
                        !within(value, limits),
                        "{} within {limits:?} refused under them: {error}: {value:?}",
                        T::WHAT
                    );
                }
            }
        }
    }
}

fn request_within(request: &ShardRequest, limits: &ShardWireLimits) -> bool {
    match request {
        ShardRequest::Prepare { txs, .. } => {
            txs.len() as u64 <= limits.dtxn_transactions_max
                && txs.iter().all(|tx| {
                    tx.spent.len() as u64 <= limits.tx_ids_max && tx.created.len() as u64 <= limits.tx_ids_max
                })
        }
        ShardRequest::Commit { complete, .. } => complete.len() as u64 <= limits.dtxn_transactions_max,
        ShardRequest::Discard { .. } => true,
    }
}

fn response_within(response: &ShardResponse, limits: &ShardWireLimits) -> bool {
    match response {
        ShardResponse::Prepared { votes, .. } => votes.len() as u64 <= limits.dtxn_transactions_max,
        ShardResponse::Committed { .. }
        | ShardResponse::Discarded { .. }
        | ShardResponse::Stale { .. }
        | ShardResponse::Refused { .. } => true,
    }
}

fn identity(bytes: &[u8]) {
    let Ok(name) = std::str::from_utf8(bytes) else {
        return;
    };
    let Some(identity) = Identity::parse(name) else {
        return;
    };
    let printed = identity.to_string();
    assert_eq!(
        printed, name,
        "Identity does not print back to the name it was parsed from"
    );
    assert_eq!(Identity::parse(&printed), Some(identity));
}
