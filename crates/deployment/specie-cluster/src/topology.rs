use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use specie_committee::AuthorityAddresses;
use specie_fastpay::{Committee, CommitteeChain, CommitteeError, CommitteeRecord};
use specie_service::server::HttpLimitError;
use specie_shard::{ShardRange, ShardRangeError};

use crate::identity::GroupRole;

pub const FORMAT_VERSION: u32 = 1;
/// Bytes of a network id (`network_id`, hex in the file and at `/v1/info`).
pub const NETWORK_ID_BYTES: usize = 16;

/// The most coordinator groups a cluster may have: a shard keeps each one's dtxns apart, under a
/// 16-bit index ([`specie_shard::CoordinatorIndex`]).
pub const COORDINATOR_GROUPS_MAX: usize = specie_coordinator::COORDINATORS_MAX;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    pub format_version: u32,
    /// Bech32 address prefix of the currency.
    pub hrp: String,
    /// The cluster's identity (16 random bytes, hex), made by `cluster up` and served by every
    /// sentinel at `/v1/info`: a wallet remembers it and refuses to talk to another network.
    /// Absent in files from before it: the sentinels then serve none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_id: Option<String>,
    /// x-only issuer public keys (hex) allowed to mint and redeem.
    #[serde(default)]
    pub issuers: Vec<String>,
    /// Replicas removed from their groups (certificate names, e.g. `2.shard-0.shard.specie`):
    /// their ids are never given again, and they are refused as members.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired: Vec<String>,
    /// The cluster's first start, on hosts of their own: while `true`, a replica of a group
    /// that finds no replica in its directory (a new host, a new container volume) prepares one
    /// and founds the group with the others listed here, as `cluster up` does on one host. Turn
    /// it off once every member has started: afterwards a replica whose directory is lost must
    /// be replaced, and with it on, it would found again under its old id, having forgotten its
    /// votes. Every process warns at start while it is on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub founding: bool,
    /// Set by `cluster restore`: the states this cluster was built from. Each replica starts from
    /// its group's state there before its own log and snapshots, and refuses to start without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<RestoredFrom>,
    /// The FastPay committee the cluster is the Primary of: its sentinels accept fundings to it
    /// and redeems of its certificates. Absent: every FastPay funding and redeem is invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fastpay_committee: Option<FastpayCommitteeConfig>,
    /// The offline cash authority as a Raft group of this cluster (`[offline_authority]`): its
    /// sentinels accept fundings to it and its payouts. Absent: every bridge funding and payout to it
    /// is invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline_authority: Option<OfflineAuthorityConfig>,
    /// The exchange between currencies (SPEEDEX) as a Raft group of this cluster (`[exchange]`):
    /// its sentinels accept deposits to it and its payouts. Absent: every exchange deposit and
    /// payout is invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<ExchangeGroupConfig>,
    /// The privacy levels' keys (`[privacy]`): the auditors with jurisdiction, the registration
    /// authority of the anonymous level, the active auditors. Absent: confidential transactions
    /// need no auditor, anonymous ones are refused, nothing needs a co-signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privacy: Option<PrivacyConfig>,
    /// Threshold endorsement (`[endorsement]`): a transaction reaches a coordinator only with
    /// one FROST signature of `threshold` of the sentinels, each having validated it. Absent:
    /// one sentinel's attestation suffices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endorsement: Option<EndorsementConfig>,
    /// The ledger of record as a Raft group of this cluster (`[ledger_of_record]`): sentinels
    /// write every transaction's record ahead to it before a coordinator sees it, and report its
    /// outcome after; it seals the committed ones into hash-chained blocks. Absent: no ledger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_of_record: Option<LedgerOfRecordConfig>,
    /// The atomizer shape (`[atomizer]`, Hamilton §5): one Raft group orders every transaction
    /// into blocks, and the shard groups apply the blocks; then there are no coordinator groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atomizer: Option<AtomizerGroupConfig>,
    /// Where each replica keeps its log and snapshots: `<data_dir>/<group>-<replica>/`.
    pub data_dir: PathBuf,
    /// The cluster's PKI: `ca.crt` (the CA every process's certificate must chain to) and, per
    /// process, `<identity>.crt` and `<identity>.key` (mode 0600), plus each sentinel's
    /// `<identity>.attestation.key`. See docs/operator-guide.md to bring your own CA.
    pub pki_dir: PathBuf,
    /// How processes connect: `mutual-tls` (the default), or `insecure-plaintext`, which turns off
    /// authentication and authorisation and exists only to measure what TLS costs.
    #[serde(default)]
    pub transport: TransportMode,
    #[serde(default)]
    pub limits: Limits,
    /// Limits of every sentinel's HTTP API: connections, header, body and idle time-outs.
    #[serde(default)]
    pub http: specie_service::HttpLimits,
    pub shard_groups: Vec<ShardGroup>,
    pub coordinator_groups: Vec<ReplicaGroup>,
    pub sentinels: Vec<Sentinel>,
}

/// What the cluster's sentinels require of private transactions, as `specie node`'s flags of the
/// same names do (docs/privacy.md): every key in hex, as `specie audit key` and `specie ra key`
/// print them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrivacyConfig {
    /// Value auditors (Ristretto keys): every confidential value is encrypted to each.
    #[serde(default)]
    pub auditors: Vec<String>,
    /// The registration authority whose credentials authorise anonymous spends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_authority: Option<String>,
    /// Owner auditors: every anonymous owner is encrypted to each (at most 4).
    #[serde(default)]
    pub owner_auditors: Vec<String>,
    /// Active auditors (x-only co-signing keys), in order: every private transaction carries
    /// each one's co-signature.
    #[serde(default)]
    pub active_auditors: Vec<String>,
    /// The certifier group whose certificates unlinkable spends prove (its encoding,
    /// docs/unlinkable-format.md §3); only beside a registration authority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certifiers: Option<String>,
}

impl PrivacyConfig {
    /// The sentinels' rules for the private kinds this section says, or the first key that does
    /// not decode.
    pub fn rules(&self) -> Result<specie_private_transactions::PrivacyRules, InvalidTopology> {
        let bad = |field: &'static str, key: &str| InvalidTopology::PrivacyKey {
            field,
            key: key.chars().take(24).collect(),
        };
        let auditors = self
            .auditors
            .iter()
            .map(|key| {
                let bytes: Option<[u8; 32]> = hex::decode(key).ok().and_then(|b| b.try_into().ok());
                bytes
                    .filter(|b| specie_confidential::AuditorKey::from_bytes(*b).is_some())
                    .ok_or_else(|| bad("auditors", key))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let decode = |field: &'static str, key: &str| hex::decode(key).ok().ok_or_else(|| bad(field, key));
        use specie_codec::Decode;
        let authority = self
            .registration_authority
            .as_ref()
            .map(|key| {
                specie_credential::RaPublicKey::decode_exact(&decode("registration_authority", key)?)
                    .map_err(|_| bad("registration_authority", key))
            })
            .transpose()?;
        let owner_auditors = self
            .owner_auditors
            .iter()
            .map(|key| {
                specie_credential::AuditorKey::decode_exact(&decode("owner_auditors", key)?)
                    .map_err(|_| bad("owner_auditors", key))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if owner_auditors.len() > specie_credential::AUDITORS_MAX || (!owner_auditors.is_empty() && authority.is_none())
        {
            return Err(bad(
                "owner_auditors",
                "at most 4, and only beside a registration_authority",
            ));
        }
        let active_auditors = self
            .active_auditors
            .iter()
            .map(|key| xonly_hex(key).ok_or_else(|| bad("active_auditors", key)))
            .collect::<Result<Vec<_>, _>>()?;
        let certifiers = self
            .certifiers
            .as_ref()
            .map(|group| {
                specie_credential::unlinkable::CertifierGroup::decode_exact(&decode("certifiers", group)?)
                    .map_err(|_| bad("certifiers", group))
            })
            .transpose()?;
        if certifiers.is_some() && authority.is_none() {
            return Err(bad("certifiers", "only beside a registration_authority"));
        }
        let mut rules =
            specie_private_transactions::PrivacyRules::new(auditors, authority, owner_auditors, active_auditors);
        rules.certifiers = certifiers;
        Ok(rules)
    }
}

/// The sentinels as a threshold group of endorsers (docs/endorsement-format.md): sentinel `i`
/// of the list is endorser `i + 1`, its share in `<data_dir>/<sentinel>/endorser.key`, made by
/// the sentinels' own key generation ceremony.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndorsementConfig {
    /// Signatures a transaction needs (k); every sentinel is an endorser (n).
    pub threshold: u16,
    /// The group's x-only key (hex): what coordinators verify endorsements under. Absent until
    /// the sentinels' ceremony made it (`cluster up` writes it then); meanwhile sentinels without
    /// a share run the ceremony and coordinators refuse every transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_key: Option<String>,
}

impl EndorsementConfig {
    /// The listed group key, if there is one (validated by [`Topology::validate`]).
    pub fn group_key(&self) -> Option<specie_endorsement::GroupKey> {
        let key = specie_endorsement::GroupKey(xonly_hex(self.group_key.as_ref()?)?);
        key.xonly().map(|_| key)
    }

    pub fn threshold(&self, sentinels: usize) -> Option<specie_endorsement::Threshold> {
        specie_endorsement::Threshold::new(self.threshold, u16::try_from(sentinels).ok()?).ok()
    }

    fn validate(&self, sentinels: &[Sentinel]) -> Result<(), InvalidTopology> {
        self.threshold(sentinels.len())
            .ok_or(InvalidTopology::EndorsementThreshold {
                threshold: self.threshold,
                sentinels: sentinels.len(),
            })?;
        if self.group_key.is_some() && self.group_key().is_none() {
            return Err(InvalidTopology::EndorsementGroupKey);
        }
        match sentinels.iter().find(|s| s.endorser.is_none()) {
            Some(sentinel) => Err(InvalidTopology::NoEndorserAddress {
                sentinel: sentinel.name.clone(),
            }),
            None => Ok(()),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportMode {
    #[default]
    MutualTls,
    InsecurePlaintext,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub frame_bytes_max: u32,
    pub requests_in_flight_max: u32,
    pub request_timeout_ms: u64,
    pub batch_transactions_max: u32,
    pub dtxns_in_flight_max: u32,
    pub reconnect_backoff_ms_max: u64,
    pub raft_heartbeat_ms: u64,
    pub raft_election_timeout_ms: u64,
    /// A replica snapshots its state and compacts its log after this many entries.
    pub raft_snapshot_entries: u64,
    /// A peer must finish its TLS handshake within this long.
    #[serde(default = "default_handshake_timeout_ms")]
    pub handshake_timeout_ms: u64,
    /// TLS handshakes under way at once per process; further strangers are closed unread.
    #[serde(default = "default_handshakes_max")]
    pub handshakes_max: u32,
}

fn default_handshake_timeout_ms() -> u64 {
    specie_wire::WireLimits::default().handshake_timeout_ms
}

fn default_handshakes_max() -> u32 {
    specie_wire::WireLimits::default().handshakes_max as u32
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            frame_bytes_max: 64 * 1024 * 1024,
            requests_in_flight_max: 256,
            request_timeout_ms: 2_000,
            batch_transactions_max: 2_000,
            dtxns_in_flight_max: 4,
            reconnect_backoff_ms_max: 1_000,
            // openraft also uses the heartbeat interval as the time-out of one append-entries
            // RPC, which must cover a large batch plus a follower's fsync on a loaded machine:
            // at 100 ms, failovers under load stalled (docs/bench-cluster.md).
            raft_heartbeat_ms: 250,
            raft_election_timeout_ms: 1_000,
            // Bounds a log to about this many batches (coordinator entries carry whole dtxns);
            // a shard's snapshot is its whole UHS, so much smaller values cost write bandwidth.
            raft_snapshot_entries: 1_000,
            handshake_timeout_ms: default_handshake_timeout_ms(),
            handshakes_max: default_handshakes_max(),
        }
    }
}

/// A FastPay committee as the cluster file lists it (`[fastpay_committee]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FastpayCommitteeConfig {
    pub epoch: u64,
    /// The authorities' Ed25519 public keys, hex, in committee order (authority 0 first).
    pub members: Vec<String>,
    /// How long an authority shard waits for a credit's acknowledgement before sending it again.
    #[serde(default = "default_credit_retransmit_ms")]
    pub credit_retransmit_ms: u64,
    /// Most unacknowledged credits an authority shard queues towards one other shard.
    #[serde(default = "default_channel_credits_max")]
    pub channel_credits_max: u32,
    /// The authorities as processes of this cluster (`[[fastpay_committee.authorities]]`), one
    /// per member in committee order; each secret signing key is
    /// `<pki_dir>/authority-<index>.fastpay.key`. Empty: the committee runs elsewhere and this
    /// cluster is only its Primary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authorities: Vec<AuthorityProcesses>,
    /// The committee records of the epochs after the first (`members` are epoch `epoch`'s),
    /// oldest first, canonical bytes in hex (docs/byzantine-format.md §3.1): each is checked
    /// against the epoch before. `specie cluster rotate-authority` appends them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<String>,
}

fn default_credit_retransmit_ms() -> u64 {
    100
}

fn default_channel_credits_max() -> u32 {
    10_000
}

/// Most shards one authority may split its accounts over.
pub const AUTHORITY_SHARDS_MAX: usize = 64;

/// One authority as processes: its shards, in shard order (shard `s` holds the accounts
/// `specie_authority::shard_of` gives `s`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorityProcesses {
    pub shards: Vec<AuthorityShardGroup>,
}

/// One shard of one authority: a Raft group inside the authority's trust domain, named
/// `authority-<index>-shard-<shard>` (see [`authority_group_name`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorityShardGroup {
    pub replicas: Vec<AuthorityReplica>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorityReplica {
    /// Raft node id, unique within its group, at least 1.
    pub id: u64,
    /// Where the replica serves its Raft peers, the other shards of its authority (credits) and
    /// the operator (framed binary protocol over mutual TLS).
    pub address: SocketAddr,
    /// The FastPay clients' HTTP API (docs/api.md, "FastPay authorities").
    pub http: SocketAddr,
}

impl AuthorityReplica {
    /// The replica as the wire protocol's code sees any replica.
    pub fn wire(&self) -> Replica {
        Replica {
            id: self.id,
            address: self.address,
            metrics: None,
        }
    }
}

/// A 32-byte key from its hex, if it is that.
fn key_bytes(hex_text: &str) -> Option<[u8; 32]> {
    hex::decode(hex_text).ok()?.try_into().ok()
}

/// The replicas' HTTP APIs as URLs, comma-separated (what clients of a replicated service take).
fn http_urls(replicas: &[AuthorityReplica]) -> String {
    let urls: Vec<String> = replicas.iter().map(|r| format!("http://{}", r.http)).collect();
    urls.join(",")
}

/// The offline cash authority's replica group (`[offline_authority]`), named
/// [`OFFLINE_AUTHORITY_GROUP`]. Its secret seed is `<pki_dir>/offline-authority.seed` and the
/// operator's bearer token `<pki_dir>/offline-operator.token` (both made by `cluster up`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfflineAuthorityConfig {
    /// The Ed25519 public key (hex) the authority signs payouts with and fundings are made out to:
    /// what the sentinels bank for. Derived from the seed; a replica refuses to start if they differ.
    pub bridge: String,
    pub replicas: Vec<AuthorityReplica>,
}

