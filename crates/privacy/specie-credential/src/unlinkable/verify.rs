//! Verifying unlinkable transfers, alone or in batches (the sentinel's data plane). Per transfer,
//! what is its own: the shape, the challenge recomputed from the statement and every nonce, the
//! owner equality, the balance, the auditor links, the range proof. Everything else (the
//! credential's and the certificate's Schnorr rows, the serial number's row, the outputs' rows and
//! both pairing equations of every input) goes into one accumulator for the whole batch
//! ([`Checks`]), decided by one multi-scalar multiplication in each group and one multi-pairing.
//! If that fails, each transfer is checked alone to name the one at fault.

use std::collections::BTreeMap;

use ark_ec::AffineRepr;
use ark_ff::{PrimeField, Zero};
use ark_serialize::CanonicalSerialize;
use bbs_plus::proof_23_ietf::PoKOfSignature23G1Protocol;
use sha2::{Digest, Sha512};

use crate::batch::{g2_sum, Checks};
use crate::group::{compressed, generators, Scalar};
use crate::owner::CiphertextLink;
use crate::spend::check_auditors;
use crate::unlinkable::audit::high_weight;
use crate::unlinkable::error::UnlinkableVerifyError;
use crate::unlinkable::group::{
    token_base, unlinkable_generators, MESSAGE_OWNER, MESSAGE_SERIAL, MESSAGE_VALUE, RANGE_BITS,
};
use crate::unlinkable::token::SerialNumber;
use crate::unlinkable::transfer::{
    absorb_output, range_commitments, range_transcript, statement_transcript, UnlinkableKeys, UnlinkableOutput,
    UnlinkableTransfer, DOMAIN_UNLINKABLE_BATCH,
};
use crate::unlinkable::{INPUTS_MAX, OUTPUTS_MAX};

/// The credential's responses, in bbs_plus's order: `sk`, `eid`, jurisdiction, then `Ā`'s and `B̄`'s.
const CREDENTIAL_RESPONSES: usize = 5;
const CREDENTIAL_SECRET: usize = 0;
const CREDENTIAL_OWNER: usize = 1;

impl UnlinkableTransfer {
    /// Verifies the transfer for `message` under `keys`.
    pub fn verify(&self, keys: &UnlinkableKeys<'_>, message: &[u8; 32]) -> Result<(), UnlinkableVerifyError> {
        verify_unlinkable_batch(keys, &[(self, message)]).map_err(|(_, error)| error)
    }

    /// The Fiat–Shamir challenge of the statement and every nonce the proof carries (what the
    /// prover hashed, the libraries' contributions written as they write them).
    fn challenge(&self, keys: &UnlinkableKeys<'_>, message: &[u8; 32]) -> Scalar {
        let g = generators();
        let u = unlinkable_generators();
        let mut transcript = statement_transcript(
            keys,
            message,
            (&self.amounts, &self.auditors, self.inputs.len(), self.outputs.len()),
        );
        for input in &self.inputs {
            transcript.point(&input.serial.1);
            let credential = &input.credential;
            PoKOfSignature23G1Protocol::compute_challenge_contribution(
                &credential.A_bar,
                &credential.B_bar,
                &credential.T,
                &BTreeMap::new(),
                &g.bbs,
                transcript.writer(),
            )
            .expect("writing into a hash cannot fail");
            let mut writer = transcript.writer();
            keys.certifiers
                .key
                .beta_tilde
                .serialize_compressed(&mut writer)
                .expect("writing into a hash");
            u.token
                .g
                .serialize_compressed(&mut writer)
                .expect("writing into a hash");
            input
                .token
                .k
                .serialize_compressed(&mut writer)
                .expect("writing into a hash");
            input
                .token
                .nonce
                .serialize_compressed(&mut writer)
                .expect("writing into a hash");
            transcript.point(&input.serial_nonce);
            input.auditors.iter().for_each(|link| link.absorb(&mut transcript));
        }
        for output in &self.outputs {
            absorb_output(&mut transcript, &output.token, &output.range_commitment, &output.nonces);
            output.auditors.iter().for_each(|link| link.absorb(&mut transcript));
            output
                .values
                .iter()
                .flatten()
                .for_each(|link| link.absorb(&mut transcript));
        }
        transcript.challenge()
    }

