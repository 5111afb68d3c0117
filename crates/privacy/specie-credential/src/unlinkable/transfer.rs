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
//! and, for each auditor, that its ciphertexts encrypt each input's and output's owner and each
//! output's value, in two 32-bit halves (`audit.rs`).
//!
//! The proof carries the challenge and the responses of its own rows; the verifier recomputes
//! their nonces and the challenge. The pairing equations (two per input: the credential's and the
//! certificate's) are folded by one randomised pairing check per batch.

use std::collections::BTreeMap;

use ark_ec::{AffineRepr, CurveGroup, VariableBaseMSM};
use ark_ff::{Field, UniformRand, Zero};
use ark_serialize::CanonicalDeserialize;
use bbs_plus::proof_23_ietf::{PoKOfSignature23G1Proof, PoKOfSignature23G1Protocol};
use bulletproofs_plus_plus::prelude::{Proof as RangeProof, Prover as RangeProver};
use coconut_crypto::{CommitMessage, SignaturePoK, SignaturePoKGenerator};
use dock_crypto_utils::signature::MessageOrBlinding;
use dock_crypto_utils::transcript::{new_merlin_transcript, Transcript as _};
use rand_core::{CryptoRng, RngCore};

use crate::authority::{Identity, RaPublicKey};
use crate::group::{compressed, generators, Pairing, Scalar, Transcript, G1, G1_BYTES, G2, G2_BYTES, SCALAR_BYTES};
use crate::owner::{AuditorKey, CiphertextLink, CiphertextLinkProver, OwnerCiphertext};
use crate::spend::check_auditors;
use crate::unlinkable::audit::{halves, high_weight, ValueCiphertext};
use crate::unlinkable::error::UnlinkableProveError;
use crate::unlinkable::group::{
    token_base, unlinkable_generators, MESSAGE_OWNER, MESSAGE_SERIAL, MESSAGE_VALUE, RANGE_BASE, RANGE_BITS,
    TOKEN_MESSAGES,
};
use crate::unlinkable::token::{Certificate, CertifierGroup, SerialNumber, Token, TokenOpening};
use crate::unlinkable::{INPUTS_MAX, OUTPUTS_MAX};

/// Prefix of the transfer's challenge.
pub const DOMAIN_UNLINKABLE: &[u8] = b"specie/unlinkable/transfer/v2";
/// Prefix of the batch's pairing-check randomness.
pub const DOMAIN_UNLINKABLE_BATCH: &[u8] = b"specie/unlinkable/batch/v1";
const RANGE_LABEL: &[u8] = b"specie/unlinkable/range/v1";

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
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UnlinkableInput {
    pub serial: SerialNumber,
    pub credential: PoKOfSignature23G1Proof<Pairing>,
    pub token: TokenShowing,
    pub serial_nonce: G1,
    pub auditors: Vec<CiphertextLink>,
}

/// Coconut's proof of knowledge of a certificate, as its fields: the randomised signature
/// `(h', s')`, `k = Σ_j m_j·β̃_j + r'·g̃`, the Schnorr nonce of `k` and the responses for
/// `eid, v, r, r'`. The library's proof type keeps them private; these are what its verifier
/// reads, so that a batch can fold its checks (`verify.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TokenShowing {
    pub randomized: [G1; 2],
    pub k: G2,
    pub nonce: G2,
    pub responses: [Scalar; TOKEN_RESPONSES],
}

/// Responses of a token showing: the three messages, then `k`'s blinding.
pub(crate) const TOKEN_RESPONSES: usize = TOKEN_MESSAGES + 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UnlinkableOutput {
    pub token: Token,
    pub range_commitment: G1,
    pub nonces: [G1; OUTPUT_ROWS],
    pub responses: [Scalar; OUTPUT_RESPONSES],
    pub auditors: Vec<CiphertextLink>,
    /// The responses for the value's low and high halves.
    pub value_responses: [Scalar; 2],
    /// Per auditor, the ciphertexts of the value's halves.
    pub values: Vec<[CiphertextLink; 2]>,
}

/// The rows an output proves: `cm`, the three per-message commitments, the range commitment.
pub(crate) const OUTPUT_ROWS: usize = 5;

impl TokenShowing {
    /// The fields of the library's proof, read from its canonical encoding (commitment, response
    /// count and responses, message indices, `k`, `h'`, `s'`; docs/unlinkable-format.md §3).
    fn of(proof: &SignaturePoK<Pairing>) -> TokenShowing {
        let bytes = compressed(proof);
        let read = |range: std::ops::Range<usize>| &bytes[range];
        let g2 = |at: usize| G2::deserialize_compressed(read(at..at + G2_BYTES)).expect("the library's own encoding");
        let g1 = |at: usize| G1::deserialize_compressed(read(at..at + G1_BYTES)).expect("the library's own encoding");
        let scalar = |at: usize| {
            Scalar::deserialize_compressed(read(at..at + SCALAR_BYTES)).expect("the library's own encoding")
        };
        let responses_at = G2_BYTES + 8;
        let k_at = responses_at + TOKEN_RESPONSES * SCALAR_BYTES + 16;
        let sig_at = k_at + G2_BYTES;
        assert_eq!(
            bytes.len(),
            sig_at + 2 * G1_BYTES,
            "Coconut's proof of three hidden messages"
        );
        TokenShowing {
            randomized: [g1(sig_at), g1(sig_at + G1_BYTES)],
            k: g2(k_at),
            nonce: g2(0),
            responses: std::array::from_fn(|i| scalar(responses_at + i * SCALAR_BYTES)),
        }
    }
}

