//! The authority shard as a role: checks in `handle`, effects in `apply`, channels on timers.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use specie_fastpay::{
    AccountKey, AuthorityIndex, BrokenPromise, Certificate, CertificateError, Committee, CommitteeChain,
    CommitteeRecord, DoubleVote, Evidence, RecordError, SignedOrder, SigningKey, Vote, VoteKind, VoteStatement,
    CHAIN_RECORDS_MAX,
};
use specie_role::{Durable, Output, Role, Ticket};

use crate::messages::{
    AccountState, Command, Credit, Funding, Input, Message, Refusal, Reply, Report, ShardBooks, ShardIndex,
    CERTIFICATES_PER_ANSWER_MAX, CREDITS_PER_MESSAGE_MAX, RECORDS_PER_ANSWER_MAX,
};
use crate::state::{check_votable, hex_id, Settled, ShardState, StateError};

mod recovery;

/// Most requests held for one account while its state is about to change.
const DEFERRED_PER_ACCOUNT_MAX: usize = 16;

/// Who this shard is and its limits.
#[derive(Clone, Debug)]
pub struct AuthorityConfig {
    /// The committee of the first epoch; later ones come as checked records
    /// ([`Input::EnterEpoch`]) and live in the shard's durable state.
    pub committee: Committee,
    pub authority: AuthorityIndex,
    pub shard: ShardIndex,
    pub shards: u32,
    /// How long an unacknowledged credit waits before it is sent again.
    pub credit_retransmit_ms: u64,
    /// Most unacknowledged credits towards one shard; beyond it, confirmations that would add
    /// one are refused (the client retries) instead of queueing without bound.
    pub channel_credits_max: usize,
}

impl AuthorityConfig {
    pub fn shard_of(&self, account: &AccountKey) -> ShardIndex {
        shard_of(account, self.shards)
    }
}

/// Which shard of every authority holds `account`: the same split at every authority, so a
/// client sends each order to one shard per authority.
pub fn shard_of(account: &AccountKey, shards: u32) -> ShardIndex {
    let prefix = u64::from_le_bytes(account.0[..8].try_into().expect("8 bytes"));
    (prefix % u64::from(shards.max(1))) as ShardIndex
}

/// The epoch from which `key` holds `seat` without a gap up to the current one; `None` if it
/// does not hold it now.
fn appointed_at(chain: &CommitteeChain, seat: AuthorityIndex, key: &SigningKey) -> Option<u64> {
    let key = key.verifying_key().to_bytes();
    let holds = |committee: &&Committee| committee.members().get(usize::from(seat)) == Some(&key);
    let run: Vec<&Committee> = chain.committees().rev().take_while(holds).collect();
    run.last().map(|committee| committee.epoch())
}

/// Whether `key` holds `seat` now, as its holder since the first epoch, or since the epoch in
/// which it was handed the seat's state (`holder_since`). A key appointed later that was never
/// handed the state, or one that held the seat before and was replaced, does not.
fn holds_seat(chain: &CommitteeChain, seat: AuthorityIndex, key: &SigningKey, holder_since: Option<u64>) -> bool {
    match appointed_at(chain, seat, key) {
        None => false,
        Some(since) if since == chain.first().epoch() => true,
        Some(since) => holder_since == Some(since),
    }
}

/// One shard of one FastPay authority.
pub struct AuthorityShard {
    config: AuthorityConfig,
    key: SigningKey,
    state: ShardState,
    /// The first committee and `state.records`: the current epoch's committee signs new votes,
    /// any epoch's certifies.
    chain: CommitteeChain,
    /// Whether `key` holds seat `config.authority` in the current epoch: a shard votes only
    /// then (a replaced authority's shard votes no more; a new one only once handed its seat).
    seated: bool,
    /// The id of the next epoch's committee proposed and not yet applied, with the tickets
    /// waiting for it.
    epoch_in_flight: Option<([u8; 32], Vec<Ticket>)>,
    /// The hand-over proposed and not yet applied, with the tickets of the records waiting for
    /// it (a record that replaces this shard's key is answered once its log is handed over).
    hand_over_in_flight: Option<Vec<Ticket>>,
    leading: bool,
    outputs: VecDeque<Output<AuthorityShard>>,
    /// Tickets waiting for a proposed vote, confirmation or funding to be applied.
    /// The vote (built once, when signed) waits here with its order for the command to apply.
    votes_in_flight: HashMap<AccountKey, ((SignedOrder, Vote), Vec<Ticket>)>,
    confirms_in_flight: HashMap<(AccountKey, u64), (Certificate, Vec<Ticket>)>,
    fundings_in_flight: HashMap<[u8; 32], (Funding, Vec<Ticket>)>,
    /// A recovery command per account (round change, prepare or lock) with the reply it gets
    /// once applied; one at a time per account, later requests wait in `deferred`.
    slot_in_flight: HashMap<AccountKey, (Reply, Vec<Ticket>)>,
    /// Requests that arrived while a change of their account was on its way to the log, in
    /// arrival order: judged once it is applied, not refused for a state about to change. (A
    /// payer whose round change met a vote still in flight would otherwise hear "busy" and open
    /// round after round while the vote was being written.)
    deferred: HashMap<AccountKey, Vec<Input>>,
    /// Per channel, the next credit number already proposed (received) or acknowledged (sent).
    credits_proposed: BTreeMap<ShardIndex, u64>,
    acks_proposed: BTreeMap<ShardIndex, u64>,
    /// Credits confirmed this round, sent together when the round's outputs are drained.
    fresh_credits: BTreeMap<ShardIndex, (u64, Vec<Credit>)>,
    acks_due: BTreeSet<ShardIndex>,
    retransmit_at_ms: Option<u64>,
    now_ms: u64,
}

