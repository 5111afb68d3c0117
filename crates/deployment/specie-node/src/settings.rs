//! The keys a node banks and audits for, kept in `node.toml` (`[settings]`) so that a restart
//! without a flag cannot silently change what the node accepts.
//!
//! A start may set a key that is not kept yet (it is kept from then on) and may repeat a kept
//! one; a start that names another value than the kept one is refused, unless it says
//! `reconfigure` (the given keys replace the kept ones). `forget` drops kept keys (and the
//! issuers, which a start otherwise only adds to). Every kept key is printed at start and
//! served at `/v1/info`.

use serde::{Deserialize, Serialize};
use specie_codec::{Decode, Encode};

use crate::endorsement::EndorsementOptions;
use crate::NodeOptions;

/// One kept setting, as `--forget` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeptSetting {
    Issuers,
    OfflineAuthority,
    Exchange,
    Auditors,
    RegistrationAuthority,
    OwnerAuditors,
    ActiveAuditors,
    Endorsement,
    FastpayCommittee,
    Certifiers,
}

impl KeptSetting {
    /// Every setting, in the order the start banner shows them.
    pub const ALL: [KeptSetting; 10] = [
        KeptSetting::Issuers,
        KeptSetting::OfflineAuthority,
        KeptSetting::Exchange,
        KeptSetting::Auditors,
        KeptSetting::RegistrationAuthority,
        KeptSetting::OwnerAuditors,
        KeptSetting::ActiveAuditors,
        KeptSetting::Endorsement,
        KeptSetting::FastpayCommittee,
        KeptSetting::Certifiers,
    ];

    /// The setting `name` names ([`KeptSetting::name`]).
    pub fn from_name(name: &str) -> Option<KeptSetting> {
        KeptSetting::ALL.into_iter().find(|setting| setting.name() == name)
    }

    /// Its name as `--forget` takes it.
    pub fn name(self) -> &'static str {
        match self {
            KeptSetting::Issuers => "issuers",
            KeptSetting::OfflineAuthority => "offline-authority",
            KeptSetting::Exchange => "exchange",
            KeptSetting::Auditors => "auditors",
            KeptSetting::RegistrationAuthority => "registration-authority",
            KeptSetting::OwnerAuditors => "owner-auditors",
            KeptSetting::ActiveAuditors => "active-auditors",
            KeptSetting::Endorsement => "endorsement",
            KeptSetting::FastpayCommittee => "fastpay-committee",
            KeptSetting::Certifiers => "certifiers",
        }
    }
}

/// What a start asks of the kept settings besides the keys it gives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SettingsChange {
    /// The keys given replace the kept ones (otherwise a different key is refused).
    pub reconfigure: bool,
    /// Kept settings to drop before the given keys are applied.
    pub forget: Vec<KeptSetting>,
}

/// The kept keys, hex as the flags take them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeptSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline_authority: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auditors: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_authority: Option<String>,
    /// The registration authority's keys this node took before (oldest first): the ledger's
    /// earlier anonymous and unlinkable proofs verify under them. Never taken for new
    /// transactions; kept whenever a start replaces or forgets the key (`specie ra rotate`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub former_registration_authorities: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owner_auditors: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active_auditors: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endorsement: Option<KeptEndorsement>,
    /// The FastPay committee this node is the Primary of: its canonical encoding, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fastpay_committee: Option<String>,
    /// The unlinkable level's certifier group (its encoding, hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certifiers: Option<String>,
}

/// Threshold endorsement as kept: `k` of `n` endorsers, shares dealt from `seed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeptEndorsement {
    pub k: u16,
    pub n: u16,
    pub seed: u64,
}

