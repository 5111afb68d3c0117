//! A committee of 4 authorities × 3 shards, the roles driven directly (every command through its
//! log encoding), a client forming certificates from votes, and a lossy network between shards.

use std::collections::{BTreeMap, VecDeque};

use specie_authority::{
    shard_of, AuthorityConfig, AuthorityShard, Funding, Input, Message, Refusal, Reply, Report, ShardIndex,
};
use specie_fastpay::test_support::SigningCommittee;
use specie_fastpay::{
    deterministic_key, AccountKey, Allowed, Certificate, CertificateError, CoreAddress, DoubleVote, Evidence,
    Justification, Recipient, RoundChange, RoundRequestError, SignedOrder, SignedRoundChange, SignedVote, SigningKey,
    TransferOrder, Vote, VoteKind,
};
use specie_role::{Durable, Role, Round};

const AUTHORITIES: usize = 4;
const SHARDS: u32 = 3;
const RETRANSMIT_MS: u64 = 100;

struct Committee4 {
    /// The committee and its members' keys, to sign what a Byzantine member would.
    signing: SigningCommittee,
    shards: Vec<Vec<AuthorityShard>>,
    /// (authority, to shard, from shard, message) in flight between shards.
    network: VecDeque<(usize, ShardIndex, ShardIndex, Message)>,
    replies: BTreeMap<u64, Reply>,
    reports: Vec<Report>,
    next_ticket: u64,
    now_ms: u64,
    /// Every how many shard messages one is dropped (0: none), and every how many duplicated.
    drop_every: usize,
    duplicate_every: usize,
    sent: usize,
}

impl Committee4 {
    fn new() -> Committee4 {
        let signing = SigningCommittee::deterministic(AUTHORITIES, 1);
        let shards = (0..AUTHORITIES)
            .map(|authority| {
                (0..SHARDS)
                    .map(|shard| {
                        let config = AuthorityConfig {
                            committee: signing.committee.clone(),
                            authority: authority as u16,
                            shard,
                            shards: SHARDS,
                            credit_retransmit_ms: RETRANSMIT_MS,
                            channel_credits_max: 10_000,
                        };
                        let mut role = AuthorityShard::new(config, signing.keys[authority].clone());
                        role.lead(0);
                        role
                    })
                    .collect()
            })
            .collect();
        Committee4 {
            signing,
            shards,
            network: VecDeque::new(),
            replies: BTreeMap::new(),
            reports: Vec::new(),
            next_ticket: 0,
            now_ms: 0,
            drop_every: 0,
            duplicate_every: 0,
            sent: 0,
        }
    }

    /// Hands one input to a shard and runs its rounds: each proposal goes through its log bytes.
    fn deliver(&mut self, authority: usize, shard: ShardIndex, input: Input) {
        let role = &mut self.shards[authority][shard as usize];
        role.handle(self.now_ms, input);
        self.settle(authority, shard);
    }

    /// Hands several inputs to a shard in one turn, as a host does with what arrived together.
    fn deliver_together(&mut self, authority: usize, shard: ShardIndex, inputs: Vec<Input>) {
        for input in inputs {
            self.shards[authority][shard as usize].handle(self.now_ms, input);
        }
        self.settle(authority, shard);
    }

    fn settle(&mut self, authority: usize, shard: ShardIndex) {
        loop {
            let role = &mut self.shards[authority][shard as usize];
            let round = Round::take(role);
            for (to, message) in round.sends {
                self.sent += 1;
                if self.drop_every > 0 && self.sent.is_multiple_of(self.drop_every) {
                    continue;
                }
                if self.duplicate_every > 0 && self.sent.is_multiple_of(self.duplicate_every) {
                    self.network.push_back((authority, to, shard, message.clone()));
                }
                self.network.push_back((authority, to, shard, message));
            }
            self.replies.extend(round.replies);
            self.reports.extend(round.reports);
            if round.proposals.is_empty() {
                role.check_invariants().unwrap();
                return;
            }
            for command in round.proposals {
                let bytes = AuthorityShard::encode_command(&command);
                let decoded = role.decode_command(&bytes).unwrap();
                assert_eq!(decoded, command, "commands round-trip through the log");
                role.apply(self.now_ms, &decoded);
            }
        }
    }

    fn call(&mut self, authority: usize, shard: ShardIndex, make: impl FnOnce(u64) -> Input) -> Reply {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.deliver(authority, shard, make(ticket));
        self.replies.remove(&ticket).expect("answered in the same turn")
    }