    /// Checks what is this transfer's own and adds the rest to `checks`.
    fn check_into(
        &self,
        keys: &UnlinkableKeys<'_>,
        message: &[u8; 32],
        c: Scalar,
        checks: &mut Checks,
    ) -> Result<(), UnlinkableVerifyError> {
        let mut balance = Scalar::zero();
        for (index, input) in self.inputs.iter().enumerate() {
            let (owner, value) = self.check_input(keys, index, c, checks)?;
            self.check_links(&input.auditors, owner, &c, checks)?;
            balance += value;
        }
        let u = unlinkable_generators();
        let (range_g, range_h) = u.range[0].get_pedersen_commitment_key();
        let (g, h) = (u.token.g, &u.token.h);
        for (index, output) in self.outputs.iter().enumerate() {
            let z = &output.responses;
            let (t, n) = (&output.token, &output.nonces);
            let base = token_base(&t.commitment);
            checks.g1_row(
                &[(g, z[0]), (h[0], z[1]), (h[1], z[2]), (h[2], z[3])],
                &[(t.commitment, -c), (n[0], -Scalar::from(1u8))],
            );
            for (j, message) in [MESSAGE_OWNER, MESSAGE_VALUE, MESSAGE_SERIAL].into_iter().enumerate() {
                checks.g1_row(
                    &[(g, z[4 + j])],
                    &[
                        (base, z[1 + message]),
                        (t.messages[message], -c),
                        (n[1 + j], -Scalar::from(1u8)),
                    ],
                );
            }
            checks.g1_row(
                &[(range_g, z[2]), (range_h, z[7])],
                &[(output.range_commitment, -c), (n[4], -Scalar::from(1u8))],
            );
            balance -= z[2];
            self.check_links(&output.auditors, z[1], &c, checks)?;
            self.check_value_links(index, output, &c, checks)?;
        }
        let net_out = Scalar::from(self.amounts.redeemed) - Scalar::from(self.amounts.issued);
        if balance != c * net_out {
            return Err(UnlinkableVerifyError::Unbalanced);
        }
        let commitments = range_commitments(self.outputs.iter().map(|o| o.range_commitment));
        self.range
            .verify(
                RANGE_BITS,
                &commitments,
                &u.range[commitments.len() - 1],
                &mut range_transcript(message),
            )
            .map_err(|_| UnlinkableVerifyError::Range)
    }

    /// An input's rows and pairings into `checks`; returns its owner and value responses.
    fn check_input(
        &self,
        keys: &UnlinkableKeys<'_>,
        index: usize,
        c: Scalar,
        checks: &mut Checks,
    ) -> Result<(Scalar, Scalar), UnlinkableVerifyError> {
        let g = generators();
        let u = unlinkable_generators();
        let input = &self.inputs[index];
        let credential = &input.credential;
        let z = match &credential.sc_resp {
            Some(responses) if responses.0.len() == CREDENTIAL_RESPONSES && !credential.A_bar.is_zero() => &responses.0,
            _ => return Err(UnlinkableVerifyError::Credential { index }),
        };
        let one = Scalar::from(1u8);
        // Σ z_i·b_i − c·(−g1) = T over (h_1, h_2, h_3, Ā, B̄), and e(Ā, pk) = e(B̄, g2).
        checks.g1_row(
            &[
                (g.bbs.h[0], z[0]),
                (g.bbs.h[1], z[1]),
                (g.bbs.h[2], z[2]),
                (g.bbs.g1, c),
            ],
            &[(credential.A_bar, z[3]), (credential.B_bar, z[4]), (credential.T, -one)],
        );
        checks.pairing((credential.A_bar, keys.authority.0, true), (credential.B_bar, g.bbs.g2));
        // Σ z_j·β̃_j + z·g̃ − c·k = nonce, and e(h', α̃ + k) = e(s', g̃).
        let token = &input.token;
        let key = &keys.certifiers.key;
        let zt = &token.responses;
        if zt[MESSAGE_OWNER] != z[CREDENTIAL_OWNER] {
            return Err(UnlinkableVerifyError::Owner { index });
        }
        checks.g2_row(
            &[
                (key.beta_tilde[0], zt[0]),
                (key.beta_tilde[1], zt[1]),
                (key.beta_tilde[2], zt[2]),
                (u.token.g_tilde, zt[3]),
            ],
            &[(token.k, -c), (token.nonce, -one)],
        );
        let [h_prime, s_prime] = token.randomized;
        if h_prime.is_zero() || s_prime.is_zero() {
            return Err(UnlinkableVerifyError::Token { index });
        }
        checks.pairing(
            (h_prime, g2_sum(&key.alpha_tilde, &token.k), false),
            (s_prime, u.token.g_tilde),
        );
        // (sk + r)·sn = G_sn.
        checks.g1_row(
            &[(u.serial, -c)],
            &[
                (input.serial.1, z[CREDENTIAL_SECRET] + zt[MESSAGE_SERIAL]),
                (input.serial_nonce, -one),
            ],
        );
        Ok((z[CREDENTIAL_OWNER], zt[MESSAGE_VALUE]))
    }

