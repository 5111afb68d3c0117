//! The anonymous level in `specie demo --privacy`: every user enrols with the registration
//! authority the core trusts, turns one coin into an anonymous note (values in clear for half of
//! the users, hidden for the other half), and each round pays a random other user anonymously
//! by enrolment id. The forger tries to spend anonymous notes without the credential: with a
//! credential of another RA for the owner's id, and with a genuine spend proof lifted from a
//! confirmed payment. The passive auditor, given the owner key and the RA's directory, names
//! every payer and payee.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use specie_api::TxStatus;
use specie_auditor::Owner;
use specie_credential::{
    AuditorSecret as OwnerAuditorSecret, EnrolmentId, Identity, Jurisdiction, OwnerOpening, RaPublicKey,
    RegistrationAuthority, UserSecret,
};
use specie_node::NodeHandle;
use specie_private_transactions::{AnonymousPlan, AnonymousSpend, AnonymousTransaction, AnonymousValue};
use specie_transaction::{CreatedOutput, NonceMode, SpecieTransaction, UhsId};

use super::{count_forgery, expect_confirmed, Known, Tally, User};
use specie_measure::error::{BenchError, BenchResult};
use specie_measure::submit::submit_all;

/// The ways a forger tries to spend anonymous notes; every one must be refused.
pub const ANONYMOUS_FORGERIES: [&str; 2] = ["spend with another RA's credential", "lifted spend proof"];

/// An anonymous note a user can spend.
#[derive(Clone)]
pub struct AnonymousNote {
    spend: AnonymousSpend,
    value: u64,
}

/// A user's enrolled identity and anonymous notes.
pub struct AnonymousHolder {
    pub id: EnrolmentId,
    identity: Identity,
    notes: Vec<AnonymousNote>,
}

impl AnonymousHolder {
    /// The identity the registration authority enrolled, which the unlinkable level spends with too.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The notes' UHS ids and values, for the supply audit.
    pub fn held(&self) -> impl Iterator<Item = (UhsId, u64)> + '_ {
        self.notes.iter().map(|note| (note.spend.input.uhs_id(), note.value))
    }
}

/// The registration authority, the owner auditor, and the values' auditor key the plans name.
pub struct AnonymousLevel {
    pub authority: RaPublicKey,
    pub owner_auditor: OwnerAuditorSecret,
    value_auditor: specie_confidential::AuditorKey,
}

impl AnonymousLevel {
    /// A fresh RA, which enrols users `0..count` as ids `1..=count`.
    pub fn enrol(
        count: usize,
        value_auditor: specie_confidential::AuditorKey,
        rng: &mut StdRng,
    ) -> (AnonymousLevel, Vec<AnonymousHolder>) {
        let mut ra = RegistrationAuthority::from_seed(&rng.gen());
        let holders = (1..=count as u64)
            .map(|id| {
                let secret = UserSecret::from_seed(&rng.gen());
                let challenge = ra.challenge(EnrolmentId(id), Jurisdiction(1), rng);
                let request = secret.enrolment_request(&ra.public_key(), &challenge, rng);
                let credential = ra.enrol(&request, rng).expect("a fresh id and key enrol");
                AnonymousHolder {
                    id: EnrolmentId(id),
                    identity: Identity::new(secret, credential, &ra.public_key()).expect("the RA's own credential"),
                    notes: vec![],
                }
            })
            .collect();
        let level = AnonymousLevel {
            authority: ra.public_key(),
            owner_auditor: OwnerAuditorSecret::from_seed(&rng.gen()),
            value_auditor,
        };
        (level, holders)
    }

    fn plan(&self, hide_values: bool) -> AnonymousPlan {
        AnonymousPlan {
            transparent_inputs: vec![],
            anonymous_inputs: vec![],
            outputs: vec![],
            transparent_outputs: vec![],
            hide_values,
            value_auditors: vec![self.value_auditor],
            owner_auditors: vec![self.owner_auditor.public()],
        }
    }

