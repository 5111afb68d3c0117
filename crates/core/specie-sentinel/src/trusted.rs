//! What a sentinel trusts beyond the reference's rules.

use std::sync::Arc;

use crate::capability::{CapabilityRules, CapabilityRulesSet};
use crate::issuer::IssuerKeys;

/// The keys a sentinel validates specie's extension transactions against: the issuer keys that
/// may sign mints and redeems, the bridges', and the rules of the kinds capabilities add
/// (FastPay's funding and redeem, with the committee the node is a Primary of; the private
/// kinds, with the auditors and the registration authority with jurisdiction).
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
}

impl TrustedKeys {
    pub fn new(issuers: IssuerKeys) -> Self {
        TrustedKeys {
            issuers,
            capabilities: CapabilityRulesSet::default(),
            offline_authority: None,
            exchange: None,
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

    /// These keys, banking for the offline authority whose bridge key is `authority` too.
    pub fn with_offline_authority(self, authority: Option<[u8; 32]>) -> Self {
        TrustedKeys {
            offline_authority: authority,
            ..self
        }
    }
}

/// Issuers only: no bridge, no capability kinds.
impl From<IssuerKeys> for TrustedKeys {
    fn from(issuers: IssuerKeys) -> Self {
        TrustedKeys::new(issuers)
    }
}
