//! Which version of specie's protocol two processes speak, agreed in the TLS handshake (ALPN)
//! before either reads a frame. Pure: the transport hands it the identifiers a client offers and
//! acts on the verdict.
//!
//! A process speaks a range of versions, [`ProtocolVersions`]: the one it was built for and the
//! oldest it still understands. A client offers every version of its range, newest first, as
//! `specie/<version>`; the server takes the newest one it speaks too. A release that changes
//! what a message means raises `newest` and keeps `oldest` where it was while it still speaks the
//! old meaning, so a cluster can be upgraded one process at a time: old and new processes agree
//! on the old version until the last old one is gone. A peer with no version in common is turned
//! away with a message naming both ranges (`docs/wire-protocol.md`, "Protocol versions").

use std::fmt;

/// The versions this build speaks. Version 1 is the protocol of `docs/wire-protocol.md`.
pub const PROTOCOL: ProtocolVersions = ProtocolVersions { oldest: 1, newest: 1 };

/// How an ALPN identifier of specie's protocol begins; the version follows in decimal.
const ALPN_PREFIX: &[u8] = b"specie/";
/// The most identifiers a client offers (far above any range a build will speak).
pub const OFFERED_MAX: usize = 16;

/// A range of protocol versions, both ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProtocolVersions {
    pub oldest: u16,
    pub newest: u16,
}

impl ProtocolVersions {
    /// The identifiers a client offers, newest first (at most [`OFFERED_MAX`]).
    pub fn alpn_ids(&self) -> Vec<Vec<u8>> {
        assert!(self.oldest >= 1 && self.oldest <= self.newest, "invalid range {self}");
        (self.oldest..=self.newest)
            .rev()
            .take(OFFERED_MAX)
            .map(alpn_id)
            .collect()
    }

    pub fn contains(&self, version: u16) -> bool {
        (self.oldest..=self.newest).contains(&version)
    }

    /// What a server speaking `self` makes of what a client offered: the ALPN identifiers of its
    /// ClientHello, `None` if it sent no ALPN extension. A client that offers none is a build from
    /// before versions were agreed, which speaks version 1 ([`UNNAMED`]).
    pub fn negotiate<'a>(&self, offered: Option<impl Iterator<Item = &'a [u8]>>) -> Negotiated {
        let versions: Vec<u16> = match offered {
            Some(offered) => offered.take(OFFERED_MAX).filter_map(parse_alpn_id).collect(),
            None => vec![UNNAMED],
        };
        if let Some(&agreed) = versions.iter().filter(|v| self.contains(**v)).max() {
            return Negotiated::Agreed(agreed);
        }
        let theirs = match (versions.iter().min(), versions.iter().max()) {
            (Some(&oldest), Some(&newest)) => Some(ProtocolVersions { oldest, newest }),
            _ => None,
        };
        Negotiated::Incompatible(Incompatible {
            refused_by: End::Server,
            ours: *self,
            theirs,
        })
    }
}

/// The version of a peer that names none in its handshake: builds from before versions were
/// agreed speak version 1, so that a cluster of them can be upgraded one process at a time.
pub const UNNAMED: u16 = 1;

impl fmt::Display for ProtocolVersions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.oldest == self.newest {
            write!(f, "version {}", self.newest)
        } else {
            write!(f, "versions {} to {}", self.oldest, self.newest)
        }
    }
}

/// The ALPN identifier of one version.
pub fn alpn_id(version: u16) -> Vec<u8> {
    let mut id = ALPN_PREFIX.to_vec();
    id.extend_from_slice(version.to_string().as_bytes());
    id
}

/// The version an ALPN identifier names, if it is one of specie's (`specie/` and a decimal
/// version from 1, without leading zeros, so each version has one identifier).
pub fn parse_alpn_id(id: &[u8]) -> Option<u16> {
    let digits = id.strip_prefix(ALPN_PREFIX)?;
    if digits.is_empty() || digits[0] == b'0' || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The server's verdict on a client's offer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Negotiated {
    /// The newest version both speak.
    Agreed(u16),
    Incompatible(Incompatible),
}

/// Two processes with no version in common. Its message names both sides' versions and what
/// to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incompatible {
    /// Which end found it out: the server, from the client's offer, or the client, from what
    /// the server chose.
    pub refused_by: End,
    /// What the end that refused speaks.
    pub ours: ProtocolVersions,
    /// What the other end speaks; `None` if it named no version of specie's protocol.
    pub theirs: Option<ProtocolVersions>,
}