    /// Delivers shard messages (reordered: newest first every other time) and fires
    /// retransmission timers until the network is quiet and nothing is unacknowledged.
    fn run_channels(&mut self) {
        for _ in 0..10_000 {
            while let Some((authority, to, from, message)) = match self.network.len() % 2 {
                0 => self.network.pop_front(),
                _ => self.network.pop_back(),
            } {
                self.deliver(authority, to, message.into_input(from));
            }
            let pending: u128 = self.shards.iter().flatten().map(|s| s.credits_unacked()).sum();
            if pending == 0 {
                return;
            }
            self.now_ms += RETRANSMIT_MS;
            for authority in 0..AUTHORITIES {
                for shard in 0..SHARDS {
                    let role = &mut self.shards[authority][shard as usize];
                    if role.poll_timeout().is_some_and(|at| at <= self.now_ms) {
                        role.handle_timeout(self.now_ms);
                        self.settle(authority, shard);
                    }
                }
            }
        }
        panic!("channels never drained");
    }

    fn fund(&mut self, account: AccountKey, amount: u64, id: u8) {
        let shard = shard_of(&account, SHARDS);
        let funding = Funding {
            id: [id; 32],
            account,
            amount,
        };
        for authority in 0..AUTHORITIES {
            let reply = self.call(authority, shard, |ticket| Input::Fund { ticket, funding });
            assert_eq!(reply, Reply::Funded { id: [id; 32] });
        }
    }