impl AuthorityShard {
    /// A shard in the first epoch. Its key holds its seat there, or (an authority that joins in
    /// a later epoch) it votes only once [`AuthorityShard::take_over`] hands it the seat.
    pub fn new(config: AuthorityConfig, key: SigningKey) -> AuthorityShard {
        assert!(config.shard < config.shards, "shard index within the shard count");
        assert!(
            usize::from(config.authority) < config.committee.size(),
            "the seat is in the committee"
        );
        let chain = CommitteeChain::new(config.committee.clone());
        let seated = holds_seat(&chain, config.authority, &key, None);
        AuthorityShard {
            config,
            key,
            state: ShardState::default(),
            chain,
            seated,
            epoch_in_flight: None,
            hand_over_in_flight: None,
            leading: false,
            outputs: VecDeque::new(),
            votes_in_flight: HashMap::new(),
            confirms_in_flight: HashMap::new(),
            fundings_in_flight: HashMap::new(),
            slot_in_flight: HashMap::new(),
            deferred: HashMap::new(),
            credits_proposed: BTreeMap::new(),
            acks_proposed: BTreeMap::new(),
            fresh_credits: BTreeMap::new(),
            acks_due: BTreeSet::new(),
            retransmit_at_ms: None,
            now_ms: 0,
        }
    }

    /// A shard of an authority that takes over a seat in a later epoch, from the state of the
    /// seat's previous holder (its snapshot, taken once it applied the epoch that replaced it):
    /// the accounts, the open slots and the promises that go with them, the channels and the
    /// committee records. Checked before it votes: the records form a chain from the first
    /// committee in which `key` now holds the seat, every certificate it confirmed is final
    /// under its own epoch's committee, and the books balance. Every open slot's vote is then
    /// signed again with `key` in the current committee's name.
    pub fn take_over(config: AuthorityConfig, key: SigningKey, hand_over: &[u8]) -> Result<AuthorityShard, StateError> {
        let mut shard = AuthorityShard::new(config, key);
        shard.restore(hand_over)?;
        shard.state.holder_since = appointed_at(&shard.chain, shard.config.authority, &shard.key);
        shard.seated = holds_seat(
            &shard.chain,
            shard.config.authority,
            &shard.key,
            shard.state.holder_since,
        );
        if !shard.seated {
            return Err(StateError::Inconsistent(format!(
                "this key does not hold seat {} in epoch {}: the hand-over is of another seat or of an epoch before the one that appoints this key",
                shard.config.authority,
                shard.chain.current().epoch()
            )));
        }
        for account in shard.state.accounts.values() {
            for certificate in &account.confirmed {
                let checked = shard.committee_of(certificate).and_then(|c| certificate.check(c));
                if let Err(error) = checked {
                    return Err(StateError::Inconsistent(format!(
                        "the hand-over holds a certificate that is not final: {error}"
                    )));
                }
            }
            if let Some((lock, _)) = &account.lock {
                if let Err(error) = shard.committee_of(lock).and_then(|c| lock.check_lock(c)) {
                    return Err(StateError::Inconsistent(format!(
                        "the hand-over holds a lock that is not one: {error}"
                    )));
                }
            }
        }
        shard.state.check()?;
        // The seat's votes, from now on in this key's name.
        shard.state.sign_open_slots(&shard.key, shard.chain.current().id());
        Ok(shard)
    }

    pub fn config(&self) -> &AuthorityConfig {
        &self.config
    }

    /// The committee of the current epoch.
    pub fn committee(&self) -> &Committee {
        self.chain.current()
    }

    /// Every epoch this shard knows, from the first.
    pub fn chain(&self) -> &CommitteeChain {
        &self.chain
    }

    /// Whether this shard's key holds its seat in the current epoch (it votes only then).
    pub fn seated(&self) -> bool {
        self.seated
    }

    /// Its books, as the supply report reads them.
    pub fn books(&self) -> ShardBooks {
        ShardBooks {
            balances: self.balances(),
            funded: self.funded(),
            redeemed: self.redeemed(),
            credits_unacked: self.credits_unacked(),
        }
    }

    /// The sum of this shard's balances (for the supply audit).
    pub fn balances(&self) -> i128 {
        self.state.accounts.values().map(|a| a.balance).sum()
    }

    /// Value this shard has sent to other shards that they have not acknowledged.
    pub fn credits_unacked(&self) -> u128 {
        let credits = self.state.outbox.values().flat_map(|o| o.unacked.iter());
        credits.map(|c| u128::from(c.amount)).sum()
    }

    /// Value this shard sent shard `to` in credits numbered `from_sequence` or later that `to`
    /// has not acknowledged: with `to`'s [`AuthorityShard::credits_applied_from`] as
    /// `from_sequence`, exactly the value still between the two shards.
    pub fn credits_sent_to(&self, to: ShardIndex, from_sequence: u64) -> u128 {
        let Some(outbox) = self.state.outbox.get(&to) else {
            return 0;
        };
        let skip = from_sequence
            .saturating_sub(outbox.acked_through())
            .min(usize::MAX as u64) as usize;
        outbox.unacked.iter().skip(skip).map(|c| u128::from(c.amount)).sum()
    }

