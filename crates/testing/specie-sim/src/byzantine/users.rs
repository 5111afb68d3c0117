//! The correct parties: users paying each other and the core (FastPay §4.1, §4.3, §4.5), the
//! core bridge funding accounts at every authority, and an auditor reading accounts (§4.4).

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use specie_authority::{AccountState, Funding, Refusal, Reply};
use specie_fastpay::{
    AccountKey, AuthorityIndex, Certificate, CoreAddress, Recipient, SignedOrder, SigningKey, TransferOrder, Vote,
};

use super::{Asked, Party, ShardRole, World, AUTHORITIES};
use crate::world::Violation;

/// Value each account is funded with at the start, and a top-up.
const FUNDING: u64 = 1_000;
const TOP_UP: u64 = 200;
/// The largest payment a correct user makes.
const PAYMENT_MAX: u64 = 300;

/// An order being voted on, and the valid votes it has, in the order they came.
pub(super) struct Voting {
    pub order: SignedOrder,
    pub votes: Vec<Vote>,
}

/// A correct user: one order per sequence number, each driven to a certificate and confirmed
/// everywhere.
pub(super) struct Client {
    pub key: SigningKey,
    pub account: AccountKey,
    /// What it may spend, conservatively (§4.5): its fundings and the certificates paying it
    /// that it holds, less everything it signed away.
    pub spendable: i128,
    pub payments_left: usize,
    /// Its certificates; the index is the sequence number.
    pub certificates: Vec<Certificate>,
    /// Its certificates not yet confirmed by a quorum, and who has confirmed them. FastPay's
    /// correct user (§4.5, rule 3) needs no more: an authority left behind is brought up to
    /// date when a later certificate of this account reaches it (§5), or by the auditor.
    pub confirming: BTreeMap<u64, BTreeSet<AuthorityIndex>>,
    pub voting: Option<Voting>,
    /// The certificates that paid it, by (payer, sequence): pushed to an authority that finds
    /// its balance short (§5, Proposition 5.4).
    pub received: Vec<(AccountKey, u64)>,
    pub wake_at_ms: u64,
}

impl Client {
    pub fn new(key: SigningKey, payments: usize) -> Client {
        Client {
            account: AccountKey(key.verifying_key().to_bytes()),
            key,
            spendable: 0,
            payments_left: payments,
            certificates: Vec::new(),
            confirming: BTreeMap::new(),
            voting: None,
            received: Vec::new(),
            wake_at_ms: 0,
        }
    }

    /// Every payment it means to make has a certificate.
    pub fn is_certified(&self) -> bool {
        self.payments_left == 0 && self.voting.is_none()
    }
}

/// The online core's bridge: each funding is sent to every authority until it answers.
#[derive(Default)]
pub(super) struct Bridge {
    pub fundings: Vec<Funding>,
    pub funded: Vec<BTreeSet<AuthorityIndex>>,
    pub wake_at_ms: Option<u64>,
}

/// Reads every account at every authority once the network heals, and pushes each
/// certificate it learns to the authorities still behind (anyone may drive a certificate).
#[derive(Default)]
pub(super) struct Auditor {
    pub wake_at_ms: Option<u64>,
    /// What each authority last said its next sequence number is, per account.
    pub next_sequences: BTreeMap<(AuthorityIndex, AccountKey), u64>,
}

impl<R: ShardRole> World<R> {
    /// Every account gets its first funding; correct users may spend it right away (the core
    /// has taken the value; the authorities will hear of it).
    pub(super) fn fund_everyone(&mut self) {
        let accounts: Vec<AccountKey> = self.owners.keys().copied().collect();
        for account in accounts {
            self.fund(account, FUNDING);
        }
    }

    fn fund(&mut self, account: AccountKey, amount: u64) {
        let index = self.bridge.fundings.len();
        let mut id = [0u8; 32];
        id[..8].copy_from_slice(&(index as u64).to_le_bytes());
        id[8..16].copy_from_slice(&self.options.seed.to_le_bytes());
        self.bridge.fundings.push(Funding { id, account, amount });
        self.bridge.funded.push(BTreeSet::new());
        self.bridge.wake_at_ms = Some(self.now_ms);
        if let Some(&Party::Client(i)) = self.owners.get(&account) {
            self.clients[i].spendable += i128::from(amount);
        }
        self.record("fund", &[index as u64, amount]);
    }