    fn check_shape(&self) -> Result<(), UnlinkableVerifyError> {
        if self.outputs.is_empty() || self.outputs.len() > OUTPUTS_MAX || self.inputs.len() > INPUTS_MAX {
            return Err(UnlinkableVerifyError::Shape);
        }
        check_auditors(&self.auditors).map_err(|_| UnlinkableVerifyError::Auditors)?;
        let mut serials: Vec<&SerialNumber> = self.serial_numbers().collect();
        serials.sort();
        if serials.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err(UnlinkableVerifyError::RepeatedSerialNumber);
        }
        Ok(())
    }

    /// An output's value ciphertexts: per auditor, its halves, whose responses make the value's
    /// (`z_v = z_lo + 2^32·z_hi`, so `v = v_lo + 2^32·v_hi`).
    fn check_value_links(
        &self,
        index: usize,
        output: &UnlinkableOutput,
        c: &Scalar,
        checks: &mut Checks,
    ) -> Result<(), UnlinkableVerifyError> {
        let [low, high] = output.value_responses;
        if output.values.len() != self.auditors.len() || output.responses[2] != low + high * high_weight() {
            return Err(UnlinkableVerifyError::ValueHalves { index });
        }
        for (pair, auditor) in output.values.iter().zip(&self.auditors) {
            if pair.iter().any(|link| link.ciphertext.auditor != *auditor) {
                return Err(UnlinkableVerifyError::ValueHalves { index });
            }
            pair[0].rows_into(checks, low, c);
            pair[1].rows_into(checks, high, c);
        }
        Ok(())
    }

    /// A party's ciphertexts: one per auditor, in the transfer's auditor order, each encrypting
    /// the enrolment id whose response is `owner` (its rows into `checks`).
    fn check_links(
        &self,
        links: &[CiphertextLink],
        owner: Scalar,
        c: &Scalar,
        checks: &mut Checks,
    ) -> Result<(), UnlinkableVerifyError> {
        if links.len() != self.auditors.len() {
            return Err(UnlinkableVerifyError::Auditors);
        }
        for (index, (link, auditor)) in links.iter().zip(&self.auditors).enumerate() {
            if link.ciphertext.auditor != *auditor {
                return Err(UnlinkableVerifyError::AuditorLink { index });
            }
            link.rows_into(checks, owner, c);
        }
        Ok(())
    }
}

/// Verifies several transfers under one pair of keys; on failure, the index of a failing transfer
/// and why. The batch's weights are powers of one scalar hashed from every transfer's challenge,
/// which the provers fixed before they could know the rest of the batch.
pub fn verify_unlinkable_batch(
    keys: &UnlinkableKeys<'_>,
    items: &[(&UnlinkableTransfer, &[u8; 32])],
) -> Result<(), (usize, UnlinkableVerifyError)> {
    let mut challenges = Vec::with_capacity(items.len());
    for (index, (proof, message)) in items.iter().enumerate() {
        proof.check_shape().map_err(|error| (index, error))?;
        challenges.push(proof.challenge(keys, message));
    }
    let mut seed = Sha512::new();
    seed.update(DOMAIN_UNLINKABLE_BATCH);
    challenges.iter().for_each(|c| seed.update(compressed(c)));
    let mut checks = Checks::new(Scalar::from_le_bytes_mod_order(&seed.finalize()));
    for (index, ((proof, message), c)) in items.iter().zip(&challenges).enumerate() {
        proof
            .check_into(keys, message, *c, &mut checks)
            .map_err(|error| (index, error))?;
    }
    if checks.hold() {
        return Ok(());
    }
    if items.len() > 1 {
        for (index, item) in items.iter().enumerate() {
            verify_unlinkable_batch(keys, std::slice::from_ref(item)).map_err(|(_, error)| (index, error))?;
        }
    }
    Err((0, UnlinkableVerifyError::Equations))
}
