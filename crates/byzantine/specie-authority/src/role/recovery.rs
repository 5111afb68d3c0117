//! The recovery rounds at an authority shard (specie_fastpay's `rounds` module has the rule):
//! round changes, prepare votes of rounds ≥ 1, and locks answered with commit votes. Each is
//! signed when handled, made durable, and only then answered, as round 0's votes are.

use specie_fastpay::{
    AccountKey, BrokenPromise, Certificate, Justification, RoundChange, RoundRequest, SignedOrder, SignedRoundRequest,
    Vote, VoteKind, VoteStatement,
};
use specie_role::{Output, Ticket};

use super::AuthorityShard;
use crate::messages::{Command, Refusal, Reply};
use crate::state::{check_enterable, check_lockable, check_preparable, Account};

impl AuthorityShard {
    /// What this shard signs to vote `kind` in `round` for `order`, in the current epoch.
    fn statement(&self, kind: VoteKind, round: u32, order: &SignedOrder) -> VoteStatement {
        VoteStatement {
            committee_id: self.committee().id(),
            kind,
            round,
            order_digest: order.order.digest(),
        }
    }

    fn signed_vote(&self, kind: VoteKind, round: u32, order: &SignedOrder) -> Vote {
        let statement = self.statement(kind, round, order);
        Vote {
            authority: self.config.authority,
            statement,
            signature: statement.sign(&self.key),
        }
    }

    /// Whether the account's slot at `sequence` is open here; a settled slot is answered with its
    /// final certificate (`Ok(false)`), so the caller learns how it ended.
    fn open_slot(&mut self, ticket: Ticket, account: &AccountKey, sequence: u64) -> Result<bool, Refusal> {
        self.owns(account)?;
        // One change of an account on its way to the log at a time (`judge` defers the rest): a
        // round change must report a round-0 vote that is about to be applied.
        debug_assert!(!self.account_changing(account) && !self.votes_in_flight.contains_key(account));
        let state = self.state.accounts.get(account).ok_or(Refusal::UnknownAccount)?;
        if let Some(settled) = state.confirmed.get(sequence as usize) {
            let reply = Reply::Final(Box::new(settled.clone()));
            self.reply(ticket, reply);
            return Ok(false);
        }
        if sequence != state.next_sequence {
            return Err(Refusal::WrongSequence {
                expected: state.next_sequence,
                got: sequence,
            });
        }
        Ok(true)
    }

    fn slot(&self, account: &AccountKey) -> &Account {
        self.state.accounts.get(account).expect("an open slot's account exists")
    }

    fn propose_slot(&mut self, account: AccountKey, ticket: Ticket, command: Command, reply: Reply) {
        self.outputs.push_back(Output::Propose(command));
        self.slot_in_flight.insert(account, (reply, vec![ticket]));
    }

    pub(super) fn round_change(&mut self, ticket: Ticket, request: &SignedRoundRequest) -> Result<(), Refusal> {
        request.check(self.committee())?;
        let RoundRequest {
            account,
            sequence,
            round,
            ..
        } = request.request;
        if !self.open_slot(ticket, &account, sequence)? {
            return Ok(());
        }
        let state = self.slot(&account);
        check_enterable(state, round)?;
        let change = RoundChange {
            committee_id: self.committee().id(),
            account,
            sequence,
            round,
            prepared_first: state.pending.as_ref().map(|(order, _)| order.order.digest()),
            lock: state.lock.as_ref().map(|(c, _)| (c.round, c.order.order.digest())),
        };
        let lock = state.lock.as_ref().map(|(certificate, _)| certificate.clone());
        let signed = change.sign(self.config.authority, &self.key, lock);
        let command = Command::EnterRound {
            account,
            sequence,
            round,
        };
        self.propose_slot(account, ticket, command, Reply::RoundChanged(Box::new(signed)));
        Ok(())
    }

