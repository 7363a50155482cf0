//! The controller's configuration: which domains it runs and the limits and periods it runs them under. A
//! deployment writes it once (the simulator from a scenario or campaign, a production binary from its file); the
//! requests it takes say only what to do.

use crate::instance::approval::Governance;
use crate::instance::pool::Pool;
use crate::onboarding::driver::OnboardingPolicy;
use crate::rollout::driver::RolloutPolicy;
use crate::rollout::plan::PhaseBounds;
use crate::rollout::retry::Backoff;
use crate::sensor::SensorConfig;
use crate::workflow::{RetryPolicy, SitePolicy};

/// How long the controller waits before it runs again a workflow that ended `failed_retryable`.
pub const RERUN_DELAY_MS: u64 = 60_000;
/// Runs of one workflow per request (the first included): one more than the runs the engine lets end
/// `failed_retryable` before it escalates, so a persistent failure reaches a person.
pub const RUNS_PER_REQUEST_MAX: u32 = crate::workflow::FAILED_RUNS_MAX_DEFAULT + 1;
/// How often a decommission waiting for the machine's onboarding, or a recovery action waiting for a run of its
/// workflow in flight, looks again.
pub const BUSY_POLL_MS: u64 = 30_000;
/// How long a bare-metal machine's bootstrap token is valid.
pub const BOOTSTRAP_TOKEN_TTL_MS: u64 = 3_600_000;
/// How often the instance lifecycle runs a pass (the agents' heartbeat period).
pub const INSTANCE_PASS_MS: u64 = 30_000;
/// The pool replenisher's period.
pub const REPLENISH_MS: u64 = 60_000;
/// The cloud sync's period.
pub const CLOUD_SYNC_MS: u64 = 60 * 60_000;

/// Everything the controller runs, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// The MAAS workflows, when the controller has a MAAS site.
    pub site: Option<SiteSettings>,
    pub rollout: RolloutSettings,
    pub rotation: RotationSettings,
    /// The instance-status sensor, when the controller runs one (a one-shot operator's tool does not).
    pub sensor: Option<SensorConfig>,
    /// The instance lifecycle, when the controller runs one.
    pub instances: Option<InstanceSettings>,
}

/// The onboarding and decommission workflows of one MAAS site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteSettings {
    /// The racked machines the controller onboards, in the order it takes them up at boot.
    pub machines: Vec<String>,
    /// The controller takes the machines up once its monotonic clock reaches this (0: at boot).
    pub start_at_ms: u64,
    pub policy: OnboardingPolicy,
    pub stall_window_ms: u64,
    pub poll_ms: u64,
    /// The most onboarding runs in flight at once.
    pub concurrency: u32,
    pub site_policy: SitePolicy,
    pub bootstrap_token_ttl_ms: u64,
    pub retry: RetryPolicy,
    /// The instance lifecycle asks for each machine's onboarding (its bare-metal provision): at boot only the
    /// workflows a run of which began are taken up again.
    pub bare_metal: bool,
    pub rerun_delay_ms: u64,
    pub runs_per_request_max: u32,
    pub busy_poll_ms: u64,
}

/// The limits every rollout runs under (the RCCA's replacement controller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutSettings {
    pub policy: RolloutPolicy,
    pub lane_size_max: usize,
    pub availability_floor: usize,
    pub fan_out: usize,
    pub phases: PhaseBounds,
    pub backoff: Backoff,
    /// The hub's agent TTL: the epoch pin must outlive a lane.
    pub agent_ttl_ms: u64,
    /// What is left of the controller's hub credential when a rollout starts.
    pub credential_remaining_ms: u64,
    pub hold_lease_ms: u64,
    pub lock_lease_ms: u64,
    pub credential_wait_ms: u64,
    pub prove_poll_ms: u64,
    /// The URL the workers' agents are configured with.
    pub hub_url: String,
    /// Where the journal is, for the resume command every failure names.
    pub journal_name: String,
}

/// The limits of every agent-credential rotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RotationSettings {
    pub backoff: Backoff,
    pub prove_ms: u64,
    pub prove_poll_ms: u64,
    pub credential_wait_ms: u64,
}