    /// Proves every (plan, spender) in parallel: a spend proof takes a few milliseconds of one core.
    fn prove_all(
        &self,
        plans: Vec<(AnonymousPlan, Vec<secp256k1::Keypair>, Option<&Identity>)>,
        seed: u64,
    ) -> BenchResult<Vec<(AnonymousTransaction, Vec<Option<specie_confidential::Opening>>)>> {
        plans
            .into_par_iter()
            .enumerate()
            .map(|(n, (plan, keys, identity))| {
                let mut rng = StdRng::seed_from_u64(seed ^ (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                plan.prove_and_sign(&keys, identity, &self.authority, NonceMode::Randomized, &mut rng)
                    .map_err(|error| BenchError::Failed(format!("cannot prove an anonymous transaction: {error}")))
            })
            .collect()
    }

    /// Every user turns one coin into an anonymous note: values in clear for even users, hidden
    /// for odd ones.
    pub fn enter(&self, core: &NodeHandle, users: &mut [User], tally: &mut Tally, rng: &mut StdRng) -> BenchResult<()> {
        let mut plans = vec![];
        let mut owners = vec![];
        for (index, user) in users.iter_mut().enumerate() {
            let Some(coin) = user.coins.pop() else { continue };
            let owner = OwnerOpening::random(user.anonymous.id, rng);
            let plan = AnonymousPlan {
                transparent_inputs: vec![CreatedOutput::to_input(&coin)],
                outputs: vec![(owner, coin.output.value)],
                ..self.plan(index % 2 == 1)
            };
            plans.push((plan, vec![user.key], None));
            owners.push((index, owner, coin.output.value));
        }
        let proven = self.prove_all(plans, rng.gen())?;
        let txs = proven
            .iter()
            .map(|(tx, _)| SpecieTransaction::from(tx.clone()))
            .collect();
        expect_confirmed(submit_all(core, txs)?, "an entry into the anonymous level")?;
        for ((tx, openings), (index, owner, value)) in proven.iter().zip(owners) {
            tally.anonymous += 1;
            tally.anonymous_entered += value;
            users[index]
                .anonymous
                .notes
                .push(note_of(tx, openings, 0, owner, value));
        }
        Ok(())
    }

    /// One anonymous payment from every user holding a note, to a random other user's id, of a
    /// random part of the note, the change back as a note of its own.
    pub fn pay_round(
        &self,
        core: &NodeHandle,
        users: &mut [User],
        tally: &mut Tally,
        rng: &mut StdRng,
    ) -> BenchResult<()> {
        let count = users.len();
        let mut plans = vec![];
        let mut parties = vec![];
        for payer in 0..count {
            let payee = (payer + rng.gen_range(1..count)) % count;
            let payee_id = users[payee].anonymous.id;
            let holder = &mut users[payer].anonymous;
            let Some(at) = holder.notes.iter().position(|note| note.value >= 2) else {
                continue;
            };
            let note = holder.notes.remove(at);
            let amount = rng.gen_range(1..note.value);
            let outputs = vec![
                (OwnerOpening::random(payee_id, rng), amount),
                (OwnerOpening::random(holder.id, rng), note.value - amount),
            ];
            let hide_values = note.spend.value.is_some();
            let plan = AnonymousPlan {
                anonymous_inputs: vec![note.spend],
                outputs: outputs.clone(),
                ..self.plan(hide_values)
            };
            plans.push((plan, vec![], Some(holder.identity.clone())));
            parties.push((payer, payee, outputs));
        }
        let plans = plans
            .iter()
            .map(|(plan, keys, identity)| (plan.clone(), keys.clone(), identity.as_ref()))
            .collect();
        let proven = self.prove_all(plans, rng.gen())?;
        let txs = proven
            .iter()
            .map(|(tx, _)| SpecieTransaction::from(tx.clone()))
            .collect();
        let statuses = submit_all(core, txs)?;
        for (((tx, openings), (payer, payee, outputs)), status) in proven.iter().zip(parties).zip(statuses) {
            if status != TxStatus::Confirmed {
                tally.refused_honest += 1;
                continue;
            }
            tally.anonymous += 1;
            let [(payee_owner, amount), (change_owner, change)] = [outputs[0], outputs[1]];
            users[payee]
                .anonymous
                .notes
                .push(note_of(tx, openings, 0, payee_owner, amount));
            users[payer]
                .anonymous
                .notes
                .push(note_of(tx, openings, 1, change_owner, change));
            tally.known.insert(
                tx.txid(),
                Known {
                    payer: Owner::Enrolled(users[payer].anonymous.id),
                    outputs: vec![
                        (Owner::Enrolled(users[payee].anonymous.id), amount),
                        (Owner::Enrolled(users[payer].anonymous.id), change),
                    ],
                },
            );
        }
        Ok(())
    }

    /// The forger (user 0) tries to spend user 1's note without user 1's credential.
    pub fn forge(&self, core: &NodeHandle, users: &[User], tally: &mut Tally, rng: &mut StdRng) -> BenchResult<()> {
        let (forger, victim) = (&users[0], &users[1]);
        let Some(note) = victim.anonymous.notes.first() else {
            return Ok(());
        };
        let steal = AnonymousPlan {
            anonymous_inputs: vec![note.spend.clone()],
            outputs: vec![(OwnerOpening::random(forger.anonymous.id, rng), note.value)],
            ..self.plan(note.spend.value.is_some())
        };
        let mut forged = vec![];
        // A credential for the victim's id from a registration authority of the forger's own.
        let mut rogue = RegistrationAuthority::from_seed(&rng.gen());
        let secret = UserSecret::from_seed(&rng.gen());
        let challenge = rogue.challenge(victim.anonymous.id, Jurisdiction(1), rng);
        let request = secret.enrolment_request(&rogue.public_key(), &challenge, rng);
        let credential = rogue.enrol(&request, rng).expect("the rogue RA signs anything");
        let impostor = Identity::new(secret, credential, &rogue.public_key()).expect("the rogue RA's credential");
        let (tx, _) = steal
            .prove_and_sign(&[], Some(&impostor), &rogue.public_key(), NonceMode::Randomized, rng)
            .map_err(|error| BenchError::Failed(error.to_string()))?;
        forged.push(tx);
        // A genuine spend proof lifted from an anonymous payment on the ledger of record.
        let lifted = tally.known.keys().find_map(|txid| {
            let entry = core.ledger_transaction(*txid).ok().flatten()?;
            (entry.record.transaction().capability::<AnonymousTransaction>())
                .and_then(|tx| tx.spend_proofs.first().cloned())
        });
        if let Some(proof) = lifted {
            let mut theft = forged[0].clone();
            theft.spend_proofs = vec![proof];
            forged.push(theft);
        }
        let txs = forged.into_iter().map(SpecieTransaction::from).collect();
        for status in submit_all(core, txs)? {
            if status == TxStatus::Confirmed {
                tally.forged += 1;
            } else {
                count_forgery(tally, status.code());
            }
        }
        Ok(())
    }
}

/// The note at anonymous output `position` of `tx`, opened by `owner` and worth `value`.
fn note_of(
    tx: &AnonymousTransaction,
    openings: &[Option<specie_confidential::Opening>],
    position: usize,
    owner: OwnerOpening,
    value: u64,
) -> AnonymousNote {
    let created = tx.created_anonymous_outputs()[position];
    let opening = match created.value {
        AnonymousValue::Clear(_) => None,
        AnonymousValue::Hidden(_) => openings[position],
    };
    AnonymousNote {
        spend: AnonymousSpend {
            input: created.to_input(),
            owner,
            value: opening,
        },
        value,
    }
}
