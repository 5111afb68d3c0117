//! Direct hand-overs in the offline world: a share of the payments run through the device crate's
//! hand-over state machines (`PayeeHandOver`, `PayerHandOver`), the world carrying their messages
//! over a link it controls, as `specie-offline-service` carries them between two processes. The
//! payee asks for an amount the payer may lack exact tokens for (change paid back in the same
//! hand-over) or cannot make at all; the payer agrees to a maximum, sometimes below it.
//!
//! Faults, seeded: the link is cut as a message is sent (it is lost; both sides abandon, as the
//! real driver does on a closed connection); the receiver of a payment takes it with its device
//! and vanishes; a hostile side sends, in place of its next message, one out of turn, garbage
//! (foreign tokens, no tokens, a change offer that is not one, a request with a forged
//! certificate, a refusal) or a message of the hand-over again (its own, or the other side's).
//!
//! Checked after every hand-over: a message a side refuses leaves its balance as it was; each
//! device's balance moved by exactly what it took minus what it paid; what a finished side
//! reports is what it took and paid; value is conserved across the two devices except for the
//! payments sent and never taken (lost in a cut link, or refused by a payee that knows a token
//! revoked, the only reason an honest payment is refused here), which the world keeps as tokens in
//! limbo; a payment lost on the link is refused if it arrives late; an abandoned side keeps no
//! request open (its one-time keys come back); a completed hand-over moves exactly the amount
//! asked, change included; an honest payee ends with nothing or the amount. At the end (in
//! `check_end`): no token in limbo is ever deposited, and those whose serial nobody was paid for
//! stay outstanding at the authority.

use std::hash::Hasher;

use rand::Rng;
use specie_offline::Token;
use specie_offline_device::{
    DeviceError, HandOverError, HandOverMessage, HandOverSide, HandedOver, PayeeHandOver, PayerHandOver,
    PaymentRequest, Step,
};

use super::{OfflineRole, World};
use crate::world::Violation;

const PAYEE: usize = 0;
const PAYER: usize = 1;
/// Messages after which a hand-over that has not ended is a violation (an honest one sends 6).
const MESSAGES_MAX: usize = 16;

/// How the world makes the two sides of a hand-over: the real state machines, or planted ones.
#[derive(Clone, Copy)]
pub(super) struct Sides {
    pub payee: fn(PayeeHandOver) -> Box<dyn HandOverSide>,
    pub payer: fn(PayerHandOver) -> Box<dyn HandOverSide>,
}

impl Sides {
    pub(super) fn real() -> Sides {
        Sides {
            payee: |side| Box::new(side),
            payer: |side| Box::new(side),
        }
    }
}

/// The fault planted in one hand-over. Messages count from the payee's first request (0).
#[derive(Clone, Copy, Debug)]
enum Fault {
    None,
    /// The link is cut as message `at` is sent: it is lost, and both sides abandon.
    Cut {
        at: usize,
    },
    /// The receiver of the hand-over's payment number `payment` (0: the payer's, 1: the change)
    /// takes it with its device and vanishes: it answers nothing, and the link closes.
    Vanish {
        payment: usize,
    },
    /// The sender of message `at` (or of the first one after it that is neither a payment nor a
    /// refusal) is hostile and sends another message in its place.
    Hostile {
        at: usize,
        kind: Hostile,
    },
}

#[derive(Clone, Copy, Debug)]
enum Hostile {
    /// A message the receiver does not expect at this point.
    OutOfTurn,
    /// One of five malformed messages.
    Garbage(u8),
    /// A message of this hand-over sent again: the receiver's own last one (`true`, an echo), or
    /// the sender's.
    Duplicate(bool),
}

/// How one side's part in a hand-over ended.
#[derive(Debug)]
enum End {
    Open,
    Finished(HandedOver),
    Refused(HandOverError),
    /// The link closed under it (cut, the other side vanished or went silent): it abandoned.
    Closed,
    /// It took a payment and vanished.
    Vanished,
}

/// A payment sent and never taken: the receiver, the request it answered, its tokens and value.
struct Lost {
    to: usize,
    nonce: [u8; 16],
    tokens: Vec<Token>,
    value: u64,
}

/// One hand-over under way, as the world sees it; arrays are indexed by side (payee, payer).
struct HandOver {
    amount: u64,
    /// The payee's first request.
    request: PaymentRequest,
    fault: Fault,
    hostile_sent: bool,
    cut: bool,
    devices: [usize; 2],
    sides: [Box<dyn HandOverSide>; 2],
    ends: [End; 2],
    balances: [u64; 2],
    keys: [usize; 2],
    /// Value of the payments each side took, how many, and the value each sent.
    took: [u64; 2],
    took_count: [usize; 2],
    sent: [u64; 2],
    payments: usize,
    /// Every message put on the link, with its sender.
    log: Vec<(usize, HandOverMessage)>,
    lost: Vec<Lost>,
}

