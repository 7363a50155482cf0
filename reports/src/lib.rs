//! Run records and campaign reports: the versioned JSON model release gates read, its atomic writer, its
//! fail-closed reader ([`read`]), its renderers ([`render`]) and the trace comparison behind `fleetsim diff`
//! ([`trace_diff`]).
//!
//! API Boundary: the JSON shapes here are a stable, versioned format (documented in `docs/formats.md`).
//! A change that removes or renames a field bumps [`SCHEMA_VERSION`]. This crate depends on no other workspace crate.

pub mod read;
pub mod render;
pub mod sign;
pub mod trace_diff;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Version of the `run.json` / `report.json` schema.
pub const SCHEMA_VERSION: u32 = 1;

/// How a run ended. `pass` is the only passing outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail,
}

/// Why a run failed; absent on a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// An always-property was violated and the scenario did not expect it.
    SafetyViolation,
    /// An eventually-property did not hold within its budget after the faults healed.
    LivenessFailure,
    /// A property the scenario expected to fire (a sometimes-property to be reached, or a violation an incident
    /// replay must reproduce) never fired.
    ExpectationUnmet,
    /// Code inside the simulated run panicked; the message is in `panic`.
    Panic,
}

/// The verdict of one run: `{"outcome": "pass"}` or `{"outcome": "fail", "kind": "..."}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FailureKind>,
}

impl Verdict {
    pub const PASS: Verdict = Verdict { outcome: Outcome::Pass, kind: None };

    pub fn fail(kind: FailureKind) -> Verdict {
        Verdict { outcome: Outcome::Fail, kind: Some(kind) }
    }

    pub fn passed(&self) -> bool {
        self.outcome == Outcome::Pass
    }

    /// A short label for terminal output: `pass`, `fail (safety_violation)`, or `fail` for a failure without a kind.
    pub fn label(&self) -> String {
        match (self.outcome, self.kind) {
            (Outcome::Pass, _) => "pass".to_owned(),
            (Outcome::Fail, Some(kind)) => format!("fail ({})", kind.as_str()),
            (Outcome::Fail, None) => "fail".to_owned(),
        }
    }
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::SafetyViolation => "safety_violation",
            FailureKind::LivenessFailure => "liveness_failure",
            FailureKind::ExpectationUnmet => "expectation_unmet",
            FailureKind::Panic => "panic",
        }
    }
}

/// The type of a property, as in stateright: always (safety), eventually (liveness), sometimes (reachability).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PropertyKind {
    Always,
    Eventually,
    Sometimes,
}

/// One property that fired: a violation of an always/eventually property, or the first time a sometimes-property
/// was reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Firing {
    pub oracle: String,
    pub property: PropertyKind,
    /// Virtual time of the evidence, in ms since the run started.
    pub t_ms: u64,
    /// What was seen, in words a person can check against the trace.
    pub evidence: String,
    /// Whether the scenario expected this firing (`expect.must_fire`).
    pub expected: bool,
}

/// The record of one simulated run (`run.json`, and one entry of `report.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    pub schema_version: u32,
    pub tool_version: String,
    pub commit: String,
    /// SHA-256 of the resolved run configuration (fleet, engine, network, materialised steps, expectations; not the seed).
    pub config_hash: String,
    /// The resolved run configuration itself, as `config_hash` hashes it (defaults filled in, a campaign run's fault
    /// plan materialised): what ran, readable without the source file.
    #[serde(default)]
    pub config: serde_json::Value,
    /// Where the configuration came from (a scenario file, or a campaign file and run index).
    pub source: String,
    /// Index of the run inside its campaign; absent for a single scenario run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_index: Option<u64>,
    pub seed: u64,
    pub verdict: Verdict,
    /// SHA-256 over the trace's JSON lines; equal seeds and configurations give equal digests.
    pub trace_digest: String,
    pub trace_events: u64,
    pub virtual_duration_ms: u64,
    /// Faults injected during the run, by kind, with counts.
    pub faults: BTreeMap<String, u64>,
    /// Recovery-matrix pairs exercised: `stage/failure_class` → how many stage failures were classified so.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub matrix_pairs: BTreeMap<String, u64>,
    /// Fault steps by the lifecycle phase they were injected in: `kind/phase` → steps, `phase` one of
    /// [`PHASES`]. Counted like `faults`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fault_phases: BTreeMap<String, u64>,
    /// Every fault the run injected, in injection order (at most [`FAULT_LOG_MAX`]): where it landed and what it
    /// did. `faults` counts the same injections by kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fault_log: Vec<FaultEntry>,
    /// Healthy, eligible workers over virtual time (as `availability_floor` counts them): the change points, the
    /// first at 0, at most [`AVAILABILITY_POINTS_MAX`]. Empty when the count never changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub availability: Vec<AvailabilityPoint>,
    /// When the availability series reached its cap: the time of the first change point left out. The series says
    /// nothing from there on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_cut_ms: Option<u64>,
    /// The rollouts' per-batch telemetry (RCCA: "per-batch telemetry"), one point at the end of each batch of each
    /// lane, in time order (at most [`BATCHES_MAX`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batches: Vec<BatchPoint>,
    /// The lanes of the run's rollouts, in the order they began (at most [`SPANS_MAX`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<LaneSpan>,
    /// What each of the run's rollouts did to every selected node, as its last account said, in the order the
    /// rollouts were first accounted (at most [`SPANS_MAX`] rollouts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rollouts: Vec<RolloutAccount>,
    /// The run's onboarding workflows, in the order they began (at most [`SPANS_MAX`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workflows: Vec<WorkflowSpan>,
    /// Violations of always/eventually properties, in virtual-time order (at most 10 kept per oracle).
    pub violations: Vec<Firing>,
    /// How many times each always/eventually property was violated, uncapped.
    #[serde(default)]
    pub violation_counts: BTreeMap<String, u64>,
    /// Sometimes-properties reached, each at its first occurrence.
    pub reached: Vec<Firing>,
    /// Expected firings (`must_fire`) that never happened, and expected recovery-matrix pairs (`matrix pair stage/class`)
    /// the run never exercised.
    pub unmet: Vec<String>,
    /// The panic message when the verdict is `panic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub panic: Option<String>,
    /// One command line that replays this run exactly.
    pub repro: String,
}

