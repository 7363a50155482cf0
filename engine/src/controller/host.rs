//! What a controller process runs on: the adapters of every port its drivers need, its inbox of requests, a pager,
//! the sink of its events, the operator's record of the racked machines, and a way to run a task beside its others.
//! The simulator implements it over its world; a production process over its real adapters. Nothing here decides:
//! the host builds and delivers; the service ([`super::service`]) and its machine decide.
//!
//! API Boundary: each port accessor gives a fresh adapter (a driver's run owns its session with the hub, its view of
//! MAAS is traced under its workflow); a host keeps what must outlive a process (the journal, the inbox) itself.

use std::future::Future;
use std::pin::Pin;

use crate::controller::request::{Desk, Event, Page, Request};
use crate::onboarding::driver::NodeSpec;
use crate::ports::fleet::Fleet;
use crate::ports::platform::{AgentFeed, PlatformRows};
use crate::ports::provider::Provider;
use crate::ports::site::{MaasApi, Resolver, SiteSecrets};
use crate::ports::{Artifacts, Clock, Hub, Jitter, Journal, Secrets, Signals, Ssh};
use crate::rollout::preflight::SignatureVerifier;

/// Whose work an SSH session to a worker is (a host may tell them apart: the simulator's controller deaths are armed
/// per subsystem).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerWork {
    Rollout,
    Rotation,
}

/// A task of the service, run beside the others on the controller's process (it dies with the process).
pub type Task = Pin<Box<dyn Future<Output = ()>>>;

/// The ports and services of one controller process.
pub trait Host: 'static {
    type Clock: Clock;
    type Journal: Journal;
    type Signals: Signals;
    type Hub: Hub;
    type Jitter: Jitter;
    type Secrets: Secrets;
    type Artifacts: Artifacts;
    type Verifier: SignatureVerifier;
    type WorkerSsh: Ssh;
    type Maas: MaasApi;
    type Resolver: Resolver;
    type SiteSecrets: SiteSecrets;
    type SiteSsh: Ssh;
    type Fleet: Fleet;
    type Provider: Provider;
    type Platform: PlatformRows;
    type Agents: AgentFeed;

    fn clock(&self) -> Self::Clock;
    fn journal(&self) -> Self::Journal;
    fn signals(&self) -> Self::Signals;
    fn hub(&self) -> Self::Hub;
    fn jitter(&self) -> Self::Jitter;
    fn secrets(&self) -> Self::Secrets;
    fn artifacts(&self) -> Self::Artifacts;
    fn verifier(&self) -> Self::Verifier;
    /// SSH to the fleet's workers, for `work`.
    fn worker_ssh(&self, work: WorkerWork) -> Self::WorkerSsh;
    /// The MAAS region as `workflow`'s calls reach it.
    fn maas(&self, workflow: &str) -> Self::Maas;
    fn resolver(&self) -> Self::Resolver;
    fn site_secrets(&self) -> Self::SiteSecrets;
    /// SSH to the site's deployed machines (the hardware-sync seed).
    fn site_ssh(&self) -> Self::SiteSsh;
    fn fleet(&self) -> Self::Fleet;
    fn provider(&self) -> Self::Provider;
    fn platform(&self) -> Self::Platform;
    fn agents(&self) -> Self::Agents;

    /// Runs `task` beside the caller on this process.
    fn spawn(&self, task: Task);

    /// Hands `request` to the controller's inbox, where its desk takes it.
    fn submit(&self, request: Request);
    /// The oldest request waiting at `desk`, taken.
    fn take_request(&self, desk: Desk) -> Option<Request>;
    /// Completes when a request may be waiting at `desk` (at once when one came since the last wait).
    fn requests_waiting(&self, desk: Desk) -> impl Future<Output = ()>;

    /// Pages a person about `page`; what they ask of the controller in answer, at once (none: they act later,
    /// through the inbox, or not at all).
    fn page(&self, page: &Page) -> Vec<Request>;
    /// Reports `event`.
    fn emit(&self, event: Event);

    /// The operator's record of a racked machine (its PXE MAC, BMC, boot disk, RoCE NICs), as it stands now.
    fn racked(&self, machine: &str) -> Option<NodeSpec>;
    /// The racked machine with this PXE MAC.
    fn racked_by_mac(&self, mac: &str) -> Option<String>;
    /// This process's identity: the deployment lock's holder for the rollouts it takes.
    fn process(&self) -> String;
}

