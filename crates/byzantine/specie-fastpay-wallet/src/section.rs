//! The wallet file's Byzantine-mode section (`fastpay`, format version 2): hex for every key,
//! order, certificate and transaction, in their canonical encodings (`docs/byzantine-format.md`).
//!
//! The book is the wallet's Byzantine-mode part ([`FastpayPart`], installed with
//! [`crate::install`]), read from the section when the file loads and checked
//! ([`FastpayBook::from_section`]) as the core checks the rest of the file: the committee's keys
//! and id, each account's key against its secret, every pending
//! order signed by its account's owner for its next sequence number, every certificate final
//! for the committee and the account's own transfers 0, 1, … in order, every funding a funding
//! of this committee into its account.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use specie_codec::{Decode, Encode};
use specie_fastpay::{
    decode_exact, Certificate, Committee, CommitteeChain, SignedOrder, SigningKey, CERTIFICATE_BYTES_MAX,
    SIGNED_ORDER_BYTES_MAX,
};
use specie_fastpay_primary::FastpayFunding;
use specie_transaction::{OutPoint, SpecieTransaction, Txid, UhsId};
use specie_wallet::{Settled, Wallet, WalletFileError, WalletPart, WalletPartKind};

use crate::book::{FastpayAccount, FastpayBook, FastpayError, FundingRecord, SentTransfer};

/// The part's name, and its field in the wallet file.
pub const FASTPAY_PART: &str = "fastpay";

/// Reads the book from a wallet file's `fastpay` section ([`crate::install`] installs it).
#[derive(Debug)]
pub struct FastpayPart;

impl WalletPartKind for FastpayPart {
    fn name(&self) -> &'static str {
        FASTPAY_PART
    }

    fn fields(&self) -> &'static [&'static str] {
        &[FASTPAY_PART]
    }

    fn load(&self, fields: &Map<String, Value>, _wallet: &Wallet) -> Result<Box<dyn WalletPart>, WalletFileError> {
        let section = fields.get(FASTPAY_PART).unwrap_or(&Value::Null);
        let book = FastpayBook::from_section(section).map_err(|error| WalletFileError::Part(Box::new(error)))?;
        Ok(Box::new(book))
    }
}

/// The book moves no core money: nothing of the core's life cycle touches it (its fundings and
/// redeems are the core wallet's pending transactions like any other).
impl WalletPart for FastpayBook {
    fn name(&self) -> &'static str {
        FASTPAY_PART
    }
    fn settle(&mut self, _txid: &Txid, _confirmed: bool, _settled: &mut Settled) {}
    fn spendable(&self) -> Vec<(OutPoint, UhsId, u64)> {
        Vec::new()
    }
    fn missing(&self) -> Vec<(OutPoint, UhsId, u64)> {
        Vec::new()
    }
    fn mark_missing(&mut self, _outpoints: &[OutPoint]) -> u64 {
        0
    }
    fn restore_missing(&mut self, _outpoints: &[OutPoint]) -> u64 {
        0
    }
    fn forget_missing(&mut self) -> (usize, u64) {
        (0, 0)
    }
    fn holds_any(&self) -> bool {
        false
    }
    fn payment_string_for(&self, _txid: &Txid) -> Option<String> {
        None
    }
    fn to_fields(&self) -> Map<String, Value> {
        Map::from_iter([(FASTPAY_PART.to_owned(), self.to_section())])
    }
    fn clone_box(&self) -> Box<dyn WalletPart> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

impl FastpayBook {
    /// The book whose section (the wallet file's `fastpay`) is `section`, every part checked
    /// (module docs); [`FastpayError::Section`] says which part is wrong.
    pub fn from_section(section: &serde_json::Value) -> Result<FastpayBook, FastpayError> {
        let record = FastpayRecord::deserialize(section).map_err(|error| problem("fastpay", error))?;
        record.to_book()
    }

    /// The section (the wallet file's `fastpay`) that holds this book.
    pub fn to_section(&self) -> serde_json::Value {
        serde_json::to_value(FastpayRecord::from_book(self))
            .expect("a FastPay record is plain strings, numbers and lists, which JSON always holds")
    }
}

