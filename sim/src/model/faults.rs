//! The fault vocabulary: a closed enum of timed steps that drive the network, the hosts and the fakes, plus the few
//! driver actions (deployment epochs, task leases) that scenarios script around them. Knobs are integers
//! (per-mille probabilities, `_ms` durations). `docs/faults.md` documents each step: what it does, the seed document
//! it comes from, and whether it is recoverable.
//!
//! Each kind is defined once, as a row of the catalogue ([`StepKind`]): its name, domain, whether it counts as a
//! fault, the fields that name hosts, and the campaign knobs that draw it. Everything that lists the kinds is
//! generated from the rows, and the tests below hold `docs/faults.md` and the campaign's knobs to them.

use fakes::artifacts::ArtifactKind;
use fakes::cohort_journal::OldJournal;
use fakes::ssh::Storage;
use fakes::worker::Drift;
use serde::{Deserialize, Serialize};

/// Where a controller death is armed: the named points in the rollout's journal protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeathPoint {
    /// Right after a step's intent record is durable, before the remote operation runs.
    AfterIntent,
    /// Right after a remote mutation was acknowledged, before its completion is recorded.
    AfterRemoteMutation,
    /// Right before a completion record would be written.
    BeforeCompletion,
}

/// Which of the controller's workflows a `controller_death` aims at: the point is armed in that workflow's journal
/// records and remote calls only. Absent from a step, it is the rollout (so older scenarios and plans read and
/// serialise as before).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeathSubsystem {
    /// The rolling deployment: intents, SSH mutations of workers, completions.
    #[default]
    Rollout,
    /// The onboarding workflow: its stage checkpoints, its MAAS mutations, its completion.
    Onboarding,
    /// The decommission workflow: its stage checkpoints, its MAAS and inventory mutations, its completion.
    Decommission,
    /// The instance controller (`[instances]`): after a terminate's commit and before its destroy (`after_intent`),
    /// after a create the provider executed and before its answer is journaled (`after_remote_mutation`), before a
    /// terminate cascade's record (`before_completion`).
    Instances,
    /// The agent-credential rotation: after a step's intent (`after_intent`), after the install's SSH write was
    /// acknowledged (`after_remote_mutation`; the hub calls are not SSH), before a step's completion record
    /// (`before_completion`: the first is the issue's, after the hub minted the successor).
    Rotation,
}

impl DeathSubsystem {
    /// Whether this is the default (left out when a step is written).
    pub fn is_rollout(&self) -> bool {
        *self == DeathSubsystem::Rollout
    }

    /// The workflow's name as a fault phase begins with it (`rollout`, `onboarding`, `decommission`, `instances`,
    /// `rotation`).
    pub fn as_str(self) -> &'static str {
        match self {
            DeathSubsystem::Rollout => "rollout",
            DeathSubsystem::Onboarding => "onboarding",
            DeathSubsystem::Decommission => "decommission",
            DeathSubsystem::Instances => "instances",
            DeathSubsystem::Rotation => "rotation",
        }
    }
}

/// The part `hardware_missing` takes out of a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HardwarePart {
    /// The BOSS boot disk.
    Boss,
    /// The first RoCE NIC.
    Roce,
}

/// What `provider_fault` does to the cloud provider's next calls or boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderFaultKind {
    /// Creates are refused with `InstanceLimitExceeded`.
    QuotaRefusal,
    /// The VM's domain creation hangs: it stays `pending`, its agent never starts.
    HangCreate,
    /// The boot fails: the VM ends `failed`.
    BootFailure,
    /// The guest boots and its agent comes up, but a module pull fails: never `phase=ready`.
    ModulePullFailure,
    /// A destroy leaves the VM `shutting-down` for good (until the provider console reaps it).
    TeardownStuck,
}

/// What an `instance_operator` step asks of the instance controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceOp {
    /// Provision the target node again (with `operation_id`, or a fresh one without).
    Provision,
    PlaceHold,
    LiftHold,
    Start,
    Stop,
    Reboot,
    /// Terminate through the approval gate.
    Terminate,
    /// Cordon through the approval gate.
    Cordon,
    /// Uncordon through the approval gate.
    Uncordon,
    Drain,
    /// Approve the target deferred operation (`d-00001` …).
    Approve,
    Deny,
    /// The runbook's "clearing a stuck provisioning instance": cancel, sync, error, terminate.
    ClearStuck,
    /// A consumer claims a ready member of the target pool.
    Acquire,
    /// A consumer returns the target claimed member.
    Release,
}

impl InstanceOp {
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceOp::Provision => "provision",
            InstanceOp::PlaceHold => "place_hold",
            InstanceOp::LiftHold => "lift_hold",
            InstanceOp::Start => "start",
            InstanceOp::Stop => "stop",
            InstanceOp::Reboot => "reboot",
            InstanceOp::Terminate => "terminate",
            InstanceOp::Cordon => "cordon",
            InstanceOp::Uncordon => "uncordon",
            InstanceOp::Drain => "drain",
            InstanceOp::Approve => "approve",
            InstanceOp::Deny => "deny",
            InstanceOp::ClearStuck => "clear_stuck",
            InstanceOp::Acquire => "acquire",
            InstanceOp::Release => "release",
        }
    }
}

/// What `bmc_fault` does to a machine's BMC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BmcFaultKind {
    /// No answer at all.
    Unreachable,
    /// Commands answer 204 and do nothing.
    IgnoreCommands,
    /// The BMC's password changes under MAAS (401 with the stored login).
    WrongCredentials,
    /// Heals the BMC: answers, obeys, and accepts the login it was racked with.
    Healthy,
}

