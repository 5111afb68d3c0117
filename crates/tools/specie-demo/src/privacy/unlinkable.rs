//! The unlinkable level in `specie demo --privacy`: a 2-of-3 certifier group the core trusts.
//! Every user turns one coin into a token of their own (its value enters in clear) and has it
//! certified: each certifier answers only for a token the ledger holds. Each round every user
//! holding a token pays a random other user unlinkably: the spend reveals the token's serial
//! number, never the token, and the payee and the payer (for the change) have their new tokens
//! certified. The forger tries every forgery of the level; the owner auditor names every spender
//! and payee and reads what each payee got; the level's total is exact because what enters and
//! leaves it is in clear.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use specie_api::TxStatus;
use specie_auditor::Owner;
use specie_codec::{Decode, Encode};
use specie_credential::unlinkable::{
    deal_certifiers, Certificate, CertificateShare, CertifierGroup, CertifierSecret, SpentToken, TokenOpening,
    UnlinkableKeys,
};
use specie_credential::{EnrolmentId, Identity, RaPublicKey};
use specie_node::NodeHandle;
use specie_private_transactions::unlinkable::serial_uhs_id;
use specie_private_transactions::{certify_if_in_ledger, CreatedToken, UnlinkableBuild, UnlinkableTransaction};
use specie_transaction::{CreatedOutput, DecodeLimits, NonceMode, Output, SpecieTransaction, Txid, UhsId};

use super::anonymous::AnonymousLevel;
use super::{count_forgery, expect_confirmed, Tally, User};
use specie_measure::error::{BenchError, BenchResult};
use specie_measure::submit::submit_all;

/// The ways a forger tries to cheat the unlinkable level; every one must be refused.
pub const UNLINKABLE_FORGERIES: [&str; 6] = [
    "wrong serial number",
    "token never certified",
    "certification of a token not in the ledger",
    "replayed serial number",
    "balance that does not hold",
    "proof lifted from another transaction",
];

/// The certifier group: 2 of 3 certify.
const CERTIFIERS_K: u16 = 2;
const CERTIFIERS_N: u16 = 3;

/// A certified token a user can spend, and where the ledger holds it.
#[derive(Clone)]
pub struct HeldToken {
    created: CreatedToken,
    opening: TokenOpening,
    certificate: Certificate,
}

/// A user's tokens, and those it spent (what a replay would try again).
#[derive(Default)]
pub struct TokenHolder {
    tokens: Vec<HeldToken>,
    spent: Vec<HeldToken>,
}

/// An unlinkable payment as its payer and payees know it: what the auditor must name and read.
pub struct KnownUnlinkable {
    pub payer: Owner,
    pub payees: Vec<(Owner, u64)>,
}

/// The certifiers, and the keys every proof of the level is made and checked under.
pub struct UnlinkableLevel {
    pub group: CertifierGroup,
    certifiers: Vec<CertifierSecret>,
    authority: RaPublicKey,
    owner_auditor: specie_credential::AuditorKey,
}

impl UnlinkableLevel {
    /// A fresh certifier group for the anonymous level's registration authority and owner auditor.
    pub fn deal(anonymous: &AnonymousLevel, rng: &mut StdRng) -> BenchResult<UnlinkableLevel> {
        let (group, certifiers) = deal_certifiers(CERTIFIERS_K, CERTIFIERS_N, rng)
            .map_err(|error| BenchError::Failed(format!("cannot deal the certifiers: {error}")))?;
        Ok(UnlinkableLevel {
            group,
            certifiers,
            authority: anonymous.authority.clone(),
            owner_auditor: anonymous.owner_auditor.public(),
        })
    }

