//! The bare-metal provider's port, for a NodeInstance backed by a MAAS machine (`docs/instances.md`, "Over MAAS"):
//! the machine is provisioned by the onboarding workflow and terminated by the decommission workflow, and powered
//! through MAAS. The instance lifecycle asks for a workflow and reads where it got to; it never drives MAAS's stages
//! itself, so the recovery matrix stays the one authority on how a machine is commissioned, deployed and released.
//!
//! API Boundary: `status` answers from the controller's own workflow journal (what the onboarding and decommission
//! workflows recorded) — a durable, local read — and `onboard`/`decommission` only ask the workflow runner to run
//! (idempotent: a workflow already in flight is the same request). Power goes to MAAS; an answer that never came is a
//! `Transport` error, a machine MAAS will not power (not deployed, locked) `WrongState`.

use std::future::Future;

use crate::matrix::WorkflowState;
use crate::ports::provider::ProviderError;

/// Where a machine's life got to, as the controller's workflow journal says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetalStatus {
    /// No onboarding of the machine has begun.
    Racked,
    /// Onboarding's last run began and has neither stopped nor completed — in flight, or its controller died — so
    /// a request for it is the same request, or its resume; the MAAS system id once a checkpoint named it.
    Onboarding { system_id: Option<String> },
    /// Onboarding's last run stopped `failed_retryable`: the runner reruns it within its bound, after which it is a
    /// person's to resume. Asking again would defeat that bound.
    OnboardingRetrying { system_id: Option<String> },
    /// Onboarding completed: the machine is deployed and its agent enrols at the hub.
    Deployed { system_id: String },
    /// Onboarding stopped for good (manual intervention, a terminal failure): the instance is in error.
    OnboardingFailed { state: WorkflowState },
    /// The decommission's last run began and has neither stopped nor completed (in flight, or its controller died).
    Decommissioning,
    /// The decommission's last run stopped `failed_retryable`: the runner's to rerun within its bound, then a
    /// person's.
    DecommissionRetrying,
    /// The decommission stopped for good: the machine is not released; a person finishes it (the matrix's
    /// follow-up).
    DecommissionFailed { state: WorkflowState },
    /// The decommission completed: the machine is released (or deleted) and its secrets gone.
    Decommissioned,
}

/// A power action MAAS performs on a deployed machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetalPower {
    On,
    Off,
    Cycle,
}

pub trait BareMetal {
    /// Where the machine with this PXE MAC got to.
    fn status(&self, mac: &str) -> impl Future<Output = Result<MetalStatus, ProviderError>>;
    /// Asks the runner to run the machine's onboarding for `instance` (its agent enrols as that instance).
    fn onboard(&self, mac: &str, instance: &str) -> impl Future<Output = Result<(), ProviderError>>;
    /// Asks the runner to run the machine's decommission.
    fn decommission(&self, mac: &str) -> impl Future<Output = Result<(), ProviderError>>;
    /// Powers the deployed machine through MAAS. `system_id` is the MAAS system id the row already holds, when it
    /// does: the machine is then read by it (a fresh read before the call) rather than looked up by MAC first.
    fn power(
        &self,
        mac: &str,
        system_id: Option<&str>,
        action: MetalPower,
    ) -> impl Future<Output = Result<(), ProviderError>>;
    /// Whether MAAS reads the machine powered on (asked by `system_id` when the row holds it).
    fn powered(&self, mac: &str, system_id: Option<&str>) -> impl Future<Output = Result<bool, ProviderError>>;
}

/// The port of a controller with no MAAS site: every call is refused, so a bare-metal row it is handed stays where it
/// is and says why.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSite;

fn no_site() -> ProviderError {
    ProviderError::Rejected("this controller has no MAAS site".to_owned())
}

impl BareMetal for NoSite {
    async fn status(&self, _mac: &str) -> Result<MetalStatus, ProviderError> {
        Err(no_site())
    }
    async fn onboard(&self, _mac: &str, _instance: &str) -> Result<(), ProviderError> {
        Err(no_site())
    }
    async fn decommission(&self, _mac: &str) -> Result<(), ProviderError> {
        Err(no_site())
    }
    async fn power(&self, _mac: &str, _system_id: Option<&str>, _action: MetalPower) -> Result<(), ProviderError> {
        Err(no_site())
    }
    async fn powered(&self, _mac: &str, _system_id: Option<&str>) -> Result<bool, ProviderError> {
        Err(no_site())
    }
}