/// The most runs a campaign may have (`runs` in its file, `--runs`, a shard's `runs_total`, a report read back):
/// a thousand times the shipped campaigns, and few enough that a campaign's records fit in memory.
pub const RUNS_MAX: u64 = 100_000;

/// The most change points a record keeps of its availability series.
pub const AVAILABILITY_POINTS_MAX: usize = 200;
/// The most lanes, and the most onboarding workflows, a record keeps.
pub const SPANS_MAX: usize = 200;
/// The lifecycle phases of `fault_phases`: a rollout was in progress (from its `start_rollout` step to its
/// terminal event), an onboarding workflow was in flight (from its first stage to its completion or stop), both, or
/// neither.
pub const PHASES: [&str; 4] = ["rollout", "onboarding", "rollout+onboarding", "steady"];

/// The effects a fault can have, in the order reports list them (`docs/faults.md`, "Where a fault lands and what it
/// does"): every one but `none` makes the fault *effective*.
pub const FAULT_EFFECTS: [&str; 7] = ["retried", "stalled", "stopped", "quarantined", "repaired", "signalled", "none"];

/// The coarse phases a fault can land in, in the order reports list them: the workflow whose work met it, or `idle`
/// (nothing was running that it could touch, or it never landed).
pub const FAULT_PHASES: [&str; 6] = ["rollout", "onboarding", "decommission", "rotation", "instances", "idle"];

/// The most entries a run's `fault_log` keeps.
pub const FAULT_LOG_MAX: usize = 2_000;

/// One injected fault: where it landed and what it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultEntry {
    /// Its number in the run, from 1 in injection order (the trace's `fault`).
    pub fault: u64,
    /// The step kind.
    pub kind: String,
    /// What it was aimed at (a host, a machine, a link `a|b` or `from>to`); empty for the whole site, hub or
    /// controller.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target: String,
    pub injected_ms: u64,
    /// When work first met it; absent when nothing ever did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landed_ms: Option<u64>,
    /// Where it landed: `<workflow>:<stage or step>` (`rollout:quiesce`, `onboarding:commission_node`,
    /// `decommission:drain_node`, `rollout:preflight`, `rollout:lanes`), `instances`, or `idle`; for a fault that
    /// never landed, `idle`.
    pub phase: String,
    /// One of [`FAULT_EFFECTS`].
    pub effect: String,
}

impl FaultEntry {
    /// Whether it had an effect.
    pub fn effective(&self) -> bool {
        self.effect != "none"
    }

    /// The coarse phase (one of [`FAULT_PHASES`]): the part of `phase` before its `:`.
    pub fn coarse_phase(&self) -> &str {
        self.phase.split(':').next().unwrap_or(&self.phase)
    }
}

/// One change point of a run's availability: from `t_ms` on, `available` workers were healthy and eligible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AvailabilityPoint {
    pub t_ms: u64,
    pub available: u64,
}

/// The most [`BatchPoint`]s one run record keeps.
pub const BATCHES_MAX: usize = 200;

