//! The one fault-injecting network of specie's tests and simulator: an in-process
//! [`RaftTransport`] between the replicas of a group, and the same seeded dice for any other
//! message (the simulator's coordinator → shard calls and client submissions, through
//! [`FaultNetwork::fate`]). Every message, and every reply, is dropped, duplicated and delayed
//! independently at the configured rates ([`LinkFaults`]); delays are uniform, so messages
//! overtake each other. Directed links can be cut and healed, a node isolated, and a node that
//! is not registered is down. Raft messages still go through their byte encoding, as over a
//! real network.
//!
//! Every random choice comes from one generator, seeded at construction and drawn under the
//! network's lock in the order messages are sent. On the simulator's seeded single-threaded
//! runtime with a paused clock, tasks send in a fixed order, so a seed replays exactly. On a
//! multi-threaded runtime (specie-raft's integration tests) the rates hold, but which message
//! meets which fault depends on scheduling.
//!
//! A network without delay faults delivers at once, without a timer, so tests on a real clock
//! run at full speed.
//!
//! A network can instead be given a [`LinkSpeed`]: then every directed link carries one message
//! at a time at a fixed rate, so a large message takes longer and later ones queue behind it,
//! and a request once sent is delivered and handled even if its caller stops waiting, as over
//! TCP. What each node was sent, and held at once, is counted ([`Carried`]).
//!
//! Test-only, and outside specie-raft: it implements specie-raft's public transport trait like
//! any other network (specie-cluster's TCP one does the same), so Raft's production API carries
//! no fault injection.

#![forbid(unsafe_code)]

mod group;
pub use group::RoleGroup;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use specie_raft::{NodeId, RaftTransport, RpcFuture, RpcHandler, TransportError};

/// Rates are in parts per thousand of messages.
const PER_MILLE: u32 = 1000;

/// The longest delay a network may be configured with: a minute, beyond every time-out of the
/// tests and the simulator (a longer one is a mistake, and would overflow nothing but sense).
pub const DELAY_MS_LIMIT: u64 = 60_000;

/// What the network does to each message (request or reply), independently of the others.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkFaults {
    /// Chance, in parts per thousand, that a message is lost.
    pub drop_per_mille: u32,
    /// Chance, in parts per thousand, that a message arrives a second time, up to
    /// `2 * delay_ms_max` after the first; the copy's answer goes nowhere.
    pub duplicate_per_mille: u32,
    /// Each message is delayed uniformly in `0..=delay_ms_max`, so messages overtake each other.
    /// With 0, messages are delivered at once.
    pub delay_ms_max: u64,
}

impl LinkFaults {
    /// A rate above a thousand per mille or a delay above [`DELAY_MS_LIMIT`] is a test's mistake.
    fn assert_valid(&self) {
        assert!(
            self.drop_per_mille <= PER_MILLE && self.duplicate_per_mille <= PER_MILLE,
            "fault rates are at most {PER_MILLE} per mille: {self:?}"
        );
        assert!(
            self.delay_ms_max <= DELAY_MS_LIMIT,
            "delays are at most {DELAY_MS_LIMIT} ms: {self:?}"
        );
    }
}

/// A link that takes time in proportion to what it carries. The dice do not apply on such a
/// network; cut links and down nodes still do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkSpeed {
    /// Time in flight after a message's last byte was put on the link.
    pub latency_ms: u64,
    /// What one directed link puts on the wire per millisecond; messages wait their turn.
    pub bytes_per_ms: u64,
}

impl LinkSpeed {
    /// How long `bytes` occupy the link.
    fn transmission(&self, bytes: usize) -> Duration {
        Duration::from_nanos((bytes as u64).saturating_mul(1_000_000) / self.bytes_per_ms)
    }
}

/// Raft requests sent to one node over a network with a [`LinkSpeed`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    /// Bytes of every request sent, answered or not.
    pub requests_bytes: u64,
    /// Bytes of requests sent whose handling has not finished (on the link, or being handled).
    pub in_flight_bytes: u64,
    /// The most `in_flight_bytes` has been.
    pub in_flight_bytes_peak: u64,
}

