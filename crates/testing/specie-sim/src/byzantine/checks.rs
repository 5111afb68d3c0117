//! The invariants: after every step, as events happen, and once everything has settled.

use std::collections::{BTreeMap, BTreeSet};

use specie_authority::{Command, Reply, Report, ShardIndex};
use specie_committee::Call;
use specie_fastpay::{
    AccountKey, AuthorityIndex, BrokenPromise, Certificate, DoubleVote, Evidence, Recipient, RoundRequest, Vote,
    VoteKind,
};
use specie_role::Ticket;

use super::paying::expected_vote;
use super::{Asked, ByzantineReport, Shard, ShardRole, World, AUTHORITIES};
use crate::world::Violation;

/// Which checks run. All of them, except in the planted-bug test, which also shows that the
/// protocol-level checks alone catch a shard that forgets its votes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Checks {
    /// A shard rebuilt from its log is the shard that crashed.
    pub restart_is_lossless: bool,
    /// An honest authority's votes that leave it name one order per (account, sequence, phase,
    /// round).
    pub honest_votes_once: bool,
}

impl Checks {
    pub const ALL: Checks = Checks {
        restart_is_lossless: true,
        honest_votes_once: true,
    };
}

/// What the checks remember of the run.
pub(super) struct Observed {
    /// Every final certificate any party formed or learned, per (account, sequence): one per
    /// order (two would break safety).
    certificates: BTreeMap<(AccountKey, u64), Vec<Certificate>>,
    /// In the order they were first seen, for adversaries picking one to replay or forge.
    certificate_keys: Vec<(AccountKey, u64)>,
    /// Digests of every order some party certified.
    certified: BTreeSet<[u8; 32]>,
    /// Per (account, sequence), the first honest authority to confirm it and the order.
    confirmed: BTreeMap<(AccountKey, u64), (AuthorityIndex, [u8; 32])>,
    /// Per (honest authority, account, sequence, phase, round), the order its votes were for.
    votes: BTreeMap<(AuthorityIndex, AccountKey, u64, VoteKind, u32), [u8; 32]>,
    /// Malformed channel messages handed to each authority: its shards may report channel
    /// violations (those and their echoes, such as an acknowledgement back to the sibling named
    /// as the sender), and only then.
    pub corruptions: [u64; AUTHORITIES],
}

impl Observed {
    pub fn new() -> Observed {
        Observed {
            certificates: BTreeMap::new(),
            certificate_keys: Vec::new(),
            certified: BTreeSet::new(),
            confirmed: BTreeMap::new(),
            votes: BTreeMap::new(),
            corruptions: [0; AUTHORITIES],
        }
    }

    pub fn certificate_count(&self) -> usize {
        self.certificate_keys.len()
    }

    pub fn certificate(&self, index: usize) -> Certificate {
        self.certificates[&self.certificate_keys[index]][0].clone()
    }
}

/// One account as an honest authority ends: balance, next sequence, every confirmed order.
#[derive(Debug, PartialEq, Eq)]
struct FinalAccount {
    balance: i128,
    next_sequence: u64,
    confirmed: Vec<[u8; 32]>,
}

impl<R: ShardRole> World<R> {
    /// A valid certificate a correct party now holds: into the directory, and observed.
    pub(super) fn learn_certificate(&mut self, certificate: Certificate) -> Result<(), Violation> {
        self.observe_certificate(&certificate)?;
        let order = &certificate.order.order;
        self.directory
            .entry((order.sender, order.sequence))
            .or_insert(certificate);
        Ok(())
    }