/// One step of a fault plan. Two-host steps (`a`, `b`) act on both directions of the link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Drop every message between `a` and `b`, both ways.
    Partition {
        a: String,
        b: String,
    },
    /// Drop every message from `from` to `to`; the other direction still flows.
    PartitionOneway {
        from: String,
        to: String,
    },
    /// Heal both directions between `a` and `b`.
    Repair {
        a: String,
        b: String,
    },
    /// Heal the direction `from` → `to`.
    RepairOneway {
        from: String,
        to: String,
    },
    /// Queue messages between `a` and `b` until `release`.
    Hold {
        a: String,
        b: String,
    },
    Release {
        a: String,
        b: String,
    },
    /// Set request and response loss on both directions between `a` and `b` (0 heals).
    LinkLoss {
        a: String,
        b: String,
        request_per_mille: u32,
        response_per_mille: u32,
    },
    /// Set the latency range on both directions between `a` and `b`.
    LinkLatency {
        a: String,
        b: String,
        min_ms: u64,
        max_ms: u64,
    },
    /// Kill a host: every task stops, unsynced disk writes are lost, calls it holds are reset.
    Crash {
        target: String,
    },
    /// Boot a crashed host again from its durable state.
    Restart {
        target: String,
    },
    /// Offset a host's clock from virtual time (a step, not a drift).
    ClockSkew {
        target: String,
        skew_ms: i64,
    },
    /// Stop a node's agent service (a deployment's quiescence): it stops heartbeating until started.
    AgentStop {
        target: String,
    },
    AgentStart {
        target: String,
    },
    /// The agent of `target` stops and stays silent for `silent_ms`, then starts again: the hub's TTL expiry of a
    /// silent agent when `silent_ms` is past the TTL (RCCA: "the hub's one-hour default fungible-agent TTL").
    TtlExpiry {
        target: String,
        silent_ms: u64,
    },
    /// Driver action: open a deployment epoch on the hub with these members.
    OpenEpoch {
        members: Vec<String>,
    },
    /// Driver action: make epoch `epoch` terminal (epochs are numbered from 1 in opening order).
    CloseEpoch {
        epoch: u64,
    },
    /// Driver action: give an agent an active task lease for `duration_ms`.
    TaskLease {
        target: String,
        duration_ms: u64,
    },
    /// Driver action: an operator asks the controller to rotate the agent credential of node `target` (issue a
    /// successor, install it, prove it by a heartbeat, then revoke the predecessor).
    RotateCredential {
        target: String,
    },
    /// Driver action: an operator asks the controller to roll `revision` out to every node (generation = prior + 1).
    StartRollout {
        revision: String,
    },
    /// Give a worker's identity one of the RCCA's drift shapes (worker-50's, the early cohort's, unsafe files, …).
    MarkerDrift {
        target: String,
        shape: Drift,
    },
    /// The next `count` SSH connections to `target` time out (the incident's 10 s connect timeout).
    SshTimeout {
        target: String,
        count: u32,
    },
    /// `target`'s SSH host key changes: the engine must stop using the authority it held for the old one.
    EndpointIdentityChange {
        target: String,
    },
    /// `target`'s storage becomes non-returning (writes never return), full, or healthy again.
    StorageFault {
        target: String,
        storage: Storage,
    },
    /// The rollout revision's capsule of this kind is missing from the artifact store (`restored = true` heals it).
    ArtifactMissing {
        artifact: ArtifactKind,
        restored: bool,
    },
    /// The controller dies the next time `subsystem` (default the rollout) reaches `point`; a later `restart`
    /// brings it back.
    ControllerDeath {
        point: DeathPoint,
        #[serde(default, skip_serializing_if = "DeathSubsystem::is_rollout")]
        subsystem: DeathSubsystem,
        /// When set, the controller boots again this long after it died (instead of at a timed `restart` step,
        /// which a trap that fires late could precede).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        restart_after_ms: Option<u64>,
    },
    /// The hub starts publishing a different signed route bundle (another route authority).
    RouteSwap,
    /// The controller's hub credential expires now; the rotation state machine (outside deployment) puts a new one
    /// in the secrets store `renew_after_ms` later. Until then every hub mutation of the controller is refused.
    CredentialExpiry {
        renew_after_ms: u64,
    },
    /// A controller that has since died took the hub's deployment lock for `lease_ms` (stale authority): a live
    /// controller must wait it out, and can never mutate under it.
    StaleLock {
        lease_ms: u64,
    },
    /// The hub carries out the controller's next `count` mutations but their answers are lost: the controller times
    /// out on an operation that ran (the RCCA's first-attempt hub SSH timeout).
    HubTimeout {
        count: u32,
    },
    /// An operator places a dispatch hold on `target` (owner `operator:maintenance`) that no rollout may release.
    OperatorHold {
        target: String,
    },
    /// Registry cleanup revokes `target`'s hub principal: its row is tombstoned and its agent's heartbeats refused.
    PrincipalRevoked {
        target: String,
    },
    /// The controller's journal holds what the pre-typed MAC controller wrote before this one was installed: `shape`'s
    /// lines for a rollout of `revision` (the fleet's next generation and current route bundle, cohorts of the lane
    /// size, in node order). Meant for `at_ms = 0`, a journal as the old controller left it.
    OldJournal {
        shape: OldJournal,
        revision: String,
    },
    // --- the MAAS site (runs with `[onboarding]`; `target` is one of the site's machines) ---------------------------
    /// Every NIC MAC of the machine is regenerated at its next power-on (seed: the `SiteFaults` stream).
    MacDrift {
        target: String,
    },
    /// The rack resolver answers SERVFAIL to every query, or to names in `zones` only.
    ResolverServfail {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zones: Option<Vec<String>>,
    },
    /// The rack resolver answers again.
    ResolverRepair,
    /// A commissioning script of the machine never completes.
    ScriptHang {
        target: String,
    },
    /// A commissioning script of the machine fails.
    ScriptFailure {
        target: String,
    },
    /// The machine's commissioning is slow but progresses: each of its commissioning scripts reports
    /// `event_interval_ms` after the one before (a trickle of script results, late, never silent).
    CommissioningSlow {
        target: String,
        event_interval_ms: u64,
    },
    /// cloud-init on the machine fails after reaching the metadata service (every boot).
    DatasourceFailure {
        target: String,
    },
    /// A part of the machine is absent from now on.
    HardwareMissing {
        target: String,
        part: HardwarePart,
    },
    /// The machine's node agent enrols `delay_ms` after cloud-init starts it.
    AgentEnrolDelay {
        target: String,
        delay_ms: u64,
    },
    /// Seeding the machine's hardware-sync timer fails (MAAS rejects its token): the service never reports.
    HwSyncFailure {
        target: String,
    },
    /// The machine's hardware-sync service reports `after_syncs` times, then stops (its last sync goes stale).
    HwSyncStops {
        target: String,
        after_syncs: u32,
    },
    /// The machine's sshd answers none of the next `count` connections.
    SshUnreachable {
        target: String,
        count: u32,
    },
    /// The secrets store mints the next `count` bootstrap tokens of `target` and their answers are lost: the
    /// controller times out on a token that exists (`render_cloud_init`'s partial node row).
    TokenAnswerLost {
        target: String,
        count: u32,
    },
    /// The region's next `count` answers are 503 with `Retry-After: retry_after_s`.
    MaasUnavailable {
        count: u32,
        retry_after_s: u32,
    },
    /// The site's secrets store loses its bootstrap-token role: no node can be given a token.
    TokenPolicyMissing,
    /// The controller's MAAS API key is revoked (a person regenerated it, or the configuration holds a wrong one):
    /// every region answer is 401 `Authorization Error: Invalid API key.` until the run ends.
    MaasKeyRevoked,
    /// The region's next `count` deploys fail to render their preseed (400).
    PreseedFailure {
        count: u32,
    },
    /// The region answers nothing (`down = true`) or answers again.
    MaasUnreachable {
        down: bool,
    },
    /// The site's secrets store answers its next `count` requests 503.
    VaultUnavailable {
        count: u32,
    },
    /// The machine's power-credential override is deleted from the secrets store.
    PowerCredentialMissing {
        target: String,
    },
    /// The machine's BMC fails (or heals).
    BmcFault {
        target: String,
        fault: BmcFaultKind,
    },
    /// The rack's DHCP server forgets the machine's leases and answers its current MACs no more until `dhcp_repair`.
    DhcpLeaseLoss {
        target: String,
    },
    /// The DHCP server answers everyone again.
    DhcpRepair,
    /// The site is disabled in its configuration.
    SiteDisabled,
    /// An operator deletes the machine's MAAS record out of band.
    MachineDeleted {
        target: String,
    },
    /// An operator disconnects the machine's PXE interface in MAAS out of band (`op=disconnect`: no VLAN, no links).
    InterfaceDisconnected {
        target: String,
    },
    /// An operator commissions the machine out of band.
    MachineAdvanced {
        target: String,
    },
    /// The region's Temporal workflow engine wedges (`wedged = true`: its worker reports `dead`, and a commission's
    /// power action is never dispatched) or is restarted (`false`).
    RegionWorkflowWedged {
        wedged: bool,
    },
    /// The machine's MAAS record disappears from the API (`hidden = true`) or reappears.
    MachineHidden {
        target: String,
        hidden: bool,
    },
    /// Operator repair after a MAC drift: the machine's current MACs are put on its original record and the records
    /// MAAS enlisted for the new MACs are deleted.
    RegisterMacs {
        target: String,
    },
    /// Driver action: an operator asks the controller to run the machine's onboarding workflow again.
    ResumeOnboarding {
        target: String,
    },
    /// Driver action: a person (or automation) asks for a recovery action (seed 000, section 2) on the machine's
    /// onboarding or decommission workflow. The controller audits it (section 8) and performs what is authorized.
    Operator {
        target: String,
        workflow: engine::matrix::Workflow,
        action: engine::matrix::RecoveryAction,
        #[serde(default = "default_operator_actor")]
        actor: String,
        #[serde(default = "default_operator_role")]
        role: engine::recovery::ActorRole,
        /// Free text for the audit record: required, never a secret.
        reason: String,
        /// The person says the issue behind a freeze is resolved.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resolves_freeze: bool,
    },
    // --- decommission (runs with `[onboarding]`) ---------------------------------------------------------------------
    /// Driver action: an operator asks the controller to decommission the machine (after its onboarding, if that is
    /// still in flight).
    Decommission {
        target: String,
    },
    /// The machine's allocations survive the next `count` forced releases.
    AllocationStuck {
        target: String,
        count: u32,
    },
    /// The next `count` storage cleanups of the machine leave residue that validation finds.
    CleanupResidue {
        target: String,
        count: u32,
    },
    /// The next `count` uninstalls of the machine's agent fail.
    UninstallFailure {
        target: String,
        count: u32,
    },
    /// The machine's node agent takes no task (`down = true`) or takes them again.
    AgentUnreachable {
        target: String,
        down: bool,
    },
    /// The inventory's next `count` answers are 503.
    InventoryUnavailable {
        count: u32,
    },
    /// The region's next `count` disk wipes fail ("Failed to erase disks.").
    EraseFailure {
        count: u32,
    },
    /// Every disk wipe of `target` takes `erase_ms` (a full overwrite of large disks), still DISK_ERASING
    /// meanwhile.
    EraseSlow {
        target: String,
        erase_ms: u64,
    },
    /// The controller's secrets policy loses `delete` on node secrets.
    SecretsDeleteDenied,
    /// Out of band: an operator moves the machine's inventory record one step back toward service (quarantined →
    /// active, retired → quarantined).
    NodeReactivated {
        target: String,
    },
    // --- instances (runs with `[instances]`) -------------------------------------------------------------------------
    /// Driver action: a person's (or a pool consumer's) request to the instance controller. `target` names a node
    /// (`vm-01`, its latest instance), an instance (`i-00003`), a pool's k-th live member (`edge[2]`), a pool
    /// (`acquire`) or a deferred operation (`approve`, `deny`: `d-00001`).
    InstanceOperator {
        target: String,
        op: InstanceOp,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
        #[serde(default = "default_operator_actor")]
        actor: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        force: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        operation_id: Option<String>,
    },
    /// The provider's next `count` creates (quota, hang), boots (failure, module pull) or destroys (teardown) fail.
    ProviderFault {
        fault: ProviderFaultKind,
        count: u32,
    },
    /// The next `count` create answers are lost on the way back to the controller: the VM was created.
    ProviderAnswerLost {
        count: u32,
    },
    /// The region's listing stops answering (`stopped = true`: the cloud sync fails) or answers again.
    ProviderSyncStops {
        stopped: bool,
    },
}