/// One end of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Server,
    Client,
}

impl End {
    fn other(self) -> End {
        match self {
            End::Server => End::Client,
            End::Client => End::Server,
        }
    }
}

impl fmt::Display for End {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            End::Server => "server",
            End::Client => "client",
        })
    }
}

impl fmt::Display for Incompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (us, them) = (self.refused_by, self.refused_by.other());
        write!(
            f,
            "incompatible protocol: the {us} speaks specie protocol {}, ",
            self.ours
        )?;
        match self.theirs {
            Some(theirs) => write!(f, "the {them} speaks {theirs}")?,
            None => write!(
                f,
                "the {them} names no version (a build from before version 1, or not specie)"
            )?,
        }
        write!(
            f,
            "; upgrade one of them to a build that speaks both (docs/operator-guide.md, \"Upgrading a cluster\")"
        )
    }
}

impl std::error::Error for Incompatible {}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn offer(ids: &[Vec<u8>]) -> Negotiated {
        PROTOCOL.negotiate(Some(ids.iter().map(Vec::as_slice)))
    }

    #[test]
    fn identifiers_name_each_version_once() {
        assert_eq!(alpn_id(1), b"specie/1");
        assert_eq!(parse_alpn_id(b"specie/1"), Some(1));
        assert_eq!(parse_alpn_id(b"specie/65535"), Some(65535));
        for other in [
            &b"specie/01"[..],
            b"specie/0",
            b"specie/",
            b"specie/65536",
            b"specie/1 ",
            b"h2",
            b"SPECIE/1",
        ] {
            assert_eq!(parse_alpn_id(other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn verdicts_name_both_sides() {
        let range = ProtocolVersions { oldest: 2, newest: 4 };
        let newer = |ids: &[&[u8]]| range.negotiate(Some(ids.iter().copied()));
        assert_eq!(newer(&[b"specie/5", b"specie/4", b"specie/3"]), Negotiated::Agreed(4));
        assert_eq!(newer(&[b"h2", b"specie/2"]), Negotiated::Agreed(2));
        let Negotiated::Incompatible(old) = newer(&[b"specie/1"]) else {
            panic!("version 1 agreed with 2 to 4")
        };
        let message = old.to_string();
        assert!(
            message.contains("the server speaks specie protocol versions 2 to 4"),
            "{message}"
        );
        assert!(message.contains("the client speaks version 1"), "{message}");
        let Negotiated::Incompatible(none) = newer(&[b"h2"]) else {
            panic!("h2 agreed")
        };
        assert_eq!(none.theirs, None);
        // A build from before versions were agreed speaks version 1.
        let silent = range.negotiate(None::<std::iter::Empty<&[u8]>>);
        let unnamed = ProtocolVersions { oldest: 1, newest: 1 };
        assert!(matches!(silent, Negotiated::Incompatible(Incompatible { theirs: Some(v), .. }) if v == unnamed));
        assert_eq!(
            PROTOCOL.negotiate(None::<std::iter::Empty<&[u8]>>),
            Negotiated::Agreed(1)
        );
        assert!(matches!(offer(&PROTOCOL.alpn_ids()), Negotiated::Agreed(v) if v == PROTOCOL.newest));
    }

    proptest! {
        /// Against the model: the server agrees on the newest version in both ranges, and on
        /// nothing exactly when the ranges do not meet.
        #[test]
        fn agreement_is_the_newest_common_version(a in 1u16..40, b in 0u16..10, c in 1u16..40, d in 0u16..10) {
            let server = ProtocolVersions { oldest: a, newest: a + b };
            let client = ProtocolVersions { oldest: c, newest: c + d };
            let ids = client.alpn_ids();
            let verdict = server.negotiate(Some(ids.iter().map(Vec::as_slice)));
            let common = (client.oldest..=client.newest).filter(|v| server.contains(*v)).max();
            match common {
                Some(version) => prop_assert_eq!(verdict, Negotiated::Agreed(version)),
                None => prop_assert_eq!(
                    verdict,
                    Negotiated::Incompatible(Incompatible { refused_by: End::Server, ours: server, theirs: Some(client) })
                ),
            }
        }
    }
}