    /// Every final certificate formed or seen. Safety: there is never a second one for another
    /// order at one (account, sequence), whatever the Byzantine parties do (f = 1). Two of one
    /// phase and round would hold evidence, which must not convict an honest authority.
    pub(super) fn observe_certificate(&mut self, certificate: &Certificate) -> Result<(), Violation> {
        self.observe_epoch_certificate(certificate)?;
        let order = &certificate.order.order;
        let key = (order.sender, order.sequence);
        self.observed.certified.insert(order.digest());
        let known = self.observed.certificates.entry(key).or_default();
        if known.iter().any(|c| c.order == certificate.order) {
            return Ok(());
        }
        if known.is_empty() {
            self.observed.certificate_keys.push(key);
        }
        let double_votes: Vec<DoubleVote> = known
            .iter()
            .flat_map(|other| DoubleVote::from_certificates(other, certificate))
            .collect();
        let conflicting = !known.is_empty();
        known.push(certificate.clone());
        if !conflicting {
            return Ok(());
        }
        let context = format!(
            "two final certificates for account {:?} sequence {}",
            &key.0 .0[..4],
            key.1
        );
        if !double_votes.is_empty() {
            let committee = self
                .committee_named(&certificate.committee_id)
                .expect("an observed final certificate");
            self.check_evidence(self.evidence(committee, double_votes, Vec::new()), &context)?;
        }
        Err(self.violation(format!(
            "{context}: safety broken (kinds and rounds {:?})",
            self.observed.certificates[&key]
                .iter()
                .map(|c| (c.kind, c.round))
                .collect::<Vec<_>>()
        )))
    }

    /// Evidence against members of `committee` (the epoch whose votes it holds).
    pub(super) fn evidence(
        &self,
        committee: &specie_fastpay::Committee,
        double_votes: Vec<DoubleVote>,
        broken_promises: Vec<BrokenPromise>,
    ) -> Evidence {
        Evidence {
            committee: committee.clone(),
            double_votes,
            broken_promises,
        }
    }

    /// The evidence convicts someone, and only Byzantine authorities.
    pub(super) fn check_evidence(&self, evidence: Evidence, context: &str) -> Result<(), Violation> {
        match evidence.convicted() {
            Err(error) => Err(self.violation(format!("{context}: the evidence convicts no one: {error}"))),
            Ok(convicted) => match convicted.iter().find(|&&a| !self.is_byzantine(a)) {
                Some(honest) => Err(self.violation(format!(
                    "{context}: the evidence convicts honest authority {honest} (convicted: {convicted:?})"
                ))),
                None => Ok(()),
            },
        }
    }