/// Why the kept settings and a start's flags do not go together.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(
        "node.toml keeps --{setting} {kept}, and this start gives {given}: nothing was changed. Start without \
         --{setting} to keep it, or add --reconfigure to replace it (what the node accepts changes)"
    )]
    Changed {
        setting: &'static str,
        kept: String,
        given: String,
    },
    #[error(transparent)]
    Store(Box<crate::NodeManifestError>),
    #[error("node.toml keeps a {setting} key that does not decode ({reason}): {text}; fix it or drop it with --forget {setting}")]
    BadKept {
        setting: &'static str,
        reason: String,
        text: String,
    },
}

/// A setting's value as a person reads it in a refusal.
trait Shown {
    fn shown(&self) -> String;
}

impl Shown for Option<String> {
    fn shown(&self) -> String {
        self.clone().unwrap_or_else(|| "none".into())
    }
}

impl Shown for Vec<String> {
    fn shown(&self) -> String {
        self.join(", ")
    }
}

impl Shown for Option<KeptEndorsement> {
    fn shown(&self) -> String {
        match self {
            Some(e) => format!("{}-of-{} (seed {})", e.k, e.n, e.seed),
            None => "none".into(),
        }
    }
}

/// Settles one setting: the given value, the kept one, or a refusal.
fn settle<T: Clone + PartialEq + Shown>(
    setting: KeptSetting,
    kept: &T,
    given: &T,
    is_given: bool,
    change: &SettingsChange,
    empty: T,
) -> Result<T, SettingsError> {
    let kept = if change.forget.contains(&setting) {
        empty.clone()
    } else {
        kept.clone()
    };
    if !is_given {
        return Ok(kept);
    }
    if kept != empty && &kept != given && !change.reconfigure {
        return Err(SettingsError::Changed {
            setting: setting.name(),
            kept: kept.shown(),
            given: given.shown(),
        });
    }
    Ok(given.clone())
}

impl KeptSettings {
    /// What `options` gives, hex encoded.
    fn given(options: &NodeOptions) -> KeptSettings {
        KeptSettings {
            offline_authority: options.offline_authority.map(hex::encode),
            exchange: options.exchange.map(hex::encode),
            auditors: options.auditors.iter().map(hex::encode).collect(),
            registration_authority: (options.registration_authority.as_ref()).map(|key| hex::encode(key.encode())),
            former_registration_authorities: vec![],
            owner_auditors: options
                .owner_auditors
                .iter()
                .map(|key| hex::encode(key.encode()))
                .collect(),
            active_auditors: options.active_auditors.iter().map(hex::encode).collect(),
            endorsement: (options.endorsement.as_ref()).map(|e| KeptEndorsement {
                k: e.k,
                n: e.n,
                seed: e.seed,
            }),
            fastpay_committee: options
                .fastpay_committee
                .as_ref()
                .map(specie_fastpay::Committee::to_hex),
            certifiers: (options.certifiers.as_ref()).map(|group| hex::encode(group.encode())),
        }
    }

    /// The settings in force after a start that gives `options` and asks `change`.
    pub fn merge(&self, options: &NodeOptions, change: &SettingsChange) -> Result<KeptSettings, SettingsError> {
        use KeptSetting as S;
        let given = KeptSettings::given(options);
        let registration_authority = settle(
            S::RegistrationAuthority,
            &self.registration_authority,
            &given.registration_authority,
            given.registration_authority.is_some(),
            change,
            None,
        )?;
        Ok(KeptSettings {
            offline_authority: settle(
                S::OfflineAuthority,
                &self.offline_authority,
                &given.offline_authority,
                given.offline_authority.is_some(),
                change,
                None,
            )?,
            exchange: settle(
                S::Exchange,
                &self.exchange,
                &given.exchange,
                given.exchange.is_some(),
                change,
                None,
            )?,
            auditors: settle(
                S::Auditors,
                &self.auditors,
                &given.auditors,
                !given.auditors.is_empty(),
                change,
                vec![],
            )?,
            registration_authority: registration_authority.clone(),
            former_registration_authorities: self.former_authorities(registration_authority.as_deref()),
            owner_auditors: settle(
                S::OwnerAuditors,
                &self.owner_auditors,
                &given.owner_auditors,
                !given.owner_auditors.is_empty(),
                change,
                vec![],
            )?,
            active_auditors: settle(
                S::ActiveAuditors,
                &self.active_auditors,
                &given.active_auditors,
                !given.active_auditors.is_empty(),
                change,
                vec![],
            )?,
            endorsement: settle(
                S::Endorsement,
                &self.endorsement,
                &given.endorsement,
                given.endorsement.is_some(),
                change,
                None,
            )?,
            fastpay_committee: settle(
                S::FastpayCommittee,
                &self.fastpay_committee,
                &given.fastpay_committee,
                given.fastpay_committee.is_some(),
                change,
                None,
            )?,
            certifiers: settle(
                S::Certifiers,
                &self.certifiers,
                &given.certifiers,
                given.certifiers.is_some(),
                change,
                None,
            )?,
        })
    }