/// What the dice say about one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fate {
    /// How long the message is in transit.
    pub delay: Duration,
    pub dropped: bool,
    /// If the message is duplicated, how long after its arrival the copy arrives.
    pub duplicate_after: Option<Duration>,
    /// Whether the network delays messages at all: if not, no timer is used.
    timed: bool,
}

impl Fate {
    /// Waits out the message's time in transit.
    pub async fn in_transit(&self) {
        elapse(self.timed, self.delay).await;
    }
}

/// Sleeps for `duration` on a network with delays. Without delays it returns at once: even a
/// zero-length tokio sleep waits for the timer's next millisecond tick, which would slow every
/// message of a test on a real clock.
async fn elapse(timed: bool, duration: Duration) {
    if timed {
        tokio::time::sleep(duration).await;
    }
}

/// How many messages the dice dropped and duplicated, to check that the faults happened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    pub dropped: u64,
    pub duplicated: u64,
}

struct State {
    rng: StdRng,
    faults: LinkFaults,
    /// The replicas that run, by node id; a node without a handler is down.
    handlers: BTreeMap<NodeId, RpcHandler>,
    /// Directed links that deliver nothing: `(from, to)`.
    cut: BTreeSet<(NodeId, NodeId)>,
    stats: FaultStats,
    speed: Option<LinkSpeed>,
    /// When each directed link `(from, to)` has put its last queued byte on the wire.
    link_free_at: BTreeMap<(NodeId, NodeId), tokio::time::Instant>,
    carried: BTreeMap<NodeId, Carried>,
}

/// The network; clone it freely (clones share the dice, the links and the handlers).
#[derive(Clone)]
pub struct FaultNetwork {
    state: Arc<Mutex<State>>,
}

impl FaultNetwork {
    /// A network whose dice are seeded with `seed`, faulty as `faults` says.
    pub fn new(seed: u64, faults: LinkFaults) -> FaultNetwork {
        faults.assert_valid();
        FaultNetwork {
            state: Arc::new(Mutex::new(State {
                rng: StdRng::seed_from_u64(seed),
                faults,
                handlers: BTreeMap::new(),
                cut: BTreeSet::new(),
                stats: FaultStats::default(),
                speed: None,
                link_free_at: BTreeMap::new(),
                carried: BTreeMap::new(),
            })),
        }
    }

    /// A network that loses, duplicates and delays nothing until told to (its links can be cut).
    pub fn reliable(seed: u64) -> FaultNetwork {
        FaultNetwork::new(seed, LinkFaults::default())
    }

    /// The transport replica `local` sends its Raft messages through.
    pub fn transport(&self, local: NodeId) -> Arc<dyn RaftTransport> {
        Arc::new(Endpoint {
            network: self.clone(),
            local,
        })
    }

    /// Routes messages for `node` to `handler` (replacing an earlier instance after a restart).
    pub fn register(&self, node: NodeId, handler: RpcHandler) {
        self.state.lock().handlers.insert(node, handler);
    }

    /// `node` is down: messages to it, and replies to its requests, do not arrive.
    pub fn unregister(&self, node: NodeId) {
        self.state.lock().handlers.remove(&node);
    }

    /// Stops delivery from `from` to `to`: its requests, and the replies to the requests of `to`.
    pub fn cut_one_way(&self, from: NodeId, to: NodeId) {
        self.state.lock().cut.insert((from, to));
    }

    /// Stops delivery between `a` and `b`, both ways.
    pub fn cut(&self, a: NodeId, b: NodeId) {
        let mut state = self.state.lock();
        state.cut.insert((a, b));
        state.cut.insert((b, a));
    }

    /// Restores delivery between `a` and `b`, both ways.
    pub fn heal(&self, a: NodeId, b: NodeId) {
        let mut state = self.state.lock();
        state.cut.remove(&(a, b));
        state.cut.remove(&(b, a));
    }