/// The instance lifecycle (seed 004): what the controller keeps provisioned, and its periods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceSettings {
    pub account: String,
    pub region: String,
    pub instance_type: String,
    pub template: String,
    /// The pools the controller keeps (created at boot when the journal has none of that name).
    pub pools: Vec<Pool>,
    /// Plain nodes, each provisioned once under the operation id `op-<node>`.
    pub plain: Vec<String>,
    /// Every racked machine of the site is a node whose instance is backed by it.
    pub bare_metal: bool,
    pub governance: Governance,
    pub pass_ms: u64,
    pub replenish_ms: u64,
    pub sync_ms: u64,
    /// A last heartbeat this recent counts as one heard at the pass (the agents' heartbeat period): a dead or
    /// partitioned controller's missed heartbeat is heard again.
    pub heartbeat_fresh_ms: u64,
}

impl SiteSettings {
    /// A site of `machines` with the engine's production limits: the current onboarding policy, a 20-minute stall
    /// window, a 15 s poll, four runs at once, the default site policy and retries.
    pub fn new(machines: Vec<String>) -> SiteSettings {
        SiteSettings {
            machines,
            start_at_ms: 0,
            policy: OnboardingPolicy::Current,
            stall_window_ms: 20 * 60_000,
            poll_ms: 15_000,
            concurrency: 4,
            site_policy: SitePolicy::default(),
            bootstrap_token_ttl_ms: BOOTSTRAP_TOKEN_TTL_MS,
            retry: RetryPolicy::default(),
            bare_metal: false,
            rerun_delay_ms: RERUN_DELAY_MS,
            runs_per_request_max: RUNS_PER_REQUEST_MAX,
            busy_poll_ms: BUSY_POLL_MS,
        }
    }
}

impl Default for RolloutSettings {
    /// The RCCA's limits: lanes of at most 8 under a floor of 42, eight nodes read at once in the preflight, each
    /// per-node phase bounded (30 s to hold, quiesce, write the identity, start and release; 60 s to install; 120 s
    /// to prove), an hour's hold lease, a 15-minute deployment-lock lease, 10 minutes to wait for a renewed hub
    /// credential, the prove step reading the hub every 10 s.
    fn default() -> RolloutSettings {
        RolloutSettings {
            policy: RolloutPolicy::Lanes,
            lane_size_max: 8,
            availability_floor: 42,
            fan_out: 8,
            phases: PhaseBounds {
                hold_ms: 30_000,
                quiesce_ms: 30_000,
                install_ms: 60_000,
                write_identity_ms: 30_000,
                start_ms: 30_000,
                prove_ms: 120_000,
                release_ms: 30_000,
            },
            backoff: Backoff::default(),
            agent_ttl_ms: 3_600_000,
            credential_remaining_ms: 24 * 3_600_000,
            hold_lease_ms: 3_600_000,
            lock_lease_ms: 15 * 60_000,
            credential_wait_ms: 10 * 60_000,
            prove_poll_ms: 10_000,
            hub_url: String::new(),
            journal_name: String::new(),
        }
    }
}

impl Default for RotationSettings {
    /// Four of the agents' 30 s heartbeat periods to prove a successor, the hub read every 10 s meanwhile, 10
    /// minutes to wait for a renewed hub credential.
    fn default() -> RotationSettings {
        RotationSettings {
            backoff: Backoff::default(),
            prove_ms: 4 * 30_000,
            prove_poll_ms: 10_000,
            credential_wait_ms: 10 * 60_000,
        }
    }
}

impl InstanceSettings {
    /// The instance lifecycle of `account` in `region` with the runbook's periods: a pass every 30 s (the agents'
    /// heartbeat period), the replenisher every 60 s, the cloud sync hourly; no pools or nodes of its own.
    pub fn new(account: &str, region: &str, instance_type: &str, template: &str) -> InstanceSettings {
        InstanceSettings {
            account: account.to_owned(),
            region: region.to_owned(),
            instance_type: instance_type.to_owned(),
            template: template.to_owned(),
            pools: Vec::new(),
            plain: Vec::new(),
            bare_metal: false,
            governance: Governance::default(),
            pass_ms: INSTANCE_PASS_MS,
            replenish_ms: REPLENISH_MS,
            sync_ms: CLOUD_SYNC_MS,
            heartbeat_fresh_ms: INSTANCE_PASS_MS,
        }
    }
}