/// A port the deployment does not have (a site without a fleet to roll out to, without an instance lifecycle):
/// every call fails, saying so; a desk the configuration leaves out never calls it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Absent;

const ABSENT: &str = "not configured in this deployment";

impl crate::ports::Jitter for Absent {
    fn draw(&self) -> u64 {
        0
    }
}

impl crate::ports::Secrets for Absent {
    async fn attestation_key(&self, node: &str) -> Result<crate::secret::Secret, crate::ports::SecretsError> {
        Err(crate::ports::SecretsError::NotFound(format!("attestation key of {node}: {ABSENT}")))
    }
    async fn hub_credential(&self) -> Result<crate::secret::Secret, crate::ports::SecretsError> {
        Err(crate::ports::SecretsError::NotFound(format!("hub credential: {ABSENT}")))
    }
}

impl crate::ports::Artifacts for Absent {
    async fn available(&self, _digest: &str) -> Result<bool, crate::ports::TransportError> {
        Err(crate::ports::TransportError::ConnectionRefused)
    }
}

impl SignatureVerifier for Absent {
    fn verify(&self, _manifest: &crate::rollout::preflight::Manifest) -> bool {
        false
    }
}

impl crate::ports::Ssh for Absent {
    async fn run(
        &self,
        endpoint: &crate::ports::Endpoint,
        _request: crate::ports::SshRequest,
    ) -> Result<crate::ports::SshResponse, crate::ports::SshError> {
        Err(crate::ports::SshError::Refused(format!("ssh to {}: {ABSENT}", endpoint.node)))
    }
}

impl Provider for Absent {
    async fn create(
        &self,
        _request: &crate::ports::provider::CreateVm,
    ) -> Result<String, crate::ports::provider::ProviderError> {
        Err(absent_provider())
    }
    async fn find_by_tag(
        &self,
        _region: &str,
        _tag: &str,
    ) -> Result<Vec<crate::ports::provider::ProviderVm>, crate::ports::provider::ProviderError> {
        Err(absent_provider())
    }
    async fn list(
        &self,
        _region: &str,
    ) -> Result<Vec<crate::ports::provider::ProviderVm>, crate::ports::provider::ProviderError> {
        Err(absent_provider())
    }
    async fn start(&self, _id: &str) -> Result<(), crate::ports::provider::ProviderError> {
        Err(absent_provider())
    }
    async fn stop(&self, _id: &str, _hard: bool) -> Result<(), crate::ports::provider::ProviderError> {
        Err(absent_provider())
    }
    async fn reboot(&self, _id: &str) -> Result<(), crate::ports::provider::ProviderError> {
        Err(absent_provider())
    }
    async fn destroy(&self, _id: &str) -> Result<(), crate::ports::provider::ProviderError> {
        Err(absent_provider())
    }
    async fn force_terminate(
        &self,
        _region: &str,
        _tag: &str,
    ) -> Result<Vec<String>, crate::ports::provider::ProviderError> {
        Err(absent_provider())
    }
}

fn absent_provider() -> crate::ports::provider::ProviderError {
    crate::ports::provider::ProviderError::Rejected(format!("cloud provider: {ABSENT}"))
}

impl PlatformRows for Absent {
    async fn revoke_certificates(&self, _instance: &str) -> Result<u32, crate::ports::platform::PlatformError> {
        Err(crate::ports::platform::PlatformError::Rejected(format!("platform rows: {ABSENT}")))
    }
    async fn expire_bootstrap_tokens(&self, _instance: &str) -> Result<u32, crate::ports::platform::PlatformError> {
        Err(crate::ports::platform::PlatformError::Rejected(format!("platform rows: {ABSENT}")))
    }
    async fn remove_peers(&self, _instance: &str) -> Result<u32, crate::ports::platform::PlatformError> {
        Err(crate::ports::platform::PlatformError::Rejected(format!("platform rows: {ABSENT}")))
    }
}

impl AgentFeed for Absent {
    async fn read(&self) -> Result<crate::ports::platform::AgentReport, crate::ports::TransportError> {
        Err(crate::ports::TransportError::ConnectionRefused)
    }
}
