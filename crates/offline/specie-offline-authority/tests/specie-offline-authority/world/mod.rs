//! An offline authority on the simulator's host, and devices around it: identities enrolled,
//! one-time keys certified, tokens funded, paid offline and deposited, as the tests need them.
#![allow(dead_code)] // each test module uses its own part of this

use specie_host::{SimEvent, SimHost};
use specie_offline::{
    deterministic_key, Denominations, Instruction, KeyBinding, KeyCertificate, KeyRing, Move, PublicKey, SigningKey,
    Token,
};
use specie_offline_authority::{AuthorityKeys, DepositOutcome, Funding, Input, OfflineAuthority, Reply, Report};

pub const PERIOD: u32 = 3;

pub fn authority_keys() -> AuthorityKeys {
    AuthorityKeys::deterministic("offline-authority-tests", Denominations::default(), PERIOD)
}

/// A device: its identity key and its one-time keys, with their certificates once certified.
pub struct Device {
    pub identity: SigningKey,
    pub keys: Vec<SigningKey>,
    pub certificates: Vec<KeyCertificate>,
}

impl Device {
    pub fn identity(&self) -> PublicKey {
        self.identity.verifying_key().to_bytes()
    }

    pub fn public(&self, key: usize) -> PublicKey {
        self.keys[key].verifying_key().to_bytes()
    }
}

pub struct World {
    pub host: SimHost<OfflineAuthority>,
    pub ring: KeyRing,
    pub reports: Vec<Report>,
    next_ticket: u64,
    now_ms: u64,
}

impl World {
    pub fn new() -> World {
        World {
            host: SimHost::start("offline-authority", || OfflineAuthority::new(authority_keys())),
            ring: authority_keys().ring(),
            reports: Vec::new(),
            next_ticket: 0,
            now_ms: 0,
        }
    }

    /// Hands the authority one input built around a fresh ticket, and returns its answer.
    pub fn call(&mut self, input: impl FnOnce(u64) -> Input) -> Reply {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.now_ms += 1;
        let mut answer = None;
        for event in self.host.handle(self.now_ms, input(ticket)) {
            match event {
                SimEvent::Reply { ticket: t, reply } if t == ticket => answer = Some(reply),
                SimEvent::Report(report) => self.reports.push(report),
                _ => {}
            }
        }
        answer.expect("the authority answers every call at once on this host")
    }

    /// Crashes the authority and brings it back from its log: the host checks that the rebuilt
    /// state is the one it crashed in.
    pub fn crash_and_restart(&mut self) {
        assert!(self.host.crash());
        self.host
            .restart(self.now_ms)
            .expect("the log replays into the crashed state");
    }

    /// Device `n` with `keys` one-time keys, enrolled and certified.
    pub fn device(&mut self, n: u64, keys: usize) -> Device {
        let identity = deterministic_key("identity", n);
        let keys: Vec<SigningKey> = (0..keys as u64)
            .map(|i| deterministic_key("one-time", n * 1_000 + i))
            .collect();
        let public = identity.verifying_key().to_bytes();
        assert_eq!(
            self.call(|ticket| Input::Register {
                ticket,
                identity: public
            }),
            Reply::Registered
        );
        let bindings = keys
            .iter()
            .map(|key| KeyBinding::sign(&identity, key.verifying_key().to_bytes()))
            .collect();
        let Reply::Certified { certificates } = self.call(|ticket| Input::Certify { ticket, bindings }) else {
            panic!("certification refused");
        };
        for certificate in &certificates {
            certificate.check(&self.ring).expect("a certificate under the ring");
        }
        Device {
            identity,
            keys,
            certificates,
        }
    }

    /// Funds `device` with `amount` from a core funding `id`, to its first keys; returns the tokens.
    pub fn fund(&mut self, id: u8, amount: u64, device: &Device) -> Vec<Token> {
        let count = Denominations::default().split(amount).len();
        let owners = (0..count).map(|i| device.public(i)).collect();
        let funding = Funding {
            id: [id; 32],
            amount,
            owners,
        };
        match self.call(|ticket| Input::Fund { ticket, funding }) {
            Reply::Funded { issuances } => issuances.into_iter().map(Token::issued).collect(),
            other => panic!("funding refused: {other:?}"),
        }
    }

    /// The authority's answer to `owner` (key `key` of its) depositing `token` with `instruction`.
    pub fn deposit(&mut self, token: &Token, owner: &SigningKey, instruction: Instruction, nonce: u8) -> Reply {
        let statement = Move::Deposit {
            instruction: instruction.hash(),
            nonce: [nonce; 16],
        }
        .sign(token, owner);
        let token = Box::new(token.clone());
        self.call(|ticket| Input::Deposit {
            ticket,
            token,
            statement,
            instruction,
        })
    }

    /// A deposit that re-issues the whole value to one key of `to`; returns the outcome.
    pub fn deposit_to(&mut self, token: &Token, owner: &SigningKey, to: &Device, key: usize) -> DepositOutcome {
        let value = token.verify(&self.ring).expect("a valid token").denomination;
        let instruction = Instruction::Reissue {
            outputs: vec![(value, to.public(key))],
        };
        match self.deposit(token, owner, instruction, 0) {
            Reply::Deposited(outcome) => outcome,
            other => panic!("deposit refused: {other:?}"),
        }
    }
}

/// `token` paid by its owner `from` (key `key` of that device) to key `to_key` of `to`, at the
/// payee's `nonce`, checked as the payee checks it.
pub fn pay(world: &World, token: &Token, from: &SigningKey, to: &Device, to_key: usize, nonce: u8) -> Token {
    let paid = token
        .transfer(from, to.certificates[to_key], [nonce; 16])
        .expect("the owner pays");
    let verified = paid.verify(&world.ring).expect("the payee accepts the chain");
    assert_eq!(verified.owner, to.public(to_key));
    paid
}