    /// How many credits from shard `from` this shard has applied.
    pub fn credits_applied_from(&self, from: ShardIndex) -> u64 {
        self.state.inbox.get(&from).copied().unwrap_or(0)
    }

    /// Value that left this shard for the online core (certified redeems).
    pub fn redeemed(&self) -> u128 {
        self.state.redeemed
    }

    pub fn funded(&self) -> u128 {
        self.state.funded
    }

    pub fn account(&self, account: &AccountKey, from_sequence: u64) -> Option<AccountState> {
        let state = self.state.accounts.get(account)?;
        let statement = |order: &SignedOrder| VoteStatement {
            committee_id: self.committee().id(),
            kind: VoteKind::Prepare,
            round: 0,
            order_digest: order.order.digest(),
        };
        Some(AccountState {
            balance: state.balance,
            next_sequence: state.next_sequence,
            pending: state
                .pending
                .as_ref()
                .filter(|_| self.seated)
                .map(|(order, signature)| {
                    let vote = Vote {
                        authority: self.config.authority,
                        statement: statement(order),
                        signature: *signature,
                    };
                    (order.clone(), vote)
                }),
            confirmed: state
                .confirmed
                .iter()
                .skip(from_sequence.min(usize::MAX as u64) as usize)
                .take(CERTIFICATES_PER_ANSWER_MAX)
                .cloned()
                .collect(),
        })
    }

    fn reply(&mut self, ticket: Ticket, reply: Reply) {
        self.outputs.push_back(Output::Reply { ticket, reply });
    }

    fn refuse(&mut self, ticket: Ticket, refusal: Refusal) {
        self.reply(ticket, Reply::Refused(refusal));
    }

    fn vote_for(&self, order: &SignedOrder, signature: [u8; 64]) -> Vote {
        Vote {
            authority: self.config.authority,
            statement: VoteStatement {
                committee_id: self.committee().id(),
                kind: VoteKind::Prepare,
                round: 0,
                order_digest: order.order.digest(),
            },
            signature,
        }
    }

    fn owns(&self, account: &AccountKey) -> Result<(), Refusal> {
        match self.config.shard_of(account) {
            owner if owner == self.config.shard => Ok(()),
            owner => Err(Refusal::WrongShard { owner }),
        }
    }

    /// Figure 2, `handle_transfer_order`: shard, signature, account, pending, sequence, balance.
    fn transfer(&mut self, ticket: Ticket, order: SignedOrder) -> Result<(), Refusal> {
        let sender = order.order.sender;
        self.owns(&sender)?;
        order.check()?;
        if self.account_changing(&sender) {
            return self.defer(sender, Input::Transfer { ticket, order });
        }
        let account = self.state.accounts.get(&sender).ok_or(Refusal::UnknownAccount)?;
        if account.round > 0 && account.next_sequence == order.order.sequence && account.pending.is_none() {
            // Round 0 of this slot is over here: a fresh vote now could complete a fast
            // certificate that the round changes this shard signed said could not exist.
            return Err(Refusal::RoundPassed { round: account.round });
        }
        if let Some(((voted, _), _)) = self.votes_in_flight.get_mut(&sender) {
            if *voted != order {
                return Err(Refusal::OtherOrderPending {
                    sequence: order.order.sequence,
                });
            }
            self.votes_in_flight.get_mut(&sender).expect("present").1.push(ticket);
            return Ok(());
        }
        // An order confirmed already gets the vote this authority gave it, found in the
        // certificate. Never a fresh signature: the certificate may have formed without this
        // authority while it voted for another order at that sequence number, and signing this
        // one too would be evidence that convicts it. Only a fast certificate holds round-0
        // prepare votes: a signature in a commit certificate is no answer to a transfer order.
        // Otherwise the order is refused below (the sequence number has moved on).
        if let Some(certificate) = account.confirmed.get(order.order.sequence as usize) {
            let own = certificate.signatures.iter().find(|(a, _)| *a == self.config.authority);
            let fast = (certificate.kind, certificate.round) == (VoteKind::Prepare, 0)
                && certificate.committee_id == self.committee().id();
            if let (true, true, Some(&(_, signature))) = (fast, certificate.order == order, own) {
                self.reply(ticket, Reply::Voted(self.vote_for(&order, signature)));
                return Ok(());
            }
            if certificate.order == order && certificate.committee_id != self.committee().id() {
                // Settled in an earlier epoch: the payer that asks again gets the certificate.
                self.reply(ticket, Reply::Final(Box::new(certificate.clone())));
                return Ok(());
            }
        }
        check_votable(account, &order)?;
        if let Some((_, signature)) = &account.pending {
            let vote = self.vote_for(&order, *signature);
            self.reply(ticket, Reply::Voted(vote));
            return Ok(());
        }
        let mut vote = self.vote_for(&order, [0; 64]);
        vote.signature = vote.statement.sign(&self.key);
        self.outputs.push_back(Output::Propose(Command::Vote {
            order: order.clone(),
            signature: vote.signature,
            epoch: Some(self.committee().epoch()),
        }));
        self.votes_in_flight.insert(sender, ((order, vote), vec![ticket]));
        Ok(())
    }

