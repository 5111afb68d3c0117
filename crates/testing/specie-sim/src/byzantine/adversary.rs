//! The Byzantine parties: at most one Byzantine authority (f = 1), Byzantine users, and the
//! malformed channel messages an honest shard may be handed.
//!
//! What the transport lets through, and so what the world models:
//! - Client-facing inputs (orders, certificates, reads, fundings) come from anyone; the host
//!   decodes them and hands them to the role with a ticket. A Byzantine authority or user
//!   reaches an honest shard only this way: with orders and certificates, forged or replayed.
//! - `Credits` and `CreditAck` come only from the authority's own shards: the role's contract
//!   (`specie_authority::Input`) leaves that to the host, and no host carries them yet. The
//!   world assumes the transport that contract needs: a shard channel is a mutually
//!   authenticated connection between two shards of one authority (each side proves it holds a
//!   shard identity its authority issued), and the receiving host names the sending shard
//!   (`from`) from that proof, never from the message. A Byzantine authority holds no identity
//!   of another authority, so its handshake with an honest shard fails and nothing it sends on
//!   a channel reaches the role: a forged credit is counted and dropped at the transport
//!   ([`World::forge_credits`]). A host that let such a connection through would let any
//!   authority mint money at another: the role cannot tell a forged credit in sequence from a
//!   real one.
//! - What an honest shard may still receive on an authenticated channel is what a sibling with
//!   a bug (or a misrouting host) sends: credits claimed from itself or from a shard that does
//!   not exist, for an account of another shard, beyond any credit sent, too many at once, or an
//!   acknowledgement of credits never sent ([`World::corrupt_channel`]). The role must report a
//!   `ChannelViolation` or ignore it, and its state must not change.

use std::collections::{BTreeMap, BTreeSet};

use rand::seq::SliceRandom;
use rand::Rng;
use specie_authority::{AccountState, Credit, Input, Refusal, Reply, ShardIndex, CREDITS_PER_MESSAGE_MAX};
use specie_committee::Call;
use specie_fastpay::{
    AccountKey, AuthorityIndex, Certificate, CoreAddress, DoubleVote, Recipient, RoundChange, RoundRequest,
    SignedOrder, SignedRoundChange, SignedVote, SigningKey, TransferOrder, Vote, VoteKind, VoteStatement,
};

use super::paying::{expected_vote, Paying};
use super::{Asked, AuthorityBehaviour, Outputs, Party, Payload, ShardRole, World, AUTHORITIES};
use crate::world::Violation;

/// Most orders and certificates the Byzantine authority keeps to replay.
const REMEMBERED_MAX: usize = 32;
/// Most a Byzantine user tries to pay at once (its funding is 1 000: sometimes it overdraws).
const BYZANTINE_PAYMENT_MAX: u64 = 1_500;
/// What a Byzantine user's account is funded with (see `users`).
const BYZANTINE_FUNDING: i128 = 1_000;

/// The Byzantine authority: no role, no state but what it saw; its own signing key.
pub(super) struct ByzantineAuthority {
    pub index: AuthorityIndex,
    pub behaviour: AuthorityBehaviour,
    orders: Vec<SignedOrder>,
    certificates: Vec<Certificate>,
    pub wake_at_ms: Option<u64>,
}

impl ByzantineAuthority {
    pub fn new(index: AuthorityIndex, behaviour: AuthorityBehaviour) -> ByzantineAuthority {
        ByzantineAuthority {
            index,
            behaviour,
            orders: Vec::new(),
            certificates: Vec::new(),
            wake_at_ms: (behaviour == AuthorityBehaviour::Replays).then_some(0),
        }
    }
}

/// A user who signs two orders for one sequence number, splits the committee between them,
/// replays confirmations and forges certificates. It must not harm anyone else; and under the
/// recovery rounds it regains its account: a payment holding both orders settles one of them.
pub(super) struct ByzantineUser {
    pub key: SigningKey,
    pub account: AccountKey,
    /// The sequence number it signs for next.
    pub sequence: u64,
    /// Every order it signed, with the valid round-0 prepare votes each got when sent on its
    /// own: an order it gave up on may still gather votes later.
    orders: Vec<(SignedOrder, Vec<Vote>)>,
    /// Its certificates; the index is the sequence number.
    pub certificates: Vec<Certificate>,
    /// Its certificates not yet confirmed by a quorum, and who has confirmed them.
    pub confirming: BTreeMap<u64, BTreeSet<AuthorityIndex>>,
    /// The payment of its slot (holding every order it signed for it), until it is final.
    pub paying: Option<Paying>,
    /// The sequence numbers it signed two orders for: each must still settle.
    pub contested: BTreeSet<u64>,
    /// What every authority holds for it at least: its funding less what it certified. Both
    /// orders of a split stay within it, so whichever the committee settles is payable.
    spendable: i128,
    pub wake_at_ms: u64,
}