    fn keys(&self) -> UnlinkableKeys<'_> {
        UnlinkableKeys {
            authority: &self.authority,
            certifiers: &self.group,
        }
    }

    fn build<'a>(&self, spent: Vec<SpentToken<'a>>, outputs: Vec<TokenOpening>) -> UnlinkableBuild<'a> {
        UnlinkableBuild {
            transparent_inputs: vec![],
            spent,
            outputs,
            transparent_outputs: vec![],
            owner_auditors: vec![self.owner_auditor],
        }
    }

    /// Proves every (build, signers, identity) in parallel: a transfer takes tens of milliseconds
    /// of one core.
    fn prove_all(
        &self,
        builds: Vec<(UnlinkableBuild<'_>, Vec<secp256k1::Keypair>, &Identity)>,
        seed: u64,
    ) -> BenchResult<Vec<UnlinkableTransaction>> {
        builds
            .into_par_iter()
            .enumerate()
            .map(|(n, (build, signers, identity))| {
                let mut rng = StdRng::seed_from_u64(seed ^ (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                build
                    .prove_and_sign(&signers, identity, &self.keys(), NonceMode::Randomized, &mut rng)
                    .map_err(|error| BenchError::Failed(format!("cannot prove an unlinkable transaction: {error}")))
            })
            .collect()
    }

    /// Certifies the token `created` opened by `opening`: every certifier asks the core whether
    /// the ledger holds it, and the owner combines the shares.
    fn certify(&self, core: &NodeHandle, created: CreatedToken, opening: TokenOpening) -> BenchResult<HeldToken> {
        let in_ledger = |id: &UhsId| core.query_uhs(&[*id]).is_ok_and(|present| present == [true]);
        let shares: Vec<CertificateShare> = self
            .certifiers
            .iter()
            .filter_map(|certifier| certify_if_in_ledger(certifier, &created.outpoint, &created.token, in_ledger).ok())
            .collect();
        let certificate = opening
            .certificate(&self.group, &shares)
            .map_err(|error| BenchError::Failed(format!("a confirmed token was not certified: {error}")))?;
        Ok(HeldToken {
            created,
            opening,
            certificate,
        })
    }

    /// Every user turns one coin into a token of theirs; the forger also sets one coin aside for
    /// its lifted-proof forgery.
    pub fn enter(&self, core: &NodeHandle, users: &mut [User], tally: &mut Tally, rng: &mut StdRng) -> BenchResult<()> {
        let mut builds = vec![];
        let mut who = vec![];
        for (index, user) in users.iter_mut().enumerate() {
            let Some(coin) = user.coins.pop() else { continue };
            let opening = TokenOpening::random(user.anonymous.id, coin.output.value, rng);
            let build = UnlinkableBuild {
                transparent_inputs: vec![CreatedOutput::to_input(&coin)],
                ..self.build(vec![], vec![opening.clone()])
            };
            builds.push((build, vec![user.key], user.anonymous.identity()));
            who.push((index, opening, coin.output.value));
        }
        let proven = self.prove_all(builds, rng.gen())?;
        let txs = proven.iter().map(|tx| SpecieTransaction::from(tx.clone())).collect();
        expect_confirmed(submit_all(core, txs)?, "an entry into the unlinkable level")?;
        for (tx, (index, opening, value)) in proven.iter().zip(who) {
            tally.unlinkable += 1;
            tally.unlinkable_entered += value;
            tally.unlinkable_entries.push(tx.txid());
            let held = self.certify(core, tx.created_tokens()[0], opening)?;
            users[index].unlinkable.tokens.push(held);
        }
        if let Some(coin) = users[0].coins.pop() {
            users[0].reserve.push(coin);
        }
        Ok(())
    }

    /// One unlinkable payment from every user holding a token, to a random other user, of a
    /// random part of the token, the change back as a token of its own.
    pub fn pay_round(
        &self,
        core: &NodeHandle,
        users: &mut [User],
        tally: &mut Tally,
        rng: &mut StdRng,
    ) -> BenchResult<()> {
        let count = users.len();
        let mut spending = vec![];
        for payer in 0..count {
            let payee = (payer + rng.gen_range(1..count)) % count;
            let Some(at) = (users[payer].unlinkable.tokens.iter()).position(|t| t.opening.value() >= 2) else {
                continue;
            };
            let token = users[payer].unlinkable.tokens.remove(at);
            let amount = rng.gen_range(1..token.opening.value());
            let outputs = vec![
                TokenOpening::random(users[payee].anonymous.id, amount, rng),
                TokenOpening::random(users[payer].anonymous.id, token.opening.value() - amount, rng),
            ];
            spending.push((payer, payee, token, outputs));
        }
        let builds = spending
            .iter()
            .map(|(payer, _, token, outputs)| {
                let spent = vec![SpentToken {
                    opening: &token.opening,
                    certificate: &token.certificate,
                }];
                (
                    self.build(spent, outputs.clone()),
                    vec![],
                    users[*payer].anonymous.identity(),
                )
            })
            .collect();
        let proven = self.prove_all(builds, rng.gen())?;
        let txs = proven.iter().map(|tx| SpecieTransaction::from(tx.clone())).collect();
        let statuses = submit_all(core, txs)?;
        for ((tx, (payer, payee, token, outputs)), status) in proven.iter().zip(spending).zip(statuses) {
            if status != TxStatus::Confirmed {
                tally.refused_honest += 1;
                users[payer].unlinkable.tokens.push(token);
                continue;
            }
            tally.unlinkable += 1;
            let created = tx.created_tokens();
            let [to_payee, change] = [outputs[0].clone(), outputs[1].clone()];
            let (paid, kept_value) = (to_payee.value(), change.value());
            let received = self.certify(core, created[0], to_payee)?;
            users[payee].unlinkable.tokens.push(received);
            let kept = self.certify(core, created[1], change)?;
            users[payer].unlinkable.tokens.push(kept);
            users[payer].unlinkable.spent.push(token);
            tally.known_unlinkable.insert(
                tx.txid(),
                KnownUnlinkable {
                    payer: Owner::Enrolled(users[payer].anonymous.id),
                    payees: vec![
                        (Owner::Enrolled(users[payee].anonymous.id), paid),
                        (Owner::Enrolled(users[payer].anonymous.id), kept_value),
                    ],
                },
            );
        }
        Ok(())
    }

    /// The forger (user 0) tries every forgery of the level once it holds what each needs.
    pub fn forge(&self, core: &NodeHandle, users: &[User], tally: &mut Tally, rng: &mut StdRng) -> BenchResult<()> {
        let forger = &users[0];
        let identity = forger.anonymous.identity();
        let mut forged: Vec<SpecieTransaction> = vec![];
        if let [first, second, ..] = forger.unlinkable.tokens.as_slice() {
            forged.push(self.wrong_serial_number(identity, first, second, rng)?);
        }
        forged.push(self.never_certified(identity, forger.anonymous.id, rng)?);
        self.certify_unknown(forger.anonymous.id, tally, rng);
        if let Some(spent) = forger.unlinkable.spent.first() {
            // An honest proof of a token already spent: only the shards can refuse it.
            let again = vec![TokenOpening::random(forger.anonymous.id, spent.opening.value(), rng)];
            let build = self.build(
                vec![SpentToken {
                    opening: &spent.opening,
                    certificate: &spent.certificate,
                }],
                again,
            );
            forged.push(SpecieTransaction::from(
                self.prove_all(vec![(build, vec![], identity)], rng.gen())?.remove(0),
            ));
        }
        if let Some(token) = forger.unlinkable.tokens.first() {
            forged.push(self.unbalanced(identity, token, rng)?);
        }
        if let Some(lifted) = self.lifted(core, forger, tally) {
            forged.push(lifted);
        }
        for status in submit_all(core, forged)? {
            if status == TxStatus::Confirmed {
                tally.forged += 1;
            } else {
                count_forgery(tally, status.code());
            }
        }
        Ok(())
    }

    /// A spend of `token` whose serial number is replaced by `other`'s (the bytes swapped in the
    /// encoded transaction): the serial number row no longer holds.
    fn wrong_serial_number(
        &self,
        identity: &Identity,
        token: &HeldToken,
        other: &HeldToken,
        rng: &mut StdRng,
    ) -> BenchResult<SpecieTransaction> {
        let outputs = vec![TokenOpening::random(
            identity.enrolment_id(),
            token.opening.value(),
            rng,
        )];
        let spent = vec![SpentToken {
            opening: &token.opening,
            certificate: &token.certificate,
        }];
        let tx = self
            .prove_all(vec![(self.build(spent, outputs), vec![], identity)], rng.gen())?
            .remove(0);
        let (honest, wrong) = (
            serial_bytes(&token.opening, identity)?,
            serial_bytes(&other.opening, identity)?,
        );
        let mut bytes = SpecieTransaction::from(tx).encode();
        let at = (bytes.windows(honest.len()))
            .position(|window| window == honest)
            .ok_or_else(|| BenchError::Failed("the serial number is not in the encoding".into()))?;
        bytes[at..at + wrong.len()].copy_from_slice(&wrong);
        SpecieTransaction::decode_exact_with(&bytes, &DecodeLimits::default())
            .map_err(|error| BenchError::Failed(format!("the swapped serial number does not decode: {error}")))
    }

    /// A token of a million, certified by a group of the forger's own, spent under that group's
    /// key: the core checks against its own certifiers.
    fn never_certified(
        &self,
        identity: &Identity,
        forger: EnrolmentId,
        rng: &mut StdRng,
    ) -> BenchResult<SpecieTransaction> {
        let (rogue, rogue_certifiers) =
            deal_certifiers(1, 1, rng).map_err(|error| BenchError::Failed(error.to_string()))?;
        let printed = TokenOpening::random(forger, 1_000_000, rng);
        let certificate = printed
            .certificate(&rogue, &[rogue_certifiers[0].certify(&printed.token())])
            .map_err(|error| BenchError::Failed(error.to_string()))?;
        let build = self.build(
            vec![SpentToken {
                opening: &printed,
                certificate: &certificate,
            }],
            vec![TokenOpening::random(forger, 1_000_000, rng)],
        );
        let keys = UnlinkableKeys {
            authority: &self.authority,
            certifiers: &rogue,
        };
        let tx = build
            .prove_and_sign(&[], identity, &keys, NonceMode::Randomized, rng)
            .map_err(|error| BenchError::Failed(error.to_string()))?;
        Ok(SpecieTransaction::from(tx))
    }

    /// Asks the certifiers to certify a token the ledger never held: each refuses.
    fn certify_unknown(&self, forger: EnrolmentId, tally: &mut Tally, rng: &mut StdRng) {
        let made_up = TokenOpening::random(forger, 1_000_000, rng).token();
        let outpoint = specie_transaction::OutPoint {
            txid: Txid(rng.gen()),
            index: 0,
        };
        let never = |_: &UhsId| false;
        let shares = self
            .certifiers
            .iter()
            .filter(|certifier| certify_if_in_ledger(certifier, &outpoint, &made_up, never).is_ok())
            .count();
        if shares == 0 {
            count_forgery(tally, "certification_refused_not_in_ledger");
        } else {
            tally.forged += 1;
        }
    }

    /// An honest transfer with an ordinary output added that the proof does not balance.
    fn unbalanced(&self, identity: &Identity, token: &HeldToken, rng: &mut StdRng) -> BenchResult<SpecieTransaction> {
        let outputs = vec![TokenOpening::random(
            identity.enrolment_id(),
            token.opening.value(),
            rng,
        )];
        let spent = vec![SpentToken {
            opening: &token.opening,
            certificate: &token.certificate,
        }];
        let mut tx = self
            .prove_all(vec![(self.build(spent, outputs), vec![], identity)], rng.gen())?
            .remove(0);
        tx.transparent_outputs.push(Output {
            witness_program_commitment: [7; 32],
            value: 1_000,
        });
        Ok(SpecieTransaction::from(tx))
    }

    /// Another user's confirmed entry proof, moved onto the forger's own coin of the same value:
    /// the amounts agree, the proof's context does not.
    fn lifted(&self, core: &NodeHandle, forger: &User, tally: &Tally) -> Option<SpecieTransaction> {
        let coin = forger.reserve.first()?;
        let entry = tally.unlinkable_entries.iter().find_map(|txid| {
            let entry = core.ledger_transaction(*txid).ok().flatten()?;
            let tx = entry
                .record
                .transaction()
                .capability::<UnlinkableTransaction>()?
                .clone();
            (tx.proof.amounts().issued == coin.output.value && tx.transparent_inputs[0].prevout != coin.outpoint)
                .then_some(tx)
        })?;
        let mut theft = entry;
        theft.transparent_inputs = vec![coin.to_input()];
        theft.sign_transparent(&[forger.key], NonceMode::Randomized).ok()?;
        Some(SpecieTransaction::from(theft))
    }
}

fn serial_bytes(opening: &TokenOpening, identity: &Identity) -> BenchResult<Vec<u8>> {
    opening
        .serial_number(identity)
        .map(|serial| serial.to_bytes().to_vec())
        .ok_or_else(|| BenchError::Failed("a token of someone else's".into()))
}

impl TokenHolder {
    /// The value of the tokens held that the ledger holds and whose serial number it does not
    /// (so: not spent), for the supply audit.
    pub fn unspent_value(&self, core: &NodeHandle, identity: &Identity) -> BenchResult<u64> {
        let mut ids = vec![];
        for token in &self.tokens {
            ids.push(token.created.uhs_id);
            let serial = token
                .opening
                .serial_number(identity)
                .ok_or_else(|| BenchError::Failed("a held token of someone else's".into()))?;
            ids.push(serial_uhs_id(&serial));
        }
        let present = core
            .query_uhs(&ids)
            .map_err(|error| BenchError::Failed(format!("cannot query the core: {error}")))?;
        Ok(self
            .tokens
            .iter()
            .zip(present.chunks(2))
            .filter(|(_, p)| p[0] && !p[1])
            .map(|(token, _)| token.opening.value())
            .sum())
    }
}