    /// Whether a confirmation or funding of `account` is proposed and not yet applied.
    ///
    /// At most one confirmation per account is in flight, at its next sequence number (a later
    /// one is refused as `MissingEarlier` until it applies), so one lookup finds it.
    fn account_changing(&self, account: &AccountKey) -> bool {
        let next = self.state.accounts.get(account).map_or(0, |a| a.next_sequence);
        self.confirms_in_flight.contains_key(&(*account, next))
            || self.slot_in_flight.contains_key(account)
            || self
                .fundings_in_flight
                .values()
                .any(|(funding, _)| funding.account == *account)
    }

    /// Holds `input` until the change of `account` on its way to the log is applied, or refuses
    /// it as busy if too many wait already.
    fn defer(&mut self, account: AccountKey, input: Input) -> Result<(), Refusal> {
        let deferred = self.deferred.entry(account).or_default();
        if deferred.len() >= DEFERRED_PER_ACCOUNT_MAX {
            return Err(Refusal::Busy);
        }
        deferred.push(input);
        Ok(())
    }

    /// Judges, in arrival order, the requests deferred while `account` was changing, once
    /// neither a change nor a vote of it is in flight. One that starts a change defers the rest
    /// again.
    fn resume_deferred(&mut self, account: &AccountKey) {
        if self.account_changing(account) || self.votes_in_flight.contains_key(account) {
            return;
        }
        for input in self.deferred.remove(account).unwrap_or_default() {
            self.judge(input);
        }
    }

    /// The committee of the epoch a certificate names: any epoch of the chain, since a
    /// certificate stays final after its committee's epoch ends.
    fn committee_of(&self, certificate: &Certificate) -> Result<&Committee, CertificateError> {
        self.chain
            .committee(&certificate.committee_id)
            .ok_or(CertificateError::WrongCommittee)
    }

    /// The input asks this shard to sign something (a vote, a round change, a commit vote).
    fn asks_to_sign(input: &Input) -> Option<Ticket> {
        match input {
            Input::Transfer { ticket, .. }
            | Input::RoundChange { ticket, .. }
            | Input::Propose { ticket, .. }
            | Input::Lock { ticket, .. } => Some(*ticket),
            _ => None,
        }
    }

    /// A record of the next epoch: checked against the current committee, made durable, then
    /// answered. One at a time; a record already applied is answered at once.
    fn enter_epoch(&mut self, ticket: Ticket, record: Box<CommitteeRecord>) -> Result<(), Refusal> {
        if let Some(known) = self.chain.committee(&record.next.id()) {
            let epoch = known.epoch();
            if !self.hand_over_if_due(vec![ticket]) {
                self.reply(ticket, Reply::Epoch { epoch });
            }
            return Ok(());
        }
        if let Some((id, tickets)) = &mut self.epoch_in_flight {
            if *id == record.next.id() {
                tickets.push(ticket);
                return Ok(());
            }
            return Err(Refusal::Busy);
        }
        if self.chain.records().len() >= CHAIN_RECORDS_MAX {
            return Err(Refusal::Record(RecordError::ChainFull));
        }
        record.check(self.committee())?;
        self.epoch_in_flight = Some((record.next.id(), vec![ticket]));
        self.outputs.push_back(Output::Propose(Command::EnterEpoch { record }));
        Ok(())
    }

    fn apply_epoch(&mut self, record: &CommitteeRecord) {
        // Checked when proposed, against the same state on every replica; a record that no
        // longer follows (proposed twice by two leaders) changes nothing and is answered so.
        let reply = match self.chain.extend(record.clone()) {
            Ok(added) => {
                if added {
                    self.state.records.push(record.clone());
                    self.seated = self.holds_seat();
                    if self.seated {
                        self.state.sign_open_slots(&self.key, self.chain.current().id());
                    }
                }
                Reply::Epoch {
                    epoch: self.committee().epoch(),
                }
            }
            Err(error) => Reply::Refused(Refusal::Record(error)),
        };
        let tickets = self
            .epoch_in_flight
            .take()
            .map(|(_, tickets)| tickets)
            .unwrap_or_default();
        if matches!(reply, Reply::Epoch { .. }) && self.hand_over_if_due(tickets.clone()) {
            return;
        }
        for ticket in tickets {
            self.reply(ticket, reply.clone());
        }
    }

    /// Whether this shard's key holds its seat now: as the seat's first holder, or from the
    /// epoch it was handed the seat's state.
    fn holds_seat(&self) -> bool {
        holds_seat(&self.chain, self.config.authority, &self.key, self.state.holder_since)
    }

    /// Whether this log is the state of a seat whose key the current epoch replaced, not yet
    /// handed over: this shard's key held the seat in the epoch before (as its holder), and
    /// holds it no more.
    fn hand_over_due(&self) -> bool {
        let current = self.chain.current().epoch();
        if self.seated || self.state.holder_since == Some(current) {
            return false;
        }
        let key = self.key.verifying_key().to_bytes();
        let seat = usize::from(self.config.authority);
        let holds = |committee: &&Committee| committee.members().get(seat) == Some(&key);
        let run: Vec<&Committee> = self.chain.committees().rev().skip(1).take_while(holds).collect();
        match run.last() {
            None => false,
            Some(since) if since.epoch() == self.chain.first().epoch() => true,
            Some(since) => self.state.holder_since == Some(since.epoch()),
        }
    }

