//! What a sentinel checks of FastPay's funding, redeem and epoch, against the committee the node is a
//! Primary of (`docs/transaction-format.md` §6). The codes are category `fastpay`.

use std::sync::{Arc, RwLock};

use specie_fastpay::{CertificateError, CommitteeChain, CommitteeRecord, OrderError, RecordError, VerifyingKey};
use specie_sentinel::checks::check_funding_value;
use specie_sentinel::{CapabilityError, CapabilityRules, ValidationError};
use specie_transaction::{CapabilityTransaction, Txid};

use crate::transaction::{
    FastpayEpoch, FastpayFunding, FastpayRedeem, KIND_FASTPAY_EPOCH, KIND_FASTPAY_FUND, KIND_FASTPAY_REDEEM,
};

/// Why a FastPay funding, redeem or epoch is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FastpayErrorCode {
    /// `zero_funding_amount`: a funding must move at least 1 unit.
    ZeroFundingAmount,
    /// `no_fastpay_committee`: this sentinel is configured with no FastPay committee, so it
    /// accepts neither fundings nor redeems.
    NoCommittee,
    /// `funding_other_committee`: the funding names a committee other than the configured one
    /// (its value would be credited by nobody).
    FundingOtherCommittee,
    /// `funding_invalid_account`: the account is not a usable Ed25519 key (invalid or weak), so
    /// nobody could ever spend what the funding moves there.
    FundingInvalidAccount,
    /// `redeem_recipient_not_core`: the certified order pays a Byzantine-mode account, not the
    /// online core.
    RedeemRecipientNotCore,
    /// The certificate does not check against the configured committee (`certificate_*`).
    Certificate(CertificateError),
    /// `epoch_unknown_previous`: the record follows a committee this node does not know (yet):
    /// records are published in order, each after the one before.
    EpochUnknownPrevious,
    /// `epoch_record_invalid`: the record is not its previous epoch's successor (not endorsed by
    /// a quorum of it, wrong epoch number or seat count).
    EpochRecordInvalid,
    /// `epoch_conflicts`: this node knows another successor of the record's previous committee:
    /// the committee endorsed two next epochs.
    EpochConflicts,
}

impl FastpayErrorCode {
    pub fn code(self) -> &'static str {
        match self {
            FastpayErrorCode::ZeroFundingAmount => "zero_funding_amount",
            FastpayErrorCode::NoCommittee => "no_fastpay_committee",
            FastpayErrorCode::FundingOtherCommittee => "funding_other_committee",
            FastpayErrorCode::FundingInvalidAccount => "funding_invalid_account",
            FastpayErrorCode::RedeemRecipientNotCore => "redeem_recipient_not_core",
            FastpayErrorCode::Certificate(error) => certificate_code(error),
            FastpayErrorCode::EpochUnknownPrevious => "epoch_unknown_previous",
            FastpayErrorCode::EpochRecordInvalid => "epoch_record_invalid",
            FastpayErrorCode::EpochConflicts => "epoch_conflicts",
        }
    }

    fn describe(self) -> String {
        match self {
            FastpayErrorCode::ZeroFundingAmount => "funding amount is zero".into(),
            FastpayErrorCode::NoCommittee => "this node is configured with no FastPay committee".into(),
            FastpayErrorCode::FundingOtherCommittee => {
                "the funding names a FastPay committee other than the configured one".into()
            }
            FastpayErrorCode::FundingInvalidAccount => {
                "the funded account is not a valid (non-weak) Ed25519 public key".into()
            }
            FastpayErrorCode::RedeemRecipientNotCore => {
                "the certified order pays a Byzantine-mode account, not the online core".into()
            }
            FastpayErrorCode::Certificate(error) => format!("FastPay certificate refused: {error}"),
            FastpayErrorCode::EpochUnknownPrevious => {
                "the record follows a committee this node does not know: publish the epochs in order".into()
            }
            FastpayErrorCode::EpochRecordInvalid => "the committee record does not follow its previous epoch".into(),
            FastpayErrorCode::EpochConflicts => {
                "this node knows another record of the same epoch: the committee endorsed two".into()
            }
        }
    }

    /// The sentinel's error for this code.
    pub fn into_error(self) -> ValidationError {
        self.error_with(self.describe())
    }

    fn error_with(self, message: String) -> ValidationError {
        ValidationError::Capability(CapabilityError {
            category: "fastpay",
            code: self.code(),
            message,
        })
    }
}

fn certificate_code(error: CertificateError) -> &'static str {
    match error {
        CertificateError::WrongCommittee => "certificate_wrong_committee",
        CertificateError::NotFinal { .. } => "certificate_not_final",
        CertificateError::NotALock => "certificate_not_a_lock",
        CertificateError::BelowQuorum { .. } => "certificate_below_quorum",
        CertificateError::RepeatedSigner { .. } => "certificate_repeated_signer",
        CertificateError::Unsorted => "certificate_unsorted",
        CertificateError::UnknownAuthority { .. } => "certificate_unknown_authority",
        CertificateError::BadSignature { .. } => "certificate_bad_signature",
        CertificateError::Order(OrderError::BadSignature) => "certificate_bad_owner_signature",
        CertificateError::Order(_) => "certificate_invalid_order",
    }
}

/// The rules of a node that is the Primary of a committee, or of none (then every FastPay
/// funding and redeem is refused as `no_fastpay_committee`). The committee's epochs are shared
/// by every clone: one that learns a later epoch ([`FastpayRules::learn`]) teaches them all.
#[derive(Clone, Debug, Default)]
pub struct FastpayRules {
    chain: Option<Arc<RwLock<CommitteeChain>>>,
}

