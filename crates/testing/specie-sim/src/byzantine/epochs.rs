//! A committee epoch change in the middle of the run (docs/byzantine-mode.md, "Committee
//! epochs"): at a time the seed picks, an operator endorses epoch 2, in which one honest seat's
//! key is replaced, with the keys of every honest seat (a quorum), publishes it through the core
//! (the Primary's sentinel rules take the epoch transaction, its ledger the marker, and a
//! Byzantine authority's forged record is refused), and hands the record to every
//! honest shard over a reliable operator's channel (again after a crash, until each applied it).
//! Once every shard of the replaced seat runs in epoch 2 with nothing waiting to be durable, its
//! state is handed over: each shard is replaced by the successor's, built with
//! `AuthorityShard::take_over` from the snapshot, and the old key is gone.
//!
//! Payers learn of the epoch from what authorities answer (a vote in the name of a committee
//! they do not know, a replaced authority's `NotSeated`), ask that authority for the records,
//! check them against the epoch they know (a Byzantine authority's forged records are refused),
//! and start their payment again under the new committee with the same orders. Answers that only
//! say an authority and a party are in different epochs are waited out.
//!
//! Checked besides everything the world checks: honest authorities' votes and round changes are
//! valid in the name of the committee they name; certificates of either epoch are final under
//! their own committee; the successor's hand-over checks; payments resume under the new epoch
//! within `epoch_stall_ms_max` of the record (the first certificate of epoch 2).

use specie_authority::{AuthorityConfig, AuthorityShard, Input, Refusal, Reply};
use specie_fastpay::{AuthorityIndex, CertificateError, Committee, CommitteeChain, CommitteeRecord, SigningKey};
use specie_host::SimHost;
use specie_role::Durable;

use super::shard::{Shard, ShardRole};
use super::{Asked, Party, World, AUTHORITIES};
use crate::world::Violation;

/// Why the core does not keep an epoch's record.
#[derive(Debug, thiserror::Error)]
enum CoreRefusal {
    #[error("its sentinel refuses it: {0}")]
    Sentinel(specie_sentinel::ValidationError),
    #[error("the ledger holds a successor of that committee")]
    MarkerExists,
}

/// The epoch change a seed makes, if any.
#[derive(Clone, Debug)]
pub struct EpochChange {
    /// When the operator publishes epoch 2's record.
    pub at_ms: u64,
    /// The honest seat whose key epoch 2 replaces.
    pub seat: AuthorityIndex,
}

/// Where the change stands.
#[derive(Default)]
pub(super) struct EpochProgress {
    pub record: Option<CommitteeRecord>,
    /// When the operator last handed the record to each honest shard still in epoch 1.
    pub offered_ms: std::collections::BTreeMap<(AuthorityIndex, u32), u64>,
    pub handed_over: bool,
    /// When a payer last asked an authority for records.
    pub asked_ms: std::collections::BTreeMap<(Party, AuthorityIndex), u64>,
}

impl<R: ShardRole> World<R> {
    /// The committee of the current epoch (the newest the world published).
    pub(super) fn committee(&self) -> &Committee {
        self.chain.current()
    }

    /// The committee of any published epoch, by id.
    pub(super) fn committee_named(&self, id: &[u8; 32]) -> Option<&Committee> {
        self.chain.committee(id)
    }

    /// A final certificate of any epoch, checked against its own committee.
    pub(super) fn check_final(&self, certificate: &specie_fastpay::Certificate) -> Result<(), CertificateError> {
        let committee = self.committee_named(&certificate.committee_id);
        committee
            .ok_or(CertificateError::WrongCommittee)
            .and_then(|committee| certificate.check(committee))
    }

    /// The epochs `party` knows of.
    fn view_chain(&self, party: Party) -> CommitteeChain {
        self.views
            .get(&party)
            .cloned()
            .unwrap_or_else(|| CommitteeChain::new(self.chain.first().clone()))
    }

    /// Whether `party` knows the committee of this id (of any epoch it learned).
    pub(super) fn knows_committee(&self, party: Party, id: &[u8; 32]) -> bool {
        match self.views.get(&party) {
            Some(chain) => chain.committee(id).is_some(),
            None => self.chain.first().id() == *id,
        }
    }