    /// The previous holder of a seat hands its log over to the seat's new key: the leader
    /// proposes it (once) when the epoch that replaced its key is applied, when it takes the
    /// lead, or when the record is brought again; `tickets` are answered once it is applied,
    /// so an operator who hears the epoch entered knows the log is handed over. A shard that
    /// runs on this log with the new key then votes, with every promise the seat made; a new
    /// key with a log of its own (never the seat's) is never handed one. Returns whether the
    /// hand-over is on its way.
    fn hand_over_if_due(&mut self, tickets: Vec<Ticket>) -> bool {
        if !(self.leading && self.hand_over_due()) {
            return false;
        }
        let epoch = self.chain.current().epoch();
        let waiting = self.hand_over_in_flight.get_or_insert_with(Vec::new);
        if waiting.is_empty() {
            self.outputs.push_back(Output::Propose(Command::HandOver { epoch }));
        }
        waiting.extend(tickets);
        true
    }

    fn apply_hand_over(&mut self, epoch: u64) {
        let current = self.chain.current().epoch();
        if epoch == current && self.state.holder_since != Some(epoch) {
            self.state.holder_since = Some(epoch);
            self.seated = self.holds_seat();
            if self.seated {
                self.state.sign_open_slots(&self.key, self.chain.current().id());
            }
        }
        for ticket in self.hand_over_in_flight.take().unwrap_or_default() {
            self.reply(ticket, Reply::Epoch { epoch: current });
        }
    }

    /// The signature to keep for a vote signed in `signed_in` (an epoch, or the first), applied
    /// now: the same if no epoch change was applied in between, else signed again in the
    /// current committee's name. Deterministic, so every replica keeps the same bytes.
    /// `statement` (what it signs, in the current epoch) is built only then: the usual case
    /// hashes nothing more.
    pub(super) fn kept_signature(
        &self,
        signed_in: Option<u64>,
        statement: impl FnOnce() -> VoteStatement,
        signature: [u8; 64],
    ) -> [u8; 64] {
        match signed_in.unwrap_or(self.chain.first().epoch()) == self.committee().epoch() {
            true => signature,
            false => statement().sign(&self.key),
        }
    }

    /// Judges a request now, or defers it while its account is changing.
    fn judge(&mut self, input: Input) {
        if let (false, Some(ticket)) = (self.seated, Self::asks_to_sign(&input)) {
            let epoch = self.committee().epoch();
            return self.refuse(ticket, Refusal::NotSeated { epoch });
        }
        if let Some((account, ticket)) = Self::recovery_account(&input) {
            if self.account_changing(&account) || self.votes_in_flight.contains_key(&account) {
                if let Err(refusal) = self.defer(account, input) {
                    self.refuse(ticket, refusal);
                }
                return;
            }
        }
        let (ticket, result) = match input {
            Input::Transfer { ticket, order } => (ticket, self.transfer(ticket, order)),
            Input::Confirm { ticket, certificate } => (ticket, self.confirm(ticket, certificate)),
            Input::Fund { ticket, funding } => (ticket, self.fund(ticket, funding)),
            Input::RoundChange { ticket, request } => (ticket, self.round_change(ticket, &request)),
            Input::Propose {
                ticket,
                order,
                round,
                justification,
            } => (ticket, self.propose(ticket, order, round, &justification)),
            Input::Lock { ticket, certificate } => (ticket, self.lock(ticket, certificate)),
            Input::Account {
                ticket,
                account,
                from_sequence,
            } => {
                let reply = match self.owns(&account) {
                    Err(refusal) => Reply::Refused(refusal),
                    Ok(()) => self
                        .account(&account, from_sequence)
                        .map_or(Reply::Refused(Refusal::UnknownAccount), |state| {
                            Reply::Account(Box::new(state))
                        }),
                };
                self.reply(ticket, reply);
                return;
            }
            Input::Books { ticket } => return self.reply(ticket, Reply::Books(self.books())),
            Input::EnterEpoch { ticket, record } => (ticket, self.enter_epoch(ticket, record)),
            Input::Epochs { ticket, after } => {
                let records = self.chain.records_after(after);
                let records = records.iter().take(RECORDS_PER_ANSWER_MAX).cloned().collect();
                return self.reply(ticket, Reply::Epochs(records));
            }
            Input::Credits {
                from,
                first_sequence,
                credits,
            } => return self.receive_credits(from, first_sequence, credits),
            Input::CreditAck { from, through } => return self.receive_ack(from, through),
        };
        if let Err(refusal) = result {
            self.refuse(ticket, refusal);
        }
    }

    /// The account a recovery request (round change, proposal, lock) is about: one such request
    /// at a time per account, after any vote of it on its way to the log.
    fn recovery_account(input: &Input) -> Option<(AccountKey, Ticket)> {
        match input {
            Input::RoundChange { request, ticket } => Some((request.request.account, *ticket)),
            Input::Propose { order, ticket, .. } => Some((order.order.sender, *ticket)),
            Input::Lock { certificate, ticket } => Some((certificate.order.order.sender, *ticket)),
            _ => None,
        }
    }

    /// Two final certificates of one slot: the operator must know, and whatever they prove by
    /// themselves is kept as evidence.
    fn report_conflict(&mut self, known: Certificate, other: Certificate) {
        // Double votes are two signatures of one committee's member: certificates of two epochs
        // hold none.
        let committee = match known.committee_id == other.committee_id {
            true => self.committee_of(&known).ok().cloned(),
            false => None,
        };
        let double_votes = match committee {
            Some(_) => DoubleVote::from_certificates(&known, &other),
            None => Vec::new(),
        };
        let conflict = Report::ConflictingCertificates(Box::new([known, other]));
        self.outputs.push_back(Output::Report(conflict));
        if let Some(committee) = committee {
            self.report_evidence_of(committee, double_votes, Vec::new());
        }
    }