impl ByzantineUser {
    /// Drops the votes kept towards certificates: they are of an epoch that has ended.
    pub fn forget_votes(&mut self) {
        for (_, votes) in &mut self.orders {
            votes.clear();
        }
    }

    pub fn new(key: SigningKey) -> ByzantineUser {
        ByzantineUser {
            account: AccountKey(key.verifying_key().to_bytes()),
            key,
            sequence: 0,
            orders: Vec::new(),
            certificates: Vec::new(),
            confirming: BTreeMap::new(),
            paying: None,
            contested: BTreeSet::new(),
            spendable: BYZANTINE_FUNDING,
            wake_at_ms: 0,
        }
    }

    /// Its contested slots not yet final and confirmed by a quorum.
    pub fn unrecovered(&self) -> impl Iterator<Item = u64> + '_ {
        self.contested
            .iter()
            .copied()
            .filter(|&s| self.certificates.len() as u64 <= s || self.confirming.contains_key(&s))
    }

    fn orders_for(&self, sequence: u64) -> Vec<SignedOrder> {
        self.orders
            .iter()
            .map(|(order, _)| order)
            .filter(|order| order.order.sequence == sequence)
            .cloned()
            .collect()
    }
}

fn remember<T>(rng: &mut impl Rng, kept: &mut Vec<T>, item: T) {
    if kept.len() < REMEMBERED_MAX {
        kept.push(item);
    } else {
        let slot = rng.gen_range(0..kept.len());
        kept[slot] = item;
    }
}

impl<R: ShardRole> World<R> {
    /// A record of a next epoch that hands every seat to the adversary's key... signed by it
    /// alone, below the quorum: no payer may take it.
    pub(super) fn forged_record(&self) -> specie_fastpay::CommitteeRecord {
        let adversary = self.adversary.as_ref().expect("a Byzantine authority");
        let key = &self.authority_keys[usize::from(adversary.index)];
        let current = self.committee();
        let mut members = current.members().to_vec();
        for (seat, member) in members.iter_mut().enumerate() {
            *member = specie_fastpay::deterministic_key("sim-forged-authority", seat as u64)
                .verifying_key()
                .to_bytes();
        }
        let mut record = specie_fastpay::CommitteeRecord::propose(current, members).expect("distinct keys");
        record.endorse(adversary.index, key);
        record
    }

    /// The Byzantine authority's valid vote on any order, in any phase of any round: it signs
    /// whatever it is sent.
    fn byzantine_vote(&self, kind: VoteKind, round: u32, order: &TransferOrder) -> Vote {
        let adversary = self.adversary.as_ref().expect("a Byzantine authority");
        let statement = VoteStatement {
            kind,
            committee_id: self.committee().id(),
            round,
            order_digest: order.digest(),
        };
        Vote {
            authority: adversary.index,
            statement,
            signature: statement.sign(&self.authority_keys[usize::from(adversary.index)]),
        }
    }

    /// A vote no client may count: a bad signature, another committee, another order, an index
    /// outside the committee, or another authority's index under its own signature.
    fn forged_vote(&mut self, kind: VoteKind, round: u32, order: &SignedOrder) -> Vote {
        let mut vote = self.byzantine_vote(kind, round, &order.order);
        let key = &self.authority_keys[usize::from(vote.authority)];
        match self.rng.gen_range(0..6) {
            0 => vote.signature[0] ^= 1,
            1 => {
                vote.statement.committee_id[0] ^= 1;
                vote.signature = vote.statement.sign(key);
            }
            2 => {
                vote.statement.order_digest[0] ^= 1;
                vote.signature = vote.statement.sign(key);
            }
            3 => vote.authority = AUTHORITIES as AuthorityIndex + 7,
            // The other phase, or another round: a prepare is no commit, round 0's no round 1's.
            4 => {
                vote.statement.kind = match kind {
                    VoteKind::Prepare => VoteKind::Commit,
                    VoteKind::Commit => VoteKind::Prepare,
                };
                vote.statement.round += u32::from(self.rng.gen_bool(0.5));
                vote.signature = vote.statement.sign(key);
            }
            _ => vote.authority = (vote.authority + 1) % AUTHORITIES as AuthorityIndex,
        }
        vote
    }