/// The offline authority group's name: a label of its replicas' certificate names
/// (`1.offline-authority.offline.specie`) and of their data directories.
pub const OFFLINE_AUTHORITY_GROUP: &str = "offline-authority";

impl OfflineAuthorityConfig {
    /// The bridge key's bytes, if `bridge` is 32 bytes of hex.
    pub fn bridge_key(&self) -> Option<[u8; 32]> {
        key_bytes(&self.bridge)
    }

    pub fn wire_replicas(&self) -> Vec<Replica> {
        self.replicas.iter().map(AuthorityReplica::wire).collect()
    }

    /// Every replica's HTTP API, comma-separated: what devices are given as `--authority`.
    pub fn http_urls(&self) -> String {
        http_urls(&self.replicas)
    }
}

/// The exchange's replica group (`[exchange]`), named [`EXCHANGE_GROUP`]. Its secret seed is
/// `<pki_dir>/exchange.seed` (made by `cluster up`); its identity and bridge key derive from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExchangeGroupConfig {
    /// The Ed25519 public key (hex) that signs the exchange's payouts and that deposits are made
    /// out to: what every trading currency's core banks for (`specie node --exchange`). Derived
    /// from the seed; a replica refuses to start if they differ.
    pub bridge: String,
    /// How long traders' transactions wait for the next block (the batch auction's period).
    #[serde(default = "default_block_interval_ms")]
    pub block_interval_ms: u64,
    /// The currencies traded, in asset order (fixed once the group has a log).
    pub assets: Vec<ExchangeAsset>,
    pub replicas: Vec<AuthorityReplica>,
}

/// A currency the exchange trades.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExchangeAsset {
    /// Lowercase letters, e.g. `eur`.
    pub name: String,
    /// The HTTP API of the online core that mints it (where deposits are checked). Absent only
    /// for the cluster's own currency (`hrp`), whose shards the replicas ask over mutual TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<String>,
}

fn default_block_interval_ms() -> u64 {
    250
}

/// The archiver group: the ledger of record, replicated (docs/operator-guide.md, "The ledger of
/// record in a cluster").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerOfRecordConfig {
    /// The leader seals what waits into a block at least this often.
    #[serde(default = "default_seal_interval_ms")]
    pub seal_interval_ms: u64,
    /// A record nobody reported for this long is decided from the UHS. Longer than any
    /// transaction can spend in flight (the sentinels give up after 30 s).
    #[serde(default = "default_decide_after_ms")]
    pub decide_after_ms: u64,
    #[serde(default = "default_block_records_max")]
    pub block_records_max: u32,
    pub replicas: Vec<Replica>,
}

/// The name of the archiver group (certificates, data directories).
pub const ARCHIVER_GROUP: &str = "archiver";

/// The atomizer group: the one ordering group of the atomizer shape (docs/atomizer-shape.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AtomizerGroupConfig {
    /// Blocks whose ids the atomizer remembers to check attestations against (Hamilton's STXO
    /// cache); no shard group may lag by more than half of it.
    #[serde(default = "default_window_blocks")]
    pub window_blocks: u64,
    #[serde(default = "default_atomizer_block_transactions_max")]
    pub block_transactions_max: u32,
    pub replicas: Vec<Replica>,
}

/// The name of the atomizer group (certificates, data directories).
pub const ATOMIZER_GROUP: &str = "atomizer";

fn default_window_blocks() -> u64 {
    64
}

fn default_atomizer_block_transactions_max() -> u32 {
    2000
}

impl AtomizerGroupConfig {
    pub fn new(replicas: Vec<Replica>) -> AtomizerGroupConfig {
        AtomizerGroupConfig {
            window_blocks: default_window_blocks(),
            block_transactions_max: default_atomizer_block_transactions_max(),
            replicas,
        }
    }

    fn validate(&self) -> Result<(), InvalidTopology> {
        let window_blocks_max = specie_atomizer::AtomizerLimits::default().window_blocks_max;
        if !(4..=window_blocks_max).contains(&self.window_blocks) {
            return Err(InvalidTopology::Atomizer("window_blocks must be 4 to 4096"));
        }
        if !(1..=100_000).contains(&self.block_transactions_max) {
            return Err(InvalidTopology::Atomizer("block_transactions_max must be 1 to 100000"));
        }
        Ok(())
    }
}

fn default_seal_interval_ms() -> u64 {
    200
}

fn default_decide_after_ms() -> u64 {
    60_000
}

fn default_block_records_max() -> u32 {
    10_000
}

impl LedgerOfRecordConfig {
    pub fn new(replicas: Vec<Replica>) -> LedgerOfRecordConfig {
        LedgerOfRecordConfig {
            seal_interval_ms: default_seal_interval_ms(),
            decide_after_ms: default_decide_after_ms(),
            block_records_max: default_block_records_max(),
            replicas,
        }
    }

    /// The archiver role's configuration.
    pub fn archiver(&self) -> specie_archiver::ArchiverConfig {
        let defaults = specie_archiver::ArchiverConfig::default();
        specie_archiver::ArchiverConfig {
            ledger: specie_archiver::LedgerLimits {
                block_records_max: self.block_records_max as usize,
                ..defaults.ledger
            },
            seal_interval_ms: self.seal_interval_ms,
            decide_after_ms: self.decide_after_ms,
            ..defaults
        }
    }

    fn validate(&self) -> Result<(), InvalidTopology> {
        if !(10..=60_000).contains(&self.seal_interval_ms) {
            return Err(InvalidTopology::LedgerOfRecord("seal_interval_ms must be 10 to 60000"));
        }
        if !(1_000..=86_400_000).contains(&self.decide_after_ms) {
            return Err(InvalidTopology::LedgerOfRecord(
                "decide_after_ms must be 1000 to 86400000",
            ));
        }
        if !(1..=10_000).contains(&self.block_records_max) {
            return Err(InvalidTopology::LedgerOfRecord("block_records_max must be 1 to 10000"));
        }
        Ok(())
    }
}

/// The exchange group's name: a label of its replicas' certificate names
/// (`1.exchange.exchange.specie`) and of their data directories.
pub const EXCHANGE_GROUP: &str = "exchange";

impl ExchangeGroupConfig {
    /// The bridge key's bytes, if `bridge` is 32 bytes of hex.
    pub fn bridge_key(&self) -> Option<[u8; 32]> {
        key_bytes(&self.bridge)
    }

    pub fn wire_replicas(&self) -> Vec<Replica> {
        self.replicas.iter().map(AuthorityReplica::wire).collect()
    }

