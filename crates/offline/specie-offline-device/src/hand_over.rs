//! One hand-over between two devices that can talk (a local link: 127.0.0.1, NFC, Bluetooth), as
//! two sans-IO state machines: the payee asks, the payer pays; a payer without exact change pays
//! the smallest amount above it can make and asks for the difference back, which the payee pays
//! in the same hand-over. The driver carries [`HandOverMessage`]s and hands each side its fresh
//! nonces and the time.
//!
//! Who goes first when there is change: the payer pays the larger amount, then the payee pays
//! the change, as with cash over a counter. The payee promises change only after checking it can
//! make it exactly and pay it to the payer's request (its key certified, and recently enough), so
//! an honest payee always completes; a payee that vanishes after taking the
//! larger amount leaves the payer short by the change, as a cashier who walks off would. The
//! payer's `max` caps the amount asked (what the payment takes in the end), not the larger amount
//! it hands over first: that is the smallest amount above the price its tokens make, so what a
//! vanishing payee can keep beyond the price is less than the smallest token handed over.

use specie_offline::{KeyRing, Token};

use crate::{Device, DeviceError, PaymentRequest};

/// What one device sends the other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandOverMessage {
    /// The payee asks for a payment (first, and again for the larger amount of a change).
    Request(PaymentRequest),
    /// Tokens paying the request of `nonce` (the payer's, or the payee's change).
    Payment { nonce: [u8; 16], tokens: Vec<Token> },
    /// The payer cannot make the amount exactly: it offers `offer` and asks for `change` back.
    Change { offer: u64, change: PaymentRequest },
    /// The last word of the side that received last: the hand-over is complete.
    Done,
    /// The sender gives up, saying why; nothing more comes.
    Refused(String),
}

/// How a hand-over ended for one side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandedOver {
    /// Value this device received (the payee's amount or offer; the payer's change).
    pub received: u64,
    /// Value this device paid.
    pub paid: u64,
}

/// What a side does after a message.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this and wait for the next message.
    Send(HandOverMessage),
    /// Send this (if any) and stop: the hand-over is complete.
    Finish(Option<HandOverMessage>, HandedOver),
}

/// Why a hand-over stopped short. The side has withdrawn what it offered; it sends
/// [`HandOverMessage::Refused`] with this error's message if the other side can still hear it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HandOverError {
    #[error("{0}")]
    Device(#[from] DeviceError),
    #[error("the other device refused: {0}")]
    Refused(String),
    #[error("the other device sent {0} out of turn")]
    OutOfTurn(&'static str),
    #[error("asked to pay {asked}, more than the {max} allowed for this exchange")]
    OverMax { asked: u64, max: u64 },
    #[error("the change offered ({offer} for {amount}) is not a larger payment with change back")]
    BadChange { offer: u64, amount: u64 },
    #[error("no change: this device cannot pay {change} back exactly")]
    NoChange { change: u64 },
}

fn kind(message: &HandOverMessage) -> &'static str {
    match message {
        HandOverMessage::Request(_) => "a request",
        HandOverMessage::Payment { .. } => "a payment",
        HandOverMessage::Change { .. } => "a change offer",
        HandOverMessage::Done => "done",
        HandOverMessage::Refused(_) => "a refusal",
    }
}

enum PayeeStage {
    /// Asked for `amount` at `nonce`.
    Asked { nonce: [u8; 16] },
    /// Asked for `offer` at `nonce`, with `change` to pay back once it is paid.
    ChangeAsked {
        nonce: [u8; 16],
        offer: u64,
        change: PaymentRequest,
    },
    /// Paid the change; waiting for the payer's done.
    ChangeGiven { received: u64, paid: u64 },
}

/// Either side of a hand-over, for a driver that runs both alike (the device bridge over its
/// local link, the simulator): each message from the other device stepped, and what this side
/// offered withdrawn when the hand-over fails.
pub trait HandOverSide {
    /// Withdraws what this side has open (on any error, or if the link drops).
    fn abandon(&self, device: &mut Device);

