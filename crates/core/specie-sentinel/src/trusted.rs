//! What a sentinel trusts beyond the reference's rules.

use specie_credential::{AuditorKey as OwnerAuditorKey, RaPublicKey};

use crate::capability::{CapabilityRules, CapabilityRulesSet};
use crate::issuer::IssuerKeys;
use std::sync::Arc;

/// The keys a sentinel validates specie's extension transactions against: the issuer keys that
/// may sign mints and redeems, the bridges', the privacy levels', and the rules of the kinds
/// capabilities add (FastPay's funding and redeem, with the committee the node is a Primary of).
/// A capability kind without rules here is invalid (`kind_not_accepted`).
#[derive(Clone, Debug, Default)]
pub struct TrustedKeys {
    pub issuers: IssuerKeys,
    /// The rules of the capability kinds this node accepts.
    pub capabilities: CapabilityRulesSet,
    /// The offline authority's bridge key (Ed25519), if the node banks for offline cash: offline
    /// fundings must name it and payouts must carry its signature. Without it, both are invalid
    /// (`no_offline_authority`).
    pub offline_authority: Option<[u8; 32]>,
    /// The exchange's bridge key (Ed25519), if the node banks for the exchange: deposits to it
    /// and withdrawals it signed travel as the same two kinds as offline cash's: bridge fundings and payouts
    /// (docs/transaction-format.md §5.7–5.8), naming this key.
    pub exchange: Option<[u8; 32]>,
    /// The auditors with jurisdiction (Ristretto keys, compressed): every confidential
    /// transaction must give each of them its values (docs/privacy.md, "Auditors").
    pub auditors: Vec<[u8; 32]>,
    /// The registration authority whose credentials authorise anonymous spends. Without it,
    /// every anonymous transaction is invalid (`no_registration_authority`).
    pub registration_authority: Option<RaPublicKey>,
    /// The owner auditors with jurisdiction (BLS12-381 keys), strictly ascending: every anonymous
    /// transaction must give each of them every owner it names (docs/privacy.md, "Auditors").
    pub owner_auditors: Vec<OwnerAuditorKey>,
    /// The active auditors (x-only BIP-340 keys), in order: every private transaction (kinds
    /// 0x07 and 0x08) carries, after its own witnesses, one p2pk witness of each over its txid:
    /// their co-signatures, given before submission (docs/privacy.md, "Active auditors").
    pub active_auditors: Vec<[u8; 32]>,
}

impl TrustedKeys {
    pub fn new(issuers: IssuerKeys) -> Self {
        TrustedKeys {
            issuers,
            capabilities: CapabilityRulesSet::default(),
            offline_authority: None,
            exchange: None,
            auditors: vec![],
            registration_authority: None,
            owner_auditors: vec![],
            active_auditors: vec![],
        }
    }

    /// These keys, accepting the kinds `rules` judge too.
    pub fn with_capability(self, rules: Arc<dyn CapabilityRules>) -> Self {
        TrustedKeys {
            capabilities: self.capabilities.with(rules),
            ..self
        }
    }

    /// These keys, banking for the exchange whose bridge key is `exchange` too.
    pub fn with_exchange(self, exchange: Option<[u8; 32]>) -> Self {
        TrustedKeys { exchange, ..self }
    }

    /// Whether `key` is a bridge the node banks for: the offline authority or the exchange.
    pub fn is_bridge(&self, key: &[u8; 32]) -> bool {
        self.offline_authority.as_ref() == Some(key) || self.exchange.as_ref() == Some(key)
    }

    pub fn has_bridge(&self) -> bool {
        self.offline_authority.is_some() || self.exchange.is_some()
    }

    /// These keys, requiring every confidential transaction to address `auditors`.
    pub fn with_auditors(self, auditors: Vec<[u8; 32]>) -> Self {
        TrustedKeys { auditors, ..self }
    }

    /// These keys, taking anonymous transactions under `authority`'s credentials, each naming
    /// every one of `owner_auditors` (sorted here and deduplicated: their canonical order).
    pub fn with_anonymity(self, authority: Option<RaPublicKey>, mut owner_auditors: Vec<OwnerAuditorKey>) -> Self {
        owner_auditors.sort();
        owner_auditors.dedup();
        TrustedKeys {
            registration_authority: authority,
            owner_auditors,
            ..self
        }
    }

    /// These keys, requiring every private transaction to be co-signed by `active_auditors`.
    pub fn with_active_auditors(self, active_auditors: Vec<[u8; 32]>) -> Self {
        TrustedKeys {
            active_auditors,
            ..self
        }
    }

    /// These keys, banking for the offline authority whose bridge key is `authority` too.
    pub fn with_offline_authority(self, authority: Option<[u8; 32]>) -> Self {
        TrustedKeys {
            offline_authority: authority,
            ..self
        }
    }
}

/// Issuers only: no bridge, no private kinds, no capability kinds.
impl From<IssuerKeys> for TrustedKeys {
    fn from(issuers: IssuerKeys) -> Self {
        TrustedKeys::new(issuers)
    }
}