/// A rollout's telemetry at the end of one batch of one lane, as the harness observed the world (not the engine's
/// word): what the RCCA asks a deployment to report per batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchPoint {
    pub t_ms: u64,
    pub rollout: String,
    pub lane: u64,
    /// The batch's index in its lane, from 0.
    pub batch: u64,
    /// Nodes in the batch.
    pub nodes: u64,
    /// True for a batch of the lane's rollback.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub revert: bool,
    /// Healthy, eligible workers (as `availability_floor` counts them).
    pub available: u64,
    /// The longest any selected node's agent had been silent at the hub (none heard yet: since the rollout began).
    pub oldest_heartbeat_ms: u64,
    /// How long the open deployment epoch has pinned its members against TTL expiry; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_pin_age_ms: Option<u64>,
    /// Recovery progress: selected nodes upgraded (released after their proof) and rolled back so far.
    pub upgraded: u64,
    pub rolled_back: u64,
    /// Selected nodes not yet upgraded, rolled back or quarantined.
    pub remaining: u64,
    /// Step retries and quarantines so far.
    pub retries: u64,
    pub quarantined: u64,
    /// Estimated time to the end: `remaining` nodes at the mean time per settled node so far; absent before any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_ms: Option<u64>,
}

/// The outcomes a rollout's account gives a selected node, in the order reports list them: it proved the successor
/// (`upgraded`), was never taken down (`prior`), was quarantined with a repair plan, is held by someone else, or was
/// taken down and did not prove the successor (`stuck`).
pub const NODE_OUTCOMES: [&str; 5] = ["upgraded", "prior", "quarantined", "held", "stuck"];

/// The most nodes one [`RolloutAccount`] lists by name (its `counts` count every one).
pub const ACCOUNT_NODES_MAX: usize = 1_000;

/// What one rollout did to every selected node (RCCA all-selected acceptance: a quarantine, a prior lane or a node
/// someone else holds never shrinks the denominator).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutAccount {
    /// The rollout's name (`rollout-<revision>`).
    pub rollout: String,
    /// How it ended: `successor`, `partial`, `refused`, `failed: …`, or `in flight` when the run ended first.
    pub outcome: String,
    /// Selected nodes by outcome (one of [`NODE_OUTCOMES`]): every selected node is counted once.
    pub counts: BTreeMap<String, u64>,
    /// The selected nodes by name, in name order (at most [`ACCOUNT_NODES_MAX`]).
    pub nodes: Vec<NodeRecord>,
}

impl RolloutAccount {
    /// How many nodes the rollout selected.
    pub fn selected(&self) -> u64 {
        self.counts.values().fold(0u64, |total, count| total.saturating_add(*count))
    }

    /// How many selected nodes have `outcome`.
    pub fn count(&self, outcome: &str) -> u64 {
        self.counts.get(outcome).copied().unwrap_or(0)
    }
}

/// One selected node of a rollout and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeRecord {
    pub node: String,
    /// One of [`NODE_OUTCOMES`].
    pub outcome: String,
    /// Why: a prior node's reason, a stuck node's step and error, the owners of a node held elsewhere, a
    /// quarantine's surfaces. Empty for an upgraded node.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// A quarantined node's repair plan: what brings it back.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub repair: String,
    /// A node a step failed on for good (stuck, or rolled back after it): the exact command that replays the rollout
    /// from its journal, and the endpoint identity it failed on (`<node>@<host key>`), from its last `node_failed`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub replay: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub failed_endpoint: String,
}

/// One lane of a rollout: from its first step to its verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaneSpan {
    /// The rollout's name (`rollout-<revision>`).
    pub rollout: String,
    /// The lane's index in its plan, from 0.
    pub lane: u64,
    /// Nodes in the lane (as committed; the nodes seen starting steps when it never committed).
    pub nodes: u64,
    /// When its first node step started.
    pub start_ms: u64,
    /// When it committed, or its last node step event when it never did.
    pub end_ms: u64,
    /// `successor`, `prior` or `stuck`; absent when the lane never committed (the `legacy` controller commits none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
}

/// One onboarding workflow: from its first stage to its last completion or stop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowSpan {
    pub workflow: String,
    pub start_ms: u64,
    /// When it completed or stopped for the last time; absent when it was still in flight at the end of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
    /// `completed`, `stopped: <failure class>`, or `in flight`.
    pub outcome: String,
}