    /// Every replica's HTTP API, comma-separated: what traders are given as `--exchange`.
    pub fn http_urls(&self) -> String {
        http_urls(&self.replicas)
    }

    /// 2 to 64 assets, lowercase names used once, each with a core: its own URL, or the cluster's
    /// shards for the cluster's currency.
    fn validate(&self, hrp: &str) -> Result<(), InvalidTopology> {
        let key = self.bridge_key().ok_or(InvalidTopology::ExchangeBridgeKey)?;
        specie_ed25519::check_public_key(&key).map_err(|_| InvalidTopology::ExchangeBridgeKey)?;
        let names: BTreeSet<&str> = self.assets.iter().map(|a| a.name.as_str()).collect();
        let well_named = self
            .assets
            .iter()
            .all(|a| !a.name.is_empty() && a.name.bytes().all(|b| b.is_ascii_lowercase()));
        if !(2..=64).contains(&self.assets.len()) || names.len() != self.assets.len() || !well_named {
            return Err(InvalidTopology::ExchangeAssets(
                "2 to 64 assets, each named once in lowercase letters",
            ));
        }
        if self.assets.iter().any(|a| a.core.is_none() != (a.name == hrp)) {
            return Err(InvalidTopology::ExchangeAssets(
                "each asset but the cluster's own currency (hrp) needs `core`, the HTTP API of the core that mints it",
            ));
        }
        if !(10..=60_000).contains(&self.block_interval_ms) {
            return Err(InvalidTopology::ExchangeAssets("block_interval_ms must be 10 to 60000"));
        }
        Ok(())
    }
}

/// The name of shard `shard` of authority `authority`'s replica group: a label of its replicas'
/// certificate names (`1.authority-0-shard-1.authority.specie`) and of their data directories.
pub fn authority_group_name(authority: usize, shard: usize) -> String {
    format!("authority-{authority}-shard-{shard}")
}

/// Where an authority shard group sits in the committee.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AuthorityPlace {
    pub authority: u16,
    pub shard: u32,
}

/// One authority shard group as the processes see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorityGroup {
    pub name: String,
    pub place: AuthorityPlace,
    /// How many shards its authority has.
    pub shards: u32,
    pub replicas: Vec<AuthorityReplica>,
}

impl AuthorityGroup {
    /// Its replicas as the wire protocol's code sees any replica.
    pub fn wire_replicas(&self) -> Vec<Replica> {
        self.replicas.iter().map(AuthorityReplica::wire).collect()
    }
}

impl FastpayCommitteeConfig {
    /// Where each authority's clients reach it: per shard, every replica's FastPay API (what
    /// `specie_committee::HttpCommittee` is built from).
    pub fn http_addresses(&self) -> Vec<AuthorityAddresses> {
        self.authorities
            .iter()
            .map(|authority| AuthorityAddresses {
                shards: authority
                    .shards
                    .iter()
                    .map(|group| group.replicas.iter().map(|r| format!("http://{}", r.http)).collect())
                    .collect(),
            })
            .collect()
    }

    /// The committee, with every key checked as `Committee::new` checks it.
    pub fn committee(&self) -> Result<Committee, InvalidTopology> {
        let members = self
            .members
            .iter()
            .enumerate()
            .map(|(index, member)| {
                let bytes = hex::decode(member)
                    .ok()
                    .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok());
                bytes.ok_or_else(|| InvalidTopology::FastpayMemberNotHex {
                    index,
                    member: member.chars().take(80).collect(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Committee::new(self.epoch, members).map_err(InvalidTopology::FastpayCommittee)
    }

    /// The first committee and every later epoch's, each record checked against the epoch
    /// before.
    pub fn chain(&self) -> Result<CommitteeChain, InvalidTopology> {
        let mut chain = CommitteeChain::new(self.committee()?);
        for (index, text) in self.records.iter().enumerate() {
            let record = CommitteeRecord::from_hex(text).map_err(|error| InvalidTopology::FastpayRecord {
                index,
                reason: error.to_string(),
            })?;
            chain.extend(record).map_err(|error| InvalidTopology::FastpayRecord {
                index,
                reason: error.to_string(),
            })?;
        }
        Ok(chain)
    }

    /// Every authority shard group, by authority then shard.
    pub fn groups(&self) -> Vec<AuthorityGroup> {
        let mut groups = vec![];
        for (authority, processes) in self.authorities.iter().enumerate() {
            for (shard, group) in processes.shards.iter().enumerate() {
                groups.push(AuthorityGroup {
                    name: authority_group_name(authority, shard),
                    place: AuthorityPlace {
                        authority: authority as u16,
                        shard: shard as u32,
                    },
                    shards: processes.shards.len() as u32,
                    replicas: group.replicas.clone(),
                });
            }
        }
        groups
    }

    /// The processes are an addition to a committee: checked only when listed.
    fn validate_processes(&self, transport: TransportMode) -> Result<(), InvalidTopology> {
        if self.authorities.is_empty() {
            return Ok(());
        }
        if self.authorities.len() != self.members.len() {
            return Err(InvalidTopology::AuthorityCount {
                members: self.members.len(),
                authorities: self.authorities.len(),
            });
        }
        if transport != TransportMode::MutualTls {
            return Err(InvalidTopology::CommitteeNeedsMutualTls);
        }
        for (name, value) in [
            ("credit_retransmit_ms", self.credit_retransmit_ms),
            ("channel_credits_max", u64::from(self.channel_credits_max)),
        ] {
            if value == 0 {
                return Err(InvalidTopology::ZeroCommitteeLimit { name });
            }
        }
        for (authority, processes) in self.authorities.iter().enumerate() {
            if processes.shards.is_empty() || processes.shards.len() > AUTHORITY_SHARDS_MAX {
                return Err(InvalidTopology::AuthorityShardCount {
                    authority,
                    shards: processes.shards.len(),
                });
            }
        }
        Ok(())
    }
}

/// A group's replica list, of whichever kind the group has.
enum ReplicaList<'a> {
    Plain(&'a mut Vec<Replica>),
    Serving(&'a mut Vec<AuthorityReplica>),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardGroup {
    pub name: String,
    /// First and last owned bucket (the first two bytes of a UHS id, big-endian), inclusive.
    pub range: [u16; 2],
    pub replicas: Vec<Replica>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaGroup {
    pub name: String,
    pub replicas: Vec<Replica>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replica {
    /// Raft node id, unique within its group, at least 1.
    pub id: u64,
    /// Where the replica serves other roles and its Raft peers (framed binary protocol).
    pub address: SocketAddr,
    /// Where it answers `/metrics`, `/livez` and `/readyz` over HTTP (a replica with an HTTP API
    /// answers them there instead, and has none). Absent: it serves no metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<SocketAddr>,
}

/// One process Prometheus scrapes, and the labels that name it (`replica` is empty for a
/// sentinel).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScrapeTarget {
    pub address: SocketAddr,
    pub role: String,
    pub group: String,
    pub replica: String,
}

/// Where a restored cluster's groups start from (`cluster restore`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoredFrom {
    /// The backup's states, `<dir>/<group>.state`, and its `manifest.json`.
    pub dir: PathBuf,
    /// Each group's state's SHA-256 (hex), as the backup's manifest gave it: every replica checks
    /// its copy against this, so that all of a group's replicas, on any host, start from one state.
    pub sha256: std::collections::BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sentinel {
    pub name: String,
    /// The wallets' HTTP/JSON API (docs/api.md).
    pub http: SocketAddr,
    /// The x-only public key (hex) whose signature coordinators require on this sentinel's
    /// submissions; the secret key is `<pki_dir>/<identity>.attestation.key`.
    pub attestation_key: String,
    /// Where the sentinel serves the other sentinels as an endorser (framed binary protocol,
    /// mutual TLS); needed when the cluster has an `[endorsement]` section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endorser: Option<SocketAddr>,
}

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {problem}")]
    Invalid {
        path: String,
        #[source]
        problem: InvalidTopology,
    },
}

/// Why a topology cannot run (or a shape cannot become one): each names the field at fault.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTopology {
    #[error("format_version {found} is not supported (expected {})", FORMAT_VERSION)]
    UnsupportedFormat { found: u32 },
    #[error("a cluster needs at least one shard group, one sentinel, and either coordinator groups (2PC) or an [atomizer] group")]
    MissingRole,
    #[error("a cluster runs one shape: coordinator groups (2PC) or an [atomizer] group, not both")]
    TwoShapes,
    #[error("atomizer: {0}")]
    Atomizer(&'static str),
    #[error("shard group ranges: {0}")]
    ShardRanges(#[source] ShardRangeError),
    #[error(
        "network_id '{id}' is not {} bytes in lowercase hex (delete the line to serve none)",
        NETWORK_ID_BYTES
    )]
    BadNetworkId { id: String },
    #[error("issuer '{issuer}' is not a 32-byte x-only public key in hex")]
    BadIssuer { issuer: String },
    #[error("retired '{name}' is not a replica's certificate name (like 2.shard-0.shard.specie)")]
    RetiredNotAReplica { name: String },
    #[error("{identity} is listed in its group and as retired: a removed replica's id is never used again; give the replica a new id")]
    RetiredMember { identity: String },
    #[error("fastpay_committee.members[{index}] '{member}' is not a 32-byte Ed25519 public key in hex")]
    FastpayMemberNotHex { index: usize, member: String },
    #[error("fastpay_committee: {0}")]
    FastpayCommittee(#[source] CommitteeError),
    #[error("fastpay_committee.records[{index}]: {reason} (records are appended by `specie cluster rotate-authority`; restore the file's last good copy)")]
    FastpayRecord { index: usize, reason: String },
    #[error("sentinel '{sentinel}': attestation_key is not a 32-byte x-only public key in hex")]
    BadAttestationKey { sentinel: String },
    #[error("{sentinels} sentinels need as many attestation keys, got {keys}")]
    AttestationKeyCount { sentinels: usize, keys: usize },
    #[error("http: {0}")]
    Http(#[source] HttpLimitError),
    #[error("limits.{name} must be positive")]
    ZeroLimit { name: &'static str },
    #[error("limits.raft_election_timeout_ms must be at least 3 × raft_heartbeat_ms")]
    ElectionTimeoutTooShort {
        raft_election_timeout_ms: u64,
        raft_heartbeat_ms: u64,
    },
    /// Group and sentinel names become labels of certificate names (`1.shard-0.shard.specie`).
    #[error(
        "name '{name}' must be 1-63 lowercase letters, digits or '-', not starting or ending with '-' \
         (it becomes part of the process's certificate name)"
    )]
    NotADnsLabel { name: String },
    #[error("group name '{name}' is used twice")]
    GroupNameTwice { name: String },
    #[error("name '{name}' is used twice")]
    SentinelNameTwice { name: String },
    #[error("group '{group}' has {replicas} replicas; use 1 to 7 (3 or 5 tolerate 1 or 2 failures)")]
    ReplicaCount { group: String, replicas: usize },
    #[error("group '{group}': replica ids must be unique and at least 1")]
    ReplicaIds { group: String },
    #[error("address {address} is used twice")]
    AddressTwice { address: SocketAddr },
    #[error(
        "fastpay_committee.authorities lists {authorities} authorities for {members} members: list one per \
         member, in committee order, or none"
    )]
    AuthorityCount { members: usize, authorities: usize },
    #[error("fastpay_committee.authorities[{authority}].shards: {shards} shards; use 1 to {AUTHORITY_SHARDS_MAX}")]
    AuthorityShardCount { authority: usize, shards: usize },
    #[error(
        "transport: the FastPay committee's processes need mutual-tls (an authority shard learns which of its \
         authority's shards sent it credits from the sender's certificate)"
    )]
    CommitteeNeedsMutualTls,
    #[error(
        "transport: several coordinator groups need mutual-tls (a shard keeps each coordinator group's \
         transactions apart by the sender's certificate); use one coordinator group, or mutual-tls"
    )]
    CoordinatorGroupsNeedMutualTls,
    #[error("coordinator_groups: {groups} groups; use 1 to {COORDINATOR_GROUPS_MAX}")]
    CoordinatorGroupCount { groups: usize },
    #[error("fastpay_committee.{name} must be positive")]
    ZeroCommitteeLimit { name: &'static str },
    #[error(
        "offline_authority.bridge must be a 32-byte Ed25519 public key of full order, in hex (an offline \
         authority group needs one; `cluster up --offline` makes it)"
    )]
    OfflineBridgeKey,
    #[error("privacy.{field}: '{key}' is not a key of that kind in hex (as `specie audit key` and `specie ra key` print them)")]
    PrivacyKey { field: &'static str, key: String },
    #[error(
        "exchange.bridge must be a 32-byte Ed25519 public key of full order, in hex (an exchange group \
         needs one; `cluster up --exchange` makes it)"
    )]
    ExchangeBridgeKey,
    #[error("exchange.assets: {0}")]
    ExchangeAssets(&'static str),
    #[error("ledger_of_record: {0}")]
    LedgerOfRecord(&'static str),
    #[error("{authorities} authorities need as many signing keys, got {keys}")]
    AuthorityKeyCount { authorities: usize, keys: usize },
    #[error("endorsement.threshold {threshold} must be 1 to the number of sentinels ({sentinels}, at most 64)")]
    EndorsementThreshold { threshold: u16, sentinels: usize },
    #[error(
        "endorsement.group_key must be a 32-byte x-only public key in hex (`cluster up --endorsement K` makes it)"
    )]
    EndorsementGroupKey,
    #[error("sentinel '{sentinel}' needs an endorser address: the cluster has an [endorsement] section")]
    NoEndorserAddress { sentinel: String },
}

