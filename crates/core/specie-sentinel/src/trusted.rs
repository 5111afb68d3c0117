//! What a sentinel trusts beyond the reference's rules.

use specie_fastpay::Committee;

use crate::issuer::IssuerKeys;

/// The keys a sentinel validates specie's extension transactions against: the issuer keys that
/// may sign mints and redeems, and the FastPay committee (if the node is a FastPay Primary)
/// whose certificates it redeems and to which it lets value be funded. Without a committee,
/// every FastPay funding and redeem is invalid (`no_fastpay_committee`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedKeys {
    pub issuers: IssuerKeys,
    pub fastpay_committee: Option<Committee>,
    /// The offline authority's bridge key (Ed25519), if the node banks for offline cash: offline
    /// fundings must name it and payouts must carry its signature. Without it, both are invalid
    /// (`no_offline_authority`).
    pub offline_authority: Option<[u8; 32]>,
}

impl TrustedKeys {
    pub fn new(issuers: IssuerKeys, fastpay_committee: Option<Committee>) -> Self {
        TrustedKeys {
            issuers,
            fastpay_committee,
            offline_authority: None,
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

/// Issuers only, no FastPay committee.
impl From<IssuerKeys> for TrustedKeys {
    fn from(issuers: IssuerKeys) -> Self {
        TrustedKeys::new(issuers, None)
    }
}
