//! A FastPay committee's books as its core's supply report reads them (`specie audit supply
//! --fastpay-shard`, `specie demo --byzantine`): one authority's shards summed, since every
//! honest authority holds the same books.

use specie_api::http_api::SupplyBody;
use specie_api::supply::ModeBooks;
use specie_committee::http_api::{ShardBooksBody, BOOKS_PATH};
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

/// The committee `committee_id` (hex) holds its accounts' balances, the credits moving between
/// its shards, and what it certified to the core that the core has not redeemed yet (what `cut`
/// says came back from it).
pub fn mode_books(name: String, committee_id: String, totals: &CommitteeTotals, cut: &SupplyBody) -> ModeBooks {
    let returned: Option<u128> = cut
        .modes
        .iter()
        .find(|flow| flow.role == COMMITTEE_ROLE && flow.key == committee_id)
        .map_or(Some(0), |flow| flow.returned.parse().ok());
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
        holds: parts.iter().map(|(_, value)| value).sum(),
        parts,
        notes: vec![],
        balanced: totals.balanced() && balances.is_some() && redeeming.is_some(),
    }
}

/// One authority shard's books (`GET /v1/fastpay/books`) from `urls`, its replicas
/// comma-separated.
pub fn read_shard_books(urls: &str) -> Result<ShardBooksBody, CallError> {
    Replicas::new(urls, LeaderSearch::patient()).call_json("GET", BOOKS_PATH, Body::Empty)
}