/// A group name the cluster file does not list.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the cluster file has no {role} group named '{name}'")]
pub struct UnknownGroup {
    pub role: GroupRole,
    pub name: String,
}

/// Consecutive ports on 127.0.0.1 for a local topology, in the order roles take them.
struct LocalPorts(u16);

impl LocalPorts {
    fn next(&mut self) -> SocketAddr {
        let address = SocketAddr::from(([127, 0, 0, 1], self.0));
        self.0 = self.0.checked_add(1).expect("ports fit");
        address
    }

    /// `count` replicas, ids from 1, each with a wire address.
    fn replicas(&mut self, count: usize) -> Vec<Replica> {
        (1..=count as u64)
            .map(|id| Replica {
                id,
                address: self.next(),
                metrics: None,
            })
            .collect()
    }

    /// A FastPay committee of `members` in `shape`: every authority's shards' replicas.
    fn committee(&mut self, shape: &CommitteeShape, members: Vec<String>) -> FastpayCommitteeConfig {
        FastpayCommitteeConfig {
            epoch: 1,
            members,
            credit_retransmit_ms: default_credit_retransmit_ms(),
            channel_credits_max: default_channel_credits_max(),
            authorities: (0..shape.authorities)
                .map(|_| AuthorityProcesses {
                    shards: (0..shape.shards)
                        .map(|_| AuthorityShardGroup {
                            replicas: self.serving_replicas(shape.replicas),
                        })
                        .collect(),
                })
                .collect(),
            records: vec![],
        }
    }

    /// `count` replicas, ids from 1, each with a wire address and then an HTTP address.
    fn serving_replicas(&mut self, count: usize) -> Vec<AuthorityReplica> {
        (1..=count as u64)
            .map(|id| AuthorityReplica {
                id,
                address: self.next(),
                http: self.next(),
            })
            .collect()
    }
}

/// The bridge keys (hex) of the groups a local cluster runs beside its core.
#[derive(Clone, Debug, Default)]
pub struct GroupBridges {
    pub offline: Option<String>,
    pub exchange: Option<String>,
}

/// The shape `specie cluster up` creates when given no file.
#[derive(Clone, Debug)]
pub struct Shape {
    pub shard_groups: usize,
    pub coordinator_groups: usize,
    pub replicas: usize,
    pub sentinels: usize,
    /// First port; every role takes the next free one in order.
    pub base_port: u16,
    /// A FastPay committee run as processes beside the online core, which is its Primary.
    pub committee: Option<CommitteeShape>,
    /// Replicas of an offline cash authority group beside the online core (0: none).
    pub offline_replicas: usize,
    /// An exchange group beside the online core.
    pub exchange: Option<ExchangeShape>,
    /// The sentinels as a threshold group of endorsers, k of them signing each transaction.
    pub endorsement_threshold: Option<u16>,
    /// Replicas of the archiver group keeping the ledger of record (0: no ledger).
    pub ledger_replicas: usize,
    /// Replicas of the atomizer group, for the atomizer shape (0: the 2PC shape, with
    /// `coordinator_groups`).
    pub atomizer_replicas: usize,
}

/// The shape of the exchange group `specie cluster up --exchange` creates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExchangeShape {
    pub replicas: usize,
    /// The currencies other than the cluster's own: each name and its core's HTTP API.
    pub other_assets: Vec<ExchangeAsset>,
}

/// The shape of a FastPay committee run by the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitteeShape {
    pub authorities: usize,
    /// Shards per authority.
    pub shards: usize,
    /// Replicas per authority shard (one is durable already: Raft commits every vote before it
    /// leaves; three survive the loss of one machine).
    pub replicas: usize,
}

impl Default for CommitteeShape {
    fn default() -> Self {
        CommitteeShape {
            authorities: 4,
            shards: 2,
            replicas: 1,
        }
    }
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            shard_groups: 2,
            coordinator_groups: 1,
            replicas: 3,
            sentinels: 2,
            base_port: 18_470,
            committee: None,
            offline_replicas: 0,
            exchange: None,
            endorsement_threshold: None,
            ledger_replicas: 0,
            atomizer_replicas: 0,
        }
    }
}

impl Shape {
    /// The coordinator groups this shape runs: none in the atomizer shape, whose atomizer group
    /// orders every transaction.
    fn coordinator_group_count(&self) -> usize {
        if self.atomizer_replicas > 0 {
            0
        } else {
            self.coordinator_groups
        }
    }

    /// Whether a local topology of this shape gets what keys it needs: one attestation key per
    /// sentinel, one per FastPay authority, and a bridge key for each group that has one.
    fn check_keys(
        &self,
        attestation_keys: usize,
        authority_keys: usize,
        bridges: &GroupBridges,
    ) -> Result<(), InvalidTopology> {
        if (self.offline_replicas > 0) != bridges.offline.is_some() {
            return Err(InvalidTopology::OfflineBridgeKey);
        }
        if self.exchange.is_some() != bridges.exchange.is_some() {
            return Err(InvalidTopology::ExchangeBridgeKey);
        }
        if attestation_keys != self.sentinels {
            return Err(InvalidTopology::AttestationKeyCount {
                sentinels: self.sentinels,
                keys: attestation_keys,
            });
        }
        let authorities = self.committee.map_or(0, |c| c.authorities);
        if authority_keys != authorities {
            return Err(InvalidTopology::AuthorityKeyCount {
                authorities,
                keys: authority_keys,
            });
        }
        Ok(())
    }

    /// The name `Topology::local` gives the `index`-th sentinel.
    pub fn sentinel_name(index: usize) -> String {
        format!("sentinel-{index}")
    }
}

