//! What a cluster's FastPay authorities hold, as the tests check it: their status figures, their
//! books, and an account's history at one authority; and how tests fund accounts.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use secp256k1::Keypair;
use specie_cluster::Topology;
use specie_committee::http_client::Request;
use specie_committee::{AuthorityReply, HttpCommittee};
use specie_fastpay::{AccountKey, AuthorityIndex, Certificate};
use specie_fastpay_primary::FastpayFunding;
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{witness_program_commitment, MintTransaction, NonceMode, Output, SpecieTransaction};

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

/// Mints `amount` to a fresh core key per account (confirmed in the core through the first
/// sentinel) and signs a funding of each output whole into its account: the mint, and the
/// fundings, not yet submitted.
pub fn mint_and_sign_fundings(
    dir: &str,
    topology: &Topology,
    committee_id: [u8; 32],
    accounts: &[AccountKey],
    amount: u64,
) -> (SpecieTransaction, Vec<FastpayFunding>) {
    let sentinel = format!("http://{}", topology.sentinels[0].http);
    let issuer_hex = std::fs::read_to_string(std::path::Path::new(dir).join("issuer.key")).unwrap();
    let issuer = Keypair::from_seckey_str_global(issuer_hex.trim()).unwrap();
    let core_keys: Vec<Keypair> = accounts
        .iter()
        .map(|_| Keypair::new_global(&mut rand::thread_rng()))
        .collect();
    let outputs = core_keys
        .iter()
        .map(|key| Output {
            witness_program_commitment: witness_program_commitment(&xonly_bytes(key)),
            value: amount,
        })
        .collect();
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        rand::random(),
        outputs,
        &issuer,
        NonceMode::Randomized,
    ));
    super::confirm_in_core(&sentinel, std::slice::from_ref(&mint));
    let fundings = accounts
        .iter()
        .zip(mint.created_outputs())
        .zip(&core_keys)
        .map(|((account, output), key)| {
            FastpayFunding::new_signed(
                committee_id,
                *account,
                amount,
                vec![output.to_input()],
                vec![],
                std::slice::from_ref(key),
                NonceMode::Randomized,
            )
            .unwrap()
        })
        .collect();
    (mint, fundings)
}