    /// Commands an honest shard applied: a settled order is one some party certified, and no
    /// two honest authorities settle different orders for one (account, sequence).
    pub(super) fn observe_applied(
        &mut self,
        authority: AuthorityIndex,
        shard: ShardIndex,
        applied: &[Command],
    ) -> Result<(), Violation> {
        for command in applied {
            let Command::Confirm { certificate } = command else {
                continue;
            };
            let order = &certificate.order.order;
            let key = (order.sender, order.sequence);
            let host = self.host(authority, shard).expect("an honest shard");
            let Some(settled) = host.role().shard().account(&order.sender, order.sequence) else {
                continue;
            };
            let Some(settled) = settled.confirmed.first() else {
                continue;
            };
            let digest = settled.order.order.digest();
            if !self.observed.certified.contains(&digest) {
                return Err(self.violation(format!(
                    "authority {authority} settled an order no party certified (account {:?} sequence {})",
                    &key.0 .0[..4],
                    key.1
                )));
            }
            match self.observed.confirmed.get(&key) {
                None => {
                    self.observed.confirmed.insert(key, (authority, digest));
                }
                Some((first, known)) if *known != digest => {
                    return Err(self.violation(format!(
                        "account {:?} sequence {}: honest authorities {first} and {authority} confirmed different orders",
                        &key.0 .0[..4],
                        key.1
                    )));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// What an honest shard answers: a vote is its own, valid, for what it was asked, and its
    /// votes name one order per (account, sequence, phase, round); a round change is its own
    /// and valid for the slot and round asked; a final certificate is final.
    pub(super) fn observe_honest_reply(
        &mut self,
        authority: AuthorityIndex,
        ticket: Ticket,
        reply: &Reply,
    ) -> Result<(), Violation> {
        let asked = self.tickets.get(&ticket).map(|(_, asked)| asked.clone());
        match reply {
            Reply::Voted(vote) => self.observe_honest_vote(authority, ticket, asked, vote),
            Reply::RoundChanged(change) => {
                let Some(Asked::Payment {
                    call: Call::RoundChange(request),
                    ..
                }) = asked
                else {
                    return Err(self.violation(format!(
                        "authority {authority} answered ticket {ticket} with a round change, unasked"
                    )));
                };
                let RoundRequest {
                    account,
                    sequence,
                    round,
                    ..
                } = request.request;
                // A round change of the epoch the request names, reporting a lock of any epoch.
                let chain = &self.chain;
                let checked = match chain.committee(&change.change.committee_id) {
                    Some(committee) => change.check_in(committee, &|id| chain.committee(id), &account, sequence, round),
                    None => Err(specie_fastpay::JustificationError::OtherSlot {
                        authority: change.authority,
                    }),
                };
                match checked {
                    Ok(()) if change.authority == authority => Ok(()),
                    Ok(()) => Err(self.violation(format!(
                        "honest authority {authority} sent authority {}'s round change",
                        change.authority
                    ))),
                    Err(error) => Err(self.violation(format!(
                        "honest authority {authority} sent an invalid round change: {error}"
                    ))),
                }
            }
            Reply::Final(certificate) => match self.check_final(certificate) {
                Ok(()) => Ok(()),
                Err(error) => Err(self.violation(format!(
                    "honest authority {authority} answered with a final certificate that is not: {error}"
                ))),
            },
            _ => Ok(()),
        }
    }

    fn observe_honest_vote(
        &mut self,
        authority: AuthorityIndex,
        ticket: Ticket,
        asked: Option<Asked>,
        vote: &Vote,
    ) -> Result<(), Violation> {
        // Signed in the name of the committee of the epoch the shard is in.
        let Some(committee) = self.committee_named(&vote.statement.committee_id).cloned() else {
            return Err(self.violation(format!(
                "honest authority {authority} voted in the name of a committee of no epoch"
            )));
        };
        let Some(expected) = asked.and_then(|asked| expected_vote(committee.id(), &asked)) else {
            return Err(self.violation(format!(
                "authority {authority} voted on ticket {ticket}, which asked for no vote"
            )));
        };
        if vote.authority != authority {
            return Err(self.violation(format!("authority {authority} voted as authority {}", vote.authority)));
        }
        if let Err(error) = vote.check(&committee, &vote.statement) {
            return Err(self.violation(format!(
                "honest authority {authority} sent an invalid vote ({:?} round {}): {error}",
                vote.statement.kind, vote.statement.round
            )));
        }
        if vote.statement != expected {
            return Err(self.violation(format!(
                "authority {authority} answered a request for a {:?} vote in round {} with a {:?} vote in round {} \
                 (same order: {})",
                expected.kind,
                expected.round,
                vote.statement.kind,
                vote.statement.round,
                expected.order_digest == vote.statement.order_digest
            )));
        }
        let Some(order) = self.order_of(ticket) else {
            unreachable!("a ticket that asks for a vote names an order")
        };
        let key = (authority, order.0, order.1, vote.statement.kind, vote.statement.round);
        let digest_prefix = u64::from_le_bytes(vote.statement.order_digest[..8].try_into().expect("8 bytes"));
        let sender_prefix = u64::from_le_bytes(key.1 .0[..8].try_into().expect("8 bytes"));
        let kind = vote.statement.kind as u64;
        let round = u64::from(vote.statement.round);
        self.record(
            "voted",
            &[
                u64::from(authority),
                sender_prefix,
                key.2,
                kind,
                round,
                digest_prefix,
                ticket,
            ],
        );
        if !self.checks.honest_votes_once {
            return Ok(());
        }
        match self.observed.votes.insert(key, vote.statement.order_digest) {
            Some(earlier) if earlier != vote.statement.order_digest => Err(self.violation(format!(
                "honest authority {authority} signed two orders for account {:?} sequence {} ({:?} round {})",
                &key.1 .0[..4],
                key.2,
                key.3,
                key.4
            ))),
            _ => Ok(()),
        }
    }

    /// The (account, sequence) of the order a vote-asking ticket names.
    fn order_of(&self, ticket: Ticket) -> Option<(AccountKey, u64)> {
        let order = match &self.tickets.get(&ticket)?.1 {
            Asked::Transfer(order)
            | Asked::Payment {
                call: Call::Transfer(order) | Call::Propose { order, .. },
                ..
            } => order,
            Asked::Payment {
                call: Call::Lock(lock), ..
            } => &lock.order,
            _ => return None,
        };
        Some((order.order.sender, order.order.sequence))
    }

    /// What an honest shard reports: evidence must convict only the Byzantine authority, and
    /// channel violations come only from malformed channel messages.
    pub(super) fn observe_report(
        &mut self,
        authority: AuthorityIndex,
        shard: ShardIndex,
        report: Report,
    ) -> Result<(), Violation> {
        match report {
            Report::Equivocation(evidence) => {
                let context = format!("authority {authority} shard {shard} reported an equivocation");
                self.report.broken_promises += evidence.broken_promises.len() as u64;
                self.check_evidence(*evidence, &context)
            }
            Report::ConflictingCertificates(certificates) => Err(self.violation(format!(
                "authority {authority} shard {shard} holds two final certificates for one slot: {:?}",
                certificates.iter().map(|c| (c.kind, c.round)).collect::<Vec<_>>()
            ))),
            Report::ChannelViolation { from, reason } => {
                if self.observed.corruptions[usize::from(authority)] == 0 {
                    return Err(self.violation(format!(
                        "authority {authority} shard {shard} reports a channel violation no one caused \
                         (from shard {from}: {reason})"
                    )));
                }
                self.report.channel_violations_reported += 1;
                Ok(())
            }
        }
    }

    /// After every step: every honest shard that changed holds its invariants, and every honest
    /// authority's books balance: balances + credits between its shards = funded − redeemed.
    pub(super) fn check_step(&mut self) -> Result<(), Violation> {
        for authority in 0..AUTHORITIES as AuthorityIndex {
            let Some(shards) = self.authorities[usize::from(authority)].as_ref() else {
                continue;
            };
            if !shards.iter().any(|h| h.dirty) {
                continue;
            }
            for (shard, host) in shards.iter().enumerate() {
                if host.dirty {
                    if let Err(error) = host.role().check_invariants() {
                        return Err(self.violation(format!("authority {authority} shard {shard}: {error}")));
                    }
                }
            }
            if let Some(message) = books_unbalanced(shards) {
                return Err(self.violation(format!("authority {authority}: {message}")));
            }
            for host in self.authorities[usize::from(authority)].as_mut().expect("honest") {
                host.dirty = false;
            }
        }
        Ok(())
    }

    /// Everything settled: the final checks, then the report.
    pub(super) fn finish(mut self) -> Result<ByzantineReport, Violation> {
        let funded: u128 = self.bridge.fundings.iter().map(|f| u128::from(f.amount)).sum();
        let mut agreed: Option<BTreeMap<AccountKey, FinalAccount>> = None;
        for (authority, shards) in self.honest() {
            for (shard, host) in shards.iter().enumerate() {
                if let Err(error) = host.role().check_invariants() {
                    return Err(self.violation(format!("at the end, authority {authority} shard {shard}: {error}")));
                }
            }
            if let Some(message) = books_unbalanced(shards) {
                return Err(self.violation(format!("at the end, authority {authority}: {message}")));
            }
            let accounts = self.final_accounts(shards);
            self.check_final_books(authority, shards, &accounts, funded)?;
            match &agreed {
                None => agreed = Some(accounts),
                Some(first) if *first != accounts => {
                    let differ = first.keys().find(|k| first.get(*k) != accounts.get(*k));
                    return Err(self.violation(format!(
                        "at the end, honest authorities disagree on account {:?}: {:?} against {:?}",
                        differ.map(|k| &k.0[..4]),
                        differ.map(|k| &first[k]),
                        differ.map(|k| accounts.get(k))
                    )));
                }
                Some(_) => {}
            }
        }
        let agreed = agreed.expect("at least three honest authorities");
        for (i, client) in self.clients.iter().enumerate() {
            let mine: Vec<[u8; 32]> = client.certificates.iter().map(|c| c.order.order.digest()).collect();
            if agreed[&client.account].confirmed != mine {
                return Err(self.violation(format!(
                    "at the end, client {i}'s {} payments are not exactly what the honest authorities confirmed",
                    mine.len()
                )));
            }
            self.report.payments += mine.len() as u64;
            self.report.redeems += client
                .certificates
                .iter()
                .filter(|c| matches!(c.order.order.recipient, Recipient::Core(_)))
                .count() as u64;
        }
        self.report.fundings = self.bridge.fundings.len() as u64;
        self.report.steps = self.step;
        self.report.virtual_ms = self.now_ms;
        self.report.trace_digest = std::mem::take(&mut self.trace).finish();
        Ok(self.report)
    }

    /// Every account as one honest authority holds it, read page by page as a client would.
    fn final_accounts(&self, shards: &[Shard<R>]) -> BTreeMap<AccountKey, FinalAccount> {
        let mut accounts = BTreeMap::new();
        for account in self.owners.keys() {
            let shard = shards[self.shard_of(account) as usize].role().shard();
            let Some(first) = shard.account(account, 0) else {
                continue;
            };
            let mut confirmed: Vec<[u8; 32]> = first.confirmed.iter().map(|c| c.order.order.digest()).collect();
            while (confirmed.len() as u64) < first.next_sequence {
                let page = shard.account(account, confirmed.len() as u64).expect("known");
                confirmed.extend(page.confirmed.iter().map(|c| c.order.order.digest()));
            }
            let state = FinalAccount {
                balance: first.balance,
                next_sequence: first.next_sequence,
                confirmed,
            };
            accounts.insert(*account, state);
        }
        accounts
    }

    /// An honest authority ends with every funding credited, its channels drained, and its
    /// balances adding up to what was funded less what its certificates redeemed.
    fn check_final_books(
        &self,
        authority: AuthorityIndex,
        shards: &[Shard<R>],
        accounts: &BTreeMap<AccountKey, FinalAccount>,
        funded: u128,
    ) -> Result<(), Violation> {
        let shard_funded: u128 = shards.iter().map(|h| h.role().shard().funded()).sum();
        let unacked: u128 = shards.iter().map(|h| h.role().shard().credits_unacked()).sum();
        let redeemed: u128 = shards.iter().map(|h| h.role().shard().redeemed()).sum();
        let balances: i128 = accounts.values().map(|a| a.balance).sum();
        let all_balances: i128 = shards.iter().map(|h| h.role().shard().balances()).sum();
        let redeems: u128 = self
            .owners
            .keys()
            .flat_map(|account| {
                let shard = shards[self.shard_of(account) as usize].role().shard();
                let state = shard.account(account, 0);
                state.into_iter().flat_map(|s| s.confirmed)
            })
            .filter_map(|c| match c.order.order.recipient {
                Recipient::Core(_) => Some(u128::from(c.order.order.amount)),
                Recipient::Account(_) => None,
            })
            .sum();
        let problem = if shard_funded != funded {
            format!("funded {shard_funded}, the bridge funded {funded}")
        } else if unacked != 0 {
            format!("{unacked} still in flight between its shards")
        } else if balances != all_balances {
            format!("balances of known accounts {balances}, of all accounts {all_balances}")
        } else if balances != funded as i128 - redeemed as i128 {
            format!("balances {balances}, funded {funded} less redeemed {redeemed}")
        } else if redeems != redeemed {
            format!("redeemed {redeemed}, its confirmed redeems add up to {redeems}")
        } else {
            return Ok(());
        };
        Err(self.violation(format!(
            "at the end, authority {authority}: value not conserved: {problem}"
        )))
    }
}

/// An authority's books across its shards, up or down (a down shard's state is what its log
/// rebuilt). A credit leaves its sender's balances when the payment settles and stays in the
/// sender's unacknowledged credits until the acknowledgement comes back, while the receiver
/// adds it to a balance in between: so the value in flight between shards is at least nothing
/// and at most what is unacknowledged, and
///     balances ≤ funded − redeemed ≤ balances + unacknowledged credits,
/// with equality once the channels are drained (`balances + unacked = funded − redeemed` holds
/// exactly only when no credit is applied and still unacknowledged). A credit applied twice,
/// or forged, breaks the first inequality; a credit acknowledged and never applied, the second.
fn books_unbalanced<R: ShardRole>(shards: &[Shard<R>]) -> Option<String> {
    let balances: i128 = shards.iter().map(|h| h.role().shard().balances()).sum();
    let unacked: u128 = shards.iter().map(|h| h.role().shard().credits_unacked()).sum();
    let funded: u128 = shards.iter().map(|h| h.role().shard().funded()).sum();
    let redeemed: u128 = shards.iter().map(|h| h.role().shard().redeemed()).sum();
    let books = funded as i128 - redeemed as i128;
    (balances > books || books > balances + unacked as i128).then(|| {
        format!(
            "balances {balances}, credits unacknowledged {unacked}, funded {funded} − redeemed {redeemed}: \
             value was created or lost between shards"
        )
    })
}
