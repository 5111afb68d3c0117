//! The unlinkable level's certification (Figure 5, steps 5–6) and serial numbers: a `k`-of-`n`
//! certifier group dealt with the real `deal_certifiers`, at most `n − k` (so fewer than `k`) of
//! them compromised (they
//! sign any token they are asked about, or answer with a share for another token), owners asking
//! for their tokens to be certified over a network that drops and duplicates answers, a forger
//! asking for tokens the ledger never held, and spends of certified tokens into a model UHS of
//! serial-number ids, some tried twice.
//!
//! Checked: no certificate is ever assembled for a token the ledger does not hold; every
//! certificate verifies under the group key; once the network stops dropping, every token the
//! ledger holds is certified; a token's serial number is the same at every spend, so the model
//! UHS refuses every second spend.

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};
use specie_credential::unlinkable::{
    deal_certifiers, Certificate, CertificateShare, CertifierGroup, CertifierSecret, Token, TokenOpening,
};
use specie_credential::{EnrolmentId, Identity, Jurisdiction, RegistrationAuthority, UserSecret};
use specie_private_transactions::certify_if_in_ledger;
use specie_private_transactions::unlinkable::{serial_uhs_id, token_uhs_id};
use specie_transaction::{OutPoint, Txid, UhsId};

use super::{chance, violation, PrivacyOptions, PrivacyReport};
use crate::Violation;

const OWNER: EnrolmentId = EnrolmentId(5);

struct World<'a> {
    options: &'a PrivacyOptions,
    rng: StdRng,
    group: CertifierGroup,
    certifiers: Vec<CertifierSecret>,
    /// Certifiers `0..compromised` sign anything.
    compromised: usize,
    ledger: BTreeSet<UhsId>,
    serials: BTreeSet<UhsId>,
    owner: Identity,
}

impl World<'_> {
    /// Every certifier's answer for `token` at `outpoint`, as the owner receives them: an honest
    /// certifier signs only what the ledger holds; a compromised one signs anything, or answers
    /// for another token; `lossy` answers are dropped or duplicated.
    fn answers(
        &mut self,
        outpoint: &OutPoint,
        token: &Token,
        lossy: bool,
        report: &mut PrivacyReport,
    ) -> Vec<CertificateShare> {
        let mut shares = vec![];
        for (index, certifier) in self.certifiers.iter().enumerate() {
            let share = if index < self.compromised {
                if self.rng.gen_bool(0.5) {
                    Some(certifier.certify(token))
                } else {
                    let other = TokenOpening::random(OWNER, 1, &mut self.rng).token();
                    Some(certifier.certify(&other))
                }
            } else {
                certify_if_in_ledger(certifier, outpoint, token, |id| self.ledger.contains(id)).ok()
            };
            let Some(share) = share else { continue };
            if lossy && chance(&mut self.rng, self.options.drop_per_mille) {
                report.messages_dropped += 1;
                continue;
            }
            if lossy && chance(&mut self.rng, self.options.duplicate_per_mille) {
                report.messages_duplicated += 1;
                shares.push(share.clone());
            }
            shares.push(share);
        }
        shares
    }
}

/// The group (at most `n − k` compromised: fewer than `k`, so none can certify alone, and the
/// honest ones still can), and the owner, enrolled.
fn world(options: &PrivacyOptions) -> Result<World<'_>, Violation> {
    let mut rng = StdRng::seed_from_u64(options.seed ^ 0xce27_1f1e);
    let members = rng.gen_range(2..=5u16);
    let threshold = rng.gen_range(members / 2 + 1..=members);
    let compromised = rng.gen_range(0..=members - threshold) as usize;
    let (group, certifiers) =
        deal_certifiers(threshold, members, &mut rng).map_err(|e| violation(options, 0, format!("dealing: {e}")))?;
    let mut ra = RegistrationAuthority::from_seed(&rng.gen());
    let secret = UserSecret::from_seed(&rng.gen());
    let challenge = ra.challenge(OWNER, Jurisdiction(1), &mut rng);
    let request = secret.enrolment_request(&ra.public_key(), &challenge, &mut rng);
    let credential = ra.enrol(&request, &mut rng).expect("a fresh id enrols");
    let owner = Identity::new(secret, credential, &ra.public_key()).expect("the RA's own credential");
    Ok(World {
        options,
        rng,
        group,
        certifiers,
        compromised,
        ledger: BTreeSet::new(),
        serials: BTreeSet::new(),
        owner,
    })
}

