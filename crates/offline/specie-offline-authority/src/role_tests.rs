//! The deposit path's batches against one deposit at a time: a turn of deposits with bad ones at
//! random places, checked in batches on any number of threads, answers every deposit, writes the
//! log and ends in the state that the same deposits handed in one per turn do.

use std::sync::OnceLock;

use ed25519_dalek::{Signer, SigningKey};
use proptest::prelude::*;
use specie_offline::{
    deterministic_key, Denominations, Instruction, Issuance, KeyBinding, KeyCertificate, Move, Token,
};
use specie_role::{Durable, Role, Round, Ticket};

use super::*;
use crate::messages::{DepositOutcome, Funding, Input, Refusal, Reply, Report};

/// Tokens the fixture issues: enough that a turn of their deposits is several batches.
const TOKENS: usize = 24;
/// Every token's value: one denomination of the default series.
const VALUE: u64 = 50_000;
/// Thread counts a turn is checked on: one, and counts that cut it into batches unevenly.
const THREADS: [usize; 4] = [1, 2, 3, 5];

fn keys() -> AuthorityKeys {
    AuthorityKeys::deterministic("role-tests", Denominations::default(), 1)
}

/// What a host does, in memory: every round's proposals applied, until a round proposes nothing.
/// The replies, the log (each command's bytes) and the reports, in order.
#[derive(Debug, Default, PartialEq)]
struct Settled {
    replies: Vec<(Ticket, Reply)>,
    log: Vec<Vec<u8>>,
    reports: Vec<Report>,
}

fn settle(authority: &mut OfflineAuthority, settled: &mut Settled) {
    loop {
        let round = Round::take(authority);
        settled.replies.extend(round.replies);
        settled.reports.extend(round.reports);
        if round.proposals.is_empty() {
            return;
        }
        for command in &round.proposals {
            settled.log.push(OfflineAuthority::encode_command(command));
            authority.apply(0, command);
        }
    }
}

/// An authority that has issued one token to each first owner, and everyone's keys.
struct Fixture {
    snapshot: Vec<u8>,
    issued: Vec<Issuance>,
    owners: Vec<SigningKey>,
    /// Two payees per token: the second takes a double spend's other branch.
    payees: [Vec<SigningKey>; 2],
    certificates: [Vec<KeyCertificate>; 2],
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let mut authority = OfflineAuthority::new(keys());
        authority.lead(0);
        let side =
            |label: &str| -> Vec<SigningKey> { (0..TOKENS as u64).map(|n| deterministic_key(label, n)).collect() };
        let (owners, payees) = (side("owner"), [side("payee"), side("other-payee")]);
        let identity = deterministic_key("identity", 0);
        let mut settled = Settled::default();
        authority.handle(
            0,
            Input::Register {
                ticket: 0,
                identity: identity.verifying_key().to_bytes(),
            },
        );
        settle(&mut authority, &mut settled);
        let public = |key: &SigningKey| key.verifying_key().to_bytes();
        let everyone = owners.iter().chain(&payees[0]).chain(&payees[1]);
        let bindings = everyone.map(|key| KeyBinding::sign(&identity, public(key))).collect();
        authority.handle(0, Input::Certify { ticket: 1, bindings });
        let funding = Funding {
            id: [9; 32],
            amount: VALUE * TOKENS as u64,
            owners: owners.iter().map(public).collect(),
        };
        settle(&mut authority, &mut settled);
        authority.handle(0, Input::Fund { ticket: 2, funding });
        settle(&mut authority, &mut settled);
        let [(0, Reply::Registered), (1, Reply::Certified { certificates }), (2, Reply::Funded { issuances })] =
            &settled.replies[..]
        else {
            panic!("the fixture's enrolment and funding: {:?}", settled.replies);
        };
        let certificates = [
            certificates[TOKENS..2 * TOKENS].to_vec(),
            certificates[2 * TOKENS..].to_vec(),
        ];
        Fixture {
            snapshot: authority.snapshot(),
            issued: issuances.clone(),
            owners,
            payees,
            certificates,
        }
    })
}

/// What becomes of one token in a turn.
#[derive(Clone, Copy, Debug)]
enum Case {
    Defunded,
    Reissued,
    /// The same deposit twice.
    SentTwice,
    /// Its hop's signature broken (the first statement checked).
    BadHop,
    /// Its deposit statement's signature broken (the second).
    BadStatement,
    /// An instruction other than the one the statement signs.
    Mismatched,
    /// Paid to two payees, both deposit: the second is refused and the payer convicted.
    DoubleSpent,
    /// Deposited twice by its payee under two nonces: the second is already deposited.
    DepositedTwice,
}