impl FastpayRules {
    /// A node that is the Primary of no committee.
    pub fn none() -> FastpayRules {
        FastpayRules::default()
    }

    /// A node that is the Primary of the committee whose epochs are `chain`: fundings name its
    /// first committee (the committee's identity), a redeem's certificate is checked against
    /// the committee of the epoch it names.
    pub fn of(chain: CommitteeChain) -> FastpayRules {
        FastpayRules {
            chain: Some(Arc::new(RwLock::new(chain))),
        }
    }

    /// Takes in committee records of later epochs (a record of an epoch known is skipped),
    /// each checked against the epoch before; returns whether the current epoch moved. Nothing
    /// to learn for a node of no committee.
    pub fn learn(&self, records: impl IntoIterator<Item = CommitteeRecord>) -> Result<bool, RecordError> {
        let Some(chain) = &self.chain else {
            return Ok(false);
        };
        chain.write().expect("not poisoned").learn(records)
    }

    /// The epoch of the committee's latest record this node knows (none: no committee).
    pub fn epoch(&self) -> Option<u64> {
        Some(self.chain.as_ref()?.read().expect("not poisoned").current().epoch())
    }

    fn chain(&self) -> Result<std::sync::RwLockReadGuard<'_, CommitteeChain>, ValidationError> {
        match &self.chain {
            Some(chain) => Ok(chain.read().expect("not poisoned")),
            None => Err(FastpayErrorCode::NoCommittee.into_error()),
        }
    }

    /// Funding: the redeem's checks with `zero_funding_amount` in place of `zero_redeem_amount`
    /// and no issuer; then, after the reference-style checks as always, the FastPay ones: a
    /// committee is configured, the funding names it, and the account is a key someone can
    /// sign with (otherwise the value would be credited by nobody, or spendable by nobody).
    fn check_funding(&self, funding: &FastpayFunding, txid: &Txid) -> Result<(), ValidationError> {
        check_funding_value(
            &funding.inputs,
            &funding.outputs,
            &funding.witnesses,
            funding.amount,
            FastpayErrorCode::ZeroFundingAmount.into_error(),
            txid,
        )?;
        if funding.committee_id != self.chain()?.first().id() {
            return Err(FastpayErrorCode::FundingOtherCommittee.into_error());
        }
        match VerifyingKey::from_bytes(&funding.account.0) {
            Ok(key) if !key.is_weak() => Ok(()),
            _ => Err(FastpayErrorCode::FundingInvalidAccount.into_error()),
        }
    }

    /// FastPay redeem: a committee is configured, the certified order pays the core, and the
    /// certificate checks against the committee of its epoch (quorum, owner's and authorities' signatures,
    /// the order's fields, which include amount ≥ 1). That it is redeemed at most once is the
    /// shards' business: its marker.
    fn check_redeem(&self, redeem: &FastpayRedeem) -> Result<(), ValidationError> {
        let chain = self.chain()?;
        if redeem.recipient().is_none() {
            return Err(FastpayErrorCode::RedeemRecipientNotCore.into_error());
        }
        let certificate = redeem.certificate();
        chain
            .committee(&certificate.committee_id)
            .ok_or(CertificateError::WrongCommittee)
            .and_then(|committee| certificate.check(committee))
            .map_err(|error| FastpayErrorCode::Certificate(error).into_error())
    }
}

impl FastpayRules {
    /// Epoch: the record follows a committee of the chain this node knows, as its next epoch
    /// (a quorum of it endorses the record), and is that committee's only successor this node
    /// knows. A record of the epoch after the newest one known is learned at once: it is
    /// authentic whether or not the ledger takes it. That the ledger holds one successor per
    /// committee is the shards' business: the marker.
    fn check_epoch(&self, epoch: &FastpayEpoch) -> Result<(), ValidationError> {
        let record = &epoch.record;
        let learns = {
            let chain = self.chain()?;
            let previous = chain
                .committee(&record.previous_id)
                .ok_or_else(|| FastpayErrorCode::EpochUnknownPrevious.into_error())?;
            record.check(previous).map_err(|error| {
                let code = FastpayErrorCode::EpochRecordInvalid;
                code.error_with(format!("{}: {error}", code.describe()))
            })?;
            let known = chain.committees().find(|c| c.epoch() == record.next.epoch());
            if known.is_some_and(|known| known.id() != record.next.id()) {
                return Err(FastpayErrorCode::EpochConflicts.into_error());
            }
            known.is_none()
        };
        if learns {
            // Checked above against the newest epoch; a record learned meanwhile by another
            // validation is the same one or conflicts, which the next check reports.
            let _ = self.learn([record.clone()]);
        }
        Ok(())
    }
}

impl CapabilityRules for FastpayRules {
    fn kinds(&self) -> &'static [u8] {
        &[KIND_FASTPAY_FUND, KIND_FASTPAY_REDEEM, KIND_FASTPAY_EPOCH]
    }

    fn check(&self, tx: &dyn CapabilityTransaction, txid: &Txid) -> Result<(), ValidationError> {
        if let Some(funding) = tx.downcast_ref::<FastpayFunding>() {
            return self.check_funding(funding, txid);
        }
        if let Some(redeem) = tx.downcast_ref::<FastpayRedeem>() {
            return self.check_redeem(redeem);
        }
        if let Some(epoch) = tx.downcast_ref::<FastpayEpoch>() {
            return self.check_epoch(epoch);
        }
        unreachable!("FastPay's rules are asked only about its kinds, got {}", tx.kind_name())
    }
}