    /// This side's step on the other device's `message`; `fresh_nonce` is used if this side must
    /// ask for a payment (again, or for change).
    fn on_message(
        &mut self,
        device: &mut Device,
        message: HandOverMessage,
        ring: &KeyRing,
        fresh_nonce: [u8; 16],
        now_ms: u64,
    ) -> Result<Step, HandOverError>;
}

/// The payee's side of a hand-over.
pub struct PayeeHandOver {
    amount: u64,
    stage: PayeeStage,
}

impl PayeeHandOver {
    /// Starts by asking for `amount` (a fresh key, the caller's fresh `nonce`): send the request.
    pub fn start(
        device: &mut Device,
        amount: u64,
        nonce: [u8; 16],
        now_ms: u64,
    ) -> Result<(PayeeHandOver, HandOverMessage), HandOverError> {
        let request = device.request(amount, nonce, now_ms)?;
        let hand_over = PayeeHandOver {
            amount,
            stage: PayeeStage::Asked { nonce },
        };
        Ok((hand_over, HandOverMessage::Request(request)))
    }
}

impl HandOverSide for PayeeHandOver {
    /// Withdraws the open request (on any error, or if the link drops).
    fn abandon(&self, device: &mut Device) {
        match self.stage {
            PayeeStage::Asked { nonce } | PayeeStage::ChangeAsked { nonce, .. } => device.cancel_request(&nonce),
            PayeeStage::ChangeGiven { .. } => {}
        }
    }

    /// The payer's next message; `fresh_nonce` is used if the payee must ask again.
    fn on_message(
        &mut self,
        device: &mut Device,
        message: HandOverMessage,
        ring: &KeyRing,
        fresh_nonce: [u8; 16],
        now_ms: u64,
    ) -> Result<Step, HandOverError> {
        match (&self.stage, message) {
            (_, HandOverMessage::Refused(why)) => Err(HandOverError::Refused(why)),
            (PayeeStage::Asked { nonce }, HandOverMessage::Payment { nonce: paid_at, tokens }) if *nonce == paid_at => {
                let received = device.receive(nonce, &tokens, ring, now_ms)?;
                Ok(Step::Finish(
                    Some(HandOverMessage::Done),
                    HandedOver { received, paid: 0 },
                ))
            }
            (PayeeStage::Asked { nonce }, HandOverMessage::Change { offer, change }) => {
                let nonce = *nonce;
                let back = offer
                    .checked_sub(self.amount)
                    .filter(|back| *back > 0 && change.amount == *back);
                let Some(back) = back else {
                    return Err(HandOverError::BadChange {
                        offer,
                        amount: self.amount,
                    });
                };
                // Everything that could stop the change once the larger payment is taken is
                // checked now: the payer's request (its key could be stale, or forged) and the
                // tokens to make it. Else the payee would keep the larger payment and pay nothing
                // back.
                device.check_request(&change, ring)?;
                if !device.can_pay_exactly(back, ring) {
                    return Err(HandOverError::NoChange { change: back });
                }
                let request = device.request(offer, fresh_nonce, now_ms)?;
                device.cancel_request(&nonce);
                self.stage = PayeeStage::ChangeAsked {
                    nonce: fresh_nonce,
                    offer,
                    change,
                };
                Ok(Step::Send(HandOverMessage::Request(request)))
            }
            (PayeeStage::ChangeAsked { nonce, offer, change }, HandOverMessage::Payment { nonce: paid_at, tokens })
                if *nonce == paid_at =>
            {
                let (nonce, offer, change) = (*nonce, *offer, *change);
                let received = device.receive(&nonce, &tokens, ring, now_ms)?;
                debug_assert_eq!(received, offer, "receive checks the amount asked");
                let tokens = device.pay(&change, ring, now_ms)?;
                self.stage = PayeeStage::ChangeGiven {
                    received,
                    paid: change.amount,
                };
                Ok(Step::Send(HandOverMessage::Payment {
                    nonce: change.nonce,
                    tokens,
                }))
            }
            (PayeeStage::ChangeGiven { received, paid }, HandOverMessage::Done) => Ok(Step::Finish(
                None,
                HandedOver {
                    received: *received,
                    paid: *paid,
                },
            )),
            (_, message) => Err(HandOverError::OutOfTurn(kind(&message))),
        }
    }
}