/// Aggregate numbers of a campaign.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    pub runs: u64,
    pub passed: u64,
    pub failed: u64,
    /// Failures by kind.
    pub failures: BTreeMap<String, u64>,
    /// Violations by oracle, counted over all runs.
    pub violations_by_oracle: BTreeMap<String, u64>,
    /// Faults injected over all runs, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Effective faults over all runs (those whose effect was not `none`), by kind, from the runs' `fault_log`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub faults_effective: BTreeMap<String, u64>,
    /// Every logged fault over all runs by `kind/coarse phase/effect` ([`FAULT_PHASES`], [`FAULT_EFFECTS`]): where
    /// the faults landed and what they did.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fault_landings: BTreeMap<String, u64>,
    /// Recovery-matrix pairs exercised over all runs (`stage/failure_class` → stage failures).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub matrix_pairs: BTreeMap<String, u64>,
    /// The recovery matrix's listed (typical) `stage/failure_class` pairs of the onboarding workflow, in table order,
    /// so a report shows coverage against the matrix without depending on the engine. [`summarize`] leaves it empty;
    /// the campaign fills it when its runs onboard machines (`sim::model::pairs::matrix_listed_pairs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matrix_listed: Vec<String>,
    /// Selected nodes by outcome ([`NODE_OUTCOMES`]) over every account of every run: the all-selected denominator
    /// and what became of it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rollout_nodes: BTreeMap<String, u64>,
    /// For each sometimes-property the campaign names: in how many runs it was reached.
    pub sometimes_reached: BTreeMap<String, u64>,
    /// Sometimes-properties the campaign names that no run reached: a non-empty list fails the campaign.
    pub sometimes_never_reached: Vec<String>,
    /// SHA-256 over every run record's canonical bytes ([`record_bytes`]), in run order: one value to compare two
    /// executions of a campaign, and one an edit of any run record changes.
    pub campaign_digest: String,
    pub virtual_duration_ms_total: u64,
}

impl Summary {
    /// A campaign passes when every run passed and every named sometimes-property was reached somewhere.
    pub fn passed(&self) -> bool {
        self.failed == 0 && self.sometimes_never_reached.is_empty()
    }
}

/// The report of a campaign (`report.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignReport {
    pub schema_version: u32,
    pub tool_version: String,
    pub commit: String,
    /// SHA-256 of the campaign file's resolved specification.
    pub config_hash: String,
    pub campaign: String,
    pub description: String,
    pub seed: u64,
    /// Set when this report holds one shard of its campaign (`fleetsim campaign --shard K/N`); absent on a whole
    /// campaign, including one merged from its shards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    pub summary: Summary,
    pub runs: Vec<RunRecord>,
}

/// Which part of a campaign a shard report holds: the runs `i` with `i % count == index - 1`, out of `runs_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    /// `K` of `K/N`, from 1.
    pub index: u64,
    /// `N` of `K/N`.
    pub count: u64,
    /// The campaign's number of runs, all shards together.
    pub runs_total: u64,
}

impl Shard {
    /// Whether run `run_index` of the campaign belongs to this shard.
    pub fn holds(&self, run_index: u64) -> bool {
        self.count > 0 && run_index % self.count == self.index - 1
    }