/// What a step acts on: the part of the world that applies it, and the part of `docs/faults.md` that describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Domain {
    /// The links between hosts.
    Network,
    /// A host as a whole: its life and its clock.
    Host,
    /// The fleet's agents (their credentials' rotation included) and the hub's deployment epochs and leases.
    Fleet,
    /// The rolling deployment: its workers, its artifacts, the controller and its authority at the hub.
    Rollout,
    /// The MAAS site and the onboarding workflow (runs with `[onboarding]`; a `target` is a site machine).
    Site,
    /// The decommission workflow (runs with `[onboarding]`; a `target` is a site machine).
    Decommission,
    /// The instance lifecycle on the cloud provider (runs with `[instances]`).
    Instance,
}

impl Domain {
    /// Whether the domain's steps act on the MAAS site (and so need an `[onboarding]` section, and name machines).
    pub fn is_site(self) -> bool {
        match self {
            Domain::Site | Domain::Decommission => true,
            Domain::Network | Domain::Host | Domain::Fleet | Domain::Rollout | Domain::Instance => false,
        }
    }
}

/// Whether a step counts in the run record's `faults`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// It injects a fault, always.
    Always,
    /// It injects a fault when its fields (or the state it finds) say so, and heals or changes nothing otherwise.
    When,
    /// It heals a fault.
    Never,
    /// A driver action: what an operator or the deployment does, never a fault; it may come after the last fault
    /// (the liveness rule does not count it) and is never fired by a stage.
    DriverAction,
}