    /// Reports evidence if it convicts anyone.
    pub(super) fn report_evidence(&mut self, double_votes: Vec<DoubleVote>, broken_promises: Vec<BrokenPromise>) {
        let committee = self.committee().clone();
        self.report_evidence_of(committee, double_votes, broken_promises);
    }

    /// Reports evidence against members of `committee` if it convicts anyone.
    fn report_evidence_of(
        &mut self,
        committee: Committee,
        double_votes: Vec<DoubleVote>,
        broken_promises: Vec<BrokenPromise>,
    ) {
        if double_votes.is_empty() && broken_promises.is_empty() {
            return;
        }
        let evidence = Evidence {
            committee,
            double_votes,
            broken_promises,
        };
        self.outputs
            .push_back(Output::Report(Report::Equivocation(Box::new(evidence))));
    }

    /// Figure 2, `handle_confirmation_order`: shard, certificate, sequence. A certificate for
    /// a sequence number confirmed already is answered again if it is the same order, and if
    /// it is not, the two certificates convict their common signers.
    fn confirm(&mut self, ticket: Ticket, certificate: Certificate) -> Result<(), Refusal> {
        let order = &certificate.order.order;
        let (sender, sequence) = (order.sender, order.sequence);
        self.owns(&sender)?;
        let account = self.state.accounts.get(&sender);
        let confirmed = account.and_then(|a| a.confirmed.get(sequence as usize));
        if confirmed.is_some_and(|known| known.order == certificate.order) {
            self.reply(ticket, Reply::Confirmed { sender, sequence });
            return Ok(());
        }
        certificate.check(self.committee_of(&certificate)?)?;
        if let Some(known) = confirmed {
            self.report_conflict(known.clone(), certificate);
            return Err(Refusal::ConflictingCertificate { sequence });
        }
        let next = account.map_or(0, |a| a.next_sequence);
        if sequence > next {
            return Err(Refusal::MissingEarlier { next, got: sequence });
        }
        if let Some((known, tickets)) = self.confirms_in_flight.get_mut(&(sender, sequence)) {
            if known.order != certificate.order {
                let known = known.clone();
                self.report_conflict(known, certificate);
                return Err(Refusal::ConflictingCertificate { sequence });
            }
            tickets.push(ticket);
            return Ok(());
        }
        if let specie_fastpay::Recipient::Account(recipient) = order.recipient {
            let shard = self.config.shard_of(&recipient);
            let queued = self.state.outbox.get(&shard).map_or(0, |o| o.unacked.len());
            if shard != self.config.shard && queued >= self.config.channel_credits_max {
                return Err(Refusal::ChannelFull { shard, credits: queued });
            }
        }
        self.outputs.push_back(Output::Propose(Command::Confirm {
            certificate: certificate.clone(),
        }));
        self.confirms_in_flight
            .insert((sender, sequence), (certificate, vec![ticket]));
        Ok(())
    }

    fn fund(&mut self, ticket: Ticket, funding: Funding) -> Result<(), Refusal> {
        self.owns(&funding.account)?;
        let mismatch = || Refusal::FundingMismatch {
            id_hex: hex_id(&funding.id),
        };
        if let Some(known) = self.state.fundings.get(&funding.id) {
            return match *known == funding {
                true => {
                    self.reply(ticket, Reply::Funded { id: funding.id });
                    Ok(())
                }
                false => Err(mismatch()),
            };
        }
        if let Some((known, tickets)) = self.fundings_in_flight.get_mut(&funding.id) {
            if *known != funding {
                return Err(mismatch());
            }
            tickets.push(ticket);
            return Ok(());
        }
        self.outputs.push_back(Output::Propose(Command::Fund { funding }));
        self.fundings_in_flight.insert(funding.id, (funding, vec![ticket]));
        Ok(())
    }

    fn channel_violation(&mut self, from: ShardIndex, reason: &'static str) {
        self.outputs
            .push_back(Output::Report(Report::ChannelViolation { from, reason }));
    }

    fn receive_credits(&mut self, from: ShardIndex, first_sequence: u64, credits: Vec<Credit>) {
        if from >= self.config.shards || from == self.config.shard {
            return self.channel_violation(from, "credits from a shard that does not exist or from itself");
        }
        if credits.len() > CREDITS_PER_MESSAGE_MAX {
            return self.channel_violation(from, "more credits than one message may carry");
        }
        if credits
            .iter()
            .any(|c| self.config.shard_of(&c.recipient) != self.config.shard)
        {
            return self.channel_violation(from, "a credit for an account of another shard");
        }
        let applied = self.state.inbox.get(&from).copied().unwrap_or(0);
        let expected = self.credits_proposed.get(&from).copied().unwrap_or(0).max(applied);
        let end = first_sequence.saturating_add(credits.len() as u64);
        if first_sequence > expected || end <= expected {
            // A gap (an earlier message was lost: the sender resends from its oldest
            // unacknowledged credit) or a duplicate: say where this end stands.
            self.acks_due.insert(from);
            return;
        }
        let fresh = credits[(expected - first_sequence) as usize..].to_vec();
        self.credits_proposed.insert(from, end);
        self.outputs.push_back(Output::Propose(Command::Credit {
            from,
            first_sequence: expected,
            credits: fresh,
        }));
    }