    /// Cuts `node` off from every other node of `peers`, both ways.
    pub fn isolate(&self, node: NodeId, peers: impl IntoIterator<Item = NodeId>) {
        for peer in peers {
            if peer != node {
                self.cut(node, peer);
            }
        }
    }

    /// Restores every link.
    pub fn heal_all(&self) {
        self.state.lock().cut.clear();
    }

    /// Whether any link is cut.
    pub fn is_partitioned(&self) -> bool {
        !self.state.lock().cut.is_empty()
    }

    pub fn faults(&self) -> LinkFaults {
        self.state.lock().faults
    }

    /// Changes what happens to messages sent from now on.
    pub fn set_faults(&self, faults: LinkFaults) {
        faults.assert_valid();
        self.state.lock().faults = faults;
    }

    /// Faults stop: every link heals, and nothing is dropped or duplicated any more. Delays stay,
    /// so messages still overtake each other.
    pub fn make_reliable(&self) {
        let mut state = self.state.lock();
        state.cut.clear();
        state.faults.drop_per_mille = 0;
        state.faults.duplicate_per_mille = 0;
    }

    pub fn stats(&self) -> FaultStats {
        self.state.lock().stats
    }

    /// From now on every link carries messages at `speed` (the dice no longer apply); `None`:
    /// back to the dice.
    pub fn set_link_speed(&self, speed: Option<LinkSpeed>) {
        if let Some(speed) = speed {
            assert!(
                speed.bytes_per_ms > 0 && speed.latency_ms <= DELAY_MS_LIMIT,
                "a link carries something and delays at most {DELAY_MS_LIMIT} ms: {speed:?}"
            );
        }
        self.state.lock().speed = speed;
    }

    /// The requests sent to `node` over links with a [`LinkSpeed`].
    pub fn carried(&self, node: NodeId) -> Carried {
        self.state.lock().carried.get(&node).copied().unwrap_or_default()
    }

    /// Puts `bytes` on the link from `from` to `to` after what is queued on it: when they arrive.
    fn transmit(&self, from: NodeId, to: NodeId, bytes: usize, speed: LinkSpeed) -> tokio::time::Instant {
        let mut state = self.state.lock();
        let now = tokio::time::Instant::now();
        let free_at = state.link_free_at.entry((from, to)).or_insert(now);
        let done = (*free_at).max(now) + speed.transmission(bytes);
        *free_at = done;
        done + Duration::from_millis(speed.latency_ms)
    }

    /// Counts a request of `bytes` to `to` as sent (`true`) or as handled (`false`).
    fn count_request(&self, to: NodeId, bytes: usize, sent: bool) {
        let mut state = self.state.lock();
        let carried = state.carried.entry(to).or_default();
        if sent {
            carried.requests_bytes += bytes as u64;
            carried.in_flight_bytes += bytes as u64;
            carried.in_flight_bytes_peak = carried.in_flight_bytes_peak.max(carried.in_flight_bytes);
        } else {
            assert!(carried.in_flight_bytes >= bytes as u64, "a request handled twice");
            carried.in_flight_bytes -= bytes as u64;
        }
    }

    /// One Raft request and its reply over links with a [`LinkSpeed`]. The request is delivered
    /// and handled by a task of its own, so a caller that gives up does not recall it.
    async fn call_over_links(
        &self,
        from: NodeId,
        to: NodeId,
        request: Vec<u8>,
        speed: LinkSpeed,
    ) -> Result<Vec<u8>, TransportError> {
        let bytes = request.len();
        let arrival = self.transmit(from, to, bytes, speed);
        self.count_request(to, bytes, true);
        let network = self.clone();
        let delivery = tokio::spawn(async move {
            tokio::time::sleep_until(arrival).await;
            let answer = match network.route(from, to) {
                Ok(handler) => Ok(handler.handle(&request).await),
                Err(reason) => Err(reason),
            };
            network.count_request(to, bytes, false);
            answer
        });
        let unreachable = |reason: String| TransportError::Unreachable { node: to, reason };
        let response = match delivery.await {
            Ok(answer) => answer.map_err(|reason| unreachable(reason.into()))?,
            Err(error) => return Err(unreachable(format!("delivery failed: {error}"))),
        };
        tokio::time::sleep_until(self.transmit(to, from, response.len(), speed)).await;
        self.route(to, from)
            .map_err(|reason| unreachable(format!("reply to node {from}: {reason}")))?;
        Ok(response)
    }

