//! A Raft replica as its process sees it: term, leader, indexes, its followers' lag, read at
//! scrape time from the replica itself ([`watch`]); leader changes counted as they are seen
//! ([`leader_changed`]). A process hosts one replica, so the families carry no group label: the
//! scrape target's labels (`group`, `replica`, written by `specie cluster up`) name it.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::{add_collector, latency_family, recording, LatencyFamily};

pub(crate) struct Families {
    leader_changes: Counter,
    snapshot: LatencyFamily<1>,
}

impl Families {
    pub(crate) fn register(registry: &mut Registry) -> Families {
        let families = Families {
            leader_changes: Counter::default(),
            snapshot: latency_family(),
        };
        registry.register(
            "specie_raft_leader_changes",
            "Times this replica saw its group's leader change (to another replica or to none)",
            families.leader_changes.clone(),
        );
        registry.register(
            "specie_raft_snapshot_duration_seconds",
            "Time one snapshot step took: encode (the state to bytes, on the apply path), write \
             (the bytes to disk) or install (a snapshot from the leader, restored and written)",
            families.snapshot.clone(),
        );
        families
    }
}

/// The snapshot steps timed, [`snapshot_step`]'s labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotStep {
    Encode,
    Write,
    Install,
}

/// One snapshot step took `took`.
pub fn snapshot_step(step: SnapshotStep, took: std::time::Duration) {
    let Some(all) = recording() else { return };
    let step = match step {
        SnapshotStep::Encode => "encode",
        SnapshotStep::Write => "write",
        SnapshotStep::Install => "install",
    };
    all.raft
        .snapshot
        .get_or_create(&[("step", step.to_string())])
        .observe(took.as_secs_f64());
}

/// This replica saw its group's leader change.
pub fn leader_changed() {
    let Some(all) = recording() else { return };
    let families = &all.raft;
    families.leader_changes.inc();
}

/// A replica at one instant. Indexes are Raft log indexes; `None`: nothing yet (exported as -1,
/// so every family is present from a replica's start).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaftView {
    pub term: u64,
    pub is_leader: bool,
    /// The leader's replica id, if this replica knows one.
    pub leader: Option<u64>,
    pub commit_index: Option<u64>,
    pub applied_index: Option<u64>,
    pub last_log_index: Option<u64>,
    pub snapshot_index: Option<u64>,
    /// Batches the replica's log appended, and the syncs they took, since it started.
    pub log_appends: u64,
    pub log_syncs: u64,
    /// On the leader: for each follower, the entries it lacks of the leader's log.
    pub replication_lag: Vec<(u64, u64)>,
    /// The group's voters and learners as this replica knows them, and whether a membership
    /// change is under way (docs/operator-guide.md, "Changing a group's replicas").
    pub voters: u64,
    pub learners: u64,
    pub membership_changing: bool,
}

/// From now on every scrape reads `view` for the replica's families.
pub fn watch(view: impl Fn() -> RaftView + Send + Sync + 'static) {
    add_collector(Box::new(View(Box::new(view))));
}

struct View(Box<dyn Fn() -> RaftView + Send + Sync>);

impl fmt::Debug for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("raft::View")
    }
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: Option<u64>) -> fmt::Result {
    let metric = ConstGauge::new(value.map_or(-1, |value| value as i64));
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn counter(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> fmt::Result {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Collector for View {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let view = (self.0)();
        let e = &mut encoder;
        gauge(
            e,
            "specie_raft_term",
            "The replica's current Raft term",
            Some(view.term),
        )?;
        gauge(
            e,
            "specie_raft_is_leader",
            "1 if this replica leads its group",
            Some(view.is_leader.into()),
        )?;
        gauge(
            e,
            "specie_raft_has_leader",
            "1 if this replica knows a leader of its group",
            Some(view.leader.is_some().into()),
        )?;
        gauge(
            e,
            "specie_raft_leader_id",
            "The replica id of the group's leader",
            view.leader,
        )?;
        gauge(
            e,
            "specie_raft_commit_index",
            "Newest entry known committed",
            view.commit_index,
        )?;
        gauge(
            e,
            "specie_raft_applied_index",
            "Newest entry applied to the role",
            view.applied_index,
        )?;
        gauge(
            e,
            "specie_raft_last_log_index",
            "Newest entry in the replica's log",
            view.last_log_index,
        )?;
        gauge(
            e,
            "specie_raft_snapshot_index",
            "Newest entry the replica's snapshot covers",
            view.snapshot_index,
        )?;
        gauge(
            e,
            "specie_raft_voters",
            "Voters of the group, as this replica knows its membership",
            Some(view.voters),
        )?;
        gauge(
            e,
            "specie_raft_learners",
            "Learners of the group (replicas being added, not voting yet)",
            Some(view.learners),
        )?;
        gauge(
            e,
            "specie_raft_membership_changing",
            "1 while a membership change is under way (a joint configuration, or not committed)",
            Some(view.membership_changing.into()),
        )?;
        counter(
            e,
            "specie_raft_log_appends",
            "Batches of entries the replica's log appended",
            view.log_appends,
        )?;
        counter(
            e,
            "specie_raft_log_syncs",
            "Syncs those appends took (group commit: at most one each)",
            view.log_syncs,
        )?;
        if view.is_leader {
            let help = "On the leader: entries a follower lacks of the leader's log";
            let kind = ConstGauge::new(0i64).metric_type();
            let mut family = encoder.encode_descriptor("specie_raft_replication_lag_entries", help, None, kind)?;
            for (follower, lag) in &view.replication_lag {
                let labels = [("follower", follower.to_string())];
                ConstGauge::new(*lag as i64).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_replica_is_read_at_every_scrape() {
        let term = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(3));
        let read = term.clone();
        watch(move || RaftView {
            term: read.load(std::sync::atomic::Ordering::Relaxed),
            is_leader: true,
            leader: Some(2),
            commit_index: Some(41),
            applied_index: Some(40),
            last_log_index: Some(41),
            replication_lag: vec![(1, 0), (3, 7)],
            voters: 3,
            learners: 1,
            ..RaftView::default()
        });
        let text = crate::exposition();
        assert!(text.contains("specie_raft_term 3\n"), "{text}");
        assert!(text.contains("specie_raft_leader_id 2\n"), "{text}");
        assert!(text.contains("specie_raft_voters 3\n"), "{text}");
        assert!(text.contains("specie_raft_learners 1\n"), "{text}");
        assert!(text.contains("specie_raft_membership_changing 0\n"), "{text}");
        assert!(
            text.contains("specie_raft_replication_lag_entries{follower=\"3\"} 7\n"),
            "{text}"
        );
        term.store(4, std::sync::atomic::Ordering::Relaxed);
        assert!(crate::exposition().contains("specie_raft_term 4\n"));
    }
}
