//! The unlinkable transfer (Appendix B.3): one Fiat–Shamir proof over the whole transaction that
//!
//! * each input's randomised token was certified (Π_Exist: Coconut's proof of knowledge of a
//!   Pointcheval–Sanders signature on `(eid, v, r)` under the certifiers' key),
//! * its serial number is `G_sn / (sk + r)` (Π_sn: the row `(sk + r)·sn = G_sn`, `sk` shared with
//!   the credential and `r` with the token),
//! * the spender holds a credential of the RA for the token's `eid` (the signature of knowledge σ:
//!   the BBS proof of the anonymous level, its `eid` shared with the token's),
//! * every output is a well-formed token (`cm` and its per-message commitments open to the same
//!   messages) whose value is in a range commitment proven in `[0, 2^64)` (Bulletproofs++), and
//! * the values balance (Π_Bal): `Σ v_in + issued = Σ v_out + redeemed`, because the value
//!   blindings of inputs and outputs sum to the same, so the responses must too;
//!
//! and, for each auditor, that its ciphertexts encrypt each input's and output's owner.
//!
//! The proof carries the challenge and the responses of its own rows; the verifier recomputes
//! their nonces and the challenge. The pairing equations (two per input: the credential's and the
//! certificate's) are folded by one randomised pairing check per batch.

use std::collections::{BTreeMap, BTreeSet};

use ark_ec::{AffineRepr, CurveGroup, VariableBaseMSM};
use ark_ff::{PrimeField, UniformRand, Zero};
use bbs_plus::proof_23_ietf::{PoKOfSignature23G1Proof, PoKOfSignature23G1Protocol};
use bulletproofs_plus_plus::prelude::{Proof as RangeProof, Prover as RangeProver};
use coconut_crypto::{CommitMessage, SignaturePoK, SignaturePoKGenerator};
use dock_crypto_utils::randomized_pairing_check::RandomizedPairingChecker;
use dock_crypto_utils::signature::MessageOrBlinding;
use dock_crypto_utils::transcript::{new_merlin_transcript, Transcript as _};
use rand_core::{CryptoRng, RngCore};
use sha2::{Digest, Sha512};

use crate::authority::{Identity, RaPublicKey};
use crate::group::{compressed, generators, Pairing, Scalar, Transcript, G1};
use crate::owner::{AuditorKey, CiphertextLink, CiphertextLinkProver, OwnerCiphertext};
use crate::spend::check_auditors;
use crate::unlinkable::error::{UnlinkableProveError, UnlinkableVerifyError};
use crate::unlinkable::group::{
    token_base, unlinkable_generators, MESSAGE_OWNER, MESSAGE_SERIAL, MESSAGE_VALUE, RANGE_BASE, RANGE_BITS,
};
use crate::unlinkable::token::{Certificate, CertifierGroup, SerialNumber, Token, TokenOpening};
use crate::unlinkable::{INPUTS_MAX, OUTPUTS_MAX};

/// Prefix of the transfer's challenge.
pub const DOMAIN_UNLINKABLE: &[u8] = b"specie/unlinkable/transfer/v1";
/// Prefix of the batch's pairing-check randomness.
pub const DOMAIN_UNLINKABLE_BATCH: &[u8] = b"specie/unlinkable/batch/v1";
const RANGE_LABEL: &[u8] = b"specie/unlinkable/range/v1";

/// The credential attributes a spend uses (the anonymous level's order).
const ATTRIBUTE_SECRET: usize = 0;
const ATTRIBUTE_OWNER: usize = 1;

/// An output's responses: `t, eid, v, r, o_eid, o_v, o_r, γ`.
pub(crate) const OUTPUT_RESPONSES: usize = 8;
const R_BLINDING: usize = 0;
const R_OWNER: usize = 1;
const R_VALUE: usize = 2;
const R_SERIAL: usize = 3;
const R_MESSAGE_BLINDINGS: usize = 4;
const R_RANGE_BLINDING: usize = 7;

