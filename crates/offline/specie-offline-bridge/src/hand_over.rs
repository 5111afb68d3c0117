//! A direct hand-over between two device processes over a local TCP link (127.0.0.1 in tests; a
//! phone would use NFC or Bluetooth): the device crate's hand-over state machines, one message per
//! line. The payee listens; the payer connects. Every line is bounded before it is read whole,
//! every wait has a time-out, and the device file is saved before any message that its state
//! change produced leaves the process.
//!
//! Lines: `request <request string>`, `pay <payment string>`, `change <offer> <request string>`,
//! `done`, `refused <why>` (the strings of `specie offline device request` and `pay`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use specie_offline::{KeyRing, TOKEN_BYTES_MAX};
use specie_offline_device::{
    HandOverError, HandOverMessage, HandOverSide, HandedOver, PayeeHandOver, PayerHandOver, Step,
};

use crate::device::{
    parse_payment, parse_request, payment_string, request_string, DeviceCommandError, DeviceFile,
    TOKENS_PER_PAYMENT_MAX,
};

/// The longest line: a payment string of the most tokens, with room for the word before it.
pub const HAND_OVER_LINE_BYTES_MAX: usize = 2 * (16 + 1 + TOKENS_PER_PAYMENT_MAX * TOKEN_BYTES_MAX) + 256;
/// The longest a refusal's reason may be.
const REASON_BYTES_MAX: usize = 512;