/// Whether `id` is a network id as `cluster up` writes it: lowercase hex of [`NETWORK_ID_BYTES`].
fn is_network_id(id: &str) -> bool {
    id.len() == 2 * NETWORK_ID_BYTES && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Topology {
    pub fn load(path: &Path) -> Result<Topology, TopologyError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TopologyError::Read {
            path: shown.clone(),
            source,
        })?;
        let topology: Topology = toml::from_str(&text).map_err(|e| TopologyError::Parse {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        topology
            .validate()
            .map_err(|problem| TopologyError::Invalid { path: shown, problem })?;
        Ok(topology)
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a topology serializes")
    }

    /// A local topology on 127.0.0.1 with consecutive ports, its data and PKI under `dir`, one
    /// attestation key (x-only hex) per sentinel, if the shape has a committee one Ed25519
    /// public key (hex) per authority and the bridge keys of its offline authority and exchange.
    pub fn local(
        shape: Shape,
        dir: &Path,
        issuers: Vec<String>,
        attestation_keys: Vec<String>,
        authority_keys: Vec<String>,
        bridges: GroupBridges,
    ) -> Result<Topology, InvalidTopology> {
        shape.check_keys(attestation_keys.len(), authority_keys.len(), &bridges)?;
        let ranges = ShardRange::partition(shape.shard_groups).map_err(InvalidTopology::ShardRanges)?;
        let mut ports = LocalPorts(shape.base_port);
        let shard_groups = ranges
            .iter()
            .enumerate()
            .map(|(i, range)| ShardGroup {
                name: format!("shard-{i}"),
                range: [range.first, range.last],
                replicas: ports.replicas(shape.replicas),
            })
            .collect();
        let coordinator_groups = (0..shape.coordinator_group_count())
            .map(|i| ReplicaGroup {
                name: format!("coordinator-{i}"),
                replicas: ports.replicas(shape.replicas),
            })
            .collect();
        let sentinels = attestation_keys
            .into_iter()
            .enumerate()
            .map(|(i, attestation_key)| Sentinel {
                name: Shape::sentinel_name(i),
                http: ports.next(),
                attestation_key,
                endorser: shape.endorsement_threshold.map(|_| ports.next()),
            })
            .collect();
        let fastpay_committee = (shape.committee.as_ref()).map(|committee| ports.committee(committee, authority_keys));
        let offline_authority = bridges.offline.map(|bridge| OfflineAuthorityConfig {
            bridge,
            replicas: ports.serving_replicas(shape.offline_replicas),
        });
        let hrp = "usd";
        let exchange = shape.exchange.zip(bridges.exchange).map(|(exchange, bridge)| {
            let own = ExchangeAsset {
                name: hrp.into(),
                core: None,
            };
            ExchangeGroupConfig {
                bridge,
                block_interval_ms: default_block_interval_ms(),
                assets: std::iter::once(own).chain(exchange.other_assets).collect(),
                replicas: ports.serving_replicas(exchange.replicas),
            }
        });
        let ledger_of_record =
            (shape.ledger_replicas > 0).then(|| LedgerOfRecordConfig::new(ports.replicas(shape.ledger_replicas)));
        let atomizer =
            (shape.atomizer_replicas > 0).then(|| AtomizerGroupConfig::new(ports.replicas(shape.atomizer_replicas)));
        let endorsement = (shape.endorsement_threshold).map(|threshold| EndorsementConfig {
            threshold,
            group_key: None,
        });
        let mut topology = Topology {
            format_version: FORMAT_VERSION,
            hrp: hrp.into(),
            network_id: Some(hex::encode(rand::random::<[u8; NETWORK_ID_BYTES]>())),
            issuers,
            retired: vec![],
            founding: false,
            restored_from: None,
            fastpay_committee,
            offline_authority,
            exchange,
            privacy: None,
            endorsement,
            ledger_of_record,
            atomizer,
            data_dir: dir.join("data"),
            pki_dir: dir.join("pki"),
            transport: TransportMode::default(),
            limits: Limits::default(),
            http: specie_service::HttpLimits::default(),
            shard_groups,
            coordinator_groups,
            sentinels,
        };
        // Last, so that the ports of every other address stay where earlier versions put them.
        for replica in topology.replicas_without_http() {
            replica.metrics = Some(ports.next());
        }
        topology.validate()?;
        Ok(topology)
    }

    pub fn shard_group(&self, name: &str) -> Result<&ShardGroup, UnknownGroup> {
        let found = self.shard_groups.iter().find(|g| g.name == name);
        found.ok_or_else(|| UnknownGroup {
            role: GroupRole::Shard,
            name: name.to_string(),
        })
    }

    pub fn coordinator_group(&self, name: &str) -> Result<&ReplicaGroup, UnknownGroup> {
        let found = self.coordinator_groups.iter().find(|g| g.name == name);
        found.ok_or_else(|| UnknownGroup {
            role: GroupRole::Coordinator,
            name: name.to_string(),
        })
    }

    /// How the core orders transactions: `2pc` or `atomizer` (as `cluster up --shape` takes it).
    pub fn shape_name(&self) -> &'static str {
        if self.atomizer.is_some() {
            "atomizer"
        } else {
            "2pc"
        }
    }

    /// The groups a sentinel submits to: the coordinator groups (2PC), or the atomizer group.
    pub fn ordering_groups(&self) -> Vec<(GroupRole, String, Vec<Replica>)> {
        self.replica_groups()
            .into_iter()
            .filter(|(role, _, _)| matches!(role, GroupRole::Coordinator | GroupRole::Atomizer))
            .collect()
    }

    /// Every authority shard group of the committee this cluster runs (none if it runs none).
    /// Every Raft group of the cluster, with what it replicates: one place that lists them, for
    /// the supervisor, the operator's status, the PKI and validation.
    pub fn replica_groups(&self) -> Vec<(GroupRole, String, Vec<Replica>)> {
        let mut groups: Vec<(GroupRole, String, Vec<Replica>)> = vec![];
        groups.extend(
            self.shard_groups
                .iter()
                .map(|g| (GroupRole::Shard, g.name.clone(), g.replicas.clone())),
        );
        groups.extend(
            self.coordinator_groups
                .iter()
                .map(|g| (GroupRole::Coordinator, g.name.clone(), g.replicas.clone())),
        );
        groups.extend(
            self.authority_groups()
                .into_iter()
                .map(|g| (GroupRole::Authority, g.name.clone(), g.wire_replicas())),
        );
        groups.extend(self.offline_authority.iter().map(|o| {
            (
                GroupRole::Offline,
                OFFLINE_AUTHORITY_GROUP.to_string(),
                o.wire_replicas(),
            )
        }));
        groups.extend(
            self.exchange
                .iter()
                .map(|e| (GroupRole::Exchange, EXCHANGE_GROUP.to_string(), e.wire_replicas())),
        );
        groups.extend(
            self.ledger_of_record
                .iter()
                .map(|l| (GroupRole::Archiver, ARCHIVER_GROUP.to_string(), l.replicas.clone())),
        );
        groups.extend(
            self.atomizer
                .iter()
                .map(|a| (GroupRole::Atomizer, ATOMIZER_GROUP.to_string(), a.replicas.clone())),
        );
        groups
    }

    /// The HTTP API of every replica that serves one (FastPay authorities, the offline
    /// authority, the exchange).
    /// The replicas of the groups with no HTTP API of their own (shards, coordinators, the
    /// archivers and the atomizer), which serve their metrics on a port of their own.
    fn replicas_without_http(&mut self) -> impl Iterator<Item = &mut Replica> {
        let shard = self.shard_groups.iter_mut().flat_map(|g| g.replicas.iter_mut());
        let coordinator = self.coordinator_groups.iter_mut().flat_map(|g| g.replicas.iter_mut());
        let ledger = self.ledger_of_record.iter_mut().flat_map(|l| l.replicas.iter_mut());
        let atomizer = self.atomizer.iter_mut().flat_map(|a| a.replicas.iter_mut());
        shard.chain(coordinator).chain(ledger).chain(atomizer)
    }

    /// Every process Prometheus scrapes, with the labels that name it: replicas at their
    /// metrics port or their HTTP API, sentinels at theirs. Written by `specie cluster up` as a
    /// Prometheus file-based service discovery file ([`crate::supervisor::TARGETS_FILE`]).
    pub fn scrape_targets(&self) -> Vec<ScrapeTarget> {
        let target = |address: SocketAddr, role: &str, group: &str, replica: String| ScrapeTarget {
            address,
            role: role.to_string(),
            group: group.to_string(),
            replica,
        };
        let mut targets = vec![];
        for (role, group, replicas) in self.replica_groups() {
            for replica in replicas {
                if let Some(address) = replica.metrics {
                    targets.push(target(address, role.label(), &group, replica.id.to_string()));
                }
            }
        }
        let serving = (self.authority_groups().into_iter())
            .map(|g| (GroupRole::Authority, g.name, g.replicas))
            .chain((self.offline_authority.iter()).map(|o| {
                (
                    GroupRole::Offline,
                    OFFLINE_AUTHORITY_GROUP.to_string(),
                    o.replicas.clone(),
                )
            }))
            .chain(
                (self.exchange.iter()).map(|e| (GroupRole::Exchange, EXCHANGE_GROUP.to_string(), e.replicas.clone())),
            );
        for (role, group, replicas) in serving {
            for replica in replicas {
                targets.push(target(replica.http, role.label(), &group, replica.id.to_string()));
            }
        }
        for sentinel in &self.sentinels {
            targets.push(target(sentinel.http, "sentinel", &sentinel.name, String::new()));
        }
        targets
    }

    fn serving_http(&self) -> Vec<SocketAddr> {
        self.authority_groups()
            .into_iter()
            .flat_map(|g| g.replicas)
            .chain(self.offline_authority.iter().flat_map(|o| o.replicas.clone()))
            .chain(self.exchange.iter().flat_map(|e| e.replicas.clone()))
            .map(|r| r.http)
            .collect()
    }

    pub fn authority_groups(&self) -> Vec<AuthorityGroup> {
        self.fastpay_committee
            .as_ref()
            .map_or_else(Vec::new, FastpayCommitteeConfig::groups)
    }

    /// Which authority and shard the group `name` is, if the cluster runs such a group.
    pub fn authority_place(&self, name: &str) -> Option<AuthorityPlace> {
        let rest = name.strip_prefix("authority-")?;
        let (authority, shard) = rest.split_once("-shard-")?;
        let canonical = |text: &str| text.parse::<u32>().ok().filter(|n| n.to_string() == text);
        let (authority, shard) = (canonical(authority)?, canonical(shard)?);
        let processes = self.fastpay_committee.as_ref()?.authorities.get(authority as usize)?;
        (shard < processes.shards.len() as u32).then_some(AuthorityPlace {
            authority: u16::try_from(authority).ok()?,
            shard,
        })
    }

    pub fn authority_group(&self, name: &str) -> Result<AuthorityGroup, UnknownGroup> {
        let found = self.authority_groups().into_iter().find(|g| g.name == name);
        found.ok_or_else(|| UnknownGroup {
            role: GroupRole::Authority,
            name: name.to_string(),
        })
    }

    /// Every sentinel's attestation key, by name (validated by [`Topology::validate`]).
    pub fn sentinel_keys(&self) -> crate::protocol::SentinelKeys {
        self.sentinels
            .iter()
            .filter_map(|s| Some((s.name.clone(), xonly_hex(&s.attestation_key)?)))
            .collect()
    }

    pub fn shard_ranges(&self) -> Vec<ShardRange> {
        self.shard_groups
            .iter()
            .map(|g| ShardRange {
                first: g.range[0],
                last: g.range[1],
            })
            .collect()
    }

    /// Checks everything a process would otherwise trip over at run time.
    pub fn validate(&self) -> Result<(), InvalidTopology> {
        if self.format_version != FORMAT_VERSION {
            return Err(InvalidTopology::UnsupportedFormat {
                found: self.format_version,
            });
        }
        let ordering = (!self.coordinator_groups.is_empty(), self.atomizer.is_some());
        if self.shard_groups.is_empty() || ordering == (false, false) || self.sentinels.is_empty() {
            return Err(InvalidTopology::MissingRole);
        }
        if ordering == (true, true) {
            return Err(InvalidTopology::TwoShapes);
        }
        if self.coordinator_groups.len() > COORDINATOR_GROUPS_MAX {
            return Err(InvalidTopology::CoordinatorGroupCount {
                groups: self.coordinator_groups.len(),
            });
        }
        if self.coordinator_groups.len() > 1 && self.transport != TransportMode::MutualTls {
            return Err(InvalidTopology::CoordinatorGroupsNeedMutualTls);
        }
        ShardRange::check_cover(&self.shard_ranges()).map_err(InvalidTopology::ShardRanges)?;
        if let Some(id) = self.network_id.as_ref().filter(|id| !is_network_id(id)) {
            return Err(InvalidTopology::BadNetworkId {
                id: id.chars().take(40).collect(),
            });
        }
        if let Some(issuer) = self.issuers.iter().find(|issuer| xonly_hex(issuer).is_none()) {
            return Err(InvalidTopology::BadIssuer { issuer: issuer.clone() });
        }
        if let Some(committee) = &self.fastpay_committee {
            committee.chain()?;
            committee.validate_processes(self.transport)?;
        }
        if let Some(offline) = &self.offline_authority {
            let key = offline.bridge_key().ok_or(InvalidTopology::OfflineBridgeKey)?;
            // A small-order key would let anyone forge payouts (a signature by it verifies for many messages).
            specie_ed25519::check_public_key(&key).map_err(|_| InvalidTopology::OfflineBridgeKey)?;
        }
        if let Some(exchange) = &self.exchange {
            exchange.validate(&self.hrp)?;
        }
        if let Some(privacy) = &self.privacy {
            privacy.rules()?;
        }
        if let Some(endorsement) = &self.endorsement {
            endorsement.validate(&self.sentinels)?;
        }
        if let Some(ledger) = &self.ledger_of_record {
            ledger.validate()?;
        }
        if let Some(atomizer) = &self.atomizer {
            atomizer.validate()?;
        }
        if let Some(sentinel) = self.sentinels.iter().find(|s| xonly_hex(&s.attestation_key).is_none()) {
            return Err(InvalidTopology::BadAttestationKey {
                sentinel: sentinel.name.clone(),
            });
        }
        self.http.validate().map_err(InvalidTopology::Http)?;
        self.limits.validate()?;
        self.validate_names_and_addresses()
    }

    /// `self` with the groups' replica lists and the retired replicas of `other`, for the
    /// groups both have: what a running process takes from its re-read cluster file
    /// ([`crate::live`]).
    pub fn with_membership_of(&self, other: &Topology) -> Topology {
        let mut merged = self.clone();
        merged.retired = other.retired.clone();
        for group in &mut merged.shard_groups {
            if let Some(new) = other.shard_groups.iter().find(|g| g.name == group.name) {
                group.replicas = new.replicas.clone();
            }
        }
        for group in &mut merged.coordinator_groups {
            if let Some(new) = other.coordinator_groups.iter().find(|g| g.name == group.name) {
                group.replicas = new.replicas.clone();
            }
        }
        if let (Some(mine), Some(new)) = (&mut merged.fastpay_committee, &other.fastpay_committee) {
            mine.records = new.records.clone();
            for (authority, new_authority) in mine.authorities.iter_mut().zip(&new.authorities) {
                for (shard, new_shard) in authority.shards.iter_mut().zip(&new_authority.shards) {
                    shard.replicas = new_shard.replicas.clone();
                }
            }
        }
        if let (Some(mine), Some(new)) = (&mut merged.offline_authority, &other.offline_authority) {
            mine.replicas = new.replicas.clone();
        }
        if let (Some(mine), Some(new)) = (&mut merged.exchange, &other.exchange) {
            mine.replicas = new.replicas.clone();
        }
        if let (Some(mine), Some(new)) = (&mut merged.ledger_of_record, &other.ledger_of_record) {
            mine.replicas = new.replicas.clone();
        }
        if let (Some(mine), Some(new)) = (&mut merged.atomizer, &other.atomizer) {
            mine.replicas = new.replicas.clone();
        }
        merged
    }

    /// Appends a replica to `group`: `plain` to a group without an HTTP API of its own,
    /// `serving` to one with (FastPay authority shards, the offline authority, the exchange).
    /// False if there is no such group.
    pub fn add_replica(&mut self, group: &str, plain: Replica, serving: AuthorityReplica) -> bool {
        match self.replica_lists(group) {
            Some(ReplicaList::Plain(list)) => list.push(plain),
            Some(ReplicaList::Serving(list)) => list.push(serving),
            None => return false,
        }
        true
    }

    /// Takes replica `id` out of `group`'s list; false if it was not there.
    pub fn remove_replica(&mut self, group: &str, id: u64) -> bool {
        let before_after = match self.replica_lists(group) {
            Some(ReplicaList::Plain(list)) => (list.len(), {
                list.retain(|r| r.id != id);
                list.len()
            }),
            Some(ReplicaList::Serving(list)) => (list.len(), {
                list.retain(|r| r.id != id);
                list.len()
            }),
            None => return false,
        };
        before_after.0 != before_after.1
    }

    fn replica_lists(&mut self, group: &str) -> Option<ReplicaList<'_>> {
        if let Some(place) = self.authority_place(group) {
            let committee = self.fastpay_committee.as_mut()?;
            let shard = &mut committee.authorities[usize::from(place.authority)].shards[place.shard as usize];
            return Some(ReplicaList::Serving(&mut shard.replicas));
        }
        let list = match group {
            OFFLINE_AUTHORITY_GROUP => ReplicaList::Serving(&mut self.offline_authority.as_mut()?.replicas),
            EXCHANGE_GROUP => ReplicaList::Serving(&mut self.exchange.as_mut()?.replicas),
            ARCHIVER_GROUP => ReplicaList::Plain(&mut self.ledger_of_record.as_mut()?.replicas),
            ATOMIZER_GROUP => ReplicaList::Plain(&mut self.atomizer.as_mut()?.replicas),
            _ => {
                if let Some(g) = self.shard_groups.iter_mut().find(|g| g.name == group) {
                    ReplicaList::Plain(&mut g.replicas)
                } else {
                    ReplicaList::Plain(&mut self.coordinator_groups.iter_mut().find(|g| g.name == group)?.replicas)
                }
            }
        };
        Some(list)
    }

    /// The HTTP API of replica `id` of `group` (a group whose replicas serve one): where a
    /// replica that does not lead sends its callers.
    pub fn http_of(&self, group: &str, id: u64) -> Option<SocketAddr> {
        let replicas = if let Some(place) = self.authority_place(group) {
            let committee = self.fastpay_committee.as_ref()?;
            &committee.authorities[usize::from(place.authority)].shards[place.shard as usize].replicas
        } else {
            match group {
                OFFLINE_AUTHORITY_GROUP => &self.offline_authority.as_ref()?.replicas,
                EXCHANGE_GROUP => &self.exchange.as_ref()?.replicas,
                _ => return None,
            }
        };
        replicas.iter().find(|r| r.id == id).map(|r| r.http)
    }

    /// Whether `identity` was removed from its group ([`Topology::retired`]).
    pub fn is_retired(&self, identity: &crate::Identity) -> bool {
        let name = identity.to_string();
        self.retired.contains(&name)
    }

    /// Group and sentinel names are DNS labels used once; replica ids are unique per group;
    /// every address is used once; a retired replica is no member.
    fn validate_names_and_addresses(&self) -> Result<(), InvalidTopology> {
        let mut names = BTreeSet::new();
        let mut addresses = BTreeSet::new();
        let groups = self.replica_groups();
        if let Some(retired) = self
            .retired
            .iter()
            .find(|r| !matches!(crate::Identity::parse(r), Some(crate::Identity::Replica { .. })))
        {
            return Err(InvalidTopology::RetiredNotAReplica {
                name: retired.chars().take(80).collect(),
            });
        }
        for (role, name, replicas) in &groups {
            dns_label(name)?;
            if !names.insert(name.clone()) {
                return Err(InvalidTopology::GroupNameTwice { name: name.clone() });
            }
            if replicas.is_empty() || replicas.len() > 7 {
                return Err(InvalidTopology::ReplicaCount {
                    group: name.clone(),
                    replicas: replicas.len(),
                });
            }
            let mut ids = BTreeSet::new();
            for replica in replicas {
                if replica.id == 0 || !ids.insert(replica.id) {
                    return Err(InvalidTopology::ReplicaIds { group: name.clone() });
                }
                let identity = crate::Identity::Replica {
                    role: *role,
                    group: name.clone(),
                    id: replica.id,
                };
                if self.is_retired(&identity) {
                    return Err(InvalidTopology::RetiredMember {
                        identity: identity.to_string(),
                    });
                }
                for address in std::iter::once(replica.address).chain(replica.metrics) {
                    if !addresses.insert(address) {
                        return Err(InvalidTopology::AddressTwice { address });
                    }
                }
            }
        }
        for address in self.serving_http() {
            if !addresses.insert(address) {
                return Err(InvalidTopology::AddressTwice { address });
            }
        }
        for sentinel in &self.sentinels {
            dns_label(&sentinel.name)?;
            if !names.insert(sentinel.name.clone()) {
                return Err(InvalidTopology::SentinelNameTwice {
                    name: sentinel.name.clone(),
                });
            }
            for address in std::iter::once(sentinel.http).chain(sentinel.endorser) {
                if !addresses.insert(address) {
                    return Err(InvalidTopology::AddressTwice { address });
                }
            }
        }
        Ok(())
    }
}

