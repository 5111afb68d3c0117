//! The offline authority as a role: checks (and signatures) in `handle`, effects in `apply`.

use std::collections::{BTreeMap, HashMap, VecDeque};

use ed25519_dalek::{Signature, SigningKey};
use specie_offline::{
    check_public_key, Denominations, Instruction, Issuance, KeyBinding, KeyCertificate, KeyRing, Move, PublicKey,
    SignedMove, Token, REISSUE_OUTPUTS_MAX,
};
use specie_role::{Durable, Output, Role, Ticket};

use crate::messages::{
    Command, Deposit, DepositLink, DepositOutcome, Funding, Input, Refusal, Reply, Report, BINDINGS_PER_CALL_MAX,
    EVIDENCE_PER_ANSWER_MAX, REVOCATIONS_PER_ANSWER_MAX, TOKENS_PER_FUNDING_MAX,
};
use crate::state::{deposit_link, derive_serial, AuthorityState, StateError};

/// The authority's secret keys: one issuing key per denomination, and the certifying key of the
/// current period.
pub struct AuthorityKeys {
    pub denominations: Denominations,
    /// `issuing[i]` issues tokens of `denominations.values()[i]`.
    pub issuing: Vec<SigningKey>,
    pub certifying: SigningKey,
    pub period: u32,
}

impl AuthorityKeys {
    /// Deterministic keys from a label (demos, simulations, tests: anyone can derive them).
    pub fn deterministic(label: &str, denominations: Denominations, period: u32) -> AuthorityKeys {
        let issuing = (0..denominations.values().len())
            .map(|i| specie_offline::deterministic_key(&format!("{label}/issuing"), i as u64))
            .collect();
        AuthorityKeys {
            denominations,
            issuing,
            certifying: specie_offline::deterministic_key(&format!("{label}/certifying"), u64::from(period)),
            period,
        }
    }

    /// Issuing key → the denomination it issues.
    pub fn denominations_by_key(&self) -> BTreeMap<PublicKey, u64> {
        let keys = self.issuing.iter().map(|key| key.verifying_key().to_bytes());
        keys.zip(self.denominations.values().iter().copied()).collect()
    }

    /// What a payee trusts: the issuing keys with their denominations, and the certifying key.
    pub fn ring(&self) -> KeyRing {
        let mut ring = KeyRing::default();
        for (key, value) in self.issuing.iter().zip(self.denominations.values()) {
            ring.add_issuing_key(key.verifying_key().to_bytes(), *value)
                .expect("distinct, valid issuing keys");
        }
        ring.add_certifying_key(self.period, self.certifying.verifying_key().to_bytes())
            .expect("a valid certifying key");
        ring
    }
}

/// The offline authority: enrols identities, certifies one-time keys, issues tokens against
/// fundings from the online core, and takes deposits back, naming whoever spent a token twice.
pub struct OfflineAuthority {
    keys: AuthorityKeys,
    ring: KeyRing,
    /// Denomination → the key that issues it.
    issuing: BTreeMap<u64, usize>,
    state: AuthorityState,
    leading: bool,
    outputs: VecDeque<Output<OfflineAuthority>>,
    registering: HashMap<PublicKey, Vec<Ticket>>,
    /// One-time keys on their way to the log, by the identity they are bound to.
    certifying_keys: HashMap<PublicKey, PublicKey>,
    /// Certification requests on their way to the log, by their first key.
    certifying: HashMap<PublicKey, (Ticket, Vec<KeyCertificate>)>,
    funding: HashMap<[u8; 32], (Funding, Vec<Ticket>)>,
    depositing: HashMap<DepositLink, Vec<Ticket>>,
}

impl OfflineAuthority {
    pub fn new(keys: AuthorityKeys) -> OfflineAuthority {
        assert_eq!(
            keys.issuing.len(),
            keys.denominations.values().len(),
            "one issuing key per denomination"
        );
        let ring = keys.ring();
        let state = AuthorityState::new(keys.denominations_by_key());
        let issuing = keys
            .denominations
            .values()
            .iter()
            .enumerate()
            .map(|(i, value)| (*value, i))
            .collect();
        OfflineAuthority {
            keys,
            ring,
            issuing,
            state,
            leading: false,
            outputs: VecDeque::new(),
            registering: HashMap::new(),
            certifying_keys: HashMap::new(),
            certifying: HashMap::new(),
            funding: HashMap::new(),
            depositing: HashMap::new(),
        }
    }

    pub fn ring(&self) -> &KeyRing {
        &self.ring
    }