    /// The former registration authorities once `current` is the key: the kept one joins them if
    /// it is replaced or forgotten; one taken again leaves them.
    fn former_authorities(&self, current: Option<&str>) -> Vec<String> {
        let mut former = self.former_registration_authorities.clone();
        if let Some(kept) = (self.registration_authority.as_ref()).filter(|kept| Some(kept.as_str()) != current) {
            if !former.contains(kept) {
                former.push(kept.clone());
            }
        }
        former.retain(|key| Some(key.as_str()) != current);
        former
    }

    /// Puts the settings into `options`, decoding every key (a hand-edited `node.toml` is
    /// checked here). Endorsers a test marked compromised stay so.
    pub fn apply(&self, options: &mut NodeOptions) -> Result<(), SettingsError> {
        options.offline_authority = (self.offline_authority.as_deref())
            .map(|text| bridge_key(KeptSetting::OfflineAuthority, text))
            .transpose()?;
        options.exchange = (self.exchange.as_deref())
            .map(|text| bridge_key(KeptSetting::Exchange, text))
            .transpose()?;
        options.auditors = (self.auditors.iter())
            .map(|text| bytes32(KeptSetting::Auditors, text))
            .collect::<Result<_, _>>()?;
        options.registration_authority = (self.registration_authority.as_deref())
            .map(|text| decoded(KeptSetting::RegistrationAuthority, text))
            .transpose()?;
        options.owner_auditors = (self.owner_auditors.iter())
            .map(|text| decoded(KeptSetting::OwnerAuditors, text))
            .collect::<Result<_, _>>()?;
        options.active_auditors = (self.active_auditors.iter())
            .map(|text| {
                let key = bytes32(KeptSetting::ActiveAuditors, text)?;
                specie_transaction::signing::parse_xonly(&key)
                    .map(|_| key)
                    .ok_or_else(|| bad(KeptSetting::ActiveAuditors, "not a BIP-340 public key", text))
            })
            .collect::<Result<_, _>>()?;
        let compromised = (options.endorsement.take()).map(|e| e.compromised).unwrap_or_default();
        options.endorsement = self.endorsement.map(|e| EndorsementOptions {
            k: e.k,
            n: e.n,
            seed: e.seed,
            compromised,
        });
        options.fastpay_committee = (self.fastpay_committee.as_deref())
            .map(|text| fastpay_committee(KeptSetting::FastpayCommittee, text))
            .transpose()?;
        options.certifiers = (self.certifiers.as_deref())
            .map(|text| decoded(KeptSetting::Certifiers, text))
            .transpose()?;
        Ok(())
    }