/// Names a step's host or machine field: one name, or a list (`open_epoch`'s `members`).
trait Named {
    fn each(&self) -> impl Iterator<Item = &str>;
}

impl Named for String {
    fn each(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.as_str())
    }
}

impl Named for Vec<String> {
    fn each(&self) -> impl Iterator<Item = &str> {
        self.iter().map(String::as_str)
    }
}

/// Builds the catalogue from its rows: [`StepKind`] and its tables, [`Step::step_kind`], [`Step::is_fault`],
/// [`Step::names`], and one pattern macro per domain (`network_step!()` …) that matches every step of the domain, so
/// a match that handles one domain can name the others without a catch-all.
macro_rules! catalogue {
    (
        fn is_fault($default_link:ident, $is_up:ident);
        $(
            $domain:ident $pattern:ident {
                $(
                    $variant:ident $name:literal [$($named:ident),*] [$($knob:literal),*]
                        $counted:ident $({ $($field:ident),* } $condition:expr)?;
                )*
            }
        )*
    ) => {
        /// A step's kind: [`Step`] without its fields, one per variant, in catalogue order.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum StepKind {
            $($($variant,)*)*
        }

        impl StepKind {
            /// Every kind, in catalogue order (the order error messages list them in).
            pub const ALL: &'static [StepKind] = &[$($(StepKind::$variant,)*)*];

            /// The kind's name: the `kind` of a step in files, traces and run records.
            pub fn name(self) -> &'static str {
                match self {
                    $($(StepKind::$variant => $name,)*)*
                }
            }

            /// What the kind's steps act on.
            pub fn domain(self) -> Domain {
                match self {
                    $($(StepKind::$variant => Domain::$domain,)*)*
                }
            }

            /// Whether the kind's steps count as faults.
            pub fn counted(self) -> Counted {
                match self {
                    $($(StepKind::$variant => Counted::$counted,)*)*
                }
            }

            /// The campaign `[faults]` knobs (`FaultMix` fields) whose draws inject steps of this kind.
            pub fn knobs(self) -> &'static [&'static str] {
                match self {
                    $($(StepKind::$variant => &[$($knob),*],)*)*
                }
            }
        }

        impl Step {
            /// The step's kind.
            pub fn step_kind(&self) -> StepKind {
                match self {
                    $($(Step::$variant { .. } => StepKind::$variant,)*)*
                }
            }

            /// Whether the step injects a fault (counted in `faults` of the run record), as opposed to healing one,
            /// being a driver action, or changing nothing (`is_up` says whether a host is up when the step applies).
            pub fn is_fault(
                &self,
                $default_link: &crate::model::link::LinkConfig,
                $is_up: impl Fn(&str) -> bool,
            ) -> bool {
                match self {
                    $($(Step::$variant { $($($field,)*)? .. } => catalogue!(@fault $counted $($condition)?),)*)*
                }
            }

            /// Every host the step names (a site machine, for a step of the site's domains), with the key it is
            /// under (for validation errors).
            pub fn names(&self) -> Vec<(&'static str, &str)> {
                match self {
                    $($(
                        Step::$variant { $($named,)* .. } => std::iter::empty()
                            $(.chain($named.each().map(|name| (stringify!($named), name))))*
                            .collect(),
                    )*)*
                }
            }
        }

        $(
            /// Matches every step of one domain (a pattern, generated from the catalogue).
            macro_rules! $pattern {
                () => { $($crate::model::faults::Step::$variant { .. })|* };
            }
            pub(crate) use $pattern;
        )*
    };
    (@fault Always) => { true };
    (@fault When $condition:expr) => { $condition };
    (@fault Never) => { false };
    (@fault DriverAction) => { false };
}

