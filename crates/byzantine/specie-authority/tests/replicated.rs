//! An authority shard replicated by Raft inside one authority (three replicas, one trust
//! domain): a vote is committed before it leaves, so after the leader crashes the new leader
//! gives the same vote for the same order and refuses a conflicting one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use specie_authority::{AuthorityConfig, AuthorityShard, Funding, Input, Message, Refusal, Reply, Report};
use specie_fastpay::test_support::SigningCommittee;
use specie_fastpay::{deterministic_key, AccountKey, Recipient, SignedOrder, TransferOrder};
use specie_faultnet::FaultNetwork;
use specie_host::{CallError, Gather, ReplicatedHost, RoleMachine, Slot, Wiring};
use specie_raft::{NodeId, Replica, ReplicaConfig};
use specie_role::Ticket;
use tokio::sync::mpsc;

enum Call {
    Transfer(SignedOrder),
    Fund(Funding),
}

struct SlotWiring;

impl Wiring<AuthorityShard> for SlotWiring {
    type Call = Call;
    type ReplyTo = Slot<Reply>;
    fn input(call: Call, ticket: Ticket) -> Input {
        match call {
            Call::Transfer(order) => Input::Transfer { ticket, order },
            Call::Fund(funding) => Input::Fund { ticket, funding },
        }
    }
    fn send(&mut self, _to: u32, _message: Message) {}
    fn reply(&mut self, slot: Slot<Reply>, reply: Reply) {
        slot.fill(reply);
    }
    fn report(&mut self, report: Report) {
        panic!("unexpected report {report:?}");
    }
}

type Calls = mpsc::Sender<Vec<(Call, Slot<Reply>)>>;
type AuthorityReplica = Arc<Replica<RoleMachine<AuthorityShard>>>;

fn shard() -> AuthorityShard {
    let signing = SigningCommittee::deterministic(4, 1);
    let config = AuthorityConfig {
        committee: signing.committee,
        authority: 1,
        shard: 0,
        shards: 1,
        credit_retransmit_ms: 100,
        channel_credits_max: 100,
    };
    AuthorityShard::new(config, signing.keys[1].clone())
}

struct Group {
    network: FaultNetwork,
    replicas: BTreeMap<NodeId, (AuthorityReplica, Calls)>,
    _dir: tempfile::TempDir,
}

impl Group {
    async fn start() -> Group {
        let dir = tempfile::tempdir().unwrap();
        let network = FaultNetwork::reliable(7);
        let members: BTreeSet<NodeId> = (1..=3).collect();
        let config = ReplicaConfig {
            heartbeat_interval_ms: 50,
            election_timeout_min_ms: 300,
            election_timeout_max_ms: 600,
            ..ReplicaConfig::default()
        };
        let mut replicas = BTreeMap::new();
        for &id in &members {
            let replica = Replica::start(
                config.clone(),
                &dir.path().join(format!("replica-{id}")),
                id,
                &members,
                network.transport(id),
                RoleMachine::new(shard()),
            )
            .await
            .unwrap();
            network.register(id, replica.rpc_handler());
            let replica = Arc::new(replica);
            let (calls, calls_rx) = mpsc::channel(64);
            // One shard per authority here: no peer sends it credits.
            let (_no_inputs, inputs_rx) = mpsc::channel(1);
            let host = ReplicatedHost::new(format!("authority-1/shard-0/replica-{id}"), replica.clone(), SlotWiring);
            tokio::spawn(host.run(calls_rx, inputs_rx));
            replicas.insert(id, (replica, calls));
        }
        Group {
            network,
            replicas,
            _dir: dir,
        }
    }

    async fn leader(&self) -> NodeId {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let leaders: Vec<NodeId> = self
                .replicas
                .iter()
                .filter(|(_, (r, _))| r.is_leader())
                .map(|(id, _)| *id)
                .collect();
            if let [leader] = leaders[..] {
                return leader;
            }
            assert!(Instant::now() < deadline, "no single leader: {leaders:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Calls whoever leads, through elections.
    async fn call(&self, make: impl Fn() -> Call) -> Reply {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let leader = self.leader().await;
            let (mut slots, answer) = Gather::slots(1);
            let calls = &self.replicas[&leader].1;
            if calls.send(vec![(make(), slots.remove(0))]).await.is_ok() {
                match answer.replies().await {
                    Ok(mut replies) => return replies.remove(0),
                    Err(CallError::NotLeader { .. } | CallError::Unknown) => {}
                }
            }
            assert!(Instant::now() < deadline, "no answer");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A crash: the leader is cut off and dropped with whatever it had in flight.
    async fn crash(&mut self, id: NodeId) {
        self.network.unregister(id);
        let (replica, _calls) = self.replicas.remove(&id).unwrap();
        replica.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_leader_crash_the_new_leader_gives_the_same_vote_and_refuses_a_conflicting_order() {
    let mut group = Group::start().await;
    let owner = deterministic_key("account", 1);
    let sender = AccountKey(owner.verifying_key().to_bytes());
    let order = |to: u64| {
        TransferOrder {
            sender,
            recipient: Recipient::Account(AccountKey(deterministic_key("account", to).verifying_key().to_bytes())),
            amount: 10,
            sequence: 0,
            memo: Vec::new(),
        }
        .sign(&owner)
    };
    let funding = Funding {
        id: [9; 32],
        account: sender,
        amount: 10,
    };
    assert_eq!(group.call(|| Call::Fund(funding)).await, Reply::Funded { id: [9; 32] });
    let vote = group.call(|| Call::Transfer(order(2))).await;
    assert!(matches!(vote, Reply::Voted(_)), "{vote:?}");

    let old = group.leader().await;
    group.crash(old).await;
    let new = group.leader().await;
    assert_ne!(new, old);
    assert_eq!(
        group.call(|| Call::Transfer(order(3))).await,
        Reply::Refused(Refusal::OtherOrderPending { sequence: 0 })
    );
    assert_eq!(
        group.call(|| Call::Transfer(order(2))).await,
        vote,
        "the same vote, byte for byte"
    );
    assert_eq!(group.call(|| Call::Fund(funding)).await, Reply::Funded { id: [9; 32] });
}