/// The keys every unlinkable proof is checked under.
#[derive(Clone, Copy, Debug)]
pub struct UnlinkableKeys<'a> {
    pub authority: &'a RaPublicKey,
    pub certifiers: &'a CertifierGroup,
}

/// What enters or leaves circulation in the clear, so supply stays exact: `issued` (an issue has
/// no inputs) and `redeemed`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PublicAmounts {
    pub issued: u64,
    pub redeemed: u64,
}

/// A token the prover spends, with its certificate.
#[derive(Clone, Copy, Debug)]
pub struct SpentToken<'a> {
    pub opening: &'a TokenOpening,
    pub certificate: &'a Certificate,
}

/// What a transfer spends and creates: `inputs` with their certificates, `outputs` (at least one),
/// `amounts` in the clear, and the `auditors` (strictly ascending) who can read every party.
#[derive(Clone, Copy, Debug)]
pub struct TransferPlan<'a> {
    pub inputs: &'a [SpentToken<'a>],
    pub outputs: &'a [TokenOpening],
    pub amounts: PublicAmounts,
    pub auditors: &'a [AuditorKey],
}

/// An unlinkable transfer's proof, with the public parts the ledger keeps: serial numbers (to
/// refuse a second spend) and output tokens (to certify later).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnlinkableTransfer {
    pub(crate) amounts: PublicAmounts,
    pub(crate) auditors: Vec<AuditorKey>,
    pub(crate) inputs: Vec<UnlinkableInput>,
    pub(crate) outputs: Vec<UnlinkableOutput>,
    pub(crate) range: RangeProof<G1>,
    pub(crate) challenge: Scalar,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UnlinkableInput {
    pub serial: SerialNumber,
    pub credential: PoKOfSignature23G1Proof<Pairing>,
    pub token: SignaturePoK<Pairing>,
    pub auditors: Vec<CiphertextLink>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UnlinkableOutput {
    pub token: Token,
    pub range_commitment: G1,
    pub responses: [Scalar; OUTPUT_RESPONSES],
    pub auditors: Vec<CiphertextLink>,
}

fn msm(bases: &[G1], scalars: &[Scalar]) -> G1 {
    <Pairing as ark_ec::pairing::Pairing>::G1::msm_unchecked(bases, scalars).into_affine()
}

/// The bases of an output's five rows, and which responses each row uses, and its target.
fn output_rows(token: &Token, range_commitment: &G1) -> [(Vec<G1>, Vec<usize>, G1); 5] {
    let u = unlinkable_generators();
    let (g, h) = (u.token.g, &u.token.h);
    let base = token_base(&token.commitment);
    let (range_g, range_h) = u.range[0].get_pedersen_commitment_key();
    [
        (
            vec![g, h[0], h[1], h[2]],
            vec![R_BLINDING, R_OWNER, R_VALUE, R_SERIAL],
            token.commitment,
        ),
        (
            vec![g, base],
            vec![R_MESSAGE_BLINDINGS, R_OWNER],
            token.messages[MESSAGE_OWNER],
        ),
        (
            vec![g, base],
            vec![R_MESSAGE_BLINDINGS + 1, R_VALUE],
            token.messages[MESSAGE_VALUE],
        ),
        (
            vec![g, base],
            vec![R_MESSAGE_BLINDINGS + 2, R_SERIAL],
            token.messages[MESSAGE_SERIAL],
        ),
        (
            vec![range_g, range_h],
            vec![R_VALUE, R_RANGE_BLINDING],
            *range_commitment,
        ),
    ]
}

/// A row's nonce from the responses: `Σ z_i·B_i − c·X`.
fn recomputed_nonce(bases: &[G1], responses: &[Scalar], challenge: &Scalar, target: &G1) -> G1 {
    let mut all_bases = bases.to_vec();
    all_bases.push(*target);
    let mut scalars = responses.to_vec();
    scalars.push(-*challenge);
    msm(&all_bases, &scalars)
}

fn statement_transcript(
    keys: &UnlinkableKeys<'_>,
    message: &[u8; 32],
    proof_shape: (&PublicAmounts, &[AuditorKey], usize, usize),
) -> Transcript {
    let (amounts, auditors, inputs, outputs) = proof_shape;
    let mut transcript = Transcript::new(DOMAIN_UNLINKABLE);
    transcript.bytes(message);
    transcript.bytes(&amounts.issued.to_le_bytes());
    transcript.bytes(&amounts.redeemed.to_le_bytes());
    transcript.bytes(&[inputs as u8, outputs as u8, auditors.len() as u8]);
    transcript.point(&keys.authority.0);
    transcript.point(&keys.certifiers.key);
    auditors.iter().for_each(|key| transcript.bytes(&key.to_bytes()));
    transcript
}

struct InputProver {
    serial: SerialNumber,
    credential: PoKOfSignature23G1Protocol<Pairing>,
    token: SignaturePoKGenerator<Pairing>,
    serial_nonce: G1,
    links: Vec<CiphertextLinkProver>,
}

struct OutputProver {
    token: Token,
    range_commitment: G1,
    range_blinding: Scalar,
    value: u64,
    witnesses: [Scalar; OUTPUT_RESPONSES],
    blindings: [Scalar; OUTPUT_RESPONSES],
    nonces: [G1; 5],
    links: Vec<CiphertextLinkProver>,
}

impl Identity {
    /// Proves an unlinkable transfer of `plan` (inputs all this identity's and certified; outputs
    /// tokens made for their payees), bound to `message` (the transaction's digest).
    pub fn prove_unlinkable(
        &self,
        keys: &UnlinkableKeys<'_>,
        plan: &TransferPlan<'_>,
        message: &[u8; 32],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<UnlinkableTransfer, UnlinkableProveError> {
        let TransferPlan {
            inputs,
            outputs,
            amounts,
            auditors,
        } = *plan;
        if outputs.is_empty() || outputs.len() > OUTPUTS_MAX || inputs.len() > INPUTS_MAX {
            return Err(UnlinkableProveError::Shape);
        }
        check_auditors(auditors).map_err(|_| UnlinkableProveError::Auditors)?;
        let value_in = inputs.iter().map(|i| u128::from(i.opening.value)).sum::<u128>() + u128::from(amounts.issued);
        let value_out = outputs.iter().map(|o| u128::from(o.value)).sum::<u128>() + u128::from(amounts.redeemed);
        if value_in != value_out {
            return Err(UnlinkableProveError::Unbalanced {
                inputs: value_in,
                outputs: value_out,
            });
        }
        let input_value_blindings: Vec<Scalar> = inputs.iter().map(|_| Scalar::rand(rng)).collect();
        let mut output_value_blindings: Vec<Scalar> = outputs.iter().map(|_| Scalar::rand(rng)).collect();
        let last = output_value_blindings.len() - 1;
        output_value_blindings[last] =
            input_value_blindings.iter().sum::<Scalar>() - output_value_blindings[..last].iter().sum::<Scalar>();

        let mut provers = Vec::with_capacity(inputs.len());
        for (index, (input, value_blinding)) in inputs.iter().zip(&input_value_blindings).enumerate() {
            provers.push(self.input_prover(keys, index, input, *value_blinding, auditors, rng)?);
        }
        let output_provers: Vec<OutputProver> = outputs
            .iter()
            .zip(&output_value_blindings)
            .map(|(opening, value_blinding)| OutputProver::new(opening, *value_blinding, auditors, rng))
            .collect();

        let mut transcript = statement_transcript(keys, message, (&amounts, auditors, inputs.len(), outputs.len()));
        let g = generators();
        for prover in &provers {
            transcript.point(&prover.serial.1);
            prover
                .credential
                .challenge_contribution(&BTreeMap::new(), &g.bbs, transcript.writer())
                .expect("writing into a hash cannot fail");
            prover
                .token
                .challenge_contribution(
                    transcript.writer(),
                    &keys.certifiers.key,
                    &unlinkable_generators().token,
                )
                .expect("writing into a hash cannot fail");
            transcript.point(&prover.serial_nonce);
            prover.links.iter().for_each(|link| link.absorb(&mut transcript));
        }
        for prover in &output_provers {
            absorb_output(&mut transcript, &prover.token, &prover.range_commitment, &prover.nonces);
            prover.links.iter().for_each(|link| link.absorb(&mut transcript));
        }
        let challenge = transcript.challenge();

        let range = prove_range(&output_provers, message, rng)?;
        let mut proven_inputs = Vec::with_capacity(provers.len());
        for prover in provers {
            proven_inputs.push(UnlinkableInput {
                serial: prover.serial,
                credential: prover
                    .credential
                    .gen_proof(&challenge)
                    .map_err(|e| UnlinkableProveError::Library(format!("{e:?}")))?,
                token: prover
                    .token
                    .gen_proof(&challenge)
                    .map_err(|e| UnlinkableProveError::Library(format!("{e:?}")))?,
                auditors: prover.links.into_iter().map(|link| link.finish(&challenge)).collect(),
            });
        }
        Ok(UnlinkableTransfer {
            amounts,
            auditors: auditors.to_vec(),
            inputs: proven_inputs,
            outputs: output_provers
                .into_iter()
                .map(|prover| prover.finish(&challenge))
                .collect(),
            range,
            challenge,
        })
    }

    fn input_prover(
        &self,
        keys: &UnlinkableKeys<'_>,
        index: usize,
        input: &SpentToken<'_>,
        value_blinding: Scalar,
        auditors: &[AuditorKey],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<InputProver, UnlinkableProveError> {
        let opening = input.opening;
        let serial = opening
            .serial_number(self)
            .ok_or(UnlinkableProveError::NotTheOwner { index })?;
        input
            .certificate
            .check(opening, keys.certifiers)
            .map_err(|_| UnlinkableProveError::Uncertified { index })?;
        let messages = opening.messages();
        let (secret_blinding, owner_blinding, serial_blinding) =
            (Scalar::rand(rng), Scalar::rand(rng), Scalar::rand(rng));
        let jurisdiction = self.credential.jurisdiction.scalar();
        let attributes = [
            MessageOrBlinding::blind_message_with(&self.secret.0, secret_blinding),
            MessageOrBlinding::blind_message_with(&messages[MESSAGE_OWNER], owner_blinding),
            MessageOrBlinding::BlindMessageRandomly(&jurisdiction),
        ];
        let credential =
            PoKOfSignature23G1Protocol::init(rng, &self.credential.signature, &generators().bbs, attributes)
                .map_err(|e| UnlinkableProveError::Library(format!("{e:?}")))?;
        let committed = [
            (messages[MESSAGE_OWNER], owner_blinding),
            (messages[MESSAGE_VALUE], value_blinding),
            (messages[MESSAGE_SERIAL], serial_blinding),
        ]
        .map(|(message, blinding)| CommitMessage::BlindMessageWithConcreteBlinding { message, blinding });
        let token = SignaturePoKGenerator::init(
            rng,
            committed,
            &input.certificate.0,
            &keys.certifiers.key,
            &unlinkable_generators().token,
        )
        .map_err(|e| UnlinkableProveError::Library(format!("{e:?}")))?;
        let links = auditors
            .iter()
            .map(|key| CiphertextLinkProver::new(*key, opening.owner, owner_blinding, rng))
            .collect();
        Ok(InputProver {
            serial,
            credential,
            token,
            serial_nonce: (serial.1 * (secret_blinding + serial_blinding)).into_affine(),
            links,
        })
    }
}

impl OutputProver {
    fn new(
        opening: &TokenOpening,
        value_blinding: Scalar,
        auditors: &[AuditorKey],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> OutputProver {
        let token = opening.token();
        let range_blinding = Scalar::rand(rng);
        let (range_g, range_h) = unlinkable_generators().range[0].get_pedersen_commitment_key();
        let range_commitment = msm(&[range_g, range_h], &[Scalar::from(opening.value), range_blinding]);
        let messages = opening.messages();
        let witnesses = [
            opening.blinding,
            messages[MESSAGE_OWNER],
            messages[MESSAGE_VALUE],
            messages[MESSAGE_SERIAL],
            opening.message_blindings[0],
            opening.message_blindings[1],
            opening.message_blindings[2],
            range_blinding,
        ];
        let mut blindings = [Scalar::zero(); OUTPUT_RESPONSES];
        blindings.iter_mut().for_each(|b| *b = Scalar::rand(rng));
        blindings[R_VALUE] = value_blinding;
        let nonces = output_rows(&token, &range_commitment).map(|(bases, indices, _)| {
            let scalars: Vec<Scalar> = indices.iter().map(|&i| blindings[i]).collect();
            msm(&bases, &scalars)
        });
        let links = auditors
            .iter()
            .map(|key| CiphertextLinkProver::new(*key, opening.owner, blindings[R_OWNER], rng))
            .collect();
        OutputProver {
            token,
            range_commitment,
            range_blinding,
            value: opening.value,
            witnesses,
            blindings,
            nonces,
            links,
        }
    }

    fn finish(self, challenge: &Scalar) -> UnlinkableOutput {
        let mut responses = self.blindings;
        for (response, witness) in responses.iter_mut().zip(&self.witnesses) {
            *response += *witness * challenge;
        }
        UnlinkableOutput {
            token: self.token,
            range_commitment: self.range_commitment,
            responses,
            auditors: self.links.into_iter().map(|link| link.finish(challenge)).collect(),
        }
    }
}

fn absorb_output(transcript: &mut Transcript, token: &Token, range_commitment: &G1, nonces: &[G1; 5]) {
    transcript.point(&token.commitment);
    token.messages.iter().for_each(|c| transcript.point(c));
    transcript.point(range_commitment);
    nonces.iter().for_each(|n| transcript.point(n));
}

fn range_transcript(message: &[u8; 32]) -> impl dock_crypto_utils::transcript::Transcript + Clone {
    let mut transcript = new_merlin_transcript(b"specie/unlinkable");
    transcript.append_message(b"label", RANGE_LABEL);
    transcript.append_message(b"message", message);
    transcript
}

fn prove_range(
    outputs: &[OutputProver],
    message: &[u8; 32],
    rng: &mut (impl RngCore + CryptoRng),
) -> Result<RangeProof<G1>, UnlinkableProveError> {
    let padded = range_values(outputs.len());
    let commitments = range_commitments(outputs.iter().map(|o| o.range_commitment));
    let mut values: Vec<u64> = outputs.iter().map(|o| o.value).collect();
    let mut blindings: Vec<Scalar> = outputs.iter().map(|o| o.range_blinding).collect();
    values.resize(padded, 0);
    blindings.resize(padded, Scalar::zero());
    let prover = RangeProver::new_with_given_base(RANGE_BASE, RANGE_BITS, commitments, values, blindings)
        .map_err(|e| UnlinkableProveError::Library(format!("{e:?}")))?;
    prover
        .prove(
            rng,
            unlinkable_generators().range[padded - 1].clone(),
            &mut range_transcript(message),
        )
        .map_err(|e| UnlinkableProveError::Library(format!("{e:?}")))
}

/// The range proof covers a power-of-two count of values (Bulletproofs++ needs one): the outputs'
/// and, after them, commitments to zero with a zero blinding (the identity), which the verifier
/// adds the same way.
pub(crate) fn range_values(outputs: usize) -> usize {
    outputs.next_power_of_two()
}

fn range_commitments(outputs: impl ExactSizeIterator<Item = G1>) -> Vec<G1> {
    let padded = range_values(outputs.len());
    let mut commitments: Vec<G1> = outputs.collect();
    commitments.resize(padded, G1::zero());
    commitments
}

impl UnlinkableTransfer {
    /// The serial numbers this transfer reveals, one per input, in order.
    pub fn serial_numbers(&self) -> impl Iterator<Item = &SerialNumber> + '_ {
        self.inputs.iter().map(|input| &input.serial)
    }

    /// The tokens it creates, one per output, in order.
    pub fn output_tokens(&self) -> impl Iterator<Item = &Token> + '_ {
        self.outputs.iter().map(|output| &output.token)
    }

    pub fn amounts(&self) -> PublicAmounts {
        self.amounts
    }

    /// For `auditor`, the ciphertexts of each input's owner (the spender) and of each output's
    /// (the payees), in order; empty if the transfer does not address that auditor.
    pub fn party_ciphertexts(&self, auditor: &AuditorKey) -> (Vec<OwnerCiphertext>, Vec<OwnerCiphertext>) {
        let Some(position) = self.auditors.iter().position(|key| key == auditor) else {
            return (Vec::new(), Vec::new());
        };
        (
            self.inputs
                .iter()
                .map(|input| input.auditors[position].ciphertext)
                .collect(),
            self.outputs
                .iter()
                .map(|output| output.auditors[position].ciphertext)
                .collect(),
        )
    }

    /// Verifies the transfer for `message` under `keys`.
    pub fn verify(&self, keys: &UnlinkableKeys<'_>, message: &[u8; 32]) -> Result<(), UnlinkableVerifyError> {
        verify_unlinkable_batch(keys, &[(self, message)]).map_err(|(_, error)| error)
    }

    /// Everything but the pairings, which go into `pairings`.
    fn verify_except_pairings(
        &self,
        keys: &UnlinkableKeys<'_>,
        message: &[u8; 32],
        pairings: &mut RandomizedPairingChecker<Pairing>,
    ) -> Result<(), UnlinkableVerifyError> {
        self.check_shape()?;
        let g = generators();
        let u = unlinkable_generators();
        let c = self.challenge;
        let mut transcript = statement_transcript(
            keys,
            message,
            (&self.amounts, &self.auditors, self.inputs.len(), self.outputs.len()),
        );
        let mut value_balance = -c * (Scalar::from(self.amounts.redeemed) - Scalar::from(self.amounts.issued));
        let authority = keys.authority.bbs();
        for (index, input) in self.inputs.iter().enumerate() {
            let credential = &input.credential;
            if credential.A_bar.is_zero() {
                return Err(UnlinkableVerifyError::Credential { index });
            }
            credential
                .verify_schnorr_proofs(&BTreeMap::new(), &c, g.bbs.g1, g.bbs.h.clone(), None)
                .map_err(|_| UnlinkableVerifyError::Credential { index })?;
            let no_revealed = BTreeSet::new();
            let secret_response = *credential
                .get_resp_for_message(ATTRIBUTE_SECRET, &no_revealed)
                .map_err(|_| UnlinkableVerifyError::Credential { index })?;
            let owner_response = *credential
                .get_resp_for_message(ATTRIBUTE_OWNER, &no_revealed)
                .map_err(|_| UnlinkableVerifyError::Credential { index })?;
            input
                .token
                .verify_with_randomized_pairing_checker(
                    &c,
                    std::iter::empty(),
                    &keys.certifiers.key,
                    &u.token,
                    pairings,
                )
                .map_err(|_| UnlinkableVerifyError::Token { index })?;
            let token_response = |m: usize| {
                input
                    .token
                    .response_for_message(m, std::iter::empty())
                    .copied()
                    .map_err(|_| UnlinkableVerifyError::Token { index })
            };
            if token_response(MESSAGE_OWNER)? != owner_response {
                return Err(UnlinkableVerifyError::Owner { index });
            }
            value_balance += token_response(MESSAGE_VALUE)?;
            let serial_nonce = msm(
                &[input.serial.1, u.serial],
                &[secret_response + token_response(MESSAGE_SERIAL)?, -c],
            );
            pairings.add_sources(&credential.A_bar, authority.0, &credential.B_bar, g.bbs.g2);
            transcript.point(&input.serial.1);
            credential
                .challenge_contribution(&BTreeMap::new(), &g.bbs, transcript.writer())
                .expect("writing into a hash cannot fail");
            input
                .token
                .challenge_contribution(transcript.writer(), &keys.certifiers.key, &u.token)
                .expect("writing into a hash cannot fail");
            transcript.point(&serial_nonce);
            self.check_links(&input.auditors, owner_response, &mut transcript)?;
        }
        for output in &self.outputs {
            let nonces = output_rows(&output.token, &output.range_commitment).map(|(bases, indices, target)| {
                let responses: Vec<Scalar> = indices.iter().map(|&i| output.responses[i]).collect();
                recomputed_nonce(&bases, &responses, &c, &target)
            });
            value_balance -= output.responses[R_VALUE];
            absorb_output(&mut transcript, &output.token, &output.range_commitment, &nonces);
            self.check_links(&output.auditors, output.responses[R_OWNER], &mut transcript)?;
        }
        if !value_balance.is_zero() || transcript.challenge() != c {
            return Err(UnlinkableVerifyError::Challenge);
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

    /// Each party's ciphertexts: one per auditor, in the transfer's auditor order.
    fn check_links(
        &self,
        links: &[CiphertextLink],
        owner_response: Scalar,
        transcript: &mut Transcript,
    ) -> Result<(), UnlinkableVerifyError> {
        if links.len() != self.auditors.len() {
            return Err(UnlinkableVerifyError::Auditors);
        }
        for (index, (link, auditor)) in links.iter().zip(&self.auditors).enumerate() {
            if link.ciphertext.auditor != *auditor || !link.holds(owner_response, &self.challenge) {
                return Err(UnlinkableVerifyError::AuditorLink { index });
            }
            link.absorb(transcript);
        }
        Ok(())
    }
}

/// Verifies several transfers under one pair of keys; on failure, the index of a failing transfer
/// and why. The pairing equations of the whole batch are folded into one randomised check whose
/// randomness is hashed from every challenge; if it fails, each transfer is rechecked alone.
pub fn verify_unlinkable_batch(
    keys: &UnlinkableKeys<'_>,
    items: &[(&UnlinkableTransfer, &[u8; 32])],
) -> Result<(), (usize, UnlinkableVerifyError)> {
    let mut seed = Sha512::new();
    seed.update(DOMAIN_UNLINKABLE_BATCH);
    items
        .iter()
        .for_each(|(proof, _)| seed.update(compressed(&proof.challenge)));
    let random = Scalar::from_le_bytes_mod_order(&seed.finalize()[..16]);
    let mut pairings = RandomizedPairingChecker::<Pairing>::new(random, true);
    for (index, (proof, message)) in items.iter().enumerate() {
        proof
            .verify_except_pairings(keys, message, &mut pairings)
            .map_err(|error| (index, error))?;
    }
    if pairings.verify() {
        return Ok(());
    }
    if items.len() > 1 {
        for (index, item) in items.iter().enumerate() {
            verify_unlinkable_batch(keys, std::slice::from_ref(item)).map_err(|(_, error)| (index, error))?;
        }
    }
    Err((0, UnlinkableVerifyError::Pairing))
}