// The catalogue: one row per step kind, grouped by domain. A row is the variant, its kind name, the fields that name
// hosts (machines, in the site's domains), the campaign knobs that draw it, and whether it counts as a fault (`When`
// with the fields and the condition). `docs/faults.md` describes each kind; a test holds the two together.
catalogue! {
    fn is_fault(default_link, is_up);
    Network network_step {
        Partition "partition" [a, b] ["partition", "observer_partition"] Always;
        PartitionOneway "partition_oneway" [from, to] ["partition_oneway"] Always;
        Repair "repair" [a, b] [] Never;
        RepairOneway "repair_oneway" [from, to] [] Never;
        Hold "hold" [a, b] ["hold"] Always;
        Release "release" [a, b] [] Never;
        LinkLoss "link_loss" [a, b] ["link_loss"]
            When { request_per_mille, response_per_mille } *request_per_mille + *response_per_mille > 0;
        LinkLatency "link_latency" [a, b] ["latency"]
            When { min_ms, max_ms } (*min_ms, *max_ms) != (default_link.latency_min_ms, default_link.latency_max_ms);
    }
    Host host_step {
        // A crash of a host that is already down changes nothing and is not counted.
        Crash "crash" [target] ["node_crash", "hub_crash", "controller_crash"] When { target } is_up(target);
        Restart "restart" [target] [] Never;
        ClockSkew "clock_skew" [target] ["clock_skew"] When { skew_ms } *skew_ms != 0;
    }
    Fleet fleet_step {
        AgentStop "agent_stop" [target] ["agent_stop"] Always;
        AgentStart "agent_start" [target] [] Never;
        TtlExpiry "ttl_expiry" [target] ["ttl_expiry"] Always;
        OpenEpoch "open_epoch" [members] [] DriverAction;
        CloseEpoch "close_epoch" [] [] DriverAction;
        TaskLease "task_lease" [target] [] DriverAction;
        RotateCredential "rotate_credential" [target] ["credential_rotation"] DriverAction;
    }
    Rollout rollout_step {
        StartRollout "start_rollout" [] [] DriverAction;
        MarkerDrift "marker_drift" [target] ["marker_drift"] Always;
        SshTimeout "ssh_timeout" [target] ["ssh_timeout"] Always;
        EndpointIdentityChange "endpoint_identity_change" [target] [] Always;
        StorageFault "storage_fault" [target] ["storage_fault"] When { storage } *storage != Storage::Healthy;
        ArtifactMissing "artifact_missing" [] ["artifact_missing"] When { restored } !restored;
        ControllerDeath "controller_death" []
            ["controller_death", "decommission_controller_death", "onboarding_controller_death", "instance_controller_death"]
            Always;
        RouteSwap "route_swap" [] ["route_swap"] Always;
        CredentialExpiry "credential_expiry" [] ["credential_expiry"] Always;
        HubTimeout "hub_timeout" [] [] Always;
        StaleLock "stale_lock" [] ["stale_lock"] Always;
        OperatorHold "operator_hold" [target] ["operator_hold"] Always;
        PrincipalRevoked "principal_revoked" [target] [] Always;
        OldJournal "old_journal" [] [] Always;
    }
    Site site_step {
        MacDrift "mac_drift" [target] ["mac_drift"] Always;
        ResolverServfail "resolver_servfail" [] ["resolver_servfail"] Always;
        ResolverRepair "resolver_repair" [] [] Never;
        ScriptHang "script_hang" [target] ["script_hang"] Always;
        ScriptFailure "script_failure" [target] [] Always;
        CommissioningSlow "commissioning_slow" [target] ["commissioning_slow"] Always;
        DatasourceFailure "datasource_failure" [target] ["datasource_failure"] Always;
        HardwareMissing "hardware_missing" [target] ["hardware_missing"] Always;
        AgentEnrolDelay "agent_enrol_delay" [target] ["agent_enrol_delay"] Always;
        HwSyncFailure "hw_sync_failure" [target] ["hw_sync_failure"] Always;
        HwSyncStops "hw_sync_stops" [target] ["hw_sync_stops"] Always;
        SshUnreachable "ssh_unreachable" [target] ["ssh_unreachable"] Always;
        TokenAnswerLost "token_answer_lost" [target] [] Always;
        MaasUnavailable "maas_unavailable" [] ["maas_unavailable"] Always;
        PreseedFailure "preseed_failure" [] ["preseed_failure"] Always;
        TokenPolicyMissing "token_policy_missing" [] [] Always;
        MaasKeyRevoked "maas_key_revoked" [] [] Always;
        MaasUnreachable "maas_unreachable" [] [] When { down } *down;
        VaultUnavailable "vault_unavailable" [] [] Always;
        PowerCredentialMissing "power_credential_missing" [target] [] Always;
        BmcFault "bmc_fault" [target] ["bmc_fault"] When { fault } *fault != BmcFaultKind::Healthy;
        DhcpLeaseLoss "dhcp_lease_loss" [target] [] Always;
        DhcpRepair "dhcp_repair" [] [] Never;
        SiteDisabled "site_disabled" [] [] Always;
        MachineDeleted "machine_deleted" [target] ["machine_deleted"] Always;
        MachineAdvanced "machine_advanced" [target] [] Always;
        InterfaceDisconnected "interface_disconnected" [target] ["interface_disconnected"] Always;
        MachineHidden "machine_hidden" [target] [] When { hidden } *hidden;
        RegionWorkflowWedged "region_workflow_wedged" [] [] When { wedged } *wedged;
        RegisterMacs "register_macs" [target] [] DriverAction;
        ResumeOnboarding "resume_onboarding" [target] [] DriverAction;
        Operator "operator" [target] ["operator_action"] DriverAction;
    }
    Decommission decommission_step {
        Decommission "decommission" [target] [] DriverAction;
        AllocationStuck "allocation_stuck" [target] ["allocation_stuck"] Always;
        CleanupResidue "cleanup_residue" [target] ["cleanup_residue"] Always;
        UninstallFailure "uninstall_failure" [target] ["uninstall_failure"] Always;
        AgentUnreachable "agent_unreachable" [target] ["agent_unreachable"] When { down } *down;
        InventoryUnavailable "inventory_unavailable" [] ["inventory_unavailable"] Always;
        EraseFailure "erase_failure" [] ["erase_failure"] Always;
        EraseSlow "erase_slow" [target] [] Always;
        SecretsDeleteDenied "secrets_delete_denied" [] [] Always;
        NodeReactivated "node_reactivated" [target] [] Always;
    }
    Instance instance_step {
        InstanceOperator "instance_operator" [] ["instance_operations"] DriverAction;
        ProviderFault "provider_fault" [] ["provider_fault"] When { count } *count > 0;
        ProviderAnswerLost "provider_answer_lost" [] ["provider_answer_lost"] When { count } *count > 0;
        ProviderSyncStops "provider_sync_stops" [] ["provider_sync_stops"] When { stopped } *stopped;
    }
}

