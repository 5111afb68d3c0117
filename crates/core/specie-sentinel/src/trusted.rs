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
}

impl TrustedKeys {
    pub fn new(issuers: IssuerKeys, fastpay_committee: Option<Committee>) -> Self {
        TrustedKeys {
            issuers,
            fastpay_committee,
        }
    }
}

/// Issuers only, no FastPay committee.
impl From<IssuerKeys> for TrustedKeys {
    fn from(issuers: IssuerKeys) -> Self {
        TrustedKeys::new(issuers, None)
    }
}