    /// A false account state: a huge balance, nothing confirmed, and a certificate it saw with
    /// a signature broken (for this account and sequence number if it has one, else any), so a
    /// reader that trusts the answer instead of checking each certificate is fooled.
    fn false_account_state(&mut self, account: AccountKey, from_sequence: u64) -> AccountState {
        let adversary = self.adversary.as_ref().expect("a Byzantine authority");
        let seen = &adversary.certificates;
        let fitting = seen
            .iter()
            .find(|c| c.order.order.sender == account && c.order.order.sequence == from_sequence);
        let confirmed = fitting
            .or(seen.first())
            .cloned()
            .map(|mut certificate| {
                certificate.signatures[0].1[7] ^= 0x40;
                certificate
            })
            .into_iter()
            .collect();
        AccountState {
            balance: 1 << 40,
            next_sequence: 0,
            pending: None,
            confirmed,
        }
    }

    /// The Byzantine authority answers a client-facing input as its behaviour says.
    pub(super) fn adversary_receives(&mut self, input: Input) -> Result<(), Violation> {
        let adversary = self.adversary.as_mut().expect("a Byzantine authority");
        let (index, behaviour) = (adversary.index, adversary.behaviour);
        let answer = match input {
            Input::Transfer { ticket, order } => {
                remember(&mut self.rng, &mut adversary.orders, order.clone());
                self.adversary_votes(ticket, VoteKind::Prepare, 0, &order)
            }
            Input::Propose {
                ticket, order, round, ..
            } => {
                remember(&mut self.rng, &mut adversary.orders, order.clone());
                self.adversary_votes(ticket, VoteKind::Prepare, round, &order)
            }
            Input::Lock { ticket, certificate } => {
                self.adversary_votes(ticket, VoteKind::Commit, certificate.round, &certificate.order)
            }
            Input::RoundChange { ticket, request } => match behaviour {
                AuthorityBehaviour::Withholds => None,
                // A lie that it is far ahead: alone, it must not make the payer skip rounds.
                AuthorityBehaviour::Equivocates if self.rng.gen_bool(0.3) => {
                    let passed = request.request.round.saturating_add(self.rng.gen_range(1..1_000));
                    Some((ticket, Reply::Refused(Refusal::RoundPassed { round: passed })))
                }
                _ => {
                    let RoundRequest {
                        account,
                        sequence,
                        round,
                        ..
                    } = request.request;
                    let change = self.adversary_round_change(account, sequence, round);
                    Some((ticket, Reply::RoundChanged(Box::new(change))))
                }
            },
            Input::Confirm { ticket, certificate } => {
                let order = certificate.order.order.clone();
                remember(&mut self.rng, &mut adversary.certificates, certificate);
                match behaviour {
                    AuthorityBehaviour::Withholds => None,
                    // A lie that sends the client back for certificates it need not send.
                    AuthorityBehaviour::ForgesVotes if order.sequence > 0 => Some((
                        ticket,
                        Reply::Refused(Refusal::MissingEarlier {
                            next: 0,
                            got: order.sequence,
                        }),
                    )),
                    _ => Some((
                        ticket,
                        Reply::Confirmed {
                            sender: order.sender,
                            sequence: order.sequence,
                        },
                    )),
                }
            }
            Input::Account {
                ticket,
                account,
                from_sequence,
            } => match behaviour {
                AuthorityBehaviour::Withholds => None,
                AuthorityBehaviour::ForgesVotes => Some((
                    ticket,
                    Reply::Account(Box::new(self.false_account_state(account, from_sequence))),
                )),
                _ => Some((ticket, Reply::Refused(Refusal::UnknownAccount))),
            },
            Input::Fund { ticket, funding } => match behaviour {
                AuthorityBehaviour::Withholds => None,
                _ => Some((ticket, Reply::Funded { id: funding.id })),
            },
            // A payer asking for epochs: nothing, or a record it forged (signed by itself only).
            Input::Epochs { ticket, .. } => match behaviour {
                AuthorityBehaviour::Withholds => None,
                _ => Some((ticket, Reply::Epochs(vec![self.forged_record()]))),
            },
            // Honest shards send channel messages to their own authority's shards only, no
            // client of this world reads books, and the operator hands records to honest
            // shards only.
            Input::Credits { .. } | Input::CreditAck { .. } | Input::Books { .. } | Input::EnterEpoch { .. } => {
                return Err(self
                    .violation("a channel message, a books read or an epoch change reached the Byzantine authority"));
            }
        };
        if let Some((ticket, reply)) = answer {
            self.send(Payload::Reply {
                authority: index,
                ticket,
                reply,
            });
        }
        Ok(())
    }

    /// The Byzantine authority's vote on whatever it is asked to prepare or commit: nothing if
    /// it withholds, often a malformed one if it forges, else a valid one, whatever it signed
    /// before (conflicting prepares, commits against its own locks).
    fn adversary_votes(
        &mut self,
        ticket: specie_role::Ticket,
        kind: VoteKind,
        round: u32,
        order: &SignedOrder,
    ) -> Option<(specie_role::Ticket, Reply)> {
        let behaviour = self.adversary.as_ref().expect("a Byzantine authority").behaviour;
        match behaviour {
            AuthorityBehaviour::Withholds => None,
            AuthorityBehaviour::ForgesVotes if self.rng.gen_bool(0.7) => {
                Some((ticket, Reply::Voted(self.forged_vote(kind, round, order))))
            }
            _ => Some((ticket, Reply::Voted(self.byzantine_vote(kind, round, &order.order)))),
        }
    }