    fn receive_ack(&mut self, from: ShardIndex, through: u64) {
        let Some(outbox) = self.state.outbox.get(&from) else {
            return self.channel_violation(from, "an acknowledgement for a channel never used");
        };
        if through > outbox.next_sequence {
            return self.channel_violation(from, "an acknowledgement of credits never sent");
        }
        let proposed = self.acks_proposed.get(&from).copied().unwrap_or(0);
        if through > outbox.acked_through() && through > proposed {
            self.acks_proposed.insert(from, through);
            self.outputs
                .push_back(Output::Propose(Command::Acked { to: from, through }));
        }
    }

    fn answer_applied<K: Eq + std::hash::Hash, V>(
        &mut self,
        waiting: impl FnOnce(&mut Self) -> &mut HashMap<K, (V, Vec<Ticket>)>,
        key: &K,
        reply: Reply,
    ) {
        if let Some((_, tickets)) = waiting(self).remove(key) {
            for ticket in tickets {
                self.reply(ticket, reply.clone());
            }
        }
    }

    fn apply_vote(&mut self, order: &SignedOrder, signature: [u8; 64], signed_in: Option<u64>) {
        // A vote signed before the epoch that replaced this key was applied is neither kept nor
        // answered: it never leaves, so the seat's successor need not know of it.
        let applied = match self.seated {
            false => Err(Refusal::NotSeated {
                epoch: self.committee().epoch(),
            }),
            true => {
                let statement = || self.vote_for(order, signature).statement;
                let signature = self.kept_signature(signed_in, statement, signature);
                self.state.vote(order, signature).map(|()| signature)
            }
        };
        // Only the leader that signed the vote has callers waiting: a replaying or following
        // replica builds no reply (and hashes nothing more).
        let Some((_, tickets)) = self.votes_in_flight.remove(&order.order.sender) else {
            return;
        };
        let reply = match applied {
            Ok(kept) => Reply::Voted(self.vote_for(order, kept)),
            Err(refusal) => Reply::Refused(refusal),
        };
        for ticket in tickets {
            self.reply(ticket, reply.clone());
        }
        self.resume_deferred(&order.order.sender);
    }

    fn apply_confirm(&mut self, certificate: &Certificate) {
        let order = &certificate.order.order;
        let key = (order.sender, order.sequence);
        let shards = self.config.shards;
        let already = self
            .state
            .accounts
            .get(&order.sender)
            .and_then(|a| a.confirmed.get(order.sequence as usize))
            .is_some_and(|known| known == certificate);
        let reply = if already {
            Reply::Confirmed {
                sender: key.0,
                sequence: key.1,
            }
        } else {
            match self.state.confirm(certificate, |account| shard_of(account, shards)) {
                Ok(settled) => {
                    if let Settled::ToShard(shard, sequence) = settled {
                        let credit = *self.state.outbox[&shard].unacked.back().expect("just queued");
                        let (first, batch) = self.fresh_credits.entry(shard).or_insert((sequence, Vec::new()));
                        debug_assert_eq!(*first + batch.len() as u64, sequence, "fresh credits are contiguous");
                        batch.push(credit);
                        self.retransmit_at_ms
                            .get_or_insert(self.now_ms + self.config.credit_retransmit_ms);
                    }
                    Reply::Confirmed {
                        sender: key.0,
                        sequence: key.1,
                    }
                }
                Err(refusal) => Reply::Refused(refusal),
            }
        };
        if let Some(account) = self.state.accounts.get(&order.sender) {
            debug_assert!(account.next_sequence > order.sequence || matches!(reply, Reply::Refused(_)));
        }
        self.answer_applied(|s| &mut s.confirms_in_flight, &key, reply);
        self.resume_deferred(&key.0);
    }

    fn apply_fund(&mut self, funding: &Funding) {
        let reply = match self.state.fund(funding) {
            Ok(()) => Reply::Funded { id: funding.id },
            Err(refusal) => Reply::Refused(refusal),
        };
        self.answer_applied(|s| &mut s.fundings_in_flight, &funding.id, reply);
        self.resume_deferred(&funding.account);
    }

    /// Queues this round's fresh credits and due acknowledgements as one message per channel.
    fn flush_channels(&mut self) {
        if !self.leading {
            self.fresh_credits.clear();
            self.acks_due.clear();
            return;
        }
        for (to, (first_sequence, credits)) in std::mem::take(&mut self.fresh_credits) {
            for (n, chunk) in credits.chunks(CREDITS_PER_MESSAGE_MAX).enumerate() {
                let first_sequence = first_sequence + (n * CREDITS_PER_MESSAGE_MAX) as u64;
                self.outputs.push_back(Output::Send {
                    to,
                    message: Message::Credits {
                        first_sequence,
                        credits: chunk.to_vec(),
                    },
                });
            }
        }
        for from in std::mem::take(&mut self.acks_due) {
            let through = self.state.inbox.get(&from).copied().unwrap_or(0);
            self.outputs.push_back(Output::Send {
                to: from,
                message: Message::CreditAck { through },
            });
        }
    }
}

impl Role for AuthorityShard {
    type Command = Command;
    type Input = Input;
    type Peer = ShardIndex;
    type Message = Message;
    type Reply = Reply;
    type Report = Report;