/// The key of the link between `a` and `b` in both directions: the two names in order, `a|b`.
pub fn link_key(a: &str, b: &str) -> String {
    if a <= b { format!("{a}|{b}") } else { format!("{b}|{a}") }
}

impl Step {
    /// What the step is aimed at, as the fault ledger and the run record's `fault_log` name it: a link (`a|b` for
    /// both directions, `from>to` for one), the host or machine it names, or empty for one that acts on the whole
    /// site, hub or controller.
    pub fn target_key(&self) -> String {
        match self {
            Step::Partition { a, b }
            | Step::Repair { a, b }
            | Step::Hold { a, b }
            | Step::Release { a, b }
            | Step::LinkLoss { a, b, .. }
            | Step::LinkLatency { a, b, .. } => link_key(a, b),
            Step::PartitionOneway { from, to } | Step::RepairOneway { from, to } => format!("{from}>{to}"),
            other => other.names().first().map(|(_, name)| (*name).to_owned()).unwrap_or_default(),
        }
    }

    /// The step's `kind`, as written in files and counted in run records.
    pub fn kind(&self) -> &'static str {
        self.step_kind().name()
    }

    /// Whether the step acts on the MAAS site (and so needs an `[onboarding]` section).
    pub fn is_site_step(&self) -> bool {
        self.step_kind().domain().is_site()
    }

    /// Whether the step acts on the instance lifecycle (and so needs an `[instances]` section).
    pub fn is_instance_step(&self) -> bool {
        self.step_kind().domain() == Domain::Instance
    }
}

/// The actor an `operator` step names when it names none.
pub const DEFAULT_OPERATOR_ACTOR: &str = "oncall";

fn default_operator_actor() -> String {
    DEFAULT_OPERATOR_ACTOR.to_owned()
}

fn default_operator_role() -> engine::recovery::ActorRole {
    engine::recovery::ActorRole::Operator
}

/// What a fault that landed did to the run: the first thing that changed course because of it (`docs/faults.md`,
/// "Where a fault lands and what it does"). A fault is *effective* when its effect is not [`Effect::None`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// The engine tried a call, a step or a stage again.
    Retried,
    /// A workflow or the rollout waited on it: a lock held by someone else, a stall it classified.
    Stalled,
    /// Something stopped because of it: a node's step, a workflow, a lane, the rollout, the controller, an agent's
    /// identity (tombstoned).
    Stopped,
    /// A node was quarantined and left dispatch-held with its repair plan.
    Quarantined,
    /// The engine repaired what it changed, or compensated for it.
    Repaired,
    /// A typed signal was raised about it (a silence, a stuck row, an agent marked offline or kept by its epoch past
    /// the TTL) and nothing else changed course.
    Signalled,
    /// It landed and nothing changed course, or it never landed.
    None,
}

impl Effect {
    /// Every effect, in the order reports list them.
    pub const ALL: [Effect; 7] = [
        Effect::Retried,
        Effect::Stalled,
        Effect::Stopped,
        Effect::Quarantined,
        Effect::Repaired,
        Effect::Signalled,
        Effect::None,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Retried => "retried",
            Effect::Stalled => "stalled",
            Effect::Stopped => "stopped",
            Effect::Quarantined => "quarantined",
            Effect::Repaired => "repaired",
            Effect::Signalled => "signalled",
            Effect::None => "none",
        }
    }
}

/// What a fault landed on: whose work met it. The phase it landed in is that subject's activity at the time, and its
/// effect is that subject's first reaction after it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    /// A fleet node (its worker over SSH, its agent at the hub).
    Node(String),
    /// A site machine (its onboarding or decommission workflow).
    Machine(String),
    /// The rollout as a whole (its lock, its credential, its route bundle, its artifacts).
    Rollout,
    /// The controller host: whatever it was running.
    Controller,
    /// A host as a whole (`hub`, `maas`, a node) for a fault of the network or the host.
    Host(String),
    /// The instance lifecycle on the cloud provider.
    Instances,
}

impl Subject {
    /// The name reactions are matched on: a node's or machine's name, `rollout`, `controller`, a host's name, or
    /// `instances`.
    pub fn key(&self) -> &str {
        match self {
            Subject::Node(name) | Subject::Machine(name) | Subject::Host(name) => name,
            Subject::Rollout => "rollout",
            Subject::Controller => "controller",
            Subject::Instances => "instances",
        }
    }
}

/// A step and when it happens, in virtual ms from the start of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimedStep {
    pub at_ms: u64,
    pub step: Step,
}

/// A step fired by the workflow itself: when `workflow`'s onboarding starts `stage` for the `occurrence`-th time
/// (retries and later runs count), before the stage's first request. It aims a fault at one (stage, failure class)
/// pair of the recovery matrix without guessing when the stage will run. It fires at most once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageStep {
    /// The machine whose workflow triggers the step.
    pub workflow: String,
    pub stage: engine::matrix::Stage,
    pub occurrence: u64,
    /// How long after the stage's start the step fires (0: at once, before the stage's first request).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wait_ms: u64,
    pub step: Step,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// Where in a rollout a rollout-triggered step fires (`on_rollout`): when the controller begins a rollout (a fresh
/// one, or one it adopts from the journal after a death), when a node starts one of its steps, or one of its lane's
/// reverse recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RolloutPoint {
    Begin,
    Step(engine::ports::events::NodeStep),
    /// A node starts this step of its lane's reverse recovery.
    Revert(engine::ports::events::NodeStep),
}

