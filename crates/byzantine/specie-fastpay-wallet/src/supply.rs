//! A FastPay committee's books as its core's supply report reads them (`specie audit supply
//! --fastpay-shard`, `specie demo --byzantine`): one authority's shards summed, since every
//! honest authority holds the same books.

use specie_api::http_api::SupplyBody;
use specie_api::supply::ModeBooks;
use specie_committee::http_api::{EpochsBody, ShardBooksBody, BOOKS_PATH, EPOCHS_PATH};
use specie_fastpay::{CommitteeRecord, CHAIN_RECORDS_MAX};
use specie_fastpay_primary::COMMITTEE_ROLE;
use specie_service::client::{Body, CallError, LeaderSearch, Replicas};

/// One authority's books over all its shards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitteeTotals {
    /// Its accounts' balances.
    pub balances: i128,
    /// Value credited between its shards and not yet applied (or acknowledged) by the receiver.
    pub moving: u128,
    /// Value funded into it from the core.
    pub funded: u128,
    /// Value it certified out to the core.
    pub redeemed: u128,
}

impl CommitteeTotals {
    /// The sum of one authority's shards' books; `None` if a figure is not a number.
    pub fn of_shards(shards: &[ShardBooksBody]) -> Option<CommitteeTotals> {
        let mut totals = CommitteeTotals::default();
        for shard in shards {
            totals.balances += shard.balances.parse::<i128>().ok()?;
            totals.moving += shard.credits_unacked.parse::<u128>().ok()?;
            totals.funded += shard.funded.parse::<u128>().ok()?;
            totals.redeemed += shard.redeemed.parse::<u128>().ok()?;
        }
        Some(totals)
    }

    /// Whether they balance: what is held or moving is what came in minus what left.
    pub fn balanced(&self) -> bool {
        self.balances + self.moving as i128 == self.funded as i128 - self.redeemed as i128
    }
}

/// The committee `committee_id` (hex, its first epoch's: what fundings name) holds its accounts'
/// balances, the credits moving between its shards, and what it certified to the core that the
/// core has not redeemed yet (what `cut` says came back from it, under its id or, for
/// certificates of later epochs, under `later_ids`, those epochs' committee ids).
pub fn mode_books(
    name: String,
    committee_id: String,
    later_ids: Vec<String>,
    totals: &CommitteeTotals,
    cut: &SupplyBody,
) -> ModeBooks {
    let ours = |key: &String| *key == committee_id || later_ids.contains(key);
    let returned: Option<u128> = (cut.modes.iter())
        .filter(|flow| flow.role == COMMITTEE_ROLE && ours(&flow.key))
        .try_fold(0u128, |sum, flow| sum.checked_add(flow.returned.parse().ok()?));
    let balances = u128::try_from(totals.balances).ok();
    let redeeming = returned.and_then(|returned| totals.redeemed.checked_sub(returned));
    let parts = vec![
        ("account balances".to_string(), balances.unwrap_or(0)),
        ("credits between shards".to_string(), totals.moving),
        (
            "certified to the core, not yet redeemed there".to_string(),
            redeeming.unwrap_or(0),
        ),
    ];
    ModeBooks {
        name,
        role: COMMITTEE_ROLE.to_string(),
        key: committee_id,
        also_keys: later_ids,
        holds: parts.iter().map(|(_, value)| value).sum(),
        parts,
        notes: vec![],
        balanced: totals.balanced() && balances.is_some() && redeeming.is_some(),
    }
}

/// The committee ids of the epochs after the first, from one authority shard (`GET
/// /v1/fastpay/epochs`, `urls` its replicas comma-separated): each record must follow the one
/// before by id from `first_id` (hex), or the answer is refused. A record's signatures are not
/// checked here (the reader knows the first committee by id only): an id only merges into the
/// committee's row flows the core's ledger holds, which its sentinels accepted against the
/// committee's own epochs.
pub fn later_committee_ids(urls: &str, first_id: &str) -> Result<Vec<String>, CallError> {
    let replicas = Replicas::new(urls, LeaderSearch::patient());
    let mut ids: Vec<String> = vec![];
    let mut after = 0;
    loop {
        let body: EpochsBody = replicas.call_json("GET", &format!("{EPOCHS_PATH}?after={after}"), Body::Empty)?;
        if body.records.is_empty() || ids.len() > CHAIN_RECORDS_MAX {
            return Ok(ids);
        }
        for text in &body.records {
            let record = CommitteeRecord::from_hex(text).map_err(|error| bad_records(urls, error.to_string()))?;
            let previous = ids.last().map_or(first_id, String::as_str);
            if hex::encode(record.previous_id) != previous || record.next.epoch() <= after {
                return Err(bad_records(urls, "a record does not follow the one before".into()));
            }
            after = record.next.epoch();
            ids.push(hex::encode(record.next.id()));
        }
    }
}

fn bad_records(urls: &str, reason: String) -> CallError {
    CallError::BadAnswer {
        url: format!("{urls}{EPOCHS_PATH}"),
        reason,
    }
}

/// One authority shard's books (`GET /v1/fastpay/books`) from `urls`, its replicas
/// comma-separated.
pub fn read_shard_books(urls: &str) -> Result<ShardBooksBody, CallError> {
    Replicas::new(urls, LeaderSearch::patient()).call_json("GET", BOOKS_PATH, Body::Empty)
}
