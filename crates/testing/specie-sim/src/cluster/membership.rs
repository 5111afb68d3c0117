//! Membership changes in the cluster world: a shard group or an ordering group gains a replica
//! under a new id (prepared to join, added as a learner, promoted once caught up), loses one, or
//! has one replaced, one change at a time across the cluster as `specie cluster` makes them,
//! while transactions flow and every other fault goes on. The world's checks (every answer
//! honoured, the UHS and the ledger agreeing at rest) must hold through it.

use std::future::Future;
use std::pin::Pin;

use rand::Rng as _;
use specie_raft::{Membership, MembershipError, NodeId, Origin, Replica, ReplicatedStateMachine};

use super::{GroupIndex, SimShape, World};
use crate::replication::membership::{Step, PROMOTE_LAG_ENTRIES_MAX};
use crate::world::Violation;

/// The most replicas the world lets a group grow to.
const GROUP_REPLICAS_MAX: usize = 5;

/// What a group's leader answered to a step.
pub(super) type GroupStepOutcome = (GroupIndex, Step, Result<Membership, MembershipError>);

type StepFuture = Pin<Box<dyn Future<Output = Result<Membership, MembershipError>> + Send>>;

/// `step` taken to `replica` (a group's leader), as a future the world can spawn.
fn take_step<S: ReplicatedStateMachine>(replica: std::sync::Arc<Replica<S>>, step: Step) -> StepFuture {
    Box::pin(async move {
        match step {
            Step::AddLearner(id) => replica.add_learner(id).await,
            Step::Promote(id) => replica.promote(id, PROMOTE_LAG_ENTRIES_MAX).await,
            Step::Remove(id) => replica.remove(id).await,
            Step::Join(_) => unreachable!("a join is the world's own step"),
        }
    })
}

impl<R: SimShape> World<R> {
    /// Begins a change, by the dice, if none is under way.
    pub(super) fn plan_change(&mut self) {
        if !self.plan.is_empty() || self.rng.gen_range(0..1000) >= self.options.membership_per_mille {
            return;
        }
        let group = self.rng.gen_range(self.groups());
        let members: Vec<NodeId> = self.members[group].iter().copied().collect();
        let add = |world: &mut World<R>| {
            let id = world.next_id[group];
            world.next_id[group] += 1;
            world.plan.extend([
                (group, Step::Join(id)),
                (group, Step::AddLearner(id)),
                (group, Step::Promote(id)),
            ]);
        };
        match self.rng.gen_range(0..3) {
            0 if members.len() < GROUP_REPLICAS_MAX => add(self),
            1 if members.len() > 3 => {
                let id = self.victim(group, &members);
                self.plan.push_back((group, Step::Remove(id)));
            }
            _ if members.len() < GROUP_REPLICAS_MAX + 1 => {
                let old = self.victim(group, &members);
                add(self);
                self.plan.push_back((group, Step::Remove(old)));
            }
            _ => {}
        }
    }

    /// Takes what a leader answered, and sends the next step to whoever leads its group now.
    pub(super) async fn advance_change(&mut self) -> Result<(), Violation> {
        while let Ok((group, step, answer)) = self.change_answers.try_recv() {
            self.change_in_flight = false;
            let Ok(membership) = answer else {
                continue;
            };
            self.record("changed", &[group as u64, membership.voters.len() as u64]);
            if self.plan.front() == Some(&(group, step)) {
                self.plan.pop_front();
            }
            match step {
                Step::Promote(_) => self.report.joined += 1,
                Step::Remove(id) => {
                    self.report.left += 1;
                    self.members[group].remove(&id);
                    if self.running(group).contains(&id) {
                        self.crash(group, id).await;
                    }
                }
                Step::Join(_) | Step::AddLearner(_) => {}
            }
        }
        if self.change_in_flight {
            return Ok(());
        }
        let Some(&(group, step)) = self.plan.front() else {
            return Ok(());
        };
        if let Step::Join(id) = step {
            specie_raft::prepare(&self.dir(group, id), id, &Origin::Joining, specie_log::SyncMode::None)
                .map_err(|e| self.violation(format!("preparing group {group} replica {id}: {e}")))?;
            self.members[group].insert(id);
            self.start(group, id).await?;
            self.plan.pop_front();
            return Ok(());
        }
        let leading = match (self.ordering(group), self.leader(group)) {
            (_, None) => None,
            (Some(ordering), Some(leader)) => {
                let replica = self.orderers[ordering][&leader].replica.hosted.replica.clone();
                Some(take_step(replica, step))
            }
            (None, Some(leader)) => {
                let replica = self.shards.lock()[group][&leader].hosted.replica.clone();
                Some(take_step(replica, step))
            }
        };
        let Some(taken) = leading else {
            return Ok(());
        };
        self.change_in_flight = true;
        let answers = self.change_answers_tx.clone();
        tokio::spawn(async move {
            let _ = answers.send((group, step, taken.await));
        });
        Ok(())
    }

    /// Whether every change the world began is complete.
    pub(super) fn changes_done(&self) -> bool {
        self.plan.is_empty() && !self.change_in_flight
    }
}
