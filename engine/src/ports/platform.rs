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

/// A heartbeat from an instance's agent, as the hub saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentPhase {
    /// Up, still enrolling or pulling modules.
    Booting,
    /// `phase=ready`: the instance is running.
    Ready,
}

/// What the hub heard of an instance's guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// A heartbeat of the instance's agent, in its phase.
    Heartbeat(AgentPhase),
    /// The provider reports the boot failed: the provision worker drives `mark_errored`.
    BootFailed,
    /// The provider reports the VM stopped: a stop (or a drain's stop) completed.
    Stopped,
}

/// What the hub heard from the instances' agents since the controller last asked (in order), and each agent's last
/// heartbeat: when (the hub's clock) and whether it said `phase=ready`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentReport {
    pub heard: Vec<(String, Heard)>,
    pub last_heartbeats: std::collections::BTreeMap<String, (u64, bool)>,
}

/// The hub's feed of the instances' agents, read by the instance lifecycle every pass.
pub trait AgentFeed {
    fn read(&self) -> impl Future<Output = Result<AgentReport, TransportError>>;
}
