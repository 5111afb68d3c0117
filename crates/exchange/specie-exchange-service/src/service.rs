//! What the HTTP API needs of an exchange, whoever hosts it: the role on this process's embedded
//! host ([`ExchangeHandle`]), or a replica of a cluster's exchange group (`specie-cluster`), whose
//! followers send callers to the leader. Both answer a call only once it is durable.

use ed25519_dalek::SigningKey;
use specie_exchange::{ExchangeReply, ExchangeRole};
use specie_host::RoleCall;
use specie_service::{CoreCheckError, CoreTransactions, Pending, Unavailable};

use crate::ExchangeHandle;

/// The exchange as the API reaches it.
pub trait ExchangeService: Send + Sync + 'static {
    /// The role's answer to `call`, once what it changed is durable.
    fn call(&self, call: RoleCall<ExchangeRole>) -> Pending<'_, Result<ExchangeReply, Unavailable>>;
    /// The exchange's identity (what its deposit commitments and payouts name).
    fn id(&self) -> [u8; 32];
    /// The key that signs payouts; the cores bank for its public half.
    fn bridge(&self) -> &SigningKey;
    /// The assets' names, in asset order.
    fn asset_names(&self) -> Vec<String>;
    /// The online core's transaction format: deposits' fundings are read, payouts signed, by it.
    fn core_format(&self) -> &'static dyn CoreTransactions;
    /// Whether the UHS id `marker` is in the UHS of the core that mints asset `asset`, asked of
    /// that core itself.
    fn in_core(&self, asset: usize, marker: [u8; 32]) -> Pending<'_, Result<bool, CoreCheckError>>;
}

impl ExchangeService for ExchangeHandle {
    fn call(&self, call: RoleCall<ExchangeRole>) -> Pending<'_, Result<ExchangeReply, Unavailable>> {
        Box::pin(async move { self.role.call(call).await.ok_or(Unavailable::Stopping) })
    }

    fn id(&self) -> [u8; 32] {
        self.id
    }

    fn bridge(&self) -> &SigningKey {
        &self.bridge
    }

    fn asset_names(&self) -> Vec<String> {
        self.assets.iter().map(|a| a.name.clone()).collect()
    }

    fn core_format(&self) -> &'static dyn CoreTransactions {
        self.core_format
    }

    fn in_core(&self, asset: usize, marker: [u8; 32]) -> Pending<'_, Result<bool, CoreCheckError>> {
        let core = self.assets.get(asset).and_then(|a| a.core.clone());
        Box::pin(async move { core.ok_or(CoreCheckError::NoCore)?.holds(marker).await })
    }
}