pub(super) fn run(options: &PrivacyOptions, report: &mut PrivacyReport, trace: &mut Sha256) -> Result<(), Violation> {
    let mut w = world(options)?;
    let mut pending: Vec<(OutPoint, TokenOpening)> = vec![];
    let mut certified: Vec<(TokenOpening, Certificate)> = vec![];
    let mut spent: Vec<TokenOpening> = vec![];
    let steps = w.rng.gen_range(8..=20u64);
    for step in 0..steps {
        match w.rng.gen_range(0..4) {
            0 => {
                // A payment confirmed: its token is in the ledger.
                let opening = TokenOpening::random(OWNER, w.rng.gen_range(1..1_000), &mut w.rng);
                let outpoint = OutPoint {
                    txid: Txid(w.rng.gen()),
                    index: w.rng.gen_range(0..4),
                };
                w.ledger.insert(token_uhs_id(&outpoint, &opening.token()));
                pending.push((outpoint, opening));
            }
            1 if !pending.is_empty() => {
                let at = w.rng.gen_range(0..pending.len());
                let (outpoint, opening) = pending[at].clone();
                let shares = w.answers(&outpoint, &opening.token(), true, report);
                match opening.certificate(&w.group, &shares) {
                    Ok(certificate) => {
                        check_certificate(options, step, &w, &opening, &certificate)?;
                        report.certificates += 1;
                        pending.remove(at);
                        certified.push((opening, certificate));
                    }
                    Err(_) => report.certification_retries += 1,
                }
            }
            2 => {
                // The forger asks for a token the ledger never held.
                let forged = TokenOpening::random(OWNER, 1_000_000, &mut w.rng);
                let outpoint = OutPoint {
                    txid: Txid(w.rng.gen()),
                    index: 0,
                };
                let shares = w.answers(&outpoint, &forged.token(), false, report);
                if forged.certificate(&w.group, &shares).is_ok() {
                    return Err(violation(options, step, "a token the ledger never held was certified"));
                }
                report.uncertified_refused += 1;
            }
            _ if !certified.is_empty() => spend(&mut w, step, (&mut certified, &mut spent), report, trace)?,
            _ => {}
        }
    }
    // Healed: every token the ledger holds is certified.
    for (outpoint, opening) in pending {
        let shares = w.answers(&outpoint, &opening.token(), false, report);
        let certificate = opening.certificate(&w.group, &shares).map_err(|e| {
            violation(
                options,
                steps,
                format!("a token in the ledger was not certified once healed: {e}"),
            )
        })?;
        check_certificate(options, steps, &w, &opening, &certificate)?;
        report.certificates += 1;
    }
    Ok(())
}

/// A spend of a certified token, or a second spend of a spent one: its serial number's id must
/// be new the first time and taken every time after.
fn spend(
    w: &mut World<'_>,
    step: u64,
    (certified, spent): (&mut Vec<(TokenOpening, Certificate)>, &mut Vec<TokenOpening>),
    report: &mut PrivacyReport,
    trace: &mut Sha256,
) -> Result<(), Violation> {
    let options = w.options;
    let replay = !spent.is_empty() && w.rng.gen_bool(0.3);
    let opening = if replay {
        spent[w.rng.gen_range(0..spent.len())].clone()
    } else {
        certified.remove(w.rng.gen_range(0..certified.len())).0
    };
    let serial = opening
        .serial_number(&w.owner)
        .ok_or_else(|| violation(options, step, "the owner has no serial number for its token"))?;
    let id = serial_uhs_id(&serial);
    trace.update(id.0);
    let created = w.serials.insert(id);
    if replay && created {
        return Err(violation(
            options,
            step,
            "a second spend of a token made a new serial number",
        ));
    }
    if !replay && !created {
        return Err(violation(options, step, "a first spend found its serial number taken"));
    }
    if replay {
        report.double_spends_refused += 1;
    } else {
        spent.push(opening);
    }
    Ok(())
}

fn check_certificate(
    options: &PrivacyOptions,
    step: u64,
    w: &World<'_>,
    opening: &TokenOpening,
    certificate: &Certificate,
) -> Result<(), Violation> {
    certificate
        .check(opening, &w.group)
        .map_err(|e| violation(options, step, format!("an assembled certificate does not verify: {e}")))
}