    pub(super) fn party_wakes(&self) -> impl Iterator<Item = u64> + '_ {
        let byzantine_users = self.byzantine_users.iter().filter(|_| self.faults_on);
        let adversary = self
            .adversary
            .as_ref()
            .and_then(|a| a.wake_at_ms)
            .filter(|_| self.faults_on);
        self.clients
            .iter()
            .map(|c| c.wake_at_ms)
            .chain(byzantine_users.map(|u| u.wake_at_ms))
            .chain(adversary)
            .chain(self.bridge.wake_at_ms)
            .chain(self.auditor.wake_at_ms)
    }

    /// Lets every party whose time has come act.
    pub(super) fn wake_parties(&mut self) -> Result<(), Violation> {
        let now_ms = self.now_ms;
        for i in 0..self.clients.len() {
            if self.clients[i].wake_at_ms <= now_ms {
                self.wake_client(i);
            }
        }
        if self.faults_on {
            for i in 0..self.byzantine_users.len() {
                if self.byzantine_users[i].wake_at_ms <= now_ms {
                    self.wake_byzantine_user(i);
                }
            }
            if self
                .adversary
                .as_ref()
                .and_then(|a| a.wake_at_ms)
                .is_some_and(|at| at <= now_ms)
            {
                self.wake_adversary();
            }
        }
        if self.bridge.wake_at_ms.is_some_and(|at| at <= now_ms) {
            self.wake_bridge();
        }
        if self.auditor.wake_at_ms.is_some_and(|at| at <= now_ms) {
            self.wake_auditor();
        }
        Ok(())
    }

    /// Asks again for what is missing (votes, confirmations), then starts the next payment.
    fn wake_client(&mut self, i: usize) {
        let party = Party::Client(i);
        self.clients[i].wake_at_ms = self.now_ms + self.options.retry_ms + self.rng.gen_range(0..50);
        if self.faults_on && self.rng.gen_range(0..100) < 2 {
            self.fund(self.clients[i].account, TOP_UP);
        }
        let client = &self.clients[i];
        let account = client.account;
        if let Some(voting) = &client.voting {
            let order = voting.order.clone();
            let missing: Vec<AuthorityIndex> = (0..AUTHORITIES as AuthorityIndex)
                .filter(|a| !voting.votes.iter().any(|v| v.authority == *a))
                .collect();
            for authority in missing {
                self.request(party, authority, &account, Asked::Transfer(order.clone()));
            }
        }
        let unconfirmed: Vec<(u64, AuthorityIndex)> = self.clients[i]
            .confirming
            .iter()
            .flat_map(|(&sequence, done)| {
                (0..AUTHORITIES as AuthorityIndex)
                    .filter(|a| !done.contains(a))
                    .map(move |a| (sequence, a))
            })
            .collect();
        for (sequence, authority) in unconfirmed {
            let asked = Asked::Confirm {
                sender: account,
                sequence,
            };
            self.request(party, authority, &account, asked);
        }
        let pays = !self.faults_on || self.rng.gen_range(0..1000) < self.options.pay_per_mille;
        if self.clients[i].voting.is_none() && self.clients[i].payments_left > 0 && pays {
            self.start_payment(i);
        }
    }

    /// Signs the next order (to another account, or a redeem to the core) within what it may
    /// spend, and sends it to every authority.
    fn start_payment(&mut self, i: usize) {
        let spendable = self.clients[i].spendable;
        if spendable < 1 {
            return;
        }
        let amount = self.rng.gen_range(1..=spendable.min(i128::from(PAYMENT_MAX)) as u64);
        let recipient = if self.rng.gen_range(0..100) < 15 {
            Recipient::Core(CoreAddress(self.rng.gen()))
        } else {
            let others: Vec<AccountKey> = self
                .owners
                .keys()
                .copied()
                .filter(|a| *a != self.clients[i].account)
                .collect();
            Recipient::Account(others[self.rng.gen_range(0..others.len())])
        };
        let client = &mut self.clients[i];
        let sequence = client.certificates.len() as u64;
        let order = TransferOrder {
            sender: client.account,
            recipient,
            amount,
            sequence,
            memo: Vec::new(),
        }
        .sign(&client.key);
        client.spendable -= i128::from(amount);
        client.payments_left -= 1;
        client.voting = Some(Voting {
            order: order.clone(),
            votes: Vec::new(),
        });
        let account = client.account;
        self.record("order", &[i as u64, sequence, amount]);
        for authority in 0..AUTHORITIES as AuthorityIndex {
            self.request(Party::Client(i), authority, &account, Asked::Transfer(order.clone()));
        }
    }

    pub(super) fn client_receives(
        &mut self,
        i: usize,
        authority: AuthorityIndex,
        asked: Asked,
        reply: Reply,
    ) -> Result<(), Violation> {
        match (asked, reply) {
            (Asked::Transfer(order), Reply::Voted(vote)) => self.client_gets_vote(i, authority, order, vote),
            (Asked::Transfer(order), Reply::Refused(refusal)) => {
                self.client_order_refused(i, authority, order, refusal)
            }
            (Asked::Confirm { sender, sequence }, Reply::Confirmed { .. }) if sender == self.clients[i].account => {
                let quorum = self.committee.quorum();
                let confirming = &mut self.clients[i].confirming;
                if let Some(done) = confirming.get_mut(&sequence) {
                    done.insert(authority);
                    if done.len() >= quorum {
                        confirming.remove(&sequence);
                    }
                }
                Ok(())
            }
            (asked, reply) => self.reader_receives(Party::Client(i), authority, asked, reply),
        }
    }

    /// Counts a valid vote for the order being voted on; a quorum makes the certificate.
    fn client_gets_vote(
        &mut self,
        i: usize,
        authority: AuthorityIndex,
        order: SignedOrder,
        vote: Vote,
    ) -> Result<(), Violation> {
        let current = self.clients[i].voting.as_ref().is_some_and(|v| v.order == order);
        if !current {
            return Ok(());
        }
        match (self.is_byzantine(authority), vote.check(&self.committee, &order)) {
            (true, Err(_)) => {
                self.report.forged_votes_ignored += 1;
                return Ok(());
            }
            (false, Err(error)) => {
                return Err(self.violation(format!(
                    "honest authority {authority} sent client {i} an invalid vote: {error}"
                )));
            }
            (false, Ok(())) if vote.authority != authority => {
                return Err(self.violation(format!("authority {authority} voted as authority {}", vote.authority)));
            }
            _ => {}
        }
        let voting = self.clients[i].voting.as_mut().expect("current");
        if voting.votes.iter().any(|v| v.authority == vote.authority) {
            return Ok(());
        }
        voting.votes.push(vote);
        if voting.votes.len() >= self.committee.quorum() {
            self.client_certifies(i)?;
        }
        Ok(())
    }

    /// Forms the certificate from the first quorum of valid votes, hands it to the payee, and
    /// sends it to every authority.
    fn client_certifies(&mut self, i: usize) -> Result<(), Violation> {
        let voting = self.clients[i].voting.take().expect("voting");
        let quorum = self.committee.quorum();
        let certificate = Certificate::from_votes(voting.order.clone(), &voting.votes[..quorum]);
        if let Err(error) = certificate.check(&self.committee) {
            return Err(self.violation(format!(
                "client {i}'s certificate, made of checked votes, is invalid: {error}"
            )));
        }
        let order = voting.order.order;
        let client = &mut self.clients[i];
        client.certificates.push(certificate.clone());
        client.confirming.insert(order.sequence, BTreeSet::new());
        self.record("certified", &[i as u64, order.sequence]);
        self.learn_certificate(certificate)?;
        if let Recipient::Account(payee) = order.recipient {
            self.hand_over(payee, order.sender, order.sequence, order.amount);
        }
        for authority in 0..AUTHORITIES as AuthorityIndex {
            let asked = Asked::Confirm {
                sender: order.sender,
                sequence: order.sequence,
            };
            self.request(Party::Client(i), authority, &order.sender, asked);
        }
        Ok(())
    }

    /// The payee, if a correct user, now holds the certificate and may spend its amount.
    pub(super) fn hand_over(&mut self, payee: AccountKey, payer: AccountKey, sequence: u64, amount: u64) {
        if let Some(&Party::Client(j)) = self.owners.get(&payee) {
            self.clients[j].received.push((payer, sequence));
            self.clients[j].spendable += i128::from(amount);
        }
    }

    /// §5: an authority behind on this account gets the missing certificates; one short of
    /// balance gets the certificates that paid this user.
    fn client_order_refused(
        &mut self,
        i: usize,
        authority: AuthorityIndex,
        order: SignedOrder,
        refusal: Refusal,
    ) -> Result<(), Violation> {
        if !self.clients[i].voting.as_ref().is_some_and(|v| v.order == order) {
            return Ok(());
        }
        let (party, account, got) = (Party::Client(i), self.clients[i].account, order.order.sequence);
        match refusal {
            Refusal::WrongSequence { expected, .. } if expected < got => {
                (expected..got).for_each(|sequence| self.push(party, authority, account, sequence));
            }
            Refusal::OtherOrderPending { sequence } if sequence < got => {
                (sequence..got).for_each(|sequence| self.push(party, authority, account, sequence));
            }
            Refusal::InsufficientBalance { .. } => {
                for (payer, sequence) in self.clients[i].received.clone() {
                    self.push(party, authority, payer, sequence);
                }
            }
            Refusal::UnknownAccount | Refusal::ChannelFull { .. } => {}
            refusal if !self.is_byzantine(authority) => {
                return Err(self.violation(format!(
                    "honest authority {authority} refused client {i}'s order {got}: {refusal}"
                )));
            }
            _ => self.report.false_answers_ignored += 1,
        }
        Ok(())
    }

    /// Sends a certificate the party holds to an authority, at most once per retry period.
    pub(super) fn push(&mut self, party: Party, authority: AuthorityIndex, sender: AccountKey, sequence: u64) {
        let key = (party, authority, sender, sequence);
        if self
            .pushed
            .get(&key)
            .is_some_and(|&at| at + self.options.retry_ms > self.now_ms)
        {
            return;
        }
        self.pushed.insert(key, self.now_ms);
        self.request(party, authority, &sender, Asked::Confirm { sender, sequence });
    }

    /// Answers to confirmations and reads, for any correct party.
    pub(super) fn reader_receives(
        &mut self,
        party: Party,
        authority: AuthorityIndex,
        asked: Asked,
        reply: Reply,
    ) -> Result<(), Violation> {
        let honest = !self.is_byzantine(authority);
        match (asked, reply) {
            (Asked::Confirm { .. }, Reply::Confirmed { .. }) => {}
            (Asked::Confirm { sender, sequence }, Reply::Refused(Refusal::MissingEarlier { next, got }))
                if got == sequence && next < got =>
            {
                // The forging authority says this of every certificate: only honest ones count.
                self.report.missing_earlier += u64::from(honest);
                self.bring_up_to_date(party, authority, sender, next, got);
            }
            (Asked::Confirm { .. }, Reply::Refused(Refusal::ChannelFull { .. })) => {
                // Asked again when the party next wakes.
                self.report.channel_full += u64::from(honest);
            }
            (Asked::Confirm { .. }, Reply::Refused(Refusal::ConflictingCertificate { .. })) => {}
            (Asked::Account { account, from_sequence }, Reply::Account(state)) => {
                self.learn_from_account(party, authority, account, from_sequence, *state)?;
            }
            (Asked::Account { .. }, Reply::Refused(Refusal::UnknownAccount)) => {}
            (asked, reply) if honest => {
                return Err(self.violation(format!(
                    "honest authority {authority} answered {party:?}'s {asked:?} with {reply:?}"
                )));
            }
            _ => self.report.false_answers_ignored += 1,
        }
        Ok(())
    }

    /// Sends an authority the sender's certificates it lacks, in order; those this party does
    /// not hold it first reads from the authorities (§4.4).
    fn bring_up_to_date(&mut self, party: Party, authority: AuthorityIndex, sender: AccountKey, next: u64, got: u64) {
        for sequence in next..got {
            if self.certificate_of(party, &sender, sequence).is_none() {
                self.read_account(party, sender, sequence);
                return;
            }
            self.push(party, authority, sender, sequence);
        }
    }

    /// Asks every authority for `account`'s certificates from `from_sequence` on (rate-limited).
    fn read_account(&mut self, party: Party, account: AccountKey, from_sequence: u64) {
        for authority in 0..AUTHORITIES as AuthorityIndex {
            let key = (party, authority, account, from_sequence);
            if self
                .read
                .get(&key)
                .is_some_and(|&at| at + self.options.retry_ms > self.now_ms)
            {
                continue;
            }
            self.read.insert(key, self.now_ms);
            let asked = Asked::Account { account, from_sequence };
            self.request(party, authority, &account, asked);
        }
    }

    /// Learns the certificates in an account state, each checked (an authority's answer is
    /// trusted for nothing a certificate does not prove).
    fn learn_from_account(
        &mut self,
        party: Party,
        authority: AuthorityIndex,
        account: AccountKey,
        from_sequence: u64,
        state: AccountState,
    ) -> Result<(), Violation> {
        let honest = !self.is_byzantine(authority);
        if party == Party::Auditor {
            self.auditor
                .next_sequences
                .insert((authority, account), state.next_sequence);
        }
        for (offset, certificate) in state.confirmed.into_iter().enumerate() {
            let key = (account, from_sequence + offset as u64);
            let order = &certificate.order.order;
            let verdict = if (order.sender, order.sequence) != key {
                Err("a certificate for another account or sequence number".to_string())
            } else if self
                .directory
                .get(&key)
                .is_some_and(|known| known.order == certificate.order)
            {
                continue;
            } else {
                certificate.check(&self.committee).map_err(|e| e.to_string())
            };
            match verdict {
                Ok(()) => self.learn_certificate(certificate)?,
                Err(error) if honest => {
                    return Err(self.violation(format!("honest authority {authority}'s account state: {error}")));
                }
                Err(_) => self.report.false_answers_ignored += 1,
            }
        }
        Ok(())
    }

    fn wake_bridge(&mut self) {
        self.bridge.wake_at_ms = Some(self.now_ms + self.options.retry_ms);
        for index in 0..self.bridge.fundings.len() {
            let account = self.bridge.fundings[index].account;
            for authority in 0..AUTHORITIES as AuthorityIndex {
                if !self.bridge.funded[index].contains(&authority) {
                    self.request(Party::Bridge, authority, &account, Asked::Fund(index));
                }
            }
        }
    }

    pub(super) fn bridge_receives(
        &mut self,
        authority: AuthorityIndex,
        asked: Asked,
        reply: Reply,
    ) -> Result<(), Violation> {
        match (asked, reply) {
            (Asked::Fund(index), Reply::Funded { id }) if id == self.bridge.fundings[index].id => {
                self.bridge.funded[index].insert(authority);
            }
            (asked, reply) if !self.is_byzantine(authority) => {
                return Err(self.violation(format!(
                    "honest authority {authority} answered the bridge's {asked:?} with {reply:?}"
                )));
            }
            _ => self.report.false_answers_ignored += 1,
        }
        Ok(())
    }

    /// Reads every account from where the directory ends, everywhere, and pushes each
    /// authority the next certificates it was last seen to lack.
    fn wake_auditor(&mut self) {
        self.auditor.wake_at_ms = Some(self.now_ms + 2 * self.options.retry_ms);
        let accounts: Vec<AccountKey> = self.owners.keys().copied().collect();
        for account in accounts {
            let known = (0..)
                .take_while(|&s| self.directory.contains_key(&(account, s)))
                .count() as u64;
            for authority in 0..AUTHORITIES as AuthorityIndex {
                let asked = Asked::Account {
                    account,
                    from_sequence: known,
                };
                self.request(Party::Auditor, authority, &account, asked);
                if let Some(&next) = self.auditor.next_sequences.get(&(authority, account)) {
                    for sequence in next..known.min(next + 4) {
                        self.push(Party::Auditor, authority, account, sequence);
                    }
                }
            }
        }
    }
}