    /// The committee whose votes `party` counts now.
    pub(super) fn view(&self, party: Party) -> std::sync::Arc<Committee> {
        match self.views.get(&party) {
            Some(chain) => std::sync::Arc::new(chain.current().clone()),
            None => std::sync::Arc::new(self.chain.first().clone()),
        }
    }

    /// The committees of the epochs before the one `party` pays in.
    pub(super) fn earlier_epochs(&self, party: Party) -> Vec<Committee> {
        let chain = self.view_chain(party);
        let mut earlier: Vec<Committee> = chain.committees().cloned().collect();
        earlier.pop();
        earlier
    }

    /// The epoch an honest authority's shards are in, if they all agree.
    fn authority_epoch(&self, authority: AuthorityIndex) -> Option<u64> {
        let shards = self.authorities[usize::from(authority)].as_ref()?;
        let epochs: std::collections::BTreeSet<u64> =
            shards.iter().map(|s| s.role().shard().committee().epoch()).collect();
        (epochs.len() == 1).then(|| *epochs.first().expect("one"))
    }

    /// The operator's part, each step: publish the record when due, hand it to every honest
    /// shard still in epoch 1, and hand the replaced seat over once its shards are in epoch 2.
    pub(super) fn advance_epoch(&mut self) -> Result<(), Violation> {
        let Some(change) = self.options.epoch_change.clone() else {
            return Ok(());
        };
        if self.now_ms < change.at_ms {
            return Ok(());
        }
        if self.epoch.record.is_none() {
            self.publish_record(&change)?;
        }
        let record = self.epoch.record.clone().expect("published");
        let next_epoch = record.next.epoch();
        for authority in 0..AUTHORITIES as AuthorityIndex {
            for shard in 0..self.options.shards {
                let offered = self.epoch.offered_ms.get(&(authority, shard)).copied();
                let due = offered.is_none_or(|at| at + self.options.retry_ms <= self.now_ms);
                let Some(host) = self.host(authority, shard) else {
                    continue;
                };
                if !due || !host.up() || host.role().shard().committee().epoch() >= next_epoch {
                    continue;
                }
                self.epoch.offered_ms.insert((authority, shard), self.now_ms);
                let ticket = self.fresh_ticket(Party::Operator, Asked::EnterEpoch);
                let input = Input::EnterEpoch {
                    ticket,
                    record: Box::new(record.clone()),
                };
                self.honest_shard_handles(authority, shard, input)?;
            }
        }
        match self.epoch.handed_over {
            true => Ok(()),
            false => self.hand_over_seat(&change),
        }
    }

    /// Endorses epoch 2 with every honest seat's key and publishes it through the core before
    /// any authority enters it: the Primary's sentinel rules take the epoch transaction and its
    /// ledger keeps the marker of the committee it follows. A Byzantine authority publishes its
    /// forged record first; the core must refuse it, and take the honest one.
    fn publish_record(&mut self, change: &EpochChange) -> Result<(), Violation> {
        let next_key = specie_fastpay::deterministic_key("sim-authority-next", self.options.seed);
        let first = self.chain.current().clone();
        let mut members = first.members().to_vec();
        members[usize::from(change.seat)] = next_key.verifying_key().to_bytes();
        let mut record = CommitteeRecord::propose(&first, members).expect("distinct deterministic keys");
        for seat in 0..AUTHORITIES as AuthorityIndex {
            if !self.is_byzantine(seat) {
                record.endorse(seat, &self.authority_keys[usize::from(seat)]);
            }
        }
        if self.adversary.is_some() && self.keep_in_core(self.forged_record()).is_ok() {
            return Err(self.violation("the core kept a record endorsed by the Byzantine authority alone"));
        }
        if let Err(refusal) = self.keep_in_core(record.clone()) {
            return Err(self.violation(format!("the core refused epoch 2's record: {refusal}")));
        }
        self.chain
            .extend(record.clone())
            .expect("endorsed by every honest seat, a quorum");
        if self.primary.epoch() != Some(self.chain.current().epoch()) {
            return Err(self.violation("the core's sentinel did not learn the epoch it kept"));
        }
        self.next_key = Some(next_key);
        self.epoch.record = Some(record);
        self.epoch_published_ms = Some(self.now_ms);
        self.report.epoch_changes += 1;
        self.record("epoch-published", &[self.committee().epoch(), u64::from(change.seat)]);
        Ok(())
    }