    /// Throws the dice for one message about to be sent: its delay, whether it is lost, and
    /// whether (and when) a copy follows it.
    pub fn fate(&self) -> Fate {
        let mut state = self.state.lock();
        let faults = state.faults;
        let delay = Duration::from_millis(state.rng.gen_range(0..=faults.delay_ms_max));
        let dropped = state.rng.gen_range(0..PER_MILLE) < faults.drop_per_mille;
        let duplicate = state.rng.gen_range(0..PER_MILLE) < faults.duplicate_per_mille;
        let duplicate_after =
            duplicate.then(|| Duration::from_millis(state.rng.gen_range(0..=2 * faults.delay_ms_max)));
        state.stats.dropped += u64::from(dropped);
        state.stats.duplicated += u64::from(duplicate);
        Fate {
            delay,
            dropped,
            duplicate_after,
            timed: faults.delay_ms_max > 0,
        }
    }

    /// Whether the link from `from` to `to` delivers.
    fn link_up(&self, from: NodeId, to: NodeId) -> bool {
        !self.state.lock().cut.contains(&(from, to))
    }

    /// The handler of `to` if a message from `from` reaches it now (the link is up and `to`
    /// runs), else why not.
    fn route(&self, from: NodeId, to: NodeId) -> Result<RpcHandler, &'static str> {
        if !self.link_up(from, to) {
            return Err("link cut");
        }
        self.state.lock().handlers.get(&to).cloned().ok_or("down")
    }

    /// One Raft request from `from` to `to` and its reply, each through the dice and the links
    /// as they are when it arrives.
    async fn call(&self, from: NodeId, to: NodeId, request: Vec<u8>) -> Result<Vec<u8>, TransportError> {
        let speed = self.state.lock().speed;
        if let Some(speed) = speed {
            return self.call_over_links(from, to, request, speed).await;
        }
        let unreachable = |reason: String| TransportError::Unreachable { node: to, reason };
        let lost = |reason: &str| TransportError::Lost {
            node: to,
            reason: reason.into(),
        };
        let there = self.fate();
        there.in_transit().await;
        if there.dropped {
            return Err(lost("request dropped"));
        }
        let handler = self.route(from, to).map_err(|reason| unreachable(reason.into()))?;
        if let Some(after) = there.duplicate_after {
            // A copy arrives later, possibly at a restarted replica; its answer goes nowhere.
            let (network, request, timed) = (self.clone(), request.clone(), there.timed);
            tokio::spawn(async move {
                elapse(timed, after).await;
                if let Ok(handler) = network.route(from, to) {
                    handler.handle(&request).await;
                }
            });
        }
        let response = handler.handle(&request).await;
        let back = self.fate();
        back.in_transit().await;
        if back.dropped {
            return Err(lost("reply dropped"));
        }
        // The reply reaches the caller only over a live link, and only if it still runs.
        self.route(to, from)
            .map_err(|reason| unreachable(format!("reply to node {from}: {reason}")))?;
        Ok(response)
    }
}

/// One replica's side of the network.
struct Endpoint {
    network: FaultNetwork,
    local: NodeId,
}

impl RaftTransport for Endpoint {
    fn call(&self, target: NodeId, request: Vec<u8>) -> RpcFuture<'_> {
        Box::pin(self.network.call(self.local, target, request))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use specie_raft::{Replica, ReplicaConfig, ReplicatedStateMachine, SnapshotRefused};