fn any_case() -> impl Strategy<Value = Case> {
    prop_oneof![
        Just(Case::Defunded),
        Just(Case::Reissued),
        Just(Case::SentTwice),
        Just(Case::BadHop),
        Just(Case::BadStatement),
        Just(Case::Mismatched),
        Just(Case::DoubleSpent),
        Just(Case::DepositedTwice),
    ]
}

/// A payee's deposit of token `index` paid to its `branch`-th payee, signing `signed` and handing
/// in `instruction`.
fn deposit(index: usize, branch: usize, signed: &Instruction, instruction: Instruction, nonce: u8) -> Input {
    let fixture = fixture();
    let token = Token::issued(fixture.issued[index])
        .transfer(
            &fixture.owners[index],
            fixture.certificates[branch][index],
            [branch as u8; 16],
        )
        .expect("the first owner pays");
    let statement = Move::Deposit {
        instruction: signed.hash(),
        nonce: [nonce; 16],
    }
    .sign(&token, &fixture.payees[branch][index]);
    Input::Deposit {
        ticket: 0,
        token: Box::new(token),
        statement,
        instruction,
    }
}

/// Token `index`'s deposits for `case`, in the order they are handed in.
fn deposits(index: usize, case: Case) -> Vec<Input> {
    let defund = Instruction::Defund {
        address: [index as u8; 32],
    };
    let reissue = Instruction::Reissue {
        outputs: vec![(VALUE, fixture().payees[1][index].verifying_key().to_bytes())],
    };
    let mut broken = deposit(index, 0, &defund, defund.clone(), 0);
    let Input::Deposit { token, statement, .. } = &mut broken else {
        unreachable!("a deposit");
    };
    match case {
        Case::Defunded => vec![deposit(index, 0, &defund, defund.clone(), 0)],
        Case::Reissued => vec![deposit(index, 0, &reissue, reissue.clone(), 0)],
        Case::SentTwice => vec![deposit(index, 0, &defund, defund.clone(), 0); 2],
        Case::BadHop => {
            token.hops[0].signature[0] ^= 1;
            vec![broken]
        }
        Case::BadStatement => {
            statement.signature[5] ^= 0x40;
            vec![broken]
        }
        Case::Mismatched => vec![deposit(index, 0, &defund, reissue, 0)],
        Case::DoubleSpent => vec![
            deposit(index, 0, &defund, defund.clone(), 0),
            deposit(index, 1, &reissue, reissue.clone(), 0),
        ],
        Case::DepositedTwice => vec![
            deposit(index, 0, &defund, defund.clone(), 0),
            deposit(index, 0, &reissue, reissue.clone(), 1),
        ],
    }
}

/// One deposit per case (token `i` has case `i`), shuffled by `seed`, each with its place as its
/// ticket.
fn turn(cases: &[Case], seed: u64) -> Vec<Input> {
    let mut inputs: Vec<Input> = cases
        .iter()
        .enumerate()
        .flat_map(|(i, case)| deposits(i, *case))
        .collect();
    let mut state = seed | 1;
    for i in (1..inputs.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        inputs.swap(i, (state % (i as u64 + 1)) as usize);
    }
    for (ticket, input) in inputs.iter_mut().enumerate() {
        let Input::Deposit { ticket: slot, .. } = input else {
            unreachable!("deposits only");
        };
        *slot = ticket as Ticket;
    }
    inputs
}

fn authority() -> OfflineAuthority {
    let mut authority = OfflineAuthority::new(keys());
    authority.restore(&fixture().snapshot).expect("the fixture's snapshot");
    authority.lead(0);
    authority
}

/// The turn's deposits handed in together, settled on `threads` threads; then the final state.
fn in_one_turn(inputs: &[Input], threads: usize) -> (Settled, Vec<u8>) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool");
    pool.install(|| {
        let mut authority = authority();
        let mut settled = Settled::default();
        for input in inputs {
            authority.handle(0, input.clone());
        }
        settle(&mut authority, &mut settled);
        authority.check_invariants().expect("the books hold");
        (settled, authority.snapshot())
    })
}

/// The same deposits one per turn, in the same order.
fn one_by_one(inputs: &[Input]) -> (Settled, Vec<u8>) {
    let mut authority = authority();
    let mut settled = Settled::default();
    for input in inputs {
        authority.handle(0, input.clone());
        settle(&mut authority, &mut settled);
    }
    (settled, authority.snapshot())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_turn_in_batches_answers_logs_and_ends_as_its_deposits_one_by_one(
        cases in proptest::collection::vec(any_case(), TOKENS),
        seed in any::<u64>(),
    ) {
        let inputs = turn(&cases, seed);
        let (mut alone, alone_state) = one_by_one(&inputs);
        alone.replies.sort_by_key(|(ticket, _)| *ticket);
        prop_assert_eq!(alone.replies.len(), inputs.len(), "every deposit answered once");
        for threads in THREADS {
            let (mut together, together_state) = in_one_turn(&inputs, threads);
            together.replies.sort_by_key(|(ticket, _)| *ticket);
            prop_assert_eq!(&together, &alone, "{} threads", threads);
            prop_assert!(together_state == alone_state, "{} threads: the same state", threads);
        }
    }
}