impl HandOver {
    fn open(&self, side: usize) -> bool {
        matches!(self.ends[side], End::Open)
    }
}

/// What the link carries next: the sender and the message.
type Next = Option<(usize, HandOverMessage)>;

impl<R: OfflineRole> World<R> {
    /// A payment as a direct hand-over between two devices, over a link the world carries, with
    /// this hand-over's fault (if any); then the hand-over's checks.
    pub(super) fn hand_over(&mut self) -> Result<(), Violation> {
        let payer = self.rng.gen_range(0..self.devices.len());
        let mut payee = self.rng.gen_range(0..self.devices.len() - 1);
        if payee >= payer {
            payee += 1;
        }
        let (amount, max) = self.hand_over_terms(payer, payee);
        let fault = self.hand_over_fault();
        let nonce: [u8; 16] = self.rng.gen();
        let balances = [payee, payer].map(|d| self.devices[d].device.balance());
        let keys = [payee, payer].map(|d| self.devices[d].device.keys_left());
        let (payee_side, first) = match PayeeHandOver::start(&mut self.devices[payee].device, amount, nonce, self.step)
        {
            Ok(started) => started,
            // No certified key left: it receives nothing until it syncs.
            Err(_) => return Ok(()),
        };
        let HandOverMessage::Request(request) = first else {
            return Err(self.violation(format!("a hand-over that starts with {first:?}")));
        };
        self.report.hand_overs += 1;
        let mut x = HandOver {
            amount,
            request,
            fault,
            hostile_sent: false,
            cut: false,
            devices: [payee, payer],
            sides: [
                (self.sides.payee)(payee_side),
                (self.sides.payer)(PayerHandOver::new(max)),
            ],
            ends: [End::Open, End::Open],
            balances,
            keys,
            took: [0; 2],
            took_count: [0; 2],
            sent: [0; 2],
            payments: 0,
            log: Vec::new(),
            lost: Vec::new(),
        };
        let mut next = Some((PAYEE, HandOverMessage::Request(request)));
        while let Some((from, message)) = next.take() {
            if x.log.len() >= MESSAGES_MAX {
                return Err(self.violation(format!("a hand-over still going after {MESSAGES_MAX} messages")));
            }
            next = self.carry(&mut x, from, message)?;
        }
        self.close(&mut x)?;
        self.check_hand_over(&x)?;
        self.count_hand_over(&x);
        Ok(())
    }

    /// What the payee asks and the most the payer agrees to pay: one of the payer's tokens' value,
    /// or that less one of the payee's (change it can give, unless the payer makes it otherwise),
    /// or a price up to one (change, often), or up to what the payer holds, or a little more (not
    /// payable); the most is sometimes below the amount.
    fn hand_over_terms(&mut self, payer: usize, payee: usize) -> (u64, u64) {
        let balance = self.devices[payer].device.balance();
        let pick = self.rng.gen_range(0..usize::MAX);
        let token = self.devices[payer].payable_value(pick).unwrap_or(1);
        let pick = self.rng.gen_range(0..usize::MAX);
        let change = self.devices[payee].payable_value(pick).filter(|change| *change < token);
        let amount = match self.rng.gen_range(0..20) {
            0..=3 => token,
            4..=8 => token - change.unwrap_or(0),
            9..=12 => self.rng.gen_range(1..=token),
            13..=16 => self.rng.gen_range(1..=balance.max(1)),
            _ => self.rng.gen_range(1..=balance + balance / 4 + 1),
        };
        let max = match self.chance(50) {
            true => amount - 1,
            false => amount,
        };
        (amount, max)
    }

    fn hand_over_fault(&mut self) -> Fault {
        if !self.chance(self.options.hand_over_fault_per_mille) {
            return Fault::None;
        }
        match self.rng.gen_range(0..3) {
            0 => Fault::Cut {
                at: self.rng.gen_range(0..6),
            },
            1 => Fault::Vanish {
                payment: self.rng.gen_range(0..2),
            },
            _ => {
                let kind = match self.rng.gen_range(0..3) {
                    0 => Hostile::OutOfTurn,
                    1 => Hostile::Garbage(self.rng.gen_range(0..5)),
                    _ => Hostile::Duplicate(self.rng.gen()),
                };
                Fault::Hostile {
                    at: self.rng.gen_range(0..6),
                    kind,
                }
            }
        }
    }