    fn lead(&mut self, now_ms: u64) {
        self.leading = true;
        self.now_ms = now_ms;
        // Whatever was sent before a crash may be lost: resend every unacknowledged credit.
        if self.state.outbox.values().any(|o| !o.unacked.is_empty()) {
            self.retransmit_at_ms = Some(now_ms);
        }
        self.hand_over_if_due(Vec::new());
    }

    fn follow(&mut self) {
        self.leading = false;
        self.votes_in_flight.clear();
        self.confirms_in_flight.clear();
        self.fundings_in_flight.clear();
        self.slot_in_flight.clear();
        self.epoch_in_flight = None;
        self.hand_over_in_flight = None;
        self.deferred.clear();
        self.credits_proposed.clear();
        self.acks_proposed.clear();
        self.fresh_credits.clear();
        self.acks_due.clear();
        self.retransmit_at_ms = None;
    }

    fn handle(&mut self, now_ms: u64, input: Input) {
        self.now_ms = now_ms;
        self.judge(input);
    }

    fn apply(&mut self, now_ms: u64, command: &Command) {
        self.now_ms = self.now_ms.max(now_ms);
        match command {
            Command::Vote {
                order,
                signature,
                epoch,
            } => self.apply_vote(order, *signature, *epoch),
            Command::Confirm { certificate } => self.apply_confirm(certificate),
            Command::Fund { funding } => self.apply_fund(funding),
            Command::Credit {
                from,
                first_sequence,
                credits,
            } => {
                self.state.credit(*from, *first_sequence, credits);
                self.acks_due.insert(*from);
            }
            Command::Acked { to, through } => self.state.acked(*to, *through),
            Command::Prepare { .. } | Command::Lock { .. } | Command::EnterRound { .. } => self.apply_slot(command),
            Command::EnterEpoch { record } => self.apply_epoch(record),
            Command::HandOver { epoch } => self.apply_hand_over(*epoch),
        }
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
        self.retransmit_at_ms = None;
        if !self.leading {
            return;
        }
        for (&to, outbox) in &self.state.outbox {
            if outbox.unacked.is_empty() {
                continue;
            }
            let credits: Vec<Credit> = outbox.unacked.iter().take(CREDITS_PER_MESSAGE_MAX).copied().collect();
            self.outputs.push_back(Output::Send {
                to,
                message: Message::Credits {
                    first_sequence: outbox.acked_through(),
                    credits,
                },
            });
            self.retransmit_at_ms = Some(now_ms + self.config.credit_retransmit_ms);
        }
    }

    fn poll_output(&mut self) -> Option<Output<Self>> {
        if self.outputs.is_empty() {
            self.flush_channels();
        }
        self.outputs.pop_front()
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.retransmit_at_ms
    }
}

impl Durable for AuthorityShard {
    type StateError = StateError;

    fn encode_command(command: &Command) -> Vec<u8> {
        command.encode()
    }

    fn decode_command(&self, bytes: &[u8]) -> Result<Command, StateError> {
        Ok(Command::decode(bytes)?)
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.state.encode_to(&mut out);
        out
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), StateError> {
        let state = ShardState::decode(snapshot)?;
        let mut chain = CommitteeChain::new(self.config.committee.clone());
        for record in &state.records {
            chain
                .extend(record.clone())
                .map_err(|error| StateError::Inconsistent(format!("the snapshot's committee records: {error}")))?;
        }
        self.state = state;
        self.chain = chain;
        self.seated = self.holds_seat();
        // A log handed over in this epoch, taken by its previous holder: the open slots' votes
        // in this key's name (signing is deterministic: the same bytes if they are already).
        if self.seated && self.state.holder_since == Some(self.chain.current().epoch()) {
            self.state.sign_open_slots(&self.key, self.chain.current().id());
        }
        Ok(())
    }

    fn check_invariants(&self) -> Result<(), StateError> {
        self.state.check()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shard_count_splits_accounts_the_same_way_at_every_authority() {
        let account = AccountKey([7; 32]);
        for shards in 1..9 {
            assert!(shard_of(&account, shards) < shards);
            assert_eq!(shard_of(&account, shards), shard_of(&account, shards));
        }
        assert_eq!(shard_of(&account, 0), 0, "zero shards is treated as one");
    }

    #[test]
    fn a_snapshot_with_a_repeated_key_is_not_canonical() {
        let mut state = ShardState::default();
        state.inbox.insert(1, 5);
        let mut bytes = Vec::new();
        state.encode_to(&mut bytes);
        // Duplicate the one inbox entry: count 2, the same (shard, next) twice.
        let entry = 4 + 8;
        let at = bytes.len() - 4 * 16 - 4 - entry - 4;
        let mut doubled = bytes[..at].to_vec();
        doubled.extend_from_slice(&2u32.to_le_bytes());
        doubled.extend_from_slice(&bytes[at + 4..at + 4 + entry]);
        doubled.extend_from_slice(&bytes[at + 4..]);
        assert_eq!(ShardState::decode(&bytes).unwrap(), state);
        assert!(matches!(
            ShardState::decode(&doubled),
            Err(specie_codec::DecodeError::NonCanonical { .. })
        ));
    }

    #[test]
    fn the_snapshot_of_an_empty_shard_round_trips() {
        let state = ShardState::default();
        let mut bytes = Vec::new();
        state.encode_to(&mut bytes);
        assert_eq!(ShardState::decode(&bytes).unwrap(), state);
    }
}
