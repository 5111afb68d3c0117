//! What a cluster's FastPay authorities hold, as the tests check it: their status figures, their
//! books, and an account's history at one authority.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use specie_cluster::Topology;
use specie_committee::http_client::Request;
use specie_committee::{AuthorityReply, HttpCommittee};
use specie_fastpay::{AccountKey, AuthorityIndex, Certificate};

/// Every authority shard's status figures, by group name, as its leader reports them (a shard
/// that does not answer is left out).
pub fn authority_figures(topology: &Topology) -> BTreeMap<String, serde_json::Value> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let statuses = runtime
        .block_on(specie_cluster::operator::replica_statuses(
            topology,
            None,
            Duration::from_secs(2),
        ))
        .unwrap();
    statuses
        .into_iter()
        .filter(|s| s.group.starts_with("authority-") && s.is_leader())
        .filter_map(|s| Some((s.group, s.status.ok()?["authority"].clone())))
        .collect()
}

/// Once `groups` shard groups lead and every credit between shards is acknowledged, the books of
/// each of their authorities balance: its balances sum to what was funded (nothing was redeemed),
/// and it took every funding, `funded` in all.
pub fn check_books(topology: &Topology, groups: usize, funded: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let figures = authority_figures(topology);
        let quiet = figures.values().all(|f| f["credits_unacked"] == 0);
        if figures.len() == groups && quiet {
            let mut books: BTreeMap<u64, (i128, i128)> = BTreeMap::new();
            for figure in figures.values() {
                let entry = books.entry(figure["authority"].as_u64().unwrap()).or_default();
                entry.0 += i128::from(figure["balances"].as_i64().unwrap());
                entry.1 += i128::from(figure["funded"].as_i64().unwrap());
            }
            for (authority, (balances, took)) in books {
                assert_eq!(took, i128::from(funded), "authority {authority}");
                assert_eq!(balances, took, "authority {authority}'s books");
            }
            return;
        }
        assert!(Instant::now() < deadline, "credits still moving: {figures:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every certificate `account` has confirmed at `authority`, by sequence number.
pub fn history(client: &HttpCommittee, authority: AuthorityIndex, account: AccountKey) -> Vec<Certificate> {
    let mut history: Vec<Certificate> = vec![];
    loop {
        let request = Request::Account {
            account,
            from_sequence: history.len() as u64,
        };
        match client.ask(authority, request) {
            AuthorityReply::Account(state) if !state.confirmed.is_empty() => history.extend(state.confirmed),
            AuthorityReply::Account(_) => return history,
            other => panic!("authority {authority}, account {account:?}: {other:?}"),
        }
    }
}
