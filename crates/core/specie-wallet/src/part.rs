//! Wallet parts: a capability's state kept in the core wallet, without the core knowing it.
//!
//! A capability whose money lives in outputs the core's coins do not describe (the privacy
//! levels' notes, `specie-privacy-wallet`) keeps them in a [`WalletPart`]: its own type, held by
//! the [`Wallet`] beside the coins, reached by its driver with [`Wallet::part`] and
//! [`Wallet::part_mut`]. The wallet's life cycle calls the part's hooks where it acts on coins:
//! resolving a pending transaction ([`Wallet::on_confirmed`], [`Wallet::on_rejected`]), marking
//! and restoring missing outputs at `sync`, forgetting missing ones, handing a payee's string
//! over, and deciding whether the wallet holds anything.
//!
//! In the wallet file a part owns some top-level fields. Its [`WalletPartKind`], installed once
//! per process ([`install_part`], as transaction kinds are), reads and checks them when the file
//! loads, after the core's own fields (keys, coins, pending transactions), so that its checks can
//! see those. Fields no installed kind owns are carried unread and written back unchanged, so a
//! program built without a capability never loses that capability's state.

use std::any::Any;
use std::fmt::Debug;
use std::sync::{PoisonError, RwLock};

use serde_json::{Map, Value};
use specie_transaction::{OutPoint, Txid, UhsId};

use crate::file::WalletFileError;
use crate::wallet::{Settled, Wallet};

/// A capability's state kept in a wallet. Object safe: the wallet holds it boxed.
pub trait WalletPart: Any + Send + Sync + Debug {
    /// The part's name, the same as its [`WalletPartKind::name`].
    fn name(&self) -> &'static str;
    /// Applies the fate of pending transaction `txid` (applied if `confirmed`, else never) to the
    /// part's outputs, as the wallet does to its coins, adding their values to `settled`.
    fn settle(&mut self, txid: &Txid, confirmed: bool, settled: &mut Settled);
    /// The part's spendable outputs (outpoint, UHS id, value), for `sync` to ask the node about.
    fn spendable(&self) -> Vec<(OutPoint, UhsId, u64)>;
    /// The part's spendable outputs that are never spent by their own id (unlinkable tokens:
    /// a spend creates a marker instead), each with the id its spend creates: `sync` marks
    /// missing those whose marker the node holds (spent from another copy of this wallet). Such
    /// an output is never restored: a marker is never removed.
    fn spent_markers(&self) -> Vec<(OutPoint, UhsId, u64)> {
        Vec::new()
    }
    /// The part's outputs marked missing (outpoint, UHS id, value).
    fn missing(&self) -> Vec<(OutPoint, UhsId, u64)>;
    /// Marks missing the spendable ones of `outpoints` (the node no longer holds them); returns
    /// their value.
    fn mark_missing(&mut self, outpoints: &[OutPoint]) -> u64;
    /// Makes the missing ones of `outpoints` spendable again; returns their value.
    fn restore_missing(&mut self, outpoints: &[OutPoint]) -> u64;
    /// Drops every missing output for good; returns how many, and their value.
    fn forget_missing(&mut self) -> (usize, u64);
    /// Whether the part holds money the core's network vouches for (anything but an import no
    /// node has confirmed yet): then the wallet keeps to its network.
    fn holds_any(&self) -> bool;
    /// The payee's string of pending payment `txid`, if the part made it.
    fn payment_string_for(&self, txid: &Txid) -> Option<String>;
    /// The part's top-level fields of the wallet file; none while it holds nothing.
    fn to_fields(&self) -> Map<String, Value>;
    /// A copy, boxed.
    fn clone_box(&self) -> Box<dyn WalletPart>;
    /// The part as [`Any`], for [`Wallet::part`].
    fn as_any(&self) -> &dyn Any;
    /// The part as [`Any`], for [`Wallet::part_mut`].
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl Clone for Box<dyn WalletPart> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// The loader of one kind of [`WalletPart`], installed per process with [`install_part`].
pub trait WalletPartKind: Send + Sync + Debug {
    /// The part's name (unique among parts).
    fn name(&self) -> &'static str;
    /// The top-level wallet file fields the part owns.
    fn fields(&self) -> &'static [&'static str];
    /// Reads and checks the part from `fields` (those of [`WalletPartKind::fields`] the file
    /// has, at least one), given `wallet` with the core's own fields loaded.
    fn load(&self, fields: &Map<String, Value>, wallet: &Wallet) -> Result<Box<dyn WalletPart>, WalletFileError>;
    /// Whether `text` is one of the part's payment strings, well formed (the wallet file's list
    /// of confirmed payments' strings holds them beside the core's).
    fn payment_string_decodes(&self, _text: &str) -> bool {
        false
    }
}

static KINDS: RwLock<Vec<&'static dyn WalletPartKind>> = RwLock::new(Vec::new());

/// Makes this process load `kind`'s part from wallet files. Idempotent; a second kind of the
/// same name, or one claiming a field another kind owns, panics: the program is assembled wrong.
pub fn install_part(kind: &'static dyn WalletPartKind) {
    let mut kinds = KINDS.write().unwrap_or_else(PoisonError::into_inner);
    for held in kinds.iter() {
        if held.name() == kind.name() {
            return;
        }
        let shared = (kind.fields().iter()).find(|field| held.fields().contains(field));
        assert!(
            shared.is_none(),
            "wallet part {} claims field {shared:?} of part {}",
            kind.name(),
            held.name()
        );
    }
    kinds.push(kind);
}

/// The part kinds installed in this process.
pub fn installed_parts() -> Vec<&'static dyn WalletPartKind> {
    KINDS.read().unwrap_or_else(PoisonError::into_inner).clone()
}

impl Wallet {
    /// The part of type `T`, if this wallet holds one.
    pub fn part<T: WalletPart>(&self) -> Option<&T> {
        self.parts.values().find_map(|part| part.as_any().downcast_ref::<T>())
    }

    /// The part of type `T`, to change, if this wallet holds one.
    pub fn part_mut<T: WalletPart>(&mut self) -> Option<&mut T> {
        self.parts
            .values_mut()
            .find_map(|part| part.as_any_mut().downcast_mut::<T>())
    }

    /// Keeps `part` in this wallet, replacing any of its name.
    pub fn insert_part(&mut self, part: Box<dyn WalletPart>) {
        self.parts.insert(part.name(), part);
    }

    /// The parts this wallet holds.
    pub fn parts(&self) -> impl Iterator<Item = &dyn WalletPart> {
        self.parts.values().map(|part| &**part)
    }
}