/// The wallet file's `fastpay` section, as written.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FastpayRecord {
    pub committee: CommitteeRecord,
    /// The cluster file naming the authorities' addresses, as given with `--cluster-file`.
    pub cluster_file: Option<String>,
    /// Or the standalone committee's API naming them, as given with `--committee-url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committee_url: Option<String>,
    /// The committee records of its epochs after the first, oldest first, canonical bytes in
    /// hex (docs/byzantine-format.md §3.1): learned from the cluster file or the authorities,
    /// each checked against the epoch before on load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub epochs: Vec<String>,
    pub accounts: Vec<FastpayAccountRecord>,
}

/// The committee: its epoch and members, and its id for people reading the file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CommitteeRecord {
    pub epoch: u64,
    /// The authorities' Ed25519 public keys, hex, in committee order.
    pub members: Vec<String>,
    /// For reading only; recomputed on load and checked.
    pub id: String,
}

/// One account: its owner's key, its pending orders, certificates and fundings.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FastpayAccountRecord {
    /// The owner's Ed25519 secret key, hex.
    pub secret_key: String,
    /// The account (the owner's public key); recomputed from the secret on load and checked.
    pub account: String,
    pub next_sequence: u64,
    /// Signed orders for `next_sequence` not certified yet, hex: saved before they are sent.
    pub pending_orders: Vec<String>,
    /// The account's certified transfers, sequence 0 first.
    pub sent: Vec<SentRecord>,
    pub fundings: Vec<FundingFileRecord>,
}

/// One certified transfer of an account, and its redeem back to the core if one was built.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SentRecord {
    /// For reading only.
    pub sequence: u64,
    /// For reading only.
    pub amount: u64,
    pub certificate: String,
    /// The FastPay redeem built from a transfer back to the core, once built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redeem_txid: Option<String>,
    /// The core holds the redeem's marker (absent, false: presented again until it does).
    #[serde(default, skip_serializing_if = "is_false")]
    pub redeemed: bool,
}

/// One funding of an account, as submitted to the core.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FundingFileRecord {
    /// For reading only.
    pub txid: String,
    /// For reading only.
    pub amount: u64,
    /// The funding transaction, exactly as submitted to the core.
    pub transaction: String,
    /// A quorum of authorities credited it.
    pub credited: bool,
    /// The core refused it, or did not hold it when last asked: kept, asked again by
    /// `fastpay sync` (absent, false, in files from before it).
    #[serde(default, skip_serializing_if = "is_false")]
    pub refused: bool,
}

fn is_false(value: &bool) -> bool {
    !value
}

fn problem(what: impl Into<String>, problem: impl std::fmt::Display) -> FastpayError {
    FastpayError::Section {
        what: what.into(),
        problem: problem.to_string(),
    }
}

fn bytes_of(text: &str, what: &str) -> Result<Vec<u8>, FastpayError> {
    hex::decode(text).map_err(|_| problem(what, "not hex"))
}

/// The redeem txid of certified transfer `index`, if one was built; a transfer marked redeemed
/// must have one.
fn redeem_txid_of(record: &SentRecord, index: usize, what: &str) -> Result<Option<Txid>, FastpayError> {
    let txid = match &record.redeem_txid {
        Some(text) => Some(Txid(
            hex::decode(text)
                .ok()
                .and_then(|bytes| bytes.try_into().ok())
                .ok_or_else(|| {
                    problem(
                        what,
                        format!("certificate {index}: its redeem txid is not 32 bytes of hex"),
                    )
                })?,
        )),
        None => None,
    };
    if record.redeemed && txid.is_none() {
        return Err(problem(
            what,
            format!("certificate {index}: redeemed, but no redeem was built"),
        ));
    }
    Ok(txid)
}