    use super::*;

    const FAULTY: LinkFaults = LinkFaults {
        drop_per_mille: 100,
        duplicate_per_mille: 200,
        delay_ms_max: 30,
    };

    fn fates(network: &FaultNetwork, count: usize) -> Vec<Fate> {
        (0..count).map(|_| network.fate()).collect()
    }

    #[test]
    fn the_dice_replay_for_a_seed() {
        let first = fates(&FaultNetwork::new(7, FAULTY), 500);
        assert_eq!(first, fates(&FaultNetwork::new(7, FAULTY), 500));
        assert_ne!(first, fates(&FaultNetwork::new(8, FAULTY), 500));
    }

    #[test]
    fn faults_come_at_their_rates_and_within_their_bounds() {
        let network = FaultNetwork::new(1, FAULTY);
        let fates = fates(&network, 10_000);
        let dropped = fates.iter().filter(|f| f.dropped).count() as u64;
        let duplicated = fates.iter().filter(|f| f.duplicate_after.is_some()).count() as u64;
        assert!((800..1_200).contains(&dropped), "{dropped} of 10000 dropped at 10%");
        assert!(
            (1_700..2_300).contains(&duplicated),
            "{duplicated} of 10000 duplicated at 20%"
        );
        assert_eq!(network.stats(), FaultStats { dropped, duplicated });
        let delays: BTreeSet<Duration> = fates.iter().map(|f| f.delay).collect();
        assert_eq!(delays.len(), 31, "every delay from 0 to 30 ms occurs: {delays:?}");
        assert!(delays.iter().all(|&d| d <= Duration::from_millis(30)));
        assert!(fates
            .iter()
            .filter_map(|f| f.duplicate_after)
            .all(|after| after <= Duration::from_millis(60)));
    }

    #[test]
    fn a_reliable_network_delivers_everything_at_once() {
        let network = FaultNetwork::reliable(3);
        let fates = fates(&network, 1_000);
        assert!(fates
            .iter()
            .all(|f| !f.dropped && f.duplicate_after.is_none() && f.delay.is_zero()));
        assert_eq!(network.stats(), FaultStats::default());
        // No timer: this runtime has none, and a tokio sleep would panic without one.
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(fates[0].in_transit());
    }

    #[test]
    fn links_cut_heal_and_isolate() {
        let network = FaultNetwork::reliable(0);
        network.cut_one_way(1, 2);
        assert!(!network.link_up(1, 2) && network.link_up(2, 1));
        assert!(network.is_partitioned());
        network.heal(2, 1);
        assert!(network.link_up(1, 2) && !network.is_partitioned());

        network.isolate(2, 1..=3);
        for (from, to) in [(1, 2), (2, 1), (2, 3), (3, 2)] {
            assert!(!network.link_up(from, to), "{from} -> {to} is cut");
        }
        assert!(network.link_up(1, 3) && network.link_up(3, 1) && network.link_up(2, 2));
        assert_eq!(network.route(1, 2).err(), Some("link cut"));
        assert_eq!(network.route(1, 3).err(), Some("down"), "node 3 runs no replica");
        network.heal_all();
        assert!(!network.is_partitioned());
    }

    #[test]
    fn making_the_network_reliable_heals_and_stops_losses_but_keeps_delays() {
        let network = FaultNetwork::new(5, FAULTY);
        network.cut(1, 2);
        network.make_reliable();
        assert!(!network.is_partitioned());
        assert_eq!(
            network.faults(),
            LinkFaults {
                drop_per_mille: 0,
                duplicate_per_mille: 0,
                delay_ms_max: 30
            }
        );
        assert!(fates(&network, 1_000)
            .iter()
            .all(|f| !f.dropped && f.duplicate_after.is_none()));
    }