    /// The link carries `message` from side `from`: lost, taken by a vanishing side, replaced by
    /// a hostile one, or handed to the other side, whose answer (if any) is returned.
    fn carry(&mut self, x: &mut HandOver, from: usize, message: HandOverMessage) -> Result<Next, Violation> {
        let to = 1 - from;
        let index = x.log.len();
        if let Fault::Hostile { at, kind } = x.fault {
            let replaceable = !matches!(message, HandOverMessage::Payment { .. } | HandOverMessage::Refused(_));
            if index >= at && !x.hostile_sent && replaceable && x.open(to) {
                x.hostile_sent = true;
                let hostile = self.hostile_message(x, from, &message, kind);
                x.log.push((from, hostile.clone()));
                return self.take_hostile(x, to, hostile);
            }
        }
        x.log.push((from, message.clone()));
        let payment = self.sent_payment(x, from, &message)?;
        let lost = |x: &mut HandOver| {
            if let (Some(value), HandOverMessage::Payment { nonce, tokens }) = (payment, &message) {
                x.lost.push(Lost {
                    to,
                    nonce: *nonce,
                    tokens: tokens.clone(),
                    value,
                });
            }
        };
        match x.fault {
            Fault::Cut { at } if at == index => {
                x.cut = true;
                lost(x);
                return Ok(None);
            }
            Fault::Vanish { payment: number } if payment.is_some() && x.payments == number + 1 && x.open(to) => {
                return self.vanish(x, to, message, payment.expect("a payment"));
            }
            _ => {}
        }
        if !x.open(to) {
            // Nobody reads on the other end any more.
            lost(x);
            return Ok(None);
        }
        self.take(x, to, message, payment)
    }

    /// Records a payment a side's state machine put on the link: the statements in the model
    /// (the tokens are the receiver's now, taken or not), the value sent, and a cheater's copies.
    fn sent_payment(
        &mut self,
        x: &mut HandOver,
        from: usize,
        message: &HandOverMessage,
    ) -> Result<Option<u64>, Violation> {
        let HandOverMessage::Payment { tokens, .. } = message else {
            return Ok(None);
        };
        let receiver = x.devices[1 - from];
        let mut value = 0;
        for token in tokens {
            let links = token.links();
            let (parent, child) = (links[links.len() - 2], links[links.len() - 1]);
            self.model_child(parent, child)?;
            let worth = self.model[&parent].value;
            self.model_node(child, Some(parent), receiver, worth);
            self.trace.write(&child);
            value += worth;
        }
        x.sent[from] += value;
        x.payments += 1;
        let sender = x.devices[from];
        if self.devices[sender].cheater && self.chance(self.options.copy_per_mille) {
            let ring = self.ring.clone();
            self.devices[sender].keep_copies(tokens, &ring);
            self.report.copies_kept += tokens.len() as u64;
        }
        Ok(Some(value))
    }

    /// Side `to` steps `message` (a payment worth `payment`, if one a state machine sent).
    fn take(
        &mut self,
        x: &mut HandOver,
        to: usize,
        message: HandOverMessage,
        payment: Option<u64>,
    ) -> Result<Next, Violation> {
        let device = x.devices[to];
        let balance = self.devices[device].device.balance();
        let fresh: [u8; 16] = self.rng.gen();
        let ring = self.ring.clone();
        let stepped = x.sides[to].on_message(
            &mut self.devices[device].device,
            message.clone(),
            &ring,
            fresh,
            self.step,
        );
        let step = match stepped {
            Ok(step) => step,
            Err(error) => {
                // An honest payment: the only reason to refuse it here is a token this receiver
                // knows revoked (every device has the same ring and hop limit).
                let revoked = matches!(error, HandOverError::Device(DeviceError::Revoked { .. }));
                let why = error.to_string();
                let answer = self.refused(x, to, balance, error)?;
                if let (Some(value), HandOverMessage::Payment { nonce, tokens }) = (payment, message) {
                    if !revoked {
                        return Err(self.violation(format!("device {device} refused an honest payment: {why}")));
                    }
                    x.lost.push(Lost {
                        to,
                        nonce,
                        tokens,
                        value,
                    });
                }
                return Ok(answer);
            }
        };
        if let (Some(value), HandOverMessage::Payment { tokens, .. }) = (payment, message) {
            x.took[to] += value;
            x.took_count[to] += 1;
            self.paid.push((device, tokens));
        }
        Ok(match step {
            Step::Send(reply) => Some((to, reply)),
            Step::Finish(last, handed_over) => {
                x.ends[to] = End::Finished(handed_over);
                last.map(|last| (to, last))
            }
        })
    }