impl Limits {
    /// Zeros would stall or refuse everything; elections must outlast a few heartbeats.
    fn validate(&self) -> Result<(), InvalidTopology> {
        let positive = [
            ("frame_bytes_max", u64::from(self.frame_bytes_max)),
            ("requests_in_flight_max", u64::from(self.requests_in_flight_max)),
            ("request_timeout_ms", self.request_timeout_ms),
            ("batch_transactions_max", u64::from(self.batch_transactions_max)),
            ("dtxns_in_flight_max", u64::from(self.dtxns_in_flight_max)),
            ("raft_heartbeat_ms", self.raft_heartbeat_ms),
            ("raft_snapshot_entries", self.raft_snapshot_entries),
            ("handshake_timeout_ms", self.handshake_timeout_ms),
            ("handshakes_max", u64::from(self.handshakes_max)),
        ];
        if let Some(&(name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(InvalidTopology::ZeroLimit { name });
        }
        if self.raft_election_timeout_ms < 3 * self.raft_heartbeat_ms {
            return Err(InvalidTopology::ElectionTimeoutTooShort {
                raft_election_timeout_ms: self.raft_election_timeout_ms,
                raft_heartbeat_ms: self.raft_heartbeat_ms,
            });
        }
        Ok(())
    }
}

/// A 32-byte x-only public key from lowercase or uppercase hex, if it is one.
fn xonly_hex(text: &str) -> Option<[u8; 32]> {
    let key: [u8; 32] = hex::decode(text).ok()?.try_into().ok()?;
    specie_transaction::signing::parse_xonly(&key).map(|_| key)
}

/// Group and sentinel names become labels of certificate names (`1.shard-0.shard.specie`).
fn dns_label(name: &str) -> Result<(), InvalidTopology> {
    let ok = (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(InvalidTopology::NotADnsLabel { name: name.to_string() })
    }
}

#[cfg(test)]
pub(crate) fn test_keys(count: usize) -> Vec<String> {
    (0..count)
        .map(|_| {
            hex::encode(
                secp256k1::Keypair::new_global(&mut rand::thread_rng())
                    .x_only_public_key()
                    .0
                    .serialize(),
            )
        })
        .collect()
}

/// `Topology::local` of `shape` (no committee, offline authority or exchange) under /tmp/x,
/// with a key for each sentinel.
#[cfg(test)]
pub(crate) fn local_for_tests(shape: Shape) -> Topology {
    let sentinels = shape.sentinels;
    Topology::local(
        shape,
        Path::new("/tmp/x"),
        vec![],
        test_keys(sentinels),
        vec![],
        GroupBridges::default(),
    )
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_local() -> Topology {
        local_for_tests(Shape::default())
    }

    #[test]
    fn the_default_local_topology_round_trips_through_toml() {
        let topology = default_local();
        assert_eq!(topology.shard_groups.len(), 2);
        assert_eq!(topology.coordinator_groups.len(), 1);
        assert!(topology.shard_groups.iter().all(|g| g.replicas.len() == 3));
        assert_eq!(topology.sentinels.len(), 2);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.toml");
        std::fs::write(&path, topology.to_toml()).unwrap();
        assert_eq!(Topology::load(&path).unwrap(), topology);
        assert!(!topology.to_toml().contains("fastpay_committee"), "absent, not empty");
    }

    #[test]
    fn a_privacy_section_round_trips_and_every_bad_key_is_refused_by_name() {
        let mut topology = default_local();
        use specie_codec::Encode;
        let ra = specie_credential::RegistrationAuthority::from_seed(&[1; 32]).public_key();
        let owner = specie_credential::AuditorSecret::from_seed(&[2; 32]).public();
        let value = specie_confidential::AuditorSecret::from_seed(&[3; 32]).public();
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(4);
        let (certifiers, _) = specie_credential::unlinkable::deal_certifiers(2, 3, &mut rng).unwrap();
        let good = PrivacyConfig {
            auditors: vec![hex::encode(value.to_bytes())],
            registration_authority: Some(hex::encode(ra.encode())),
            owner_auditors: vec![hex::encode(owner.encode())],
            active_auditors: test_keys(1),
            certifiers: Some(hex::encode(certifiers.encode())),
        };
        topology.privacy = Some(good.clone());
        assert_eq!(topology.validate(), Ok(()));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.toml");
        std::fs::write(&path, topology.to_toml()).unwrap();
        assert_eq!(Topology::load(&path).unwrap(), topology);
        let rules = good.rules().unwrap();
        assert_eq!(
            (
                rules.auditors.clone(),
                rules.registration_authority.clone(),
                rules.owner_auditors()
            ),
            (vec![value.to_bytes()], Some(ra), &[owner][..])
        );
        assert_eq!(rules.certifiers, Some(certifiers));
        let field = |config: PrivacyConfig| match config.rules() {
            Err(InvalidTopology::PrivacyKey { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let not_a_point = "ff".repeat(32);
        assert_eq!(
            field(PrivacyConfig {
                auditors: vec![not_a_point.clone()],
                ..good.clone()
            }),
            "auditors"
        );
        let ra_bad = PrivacyConfig {
            registration_authority: Some("00".into()),
            ..good.clone()
        };
        assert_eq!(field(ra_bad), "registration_authority");
        let owner_bad = PrivacyConfig {
            owner_auditors: vec![not_a_point.clone()],
            ..good.clone()
        };
        assert_eq!(field(owner_bad), "owner_auditors");
        let no_ra = PrivacyConfig {
            registration_authority: None,
            ..good.clone()
        };
        assert_eq!(field(no_ra), "owner_auditors", "owner auditors only beside an RA");
        let certifiers_without_ra = PrivacyConfig {
            registration_authority: None,
            owner_auditors: vec![],
            ..good.clone()
        };
        assert_eq!(
            field(certifiers_without_ra),
            "certifiers",
            "certifiers only beside an RA"
        );
        let certifiers_bad = PrivacyConfig {
            certifiers: Some("00".into()),
            ..good.clone()
        };
        assert_eq!(field(certifiers_bad), "certifiers");
        assert_eq!(
            field(PrivacyConfig {
                active_auditors: vec![not_a_point],
                ..good
            }),
            "active_auditors"
        );
    }

    #[test]
    fn a_ledger_of_record_section_is_validated_and_survives_the_file() {
        let shape = Shape {
            ledger_replicas: 3,
            ..Shape::default()
        };
        let local = Topology::local(
            shape,
            Path::new("/tmp/x"),
            vec![],
            test_keys(2),
            vec![],
            GroupBridges::default(),
        )
        .unwrap();
        let ledger = local.ledger_of_record.clone().unwrap();
        assert_eq!(ledger.replicas.len(), 3);
        assert_eq!(toml::from_str::<Topology>(&local.to_toml()).unwrap(), local);
        assert!(local
            .replica_groups()
            .iter()
            .any(|(role, name, _)| *role == GroupRole::Archiver && name == ARCHIVER_GROUP));
        let config = ledger.archiver();
        assert_eq!(config.decide_after_ms, 60_000);
        assert_eq!(config.ledger.block_records_max, 10_000);
        for (broken, field) in [
            (
                LedgerOfRecordConfig {
                    seal_interval_ms: 0,
                    ..ledger.clone()
                },
                "seal_interval_ms",
            ),
            (
                LedgerOfRecordConfig {
                    decide_after_ms: 10,
                    ..ledger.clone()
                },
                "decide_after_ms",
            ),
            (
                LedgerOfRecordConfig {
                    block_records_max: 0,
                    ..ledger.clone()
                },
                "block_records_max",
            ),
            (
                LedgerOfRecordConfig {
                    block_records_max: 10_001,
                    ..ledger.clone()
                },
                "block_records_max",
            ),
        ] {
            let topology = Topology {
                ledger_of_record: Some(broken),
                ..local.clone()
            };
            let error = topology.validate().unwrap_err().to_string();
            assert!(error.contains(field), "{error}");
        }
        let mut twice = local.clone();
        twice.ledger_of_record.as_mut().unwrap().replicas[1].address = local.shard_groups[0].replicas[0].address;
        assert!(matches!(twice.validate(), Err(InvalidTopology::AddressTwice { .. })));
        // A metrics port is an address like any other: used once, and in the scrape targets.
        let archiver_metrics = local.ledger_of_record.as_ref().unwrap().replicas[0].metrics.unwrap();
        let mut twice = local.clone();
        twice.shard_groups[0].replicas[0].metrics = Some(archiver_metrics);
        assert_eq!(
            twice.validate(),
            Err(InvalidTopology::AddressTwice {
                address: archiver_metrics
            })
        );
        let targets = local.scrape_targets();
        let archiver = targets.iter().find(|t| t.address == archiver_metrics).unwrap();
        assert_eq!(
            (
                archiver.role.as_str(),
                archiver.group.as_str(),
                archiver.replica.as_str()
            ),
            ("archiver", "archiver", "1")
        );
        let plain = local
            .replica_groups()
            .iter()
            .map(|(_, _, replicas)| replicas.len())
            .sum::<usize>();
        assert_eq!(
            targets.len(),
            plain + local.sentinels.len(),
            "every replica and sentinel, once"
        );
    }

    /// One shape at a time: an `[atomizer]` group replaces the coordinator groups, survives the
    /// file, is validated, and is what sentinels submit to.
    #[test]
    fn an_atomizer_section_replaces_the_coordinators_and_is_validated() {
        let local = local_for_tests(Shape {
            atomizer_replicas: 3,
            ..Shape::default()
        });
        let atomizer = local.atomizer.clone().unwrap();
        assert_eq!((atomizer.replicas.len(), atomizer.window_blocks), (3, 64));
        assert!(local.coordinator_groups.is_empty());
        assert_eq!(toml::from_str::<Topology>(&local.to_toml()).unwrap(), local);
        let ordering = local.ordering_groups();
        assert_eq!(ordering.len(), 1);
        assert_eq!(
            (ordering[0].0, ordering[0].1.as_str()),
            (GroupRole::Atomizer, ATOMIZER_GROUP)
        );
        let both = Topology {
            coordinator_groups: local_for_tests(Shape::default()).coordinator_groups,
            ..local.clone()
        };
        assert!(matches!(both.validate(), Err(InvalidTopology::TwoShapes)));
        let neither = Topology {
            atomizer: None,
            ..local.clone()
        };
        assert!(matches!(neither.validate(), Err(InvalidTopology::MissingRole)));
        for (broken, field) in [
            (3, 2000, "window_blocks"),
            (4097, 2000, "window_blocks"),
            (64, 0, "block_transactions_max"),
            (64, 100_001, "block_transactions_max"),
        ]
        .map(|(window_blocks, block_transactions_max, field)| {
            let config = AtomizerGroupConfig {
                window_blocks,
                block_transactions_max,
                ..atomizer.clone()
            };
            (config, field)
        }) {
            let topology = Topology {
                atomizer: Some(broken),
                ..local.clone()
            };
            let error = topology.validate().unwrap_err().to_string();
            assert!(error.contains(field), "{error}");
        }
    }

    #[test]
    fn an_endorsement_section_is_validated_before_anything_starts() {
        let shape = Shape {
            endorsement_threshold: Some(2),
            ..Shape::default()
        };
        let mut topology = local_for_tests(shape);
        assert!(
            topology.sentinels.iter().all(|s| s.endorser.is_some()),
            "every sentinel gets an endorser port"
        );
        let key = "f4641cc6d368e09ee50b7493496c4fee63af7bc14de45403f1d5b4c5a7e1b85b".to_string();
        let endorsement = |threshold: u16, group_key: Option<&str>| {
            Some(EndorsementConfig {
                threshold,
                group_key: group_key.map(str::to_string),
            })
        };
        topology.endorsement = endorsement(2, Some(&key));
        assert_eq!(topology.validate(), Ok(()));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.toml");
        std::fs::write(&path, topology.to_toml()).unwrap();
        assert_eq!(Topology::load(&path).unwrap(), topology);
        let refused = |topology: &Topology| topology.validate().unwrap_err();
        for threshold in [0, 3] {
            let mut bad = topology.clone();
            bad.endorsement = endorsement(threshold, Some(&key));
            assert!(
                matches!(refused(&bad), InvalidTopology::EndorsementThreshold { .. }),
                "k = {threshold}"
            );
        }
        let mut bad = topology.clone();
        bad.endorsement = endorsement(2, Some(&"ff".repeat(32)));
        assert_eq!(refused(&bad), InvalidTopology::EndorsementGroupKey);
        let mut bad = topology.clone();
        bad.sentinels[1].endorser = None;
        assert_eq!(
            refused(&bad),
            InvalidTopology::NoEndorserAddress {
                sentinel: "sentinel-1".into()
            }
        );
        let mut bad = topology.clone();
        bad.sentinels[1].endorser = Some(bad.sentinels[0].http);
        assert!(matches!(refused(&bad), InvalidTopology::AddressTwice { .. }));
        // No group key yet (the sentinels have not made it): valid, and coordinators refuse all.
        topology.endorsement = endorsement(2, None);
        assert_eq!(topology.validate(), Ok(()));
    }

    #[test]
    fn a_fastpay_committee_round_trips_through_toml_and_builds_its_committee() {
        let mut topology = default_local();
        let keys: Vec<[u8; 32]> = (0..4)
            .map(|i| {
                specie_fastpay::deterministic_key("authority", i)
                    .verifying_key()
                    .to_bytes()
            })
            .collect();
        let config = FastpayCommitteeConfig {
            epoch: 2,
            members: keys.iter().map(hex::encode).collect(),
            credit_retransmit_ms: 100,
            channel_credits_max: 10,
            authorities: vec![],
            records: vec![],
        };
        topology.fastpay_committee = Some(config.clone());
        assert_eq!(topology.validate(), Ok(()));
        assert_eq!(config.committee().unwrap(), Committee::new(2, keys.clone()).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.toml");
        std::fs::write(&path, topology.to_toml()).unwrap();
        assert!(topology.to_toml().contains("[fastpay_committee]"));
        assert_eq!(Topology::load(&path).unwrap(), topology);

        // A later epoch's record: kept through the file, and the chain it makes checked; a
        // record that does not follow (below quorum, or not hex) makes the file invalid.
        let first = config.committee().unwrap();
        let mut members = keys.clone();
        members[1] = specie_fastpay::deterministic_key("authority", 9)
            .verifying_key()
            .to_bytes();
        let mut record = CommitteeRecord::propose(&first, members).unwrap();
        for seat in [0, 2] {
            record.endorse(seat, &specie_fastpay::deterministic_key("authority", u64::from(seat)));
        }
        let short = record.to_hex();
        record.endorse(3, &specie_fastpay::deterministic_key("authority", 3));
        let committee = topology.fastpay_committee.as_mut().unwrap();
        committee.records = vec![record.to_hex()];
        assert_eq!(topology.validate(), Ok(()));
        std::fs::write(&path, topology.to_toml()).unwrap();
        let loaded = Topology::load(&path).unwrap();
        let chain = loaded.fastpay_committee.as_ref().unwrap().chain().unwrap();
        assert_eq!((chain.first(), chain.current().epoch()), (&first, 3));
        for (bad, why) in [(short, "below"), ("zz".to_string(), "hex")] {
            topology.fastpay_committee.as_mut().unwrap().records = vec![bad];
            let error = topology.validate().unwrap_err().to_string();
            assert!(
                error.starts_with("fastpay_committee.records[0]") && error.contains(why),
                "{error}"
            );
        }
    }

    fn committee_topology() -> Topology {
        let shape = Shape {
            committee: Some(CommitteeShape::default()),
            ..Shape::default()
        };
        let keys = (0..4)
            .map(|i| {
                hex::encode(
                    specie_fastpay::deterministic_key("authority", i)
                        .verifying_key()
                        .to_bytes(),
                )
            })
            .collect();
        Topology::local(
            shape,
            Path::new("/tmp/x"),
            vec![],
            test_keys(2),
            keys,
            GroupBridges::default(),
        )
        .unwrap()
    }

    #[test]
    fn a_committee_of_processes_round_trips_and_a_file_without_one_still_loads() {
        let topology = committee_topology();
        let groups = topology.authority_groups();
        assert_eq!(groups.len(), 4 * 2);
        assert_eq!(groups[3].name, "authority-1-shard-1");
        assert_eq!(groups[3].place, AuthorityPlace { authority: 1, shard: 1 });
        assert!(groups.iter().all(|g| g.shards == 2 && g.replicas.len() == 1));
        assert_eq!(
            topology.authority_place("authority-3-shard-1"),
            Some(AuthorityPlace { authority: 3, shard: 1 })
        );
        for unlisted in [
            "authority-4-shard-0",
            "authority-0-shard-2",
            "authority-01-shard-0",
            "authority-0-shard-",
        ] {
            assert_eq!(topology.authority_place(unlisted), None, "{unlisted}");
        }
        assert_eq!(topology.authority_group("authority-0-shard-1").unwrap(), groups[1]);
        assert_eq!(
            topology.authority_group("shard-0").unwrap_err().to_string(),
            "the cluster file has no authority group named 'shard-0'"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.toml");
        std::fs::write(&path, topology.to_toml()).unwrap();
        assert_eq!(Topology::load(&path).unwrap(), topology);

        // A file from before the committee's processes: epoch and members only.
        let mut old = default_local();
        let members: Vec<String> = topology.fastpay_committee.as_ref().unwrap().members.clone();
        let mut text = old.to_toml();
        text.push_str(&format!("\n[fastpay_committee]\nepoch = 1\nmembers = {members:?}\n"));
        std::fs::write(&path, text).unwrap();
        let loaded = Topology::load(&path).unwrap();
        let committee = loaded.fastpay_committee.as_ref().unwrap();
        assert!(committee.authorities.is_empty());
        assert_eq!(
            (committee.credit_retransmit_ms, committee.channel_credits_max),
            (100, 10_000)
        );
        assert!(loaded.authority_groups().is_empty());
        old.fastpay_committee = loaded.fastpay_committee.clone();
        assert_eq!(loaded, old);
    }

    #[test]
    fn mistakes_in_a_committee_of_processes_are_named() {
        let good = committee_topology();
        fn committee(topology: &mut Topology) -> &mut FastpayCommitteeConfig {
            topology.fastpay_committee.as_mut().unwrap()
        }
        let mut missing = good.clone();
        committee(&mut missing).authorities.pop();
        assert_eq!(
            missing.validate(),
            Err(InvalidTopology::AuthorityCount {
                members: 4,
                authorities: 3
            })
        );
        let mut no_shards = good.clone();
        committee(&mut no_shards).authorities[2].shards.clear();
        assert_eq!(
            no_shards.validate().unwrap_err().to_string(),
            "fastpay_committee.authorities[2].shards: 0 shards; use 1 to 64"
        );
        let mut plaintext = good.clone();
        plaintext.transport = TransportMode::InsecurePlaintext;
        assert_eq!(plaintext.validate(), Err(InvalidTopology::CommitteeNeedsMutualTls));
        let mut zero = good.clone();
        committee(&mut zero).channel_credits_max = 0;
        assert_eq!(
            zero.validate().unwrap_err().to_string(),
            "fastpay_committee.channel_credits_max must be positive"
        );
        let mut clash = good.clone();
        let sentinel = clash.sentinels[0].http;
        committee(&mut clash).authorities[1].shards[0].replicas[0].http = sentinel;
        assert_eq!(
            clash.validate(),
            Err(InvalidTopology::AddressTwice { address: sentinel })
        );
        let mut wire_clash = good.clone();
        let http = wire_clash.authority_groups()[0].replicas[0].http;
        committee(&mut wire_clash).authorities[0].shards[1].replicas[0].address = http;
        assert_eq!(
            wire_clash.validate(),
            Err(InvalidTopology::AddressTwice { address: http })
        );
        let mut ids = good.clone();
        let replica = committee(&mut ids).authorities[3].shards[1].replicas[0].clone();
        committee(&mut ids).authorities[3].shards[1].replicas.push(replica);
        assert_eq!(
            ids.validate(),
            Err(InvalidTopology::ReplicaIds {
                group: "authority-3-shard-1".into()
            })
        );
        let mut name = good.clone();
        name.shard_groups[0].name = "authority-0-shard-0".into();
        assert_eq!(
            name.validate(),
            Err(InvalidTopology::GroupNameTwice {
                name: "authority-0-shard-0".into()
            })
        );
        let shape = Shape {
            committee: Some(CommitteeShape::default()),
            ..Shape::default()
        };
        assert_eq!(
            Topology::local(
                shape,
                Path::new("/tmp/x"),
                vec![],
                test_keys(2),
                vec![],
                GroupBridges::default()
            ),
            Err(InvalidTopology::AuthorityKeyCount {
                authorities: 4,
                keys: 0
            })
        );
    }

    #[test]
    fn mistakes_are_named() {
        let good = default_local();
        let mut bad_name = good.clone();
        bad_name.shard_groups[0].name = "Shard.0".into();
        assert_eq!(
            bad_name.validate(),
            Err(InvalidTopology::NotADnsLabel { name: "Shard.0".into() })
        );
        assert!(bad_name.validate().unwrap_err().to_string().contains("lowercase"));
        let mut bad_key = good.clone();
        bad_key.sentinels[0].attestation_key = "00".into();
        assert_eq!(
            bad_key.validate(),
            Err(InvalidTopology::BadAttestationKey {
                sentinel: "sentinel-0".into()
            })
        );
        let mut gap = good.clone();
        gap.shard_groups[1].range[0] += 1;
        assert!(matches!(gap.validate(), Err(InvalidTopology::ShardRanges(_))));
        assert!(gap
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("shard group ranges: "));
        let mut clash = good.clone();
        clash.sentinels[1].http = clash.sentinels[0].http;
        let address = clash.sentinels[0].http;
        assert_eq!(clash.validate(), Err(InvalidTopology::AddressTwice { address }));
        assert_eq!(
            clash.validate().unwrap_err().to_string(),
            format!("address {address} is used twice")
        );
        let mut zero = good.clone();
        zero.limits.request_timeout_ms = 0;
        assert_eq!(
            zero.validate(),
            Err(InvalidTopology::ZeroLimit {
                name: "request_timeout_ms"
            })
        );
        assert_eq!(
            zero.validate().unwrap_err().to_string(),
            "limits.request_timeout_ms must be positive"
        );
        let mut issuer = good.clone();
        issuer.issuers.push("zz".into());
        assert_eq!(
            issuer.validate(),
            Err(InvalidTopology::BadIssuer { issuer: "zz".into() })
        );
        let mut committee = good.clone();
        committee.fastpay_committee = Some(FastpayCommitteeConfig {
            epoch: 0,
            members: vec!["zz".into()],
            credit_retransmit_ms: 100,
            channel_credits_max: 10,
            authorities: vec![],
            records: vec![],
        });
        assert_eq!(
            committee.validate(),
            Err(InvalidTopology::FastpayMemberNotHex {
                index: 0,
                member: "zz".into()
            })
        );
        committee.fastpay_committee = Some(FastpayCommitteeConfig {
            epoch: 0,
            members: vec![],
            credit_retransmit_ms: 100,
            channel_credits_max: 10,
            authorities: vec![],
            records: vec![],
        });
        assert_eq!(
            committee.validate().unwrap_err().to_string(),
            "fastpay_committee: a committee needs at least one authority"
        );
        let mut empty = good.clone();
        empty.coordinator_groups[0].replicas.clear();
        assert_eq!(
            empty.validate(),
            Err(InvalidTopology::ReplicaCount {
                group: "coordinator-0".into(),
                replicas: 0
            })
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "format_version = 1\nunknown = 3\n").unwrap();
        assert!(matches!(Topology::load(&path), Err(TopologyError::Parse { .. })));
        assert_eq!(
            good.shard_group("shard-9").unwrap_err().to_string(),
            "the cluster file has no shard group named 'shard-9'"
        );
        assert_eq!(
            good.coordinator_group("coordinator-9").unwrap_err().to_string(),
            "the cluster file has no coordinator group named 'coordinator-9'"
        );
    }

    #[test]
    fn several_coordinator_groups_need_certificates_to_be_told_apart() {
        let two = local_for_tests(Shape {
            coordinator_groups: 2,
            ..Shape::default()
        });
        assert_eq!(two.validate(), Ok(()));
        let mut plaintext = two.clone();
        plaintext.transport = TransportMode::InsecurePlaintext;
        assert_eq!(
            plaintext.validate(),
            Err(InvalidTopology::CoordinatorGroupsNeedMutualTls)
        );
        let mut one = local_for_tests(Shape::default());
        one.transport = TransportMode::InsecurePlaintext;
        assert_eq!(one.validate(), Ok(()), "one coordinator group needs no names");
        let mut many = two.clone();
        many.coordinator_groups = vec![two.coordinator_groups[0].clone(); COORDINATOR_GROUPS_MAX + 1];
        assert_eq!(
            many.validate(),
            Err(InvalidTopology::CoordinatorGroupCount {
                groups: COORDINATOR_GROUPS_MAX + 1
            })
        );
    }
}