enum PayerStage {
    Start,
    /// Paid `paid` exactly; waiting for the payee's done.
    Paid {
        paid: u64,
    },
    /// Offered more than asked; waiting for the payee's request for it.
    Offered {
        offer: u64,
        change: PaymentRequest,
    },
    /// Paid the offer; waiting for the change.
    AwaitingChange {
        paid: u64,
        change: PaymentRequest,
    },
}

/// The payer's side of a hand-over: pays at most `max` (what its user agreed to).
pub struct PayerHandOver {
    max: u64,
    stage: PayerStage,
}

impl PayerHandOver {
    pub fn new(max: u64) -> PayerHandOver {
        PayerHandOver {
            max,
            stage: PayerStage::Start,
        }
    }
}

impl HandOverSide for PayerHandOver {
    /// Withdraws the change request, if one is open (on any error, or if the link drops).
    fn abandon(&self, device: &mut Device) {
        match &self.stage {
            PayerStage::Offered { change, .. } | PayerStage::AwaitingChange { change, .. } => {
                device.cancel_request(&change.nonce)
            }
            PayerStage::Start | PayerStage::Paid { .. } => {}
        }
    }

    /// The payee's next message; `fresh_nonce` is the change request's, if one is needed.
    fn on_message(
        &mut self,
        device: &mut Device,
        message: HandOverMessage,
        ring: &KeyRing,
        fresh_nonce: [u8; 16],
        now_ms: u64,
    ) -> Result<Step, HandOverError> {
        match (&self.stage, message) {
            (_, HandOverMessage::Refused(why)) => Err(HandOverError::Refused(why)),
            (PayerStage::Start, HandOverMessage::Request(request)) => {
                if request.amount > self.max {
                    return Err(HandOverError::OverMax {
                        asked: request.amount,
                        max: self.max,
                    });
                }
                match device.pay(&request, ring, now_ms) {
                    Ok(tokens) => {
                        self.stage = PayerStage::Paid { paid: request.amount };
                        Ok(Step::Send(HandOverMessage::Payment {
                            nonce: request.nonce,
                            tokens,
                        }))
                    }
                    Err(DeviceError::NoExactChange { amount }) => {
                        let offer = device
                            .smallest_payable_from(amount, ring)
                            .ok_or(DeviceError::NoExactChange { amount })?;
                        let change = device.request(offer - amount, fresh_nonce, now_ms)?;
                        self.stage = PayerStage::Offered { offer, change };
                        Ok(Step::Send(HandOverMessage::Change { offer, change }))
                    }
                    Err(error) => Err(error.into()),
                }
            }
            (PayerStage::Offered { offer, change }, HandOverMessage::Request(request)) if request.amount == *offer => {
                let (offer, change) = (*offer, *change);
                let tokens = device.pay(&request, ring, now_ms)?;
                self.stage = PayerStage::AwaitingChange { paid: offer, change };
                Ok(Step::Send(HandOverMessage::Payment {
                    nonce: request.nonce,
                    tokens,
                }))
            }
            (PayerStage::Paid { paid }, HandOverMessage::Done) => Ok(Step::Finish(
                None,
                HandedOver {
                    received: 0,
                    paid: *paid,
                },
            )),
            (PayerStage::AwaitingChange { paid, change }, HandOverMessage::Payment { nonce, tokens })
                if nonce == change.nonce =>
            {
                let paid = *paid;
                let received = device.receive(&nonce, &tokens, ring, now_ms)?;
                Ok(Step::Finish(Some(HandOverMessage::Done), HandedOver { received, paid }))
            }
            (_, message) => Err(HandOverError::OutOfTurn(kind(&message))),
        }
    }
}