/// Why a direct hand-over failed.
#[derive(Debug, thiserror::Error)]
pub enum DirectError {
    #[error("the link to the other device: {0}")]
    Link(#[from] std::io::Error),
    #[error("the other device sent a line longer than {HAND_OVER_LINE_BYTES_MAX} bytes")]
    LineTooLong,
    #[error("the other device sent something that is not an exchange message: {0}")]
    Garbled(String),
    #[error(transparent)]
    HandOver(#[from] HandOverError),
    #[error(transparent)]
    Device(#[from] DeviceCommandError),
}

fn encode(message: &HandOverMessage) -> String {
    match message {
        HandOverMessage::Request(request) => format!("request {}", request_string(request)),
        HandOverMessage::Payment { nonce, tokens } => format!("pay {}", payment_string(nonce, tokens)),
        HandOverMessage::Change { offer, change } => format!("change {offer} {}", request_string(change)),
        HandOverMessage::Done => "done".into(),
        HandOverMessage::Refused(why) => {
            let mut why: String = why.chars().filter(|c| !c.is_control()).collect();
            why.truncate(why.floor_char_boundary(REASON_BYTES_MAX));
            format!("refused {why}")
        }
    }
}

/// One line (without its newline) as a hand-over message: what the other device sent, hostile until
/// checked.
pub fn decode_line(line: &str) -> Result<HandOverMessage, DirectError> {
    let garbled = |why: String| DirectError::Garbled(why);
    let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
    match word {
        "request" => Ok(HandOverMessage::Request(parse_request(rest)?)),
        "pay" => {
            let (nonce, tokens) = parse_payment(rest)?;
            Ok(HandOverMessage::Payment { nonce, tokens })
        }
        "change" => {
            let (offer, request) = rest
                .split_once(' ')
                .ok_or_else(|| garbled("a change without its request".into()))?;
            let offer = offer
                .parse()
                .map_err(|_| garbled(format!("a change offer that is not an amount: {offer}")))?;
            Ok(HandOverMessage::Change {
                offer,
                change: parse_request(request)?,
            })
        }
        "done" if rest.is_empty() => Ok(HandOverMessage::Done),
        "refused" => Ok(HandOverMessage::Refused(rest.chars().take(REASON_BYTES_MAX).collect())),
        _ => Err(garbled(format!(
            "a line starting {:?}",
            word.chars().take(16).collect::<String>()
        ))),
    }
}

/// One side of the link, with its time-out.
struct Link {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Link {
    fn new(stream: TcpStream, timeout: Duration) -> Result<Link, DirectError> {
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(Link {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        })
    }

    fn send(&mut self, message: &HandOverMessage) -> Result<(), DirectError> {
        let mut line = encode(message);
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        Ok(self.writer.flush()?)
    }

    fn receive(&mut self) -> Result<HandOverMessage, DirectError> {
        let mut line = Vec::new();
        let limit = HAND_OVER_LINE_BYTES_MAX as u64 + 1;
        (&mut self.reader).take(limit).read_until(b'\n', &mut line)?;
        if line.last() != Some(&b'\n') {
            return Err(match line.len() as u64 >= limit {
                true => DirectError::LineTooLong,
                false => DirectError::Link(std::io::ErrorKind::UnexpectedEof.into()),
            });
        }
        let text =
            std::str::from_utf8(&line[..line.len() - 1]).map_err(|_| DirectError::Garbled("not UTF-8".into()))?;
        decode_line(text.trim_end_matches('\r'))
    }
}

fn fresh_nonce() -> [u8; 16] {
    let mut nonce = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut nonce);
    nonce
}

/// Runs `side` until the hand-over ends: each message from the other device is stepped, the file
/// saved, then the answer sent. On any failure the side withdraws what it offered, tells the
/// other device why (unless it was the one refusing), and saves.
fn run(
    side: &mut dyn HandOverSide,
    file: &mut DeviceFile,
    link: &mut Link,
    ring: &KeyRing,
    now_ms: u64,
) -> Result<HandedOver, DirectError> {
    loop {
        let stepped = link
            .receive()
            .and_then(|message| Ok(side.on_message(&mut file.device, message, ring, fresh_nonce(), now_ms)?));
        match stepped {
            Ok(Step::Send(message)) => {
                file.save()?;
                link.send(&message)?;
            }
            Ok(Step::Finish(last, handed_over)) => {
                file.save()?;
                if let Some(message) = last {
                    link.send(&message)?;
                }
                return Ok(handed_over);
            }
            Err(error) => {
                side.abandon(&mut file.device);
                file.save()?;
                if !matches!(
                    error,
                    DirectError::HandOver(HandOverError::Refused(_)) | DirectError::Link(_)
                ) {
                    let _ = link.send(&HandOverMessage::Refused(error.to_string()));
                }
                return Err(error);
            }
        }
    }
}

/// The payee: waits on `listener` for one payer, asks it for `amount`, and takes the payment
/// (giving change if the payer asks and it can).
pub fn receive_direct(
    file: &mut DeviceFile,
    listener: &TcpListener,
    amount: u64,
    ring: &KeyRing,
    timeout: Duration,
    now_ms: u64,
) -> Result<HandedOver, DirectError> {
    let (stream, _) = listener.accept()?;
    let mut link = Link::new(stream, timeout)?;
    let (mut side, request) = PayeeHandOver::start(&mut file.device, amount, fresh_nonce(), now_ms)?;
    file.save()?;
    if let Err(error) = link.send(&request) {
        side.abandon(&mut file.device);
        file.save()?;
        return Err(error);
    }
    run(&mut side, file, &mut link, ring, now_ms)
}

/// The payer: connects to the payee at `to` and pays what it asks, if at most `max`.
pub fn pay_direct(
    file: &mut DeviceFile,
    to: SocketAddr,
    max: u64,
    ring: &KeyRing,
    timeout: Duration,
    now_ms: u64,
) -> Result<HandedOver, DirectError> {
    let stream = TcpStream::connect_timeout(&to, timeout)?;
    let mut link = Link::new(stream, timeout)?;
    run(&mut PayerHandOver::new(max), file, &mut link, ring, now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_line_is_bounded_and_single_line() {
        let message = HandOverMessage::Refused(format!("a\nb{}", "x".repeat(4 * REASON_BYTES_MAX)));
        let line = encode(&message);
        assert!(!line.contains('\n'));
        assert!(line.len() <= "refused ".len() + REASON_BYTES_MAX);
        assert!(matches!(decode_line(&line), Ok(HandOverMessage::Refused(_))));
    }

    #[test]
    fn garbage_lines_are_refused_with_a_reason() {
        for line in [
            "",
            "hello",
            "done now",
            "change 5",
            "change five specie-offline-request1:00",
            "pay zz",
        ] {
            assert!(decode_line(line).is_err(), "{line:?}");
        }
        assert_eq!(decode_line("done").unwrap(), HandOverMessage::Done);
    }
}