    pub fn books(&self) -> crate::Books {
        self.state.books()
    }

    /// The revocation list: serials of tokens found double spent, in the order found.
    pub fn revoked(&self) -> &[[u8; 16]] {
        &self.state.revoked
    }

    fn reply(&mut self, ticket: Ticket, reply: Reply) {
        self.outputs.push_back(Output::Reply { ticket, reply });
    }

    fn propose(&mut self, command: Command) {
        self.outputs.push_back(Output::Propose(command));
    }

    fn register(&mut self, ticket: Ticket, identity: PublicKey) -> Result<(), Refusal> {
        check_public_key(&identity).map_err(Refusal::BadIdentity)?;
        if self.state.identities.contains(&identity) {
            self.reply(ticket, Reply::Registered);
        } else if let Some(tickets) = self.registering.get_mut(&identity) {
            tickets.push(ticket);
        } else {
            self.registering.insert(identity, vec![ticket]);
            self.propose(Command::Register { identity });
        }
        Ok(())
    }

    /// The identity `key` is (or is about to be) certified for.
    fn holder(&self, key: &PublicKey) -> Option<PublicKey> {
        let known = self.state.certified.get(key).map(|(_, binding)| binding.identity);
        known.or_else(|| self.certifying_keys.get(key).copied())
    }

    fn certify(&mut self, ticket: Ticket, bindings: Vec<KeyBinding>) -> Result<(), Refusal> {
        if bindings.len() > BINDINGS_PER_CALL_MAX {
            return Err(Refusal::TooMany {
                count: bindings.len(),
                max: BINDINGS_PER_CALL_MAX,
            });
        }
        for (index, binding) in bindings.iter().enumerate() {
            binding.check().map_err(|error| Refusal::BadBinding { index, error })?;
            if !self.state.identities.contains(&binding.identity) {
                return Err(Refusal::NotRegistered { index });
            }
            if self.state.debts.contains_key(&binding.identity) {
                return Err(Refusal::Convicted { index });
            }
            if self
                .holder(&binding.key)
                .is_some_and(|holder| holder != binding.identity)
            {
                return Err(Refusal::KeyTaken { index });
            }
        }
        let certificates: Vec<KeyCertificate> = bindings
            .iter()
            .map(|binding| KeyCertificate::sign(binding.key, self.keys.period, &self.keys.certifying))
            .collect();
        let Some(first) = bindings.first().map(|binding| binding.key) else {
            self.reply(ticket, Reply::Certified { certificates });
            return Ok(());
        };
        if self.certifying.contains_key(&first) {
            // The same first key in flight twice: answer this one once the other is applied.
            return Err(Refusal::KeyTaken { index: 0 });
        }
        for binding in &bindings {
            self.certifying_keys.insert(binding.key, binding.identity);
        }
        self.certifying.insert(first, (ticket, certificates));
        self.propose(Command::Certify {
            period: self.keys.period,
            bindings,
        });
        Ok(())
    }

    fn issuance(&self, value: u64, kind: &[u8], source: &[u8; 32], index: usize, owner: PublicKey) -> Issuance {
        let key = &self.keys.issuing[self.issuing[&value]];
        Issuance::sign(key, derive_serial(kind, source, index), owner)
    }

    fn fund(&mut self, ticket: Ticket, funding: Funding) -> Result<(), Refusal> {
        let mismatch = || Refusal::FundingMismatch {
            id_hex: funding.id.iter().map(|b| format!("{b:02x}")).collect(),
        };
        if let Some((known, issuances)) = self.state.fundings.get(&funding.id) {
            if *known != funding {
                return Err(mismatch());
            }
            let issuances = issuances.clone();
            self.reply(ticket, Reply::Funded { issuances });
            return Ok(());
        }
        if let Some((known, tickets)) = self.funding.get_mut(&funding.id) {
            if *known != funding {
                return Err(mismatch());
            }
            tickets.push(ticket);
            return Ok(());
        }
        let values = self.keys.denominations.split(funding.amount);
        if values.len() > TOKENS_PER_FUNDING_MAX {
            return Err(Refusal::TooMany {
                count: values.len(),
                max: TOKENS_PER_FUNDING_MAX,
            });
        }
        if values.len() != funding.owners.len() {
            return Err(Refusal::FundingOwners {
                amount: funding.amount,
                needed: values.len(),
                given: funding.owners.len(),
            });
        }
        if let Some(index) = funding
            .owners
            .iter()
            .position(|owner| !self.state.certified.contains_key(owner))
        {
            return Err(Refusal::UncertifiedOwner { index });
        }
        let issuances = values
            .iter()
            .zip(&funding.owners)
            .enumerate()
            .map(|(i, (value, owner))| self.issuance(*value, b"fund", &funding.id, i, *owner))
            .collect();
        self.funding.insert(funding.id, (funding.clone(), vec![ticket]));
        self.propose(Command::Fund { funding, issuances });
        Ok(())
    }