    /// Side `to` refused a message with `error`: it abandons (withdrawing what it offered) and
    /// tells the other side why, unless it was refused itself. Its balance must be as it was
    /// before the message (`balance`).
    fn refused(&mut self, x: &mut HandOver, to: usize, balance: u64, error: HandOverError) -> Result<Next, Violation> {
        let device = x.devices[to];
        x.sides[to].abandon(&mut self.devices[device].device);
        let after = self.devices[device].device.balance();
        if after != balance {
            return Err(self.violation(format!(
                "device {device} refused a message ({error}), yet its balance went from {balance} to {after}"
            )));
        }
        let answer = match &error {
            HandOverError::Refused(_) => None,
            error => Some((to, HandOverMessage::Refused(error.to_string()))),
        };
        x.ends[to] = End::Refused(error);
        Ok(answer)
    }

    /// A hostile message reaches side `to`: it must refuse it.
    fn take_hostile(&mut self, x: &mut HandOver, to: usize, message: HandOverMessage) -> Result<Next, Violation> {
        let device = x.devices[to];
        let balance = self.devices[device].device.balance();
        let fresh: [u8; 16] = self.rng.gen();
        let ring = self.ring.clone();
        let stepped = x.sides[to].on_message(
            &mut self.devices[device].device,
            message.clone(),
            &ring,
            fresh,
            self.step,
        );
        match stepped {
            Ok(step) => Err(self.violation(format!("device {device} took a hostile {message:?}: {step:?}"))),
            Err(error) => {
                self.report.hostile_refused += 1;
                self.refused(x, to, balance, error)
            }
        }
    }

    /// Side `to` takes the payment with its device, outside the protocol, and vanishes.
    fn vanish(&mut self, x: &mut HandOver, to: usize, message: HandOverMessage, value: u64) -> Result<Next, Violation> {
        let HandOverMessage::Payment { nonce, tokens } = message else {
            return Err(self.violation("a vanishing side given no payment"));
        };
        let device = x.devices[to];
        let ring = self.ring.clone();
        match self.devices[device].device.receive(&nonce, &tokens, &ring, self.step) {
            Ok(got) if got == value => {
                x.took[to] += got;
                x.took_count[to] += 1;
                self.paid.push((device, tokens));
            }
            Ok(got) => return Err(self.violation(format!("device {device} took {got} for a payment of {value}"))),
            Err(DeviceError::Revoked { .. }) => {
                x.sides[to].abandon(&mut self.devices[device].device);
                x.lost.push(Lost {
                    to,
                    nonce,
                    tokens,
                    value,
                });
            }
            Err(error) => return Err(self.violation(format!("device {device} refused an honest payment: {error}"))),
        }
        x.ends[to] = End::Vanished;
        Ok(None)
    }

    /// The message a hostile side sends in place of `honest`.
    fn hostile_message(
        &mut self,
        x: &HandOver,
        from: usize,
        honest: &HandOverMessage,
        kind: Hostile,
    ) -> HandOverMessage {
        let to = 1 - from;
        // Done is expected exactly where the honest message is done.
        let out_of_turn = match honest {
            HandOverMessage::Done => HandOverMessage::Request(x.request),
            _ => HandOverMessage::Done,
        };
        match kind {
            Hostile::OutOfTurn => out_of_turn,
            Hostile::Duplicate(echo) => {
                let sender = if echo { to } else { from };
                let sent = x.log.iter().rev().find(|(by, _)| *by == sender);
                sent.map_or(out_of_turn, |(_, message)| message.clone())
            }
            Hostile::Garbage(which) => {
                // The request the receiver has open, as far as the link showed it.
                let opened = x.log.iter().rev().find_map(|(by, message)| match message {
                    HandOverMessage::Request(request) if *by == to => Some(request.nonce),
                    HandOverMessage::Change { change, .. } if *by == to => Some(change.nonce),
                    _ => None,
                });
                let nonce = opened.unwrap_or_else(|| self.rng.gen());
                match which {
                    0 => {
                        let tokens = match self.paid.is_empty() {
                            true => Vec::new(),
                            false => self.paid[self.rng.gen_range(0..self.paid.len())].1.clone(),
                        };
                        HandOverMessage::Payment { nonce, tokens }
                    }
                    1 => HandOverMessage::Payment { nonce, tokens: vec![] },
                    2 => HandOverMessage::Change {
                        offer: x.amount,
                        change: x.request,
                    },
                    3 => {
                        let mut forged = x.request;
                        if let HandOverMessage::Request(honest) = honest {
                            forged.amount = honest.amount;
                        }
                        forged.certificate.signature[0] ^= 1;
                        HandOverMessage::Request(forged)
                    }
                    _ => HandOverMessage::Refused("\u{0}\u{7f} no".into()),
                }
            }
        }
    }