    /// One line per kept setting, for the start banner.
    pub fn describe(&self) -> Vec<String> {
        let list = |keys: &[String]| keys.join(", ");
        let mut lines = vec![];
        let mut add = |setting: KeptSetting, value: String| lines.push(format!("{}: {value}", setting.name()));
        if let Some(key) = &self.offline_authority {
            add(KeptSetting::OfflineAuthority, key.clone());
        }
        if let Some(key) = &self.exchange {
            add(KeptSetting::Exchange, key.clone());
        }
        if !self.auditors.is_empty() {
            add(KeptSetting::Auditors, list(&self.auditors));
        }
        if let Some(key) = &self.registration_authority {
            add(
                KeptSetting::RegistrationAuthority,
                format!("{}…", &key[..key.len().min(32)]),
            );
        }
        if !self.owner_auditors.is_empty() {
            add(KeptSetting::OwnerAuditors, list(&self.owner_auditors));
        }
        if !self.active_auditors.is_empty() {
            add(KeptSetting::ActiveAuditors, list(&self.active_auditors));
        }
        if self.endorsement.is_some() {
            add(KeptSetting::Endorsement, self.endorsement.shown());
        }
        if let Some(text) = &self.fastpay_committee {
            let shown = fastpay_committee(KeptSetting::FastpayCommittee, text).map_or_else(
                |_| "does not decode".to_string(),
                |c| {
                    format!(
                        "epoch {}, {} authorities, id {}",
                        c.epoch(),
                        c.size(),
                        hex::encode(c.id())
                    )
                },
            );
            add(KeptSetting::FastpayCommittee, shown);
        }
        if let Some(text) = &self.certifiers {
            let shown = decoded::<specie_credential::unlinkable::CertifierGroup>(KeptSetting::Certifiers, text)
                .map_or_else(
                    |_| "does not decode".to_string(),
                    |group| format!("{} of {}", group.threshold(), group.members()),
                );
            add(KeptSetting::Certifiers, shown);
        }
        lines
    }
}

/// A FastPay committee from the hex of its canonical encoding.
pub fn fastpay_committee(setting: KeptSetting, text: &str) -> Result<specie_fastpay::Committee, SettingsError> {
    specie_fastpay::Committee::from_hex(text).map_err(|error| bad(setting, error.to_string(), text))
}

fn bad(setting: KeptSetting, reason: impl Into<String>, text: &str) -> SettingsError {
    SettingsError::BadKept {
        setting: setting.name(),
        reason: reason.into(),
        text: text.chars().take(80).collect(),
    }
}

fn bytes32(setting: KeptSetting, text: &str) -> Result<[u8; 32], SettingsError> {
    let bytes = hex::decode(text).map_err(|error| bad(setting, error.to_string(), text))?;
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| bad(setting, format!("{} bytes, a key has 32", bytes.len()), text))
}

/// A bridge key: 32 bytes, an Ed25519 key of large order (a small-order key would let anyone
/// forge payouts).
fn bridge_key(setting: KeptSetting, text: &str) -> Result<[u8; 32], SettingsError> {
    let key = bytes32(setting, text)?;
    specie_ed25519::check_public_key(&key).map_err(|error| bad(setting, error.to_string(), text))?;
    Ok(key)
}