    /// The seed's re-validation (001, §IV-E), with specie's changes: the token was issued here
    /// (step 3), its chain verifies as a payee checks it (step 4), and its owner signed the deposit
    /// statement over this instruction (step 2; any hop count, so step 1 is gone). Double-spend
    /// detection (step 5) and the re-issue (step 6) happen on apply, in log order.
    fn deposit(
        &mut self,
        ticket: Ticket,
        token: Token,
        statement: SignedMove,
        instruction: Instruction,
    ) -> Result<(), Refusal> {
        if self.state.issued.get(&token.issuance.serial) != Some(&token.issuance) {
            return Err(Refusal::UnknownToken);
        }
        let verified = token.verify(&self.ring).map_err(Refusal::BadToken)?;
        let Move::Deposit {
            instruction: signed_instruction,
            ..
        } = statement.statement
        else {
            return Err(Refusal::NotADeposit);
        };
        if signed_instruction != instruction.hash() {
            return Err(Refusal::InstructionMismatch);
        }
        let owner = check_public_key(&verified.owner).map_err(|_| Refusal::BadDepositSignature)?;
        let index = (token.hops.len() + 1) as u8;
        let message = statement.statement.signing_bytes(&verified.link, index);
        owner
            .verify_strict(&message, &Signature::from_bytes(&statement.signature))
            .map_err(|_| Refusal::BadDepositSignature)?;
        let mut deposit = Deposit {
            token,
            statement,
            instruction,
            issuances: Vec::new(),
        };
        let link = deposit_link(&deposit, &verified.link);
        if let Some(outcome) = self.state.outcomes.get(&link) {
            let outcome = outcome.clone();
            self.reply(ticket, Reply::Deposited(outcome));
            return Ok(());
        }
        if let Some(tickets) = self.depositing.get_mut(&link) {
            tickets.push(ticket);
            return Ok(());
        }
        if let Instruction::Reissue { outputs } = &deposit.instruction {
            self.check_reissue(outputs, verified.denomination)?;
            deposit.issuances = outputs
                .iter()
                .enumerate()
                .map(|(i, (value, owner))| self.issuance(*value, b"reissue", &link, i, *owner))
                .collect();
        }
        self.depositing.insert(link, vec![ticket]);
        self.propose(Command::Deposit(Box::new(deposit)));
        Ok(())
    }

    /// A re-issue gives certified keys tokens of known denominations worth the deposited token.
    fn check_reissue(&self, outputs: &[(u64, PublicKey)], value: u64) -> Result<(), Refusal> {
        if outputs.len() > REISSUE_OUTPUTS_MAX {
            return Err(Refusal::TooMany {
                count: outputs.len(),
                max: REISSUE_OUTPUTS_MAX,
            });
        }
        if let Some((value, _)) = outputs.iter().find(|(v, _)| !self.issuing.contains_key(v)) {
            return Err(Refusal::NotADenomination { value: *value });
        }
        let asked: u128 = outputs.iter().map(|(value, _)| u128::from(*value)).sum();
        if asked != u128::from(value) {
            return Err(Refusal::ReissueValue { asked, value });
        }
        if let Some(index) = outputs
            .iter()
            .position(|(_, owner)| !self.state.certified.contains_key(owner))
        {
            return Err(Refusal::UncertifiedOwner { index });
        }
        Ok(())
    }

    fn evidence(&self, identity: &PublicKey) -> Reply {
        let convictions = self.state.convictions.get(identity).map_or(&[][..], Vec::as_slice);
        let evidence = convictions
            .iter()
            .take(EVIDENCE_PER_ANSWER_MAX)
            .filter_map(|conviction| self.state.evidence(conviction))
            .collect();
        Reply::Evidence(evidence)
    }