    /// The run indices of this shard, in order.
    pub fn indices(&self) -> Vec<u64> {
        (0..self.runs_total).filter(|i| self.holds(*i)).collect()
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The bytes of a run record the campaign digest covers: its canonical JSON (compact, fields in declaration order,
/// maps in key order, as `serde_json` writes a [`RunRecord`]), with `commit` and `tool_version` left empty. Every
/// other field is covered, so an edit of any run changes the digest; the two left out must equal the report's own
/// (the reader checks it), and leaving them out keeps a campaign's digest a function of what ran, not of the build.
pub fn record_bytes(run: &RunRecord) -> Vec<u8> {
    let blanked = RunRecord { commit: String::new(), tool_version: String::new(), ..run.clone() };
    serde_json::to_vec(&blanked).expect("run records serialise")
}

/// The verdict a run's findings give, in this order: a panic; an unexpected always-violation (safety); an
/// unexpected eventually-violation (liveness); an expectation unmet; else a pass. The runner judges a run with it and
/// the report reader checks every record's verdict against it, so the rule is written once.
/// How a person reads an entry of a run's `unmet`: an oracle name (one word) was to fire and did not; any other
/// entry (`matrix pair …`, `recovery work […], the run did […]`) names what the expectation was and what happened.
pub fn unmet_sentence(entry: &str) -> String {
    if entry.contains(char::is_whitespace) {
        format!("expected {entry}")
    } else {
        format!("{entry} was expected to fire and never did")
    }
}

pub fn judge(panicked: bool, violations: &[Firing], unmet: &[String]) -> Verdict {
    if panicked {
        Verdict::fail(FailureKind::Panic)
    } else if violations.iter().any(|v| !v.expected && v.property == PropertyKind::Always) {
        Verdict::fail(FailureKind::SafetyViolation)
    } else if violations.iter().any(|v| !v.expected && v.property == PropertyKind::Eventually) {
        Verdict::fail(FailureKind::LivenessFailure)
    } else if !unmet.is_empty() {
        Verdict::fail(FailureKind::ExpectationUnmet)
    } else {
        Verdict::PASS
    }
}

/// Builds the summary of a set of runs (in run order). The campaign digest is `digest_of` over every run's
/// [`record_bytes`], each followed by a newline. Sums saturate: a report read back may hold any numbers.
pub fn summarize(runs: &[RunRecord], sometimes_named: &[String], digest_of: impl Fn(&[u8]) -> String) -> Summary {
    let mut failures = BTreeMap::new();
    let mut violations_by_oracle = BTreeMap::new();
    let mut faults = BTreeMap::new();
    let mut faults_effective = BTreeMap::new();
    let mut fault_landings = BTreeMap::new();
    let mut matrix_pairs = BTreeMap::new();
    let mut rollout_nodes = BTreeMap::new();
    let mut sometimes_reached: BTreeMap<String, u64> = sometimes_named.iter().map(|name| (name.clone(), 0)).collect();
    let mut passed: u64 = 0;
    let mut records = Vec::new();
    let mut virtual_duration_ms_total: u64 = 0;
    let add = |total: &mut u64, count: u64| *total = total.saturating_add(count);
    for run in runs {
        if run.verdict.passed() {
            passed += 1;
        }
        if let Some(kind) = run.verdict.kind {
            add(failures.entry(kind.as_str().to_owned()).or_insert(0), 1);
        }
        for (oracle, count) in &run.violation_counts {
            add(violations_by_oracle.entry(oracle.clone()).or_insert(0), *count);
        }
        for (kind, count) in &run.faults {
            add(faults.entry(kind.clone()).or_insert(0), *count);
        }
        for entry in &run.fault_log {
            if entry.effective() {
                add(faults_effective.entry(entry.kind.clone()).or_insert(0), 1);
            }
            let key = format!("{}/{}/{}", entry.kind, entry.coarse_phase(), entry.effect);
            add(fault_landings.entry(key).or_insert(0), 1);
        }
        for (pair, count) in &run.matrix_pairs {
            add(matrix_pairs.entry(pair.clone()).or_insert(0), *count);
        }
        for (outcome, count) in run.rollouts.iter().flat_map(|account| &account.counts) {
            add(rollout_nodes.entry(outcome.clone()).or_insert(0), *count);
        }
        for firing in &run.reached {
            if let Some(count) = sometimes_reached.get_mut(&firing.oracle) {
                add(count, 1);
            }
        }
        records.extend(record_bytes(run));
        records.push(b'\n');
        add(&mut virtual_duration_ms_total, run.virtual_duration_ms);
    }
    let sometimes_never_reached =
        sometimes_reached.iter().filter(|(_, count)| **count == 0).map(|(name, _)| name.clone()).collect();
    Summary {
        runs: runs.len() as u64,
        passed,
        failed: runs.len() as u64 - passed,
        failures,
        violations_by_oracle,
        faults,
        faults_effective,
        fault_landings,
        matrix_pairs,
        matrix_listed: Vec::new(),
        rollout_nodes,
        sometimes_reached,
        sometimes_never_reached,
        campaign_digest: digest_of(&records),
        virtual_duration_ms_total,
    }
}

/// The result of `fleetsim experiment` (`experiment.json`): two campaign files run on the same seeds, paired run
/// by run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentReport {
    pub schema_version: u32,
    /// Always `experiment`.
    pub kind: String,
    pub tool_version: String,
    pub commit: String,
    /// The campaign seed both arms used (the base file's, or `--seed`).
    pub seed: u64,
    /// Runs per arm; pair `i` is run `i` of each.
    pub runs: u64,
    /// The settings in which the variant differs from the base, as dotted keys of the campaign file.
    pub differences: Vec<String>,
    pub base: ExperimentArm,
    pub variant: ExperimentArm,
    pub table: PairTable,
    /// The pairs whose verdicts differ, in run order.
    pub discordant: Vec<DiscordantPair>,
}

/// One side of an experiment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentArm {
    /// The campaign file, as given on the command line.
    pub campaign: String,
    /// The resolved campaign's configuration hash, with the experiment's seed and runs.
    pub config_hash: String,
    pub passed: u64,
    pub failed: u64,
    /// SHA-256 over the arm's per-run trace digests, in run order (as a campaign's `campaign_digest`).
    pub campaign_digest: String,
}

/// The paired outcomes: every pair is in exactly one cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairTable {
    pub both_pass: u64,
    pub only_base_fails: u64,
    pub only_variant_fails: u64,
    pub both_fail: u64,
}