fn decoded<T: Decode>(setting: KeptSetting, text: &str) -> Result<T, SettingsError> {
    let bytes = hex::decode(text).map_err(|error| bad(setting, error.to_string(), text))?;
    T::decode_exact(&bytes).map_err(|error| bad(setting, error.to_string(), text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> [u8; 32] {
        // Any 32 bytes do for the merge, which compares hex; apply() checks them.
        [byte; 32]
    }

    #[test]
    fn a_kept_key_stays_without_its_flag_and_another_needs_reconfigure() {
        let mut first = NodeOptions::new("unused");
        first.exchange = Some(key(1));
        first.auditors = vec![key(2)];
        let kept = KeptSettings::default()
            .merge(&first, &SettingsChange::default())
            .unwrap();
        assert_eq!(kept.exchange, Some(hex::encode(key(1))));
        // A restart without the flags keeps both.
        let bare = NodeOptions::new("unused");
        assert_eq!(kept.merge(&bare, &SettingsChange::default()).unwrap(), kept);
        // The same key again is fine; another is refused, naming both and the way out.
        assert_eq!(kept.merge(&first, &SettingsChange::default()).unwrap(), kept);
        let mut other = NodeOptions::new("unused");
        other.exchange = Some(key(3));
        let error = kept.merge(&other, &SettingsChange::default()).unwrap_err().to_string();
        assert!(
            error.contains(&hex::encode(key(1)))
                && error.contains(&hex::encode(key(3)))
                && error.contains("--reconfigure"),
            "{error}"
        );
        let reconfigure = SettingsChange {
            reconfigure: true,
            forget: vec![],
        };
        let replaced = kept.merge(&other, &reconfigure).unwrap();
        assert_eq!(
            (replaced.exchange, replaced.auditors),
            (Some(hex::encode(key(3))), kept.auditors.clone())
        );
        let forget = SettingsChange {
            reconfigure: false,
            forget: vec![KeptSetting::Auditors],
        };
        assert!(kept.merge(&bare, &forget).unwrap().auditors.is_empty());
    }

    #[test]
    fn a_replaced_registration_authority_is_kept_as_a_former_one() {
        let ra = |byte: u8| Some(hex::encode([byte; 8]));
        let kept = KeptSettings {
            registration_authority: ra(1),
            ..KeptSettings::default()
        };
        let reconfigure = SettingsChange {
            reconfigure: true,
            forget: vec![],
        };
        // Merged as hex: a stand-in for a key is enough here.
        assert_eq!(
            kept.former_authorities(None),
            vec![ra(1).unwrap()],
            "a forgotten key stays a former one"
        );
        assert_eq!(kept.former_authorities(ra(2).as_deref()), vec![ra(1).unwrap()]);
        assert!(
            kept.former_authorities(ra(1).as_deref()).is_empty(),
            "the same key is not former"
        );
        let rotated = KeptSettings {
            registration_authority: ra(2),
            former_registration_authorities: vec![ra(1).unwrap()],
            ..KeptSettings::default()
        };
        assert_eq!(
            rotated.former_authorities(ra(3).as_deref()),
            vec![ra(1).unwrap(), ra(2).unwrap()]
        );
        assert_eq!(
            rotated.former_authorities(ra(1).as_deref()),
            vec![ra(2).unwrap()],
            "taken again"
        );
        // Through a restart without the flag, the former keys stay.
        let bare = NodeOptions::new("unused");
        assert_eq!(rotated.merge(&bare, &reconfigure).unwrap(), rotated);
    }

    #[test]
    fn every_setting_is_found_by_its_name() {
        for setting in KeptSetting::ALL {
            assert_eq!(KeptSetting::from_name(setting.name()), Some(setting));
        }
        assert_eq!(KeptSetting::from_name("bogus"), None);
    }

    #[test]
    fn kept_keys_are_decoded_and_a_bad_one_is_named() {
        let bridge = specie_ed25519::deterministic_key(b"test", "bridge", 7)
            .verifying_key()
            .to_bytes();
        let kept = KeptSettings {
            exchange: Some(hex::encode(bridge)),
            endorsement: Some(KeptEndorsement { k: 2, n: 3, seed: 9 }),
            ..KeptSettings::default()
        };
        let mut options = NodeOptions::new("unused");
        kept.apply(&mut options).unwrap();
        assert_eq!(options.exchange, Some(bridge));
        assert_eq!(
            options.endorsement.as_ref().map(|e| (e.k, e.n, e.seed)),
            Some((2, 3, 9))
        );
        let broken = KeptSettings {
            offline_authority: Some("00".repeat(32)),
            ..KeptSettings::default()
        };
        let error = broken.apply(&mut options).unwrap_err().to_string();
        assert!(
            error.contains("offline-authority") && error.contains("--forget"),
            "{error}"
        );
    }
}