    /// The Byzantine authority's round change: validly signed, reporting as prepared in round 0
    /// some order it saw for the slot (or none), and no lock (a lock needs a quorum's
    /// certificate, which it cannot make); the forger breaks the signature most of the time.
    fn adversary_round_change(&mut self, account: AccountKey, sequence: u64, round: u32) -> SignedRoundChange {
        let adversary = self.adversary.as_ref().expect("a Byzantine authority");
        let seen: Vec<[u8; 32]> = adversary
            .orders
            .iter()
            .filter(|o| (o.order.sender, o.order.sequence) == (account, sequence))
            .map(|o| o.order.digest())
            .collect();
        let prepared_first = match seen.is_empty() || self.rng.gen_bool(0.3) {
            true => None,
            false => Some(seen[self.rng.gen_range(0..seen.len())]),
        };
        let change = RoundChange {
            committee_id: self.committee().id(),
            account,
            sequence,
            round,
            prepared_first,
            lock: None,
        };
        let (index, behaviour) = (adversary.index, adversary.behaviour);
        let mut signed = change.sign(index, &self.authority_keys[usize::from(index)], None);
        if behaviour == AuthorityBehaviour::ForgesVotes && self.rng.gen_bool(0.7) {
            signed.signature[5] ^= 0x10;
        }
        signed
    }

    /// The replaying authority's turn: a certificate or order it saw, sent again to an honest
    /// authority as any client could, or credits forged into an honest shard's channel.
    pub(super) fn wake_adversary(&mut self) {
        let adversary = self.adversary.as_mut().expect("a Byzantine authority");
        adversary.wake_at_ms = Some(self.now_ms + self.rng.gen_range(20..200));
        let index = adversary.index;
        let honest = loop {
            let authority = self.rng.gen_range(0..AUTHORITIES) as AuthorityIndex;
            if authority != index {
                break authority;
            }
        };
        let adversary = self.adversary.as_ref().expect("a Byzantine authority");
        match self.rng.gen_range(0..3) {
            0 if !adversary.certificates.is_empty() => {
                let certificate = adversary.certificates[self.rng.gen_range(0..adversary.certificates.len())].clone();
                self.replay_certificate(Party::ByzantineAuthority, honest, certificate);
            }
            1 if !adversary.orders.is_empty() => {
                let order = adversary.orders[self.rng.gen_range(0..adversary.orders.len())].clone();
                self.report.replays += 1;
                let sender = order.order.sender;
                self.request(Party::ByzantineAuthority, honest, &sender, Asked::Transfer(order));
            }
            _ => self.forge_credits(honest),
        }
    }

    fn replay_certificate(&mut self, party: Party, authority: AuthorityIndex, certificate: Certificate) {
        self.report.replays += 1;
        let order = &certificate.order.order;
        let (sender, sequence) = (order.sender, order.sequence);
        let asked = Asked::Confirm { sender, sequence };
        self.send_input(party, authority, &sender, asked, |ticket| Input::Confirm {
            ticket,
            certificate,
        });
    }

    /// Credits the Byzantine authority forges into an honest shard's channel, claiming to be a
    /// sibling shard. The channel's handshake authenticates the sending shard as one of the
    /// receiver's own authority, and the Byzantine authority has no such identity: the
    /// transport refuses the connection, so nothing reaches the role.
    fn forge_credits(&mut self, authority: AuthorityIndex) {
        let shard = self.rng.gen_range(0..self.options.shards);
        self.report.forged_credits_refused += 1;
        self.record("forged-credits-refused", &[u64::from(authority), u64::from(shard)]);
    }

