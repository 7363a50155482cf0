//! The platform's own rows an instance leaves behind when it is terminated — its node certificates, its bootstrap
//! tokens and its SD-WAN peers — for the terminate cascade of the instance lifecycle (`docs/instances.md`).
//!
//! API Boundary: every call is idempotent and answers how many rows it changed (0 the second time); an adapter maps
//! an unreachable service onto `Transport` and any refusal onto `Rejected`.

use std::future::Future;

use crate::ports::TransportError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlatformError {
    #[error("platform unreachable: {0}")]
    Transport(#[from] TransportError),
    #[error("platform rejected the request: {0}")]
    Rejected(String),
}

pub trait PlatformRows {
    /// Revokes every node certificate issued to the instance's agent.
    fn revoke_certificates(&self, instance: &str) -> impl Future<Output = Result<u32, PlatformError>>;
    /// Expires every bootstrap token issued for the instance.
    fn expire_bootstrap_tokens(&self, instance: &str) -> impl Future<Output = Result<u32, PlatformError>>;
    /// Removes the instance's SD-WAN peers.
    fn remove_peers(&self, instance: &str) -> impl Future<Output = Result<u32, PlatformError>>;
}
