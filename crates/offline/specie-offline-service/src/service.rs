//! What the HTTP API needs of an authority, whoever hosts it: the role on this process's embedded
//! host ([`EmbeddedAuthority`]), or a Raft group's replica in a cluster (`specie-cluster`), whose
//! followers send callers to the leader.

use ed25519_dalek::SigningKey;
use specie_offline_authority::Reply;

use specie_service::{CoreCheckError, CoreTransactions, Pending, Unavailable};

use crate::{AuthorityCall, AuthorityHandle, CoreLink};

/// The authority as the API reaches it.
pub trait AuthorityService: Send + Sync + 'static {
    /// The authority's answer to the call, once it is durable.
    fn call(&self, call: AuthorityCall) -> Pending<'_, Result<Reply, Unavailable>>;
    /// The bridge key's public half: what the core banks for.
    fn bridge(&self) -> [u8; 32] {
        self.bridge_key().verifying_key().to_bytes()
    }
    /// The bridge key, the role's: it signs the payouts the API answers with (a defund's, a
    /// refund's), which the role answers as terms.
    fn bridge_key(&self) -> &SigningKey;
    /// The online core's transaction format: it reads the fundings posted to the API and writes
    /// the payouts the API answers with.
    fn core_format(&self) -> &'static dyn CoreTransactions;
    /// Whether `token` is the operator's bearer token.
    fn is_operator(&self, token: &str) -> bool;
    /// Whether the operator may fund devices on its word (trials without a core only).
    fn operator_funding(&self) -> bool;
    /// Whether the UHS id `marker` is in the online core's UHS, asked of the core itself.
    fn in_core(&self, marker: [u8; 32]) -> Pending<'_, Result<bool, CoreCheckError>>;
}

/// Compares a bearer token in constant time.
pub fn token_matches(expected: &str, given: &str) -> bool {
    let (expected, given) = (expected.as_bytes(), given.as_bytes());
    given.len() == expected.len() && given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// The authority on this process's embedded host, checking fundings with the core's HTTP API.
pub struct EmbeddedAuthority {
    pub handle: AuthorityHandle,
    pub core_link: CoreLink,
}

impl AuthorityService for EmbeddedAuthority {
    fn call(&self, call: AuthorityCall) -> Pending<'_, Result<Reply, Unavailable>> {
        Box::pin(async move { self.handle.call(call).await.ok_or(Unavailable::Stopping) })
    }

    fn bridge_key(&self) -> &SigningKey {
        self.handle.bridge_key()
    }

    fn core_format(&self) -> &'static dyn CoreTransactions {
        self.core_link.format
    }

    fn is_operator(&self, token: &str) -> bool {
        self.handle.is_operator(token)
    }

    fn operator_funding(&self) -> bool {
        self.core_link.operator_funding
    }

    fn in_core(&self, marker: [u8; 32]) -> Pending<'_, Result<bool, CoreCheckError>> {
        let core = self.core_link.core.clone();
        Box::pin(async move { core.ok_or(CoreCheckError::NoCore)?.holds(marker).await })
    }
}

#[cfg(test)]
mod tests {
    use super::token_matches;

    #[test]
    fn a_token_matches_only_itself() {
        assert!(token_matches("abc123", "abc123"));
        assert!(!token_matches("abc123", "abc124"));
        assert!(!token_matches("abc123", "abc12"));
        assert!(!token_matches("abc123", ""));
    }
}