    /// A Byzantine user's turn: drive its payment and confirmations, then (while faults last)
    /// sign (or push again) orders, replay a certificate, or forge one. Once faults stop it
    /// only recovers its account: a contested slot is paid with every order it signed for it.
    pub(super) fn wake_byzantine_user(&mut self, i: usize) -> Result<(), Violation> {
        let party = Party::ByzantineUser(i);
        self.byzantine_users[i].wake_at_ms = self.now_ms + self.rng.gen_range(30..300);
        self.retransmit_payment(party);
        self.resend_confirmations(party);
        if !self.faults_on {
            let user = &self.byzantine_users[i];
            if user.paying.is_none() && user.contested.contains(&user.sequence) {
                let orders = user.orders_for(user.sequence);
                self.start_paying(party, orders)?;
            }
            return Ok(());
        }
        match self.rng.gen_range(0..100) {
            0..40 => self.byzantine_user_signs(i)?,
            40..55 => {
                if let Some(certificate) = self.byzantine_users[i].certificates.last().cloned() {
                    let authority = self.rng.gen_range(0..AUTHORITIES) as AuthorityIndex;
                    self.replay_certificate(party, authority, certificate);
                }
            }
            55..70 => {
                if let Some(certificate) = self.any_certificate() {
                    let authority = self.rng.gen_range(0..AUTHORITIES) as AuthorityIndex;
                    self.replay_certificate(party, authority, certificate);
                }
            }
            70..85 => self.forge_certificate(i),
            85..90 => self.forge_round_request(i),
            _ => {}
        }
        Ok(())
    }

    /// Some certificate any party made, chosen at random.
    fn any_certificate(&mut self) -> Option<Certificate> {
        let count = self.observed.certificate_count();
        (count > 0).then(|| self.observed.certificate(self.rng.gen_range(0..count)))
    }

    fn byzantine_order(&mut self, i: usize, amount_max: u64) -> SignedOrder {
        let user = &self.byzantine_users[i];
        let recipient = if self.rng.gen_range(0..100) < 20 {
            Recipient::Core(CoreAddress(self.rng.gen()))
        } else {
            let others: Vec<AccountKey> = self.owners.keys().copied().filter(|a| *a != user.account).collect();
            Recipient::Account(others[self.rng.gen_range(0..others.len())])
        };
        TransferOrder {
            sender: user.account,
            recipient,
            amount: self.rng.gen_range(1..=amount_max),
            sequence: user.sequence,
            memo: b"byzantine".to_vec(),
        }
        .sign(&user.key)
    }

    /// With no order at its sequence number yet: signs one (maybe more than it has), or two
    /// conflicting ones it can pay and splits the committee between them. Otherwise pays the
    /// slot with every order it signed for it, or, while that payment runs, sends some order
    /// it signed (maybe one it gave up on) to a few authorities again.
    fn byzantine_user_signs(&mut self, i: usize) -> Result<(), Violation> {
        let party = Party::ByzantineUser(i);
        let user = &self.byzantine_users[i];
        let (account, sequence) = (user.account, user.sequence);
        if user.orders.iter().any(|(o, _)| o.order.sequence == sequence) {
            if user.paying.is_none() {
                let mut orders = user.orders_for(sequence);
                orders.shuffle(&mut self.rng);
                return self.start_paying(party, orders);
            }
            let order = user.orders[self.rng.gen_range(0..user.orders.len())].0.clone();
            let mut authorities: Vec<AuthorityIndex> = (0..AUTHORITIES as AuthorityIndex).collect();
            authorities.shuffle(&mut self.rng);
            authorities.truncate(self.rng.gen_range(1..=AUTHORITIES));
            for authority in authorities {
                self.request(party, authority, &account, Asked::Transfer(order.clone()));
            }
            return Ok(());
        }
        let payable = u64::try_from(user.spendable.min(BYZANTINE_PAYMENT_MAX.into())).unwrap_or(0);
        let splits = payable >= 1 && self.rng.gen_bool(0.6);
        let (first, second) = match splits {
            true => (self.byzantine_order(i, payable), Some(self.byzantine_order(i, payable))),
            false => (self.byzantine_order(i, BYZANTINE_PAYMENT_MAX), None),
        };
        let user = &mut self.byzantine_users[i];
        user.orders.push((first.clone(), Vec::new()));
        if let Some(second) = &second {
            user.orders.push((second.clone(), Vec::new()));
            user.contested.insert(sequence);
            self.report.equivocations += 1;
            self.record("equivocation", &[i as u64, sequence]);
        }
        let mut authorities: Vec<AuthorityIndex> = (0..AUTHORITIES as AuthorityIndex).collect();
        authorities.shuffle(&mut self.rng);
        let split = self.rng.gen_range(1..AUTHORITIES);
        for (n, authority) in authorities.iter().enumerate() {
            let order = match &second {
                Some(second) if n >= split => second.clone(),
                _ => first.clone(),
            };
            self.request(party, *authority, &account, Asked::Transfer(order));
        }
        // Often it then tries to have someone sign the other order too: an honest authority
        // refuses it, a Byzantine one may sign both (evidence against it).
        if let Some(second) = second.filter(|_| self.rng.gen_bool(0.5)) {
            let n = self.rng.gen_range(0..AUTHORITIES);
            let order = if n >= split { first } else { second };
            self.request(party, authorities[n], &account, Asked::Transfer(order));
        }
        Ok(())
    }

