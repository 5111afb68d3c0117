//! A token's history as the authority keeps it: every statement it verified, as a tree whose
//! nodes are links (docs/offline-mode.md, "The double-spend rule"). The prototype kept one list
//! per token and compared each deposit with it (seed 001, §IV-F); a tree sees every branch, so a
//! double spend nested in another one names both spenders, whatever order the copies arrive in.
//!
//! The rule: the owner of a node with two different child statements, at least one of them a
//! transfer to a peer, spent the token twice. An honest owner signs one child per node (a device
//! records it before it releases the signature), so an honest owner is never named. A statement
//! the tree already holds is a replay and names no one.

use std::collections::HashMap;

use ed25519_dalek::{Signer, SigningKey};
use sha2::{Digest, Sha256};
use specie_codec::{DecodeError, Reader};

use crate::keys::{KeyCertificate, PublicKey};
use crate::token::{Hop, Issuance, Link, Token};
use crate::{ENCODING_VERSION, NONCE_BYTES, SIGNATURE_BYTES};

/// Signed by a token's owner: the token goes back to the authority.
const DEPOSIT_DOMAIN: &[u8] = b"specie/offline/deposit/v1";

/// What an owner's statement on a node does with the token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Move {
    /// To a peer's certified one-time key, at the peer's handshake nonce.
    Transfer {
        next_owner: KeyCertificate,
        nonce: [u8; NONCE_BYTES],
    },
    /// Back to the authority, which does what `instruction` (a hash of the deposit's
    /// instruction: re-issue to new keys, or defund to a core address) says; `nonce` is the
    /// depositor's.
    Deposit {
        instruction: [u8; 32],
        nonce: [u8; NONCE_BYTES],
    },
}

impl Move {
    /// What the owner signs to make this move as the token's `index`-th statement after the
    /// issuance, on the `previous` link.
    pub fn signing_bytes(&self, previous: &Link, index: u8) -> Vec<u8> {
        match self {
            Move::Transfer { next_owner, nonce } => Hop::signing_bytes(previous, index, next_owner, nonce),
            Move::Deposit { instruction, nonce } => {
                let mut bytes = Vec::with_capacity(DEPOSIT_DOMAIN.len() + 1 + 32 + 1 + 32 + NONCE_BYTES);
                bytes.extend_from_slice(DEPOSIT_DOMAIN);
                bytes.push(ENCODING_VERSION);
                bytes.extend_from_slice(previous);
                bytes.push(index);
                bytes.extend_from_slice(instruction);
                bytes.extend_from_slice(nonce);
                bytes
            }
        }
    }

    pub fn is_deposit(&self) -> bool {
        matches!(self, Move::Deposit { .. })
    }

    /// This move signed by `owner` on the token's last link.
    pub fn sign(self, token: &Token, owner: &SigningKey) -> SignedMove {
        let last = *token.links().last().expect("an issuance link");
        let index = (token.hops.len() + 1) as u8;
        SignedMove {
            signature: owner.sign(&self.signing_bytes(&last, index)).to_bytes(),
            statement: self,
        }
    }
}

/// A move with its owner's signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SignedMove {
    pub statement: Move,
    pub signature: [u8; SIGNATURE_BYTES],
}

const MOVE_TRANSFER: u8 = 0;
const MOVE_DEPOSIT: u8 = 1;

/// The longest signed move: a transfer (kind, key certificate, nonce, signature).
pub const SIGNED_MOVE_BYTES_MAX: usize = 1 + crate::CERTIFIED_KEY_BYTES + NONCE_BYTES + SIGNATURE_BYTES;

impl SignedMove {
    /// Kind (`0` transfer, `1` deposit), the statement's fields, the signature. No version byte:
    /// a move travels inside a value that has one.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        match &self.statement {
            Move::Transfer { next_owner, nonce } => {
                out.push(MOVE_TRANSFER);
                next_owner.encode_to(out);
                out.extend_from_slice(nonce);
            }
            Move::Deposit { instruction, nonce } => {
                out.push(MOVE_DEPOSIT);
                out.extend_from_slice(instruction);
                out.extend_from_slice(nonce);
            }
        }
        out.extend_from_slice(&self.signature);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<SignedMove, DecodeError> {
        let statement = match reader.read_u8("move kind")? {
            MOVE_TRANSFER => Move::Transfer {
                next_owner: KeyCertificate::decode_from(reader)?,
                nonce: reader.read_array("transfer nonce")?,
            },
            MOVE_DEPOSIT => Move::Deposit {
                instruction: reader.read_array("deposit instruction")?,
                nonce: reader.read_array("deposit nonce")?,
            },
            kind => {
                return Err(DecodeError::UnknownKind {
                    what: "move kind",
                    kind,
                })
            }
        };
        Ok(SignedMove {
            statement,
            signature: reader.read_array("move signature")?,
        })
    }

    fn of_hop(hop: &Hop) -> SignedMove {
        SignedMove {
            statement: Move::Transfer {
                next_owner: hop.next_owner,
                nonce: hop.nonce,
            },
            signature: hop.signature,
        }
    }
}

/// A node of the tree: a link, the key that owns the token there, and the statements made on it.
#[derive(Clone, Debug)]
struct Node {
    owner: PublicKey,
    /// Statements after the issuance that lead here (0 at the issuance).
    index: u8,
    /// The parent's link and the hop that led here (none at the issuance).
    from: Option<(Link, Hop)>,
    children: Vec<(Link, SignedMove)>,
}