impl RolloutPoint {
    /// Every point, in rollout order.
    pub const ALL: [RolloutPoint; 15] = {
        use engine::ports::events::NodeStep as S;
        [
            RolloutPoint::Begin,
            RolloutPoint::Step(S::Hold),
            RolloutPoint::Step(S::Quiesce),
            RolloutPoint::Step(S::Install),
            RolloutPoint::Step(S::WriteIdentity),
            RolloutPoint::Step(S::Start),
            RolloutPoint::Step(S::Prove),
            RolloutPoint::Step(S::Release),
            RolloutPoint::Revert(S::Hold),
            RolloutPoint::Revert(S::Quiesce),
            RolloutPoint::Revert(S::Install),
            RolloutPoint::Revert(S::WriteIdentity),
            RolloutPoint::Revert(S::Start),
            RolloutPoint::Revert(S::Prove),
            RolloutPoint::Revert(S::Release),
        ]
    };

    /// Its name in files: `begin`, the node step's, or `revert:<step>` as the trace names the reverse step
    /// (`revert:restore` for the install's).
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutPoint::Begin => "begin",
            RolloutPoint::Step(step) => step.as_str(),
            RolloutPoint::Revert(step) => engine::ports::events::RolloutStep::Revert(step).as_str(),
        }
    }

    pub fn parse(name: &str) -> Option<RolloutPoint> {
        RolloutPoint::ALL.into_iter().find(|point| point.as_str() == name)
    }
}

impl Serialize for RolloutPoint {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for RolloutPoint {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        RolloutPoint::parse(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown rollout point {name}")))
    }
}

/// A step fired by the rollout itself (`on_rollout`): the `occurrence`-th time the rollout reaches `point` — for a
/// node step, `node`'s start of it (any node's when `node` is absent) — before the step's first call. It aims a
/// fault at an active rollout step without guessing when that will be. It fires at most once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutStepTrigger {
    pub point: RolloutPoint,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub occurrence: u64,
    pub step: Step,
}

/// The end of a phase of the run a step can wait for (`after = "..."`), when the part of the world that owns it gets
/// there: a step aimed at what only exists once the phase is over (a rollout to machines MAAS onboarded, the
/// decommission of a worker once its rollout ended) without guessing when that will be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Every machine of the site had its onboarding started and every onboarding workflow rests.
    Onboarding,
    /// The controller's rollout ended (any terminal outcome), seen by the controller.
    Rollout,
}

impl Phase {
    pub const ALL: [Phase; 2] = [Phase::Onboarding, Phase::Rollout];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Onboarding => "onboarding",
            Phase::Rollout => "rollout",
        }
    }
}