    /// Sends `make`'s input to each of `authorities` (at the account's shard) and returns their
    /// votes, each checked to be the vote `expected` asked for, or their refusals.
    fn ask_votes(
        &mut self,
        account: &AccountKey,
        authorities: &[usize],
        expected: (VoteKind, u32, &SignedOrder),
        make: impl Fn(u64) -> Input,
    ) -> Vec<Result<Vote, Refusal>> {
        let shard = shard_of(account, SHARDS);
        let (kind, round, order) = expected;
        let statement = self.signing.statement(kind, round, order);
        authorities
            .iter()
            .map(|&authority| match self.call(authority, shard, &make) {
                Reply::Voted(vote) => {
                    vote.check(&self.signing.committee, &statement).unwrap();
                    assert_eq!(usize::from(vote.authority), authority);
                    Ok(vote)
                }
                Reply::Refused(refusal) => Err(refusal),
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    /// Sends the order to `authorities` and returns their round-0 votes (checked) or refusals.
    fn votes(&mut self, order: &SignedOrder, authorities: &[usize]) -> Vec<Result<Vote, Refusal>> {
        let sender = order.order.sender;
        self.ask_votes(&sender, authorities, (VoteKind::Prepare, 0, order), |ticket| {
            Input::Transfer {
                ticket,
                order: order.clone(),
            }
        })
    }

    /// The fast path: round-0 votes of every authority, a final certificate.
    fn certify(&mut self, order: &SignedOrder) -> Certificate {
        let votes: Vec<Vote> = self
            .votes(order, &[0, 1, 2, 3])
            .into_iter()
            .map(Result::unwrap)
            .collect();
        Certificate::from_votes(order.clone(), &votes)
    }

    /// Hands `lock` (a quorum of prepare votes) to `authorities`: their commit votes.
    fn lock(&mut self, lock: &Certificate, authorities: &[usize]) -> Vec<Result<Vote, Refusal>> {
        let sender = lock.order.order.sender;
        let expected = (VoteKind::Commit, lock.round, &lock.order);
        self.ask_votes(&sender, authorities, expected, |ticket| Input::Lock {
            ticket,
            certificate: lock.clone(),
        })
    }

    /// The slow path from a quorum of round-0 prepare votes: `authorities` lock it and their
    /// commit votes are the final certificate.
    fn certify_slowly(&mut self, prepares: &[Vote], order: &SignedOrder, authorities: &[usize]) -> Certificate {
        let lock = Certificate::from_votes(order.clone(), prepares);
        assert_eq!(lock.check_lock(&self.signing.committee), Ok(()));
        let commits: Vec<Vote> = self.lock(&lock, authorities).into_iter().map(Result::unwrap).collect();
        let certificate = Certificate::from_votes(order.clone(), &commits);
        assert_eq!(certificate.check(&self.signing.committee), Ok(()));
        certificate
    }

    fn confirm(&mut self, certificate: &Certificate, authority: usize) -> Reply {
        let shard = shard_of(&certificate.order.order.sender, SHARDS);
        let certificate = certificate.clone();
        self.call(authority, shard, |ticket| Input::Confirm { ticket, certificate })
    }

    fn balance(&self, authority: usize, account: &AccountKey) -> i128 {
        let shard = &self.shards[authority][shard_of(account, SHARDS) as usize];
        shard.account(account, 0).map_or(0, |a| a.balance)
    }

    /// Each authority's books: balances + credits in flight between its shards = funded − redeemed.
    fn audit(&self) {
        for (authority, shards) in self.shards.iter().enumerate() {
            let balances: i128 = shards.iter().map(AuthorityShard::balances).sum();
            let unacked: u128 = shards.iter().map(AuthorityShard::credits_unacked).sum();
            let funded: u128 = shards.iter().map(AuthorityShard::funded).sum();
            let redeemed: u128 = shards.iter().map(AuthorityShard::redeemed).sum();
            assert_eq!(
                balances + unacked as i128,
                funded as i128 - redeemed as i128,
                "authority {authority}'s books"
            );
        }
    }
}

fn account(n: u64) -> (SigningKey, AccountKey) {
    let key = deterministic_key("account", n);
    let account = AccountKey(key.verifying_key().to_bytes());
    (key, account)
}

fn pay(owner: &SigningKey, to: Recipient, amount: u64, sequence: u64) -> SignedOrder {
    TransferOrder {
        sender: AccountKey(owner.verifying_key().to_bytes()),
        recipient: to,
        amount,
        sequence,
        memo: Vec::new(),
    }
    .sign(owner)
}

#[test]
fn payments_across_shards_settle_exactly_once_through_a_lossy_reordering_network() {
    let mut c = Committee4::new();
    c.drop_every = 3;
    c.duplicate_every = 4;
    let accounts: Vec<_> = (0..12).map(account).collect();
    for (n, (_, key)) in accounts.iter().enumerate() {
        c.fund(*key, 1_000, n as u8);
    }
    assert!(
        accounts
            .iter()
            .map(|(_, a)| shard_of(a, SHARDS))
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 1,
        "the accounts span shards"
    );
    let mut expected: BTreeMap<AccountKey, i128> = accounts.iter().map(|(_, a)| (*a, 1_000)).collect();
    let mut sequences = vec![0u64; accounts.len()];
    for round in 0..5u64 {
        for from in 0..accounts.len() {
            let to = (from + 1 + round as usize) % accounts.len();
            let amount = 10 + round + from as u64;
            let order = pay(
                &accounts[from].0,
                Recipient::Account(accounts[to].1),
                amount,
                sequences[from],
            );
            let certificate = c.certify(&order);
            for authority in 0..AUTHORITIES {
                let sequence = sequences[from];
                assert_eq!(
                    c.confirm(&certificate, authority),
                    Reply::Confirmed {
                        sender: accounts[from].1,
                        sequence
                    }
                );
            }
            sequences[from] += 1;
            *expected.get_mut(&accounts[from].1).unwrap() -= i128::from(amount);
            *expected.get_mut(&accounts[to].1).unwrap() += i128::from(amount);
        }
        c.audit();
    }
    c.run_channels();
    c.audit();
    for authority in 0..AUTHORITIES {
        for (key, balance) in &expected {
            assert_eq!(c.balance(authority, key), *balance, "authority {authority}");
        }
    }
    // Every shard's state survives its snapshot: restored into a fresh role, the same bytes.
    for shards in &c.shards {
        for shard in shards {
            let snapshot = shard.snapshot();
            let mut fresh = AuthorityShard::new(
                shard.config().clone(),
                c.signing.keys[usize::from(shard.config().authority)].clone(),
            );
            fresh.restore(&snapshot).unwrap();
            fresh.check_invariants().unwrap();
            assert_eq!(fresh.snapshot(), snapshot);
            assert_eq!(fresh.balances(), shard.balances());
        }
    }
    assert!(c.reports.is_empty(), "{:?}", c.reports);
}

#[test]
fn re_sent_orders_and_certificates_get_the_same_answers_and_a_redeem_leaves_the_books() {
    let mut c = Committee4::new();
    let (alice_key, alice) = account(1);
    c.fund(alice, 100, 1);
    // A second funding with the same id and other terms is refused; the same one is idempotent.
    let shard = shard_of(&alice, SHARDS);
    let other_terms = Funding {
        id: [1; 32],
        account: alice,
        amount: 999,
    };
    assert!(matches!(
        c.call(0, shard, |ticket| Input::Fund {
            ticket,
            funding: other_terms
        }),
        Reply::Refused(Refusal::FundingMismatch { .. })
    ));
    c.fund(alice, 100, 1);
    assert_eq!(c.balance(0, &alice), 100);

    let redeem = pay(&alice_key, Recipient::Core(CoreAddress([9; 32])), 30, 0);
    let first = c.votes(&redeem, &[0, 1, 2, 3]);
    assert_eq!(first, c.votes(&redeem, &[0, 1, 2, 3]), "the same votes, byte for byte");
    let certificate = c.certify(&redeem);
    for _ in 0..2 {
        assert_eq!(
            c.confirm(&certificate, 2),
            Reply::Confirmed {
                sender: alice,
                sequence: 0
            }
        );
    }
    assert_eq!(
        c.votes(&redeem, &[2]),
        vec![first[2].clone()],
        "a confirmed order keeps its vote"
    );
    assert_eq!(c.balance(2, &alice), 70);
    assert_eq!(c.shards[2][shard as usize].redeemed(), 30);
    c.audit();

    // FastPay's checks, each with its reason.
    let overdraw = pay(&alice_key, Recipient::Core(CoreAddress([9; 32])), 71, 1);
    assert_eq!(
        c.votes(&overdraw, &[2]),
        vec![Err(Refusal::InsufficientBalance {
            balance: 70,
            amount: 71
        })]
    );
    let skipped = pay(&alice_key, Recipient::Core(CoreAddress([9; 32])), 1, 5);
    assert_eq!(
        c.votes(&skipped, &[2]),
        vec![Err(Refusal::WrongSequence { expected: 1, got: 5 })]
    );
    // An authority still pending on sequence 0 refuses sequence 1 until it sees the certificate.
    let next = pay(&alice_key, Recipient::Core(CoreAddress([9; 32])), 1, 1);
    assert_eq!(
        c.votes(&next, &[1]),
        vec![Err(Refusal::OtherOrderPending { sequence: 0 })]
    );
    for authority in [1, 3] {
        assert!(matches!(c.confirm(&certificate, authority), Reply::Confirmed { .. }));
    }
    // Authority 0 never saw the confirmation: a certificate for sequence 1 needs 0 first.
    let next = pay(&alice_key, Recipient::Core(CoreAddress([9; 32])), 1, 1);
    // Without 0's vote there is no fast certificate: 1, 2 and 3 lock and commit instead.
    let next_certificate = {
        let votes: Vec<Vote> = c.votes(&next, &[1, 2, 3]).into_iter().map(Result::unwrap).collect();
        c.certify_slowly(&votes, &next, &[1, 2, 3])
    };
    assert_eq!(
        c.confirm(&next_certificate, 0),
        Reply::Refused(Refusal::MissingEarlier { next: 0, got: 1 })
    );
    assert!(matches!(c.confirm(&certificate, 0), Reply::Confirmed { .. }));
    assert!(matches!(c.confirm(&next_certificate, 0), Reply::Confirmed { .. }));
    let wrong_shard = (shard + 1) % SHARDS;
    assert_eq!(
        c.call(0, wrong_shard, |ticket| Input::Transfer {
            ticket,
            order: next.clone()
        }),
        Reply::Refused(Refusal::WrongShard { owner: shard })
    );
}

impl Committee4 {
    /// A committee where Mallory (funded with 50) has signed two orders for her sequence
    /// number 0, all of her balance to Bob and all of it to Carol, and sent neither yet.
    fn with_equivocating_owner() -> (Committee4, SignedOrder, SignedOrder) {
        let mut c = Committee4::new();
        let (mallory_key, mallory) = account(3);
        let (_, bob) = account(4);
        let (_, carol) = account(5);
        c.fund(mallory, 50, 1);
        let to_bob = pay(&mallory_key, Recipient::Account(bob), 50, 0);
        let to_carol = pay(&mallory_key, Recipient::Account(carol), 50, 0);
        (c, to_bob, to_carol)
    }
}

#[test]
fn an_equivocating_owner_gets_no_certificate_and_conflicting_certificates_convict_the_double_signers() {
    let (mut c, to_bob, to_carol) = Committee4::with_equivocating_owner();
    // Two authorities each: neither order reaches the quorum of 3.
    assert!(c.votes(&to_bob, &[0, 1]).iter().all(Result::is_ok));
    assert!(c.votes(&to_carol, &[2, 3]).iter().all(Result::is_ok));
    assert_eq!(
        c.votes(&to_carol, &[0, 1]),
        vec![Err(Refusal::OtherOrderPending { sequence: 0 }); 2]
    );
    assert_eq!(
        c.votes(&to_bob, &[2, 3]),
        vec![Err(Refusal::OtherOrderPending { sequence: 0 }); 2]
    );

    // Authorities 0, 1 and 3 turn Byzantine and sign the other order too: two final
    // certificates of commit votes. Honest 2 commits to Carol's order on a lock it is shown.
    let byzantine =
        |c: &Committee4, authority: u16, kind: VoteKind, order: &SignedOrder| c.signing.vote(authority, kind, 0, order);
    let honest_carol = c.votes(&to_carol, &[2]).pop().unwrap().unwrap();
    let carol_prepares = [
        honest_carol,
        byzantine(&c, 0, VoteKind::Prepare, &to_carol),
        byzantine(&c, 1, VoteKind::Prepare, &to_carol),
    ];
    let carol_lock = Certificate::from_votes(to_carol.clone(), &carol_prepares);
    let carol_commits = [
        c.lock(&carol_lock, &[2]).pop().unwrap().unwrap(),
        byzantine(&c, 0, VoteKind::Commit, &to_carol),
        byzantine(&c, 1, VoteKind::Commit, &to_carol),
    ];
    let for_carol = Certificate::from_votes(to_carol.clone(), &carol_commits);
    let for_bob = c.signing.commit_certificate(0, &to_bob, &[0, 1, 3]);
    assert!(matches!(c.confirm(&for_carol, 2), Reply::Confirmed { .. }));
    assert_eq!(
        c.confirm(&for_bob, 2),
        Reply::Refused(Refusal::ConflictingCertificate { sequence: 0 })
    );
    let Some(Report::Equivocation(evidence)) = c.reports.pop() else {
        panic!("the conflict is reported: {:?}", c.reports)
    };
    assert!(matches!(c.reports.pop(), Some(Report::ConflictingCertificates(_))));
    assert_eq!(evidence.committee, c.signing.committee);
    // Two quorums of 3 in 4 share 2 signers, more than f = 1: here 3 signs Bob's order too.
    // The evidence convicts exactly the signers common to both certificates, 0 and 1.
    assert_eq!(evidence.convicted(), Ok(vec![0, 1]));
    assert_eq!(DoubleVote::from_certificates(&for_carol, &for_carol), vec![]);
    c.audit();
}

#[test]
fn forged_and_misdirected_channel_messages_are_reported_and_change_nothing() {
    let mut c = Committee4::new();
    let (_, alice) = account(1);
    let shard = shard_of(&alice, SHARDS);
    let other = (shard + 1) % SHARDS;
    let credit = specie_authority::Credit {
        recipient: alice,
        amount: 1_000_000,
        sender: alice,
        sender_sequence: 0,
    };
    // From itself, from a shard that does not exist, for an account of another shard.
    c.deliver(
        0,
        shard,
        Input::Credits {
            from: shard,
            first_sequence: 0,
            credits: vec![credit],
        },
    );
    c.deliver(
        0,
        shard,
        Input::Credits {
            from: SHARDS + 5,
            first_sequence: 0,
            credits: vec![credit],
        },
    );
    c.deliver(
        0,
        other,
        Input::Credits {
            from: shard,
            first_sequence: 0,
            credits: vec![credit],
        },
    );
    c.deliver(
        0,
        shard,
        Input::CreditAck {
            from: other,
            through: 7,
        },
    );
    assert_eq!(c.reports.len(), 4, "{:?}", c.reports);
    assert_eq!(c.balance(0, &alice), 0);
    c.audit();
}

#[test]
fn an_order_arriving_with_the_confirmation_before_it_waits_for_it_instead_of_being_refused() {
    let mut c = Committee4::new();
    let (alice_key, alice) = account(1);
    let (_, bob) = account(2);
    let shard = shard_of(&alice, SHARDS);
    c.fund(alice, 100, 1);
    let first = pay(&alice_key, Recipient::Account(bob), 10, 0);
    let certificate = c.certify(&first);
    let second = pay(&alice_key, Recipient::Account(bob), 10, 1);
    c.deliver_together(
        0,
        shard,
        vec![
            Input::Confirm {
                ticket: 900,
                certificate,
            },
            Input::Transfer {
                ticket: 901,
                order: second,
            },
        ],
    );
    assert!(matches!(c.replies.remove(&900), Some(Reply::Confirmed { .. })));
    assert!(
        matches!(c.replies.remove(&901), Some(Reply::Voted(_))),
        "{:?}",
        c.replies
    );
    c.audit();
}

#[test]
fn an_authority_that_voted_for_another_order_does_not_sign_the_certified_one_afterwards() {
    let (mut c, to_bob, to_carol) = Committee4::with_equivocating_owner();
    // Mallory splits the committee: 3 votes for Carol's order, 0, 1 and 2 lock and certify Bob's.
    let carol_vote = c.votes(&to_carol, &[3]).pop().unwrap().unwrap();
    let bob_votes: Vec<Vote> = c.votes(&to_bob, &[0, 1, 2]).into_iter().map(Result::unwrap).collect();
    let for_bob = c.certify_slowly(&bob_votes, &to_bob, &[0, 1, 2]);
    assert!(matches!(c.confirm(&for_bob, 3), Reply::Confirmed { .. }));
    // Sent Bob's order now, 3 must not sign it: with its vote for Carol's order, that would be
    // evidence that convicts an honest authority.
    let answer = c.votes(&to_bob, &[3]);
    if let [Ok(vote)] = answer.as_slice() {
        let evidence = Evidence {
            committee: c.signing.committee.clone(),
            double_votes: vec![DoubleVote {
                authority: 3,
                first: SignedVote {
                    kind: VoteKind::Prepare,
                    order: to_carol.order.clone(),
                    round: 0,
                    signature: carol_vote.signature,
                },
                second: SignedVote {
                    kind: VoteKind::Prepare,
                    order: to_bob.order.clone(),
                    round: 0,
                    signature: vote.signature,
                },
            }],
            broken_promises: Vec::new(),
        };
        panic!(
            "honest authority 3 signed both orders; the evidence convicts {:?}",
            evidence.convicted()
        );
    }
    assert_eq!(answer, vec![Err(Refusal::WrongSequence { expected: 1, got: 0 })]);
    // An authority whose vote is pending still answers with that vote; once it confirmed, the
    // certificate holds its commit vote, not its round-0 vote, which is no answer to a transfer
    // order (a fast certificate's own vote is answered again: the re-sent orders test).
    assert_eq!(c.votes(&to_bob, &[1]), vec![Ok(bob_votes[1].clone())]);
    assert!(matches!(c.confirm(&for_bob, 1), Reply::Confirmed { .. }));
    assert_eq!(
        c.votes(&to_bob, &[1]),
        vec![Err(Refusal::WrongSequence { expected: 1, got: 0 })]
    );
}

impl Committee4 {
    /// Asks `authorities` to enter `round` of the account's slot at `sequence`: their signed
    /// round changes.
    fn round_changes(
        &mut self,
        owner: &SigningKey,
        sequence: u64,
        round: u32,
        authorities: &[usize],
    ) -> Vec<SignedRoundChange> {
        let request = self.signing.round_request(owner, sequence, round);
        let shard = shard_of(&request.request.account, SHARDS);
        authorities
            .iter()
            .map(|&authority| {
                let input = |ticket| Input::RoundChange { ticket, request };
                match self.call(authority, shard, input) {
                    Reply::RoundChanged(signed) => *signed,
                    other => panic!("authority {authority}: {other:?}"),
                }
            })
            .collect()
    }

    /// Proposes `order` for `round` to `authorities`: their prepare votes or refusals.
    fn propose(
        &mut self,
        order: &SignedOrder,
        round: u32,
        justification: &Justification,
        authorities: &[usize],
    ) -> Vec<Result<Vote, Refusal>> {
        let sender = order.order.sender;
        self.ask_votes(&sender, authorities, (VoteKind::Prepare, round, order), |ticket| {
            Input::Propose {
                ticket,
                order: order.clone(),
                round,
                justification: Box::new(justification.clone()),
            }
        })
    }
}

#[test]
fn every_round_zero_vote_is_final_at_once_and_a_quorum_of_them_is_a_lock_that_commits() {
    let mut c = Committee4::new();
    let (alice_key, alice) = account(1);
    let (_, bob) = account(2);
    c.fund(alice, 100, 1);
    // The fast path: every authority's round-0 vote.
    let first = pay(&alice_key, Recipient::Account(bob), 10, 0);
    let fast = c.certify(&first);
    assert_eq!(fast.signatures.len(), AUTHORITIES);
    for authority in 0..AUTHORITIES {
        assert_eq!(
            c.confirm(&fast, authority),
            Reply::Confirmed {
                sender: alice,
                sequence: 0
            }
        );
    }

    // Authority 3 never hears of the second order: the quorum's votes are a lock, not final.
    let second = pay(&alice_key, Recipient::Account(bob), 20, 1);
    let prepares: Vec<Vote> = c.votes(&second, &[0, 1, 2]).into_iter().map(Result::unwrap).collect();
    let lock = Certificate::from_votes(second.clone(), &prepares);
    for authority in 0..AUTHORITIES {
        assert_eq!(
            c.confirm(&lock, authority),
            Reply::Refused(Refusal::Certificate(CertificateError::BelowQuorum {
                signers: 3,
                quorum: 4
            }))
        );
    }
    // Every authority commits on the lock, 3 too; asked again, it answers the same vote.
    let commits: Vec<Vote> = c.lock(&lock, &[0, 1, 2, 3]).into_iter().map(Result::unwrap).collect();
    assert_eq!(c.lock(&lock, &[3]), vec![Ok(commits[3].clone())]);
    let certificate = Certificate::from_votes(second.clone(), &commits[1..]);
    assert_eq!(
        c.lock(&certificate, &[0]),
        vec![Err(Refusal::Certificate(CertificateError::NotALock))],
        "commit votes are final, nothing to lock"
    );
    for authority in 0..AUTHORITIES {
        assert_eq!(
            c.confirm(&certificate, authority),
            Reply::Confirmed {
                sender: alice,
                sequence: 1
            }
        );
        assert_eq!(c.balance(authority, &alice), 70);
    }
    c.run_channels();
    c.audit();
    for authority in 0..AUTHORITIES {
        assert_eq!(c.balance(authority, &bob), 30);
    }
}

#[test]
fn a_round_change_meeting_a_vote_on_its_way_to_the_log_waits_for_it_instead_of_being_refused() {
    // A payer that heard "contested" from half the committee asks for round 1 at once, while
    // this authority's round-0 vote is still being written: the round change must wait for it
    // (and report it), not be refused as busy, or the payer opens round after round meanwhile.
    let (mut c, to_bob, _) = Committee4::with_equivocating_owner();
    let (mallory_key, _) = account(3);
    let shard = shard_of(&to_bob.order.sender, SHARDS);
    let request = c.signing.round_request(&mallory_key, 0, 1);
    let waiting = 16;
    let mut inputs = vec![Input::Transfer {
        ticket: 900,
        order: to_bob.clone(),
    }];
    inputs.extend((0..=waiting).map(|n| Input::RoundChange {
        ticket: 901 + n,
        request,
    }));
    c.deliver_together(0, shard, inputs);
    assert!(
        matches!(c.replies.remove(&900), Some(Reply::Voted(_))),
        "{:?}",
        c.replies
    );
    let Some(Reply::RoundChanged(change)) = c.replies.remove(&901) else {
        panic!(
            "the first round change is answered once the vote is applied: {:?}",
            c.replies
        )
    };
    assert_eq!(change.change.prepared_first, Some(to_bob.order.digest()));
    for n in 1..waiting {
        assert_eq!(c.replies.remove(&(901 + n)), Some(Reply::RoundChanged(change.clone())));
    }
    // Only beyond the bound on waiting requests is one refused.
    assert_eq!(c.replies.remove(&(901 + waiting)), Some(Reply::Refused(Refusal::Busy)));
    assert!(c.replies.is_empty(), "{:?}", c.replies);
    c.audit();
}

#[test]
fn an_owner_who_split_the_committee_recovers_in_round_one_and_the_other_order_is_refused_for_good() {
    let (mut c, to_bob, to_carol) = Committee4::with_equivocating_owner();
    let mallory = to_bob.order.sender;
    let (mallory_key, _) = account(3);
    let Recipient::Account(carol) = to_carol.order.recipient else {
        unreachable!("a payment to Carol's account")
    };
    assert!(c.votes(&to_bob, &[0, 1]).iter().all(Result::is_ok));
    assert!(c.votes(&to_carol, &[2, 3]).iter().all(Result::is_ok));

    // Only Mallory may move her slot to a later round: a stranger's request for round 5 (or a
    // copy of hers with the round changed) is refused, so round 1 is still open below.
    let shard = shard_of(&mallory, SHARDS);
    let mut forged = c.signing.round_request(&account(4).0, 0, 5);
    forged.request.account = mallory;
    let mut raised = c.signing.round_request(&mallory_key, 0, 1);
    raised.request.round = 5;
    for request in [forged, raised] {
        let input = |ticket| Input::RoundChange { ticket, request };
        assert_eq!(
            c.call(0, shard, input),
            Reply::Refused(Refusal::RoundRequest(RoundRequestError::BadSignature))
        );
    }

    // Round 0 is stuck at 2 against 2: every authority enters round 1 and says what it prepared.
    let changes = c.round_changes(&mallory_key, 0, 1, &[0, 1, 2, 3]);
    let prepared: Vec<_> = changes.iter().map(|signed| signed.change.prepared_first).collect();
    let (bob_digest, carol_digest) = (to_bob.order.digest(), to_carol.order.digest());
    assert_eq!(
        prepared,
        [
            Some(bob_digest),
            Some(bob_digest),
            Some(carol_digest),
            Some(carol_digest)
        ]
    );
    assert!(changes.iter().all(|signed| signed.change.lock.is_none()));
    // Asked again, the same signed round change, byte for byte.
    assert_eq!(c.round_changes(&mallory_key, 0, 1, &[2]), vec![changes[2].clone()]);
    // All four: neither order can have a fast certificate, the owner may choose. Three of
    // them, two of which prepared Bob's order (more than f), would allow only Bob's.
    let justification = c.signing.justification(changes.clone());
    let committee = c.signing.committee.clone();
    assert_eq!(justification.check(&committee, &mallory, 0, 1), Ok(Allowed::Any));
    let three = c.signing.justification(changes[..3].to_vec());
    assert_eq!(
        three.check(&committee, &mallory, 0, 1),
        Ok(Allowed::Only {
            digest: bob_digest,
            lock_round: None
        })
    );
    assert_eq!(c.propose(&to_carol, 1, &three, &[0]), vec![Err(Refusal::NotAllowed)]);

    // Carol's order, prepared in round 1 by all four (0 and 1 prepared Bob's in round 0).
    let prepares: Vec<Vote> = c
        .propose(&to_carol, 1, &justification, &[0, 1, 2, 3])
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        c.propose(&to_bob, 1, &justification, &[0]),
        vec![Err(Refusal::OtherOrderPending { sequence: 0 })],
        "one order per round"
    );
    let everyone = Certificate::from_votes(to_carol.clone(), &prepares);
    assert_eq!(
        c.confirm(&everyone, 0),
        Reply::Refused(Refusal::Certificate(CertificateError::NotFinal { round: 1 })),
        "only round 0 has a fast path"
    );
    let lock = Certificate::from_votes(to_carol.clone(), &prepares[..3]);
    let commits: Vec<Vote> = c.lock(&lock, &[1, 2, 3]).into_iter().map(Result::unwrap).collect();
    let certificate = Certificate::from_votes(to_carol.clone(), &commits);
    for authority in 0..AUTHORITIES {
        assert_eq!(
            c.confirm(&certificate, authority),
            Reply::Confirmed {
                sender: mallory,
                sequence: 0
            }
        );
    }

    // Bob's order is refused for good: a transfer finds the sequence number moved on, and a
    // recovery input for the slot is answered with its final certificate.
    assert_eq!(
        c.votes(&to_bob, &[0, 1, 2, 3]),
        vec![Err(Refusal::WrongSequence { expected: 1, got: 0 }); 4]
    );
    let proposal = |ticket| Input::Propose {
        ticket,
        order: to_bob.clone(),
        round: 1,
        justification: Box::new(justification.clone()),
    };
    assert_eq!(c.call(0, shard, proposal), Reply::Final(Box::new(certificate.clone())));
    let request = c.signing.round_request(&mallory_key, 0, 2);
    let entering = |ticket| Input::RoundChange { ticket, request };
    assert_eq!(c.call(3, shard, entering), Reply::Final(Box::new(certificate)));
    c.run_channels();
    c.audit();
    for authority in 0..AUTHORITIES {
        assert_eq!(c.balance(authority, &mallory), 0);
        assert_eq!(c.balance(authority, &carol), 50);
    }
    assert!(c.reports.is_empty(), "{:?}", c.reports);
}

/// A round change that hides a round-0 prepare its signer gave is kept as evidence by the
/// shard that checks the justification, which still acts on it (the decide rule tolerates f such
/// lies): authority 1 prepared Bob's order in round 0 (its vote is in the lock) but reports
/// nothing prepared.
#[test]
fn a_round_change_that_a_lock_in_the_justification_contradicts_is_reported_as_evidence() {
    let (mut c, to_bob, _) = Committee4::with_equivocating_owner();
    let (mallory_key, mallory) = account(3);
    let prepares: Vec<Vote> = c.votes(&to_bob, &[0, 1, 2]).into_iter().map(Result::unwrap).collect();
    let lock = Certificate::from_votes(to_bob.clone(), &prepares);
    assert!(c.lock(&lock, &[0]).iter().all(Result::is_ok));
    let honest = c.round_changes(&mallory_key, 0, 1, &[0, 3]);
    let lie = RoundChange {
        prepared_first: None,
        lock: None,
        ..honest[1].change
    };
    let lie = c.signing.round_change(1, lie, None);
    let justification = c
        .signing
        .justification(vec![honest[0].clone(), lie.clone(), honest[1].clone()]);
    assert!(c.reports.is_empty());
    assert!(
        c.propose(&to_bob, 1, &justification, &[2])[0].is_ok(),
        "the lock still decides"
    );
    let Some(Report::Equivocation(evidence)) = c.reports.pop() else {
        panic!("the broken promise is reported: {:?}", c.reports)
    };
    assert!(evidence.double_votes.is_empty());
    assert_eq!(evidence.broken_promises[0].change, lie.change);
    assert_eq!(evidence.convicted(), Ok(vec![1]));
    assert_eq!(evidence.broken_promises[0].change.account, mallory);
}