pub(crate) fn msm(bases: &[G1], scalars: &[Scalar]) -> G1 {
    <Pairing as ark_ec::pairing::Pairing>::G1::msm_unchecked(bases, scalars).into_affine()
}

/// The bases of an output's five rows, and which responses each row uses, and its target.
pub(crate) fn output_rows(token: &Token, range_commitment: &G1) -> [(Vec<G1>, Vec<usize>, G1); OUTPUT_ROWS] {
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

pub(crate) fn statement_transcript(
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
    nonces: [G1; OUTPUT_ROWS],
    links: Vec<CiphertextLinkProver>,
    value_witnesses: [Scalar; 2],
    value_blindings: [Scalar; 2],
    value_links: Vec<[CiphertextLinkProver; 2]>,
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
        absorb_provers(&mut transcript, keys, &provers, &output_provers);
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
                token: TokenShowing::of(
                    &prover
                        .token
                        .gen_proof(&challenge)
                        .map_err(|e| UnlinkableProveError::Library(format!("{e:?}")))?,
                ),
                serial_nonce: prover.serial_nonce,
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

/// What the provers' nonces add to the transcript, in the order the verifier reads them back.
fn absorb_provers(
    transcript: &mut Transcript,
    keys: &UnlinkableKeys<'_>,
    inputs: &[InputProver],
    outputs: &[OutputProver],
) {
    let g = generators();
    for prover in inputs {
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
        prover.links.iter().for_each(|link| link.absorb(transcript));
    }
    for prover in outputs {
        absorb_output(transcript, &prover.token, &prover.range_commitment, &prover.nonces);
        prover.links.iter().for_each(|link| link.absorb(transcript));
        prover
            .value_links
            .iter()
            .flatten()
            .for_each(|link| link.absorb(transcript));
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
        // The halves' blindings sum as the halves do, so their responses must too.
        let value_witnesses = halves(opening.value).map(Scalar::from);
        let low_blinding = Scalar::rand(rng);
        let high_blinding =
            (value_blinding - low_blinding) * high_weight().inverse().expect("2^32 is not zero in the field");
        let value_blindings = [low_blinding, high_blinding];
        let value_links = auditors
            .iter()
            .map(|key| {
                [0, 1].map(|half| {
                    CiphertextLinkProver::for_scalar(*key, value_witnesses[half], value_blindings[half], rng)
                })
            })
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
            value_witnesses,
            value_blindings,
            value_links,
        }
    }

    fn finish(self, challenge: &Scalar) -> UnlinkableOutput {
        let mut responses = self.blindings;
        for (response, witness) in responses.iter_mut().zip(&self.witnesses) {
            *response += *witness * challenge;
        }
        let value_responses = [0, 1].map(|half| self.value_blindings[half] + self.value_witnesses[half] * challenge);
        UnlinkableOutput {
            token: self.token,
            range_commitment: self.range_commitment,
            nonces: self.nonces,
            responses,
            auditors: self.links.into_iter().map(|link| link.finish(challenge)).collect(),
            value_responses,
            values: (self.value_links.into_iter())
                .map(|pair| pair.map(|link| link.finish(challenge)))
                .collect(),
        }
    }
}

pub(crate) fn absorb_output(
    transcript: &mut Transcript,
    token: &Token,
    range_commitment: &G1,
    nonces: &[G1; OUTPUT_ROWS],
) {
    transcript.point(&token.commitment);
    token.messages.iter().for_each(|c| transcript.point(c));
    transcript.point(range_commitment);
    nonces.iter().for_each(|n| transcript.point(n));
}

pub(crate) fn range_transcript(message: &[u8; 32]) -> impl dock_crypto_utils::transcript::Transcript + Clone {
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

pub(crate) fn range_commitments(outputs: impl ExactSizeIterator<Item = G1>) -> Vec<G1> {
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

    /// The auditors it addresses, ascending.
    pub fn auditors(&self) -> &[AuditorKey] {
        &self.auditors
    }

    /// For `auditor`, each output's value encrypted in halves; empty if the transfer does not
    /// address that auditor. [`crate::AuditorSecret::read_value`] reads them.
    pub fn value_ciphertexts(&self, auditor: &AuditorKey) -> Vec<ValueCiphertext> {
        let Some(position) = self.auditors.iter().position(|key| key == auditor) else {
            return Vec::new();
        };
        (self.outputs.iter())
            .map(|output| ValueCiphertext {
                halves: output.values[position].clone().map(|link| link.ciphertext),
            })
            .collect()
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
}
