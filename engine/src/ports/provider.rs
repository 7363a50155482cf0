//! The cloud/VM provider's port, for the NodeInstance lifecycle (`docs/instances.md`): create a tagged VM, find VMs
//! by tag, list a region, start, stop, reboot and destroy.
//!
//! API Boundary: an adapter maps the provider's answers onto [`ProviderError`] — a quota refusal
//! (`InstanceLimitExceeded`, HTTP 400/403 with a quota code) is `QuotaExceeded`, an unknown VM id (404,
//! `InvalidInstanceID.NotFound`) `NotFound`, a call against a VM in the wrong state (409,
//! `IncorrectInstanceState`) `WrongState`, a region the provider will not serve (503) `Unavailable`, no answer a
//! `Transport` error. A create that timed out may have executed: the engine looks its tag up before it creates again.

use std::future::Future;

use crate::ports::TransportError;

/// One VM as the provider describes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProviderVm {
    pub cloud_instance_id: String,
    /// The tag the create carried: the engine's instance id.
    pub tag: String,
    pub region: String,
    /// The provider's own word for the VM's state (`pending`, `running`, `stopping`, `stopped`, `shutting-down`,
    /// `failed`); the engine reads the boot through the agent's heartbeats, not this.
    pub state: String,
}

/// What a create asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateVm {
    pub region: String,
    pub instance_type: String,
    pub name: String,
    pub tag: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("provider unreachable: {0}")]
    Transport(#[from] TransportError),
    #[error("provider quota exceeded: {0}")]
    QuotaExceeded(String),
    #[error("no such VM at the provider: {0}")]
    NotFound(String),
    #[error("the VM is in the wrong state for the call: {0}")]
    WrongState(String),
    #[error("provider unavailable: {0}")]
    Unavailable(String),
    #[error("provider rejected the request: {0}")]
    Rejected(String),
}

impl ProviderError {
    /// Whether the call may have executed although no answer said so (look it up before trying again).
    pub fn may_have_executed(&self) -> bool {
        matches!(self, ProviderError::Transport(TransportError::Timeout | TransportError::ConnectionReset))
    }
}

pub trait Provider {
    /// Creates a VM carrying `tag`; answers its id.
    fn create(&self, request: &CreateVm) -> impl Future<Output = Result<String, ProviderError>>;
    /// The VMs (not destroyed) of `region` carrying `tag`, in id order.
    fn find_by_tag(&self, region: &str, tag: &str) -> impl Future<Output = Result<Vec<ProviderVm>, ProviderError>>;
    /// Every VM (not destroyed) of `region`, in id order: what the cloud sync reads.
    fn list(&self, region: &str) -> impl Future<Output = Result<Vec<ProviderVm>, ProviderError>>;
    fn start(&self, cloud_instance_id: &str) -> impl Future<Output = Result<(), ProviderError>>;
    fn stop(&self, cloud_instance_id: &str, hard: bool) -> impl Future<Output = Result<(), ProviderError>>;
    fn reboot(&self, cloud_instance_id: &str) -> impl Future<Output = Result<(), ProviderError>>;
    /// Destroys the VM. Destroying one that is already gone is `NotFound`, which a terminate reads as done.
    fn destroy(&self, cloud_instance_id: &str) -> impl Future<Output = Result<(), ProviderError>>;
    /// The provider's force-terminate of every VM carrying `tag` whose teardown is stuck (the runbook's "stuck
    /// terminating" recovery, which the on-call asks for); answers the VMs it freed.
    fn force_terminate(&self, region: &str, tag: &str) -> impl Future<Output = Result<Vec<String>, ProviderError>>;
}