    /// On a paused clock: the times are the link's alone, not the machine's (a loaded CI
    /// machine once took more than a millisecond between two lines).
    #[tokio::test(start_paused = true)]
    async fn a_link_carries_one_message_after_another_at_its_speed() {
        let network = FaultNetwork::reliable(0);
        let speed = LinkSpeed {
            latency_ms: 5,
            bytes_per_ms: 100,
        };
        let sent = tokio::time::Instant::now();
        let first = network.transmit(1, 2, 1_000, speed);
        let second = network.transmit(1, 2, 500, speed);
        assert_eq!(
            first - sent,
            Duration::from_millis(15),
            "10 ms on the wire, 5 ms latency"
        );
        assert_eq!(second - first, Duration::from_millis(5), "queued behind the first");
        let back = network.transmit(2, 1, 500, speed);
        assert_eq!(
            back - sent,
            Duration::from_millis(10),
            "each direction is a link of its own"
        );
        network.count_request(2, 1_000, true);
        network.count_request(2, 500, true);
        network.count_request(2, 1_000, false);
        let expected = Carried {
            requests_bytes: 1_500,
            in_flight_bytes: 500,
            in_flight_bytes_peak: 1_500,
        };
        assert_eq!(network.carried(2), expected);
    }

    #[test]
    #[should_panic(expected = "per mille")]
    fn a_rate_above_certainty_is_refused() {
        FaultNetwork::reliable(0).set_faults(LinkFaults {
            drop_per_mille: 1_001,
            ..LinkFaults::default()
        });
    }

    /// A role that keeps nothing: enough for a replica that answers requests.
    struct Nothing;

    impl ReplicatedStateMachine for Nothing {
        fn apply(&mut self, _proposer: specie_raft::Proposer, _command: &[u8]) -> Vec<u8> {
            vec![]
        }
        fn snapshot(&self) -> Vec<u8> {
            vec![]
        }
        fn restore(&mut self, _snapshot: &[u8]) -> Result<(), SnapshotRefused> {
            Ok(())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_replica_answers_through_the_network_unless_a_fault_stops_it() {
        let dir = tempfile::tempdir().unwrap();
        let network = FaultNetwork::reliable(9);
        let replica = Replica::start(
            ReplicaConfig::default(),
            dir.path(),
            1,
            specie_raft::Start::Found(BTreeSet::from([1])),
            network.transport(1),
            Nothing,
        )
        .await
        .unwrap();
        let handler = replica.rpc_handler();
        // Node 2 stands for a caller; a reply reaches only a caller that runs.
        network.register(1, handler.clone());
        network.register(2, handler.clone());
        // Bytes no replica can decode: the answer says so, the same every time.
        let request = vec![0xFF; 3];
        let expected = handler.handle(&request).await;
        assert!(!expected.is_empty());
        let caller = network.transport(2);
        assert_eq!(caller.call(1, request.clone()).await, Ok(expected.clone()));

        let unreachable = |result: Result<Vec<u8>, TransportError>| {
            matches!(result, Err(TransportError::Unreachable { node: 1, .. }))
        };
        network.cut_one_way(2, 1);
        assert!(unreachable(caller.call(1, request.clone()).await), "request link cut");
        network.heal_all();
        network.cut_one_way(1, 2);
        assert!(unreachable(caller.call(1, request.clone()).await), "reply link cut");
        network.heal_all();
        network.unregister(2);
        assert!(unreachable(caller.call(1, request.clone()).await), "caller down");
        network.unregister(1);
        assert!(unreachable(caller.call(1, request.clone()).await), "replica down");
        network.register(1, handler.clone());
        network.register(2, handler);
        network.set_faults(LinkFaults {
            drop_per_mille: 1_000,
            ..LinkFaults::default()
        });
        let lost = caller.call(1, request.clone()).await;
        assert!(matches!(lost, Err(TransportError::Lost { node: 1, .. })), "{lost:?}");
        assert_eq!(network.stats().dropped, 1);
        network.make_reliable();
        assert_eq!(caller.call(1, request).await, Ok(expected));
        replica.shutdown().await;
    }
}