/// Each case's answers, as the property test's comparison takes for granted: the bad deposits are
/// refused for what is wrong with them, wherever they sit in the turn.
#[test]
fn bad_deposits_among_good_ones_are_refused_each_for_its_fault() {
    let cases: Vec<Case> = (0..TOKENS)
        .map(|i| match i % 4 {
            0 => Case::BadHop,
            1 => Case::Defunded,
            2 => Case::BadStatement,
            _ => Case::Mismatched,
        })
        .collect();
    let inputs = turn(&cases, 7);
    let (settled, _) = in_one_turn(&inputs, 3);
    assert_eq!(settled.replies.len(), inputs.len());
    for (ticket, reply) in settled.replies {
        let Input::Deposit { token, instruction, .. } = &inputs[ticket as usize] else {
            unreachable!("deposits only");
        };
        let index = fixture()
            .issued
            .iter()
            .position(|i| *i == token.issuance)
            .expect("a fixture token");
        let expected = match cases[index] {
            Case::BadHop => Reply::Refused(Refusal::BadSignature { statement: 1 }),
            Case::BadStatement => Reply::Refused(Refusal::BadSignature { statement: 2 }),
            Case::Mismatched => Reply::Refused(Refusal::InstructionMismatch),
            _ => {
                assert!(
                    matches!(reply, Reply::Deposited(DepositOutcome::Defunded { .. })),
                    "{reply:?}"
                );
                assert!(matches!(instruction, Instruction::Defund { .. }));
                continue;
            }
        };
        assert_eq!(reply, expected, "token {index}");
    }
}

/// Signature checks of `deposits` deposits, one to three statements each, signed by their own keys.
fn signature_checks(deposits: usize) -> Vec<Vec<SignatureCheck>> {
    (0..deposits)
        .map(|d| {
            (0..1 + d % 3)
                .map(|s| {
                    let key = deterministic_key("batch", (d * 3 + s) as u64);
                    let message = vec![(d + s) as u8; 40 + s];
                    SignatureCheck {
                        key: key.verifying_key(),
                        signature: key.sign(&message).to_bytes(),
                        message,
                    }
                })
                .collect()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// One batch equation for the lot, and on failure each alone: the verdicts are those of each
    /// deposit checked by itself, the first bad statement named.
    #[test]
    fn a_batch_gives_each_deposit_the_verdict_it_gets_alone(
        deposits in 1usize..24,
        broken in proptest::collection::vec((any::<usize>(), any::<usize>(), any::<u8>()), 0..4),
    ) {
        let mut checks = signature_checks(deposits);
        for (d, s, bit) in broken {
            let deposit = &mut checks[d % deposits];
            let at = s % deposit.len();
            deposit[at].signature[usize::from(bit) % 64] ^= 1 << (bit % 8);
        }
        let alone: Vec<Result<(), usize>> = checks.iter().map(|deposit| verify_batch(&[deposit.as_slice()])[0]).collect();
        for (deposit, verdict) in checks.iter().zip(&alone) {
            let first_bad = deposit
                .iter()
                .position(|c| !specie_ed25519::verify_cofactored(&c.key, &c.message, &c.signature));
            prop_assert_eq!(*verdict, first_bad.map_or(Ok(()), |at| Err(at + 1)));
        }
        let batch: Vec<&[SignatureCheck]> = checks.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(verify_batch(&batch), alone);
    }
}

#[test]
fn a_turn_gives_every_thread_a_batch_of_a_size_within_the_bounds() {
    assert_eq!(deposit_batches(1, 16), 1);
    assert_eq!(deposit_batches(256, 1), 4);
    assert_eq!(deposit_batches(256, 2), 4, "4 batches of 64");
    assert_eq!(deposit_batches(256, 16), 16, "16 batches of 16, one per core");
    assert_eq!(deposit_batches(20_000, 16), 320, "20 batches of 62 or 63 per core");
    for queued in 1..700 {
        for threads in 1..40 {
            let batches = deposit_batches(queued, threads);
            let (smallest, largest) = (queued / batches, queued.div_ceil(batches));
            let context = format!("{queued} deposits on {threads} threads: {batches} batches");
            assert!(largest <= DEPOSITS_PER_BATCH, "{context}");
            assert!(smallest >= DEPOSITS_PER_BATCH_MIN || batches == 1, "{context}");
            assert!(batches >= threads.min(queued / DEPOSITS_PER_BATCH_MIN), "{context}");
            assert!(batches <= threads || batches.is_multiple_of(threads), "{context}");
        }
    }
}