    /// A Byzantine user's answers: its payment's go to the payment; votes on orders it sent on
    /// their own are counted like anyone's (prepare votes of every authority in round 0 are a
    /// final certificate) and kept as evidence; confirmations of its own certificates counted.
    pub(super) fn byzantine_user_receives(
        &mut self,
        i: usize,
        authority: AuthorityIndex,
        asked: Asked,
        reply: Reply,
    ) -> Result<(), Violation> {
        let party = Party::ByzantineUser(i);
        let own = self.byzantine_users[i].account;
        if let (
            Asked::Payment {
                call: Call::Transfer(order),
                ..
            },
            Reply::Voted(vote),
        ) = (&asked, &reply)
        {
            self.keep_vote(i, authority, order, vote, false)?;
        }
        match (asked, reply) {
            (Asked::Payment { payment, attempt, call }, reply) => {
                self.payment_answer(party, authority, (payment, attempt, call), reply)
            }
            (Asked::Transfer(order), Reply::Voted(vote)) => self.keep_vote(i, authority, &order, &vote, true),
            (Asked::Confirm { sender, sequence }, Reply::Confirmed { .. }) if sender == own => {
                self.confirmed_by(party, authority, sequence);
                Ok(())
            }
            (Asked::Confirm { sender, sequence }, Reply::Refused(Refusal::MissingEarlier { next, got }))
                if sender == own && got == sequence && next < got =>
            {
                self.bring_up_to_date(party, authority, sender, next, got);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Keeps a valid round-0 prepare vote on one of its orders (evidence, if the authority
    /// signed another of its orders for that slot); with `certify`, for an order sent on its
    /// own, every authority's is a fast certificate.
    fn keep_vote(
        &mut self,
        i: usize,
        authority: AuthorityIndex,
        order: &SignedOrder,
        vote: &Vote,
        certify: bool,
    ) -> Result<(), Violation> {
        // Votes count towards the user's certificates in the epoch it knows of.
        let committee = self.view(Party::ByzantineUser(i));
        let expected = expected_vote(committee.id(), &Asked::Transfer(order.clone())).expect("a vote");
        if vote.authority != authority || vote.check(&committee, &expected).is_err() {
            // (The payment counts the forged votes it is answered with.)
            if self.is_byzantine(authority) && certify {
                self.report.forged_votes_ignored += 1;
            }
            return Ok(());
        }
        self.try_to_frame(i, order, vote)?;
        let size = committee.size();
        let user = &mut self.byzantine_users[i];
        let Some((_, votes)) = user.orders.iter_mut().find(|(o, _)| o == order) else {
            return Ok(());
        };
        if votes.iter().any(|v| v.authority == vote.authority) {
            return Ok(());
        }
        votes.push(vote.clone());
        if votes.len() != size || !certify {
            return Ok(());
        }
        let certificate = Certificate::from_votes(order.clone(), votes);
        if let Err(error) = certificate.check(&committee) {
            return Err(self.violation(format!(
                "Byzantine user {i}'s fast certificate, of checked votes, is invalid: {error}"
            )));
        }
        self.byzantine_user_certifies(i, certificate)
    }

    /// A final certificate for one of its orders: observed (it must be the only one for the
    /// slot), and, for its current slot, kept and confirmed everywhere, the account moving on.
    /// A correct payee may be handed it.
    pub(super) fn byzantine_user_certifies(&mut self, i: usize, certificate: Certificate) -> Result<(), Violation> {
        let order = certificate.order.order.clone();
        self.report.byzantine_certificates += 1;
        self.record("byzantine-certified", &[i as u64, order.sequence]);
        self.observe_certificate(&certificate)?;
        let user = &mut self.byzantine_users[i];
        if order.sequence == user.sequence {
            user.certificates.push(certificate.clone());
            user.sequence += 1;
            user.spendable -= i128::from(order.amount);
            if user.paying.as_ref().is_some_and(|p| p.slot().1 == order.sequence) {
                user.paying = None;
            }
            if user.contested.contains(&order.sequence) {
                self.report.recovered_slots += 1;
                self.record("recovered", &[i as u64, order.sequence]);
            }
            self.start_confirming(Party::ByzantineUser(i), order.sequence);
        }
        if let Recipient::Account(payee) = order.recipient {
            if matches!(self.owners.get(&payee), Some(Party::Client(_))) && self.rng.gen_bool(0.7) {
                self.learn_certificate(certificate)?;
                self.hand_over(payee, order.sender, order.sequence, order.amount);
            }
        }
        Ok(())
    }

    /// With votes of one authority on two of its orders for one sequence number, a Byzantine
    /// user has evidence against that authority: it must be the Byzantine one.
    fn try_to_frame(&mut self, i: usize, order: &SignedOrder, vote: &Vote) -> Result<(), Violation> {
        let user = &self.byzantine_users[i];
        let other = user.orders.iter().find_map(|(other, votes)| {
            let conflicting = other.order.sequence == order.order.sequence && other != order;
            let theirs = votes
                .iter()
                .find(|v| v.authority == vote.authority && v.statement.committee_id == vote.statement.committee_id);
            theirs
                .filter(|_| conflicting)
                .map(|v| (other.order.clone(), v.signature))
        });
        let Some((other, signature)) = other else {
            return Ok(());
        };
        let double_vote = DoubleVote {
            authority: vote.authority,
            first: SignedVote {
                kind: VoteKind::Prepare,
                order: other,
                round: 0,
                signature,
            },
            second: SignedVote {
                kind: VoteKind::Prepare,
                order: order.order.clone(),
                round: 0,
                signature: vote.signature,
            },
        };
        self.report.double_votes += 1;
        let context = format!("Byzantine user {i}'s two votes of authority {}", vote.authority);
        let committee = self
            .committee_named(&vote.statement.committee_id)
            .expect("a checked vote");
        self.check_evidence(self.evidence(committee, vec![double_vote], Vec::new()), &context)
    }

    /// A certificate no honest authority may accept, made from a real one: below the quorum,
    /// its signatures on another order, another committee, a repeated or unknown signer,
    /// garbage signatures, or signers out of order.
    fn forge_certificate(&mut self, i: usize) {
        let Some(mut forged) = self.any_certificate() else {
            return;
        };
        match self.rng.gen_range(0..8) {
            0 => forged.signatures.truncate(self.committee().quorum() - 1),
            1 => {
                let user = &self.byzantine_users[i];
                forged.order = TransferOrder {
                    sender: user.account,
                    recipient: Recipient::Core(CoreAddress([0xF0; 32])),
                    amount: 1,
                    sequence: user.sequence,
                    memo: b"forged".to_vec(),
                }
                .sign(&user.key);
            }
            2 => forged.committee_id[0] ^= 1,
            3 => forged.signatures[1] = forged.signatures[0],
            4 => forged.signatures.last_mut().expect("a quorum").0 = AUTHORITIES as AuthorityIndex + 40,
            5 => {
                for (_, signature) in &mut forged.signatures {
                    let halves: [[u8; 32]; 2] = self.rng.gen();
                    signature.copy_from_slice(&halves.concat());
                }
            }
            6 => forged.signatures.swap(0, 1),
            // A lock passed off as final: a quorum of prepares (or commits relabelled).
            _ => {
                forged.kind = VoteKind::Prepare;
                forged.signatures.truncate(self.committee().quorum());
            }
        }
        let authority = self.rng.gen_range(0..AUTHORITIES) as AuthorityIndex;
        let sender = forged.order.order.sender;
        self.send_input(Party::ByzantineUser(i), authority, &sender, Asked::Forged, |ticket| {
            Input::Confirm {
                ticket,
                certificate: forged,
            }
        });
    }

    /// Asks an authority to move someone's slot to a later round without the owner's
    /// signature: signed by the user for another account, or for its own account but another
    /// committee. Were it obeyed, a stranger could spend any account's recovery rounds.
    fn forge_round_request(&mut self, i: usize) {
        let owners: Vec<AccountKey> = self.owners.keys().copied().collect();
        let user = &self.byzantine_users[i];
        let other_committee = self.rng.gen_bool(0.5);
        let mut request = RoundRequest {
            committee_id: self.committee().id(),
            account: user.account,
            sequence: self.rng.gen_range(0..4),
            round: self.rng.gen_range(1..1_000),
        };
        if other_committee {
            request.committee_id[0] ^= 1;
        }
        let mut forged = request.sign(&user.key);
        if !other_committee {
            // The user's own signature over someone else's slot.
            forged.request.account = owners[self.rng.gen_range(0..owners.len())];
            if forged.request.account == user.account {
                return;
            }
        }
        let authority = self.rng.gen_range(0..AUTHORITIES) as AuthorityIndex;
        let account = forged.request.account;
        self.send_input(Party::ByzantineUser(i), authority, &account, Asked::Forged, |ticket| {
            Input::RoundChange {
                ticket,
                request: forged,
            }
        });
    }

    /// An honest shard handles a forgery (a certificate, or a round request not signed by the
    /// account's owner): it must refuse it (or, if it confirmed that very certificate's order
    /// already, answer so) and its state must not change.
    pub(super) fn forgery_arrives(
        &mut self,
        authority: AuthorityIndex,
        shard: ShardIndex,
        input: Input,
    ) -> Result<(), Violation> {
        if let Input::RoundChange { ticket, .. } = &input {
            let ticket = *ticket;
            let host = self.host(authority, shard).expect("an honest shard");
            let before = (host.role().snapshot(), host.pending());
            let outputs = self.handle_unchanged(authority, shard, input, before, "a forged round request")?;
            for (_, reply) in outputs.replies.iter().filter(|(t, _)| *t == ticket) {
                if !matches!(reply, Reply::Refused(Refusal::RoundRequest(_))) {
                    return Err(self.violation(format!(
                        "authority {authority} shard {shard} answered a forged round request with {reply:?}"
                    )));
                }
                self.report.forged_round_requests_refused += 1;
            }
            return self.route(authority, shard, outputs);
        }
        let Input::Confirm { ticket, certificate } = &input else {
            return Err(self.violation("a forgery that is neither a certificate nor a round request"));
        };
        let (ticket, order) = (*ticket, certificate.order.clone());
        let host = self.host(authority, shard).expect("an honest shard");
        let before = (host.role().snapshot(), host.pending());
        let (sender, sequence) = (order.order.sender, order.order.sequence);
        let confirmed_already = host
            .role()
            .shard()
            .account(&sender, sequence)
            .is_some_and(|state| state.confirmed.first().is_some_and(|c| c.order == order));
        let outputs = self.handle_unchanged(authority, shard, input, before, "a forged certificate")?;
        for (_, reply) in outputs.replies.iter().filter(|(t, _)| *t == ticket) {
            match reply {
                Reply::Refused(Refusal::Certificate(_)) => self.report.forged_certificates_refused += 1,
                Reply::Confirmed { .. } if confirmed_already => {}
                other => {
                    return Err(self.violation(format!(
                        "authority {authority} shard {shard} answered a forged certificate with {other:?}"
                    )));
                }
            }
        }
        self.route(authority, shard, outputs)
    }

    /// Hands an honest shard a channel message no correct sibling sends (see the module's
    /// comment); it must report it or ignore it, and change nothing.
    pub(super) fn corrupt_channel(&mut self) -> Result<(), Violation> {
        let authority = self.rng.gen_range(0..AUTHORITIES) as AuthorityIndex;
        let shards = self.options.shards;
        let shard = self.rng.gen_range(0..shards);
        let Some(host) = self.host(authority, shard).filter(|h| h.up()) else {
            return Ok(());
        };
        let before = (host.role().snapshot(), host.pending());
        let sibling = (shard + 1) % shards;
        // Accounts whose key prefix puts them on a chosen shard.
        let on = |shard: ShardIndex| {
            let mut key = [0x5A; 32];
            key[..8].copy_from_slice(&u64::from(shard).to_le_bytes());
            AccountKey(key)
        };
        let credit = |recipient: AccountKey| Credit {
            recipient,
            amount: 1_000_000,
            sender: recipient,
            sender_sequence: 0,
        };
        let credits = |from: ShardIndex, first_sequence: u64, credits: Vec<Credit>| Input::Credits {
            from,
            first_sequence,
            credits,
        };
        let input = match self.rng.gen_range(0..6) {
            0 => credits(shard, 0, vec![credit(on(shard))]),
            1 => credits(shards + 3, 0, vec![credit(on(shard))]),
            2 => credits(sibling, 0, vec![credit(on(sibling))]),
            3 => credits(sibling, 1 << 40, vec![credit(on(shard))]),
            4 => credits(sibling, 0, vec![credit(on(shard)); CREDITS_PER_MESSAGE_MAX + 1]),
            _ => Input::CreditAck {
                from: sibling,
                through: 1 << 40,
            },
        };
        self.observed.corruptions[usize::from(authority)] += 1;
        self.report.corrupt_channel_messages += 1;
        self.record("corrupt-channel", &[u64::from(authority), u64::from(shard)]);
        let outputs = self.handle_unchanged(authority, shard, input, before, "a malformed channel message")?;
        self.route(authority, shard, outputs)
    }

    /// Hands an honest shard an input that must change nothing: its state (`before`: its
    /// snapshot and how many proposals waited) is the same after, and it proposed nothing.
    fn handle_unchanged(
        &mut self,
        authority: AuthorityIndex,
        shard: ShardIndex,
        input: Input,
        before: (Vec<u8>, usize),
        what: &str,
    ) -> Result<Outputs, Violation> {
        let now_ms = self.now_ms;
        let host = self.host_mut(authority, shard).expect("an honest shard");
        let outputs = host.handle(now_ms, input, 0);
        let outputs = outputs.map_err(|e| self.host_violation(authority, shard, e))?;
        let host = self.host(authority, shard).expect("an honest shard");
        if (host.role().snapshot(), host.pending()) != before || !outputs.applied.is_empty() {
            return Err(self.violation(format!("authority {authority} shard {shard}: {what} changed its state")));
        }
        Ok(outputs)
    }
}
