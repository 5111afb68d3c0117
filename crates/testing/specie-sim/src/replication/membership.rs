//! Membership changes in the replication world, as `specie cluster add-replica`,
//! `remove-replica` and `replace-replica` make them: a replica joins under a new id (its
//! directory prepared to join, started, added as a learner, promoted once caught up), a replica
//! leaves (the leader commits its removal, then it stops for good), and a replica whose
//! directory is lost is refused under its old id and replaced. One change at a time, each step
//! retried at whoever leads until it is taken, interleaved with every other fault.

use specie_raft::{Membership, MembershipError, NodeId, Origin, Start, StartError};

use super::World;
use crate::world::Violation;

/// A learner is promoted within this many entries of its leader's log.
pub(crate) const PROMOTE_LAG_ENTRIES_MAX: u64 = 8;
/// The most replicas the world lets a group grow to.
const GROUP_REPLICAS_MAX: usize = 5;

/// One step of a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Prepare the new replica's directory to join, and start it.
    Join(NodeId),
    AddLearner(NodeId),
    Promote(NodeId),
    Remove(NodeId),
}

impl Step {
    fn code(self) -> [u64; 2] {
        match self {
            Step::Join(id) => [1, id],
            Step::AddLearner(id) => [2, id],
            Step::Promote(id) => [3, id],
            Step::Remove(id) => [4, id],
        }
    }
}

/// What the leader answered to a step.
pub(super) type StepOutcome = (Step, Result<Membership, MembershipError>);

impl World {
    /// How a replica starts: from the directory prepared for it, or, with the planted bug, as
    /// a founder of the group as it is now whenever its directory holds nothing.
    pub(super) fn start_mode(&self) -> Start {
        if self.options.planted_wiped_rejoin {
            Start::Found(self.members.clone())
        } else {
            Start::Prepared
        }
    }

    /// Begins a change if none is under way: the replacement of a wiped replica first, else
    /// (by the dice) an addition, a removal or a replacement.
    pub(super) fn plan_change(&mut self) {
        if !self.plan.is_empty() {
            return;
        }
        if let Some(&wiped) = self.wiped.first() {
            self.plan_replacement(wiped);
            return;
        }
        let per_mille = self.options.faults.membership_per_mille;
        if self.rng.gen_range(0..1000) >= per_mille {
            return;
        }
        let members: Vec<NodeId> = self.members.iter().copied().collect();
        match self.rng.gen_range(0..3) {
            0 if members.len() < GROUP_REPLICAS_MAX => {
                let id = self.new_id();
                self.plan
                    .extend([Step::Join(id), Step::AddLearner(id), Step::Promote(id)]);
            }
            1 if members.len() > 3 => {
                let id = self.victim(&members);
                self.plan.push_back(Step::Remove(id));
            }
            _ if members.len() < GROUP_REPLICAS_MAX + 1 => {
                let id = self.victim(&members);
                self.plan_replacement(id);
            }
            _ => {}
        }
    }

    fn plan_replacement(&mut self, old: NodeId) {
        let new = self.new_id();
        self.plan.extend([
            Step::Join(new),
            Step::AddLearner(new),
            Step::Promote(new),
            Step::Remove(old),
        ]);
    }

    fn new_id(&mut self) -> NodeId {
        self.next_id += 1;
        self.next_id - 1
    }

    /// A replica loses its directory. It must be refused under its old id; with the planted
    /// bug it is left to restart, and found again as a founder.
    pub(super) async fn wipe(&mut self) -> Result<(), Violation> {
        let quorum = self.members.len() / 2 + 1;
        let per_mille = self.options.faults.wipe_per_mille;
        if !self.plan.is_empty() || !self.wiped.is_empty() || self.running.len() <= quorum {
            return Ok(());
        }
        if self.rng.gen_range(0..1000) >= per_mille {
            return Ok(());
        }
        // The follower furthest ahead: its votes and log are what a quorum relied on.
        let victim = (self.running.iter())
            .filter(|(_, replica)| !replica.is_leader())
            .max_by_key(|(&id, replica)| (replica.metrics().applied_index, id))
            .map(|(&id, _)| id);
        let Some(victim) = victim else {
            return Ok(());
        };
        self.crash(victim).await;
        let dir = self.dirs[&victim].clone();
        std::fs::remove_dir_all(&dir).map_err(|e| self.violation(format!("wiping {}: {e}", dir.display())))?;
        self.report.wiped += 1;
        self.record("wipe", &[victim]);
        if self.options.planted_wiped_rejoin {
            return Ok(());
        }
        match self.open(victim, Start::Prepared).await {
            Err(StartError::Wiped { .. }) => {
                self.wiped.insert(victim);
                Ok(())
            }
            Err(other) => Err(self.violation(format!("wiped replica {victim} refused for another reason: {other}"))),
            Ok(()) => Err(self.violation(format!("wiped replica {victim} started under its old id"))),
        }
    }

    /// Takes what the leader answered, and sends the next step to whoever leads now.
    pub(super) async fn advance_change(&mut self) -> Result<(), Violation> {
        while let Ok((step, answer)) = self.change_answers.try_recv() {
            self.change_in_flight = false;
            let [kind, id] = step.code();
            let Ok(membership) = answer else {
                self.record("change refused", &[kind, id]);
                continue;
            };
            self.record("changed", &[kind, id, membership.voters.len() as u64]);
            if self.plan.front() == Some(&step) {
                self.plan.pop_front();
            }
            match step {
                Step::Promote(_) => self.report.joined += 1,
                Step::Remove(id) => {
                    self.report.left += 1;
                    self.members.remove(&id);
                    self.wiped.remove(&id);
                    if self.running.contains_key(&id) {
                        self.crash(id).await;
                    }
                }
                Step::Join(_) | Step::AddLearner(_) => {}
            }
        }
        if self.change_in_flight {
            return Ok(());
        }
        let Some(&step) = self.plan.front() else {
            return Ok(());
        };
        if let Step::Join(id) = step {
            let dir = self.root.join(format!("replica-{id}"));
            specie_raft::prepare(&dir, id, &Origin::Joining, specie_log::SyncMode::None)
                .map_err(|e| self.violation(format!("preparing replica {id}: {e}")))?;
            self.dirs.insert(id, dir);
            self.members.insert(id);
            self.start(id).await?;
            self.plan.pop_front();
            return Ok(());
        }
        let Some(leader) = self.running.values().find(|r| r.is_leader()).cloned() else {
            return Ok(());
        };
        self.change_in_flight = true;
        let answers = self.change_answers_tx.clone();
        tokio::spawn(async move {
            let answer = match step {
                Step::AddLearner(id) => leader.add_learner(id).await,
                Step::Promote(id) => leader.promote(id, PROMOTE_LAG_ENTRIES_MAX).await,
                Step::Remove(id) => leader.remove(id).await,
                Step::Join(_) => unreachable!("a join is the world's own step"),
            };
            let _ = answers.send((step, answer));
        });
        Ok(())
    }

    /// Whether every change the world began is complete.
    pub(super) fn changes_done(&self) -> bool {
        self.plan.is_empty() && !self.change_in_flight
    }
}

use rand::Rng as _;