/// Two different statements of one owner on one node, at least one a transfer: the owner spent
/// the token twice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub node: Link,
    pub owner: PublicKey,
    /// The node's place in the chain: statements after the issuance that lead to it.
    pub index: u8,
    pub first: SignedMove,
    pub second: SignedMove,
}

/// What recording a deposited chain found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Every statement was in the tree already: a replay, answered as before.
    Known,
    /// The deposit statement is new but its node had a deposit already: the same token deposited
    /// twice by its owner (a retry, or another instruction). Only the first counts.
    DepositedBefore { first: SignedMove },
    /// New statements were recorded; each conflict names an owner who spent the token twice.
    New { conflicts: Vec<Conflict> },
}

/// A chain whose issuance is not the one this history grew from, for the same serial.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("another issuance of this serial: its issuing key signed twice")]
pub struct OtherIssuance;

/// The tree of one token's verified statements, rooted at its issuance.
#[derive(Clone, Debug)]
pub struct History {
    issuance: Issuance,
    /// The issuance's link (hashed once).
    root: Link,
    nodes: HashMap<Link, Node>,
}

impl History {
    pub fn new(issuance: &Issuance) -> History {
        let root = issuance.link();
        let node = Node {
            owner: issuance.first_owner,
            index: 0,
            from: None,
            children: Vec::new(),
        };
        History {
            issuance: *issuance,
            root,
            nodes: HashMap::from([(root, node)]),
        }
    }

    /// The chain from the issuance to the node `link`, if the tree holds it: the token as its
    /// owner there held it.
    pub fn chain_to(&self, link: &Link) -> Option<Token> {
        let mut hops = Vec::new();
        let mut at = self.nodes.get(link)?;
        while let Some((parent, hop)) = &at.from {
            hops.push(*hop);
            at = &self.nodes[parent];
        }
        hops.reverse();
        Some(Token {
            issuance: self.issuance,
            hops,
        })
    }

    /// Statements the tree holds.
    pub fn statements(&self) -> usize {
        self.nodes.values().map(|node| node.children.len()).sum()
    }

    /// Records a chain the caller verified (`Token::verify`), and the deposit statement its owner
    /// signed on its last link, if any (verified too). A chain of another issuance of the same
    /// serial is refused: only an issuing key that signed twice makes one.
    pub fn record(&mut self, token: &Token, deposit: Option<SignedMove>) -> Result<Recorded, OtherIssuance> {
        let links = token.links();
        let last = links.last().expect("an issuance link");
        let deposit = deposit.map(|deposit| {
            let index = (token.hops.len() + 1) as u8;
            (
                deposit,
                Sha256::digest(deposit.statement.signing_bytes(last, index)).into(),
            )
        });
        self.record_linked(token, &links, deposit)
    }

    /// [`History::record`] with the chain's links computed already (`token.links()`), and the
    /// deposit statement's with it (the link it makes on the chain's last one), so a caller that
    /// needs them too hashes the chain once.
    pub fn record_linked(
        &mut self,
        token: &Token,
        links: &[Link],
        deposit: Option<(SignedMove, Link)>,
    ) -> Result<Recorded, OtherIssuance> {
        assert_eq!(links.len(), token.hops.len() + 1, "the token's links");
        if links[0] != self.root {
            return Err(OtherIssuance);
        }
        let mut conflicts = Vec::new();
        let mut new = false;
        for (i, hop) in token.hops.iter().enumerate() {
            let (parent, child) = (links[i], links[i + 1]);
            let statement = SignedMove::of_hop(hop);
            if self.add_child(parent, child, statement, &mut conflicts) {
                new = true;
                self.nodes.entry(child).or_insert(Node {
                    owner: hop.next_owner.key,
                    index: (i + 1) as u8,
                    from: Some((parent, *hop)),
                    children: Vec::new(),
                });
            }
        }
        if let Some((deposit, link)) = deposit {
            assert!(deposit.statement.is_deposit(), "a deposit statement");
            let last = *links.last().expect("an issuance link");
            let node = &self.nodes[&last];
            debug_assert_eq!(usize::from(node.index), token.hops.len(), "the last link's node");
            let earlier = node
                .children
                .iter()
                .find(|(_, s)| s.statement.is_deposit())
                .map(|(_, s)| *s);
            match earlier {
                Some(first) if first != deposit && !new => return Ok(Recorded::DepositedBefore { first }),
                _ => new |= self.add_child(last, link, deposit, &mut conflicts),
            }
        }
        Ok(if new {
            Recorded::New { conflicts }
        } else {
            Recorded::Known
        })
    }

    /// Adds `statement` (whose link is `child`) under `parent`; whether it was new. A conflict is
    /// noted when the parent had another statement and one of the two is a transfer.
    fn add_child(&mut self, parent: Link, child: Link, statement: SignedMove, conflicts: &mut Vec<Conflict>) -> bool {
        let node = self.nodes.get_mut(&parent).expect("a parent recorded before its child");
        if node.children.iter().any(|(link, _)| *link == child) {
            return false;
        }
        let other = node
            .children
            .iter()
            .find(|(_, s)| !(s.statement.is_deposit() && statement.statement.is_deposit()));
        if let Some((_, first)) = other {
            conflicts.push(Conflict {
                node: parent,
                owner: node.owner,
                index: node.index,
                first: *first,
                second: statement,
            });
        }
        node.children.push((child, statement));
        true
    }
}