/// A step fired `wait_ms` after the run reaches the end of `after` (the first time it does). It fires at most
/// once, and never when the phase is never reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseStep {
    pub after: Phase,
    pub wait_ms: u64,
    pub step: Step,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_named_as_its_step_is_tagged_and_once() {
        let mut names = std::collections::BTreeSet::new();
        for &kind in StepKind::ALL {
            assert!(names.insert(kind.name()), "{} is named twice", kind.name());
            // `StepKind` and `Step` derive their names with the same rule from the same variant names, so a name
            // that reads back as its kind is the `kind` tag of its step.
            let read: StepKind = serde_json::from_value(serde_json::json!(kind.name()))
                .unwrap_or_else(|error| panic!("{kind:?} is named {}: {error}", kind.name()));
            assert_eq!(read, kind, "{} is not the name serde gives {kind:?}", kind.name());
            let tagged = serde_json::from_value::<Step>(serde_json::json!({ "kind": kind.name() }));
            assert!(tagged.err().is_none_or(|error| !error.to_string().contains("unknown variant")), "{kind:?}");
        }
    }

    #[test]
    fn a_step_tells_its_kind_fault_and_names_from_its_row() {
        let link = crate::model::link::LinkConfig::default();
        let crash = Step::Crash { target: "node-01".into() };
        assert_eq!(crash.kind(), "crash");
        assert_eq!(crash.step_kind().domain(), Domain::Host);
        assert!(crash.is_fault(&link, |_| true));
        assert!(!crash.is_fault(&link, |_| false), "a crash of a host that is down is not counted");
        assert_eq!(crash.names(), [("target", "node-01")]);
        let epoch = Step::OpenEpoch { members: vec!["node-01".into(), "node-02".into()] };
        assert_eq!(epoch.names(), [("members", "node-01"), ("members", "node-02")]);
        assert!(!epoch.is_fault(&link, |_| true));
        let loss = |request_per_mille| Step::LinkLoss {
            a: "hub".into(),
            b: "node-01".into(),
            request_per_mille,
            response_per_mille: 0,
        };
        assert!(loss(1).is_fault(&link, |_| true));
        assert!(!loss(0).is_fault(&link, |_| true), "no loss heals");
        assert_eq!(loss(0).names(), [("a", "hub"), ("b", "node-01")]);
        let latency = |max_ms| Step::LinkLatency { a: "hub".into(), b: "node-01".into(), min_ms: 1, max_ms };
        assert!(!latency(link.latency_max_ms).is_fault(&link, |_| true), "the default range heals");
        assert!(latency(link.latency_max_ms + 1).is_fault(&link, |_| true));
        let drift = Step::MacDrift { target: "node-04".into() };
        assert!(drift.is_site_step());
        assert_eq!(drift.names(), [("target", "node-04")], "a machine, in the site's domains");
        assert_eq!(Step::RouteSwap.names(), []);
    }

    #[test]
    fn a_campaign_knob_draws_one_kind() {
        let mut knobs = std::collections::BTreeMap::new();
        for &kind in StepKind::ALL {
            for knob in kind.knobs() {
                assert_eq!(knobs.insert(*knob, kind), None, "{knob} is listed by two kinds");
            }
        }
    }

    /// `docs/faults.md`, the catalogue's prose.
    const FAULTS_MD: &str = include_str!("../../../docs/faults.md");

    /// The text of the document's `## ` section titled `title`, up to the next `## ` heading.
    const FORMATS_MD: &str = include_str!("../../../docs/formats.md");

    /// The backticked names in `text`, in order.
    fn backticked(text: &str) -> Vec<&str> {
        text.split('`').skip(1).step_by(2).collect()
    }

    /// The text of `docs/formats.md` from `start` to the next `end` after it.
    fn formats_span<'a>(start: &str, end: &str) -> &'a str {
        let from = FORMATS_MD.find(start).unwrap_or_else(|| panic!("docs/formats.md has no {start:?}")) + start.len();
        let rest = &FORMATS_MD[from..];
        &rest[..rest.find(end).unwrap_or_else(|| panic!("docs/formats.md: no {end:?} after {start:?}"))]
    }

    #[test]
    fn the_format_docs_give_every_kind_its_row_and_every_knob_its_name() {
        // The step table of `[[steps]]`: a row names one kind, or several that share their fields.
        let table = formats_span("| `kind` | fields | validation |\n|---|---|---|\n", "\n\n");
        let mut documented: Vec<&str> = Vec::new();
        for row in table.lines() {
            let first = row.trim_start_matches('|').split(" | ").next().unwrap_or_default();
            documented.extend(backticked(first));
        }
        let mut listed: Vec<&str> = StepKind::ALL.iter().map(|kind| kind.name()).collect();
        let mut sorted = documented.clone();
        sorted.sort_unstable();
        listed.sort_unstable();
        assert_same(&sorted, &listed, "the `[[steps]]` table of docs/formats.md (one row per kind)");
        // The `[faults]` knobs: the kinds a campaign names, in the three sentences that list them.
        let mut knobs: Vec<&str> = [
            formats_span("The kinds are ", ". `faults.md`"),
            formats_span("The MAAS site's kinds — ", " — take"),
            formats_span("Decommission's kinds — ", " — take"),
            formats_span("The instance lifecycle's kinds — ", " — take"),
        ]
        .into_iter()
        .flat_map(backticked)
        .collect();
        knobs.sort_unstable();
        let mut drawn: Vec<&str> = StepKind::ALL.iter().flat_map(|kind| kind.knobs().iter().copied()).collect();
        drawn.sort_unstable();
        drawn.dedup();
        assert_same(&knobs, &drawn, "the `[faults]` section of docs/formats.md (each campaign knob once)");
    }

    /// Fails naming what `documented` (sorted) misses of `listed` (sorted), and what it has twice or too many.
    fn assert_same(documented: &[&str], listed: &[&str], what: &str) {
        let missing: Vec<&&str> = listed.iter().filter(|name| !documented.contains(name)).collect();
        let unknown: Vec<&&str> = documented.iter().filter(|name| !listed.contains(name)).collect();
        let twice: Vec<&[&str]> = documented.windows(2).filter(|pair| pair[0] == pair[1]).collect();
        assert!(
            missing.is_empty() && unknown.is_empty() && twice.is_empty(),
            "{what}: misses {missing:?}, has {unknown:?} too, and {twice:?} twice"
        );
    }

    fn section(title: &str) -> &'static str {
        let start = FAULTS_MD.find(&format!("\n## {title}\n")).unwrap_or_else(|| panic!("no section {title}"));
        let body = &FAULTS_MD[start + title.len() + 5..];
        &body[..body.find("\n## ").unwrap_or(body.len())]
    }

    /// The section of `docs/faults.md` a domain's steps are described in, and whether each has a `### ` heading there
    /// (the site's and decommission's steps are a list).
    fn described_in(domain: Domain) -> (&'static str, bool) {
        match domain {
            Domain::Network | Domain::Host | Domain::Fleet => ("Steps", true),
            Domain::Rollout => ("Rollout steps", true),
            Domain::Site => ("The MAAS site's steps", false),
            Domain::Decommission => ("Decommission's steps", false),
            Domain::Instance => ("The instance lifecycle's steps", false),
        }
    }

    #[test]
    fn the_fault_docs_list_every_kind_once_as_the_catalogue_says() {
        // The table of "## Steps": `| kind | fields (units) | counts as a fault | healed by |`, one row per kind.
        let rows: Vec<Vec<&str>> = section("Steps")
            .lines()
            .take_while(|line| !line.starts_with("### "))
            .filter(|line| line.starts_with("| `"))
            .map(|line| line.trim_matches('|').split(" | ").map(str::trim).collect())
            .collect();
        let documented: Vec<&str> = rows.iter().map(|row| row[0].trim_matches('`')).collect();
        let listed: Vec<&str> = StepKind::ALL.iter().map(|kind| kind.name()).collect();
        let missing: Vec<&&str> = listed.iter().filter(|name| !documented.contains(name)).collect();
        let unknown: Vec<&&str> = documented.iter().filter(|name| !listed.contains(name)).collect();
        assert!(missing.is_empty() && unknown.is_empty(), "`## Steps` misses {missing:?}, and lists {unknown:?} too");
        assert_eq!(documented.len(), listed.len(), "`## Steps` lists a kind twice");
        for row in &rows {
            let kind = *StepKind::ALL.iter().find(|kind| kind.name() == row[0].trim_matches('`')).unwrap();
            let cell = row[2];
            let documented = if cell.contains("driver action") {
                Counted::DriverAction
            } else if cell == "never" {
                Counted::Never
            } else if cell == "always" {
                Counted::Always
            } else {
                Counted::When
            };
            assert_eq!(documented, kind.counted(), "{}: the docs say it counts as a fault \"{cell}\"", kind.name());
        }
        for &kind in StepKind::ALL {
            let (title, headed) = described_in(kind.domain());
            let named = format!("`{}`", kind.name());
            let text = section(title);
            let described = if headed {
                text.lines().any(|line| line.starts_with("### ") && line.contains(&named))
            } else {
                text.contains(&named)
            };
            assert!(described, "{} ({:?}) is not described under \"## {title}\"", kind.name(), kind.domain());
        }
    }
}