    fn answer_applied(&mut self, command: &Command, outcome: Option<DepositOutcome>) {
        match command {
            Command::Register { identity } => {
                for ticket in self.registering.remove(identity).unwrap_or_default() {
                    self.reply(ticket, Reply::Registered);
                }
            }
            Command::Certify { bindings, .. } => {
                for binding in bindings {
                    self.certifying_keys.remove(&binding.key);
                }
                let first = bindings.first().map(|binding| binding.key);
                if let Some((ticket, certificates)) = first.and_then(|key| self.certifying.remove(&key)) {
                    self.reply(ticket, Reply::Certified { certificates });
                }
            }
            Command::Fund { funding, issuances } => {
                let tickets = self
                    .funding
                    .remove(&funding.id)
                    .map(|(_, tickets)| tickets)
                    .unwrap_or_default();
                for ticket in tickets {
                    let issuances = issuances.clone();
                    self.reply(ticket, Reply::Funded { issuances });
                }
            }
            Command::Deposit(deposit) => {
                let outcome = outcome.expect("a deposit has an outcome");
                if self.leading {
                    self.report_double_spend(&deposit.token.issuance.serial, &outcome);
                }
                let last = deposit.token.links().last().copied().expect("an issuance link");
                let tickets = self
                    .depositing
                    .remove(&deposit_link(deposit, &last))
                    .unwrap_or_default();
                for ticket in tickets {
                    self.reply(ticket, Reply::Deposited(outcome.clone()));
                }
            }
        }
    }

    fn report_double_spend(&mut self, serial: &[u8; 16], outcome: &DepositOutcome) {
        let DepositOutcome::DoubleSpent { debtor, .. } = outcome else {
            return;
        };
        let conviction = self.state.convictions[debtor]
            .iter()
            .rev()
            .find(|conviction| conviction.serial == *serial)
            .expect("just convicted");
        if let Some(evidence) = self.state.evidence(conviction) {
            self.outputs
                .push_back(Output::Report(Report::DoubleSpend(Box::new(evidence))));
        }
    }
}

impl Role for OfflineAuthority {
    type Command = Command;
    type Input = Input;
    type Peer = std::convert::Infallible;
    type Message = std::convert::Infallible;
    type Reply = Reply;
    type Report = Report;

    fn lead(&mut self, _now_ms: u64) {
        self.leading = true;
    }

    fn follow(&mut self) {
        self.leading = false;
        self.registering.clear();
        self.certifying_keys.clear();
        self.certifying.clear();
        self.funding.clear();
        self.depositing.clear();
    }

    fn handle(&mut self, _now_ms: u64, input: Input) {
        let (ticket, result) = match input {
            Input::Register { ticket, identity } => (ticket, self.register(ticket, identity)),
            Input::Certify { ticket, bindings } => (ticket, self.certify(ticket, bindings)),
            Input::Fund { ticket, funding } => (ticket, self.fund(ticket, funding)),
            Input::Deposit {
                ticket,
                token,
                statement,
                instruction,
            } => (ticket, self.deposit(ticket, *token, statement, instruction)),
            Input::Revocations { ticket, from } => {
                let start = from.min(self.state.revoked.len() as u64) as usize;
                let serials = self.state.revoked[start..]
                    .iter()
                    .take(REVOCATIONS_PER_ANSWER_MAX)
                    .copied()
                    .collect();
                self.reply(ticket, Reply::Revocations { from, serials });
                return;
            }
            Input::Evidence { ticket, identity } => {
                let reply = self.evidence(&identity);
                self.reply(ticket, reply);
                return;
            }
            Input::Books { ticket } => {
                let books = Box::new(self.state.books());
                self.reply(ticket, Reply::Books(books));
                return;
            }
        };
        if let Err(refusal) = result {
            self.reply(ticket, Reply::Refused(refusal));
        }
    }

    fn apply(&mut self, _now_ms: u64, command: &Command) {
        let outcome = self.state.apply(command);
        self.answer_applied(command, outcome);
    }

    fn handle_timeout(&mut self, _now_ms: u64) {}

    fn poll_output(&mut self) -> Option<Output<Self>> {
        self.outputs.pop_front()
    }

    fn poll_timeout(&self) -> Option<u64> {
        None
    }
}

impl Durable for OfflineAuthority {
    type StateError = StateError;

    fn encode_command(command: &Command) -> Vec<u8> {
        command.encode()
    }

    fn decode_command(&self, bytes: &[u8]) -> Result<Command, StateError> {
        Ok(Command::decode(bytes)?)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.state.encode()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), StateError> {
        self.state = AuthorityState::decode(self.keys.denominations_by_key(), snapshot)?;
        Ok(())
    }

    fn check_invariants(&self) -> Result<(), StateError> {
        self.state.check()
    }
}