impl FastpayRecord {
    /// The record of `book`.
    pub fn from_book(book: &FastpayBook) -> FastpayRecord {
        let committee = book.committee();
        FastpayRecord {
            committee: CommitteeRecord {
                epoch: committee.epoch(),
                members: committee.members().iter().map(hex::encode).collect(),
                id: hex::encode(committee.id()),
            },
            cluster_file: book.cluster_file().map(str::to_owned),
            committee_url: book.committee_url().map(str::to_owned),
            epochs: book
                .chain()
                .records()
                .iter()
                .map(specie_fastpay::CommitteeRecord::to_hex)
                .collect(),
            accounts: book.accounts().iter().map(FastpayAccountRecord::from_account).collect(),
        }
    }

    /// The book, every part checked (module docs). FastPay's kinds must be installed
    /// (`specie_fastpay_primary::install`): the fundings are core transactions.
    pub fn to_book(&self) -> Result<FastpayBook, FastpayError> {
        let members = self
            .committee
            .members
            .iter()
            .enumerate()
            .map(|(index, member)| {
                let what = format!("committee member {index}");
                let bytes = bytes_of(member, &what)?;
                <[u8; 32]>::try_from(bytes).map_err(|_| problem(what, "not 32 bytes"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let committee = Committee::new(self.committee.epoch, members).map_err(|error| problem("committee", error))?;
        if hex::encode(committee.id()) != self.committee.id.to_ascii_lowercase() {
            return Err(problem("committee", "its id does not match its epoch and members"));
        }
        let mut chain = CommitteeChain::new(committee);
        for (index, text) in self.epochs.iter().enumerate() {
            let what = format!("committee epoch record {index}");
            let record =
                specie_fastpay::CommitteeRecord::from_hex(text).map_err(|error| problem(what.clone(), error))?;
            chain.extend(record).map_err(|error| problem(what.clone(), error))?;
        }
        let mut accounts: Vec<FastpayAccount> = Vec::with_capacity(self.accounts.len());
        for (index, record) in self.accounts.iter().enumerate() {
            let account = record.to_account(&chain, &format!("account {index} ({})", record.account))?;
            if accounts.iter().any(|a| a.key == account.key) {
                return Err(problem(format!("account {index}"), "appears twice"));
            }
            accounts.push(account);
        }
        if self.cluster_file.is_some() && self.committee_url.is_some() {
            return Err(problem("fastpay", "names both a cluster file and a committee URL"));
        }
        Ok(FastpayBook {
            chain,
            cluster_file: self.cluster_file.clone(),
            committee_url: self.committee_url.clone(),
            accounts,
        })
    }
}

impl FastpayAccountRecord {
    fn from_account(account: &FastpayAccount) -> FastpayAccountRecord {
        let order_hex = |order: &SignedOrder| {
            let mut bytes = vec![];
            order.encode_to(&mut bytes);
            hex::encode(bytes)
        };
        FastpayAccountRecord {
            secret_key: hex::encode(account.owner.to_bytes()),
            account: hex::encode(account.key.0),
            next_sequence: account.next_sequence,
            pending_orders: account.pending.iter().map(order_hex).collect(),
            sent: account
                .sent
                .iter()
                .map(|sent| {
                    let mut bytes = vec![];
                    sent.certificate.encode_to(&mut bytes);
                    SentRecord {
                        sequence: sent.certificate.order.order.sequence,
                        amount: sent.certificate.order.order.amount,
                        certificate: hex::encode(bytes),
                        redeem_txid: sent.redeem_txid.map(|txid| txid.to_string()),
                        redeemed: sent.redeemed,
                    }
                })
                .collect(),
            fundings: account
                .fundings
                .iter()
                .map(|record| FundingFileRecord {
                    txid: record.funding.txid().to_string(),
                    amount: record.funding.amount,
                    transaction: hex::encode(SpecieTransaction::from(record.funding.clone()).encode()),
                    credited: record.credited,
                    refused: record.refused,
                })
                .collect(),
        }
    }

    /// The account, every part checked (module docs); errors say what, the caller says where.
    fn to_account(&self, chain: &CommitteeChain, what: &str) -> Result<FastpayAccount, FastpayError> {
        let secret: [u8; 32] = hex::decode(&self.secret_key)
            .ok()
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or_else(|| problem(what, "the secret key is not 32 bytes of hex"))?;
        let mut account = FastpayAccount::from_owner(SigningKey::from_bytes(&secret));
        if hex::encode(account.key.0) != self.account.to_ascii_lowercase() {
            return Err(problem(what, "the account is not the secret key's public key"));
        }
        account.next_sequence = self.next_sequence;
        for (index, text) in self.pending_orders.iter().enumerate() {
            let bytes = hex::decode(text).map_err(|_| problem(what, format!("pending order {index} is not hex")))?;
            let order = decode_exact("signed order", &bytes, SIGNED_ORDER_BYTES_MAX, SignedOrder::decode_from)
                .map_err(|error| problem(what, format!("pending order {index}: {error}")))?;
            order
                .check()
                .map_err(|error| problem(what, format!("pending order {index}: {error}")))?;
            if order.order.sender != account.key || order.order.sequence != account.next_sequence {
                return Err(problem(
                    what,
                    format!(
                        "pending order {index} is not this account's order for sequence number {}",
                        account.next_sequence
                    ),
                ));
            }
            account.pending.push(order);
        }
        for (index, record) in self.sent.iter().enumerate() {
            let bytes = hex::decode(&record.certificate)
                .map_err(|_| problem(what, format!("certificate {index} is not hex")))?;
            let certificate = decode_exact("certificate", &bytes, CERTIFICATE_BYTES_MAX, Certificate::decode_from)
                .map_err(|error| problem(what, format!("certificate {index}: {error}")))?;
            crate::book::check_in(chain, &certificate)
                .map_err(|error| problem(what, format!("certificate {index}: {error}")))?;
            let order = &certificate.order.order;
            if order.sender != account.key || order.sequence != index as u64 {
                return Err(problem(
                    what,
                    format!("certificate {index} is not this account's transfer {index}"),
                ));
            }
            let redeem_txid = redeem_txid_of(record, index, what)?;
            account.sent.push(SentTransfer {
                certificate,
                redeem_txid,
                redeemed: record.redeemed,
            });
        }
        if account.sent.len() as u64 != account.next_sequence {
            return Err(problem(
                what,
                format!(
                    "next sequence number {} but {} certified transfers",
                    account.next_sequence,
                    account.sent.len()
                ),
            ));
        }
        for (index, record) in self.fundings.iter().enumerate() {
            let bytes =
                hex::decode(&record.transaction).map_err(|_| problem(what, format!("funding {index} is not hex")))?;
            let funding = match SpecieTransaction::decode_exact(&bytes) {
                Ok(tx) => match tx.capability::<FastpayFunding>() {
                    Some(funding) => funding.clone(),
                    None => return Err(problem(what, format!("funding {index} is another kind of transaction"))),
                },
                Err(error) => return Err(problem(what, format!("funding {index}: {error}"))),
            };
            if funding.account != account.key || funding.committee_id != chain.first().id() {
                return Err(problem(
                    what,
                    format!("funding {index} funds another account or committee"),
                ));
            }
            account.fundings.push(FundingRecord {
                funding,
                credited: record.credited,
                refused: record.refused && !record.credited,
            });
        }
        Ok(account)
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use specie_fastpay::test_support::SigningCommittee;
    use specie_fastpay::{AccountKey, Recipient};

    use specie_wallet::{Wallet, WalletFile, WALLET_FORMAT_VERSION};

    use crate::book::{CommitteeSource, FastpayBook, FastpayWallet};
    use crate::testkit::{funded_wallet, rng};

    fn book(wallet: &Wallet) -> FastpayBook {
        wallet.fastpay().expect("a wallet with a committee").clone()
    }

    /// A wallet with every part of the section: a credited funding, a certified transfer back to
    /// the core with its redeem built, and an order signed and not certified yet.
    fn busy_wallet(signing: &SigningCommittee, seed: u64) -> (Wallet, AccountKey) {
        let mut rng = rng(seed);
        let mut wallet = funded_wallet(&[500], &mut rng);
        wallet
            .fastpay_use_committee(
                &signing.committee,
                Some(CommitteeSource::ClusterFile("/tmp/cluster.toml")),
            )
            .unwrap();
        let account = wallet.fastpay_new_account(&mut rng).unwrap();
        wallet.fastpay_new_account(&mut rng).unwrap();
        let funding = wallet.build_fastpay_funding(&account, 300, &mut rng).unwrap();
        wallet.on_confirmed(&funding.txid()).unwrap();
        wallet.fastpay_on_credited(&account, &funding.txid()).unwrap();
        let recipient = wallet.fastpay_redeem_recipient(&mut rng).unwrap();
        let order = wallet.fastpay_sign_order(&account, recipient, 40, vec![]).unwrap();
        wallet.fastpay_on_certified(signing.final_certificate(&order)).unwrap();
        wallet.build_fastpay_redeem(&account, 0).unwrap();
        let payee = AccountKey([9; 32]);
        wallet
            .fastpay_sign_order(&account, Recipient::Account(payee), 7, b"rent".to_vec())
            .unwrap();
        (wallet, account)
    }

    #[test]
    fn the_section_round_trips_and_saves_byte_for_byte() {
        let signing = SigningCommittee::deterministic(4, 1);
        let (wallet, account) = busy_wallet(&signing, 50);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wallet.json");
        WalletFile::create(&path, &wallet).unwrap();
        let loaded = WalletFile::load(&path).unwrap();
        let (book, again) = (book(&wallet), book(&loaded));
        assert_eq!(again.committee(), book.committee());
        assert_eq!(again.cluster_file(), Some("/tmp/cluster.toml"));
        assert_eq!(again.accounts().len(), 2);
        let (before, after) = (book.account(&account).unwrap(), again.account(&account).unwrap());
        assert_eq!(after.pending(), before.pending());
        assert_eq!(after.pending().len(), 1);
        assert_eq!(after.sent(), before.sent());
        assert!(after.sent()[0].redeem_txid.is_some());
        assert_eq!(after.fundings(), before.fundings());
        assert_eq!((after.next_sequence(), after.local_balance()), (1, 260));
        assert_eq!(
            loaded.pending().collect::<Vec<_>>(),
            wallet.pending().collect::<Vec<_>>()
        );
        let first = fs::read(&path).unwrap();
        WalletFile::save(&path, &loaded).unwrap();
        assert_eq!(fs::read(&path).unwrap(), first);
        let json: serde_json::Value = serde_json::from_slice(&first).unwrap();
        assert_eq!(json["version"], WALLET_FORMAT_VERSION);
        assert_eq!(json["pending"][0]["kind"], "fastpay_redeem");
    }

    /// The marks that keep value on a node's word (a refused funding, a redeem the core holds)
    /// are saved, and absent in files from before them.
    #[test]
    fn refused_fundings_and_redeemed_transfers_are_saved() {
        let signing = SigningCommittee::deterministic(4, 1);
        let (mut wallet, account) = busy_wallet(&signing, 53);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wallet.json");
        WalletFile::create(&path, &wallet).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        let record = &json["fastpay"]["accounts"][0];
        assert!(record["fundings"][0].get("refused").is_none() && record["sent"][0].get("redeemed").is_none());

        let mut rng = rng(54);
        let refused = wallet.build_fastpay_funding(&account, 100, &mut rng).unwrap();
        wallet.on_rejected(&refused.txid()).unwrap();
        wallet.fastpay_mark_refused(&account, &refused.txid()).unwrap();
        wallet.fastpay_on_redeemed(&account, 0).unwrap();
        WalletFile::save(&path, &wallet).unwrap();
        let loaded = WalletFile::load(&path).unwrap();
        let loaded_book = book(&loaded);
        let state = loaded_book.account(&account).unwrap();
        assert_eq!(state.fundings(), book(&wallet).account(&account).unwrap().fundings());
        assert!(state.fundings()[1].refused && !state.fundings()[0].refused);
        assert!(state.sent()[0].redeemed);
    }

    #[test]
    fn a_version_1_file_loads_and_a_wallet_without_accounts_writes_no_section() {
        let mut rng = rng(51);
        let wallet = funded_wallet(&[5, 6], &mut rng);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.json");
        // Exactly what version 1 wrote: the same fields, no `fastpay`.
        let mut json = serde_json::to_value(WalletFile::from_wallet(&wallet)).unwrap();
        assert!(json.get("fastpay").is_none());
        json["version"] = 1.into();
        fs::write(&path, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
        let loaded = WalletFile::load(&path).unwrap();
        assert_eq!(loaded.balance(), wallet.balance());
        assert!(loaded.fastpay().is_none());
        WalletFile::save(&path, &loaded).unwrap();
        let saved: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(saved["version"], WALLET_FORMAT_VERSION);
    }

    #[test]
    fn a_crash_after_saving_an_order_leaves_that_order_to_send_and_no_other() {
        let signing = SigningCommittee::deterministic(4, 1);
        let (wallet, account) = busy_wallet(&signing, 50);
        let signed = book(&wallet).account(&account).unwrap().pending()[0].clone();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wallet.json");
        WalletFile::create(&path, &wallet).unwrap();
        drop(wallet); // the process dies before sending
        let mut restarted = WalletFile::load(&path).unwrap();
        let pending = book(&restarted).account(&account).unwrap().pending().to_vec();
        assert_eq!(pending, vec![signed.clone()], "the same order, byte for byte");
        assert!(restarted
            .fastpay_sign_order(&account, Recipient::Account(AccountKey([8; 32])), 7, vec![])
            .is_err());
        restarted
            .fastpay_on_certified(signing.final_certificate(&signed))
            .unwrap();
        assert!(book(&restarted).account(&account).unwrap().pending().is_empty());
    }

    /// A wallet whose section is damaged does not load; the error says which part is wrong, and
    /// the file is left as it was.
    #[test]
    fn a_damaged_section_is_explained() {
        let signing = SigningCommittee::deterministic(4, 1);
        let (wallet, _) = busy_wallet(&signing, 50);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wallet.json");
        let fails = |edit: &dyn Fn(&mut serde_json::Value), expected: &str| {
            let mut json = serde_json::to_value(WalletFile::from_wallet(&wallet)).unwrap();
            edit(&mut json);
            let written = serde_json::to_vec(&json).unwrap();
            fs::write(&path, &written).unwrap();
            let error = WalletFile::load(&path).unwrap_err();
            assert!(error.to_string().contains(expected), "{error}");
            assert!(error.to_string().contains("restore it from your backup"), "{error}");
            assert_eq!(fs::read(&path).unwrap(), written, "unchanged");
        };
        // An order signed by someone else, or for another sequence number, is not this wallet's.
        let other = busy_wallet(&SigningCommittee::deterministic(4, 2), 52).0;
        let other_json = serde_json::to_value(WalletFile::from_wallet(&other)).unwrap();
        let stranger = other_json["fastpay"]["accounts"][0]["pending_orders"][0].clone();
        fails(
            &|json| json["fastpay"]["accounts"][0]["pending_orders"][0] = stranger.clone(),
            "is not this account's order for sequence number 1",
        );
        fails(
            &|json| json["fastpay"]["accounts"][0]["next_sequence"] = 2.into(),
            "is not this account's order for sequence number 2",
        );
        // A certificate of another committee.
        let foreign = other_json["fastpay"]["accounts"][0]["sent"][0]["certificate"].clone();
        fails(
            &|json| json["fastpay"]["accounts"][0]["sent"][0]["certificate"] = foreign.clone(),
            "certificate 0: signed by another committee",
        );
        fails(
            &|json| json["fastpay"]["committee"]["id"] = "00".repeat(32).into(),
            "its id does not match",
        );
        fails(
            &|json| json["fastpay"]["accounts"][1]["account"] = "11".repeat(32).into(),
            "not the secret key's public key",
        );
        fails(
            &|json| json["fastpay"]["accounts"] = "none".into(),
            "fastpay: fastpay: invalid type",
        );
    }
}