    /// The core's side of publishing `record`: its sentinel's verdict on the epoch transaction,
    /// then the shards', which refuse a second successor of one committee (its marker exists).
    fn keep_in_core(&mut self, record: CommitteeRecord) -> Result<(), CoreRefusal> {
        let tx = specie_transaction::SpecieTransaction::from(specie_fastpay_primary::FastpayEpoch { record });
        let rules = specie_sentinel::TrustedKeys::default().with_capability(std::sync::Arc::new(self.primary.clone()));
        let compact = specie_sentinel::validate_and_compact(&tx, &rules).map_err(CoreRefusal::Sentinel)?;
        if !compact.spent.is_empty() || compact.created.iter().any(|id| self.primary_markers.contains(id)) {
            return Err(CoreRefusal::MarkerExists);
        }
        self.primary_markers.extend(compact.created);
        Ok(())
    }

    /// Replaces the seat's shards by the successor's, built from their snapshots, once every
    /// one of them runs in epoch 2 with nothing waiting to be durable.
    fn hand_over_seat(&mut self, change: &EpochChange) -> Result<(), Violation> {
        let seat = change.seat;
        let shards = self.authorities[usize::from(seat)].as_ref().expect("an honest seat");
        let ready = shards
            .iter()
            .all(|s| s.up() && s.pending() == 0 && s.role().shard().committee() == self.chain.current());
        if !ready {
            return Ok(());
        }
        let key: SigningKey = self.next_key.clone().expect("published");
        let mut successors = Vec::new();
        for (index, shard) in shards.iter().enumerate() {
            let leaver = shard.role().shard();
            if leaver.seated() {
                return Err(self.violation(format!("seat {seat}'s old key still votes in epoch 2")));
            }
            let config: AuthorityConfig = leaver.config().clone();
            let successor = match AuthorityShard::take_over(config.clone(), key.clone(), &leaver.snapshot()) {
                Ok(successor) => successor.snapshot(),
                Err(error) => {
                    return Err(self.violation(format!("seat {seat} shard {index}: the hand-over is refused: {error}")))
                }
            };
            // The successor's first state, as its data directory would hold it.
            let (build, key) = (self.build, key.clone());
            let fresh = move || {
                let mut role = build(config.clone(), key.clone());
                role.restore(&successor).expect("the successor's own snapshot");
                role
            };
            let host = SimHost::start(format!("authority {seat} shard {index} (epoch 2)"), fresh)
                .snapshot_every(self.options.snapshot_every_commands)
                .check_round_trip();
            successors.push(Shard::new(host));
        }
        self.authorities[usize::from(seat)] = Some(successors);
        self.authority_keys[usize::from(seat)] = key;
        self.epoch.handed_over = true;
        self.record("epoch-handed-over", &[u64::from(seat)]);
        Ok(())
    }

    /// Asks `authority` for the records of the epochs after the one `party` knows (at most
    /// once per retry interval per authority).
    pub(super) fn learn_epochs(&mut self, party: Party, authority: AuthorityIndex) {
        let last = self.epoch.asked_ms.get(&(party, authority)).copied();
        if last.is_some_and(|at| at + self.options.retry_ms > self.now_ms) {
            return;
        }
        self.epoch.asked_ms.insert((party, authority), self.now_ms);
        let after = self.view_chain(party).current().epoch();
        let account = match party {
            Party::Client(i) => self.clients[i].account,
            Party::ByzantineUser(i) => self.byzantine_users[i].account,
            _ => unreachable!("only payers learn epochs"),
        };
        self.request(party, authority, &account, Asked::Epochs { after });
    }