    /// The link closes: a side still waiting abandons. A payment lost on the way arrives late:
    /// its receiver must refuse it (the request it answered was withdrawn), and its tokens stay
    /// in limbo, known to the world.
    fn close(&mut self, x: &mut HandOver) -> Result<(), Violation> {
        for side in [PAYEE, PAYER] {
            if x.open(side) {
                x.sides[side].abandon(&mut self.devices[x.devices[side]].device);
                x.ends[side] = End::Closed;
            }
        }
        let ring = self.ring.clone();
        for lost in &x.lost {
            let device = x.devices[lost.to];
            if self.devices[device]
                .device
                .receive(&lost.nonce, &lost.tokens, &ring, self.step)
                .is_ok()
            {
                return Err(self.violation(format!("device {device} took a payment lost in the hand-over, late")));
            }
            self.report.late_payments_refused += 1;
            self.report.tokens_in_limbo += lost.tokens.len() as u64;
            self.limbo.extend(lost.tokens.iter().cloned());
        }
        Ok(())
    }

    fn check_hand_over(&self, x: &HandOver) -> Result<(), Violation> {
        let mut moved = [0i128; 2];
        for side in [PAYEE, PAYER] {
            let device = &self.devices[x.devices[side]].device;
            moved[side] = i128::from(device.balance()) - i128::from(x.balances[side]);
            let (took, sent) = (x.took[side], x.sent[side]);
            if moved[side] != i128::from(took) - i128::from(sent) {
                return Err(self.violation(format!(
                    "device {}'s balance moved by {} in a hand-over where it took {took} and paid {sent}",
                    x.devices[side], moved[side]
                )));
            }
            if device.keys_left() + x.took_count[side] != x.keys[side] {
                return Err(self.violation(format!(
                    "device {} has {} keys left after taking {} payments, from {}: a request left open",
                    x.devices[side],
                    device.keys_left(),
                    x.took_count[side],
                    x.keys[side]
                )));
            }
            if let End::Finished(handed_over) = x.ends[side] {
                if (handed_over.received, handed_over.paid) != (took, sent) {
                    return Err(self.violation(format!(
                        "device {} reports {handed_over:?}, having taken {took} and paid {sent}",
                        x.devices[side]
                    )));
                }
            }
        }
        let lost: u64 = x.lost.iter().map(|lost| lost.value).sum();
        if moved[PAYEE] + moved[PAYER] + i128::from(lost) != 0 {
            return Err(self.violation(format!(
                "a hand-over moved {} to the payee and {} to the payer, with {lost} lost",
                moved[PAYEE], moved[PAYER]
            )));
        }
        let amount = i128::from(x.amount);
        let completed = matches!(x.ends, [End::Finished(_), End::Finished(_)]);
        if completed && (moved[PAYEE], moved[PAYER]) != (amount, -amount) {
            return Err(self.violation(format!("a completed hand-over of {amount} moved {moved:?}")));
        }
        if !matches!(x.ends[PAYEE], End::Vanished) && moved[PAYEE] != 0 && moved[PAYEE] != amount {
            return Err(self.violation(format!(
                "an honest payee that asked {amount} ends with {} more ({:?})",
                moved[PAYEE], x.ends
            )));
        }
        Ok(())
    }

    fn count_hand_over(&mut self, x: &HandOver) {
        self.trace.write(format!("{:?}{:?}", x.fault, x.ends).as_bytes());
        let report = &mut self.report;
        match &x.ends {
            [End::Finished(payee), End::Finished(_)] => {
                report.hand_overs_completed += 1;
                report.hand_overs_with_change += u64::from(payee.paid > 0);
            }
            _ if x.cut => report.hand_overs_cut += 1,
            [End::Vanished, _] | [_, End::Vanished] => report.hand_overs_vanished += 1,
            ends => {
                report.hand_overs_refused += 1;
                let not_payable = ends.iter().any(|end| {
                    matches!(
                        end,
                        End::Refused(
                            HandOverError::NoChange { .. }
                                | HandOverError::Device(
                                    DeviceError::NotEnough { .. } | DeviceError::NoExactChange { .. }
                                )
                        )
                    )
                });
                report.hand_overs_not_payable += u64::from(not_payable);
            }
        }
    }
}