/// A pair in which one arm passed and the other failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscordantPair {
    pub run_index: u64,
    pub seed: u64,
    pub base: Verdict,
    pub variant: Verdict,
    /// The command that replays the base's run.
    pub base_repro: String,
    /// The command that replays the variant's run.
    pub variant_repro: String,
}

/// Why shard reports cannot be merged: one line, naming the files at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeError(pub String);

impl std::fmt::Display for MergeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MergeError {}

/// The most run indices an error lists before `and N more`.
const INDICES_LISTED: usize = 10;

fn list_indices(indices: &[u64]) -> String {
    let mut text: Vec<String> = indices.iter().take(INDICES_LISTED).map(u64::to_string).collect();
    if indices.len() > INDICES_LISTED {
        text.push(format!("and {} more", indices.len() - INDICES_LISTED));
    }
    text.join(", ")
}

/// Merges the shard reports of one campaign (`(name, report)` pairs; `name` is used in errors) into the report an
/// unsharded execution writes: the runs in index order, the summary recomputed by [`summarize`] (so its
/// `campaign_digest` is the digest of all runs), no `shard`.
///
/// Refused, with the files named: no input; an input that is not a shard report; inputs of different campaigns
/// (path, description, config hash, seed, commit or tool version); a run outside its shard or the campaign; a run
/// held twice; runs no input holds.
pub fn merge(
    inputs: &[(String, CampaignReport)],
    digest_of: impl Fn(&[u8]) -> String,
) -> Result<CampaignReport, MergeError> {
    let fail = |message: String| Err(MergeError(message));
    let Some((first_name, first)) = inputs.first() else {
        return fail("nothing to merge: give the shard reports".to_owned());
    };
    let mut runs_total = None;
    let mut holder: BTreeMap<u64, &str> = BTreeMap::new();
    let mut runs: Vec<RunRecord> = Vec::new();
    for (name, report) in inputs {
        let Some(shard) = report.shard else {
            return fail(format!(
                "{name}: not a shard report (it has no `shard`); merge the reports `fleetsim campaign --shard K/N` writes"
            ));
        };
        if shard.index == 0 || shard.index > shard.count {
            return fail(format!("{name}: shard {shard} is not a shard (K must be 1 to N)"));
        }
        let same: [(&str, String, String); 6] = [
            ("campaign", first.campaign.clone(), report.campaign.clone()),
            ("description", first.description.clone(), report.description.clone()),
            ("config_hash", first.config_hash.clone(), report.config_hash.clone()),
            ("seed", first.seed.to_string(), report.seed.to_string()),
            ("commit", first.commit.clone(), report.commit.clone()),
            ("tool_version", first.tool_version.clone(), report.tool_version.clone()),
        ];
        for (key, expected, found) in same {
            if expected != found {
                return fail(format!(
                    "{name}: {key} is {found}, but {first_name} has {expected}: these are not shards of one campaign execution"
                ));
            }
        }
        if first.summary.sometimes_reached.keys().ne(report.summary.sometimes_reached.keys()) {
            return fail(format!("{name}: names other sometimes-properties than {first_name}"));
        }
        match runs_total {
            None => runs_total = Some(shard.runs_total),
            Some(total) if total != shard.runs_total => {
                return fail(format!(
                    "{name}: shard of a {}-run campaign, but {first_name} is of a {total}-run one",
                    shard.runs_total
                ));
            }
            Some(_) => {}
        }
        for run in &report.runs {
            let Some(index) = run.run_index else {
                return fail(format!("{name}: a run without `run_index` (seed {}): not a campaign run", run.seed));
            };
            if index >= shard.runs_total || !shard.holds(index) {
                return fail(format!(
                    "{name}: run {index} does not belong to shard {shard} of {} runs",
                    shard.runs_total
                ));
            }
            if let Some(other) = holder.insert(index, name) {
                return fail(format!("run {index} is in both {other} and {name}: the shards overlap"));
            }
            runs.push(run.clone());
        }
    }
    let runs_total = runs_total.unwrap_or(0);
    let missing: Vec<u64> = (0..runs_total).filter(|index| !holder.contains_key(index)).collect();
    if !missing.is_empty() {
        return fail(format!(
            "runs missing from every input: {} ({} of {runs_total}); give every shard",
            list_indices(&missing),
            missing.len()
        ));
    }
    runs.sort_by_key(|run| run.run_index);
    let sometimes: Vec<String> = first.summary.sometimes_reached.keys().cloned().collect();
    // The listed matrix pairs are the campaign's, not the runs': every shard carries the same list.
    let summary =
        Summary { matrix_listed: first.summary.matrix_listed.clone(), ..summarize(&runs, &sometimes, digest_of) };
    Ok(CampaignReport { shard: None, summary, runs, ..first.clone() })
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, fsynced, then renamed over `path`.
/// A reader sees the old file or the whole new one, never a truncated one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "path has no file name"))?;
    let tmp = dir.join(format!(".{}.tmp-{}", file_name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // The rename is durable once the directory entry is.
        if let Ok(dir_handle) = std::fs::File::open(dir) {
            let _ = dir_handle.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Serialises `value` as pretty JSON (with a trailing newline) and writes it atomically.
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seed: u64, verdict: Verdict, reached: &[&str]) -> RunRecord {
        RunRecord {
            schema_version: SCHEMA_VERSION,
            tool_version: "0.1.0".into(),
            commit: "abc".into(),
            config_hash: "h".into(),
            config: serde_json::json!({"fleet": {"nodes": 3}}),
            source: "campaigns/x.toml".into(),
            run_index: Some(seed),
            seed,
            verdict,
            trace_digest: format!("d{seed}"),
            trace_events: 1,
            virtual_duration_ms: 10,
            faults: BTreeMap::from([("partition".to_owned(), 2)]),
            matrix_pairs: BTreeMap::from([("wait_for_ready/pxe_discovery_failure".to_owned(), 1)]),
            fault_phases: BTreeMap::from([("partition/rollout".to_owned(), 2)]),
            fault_log: Vec::new(),
            availability: vec![
                AvailabilityPoint { t_ms: 0, available: 3 },
                AvailabilityPoint { t_ms: 7, available: 2 },
            ],
            availability_cut_ms: None,
            batches: Vec::new(),
            lanes: vec![LaneSpan {
                rollout: "rollout-r".into(),
                lane: 0,
                nodes: 1,
                start_ms: 2,
                end_ms: 9,
                verdict: Some("successor".into()),
            }],
            rollouts: vec![RolloutAccount {
                rollout: "rollout-r".into(),
                outcome: "partial".into(),
                counts: BTreeMap::from([("upgraded".to_owned(), 1), ("quarantined".to_owned(), 1)]),
                nodes: vec![
                    NodeRecord {
                        node: "w1".into(),
                        outcome: "upgraded".into(),
                        detail: String::new(),
                        repair: String::new(),
                        replay: String::new(),
                        failed_endpoint: String::new(),
                    },
                    NodeRecord {
                        node: "w2".into(),
                        outcome: "quarantined".into(),
                        detail: "marker absent".into(),
                        repair: "mend the surfaces on w2".into(),
                        replay: String::new(),
                        failed_endpoint: String::new(),
                    },
                ],
            }],
            workflows: vec![WorkflowSpan {
                workflow: "onboard-node-04".into(),
                start_ms: 1,
                end_ms: None,
                outcome: "in flight".into(),
            }],
            violation_counts: if verdict.passed() { BTreeMap::new() } else { BTreeMap::from([("o".to_owned(), 12)]) },
            violations: if verdict.passed() {
                vec![]
            } else {
                vec![Firing {
                    oracle: "o".into(),
                    property: PropertyKind::Always,
                    t_ms: 5,
                    evidence: "e".into(),
                    expected: false,
                }]
            },
            reached: reached
                .iter()
                .map(|name| Firing {
                    oracle: (*name).into(),
                    property: PropertyKind::Sometimes,
                    t_ms: 1,
                    evidence: String::new(),
                    expected: false,
                })
                .collect(),
            unmet: vec![],
            panic: None,
            repro: "fleetsim run x".into(),
        }
    }

    #[test]
    fn summary_counts_failures_faults_and_unreached_sometimes_properties() {
        let runs = vec![record(1, Verdict::PASS, &["a"]), record(2, Verdict::fail(FailureKind::SafetyViolation), &[])];
        let summary = summarize(&runs, &["a".into(), "b".into()], |bytes| format!("{}", bytes.len()));
        assert_eq!(summary.runs, 2);
        assert_eq!(summary.passed, 1);
        assert_eq!(summary.failed, 1);
        assert_eq!(summary.failures["safety_violation"], 1);
        assert_eq!(summary.violations_by_oracle["o"], 12, "the uncapped count, not the kept evidence");
        assert_eq!(summary.faults["partition"], 4);
        assert_eq!(summary.matrix_pairs["wait_for_ready/pxe_discovery_failure"], 2);
        assert_eq!(summary.sometimes_reached["a"], 1);
        assert_eq!(summary.sometimes_never_reached, vec!["b".to_owned()]);
        assert!(!summary.passed());
        let expected: usize = runs.iter().map(|run| record_bytes(run).len() + 1).sum();
        assert_eq!(summary.campaign_digest, expected.to_string(), "digest input is every record's canonical bytes");
    }

    #[test]
    fn records_round_trip_through_json_and_keep_the_verdict_shape() {
        let run = record(3, Verdict::fail(FailureKind::Panic), &[]);
        let json = serde_json::to_string(&run).unwrap();
        assert!(json.contains(r#""verdict":{"outcome":"fail","kind":"panic"}"#), "{json}");
        let back: RunRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, run);
        let pass = serde_json::to_string(&Verdict::PASS).unwrap();
        assert_eq!(pass, r#"{"outcome":"pass"}"#);
    }

    fn campaign(runs: Vec<RunRecord>, shard: Option<Shard>) -> CampaignReport {
        let mut summary = summarize(&runs, &["a".into()], |bytes| format!("digest of {} bytes", bytes.len()));
        // As an onboarding campaign's report carries it: the merge must keep it.
        summary.matrix_listed =
            vec!["wait_for_ready/upstream_transient".into(), "commission_node/state_ambiguity".into()];
        CampaignReport {
            schema_version: SCHEMA_VERSION,
            tool_version: "0.1.0".into(),
            commit: "abc".into(),
            config_hash: "h".into(),
            campaign: "campaigns/x.toml".into(),
            description: "d".into(),
            seed: 1,
            shard,
            summary,
            runs,
        }
    }

    /// The shards `1/count .. count/count` of a campaign of `total` runs, each holding its runs.
    fn shards(total: u64, count: u64) -> Vec<(String, CampaignReport)> {
        (1..=count)
            .map(|index| {
                let shard = Shard { index, count, runs_total: total };
                let runs = shard
                    .indices()
                    .into_iter()
                    .map(|i| record(i, if i == 2 { Verdict::fail(FailureKind::Panic) } else { Verdict::PASS }, &["a"]))
                    .collect();
                (format!("s{index}.json"), campaign(runs, Some(shard)))
            })
            .collect()
    }

    fn merge_error(inputs: &[(String, CampaignReport)]) -> String {
        merge(inputs, |bytes| format!("digest of {} bytes", bytes.len())).unwrap_err().0
    }

    #[test]
    fn merged_shards_equal_the_unsharded_report() {
        let whole = campaign(
            (0..7)
                .map(|i| record(i, if i == 2 { Verdict::fail(FailureKind::Panic) } else { Verdict::PASS }, &["a"]))
                .collect(),
            None,
        );
        for count in 1..=3 {
            let mut inputs = shards(7, count);
            inputs.reverse();
            let merged = merge(&inputs, |bytes| format!("digest of {} bytes", bytes.len())).unwrap();
            assert_eq!(merged, whole, "N = {count}");
        }
    }

    #[test]
    fn shards_of_other_campaigns_overlapping_or_missing_runs_are_refused_by_name() {
        let mut inputs = shards(7, 3);
        inputs[1].1.config_hash = "other".into();
        assert_eq!(
            merge_error(&inputs),
            "s2.json: config_hash is other, but s1.json has h: these are not shards of one campaign execution"
        );
        let mut inputs = shards(7, 3);
        inputs[2].1.seed = 9;
        assert!(merge_error(&inputs).starts_with("s3.json: seed is 9, but s1.json has 1"));
        let mut inputs = shards(7, 3);
        inputs.push(inputs[0].clone());
        inputs[3].0 = "again.json".into();
        assert_eq!(merge_error(&inputs), "run 0 is in both s1.json and again.json: the shards overlap");
        let mut inputs = shards(7, 3);
        inputs.remove(1);
        assert_eq!(merge_error(&inputs), "runs missing from every input: 1, 4 (2 of 7); give every shard");
        let mut inputs = shards(7, 3);
        inputs[0].1.shard = None;
        assert!(merge_error(&inputs).starts_with("s1.json: not a shard report"));
        let mut inputs = shards(7, 3);
        inputs[0].1.runs.push(record(1, Verdict::PASS, &[]));
        assert_eq!(merge_error(&inputs), "s1.json: run 1 does not belong to shard 1/3 of 7 runs");
        assert_eq!(merge_error(&[]), "nothing to merge: give the shard reports");
    }

    #[test]
    fn atomic_write_replaces_the_whole_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        write_atomic(&path, b"old").unwrap();
        write_json_atomic(&path, &record(1, Verdict::PASS, &[])).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with('{') && text.ends_with("}\n"));
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "temporary file left behind: {names:?}");
    }
}