    /// Records a payer asked for: each must extend the epochs it knows; a newer epoch restarts
    /// its payment under the new committee with the same orders.
    pub(super) fn epochs_received(
        &mut self,
        party: Party,
        authority: AuthorityIndex,
        reply: Reply,
    ) -> Result<(), Violation> {
        let honest = !self.is_byzantine(authority);
        let Reply::Epochs(records) = reply else {
            return match honest {
                true => Err(self.violation(format!(
                    "honest authority {authority} answered a records read with {reply:?}"
                ))),
                false => Ok(()),
            };
        };
        let mut chain = self.view_chain(party);
        let before = chain.current().epoch();
        for record in records {
            if let Err(error) = chain.extend(record) {
                if honest {
                    return Err(self.violation(format!("honest authority {authority}'s committee record: {error}")));
                }
                self.report.forged_records_refused += 1;
                break;
            }
        }
        if chain.current().epoch() == before {
            return Ok(());
        }
        self.views.insert(party, chain);
        self.report.epochs_learned += 1;
        self.record("epoch-learned", &[u64::from(authority)]);
        if let Party::ByzantineUser(i) = party {
            self.byzantine_users[i].forget_votes();
        }
        match self.paying(party).take() {
            Some(paying) => self.start_paying(party, paying.payment.orders().to_vec()),
            None => Ok(()),
        }
    }

    /// Whether an honest authority's refusal only says that it and `party` are in different
    /// epochs (a shard that has not applied the record yet, a replaced seat not yet handed
    /// over, a payer that has not learned the epoch): waited out, and the payer learns.
    pub(super) fn epoch_lag(&mut self, party: Party, authority: AuthorityIndex, reply: &Reply) -> bool {
        let Reply::Refused(refusal) = reply else {
            return false;
        };
        let about_epochs = matches!(
            refusal,
            Refusal::NotSeated { .. }
                | Refusal::Certificate(CertificateError::WrongCommittee)
                | Refusal::RoundRequest(_)
                | Refusal::Justification(_)
        );
        if !about_epochs || self.is_byzantine(authority) {
            return false;
        }
        let party_epoch = match party {
            Party::Client(_) | Party::ByzantineUser(_) => self.view_chain(party).current().epoch(),
            _ => self.committee().epoch(),
        };
        let authority_epoch = self.authority_epoch(authority);
        // A replaced holder's refusal, before the hand-over or still on its way after it.
        let replaced = matches!(refusal, Refusal::NotSeated { .. });
        if authority_epoch == Some(party_epoch) && !replaced {
            return false;
        }
        if party_epoch < self.committee().epoch() && matches!(party, Party::Client(_) | Party::ByzantineUser(_)) {
            self.learn_epochs(party, authority);
        }
        self.report.epoch_lag_answers += 1;
        if self.print_trace {
            eprintln!("TRACE epoch lag: {party:?} (epoch {party_epoch}) and authority {authority} ({authority_epoch:?}): {refusal}");
        }
        true
    }

    /// The first final certificate of epoch 2 ends the stall: it must come within the bound.
    pub(super) fn observe_epoch_certificate(
        &mut self,
        certificate: &specie_fastpay::Certificate,
    ) -> Result<(), Violation> {
        let (Some(published), None) = (self.epoch_published_ms, self.report.epoch_stall_ms) else {
            return Ok(());
        };
        if certificate.committee_id != self.committee().id() {
            return Ok(());
        }
        let stall_ms = self.now_ms - published;
        self.report.epoch_stall_ms = Some(stall_ms);
        if stall_ms > self.options.epoch_stall_ms_max {
            return Err(self.violation(format!(
                "the first payment of epoch 2 was certified {stall_ms} ms after the record, above the bound of {} ms",
                self.options.epoch_stall_ms_max
            )));
        }
        Ok(())
    }

    /// The change is over once the seat is handed over and every honest shard is in the new
    /// epoch (or there is none).
    pub(super) fn epoch_settled(&self) -> bool {
        let current = self.committee().epoch();
        let everywhere = (0..AUTHORITIES as AuthorityIndex)
            .all(|a| self.authorities[usize::from(a)].is_none() || self.authority_epoch(a) == Some(current));
        self.options.epoch_change.is_none() || (self.epoch.handed_over && everywhere)
    }
}
