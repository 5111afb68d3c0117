//! The correct parties: users paying each other and the core (FastPay §4.1, §4.3, §4.5), the
//! core bridge funding accounts at every authority, and an auditor reading accounts (§4.4).

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use specie_authority::{AccountState, Funding, Refusal, Reply};
use specie_fastpay::{AccountKey, AuthorityIndex, Certificate, CoreAddress, Recipient, SigningKey, TransferOrder};

use super::paying::Paying;
use super::{Asked, Party, ShardRole, World, AUTHORITIES};
use crate::world::Violation;

/// Value each account is funded with at the start, and a top-up.
const FUNDING: u64 = 1_000;
const TOP_UP: u64 = 200;
/// The largest payment a correct user makes.
const PAYMENT_MAX: u64 = 300;

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
    /// The payment of its next order, until it is final.
    pub paying: Option<Paying>,
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
            paying: None,
            received: Vec::new(),
            wake_at_ms: 0,
        }
    }

    /// Every payment it means to make has a certificate.
    pub fn is_certified(&self) -> bool {
        self.payments_left == 0 && self.paying.is_none()
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
        // Once faults stop, a Byzantine user still recovers its account.
        let byzantine_users = self.byzantine_users.iter();
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
            .chain(self.payment_timeouts())
    }

    /// Lets every party whose time has come act.
    pub(super) fn wake_parties(&mut self) -> Result<(), Violation> {
        let now_ms = self.now_ms;
        for i in 0..self.clients.len() {
            self.payment_timeout(Party::Client(i))?;
            if self.clients[i].wake_at_ms <= now_ms {
                self.wake_client(i)?;
            }
        }
        for i in 0..self.byzantine_users.len() {
            self.payment_timeout(Party::ByzantineUser(i))?;
            if self.byzantine_users[i].wake_at_ms <= now_ms {
                self.wake_byzantine_user(i)?;
            }
        }
        let adversary_due = self
            .adversary
            .as_ref()
            .and_then(|a| a.wake_at_ms)
            .is_some_and(|at| at <= now_ms);
        if self.faults_on && adversary_due {
            self.wake_adversary();
        }
        if self.bridge.wake_at_ms.is_some_and(|at| at <= now_ms) {
            self.wake_bridge();
        }
        if self.auditor.wake_at_ms.is_some_and(|at| at <= now_ms) {
            self.wake_auditor();
        }
        Ok(())
    }

    /// Asks again for what is missing (its payment's answers, confirmations), then starts the
    /// next payment.
    fn wake_client(&mut self, i: usize) -> Result<(), Violation> {
        let party = Party::Client(i);
        self.clients[i].wake_at_ms = self.now_ms + self.options.retry_ms + self.rng.gen_range(0..50);
        if self.faults_on && self.rng.gen_range(0..100) < 2 {
            self.fund(self.clients[i].account, TOP_UP);
        }
        self.retransmit_payment(party);
        self.resend_confirmations(party);
        let pays = !self.faults_on || self.rng.gen_range(0..1000) < self.options.pay_per_mille;
        if self.clients[i].paying.is_none() && self.clients[i].payments_left > 0 && pays {
            self.start_payment(i)?;
        }
        Ok(())
    }

    /// A user's certificates, not yet confirmed by a quorum, and who has confirmed each.
    pub(super) fn confirming(&mut self, party: Party) -> (AccountKey, &mut BTreeMap<u64, BTreeSet<AuthorityIndex>>) {
        match party {
            Party::Client(i) => (self.clients[i].account, &mut self.clients[i].confirming),
            Party::ByzantineUser(i) => (self.byzantine_users[i].account, &mut self.byzantine_users[i].confirming),
            _ => unreachable!("only users confirm their own certificates"),
        }
    }

    /// Sends the user's certificates again to the authorities that have not confirmed them.
    pub(super) fn resend_confirmations(&mut self, party: Party) {
        let (account, confirming) = self.confirming(party);
        let unconfirmed: Vec<(u64, AuthorityIndex)> = confirming
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
    }

    /// A user's certificate is final: it must be confirmed by a quorum; every authority is asked.
    pub(super) fn start_confirming(&mut self, party: Party, sequence: u64) {
        let (account, confirming) = self.confirming(party);
        confirming.insert(sequence, BTreeSet::new());
        for authority in 0..AUTHORITIES as AuthorityIndex {
            let asked = Asked::Confirm {
                sender: account,
                sequence,
            };
            self.request(party, authority, &account, asked);
        }
    }

    /// An authority confirmed the user's certificate for `sequence`.
    pub(super) fn confirmed_by(&mut self, party: Party, authority: AuthorityIndex, sequence: u64) {
        let quorum = self.committee().quorum();
        let (_, confirming) = self.confirming(party);
        let Some(done) = confirming.get_mut(&sequence) else {
            return;
        };
        done.insert(authority);
        if done.len() < quorum {
            return;
        }
        confirming.remove(&sequence);
        // A split slot of a Byzantine user is settled: it has its account back.
        let contested =
            matches!(party, Party::ByzantineUser(i) if self.byzantine_users[i].contested.contains(&sequence));
        if let (true, Some(healed_at_ms)) = (contested, self.healed_at_ms) {
            self.report.recovered_after_heal += 1;
            let after_ms = self.now_ms - healed_at_ms;
            self.report.recovery_after_heal_ms_max = self.report.recovery_after_heal_ms_max.max(after_ms);
        }
    }

    /// Signs the next order (to another account, or a redeem to the core) within what it may
    /// spend, and pays it.
    fn start_payment(&mut self, i: usize) -> Result<(), Violation> {
        let spendable = self.clients[i].spendable;
        if spendable < 1 {
            return Ok(());
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
        self.record("order", &[i as u64, sequence, amount]);
        self.start_paying(Party::Client(i), vec![order])
    }

    pub(super) fn client_receives(
        &mut self,
        i: usize,
        authority: AuthorityIndex,
        asked: Asked,
        reply: Reply,
    ) -> Result<(), Violation> {
        let party = Party::Client(i);
        match (asked, reply) {
            (Asked::Payment { payment, attempt, call }, reply) => {
                self.payment_answer(party, authority, (payment, attempt, call), reply)
            }
            (Asked::Confirm { sender, sequence }, Reply::Confirmed { .. }) if sender == self.clients[i].account => {
                self.confirmed_by(party, authority, sequence);
                Ok(())
            }
            (asked, reply) => self.reader_receives(party, authority, asked, reply),
        }
    }

    /// The client's payment is final: the certificate is handed to the payee and sent to every
    /// authority.
    pub(super) fn client_certifies(&mut self, i: usize, certificate: Certificate) -> Result<(), Violation> {
        let order = certificate.order.order.clone();
        let client = &mut self.clients[i];
        client.certificates.push(certificate.clone());
        self.record("certified", &[i as u64, order.sequence]);
        self.learn_certificate(certificate)?;
        if let Recipient::Account(payee) = order.recipient {
            self.hand_over(payee, order.sender, order.sequence, order.amount);
        }
        self.start_confirming(Party::Client(i), order.sequence);
        Ok(())
    }

    /// The payee, if a correct user, now holds the certificate and may spend its amount.
    pub(super) fn hand_over(&mut self, payee: AccountKey, payer: AccountKey, sequence: u64, amount: u64) {
        if let Some(&Party::Client(j)) = self.owners.get(&payee) {
            self.clients[j].received.push((payer, sequence));
            self.clients[j].spendable += i128::from(amount);
        }
    }

    /// §5: an authority short of balance gets the certificates that paid this user.
    pub(super) fn push_received(&mut self, party: Party, authority: AuthorityIndex) {
        let Party::Client(i) = party else {
            return;
        };
        for (payer, sequence) in self.clients[i].received.clone() {
            self.push(party, authority, payer, sequence);
        }
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
    pub(super) fn bring_up_to_date(
        &mut self,
        party: Party,
        authority: AuthorityIndex,
        sender: AccountKey,
        next: u64,
        got: u64,
    ) {
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
                self.check_final(&certificate).map_err(|e| e.to_string())
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