    pub(super) fn propose(
        &mut self,
        ticket: Ticket,
        order: SignedOrder,
        round: u32,
        justification: &Justification,
    ) -> Result<(), Refusal> {
        let (account, sequence) = (order.order.sender, order.order.sequence);
        order.check()?;
        if !self.open_slot(ticket, &account, sequence)? {
            return Ok(());
        }
        let state = self.slot(&account);
        check_preparable(state, &order, round)?;
        let chain = &self.chain;
        let allowed = justification.check_in(chain.current(), &|id| chain.committee(id), &account, sequence, round)?;
        self.convict_broken_promises(&account, justification);
        let state = self.slot(&account);
        let digest = order.order.digest();
        if !allowed.allows(&digest) {
            return Err(Refusal::NotAllowed);
        }
        if let Some((locked, _)) = &state.lock {
            let outranked =
                matches!(allowed, specie_fastpay::Allowed::Only { lock_round: Some(r), .. } if r > locked.round);
            if locked.order.order.digest() != digest && !outranked {
                return Err(Refusal::LockedOnOther {
                    lock_round: locked.round,
                });
            }
        }
        if state.balance < i128::from(order.order.amount) {
            return Err(Refusal::InsufficientBalance {
                balance: state.balance,
                amount: order.order.amount,
            });
        }
        let vote = self.signed_vote(VoteKind::Prepare, round, &order);
        let command = Command::Prepare {
            order,
            round,
            signature: vote.signature,
            epoch: Some(self.committee().epoch()),
        };
        self.propose_slot(account, ticket, command, Reply::Voted(vote));
        Ok(())
    }

    /// Round changes of a checked justification that the votes in the locks this shard knows of
    /// for the slot (its own, and those the justification carries) contradict: a signer that
    /// prepared an order in round 0 and reports another, or nothing. The decide rule tolerates
    /// such lies from up to f authorities; they are still kept as evidence (within one epoch).
    fn convict_broken_promises(&mut self, account: &AccountKey, justification: &Justification) {
        let own = self.slot(account).lock.as_ref().map(|(certificate, _)| certificate);
        let carried = justification.changes.iter().filter_map(|c| c.lock_certificate.as_ref());
        // Evidence names one committee: a lock of an earlier epoch convicts no one here.
        let current = self.committee().id();
        let locks: Vec<&Certificate> = own
            .into_iter()
            .chain(carried)
            .filter(|lock| lock.committee_id == current)
            .collect();
        let broken = BrokenPromise::find(&justification.changes, &locks);
        self.report_evidence(Vec::new(), broken);
    }

    pub(super) fn lock(&mut self, ticket: Ticket, certificate: Certificate) -> Result<(), Refusal> {
        let order = &certificate.order;
        let (account, sequence) = (order.order.sender, order.order.sequence);
        if !self.open_slot(ticket, &account, sequence)? {
            return Ok(());
        }
        let state = self.slot(&account);
        check_lockable(state, &certificate)?;
        certificate.check_lock(self.committee_of(&certificate)?)?;
        let vote = self.signed_vote(VoteKind::Commit, certificate.round, &certificate.order);
        let command = Command::Lock {
            certificate,
            signature: vote.signature,
            epoch: Some(self.committee().epoch()),
        };
        self.propose_slot(account, ticket, command, Reply::Voted(vote));
        Ok(())
    }

    /// Applies a recovery command and answers whoever waits for it.
    pub(super) fn apply_slot(&mut self, command: &Command) {
        // A vote signed before the epoch that replaced this key was applied is neither kept
        // nor answered; one signed before another epoch change is kept signed again.
        let not_seated = Refusal::NotSeated {
            epoch: self.committee().epoch(),
        };
        let (account, applied) = match command {
            Command::Prepare { order, .. }
            | Command::Lock {
                certificate: Certificate { order, .. },
                ..
            } if !self.seated => (order.order.sender, Err(not_seated)),
            Command::Prepare {
                order,
                round,
                signature,
                epoch,
            } => {
                let statement = || self.statement(VoteKind::Prepare, *round, order);
                let signature = self.kept_signature(*epoch, statement, *signature);
                (order.order.sender, self.state.prepare(order, *round, signature))
            }
            Command::Lock {
                certificate,
                signature,
                epoch,
            } => {
                let statement = || self.statement(VoteKind::Commit, certificate.round, &certificate.order);
                let signature = self.kept_signature(*epoch, statement, *signature);
                (certificate.order.order.sender, self.state.lock(certificate, signature))
            }
            Command::EnterRound {
                account,
                sequence,
                round,
            } => (*account, self.state.enter_round(account, *sequence, *round)),
            _ => unreachable!("only recovery commands"),
        };
        if let Some((reply, tickets)) = self.slot_in_flight.remove(&account) {
            let reply = applied.map_or_else(Reply::Refused, |()| reply);
            for ticket in tickets {
                self.reply(ticket, reply.clone());
            }
        }
        self.resume_deferred(&account);
    }
}
