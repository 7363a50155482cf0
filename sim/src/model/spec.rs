//! Scenario and campaign files: their TOML schema (documented in `docs/formats.md`), strict parsing with errors that
//! name the file, line, column and key, and the resolved [`RunSpec`] a run executes.
//!
//! Both formats are versioned (`schema_version`), reject unknown keys, and tag steps with `kind`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::path::Path;

use fakes::hub::{DEFAULT_AGENT_TTL_MS, DEFAULT_SWEEP_INTERVAL_MS, ExpiryPolicy};
use reports::PropertyKind;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::model::faults::{
    Counted, InstanceOp, Phase, PhaseStep, RolloutPoint, RolloutStepTrigger, StageStep, Step, TimedStep,
};
use crate::model::link::LinkConfig;
use crate::model::oracles;

pub const SCHEMA_VERSION: u32 = 1;
/// The most nodes a file may ask for.
pub const NODES_MAX: u32 = 10_000;
/// The default time the run keeps going after the last fault healed, for eventually-properties to be judged.
pub const DEFAULT_LIVENESS_BUDGET_MS: u64 = 600_000;
/// The engine's default call timeout (the incident's 10 s SSH connect timeout).
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 10_000;

/// A bad input file: what, where, and the key at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub path: String,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    pub message: String,
}

impl fmt::Display for SpecError {
    /// One line, safe to print: control characters of the path and the message are escaped and quoted values that
    /// look like credentials are withheld ([`sanitize`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (path, message) = (escape_controls(&self.path), sanitize(&self.message));
        match self.position {
            Some((line, column)) => write!(f, "{path}:{line}:{column}: {message}"),
            None => write!(f, "{path}: {message}"),
        }
    }
}

/// `text` with every control character (and DEL) written as `\u{..}`, so echoed input cannot drive the terminal.
pub fn escape_controls(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            escaped.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            escaped.push(c);
        }
    }
    escaped
}

/// What a quoted value that looks like a credential is echoed as.
pub const WITHHELD: &str = "[withheld: looks like a credential]";

/// Key names whose values are credentials: a refusal never quotes them back.
const CREDENTIAL_KEYS: [&str; 5] = ["token", "password", "secret", "key", "credential"];

/// An error message as it may be shown: control characters escaped, and every quoted value (`"…"`, `` `…` ``,
/// `'…'`) withheld when it carries a credential's marker (`fleetsim-secret-`) or belongs to a key named like a
/// credential (`token`, `password`, `api_key`, …; the key is the message's first `key:` word). A key ending in
/// `_file` names where a credential is kept, not the credential: its path and the fix for it are echoed.
pub fn sanitize(message: &str) -> String {
    let key = message.split_once(": ").map_or("", |(key, _)| key);
    let last = key.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    let credential_key =
        !key.contains(' ') && !last.ends_with("_file") && CREDENTIAL_KEYS.iter().any(|word| last.contains(word));
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(open) = rest.find(['"', '`', '\'']) {
        let quote = rest[open..].chars().next().expect("found");
        let Some(length) = rest[open + 1..].find(quote) else { break };
        let value = &rest[open + 1..open + 1 + length];
        out.push_str(&rest[..=open]);
        if credential_key || value.contains(engine::secret::SECRET_MARKER) {
            out.push_str(WITHHELD);
        } else {
            out.push_str(value);
        }
        out.push(quote);
        rest = &rest[open + 2 + length..];
    }
    out.push_str(rest);
    escape_controls(&out)
}

/// The dotted key at byte `offset` of a TOML text, read from the text itself so that it is known even when the text
/// does not parse: the last table header above the offset (`[[step]]` counted, `step[2]`) and, on the offset's line,
/// the key left of the nearest `=` before it (or, with no `=` there, the key of the line). `None` at the top level
/// outside any `key =`.
pub(crate) fn key_at(text: &str, offset: usize) -> Option<String> {
    // A dotted key of bare keys: what is echoed as the key is never arbitrary text.
    let valid =
        |key: &str| !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    let offset = offset.min(text.len());
    let offset = (0..=offset).rev().find(|at| text.is_char_boundary(*at)).unwrap_or(0);
    let line_start = text[..offset].rfind('\n').map_or(0, |at| at + 1);
    let mut table = String::new();
    let mut arrays: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for line in text[..line_start].lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("[[").and_then(|rest| rest.split("]]").next()) {
            let name = name.trim().to_owned();
            if valid(&name) {
                let count = arrays.entry(name.clone()).or_insert(0);
                table = format!("{name}[{count}]");
                *count += 1;
            }
        } else if let Some(name) = line.strip_prefix('[').and_then(|rest| rest.split(']').next()) {
            if valid(name.trim()) {
                table = name.trim().to_owned();
            }
        }
    }
    let line_end = text[offset..].find('\n').map_or(text.len(), |at| offset + at);
    let line = &text[line_start..line_end];
    let trimmed = line.trim_start();
    if trimmed.starts_with('[') {
        let name = trimmed.trim_start_matches('[').split(']').next().unwrap_or("").trim();
        return if valid(name) { Some(name.to_owned()) } else { (!table.is_empty()).then_some(table) };
    }
    let column = offset - line_start;
    // The key of an inline table's entry left of the offset, else the line's own key.
    let before = &line[..column.min(line.len())];
    let key_of = |segment: &str| -> Option<String> {
        let (lhs, _) = segment.split_once('=')?;
        let lhs = lhs.rsplit([',', '{']).next().unwrap_or(lhs).trim().trim_matches('"');
        valid(lhs).then(|| lhs.to_owned())
    };
    let inline = before.rfind('=').and_then(|at| key_of(&before[..=at]).filter(|_| before[..at].contains('{')));
    let own = key_of(line);
    let mut path: Vec<String> = Vec::new();
    if !table.is_empty() {
        path.push(table);
    }
    match (own, inline) {
        (Some(own), Some(inner)) if own != inner => path.extend([own, inner]),
        (Some(own), _) => path.push(own),
        (None, _) => {}
    }
    (!path.is_empty()).then(|| path.join("."))
}

impl std::error::Error for SpecError {}

/// The fleet of a run: `node-01` … `node-NN`, plus the `controller` and `hub` hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetSpec {
    pub nodes: u32,
    /// Nodes whose agents are durable (long-lived worker identities); the others are fungible.
    pub durable: BTreeSet<String>,
    /// The most nodes a rollout takes down at once.
    pub lane_size: u32,
    /// Healthy, eligible nodes that must remain at every checkpoint of a rollout (0: no floor).
    pub availability_floor: u32,
}

impl FleetSpec {
    pub fn node_name(&self, index: u32) -> String {
        node_name(self.nodes, index)
    }

    pub fn node_names(&self) -> Vec<String> {
        (1..=self.nodes).map(|i| self.node_name(i)).collect()
    }

    pub fn host_exists(&self, name: &str) -> bool {
        name == CONTROLLER || name == HUB || self.node_index(name).is_some()
    }

    /// The 1-based index of a node name, if it names one of this fleet's nodes.
    pub fn node_index(&self, name: &str) -> Option<u32> {
        let digits = name.strip_prefix("node-")?;
        let index: u32 = digits.parse().ok()?;
        (index >= 1 && index <= self.nodes && self.node_name(index) == name).then_some(index)
    }
}

pub const CONTROLLER: &str = "controller";
pub const HUB: &str = "hub";

/// `node-01` … `node-50`; zero-padded to at least two digits and to the width of the fleet size.
pub fn node_name(nodes: u32, index: u32) -> String {
    let width = nodes.to_string().len().max(2);
    format!("node-{index:0width$}")
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineSpec {
    pub hub_expiry: ExpiryPolicy,
    pub call_timeout_ms: u64,
    pub rollout_policy: engine::rollout::driver::RolloutPolicy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HubSpec {
    pub agent_ttl_ms: u64,
    pub sweep_interval_ms: u64,
}

/// Defaults of the `[onboarding]` table.
pub const DEFAULT_ONBOARDING_STALL_WINDOW_MS: u64 = 300_000;
pub const DEFAULT_ONBOARDING_POLL_MS: u64 = 15_000;
pub const DEFAULT_ONBOARDING_CONCURRENCY: u32 = 8;
/// The most machines one run may onboard.
pub const ONBOARDING_NODES_MAX: u32 = 1_000;
/// The host that runs the MAAS region, its rack and the site's secrets store (only in runs with `[onboarding]`).
pub const MAAS: &str = "maas";

/// The onboarding of new machines through the MAAS site: the `[onboarding]` table, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnboardingSpec {
    /// The site's machines, named after the fleet's nodes (`node-(N+1)` …), one workflow each.
    pub machines: Vec<String>,
    pub policy: engine::onboarding::driver::OnboardingPolicy,
    /// When the controller starts the workflows, in virtual ms.
    pub start_at_ms: u64,
    pub stall_window_ms: u64,
    pub poll_ms: u64,
    /// The most workflows in flight at once.
    pub concurrency: u32,
    /// `release_maas_node`: the no-erase fallback is allowed (absent from the configuration when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_erase_release_allowed: bool,
    /// `remove_maas_record`: the site requires the MAAS record deleted (else it is retained, with a follow-up).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub maas_delete_required: bool,
    /// `apply_roce_phase2`: the site's configuration says RoCE is mandatory (absent from the configuration when
    /// false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub roce_mandatory: bool,
    /// Section 6's timeouts the site's configuration sets, by kind (`discovery`, ...), in ms; the rest keep the
    /// matrix's defaults. Absent from the configuration when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub timeouts: BTreeMap<String, u64>,
    /// `fleet = true`: the site's machines are the fleet's nodes, one identity across their life. A node's host
    /// is up only while MAAS has its machine deployed, powered and its agent enrolled; its agent heartbeats with the
    /// bearer its enrolment redeemed; a rollout selects the nodes enrolled when it is requested. Absent from the
    /// configuration when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fleet: bool,
}

impl OnboardingSpec {
    /// The site's policies for both workflows.
    pub fn site_policy(&self) -> engine::workflow::SitePolicy {
        engine::workflow::SitePolicy {
            roce_mandatory: false,
            no_erase_release_allowed: self.no_erase_release_allowed,
            maas_delete_required: self.maas_delete_required,
        }
    }

    pub fn has_machine(&self, name: &str) -> bool {
        self.machines.iter().any(|machine| machine == name)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expectations {
    pub must_hold: Vec<String>,
    pub must_fire: Vec<String>,
    /// Recovery-matrix pairs (`stage/failure_class`) the run must exercise: a conformance case names the pair it
    /// scripts. Absent from the configuration when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matrix_pairs: Vec<String>,
    /// Conformance: exactly the recovery work the run does, `stage/work/outcome` (`[]`: none is due).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_work: Option<Vec<String>>,
    /// Conformance: how every workflow of the run ends (`completed`, `failed_manual_intervention`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_state: Option<String>,
    /// Conformance: the node state every workflow of the run stops in (`enrolling`, `quarantined`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_state: Option<String>,
    /// Conformance: no stage attempt beyond this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts_max: Option<u64>,
    /// Conformance: the section 6 timeouts the run must meet (`discovery`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeouts: Vec<String>,
    /// Conformance: the section 7 conditions the run exercises (`late_agent_enrollment`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<String>,
    /// Conformance: the operator actions the run writes an audit record for (`resume`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audits: Vec<String>,
    /// The run's last rollout (`[expect.rollout]`): its outcome, lane verdicts and node outcomes. Absent from the
    /// configuration when the file states none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutExpect>,
}

/// What a scenario states of its last rollout (`[expect.rollout]`); each key is checked only when stated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutExpect {
    /// `successor`, `partial`, `refused` or `failed` (any failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// Every lane's verdict in plan order (`successor`, `prior`, `stuck`; `uncommitted` for a lane that began and
    /// never committed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<Vec<String>>,
    /// Selected nodes by outcome; an outcome not named is expected to have none. They add up to the fleet.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, u64>,
    /// Named nodes' outcomes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node: BTreeMap<String, String>,
}

/// The rollout outcomes `[expect.rollout] outcome` may name.
pub const ROLLOUT_OUTCOMES: [&str; 4] = ["successor", "partial", "refused", "failed"];
/// The lane verdicts `[expect.rollout] lanes` may name.
pub const LANE_VERDICTS: [&str; 4] = ["successor", "prior", "stuck", "uncommitted"];

/// Everything one run executes, resolved: defaults filled in, steps materialised and ordered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSpec {
    /// Where it came from (not part of the configuration hash).
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub description: String,
    pub duration_ms: u64,
    pub liveness_budget_ms: u64,
    /// Run the whole `duration_ms` even once the run has settled (a benchmark's fixed workload); by default a run
    /// that has settled ends there (`docs/oracles.md`, "When a run ends early"). Absent from the configuration (and so
    /// from its hash) when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub run_to_duration: bool,
    pub fleet: FleetSpec,
    pub engine: EngineSpec,
    pub hub: HubSpec,
    pub network: LinkConfig,
    pub steps: Vec<TimedStep>,
    /// Steps fired by onboarding stages (`on_stage`); absent from the configuration when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stage_steps: Vec<StageStep>,
    /// Steps fired after a phase of the run ends (`after`), in file order; absent from the configuration when there
    /// are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phase_steps: Vec<PhaseStep>,
    /// Steps fired by the rollout (`on_rollout`), in file order; absent from the configuration when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rollout_steps: Vec<RolloutStepTrigger>,
    pub expect: Expectations,
    /// Absent from the configuration (and so from its hash) when the file has no `[onboarding]` table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onboarding: Option<OnboardingSpec>,
    /// The instance lifecycle (`[instances]`); absent from the configuration when the file has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<instances::InstancesSpec>,
}

impl RunSpec {
    /// The resolved configuration as the record carries it: without `source` and `description`, which change no
    /// behaviour.
    pub fn config_value(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).expect("run specs serialise");
        if let Some(map) = value.as_object_mut() {
            map.remove("source");
            map.remove("description");
        }
        value
    }

    /// SHA-256 of [`RunSpec::config_value`].
    pub fn config_hash(&self) -> String {
        crate::model::digest::sha256_hex(self.config_value().to_string().as_bytes())
    }

    /// Every step of the run, however it is triggered: timed, stage-triggered, then phase-triggered.
    pub fn all_steps(&self) -> impl Iterator<Item = &Step> {
        let timed = self.steps.iter().map(|timed| &timed.step);
        let staged = self.stage_steps.iter().map(|staged| &staged.step);
        let triggered = self.rollout_steps.iter().map(|triggered| &triggered.step);
        timed.chain(staged).chain(self.phase_steps.iter().map(|phased| &phased.step)).chain(triggered)
    }

    /// The largest one-way latency any link can have during the run.
    pub fn latency_max_ms(&self) -> u64 {
        self.steps
            .iter()
            .filter_map(|timed| if let Step::LinkLatency { max_ms, .. } = &timed.step { Some(*max_ms) } else { None })
            .fold(self.network.latency_max_ms, u64::max)
    }
}

/// A scenario file, resolved.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub seed: u64,
    pub run: RunSpec,
}

// ---------------------------------------------------------------------------------------------------------------------
// File shapes

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    schema_version: Spanned<u32>,
    description: String,
    #[serde(deserialize_with = "seed_value")]
    seed: u64,
    duration_ms_max: Spanned<u64>,
    liveness_budget_ms: Option<u64>,
    #[serde(default)]
    run_to_duration: bool,
    fleet: FleetFile,
    #[serde(default)]
    engine: EngineFile,
    #[serde(default)]
    hub: HubFile,
    #[serde(default)]
    network: NetworkFile,
    #[serde(default)]
    step: Vec<Spanned<toml::Table>>,
    #[serde(default)]
    expect: ExpectFile,
    onboarding: Option<Spanned<OnboardingFile>>,
    instances: Option<Spanned<instances::InstancesFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OnboardingFile {
    nodes: Spanned<u32>,
    policy: Option<engine::onboarding::driver::OnboardingPolicy>,
    start_at_ms: Option<u64>,
    stall_window_ms: Option<Spanned<u64>>,
    poll_ms: Option<Spanned<u64>>,
    concurrency: Option<Spanned<u32>>,
    no_erase_release_allowed: Option<bool>,
    maas_delete_required: Option<bool>,
    roce_mandatory: Option<bool>,
    /// The site's machines are the fleet's nodes (one identity from onboarding to decommission).
    fleet: Option<bool>,
    timeouts: Option<TimeoutsFile>,
}

/// `[onboarding.timeouts]`: section 6's timeouts the site sets, in ms (each absent one keeps the matrix's default).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TimeoutsFile {
    discovery_ms: Option<Spanned<u64>>,
    commission_ms: Option<Spanned<u64>>,
    deploy_ms: Option<Spanned<u64>>,
    hardware_sync_seed_ms: Option<Spanned<u64>>,
    hardware_sync_health_ms: Option<Spanned<u64>>,
    agent_enrollment_ms: Option<Spanned<u64>>,
}

impl TimeoutsFile {
    fn get(&self, kind: engine::matrix::TimeoutKind) -> Option<&Spanned<u64>> {
        use engine::matrix::TimeoutKind as K;
        match kind {
            K::Discovery => self.discovery_ms.as_ref(),
            K::Commission => self.commission_ms.as_ref(),
            K::Deploy => self.deploy_ms.as_ref(),
            K::HardwareSyncSeed => self.hardware_sync_seed_ms.as_ref(),
            K::HardwareSyncHealth => self.hardware_sync_health_ms.as_ref(),
            K::AgentEnrollment => self.agent_enrollment_ms.as_ref(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FleetFile {
    nodes: Spanned<u32>,
    #[serde(default)]
    durable: Vec<Spanned<String>>,
    lane_size: Option<Spanned<u32>>,
    availability_floor: Option<Spanned<u32>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EngineFile {
    hub_expiry: Option<ExpiryPolicy>,
    call_timeout_ms: Option<Spanned<u64>>,
    rollout_policy: Option<engine::rollout::driver::RolloutPolicy>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HubFile {
    agent_ttl_ms: Option<Spanned<u64>>,
    sweep_interval_ms: Option<Spanned<u64>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeMs {
    pub min: u64,
    pub max: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NetworkFile {
    latency_ms: Option<Spanned<RangeMs>>,
    request_loss_per_mille: Option<Spanned<u32>>,
    response_loss_per_mille: Option<Spanned<u32>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectFile {
    #[serde(default)]
    must_hold: Vec<Spanned<String>>,
    #[serde(default)]
    must_fire: Vec<Spanned<String>>,
    #[serde(default)]
    matrix_pairs: Vec<Spanned<String>>,
    recovery_work: Option<Vec<Spanned<String>>>,
    workflow_state: Option<Spanned<String>>,
    node_state: Option<Spanned<String>>,
    attempts_max: Option<Spanned<u64>>,
    #[serde(default)]
    timeouts: Vec<Spanned<String>>,
    #[serde(default)]
    conditions: Vec<Spanned<String>>,
    #[serde(default)]
    audits: Vec<Spanned<String>>,
    rollout: Option<Spanned<RolloutExpectFile>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RolloutExpectFile {
    outcome: Option<Spanned<String>>,
    lanes: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    nodes: BTreeMap<Spanned<String>, Spanned<u64>>,
    #[serde(default)]
    node: BTreeMap<Spanned<String>, Spanned<String>>,
}

/// A scenario's `seed`: an integer, or a string of decimal digits for a seed above TOML's largest integer
/// (`i64::MAX`), which half of a campaign's derived run seeds are (`fleetsim shrink` writes those so).
fn seed_value<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    struct SeedVisitor;
    impl serde::de::Visitor<'_> for SeedVisitor {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a seed: an integer from 0, or a string of decimal digits")
        }
        fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<u64, E> {
            Ok(value)
        }
        fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<u64, E> {
            u64::try_from(value).map_err(|_| E::custom(format!("seed: must be 0 or more, not {value}")))
        }
        fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<u64, E> {
            value
                .parse()
                .map_err(|_| E::custom(format!("seed: \"{value}\" is not a whole number from 0 to {}", u64::MAX)))
        }
    }
    deserializer.deserialize_any(SeedVisitor)
}

// ---------------------------------------------------------------------------------------------------------------------
// Parsing

/// Reads and parses a scenario file.
pub fn load_scenario(path: &Path) -> Result<Scenario, SpecError> {
    let text = read(path)?;
    parse_scenario(&path.display().to_string(), &text)
}

/// The largest scenario, campaign, policy or site file read (bytes): every shipped file is under 10 KiB.
pub const SPEC_BYTES_MAX: u64 = 1 << 20;

pub(crate) fn read(path: &Path) -> Result<String, SpecError> {
    let name = path.display().to_string();
    let io_error = |error: std::io::Error| SpecError {
        path: name.clone(),
        position: None,
        message: match error.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_owned(),
            _ => format!("cannot read: {error}"),
        },
    };
    let bytes = read_capped(path, SPEC_BYTES_MAX).map_err(|error| match error {
        Capped::Io(error) => io_error(error),
        Capped::NotAFile(kind) => SpecError {
            path: name.clone(),
            position: None,
            message: format!("{kind}, not a regular file: an input is read from a file"),
        },
        Capped::TooLarge => SpecError {
            path: name.clone(),
            position: None,
            message: format!("more than the {SPEC_BYTES_MAX} bytes an input file may have"),
        },
    })?;
    text_of(&name, bytes)
}

/// Why [`read_capped`] read nothing.
pub(crate) enum Capped {
    Io(std::io::Error),
    /// What the path is instead (`a directory`, `a FIFO`, `a device`).
    NotAFile(&'static str),
    TooLarge,
}

/// The bytes of the regular file at `path`, at most `cap` of them: a FIFO, a device (`/dev/zero`), a socket or a
/// directory is refused before it is opened (a FIFO's open would block), and the read stops past `cap` whatever the
/// file's size claimed.
pub(crate) fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, Capped> {
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let kind = |file_type: std::fs::FileType| -> Option<&'static str> {
        if file_type.is_file() {
            None
        } else if file_type.is_dir() {
            Some("a directory")
        } else if file_type.is_fifo() {
            Some("a FIFO")
        } else if file_type.is_char_device() || file_type.is_block_device() {
            Some("a device")
        } else if file_type.is_socket() {
            Some("a socket")
        } else {
            Some("not a file")
        }
    };
    if let Some(what) = kind(std::fs::metadata(path).map_err(Capped::Io)?.file_type()) {
        return Err(Capped::NotAFile(what));
    }
    let file = std::fs::File::open(path).map_err(Capped::Io)?;
    // The path may have been swapped since it was looked at: the open file is judged too.
    if let Some(what) = kind(file.metadata().map_err(Capped::Io)?.file_type()) {
        return Err(Capped::NotAFile(what));
    }
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(Capped::Io)?;
    if bytes.len() as u64 > cap {
        return Err(Capped::TooLarge);
    }
    Ok(bytes)
}

/// The bytes of an input file as text; not UTF-8 is refused at the first bad byte, with its line, column and key.
pub fn text_of(path: &str, bytes: Vec<u8>) -> Result<String, SpecError> {
    String::from_utf8(bytes).map_err(|error| {
        let valid = error.utf8_error().valid_up_to();
        let bytes = error.into_bytes();
        let text = std::str::from_utf8(&bytes[..valid]).expect("valid up to here");
        let source = Source { path, text };
        let key = key_at(text, valid).unwrap_or_else(|| "(top level)".to_owned());
        source.error_at(
            Some(valid..valid),
            format!("{key}: not UTF-8 text: byte 0x{:02x} is not valid here; save the file as UTF-8", bytes[valid]),
        )
    })
}

/// The most a run may last, in ms: a scenario's `duration_ms_max` and a campaign's `duration_ms`, 24 hours of virtual
/// time (the longest shipped scenario runs 8 h). A run's cost grows with it.
pub const DURATION_MS_MAX: u64 = 86_400_000;
/// The most any other time in ms may be, either way (`at_ms`, every `*_ms` key and the `min`/`max` of a `*_ms`
/// range; a clock skew may be negative): one week, the campaigns' longest clock skew.
pub const TIME_MS_MAX: u64 = 604_800_000;
/// The most any other count may be (`count`, `count_max`, `members_max`, `concurrency`, a policy's `min` and `max`
/// counts, …); `nodes` has its own, smaller bound ([`NODES_MAX`]) and `runs` [`reports::RUNS_MAX`].
pub const COUNT_MAX: u64 = 1_000_000;

/// What bounds an integer key: `(bound, what it is)`, or `None` for a key with no bound here (`seed` takes any
/// `u64`; `schema_version` and per-mille rates are checked by their resolvers).
fn bound_of(path: &[String]) -> Option<(u64, &'static str)> {
    let last = path.last().map_or("", String::as_str);
    let parent = path.len().checked_sub(2).map_or("", |at| path[at].as_str());
    let is_ms = |key: &str| key.ends_with("_ms") || key.contains("_ms_");
    let top = path.len() == 1;
    if matches!(last, "seed" | "schema_version") || last.contains("per_mille") {
        None
    } else if top && matches!(last, "duration_ms_max" | "duration_ms") {
        Some((DURATION_MS_MAX, "the longest a run may last (24 h)"))
    } else if is_ms(last) || (matches!(last, "min" | "max") && is_ms(parent)) {
        Some((TIME_MS_MAX, "the most a time in ms may be (one week)"))
    } else if top && last == "runs" {
        Some((reports::RUNS_MAX, "the most runs a campaign may have"))
    } else {
        Some((COUNT_MAX, "the most a count may be"))
    }
}

/// Refuses any integer of the text past its bound ([`TIME_MS_MAX`], [`COUNT_MAX`], [`reports::RUNS_MAX`]), naming
/// its line, column, key and the bound. A text that does not parse is left to the typed parser to refuse.
pub(crate) fn check_bounds(source: &Source) -> Result<(), SpecError> {
    let Ok(document) = toml::de::DeTable::parse(source.text) else { return Ok(()) };
    let mut path = Vec::new();
    walk_table(source, document.get_ref(), &mut path)
}

fn walk_table(source: &Source, table: &toml::de::DeTable, path: &mut Vec<String>) -> Result<(), SpecError> {
    for (key, value) in table {
        path.push(key.get_ref().to_string());
        walk_value(source, value, path)?;
        path.pop();
    }
    Ok(())
}

fn walk_value(source: &Source, value: &Spanned<toml::de::DeValue>, path: &mut Vec<String>) -> Result<(), SpecError> {
    match value.get_ref() {
        toml::de::DeValue::Integer(integer) => {
            let Some((bound, what)) = bound_of(path) else { return Ok(()) };
            let parsed = i128::from_str_radix(integer.as_str(), integer.radix()).ok();
            let bound_i = i128::from(bound);
            if parsed.is_none_or(|number| !(-bound_i..=bound_i).contains(&number)) {
                let key = path.join(".");
                let shown = parsed.map_or_else(|| integer.as_str().to_owned(), |number| number.to_string());
                let side = if parsed.is_some_and(|number| number < 0) { "less than -" } else { "more than " };
                return Err(source.error_at(Some(value.span()), format!("{key}: {shown} is {side}{bound}, {what}")));
            }
            Ok(())
        }
        toml::de::DeValue::Table(table) => walk_table(source, table, path),
        toml::de::DeValue::Array(array) => {
            for (index, item) in array.iter().enumerate() {
                // `[[step]]` tables are `step[0]`, `step[1]`: the item keeps its key's bound class.
                let last = path.pop().unwrap_or_default();
                path.push(format!("{last}[{index}]"));
                let result = walk_value(source, item, path);
                path.pop();
                path.push(last);
                result?;
            }
            Ok(())
        }
        toml::de::DeValue::String(_)
        | toml::de::DeValue::Float(_)
        | toml::de::DeValue::Boolean(_)
        | toml::de::DeValue::Datetime(_) => Ok(()),
    }
}

/// Turns byte offsets into 1-based line and column, and builds errors.
pub(crate) struct Source<'a> {
    pub path: &'a str,
    pub text: &'a str,
}

impl Source<'_> {
    pub fn error_at(&self, span: Option<Range<usize>>, message: impl Into<String>) -> SpecError {
        let position = span.map(|span| {
            let offset = span.start.min(self.text.len());
            let before = &self.text[..offset];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |tail| tail.chars().count()) + 1;
            (line, column)
        });
        SpecError { path: self.path.to_owned(), position, message: message.into() }
    }

    /// A TOML or type error, with the key it is at: `fleet.nodes: invalid type: …`, `duplicate key` errors included.
    /// An error without a position (a missing table) is placed at the start of the file.
    pub fn toml_error(&self, error: toml::de::Error) -> SpecError {
        let message = error.message().trim_end().replace('\n', "; ");
        let span = error.span().unwrap_or(0..0);
        let missing =
            message.strip_prefix("missing field `").and_then(|rest| rest.split('`').next()).map(ToOwned::to_owned);
        let key = match (key_at(self.text, span.start), missing) {
            (Some(table), Some(field))
                if self.text[span.start.min(self.text.len())..].trim_start().starts_with('[') =>
            {
                format!("{table}.{field}")
            }
            (_, Some(field)) if span.start == 0 => field,
            (Some(key), _) => key,
            (None, Some(field)) => field,
            (None, None) => "(top level)".to_owned(),
        };
        self.error_at(Some(span), format!("{key}: {message}"))
    }

    /// Parses the text into `T` after [`check_bounds`]: no integer past its bound reaches a resolver.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, SpecError> {
        check_bounds(self)?;
        toml::from_str(self.text).map_err(|error| self.toml_error(error))
    }
}

pub fn parse_scenario(path: &str, text: &str) -> Result<Scenario, SpecError> {
    let source = Source { path, text };
    let file: ScenarioFile = source.parse()?;
    check_schema_version(&source, &file.schema_version)?;
    let fleet = resolve_fleet(&source, &file.fleet)?;
    let engine = resolve_engine(&source, &file.engine)?;
    let hub = resolve_hub(&source, &file.hub)?;
    let network = resolve_network(&source, &file.network)?;
    let duration_ms = *file.duration_ms_max.get_ref();
    if duration_ms == 0 {
        return Err(source.error_at(Some(file.duration_ms_max.span()), "duration_ms_max: must be more than 0"));
    }
    let liveness_budget_ms = file.liveness_budget_ms.unwrap_or(DEFAULT_LIVENESS_BUDGET_MS);
    let onboarding = resolve_onboarding(&source, file.onboarding.as_ref(), &fleet, duration_ms)?;
    let instances = instances::resolve_instances(&source, file.instances.as_ref(), onboarding.is_some())?;

    let mut steps = Vec::with_capacity(file.step.len());
    let mut stage_steps = Vec::new();
    let mut phase_steps = Vec::new();
    let mut rollout_steps = Vec::new();
    for (index, table) in file.step.iter().enumerate() {
        match parse_step(&source, index, table, &fleet, onboarding.as_ref(), instances.as_ref(), duration_ms)? {
            Triggered::At(timed) => steps.push(timed),
            Triggered::OnStage(staged) => stage_steps.push(staged),
            Triggered::After(phased) => phase_steps.push(phased),
            Triggered::OnRollout(triggered) => rollout_steps.push(triggered),
        }
    }
    if let Some(index) = file.step.iter().position(|table| table.get_ref().contains_key("on_rollout")) {
        let rolls_out = steps.iter().map(|timed| &timed.step).chain(phase_steps.iter().map(|phased| &phased.step));
        if !rolls_out.into_iter().any(|step| matches!(step, Step::StartRollout { .. })) {
            return Err(source.error_at(
                Some(file.step[index].span()),
                format!("step[{index}].on_rollout: the run starts no rollout (add a start_rollout step)"),
            ));
        }
    }
    steps.sort_by_key(|timed| timed.at_ms);
    check_liveness_room(&source, &file.step, &steps, duration_ms, liveness_budget_ms)?;

    let one_life = onboarding.as_ref().is_some_and(|onboarding| onboarding.fleet);
    let expect = resolve_expect(&source, &file.expect, &fleet, one_life)?;
    let scenario = Scenario {
        seed: file.seed,
        run: RunSpec {
            source: path.to_owned(),
            description: file.description,
            duration_ms,
            liveness_budget_ms,
            run_to_duration: file.run_to_duration,
            fleet,
            engine,
            hub,
            network,
            steps,
            stage_steps,
            phase_steps,
            rollout_steps,
            expect,
            onboarding,
            instances,
        },
    };
    // The run's work as a whole (crate::model::work): its entity-hours and its faults.
    crate::model::work::check_entity_hours(&scenario.run)
        .map_err(|reason| source.error_at(Some(file.duration_ms_max.span()), format!("duration_ms_max: {reason}")))?;
    crate::model::work::check_faults(crate::model::work::faults(&scenario.run))
        .map_err(|reason| source.error_at(file.step.first().map(Spanned::span), format!("step: {reason}")))?;
    Ok(scenario)
}

/// The `[onboarding]` table: its machines are named after the fleet's nodes, so no name means two things.
pub(crate) fn resolve_onboarding(
    source: &Source,
    file: Option<&Spanned<OnboardingFile>>,
    fleet: &FleetSpec,
    duration_ms: u64,
) -> Result<Option<OnboardingSpec>, SpecError> {
    let Some(file) = file else { return Ok(None) };
    let table = file.get_ref();
    let nodes = *table.nodes.get_ref();
    if nodes == 0 || nodes > ONBOARDING_NODES_MAX {
        return Err(source.error_at(
            Some(table.nodes.span()),
            format!("onboarding.nodes: must be 1 to {ONBOARDING_NODES_MAX}, not {nodes}"),
        ));
    }
    let start_at_ms = table.start_at_ms.unwrap_or(0);
    if start_at_ms >= duration_ms {
        return Err(source.error_at(
            Some(file.span()),
            format!("onboarding.start_at_ms: {start_at_ms} is not before the end of the run ({duration_ms})"),
        ));
    }
    let concurrency = match &table.concurrency {
        None => DEFAULT_ONBOARDING_CONCURRENCY,
        Some(value) if *value.get_ref() == 0 => {
            return Err(source.error_at(Some(value.span()), "onboarding.concurrency: must be at least 1"));
        }
        Some(value) => *value.get_ref(),
    };
    let one_life = table.fleet.unwrap_or(false);
    if one_life && nodes != fleet.nodes {
        return Err(source.error_at(
            Some(table.nodes.span()),
            format!(
                "onboarding.nodes: with fleet = true the site's machines are the fleet's nodes, so it must be \
                 fleet.nodes ({}), not {nodes}",
                fleet.nodes
            ),
        ));
    }
    let machines = if one_life {
        fleet.node_names()
    } else {
        let total = fleet.nodes + nodes;
        (fleet.nodes + 1..=total).map(|index| node_name(total, index)).collect()
    };
    Ok(Some(OnboardingSpec {
        machines,
        policy: table.policy.unwrap_or(engine::onboarding::driver::OnboardingPolicy::Current),
        start_at_ms,
        stall_window_ms: positive(
            source,
            "onboarding.stall_window_ms",
            table.stall_window_ms.as_ref(),
            DEFAULT_ONBOARDING_STALL_WINDOW_MS,
        )?,
        poll_ms: period(source, "onboarding.poll_ms", table.poll_ms.as_ref(), DEFAULT_ONBOARDING_POLL_MS)?,
        concurrency,
        no_erase_release_allowed: table.no_erase_release_allowed.unwrap_or(false),
        maas_delete_required: table.maas_delete_required.unwrap_or(false),
        roce_mandatory: table.roce_mandatory.unwrap_or(false),
        timeouts: site_timeouts(source, table.timeouts.as_ref())?,
        fleet: one_life,
    }))
}

/// `[onboarding.timeouts]`, checked: each set one is a whole number of ms in `1..=TIMEOUT_MAX_MS`.
fn site_timeouts(source: &Source, file: Option<&TimeoutsFile>) -> Result<BTreeMap<String, u64>, SpecError> {
    let mut timeouts = BTreeMap::new();
    let Some(file) = file else { return Ok(timeouts) };
    for kind in engine::matrix::TimeoutKind::ALL {
        let Some(value) = file.get(kind) else { continue };
        let ms = *value.get_ref();
        let max = engine::ports::site::TIMEOUT_MAX_MS;
        if !(1..=max).contains(&ms) {
            return Err(source.error_at(
                Some(value.span()),
                format!("onboarding.timeouts.{}_ms: must be 1 to {max} ms, not {ms}", kind.as_str()),
            ));
        }
        timeouts.insert(kind.as_str().to_owned(), ms);
    }
    Ok(timeouts)
}

pub(crate) fn check_schema_version(source: &Source, version: &Spanned<u32>) -> Result<(), SpecError> {
    if *version.get_ref() != SCHEMA_VERSION {
        return Err(source.error_at(
            Some(version.span()),
            format!("schema_version: this fleetsim reads version {SCHEMA_VERSION}, the file has {}", version.get_ref()),
        ));
    }
    Ok(())
}

pub(crate) fn resolve_fleet(source: &Source, file: &FleetFile) -> Result<FleetSpec, SpecError> {
    let nodes = *file.nodes.get_ref();
    if nodes == 0 || nodes > NODES_MAX {
        return Err(
            source.error_at(Some(file.nodes.span()), format!("fleet.nodes: must be 1 to {NODES_MAX}, not {nodes}"))
        );
    }
    let lane_size = file.lane_size.as_ref().map_or(8, |v| *v.get_ref());
    if let Some(size) = &file.lane_size {
        if *size.get_ref() == 0 || *size.get_ref() > nodes {
            return Err(
                source.error_at(Some(size.span()), format!("fleet.lane_size: must be 1 to the fleet size ({nodes})"))
            );
        }
    }
    let availability_floor = file.availability_floor.as_ref().map_or(0, |v| *v.get_ref());
    if let Some(floor) = &file.availability_floor {
        if *floor.get_ref() >= nodes {
            return Err(source.error_at(
                Some(floor.span()),
                format!("fleet.availability_floor: must be less than the fleet size ({nodes})"),
            ));
        }
    }
    let mut fleet = FleetSpec { nodes, durable: BTreeSet::new(), lane_size, availability_floor };
    for name in &file.durable {
        if fleet.node_index(name.get_ref()).is_none() {
            return Err(unknown_host(source, name.span(), "fleet.durable", name.get_ref(), &fleet));
        }
        fleet.durable.insert(name.get_ref().clone());
    }
    Ok(fleet)
}

pub(crate) fn resolve_engine(source: &Source, file: &EngineFile) -> Result<EngineSpec, SpecError> {
    let call_timeout_ms =
        positive(source, "engine.call_timeout_ms", file.call_timeout_ms.as_ref(), DEFAULT_CALL_TIMEOUT_MS)?;
    Ok(EngineSpec {
        hub_expiry: file.hub_expiry.unwrap_or(ExpiryPolicy::EpochAware),
        call_timeout_ms,
        rollout_policy: file.rollout_policy.unwrap_or(engine::rollout::driver::RolloutPolicy::Lanes),
    })
}

pub(crate) fn resolve_hub(source: &Source, file: &HubFile) -> Result<HubSpec, SpecError> {
    Ok(HubSpec {
        agent_ttl_ms: positive(source, "hub.agent_ttl_ms", file.agent_ttl_ms.as_ref(), DEFAULT_AGENT_TTL_MS)?,
        sweep_interval_ms: period(
            source,
            "hub.sweep_interval_ms",
            file.sweep_interval_ms.as_ref(),
            DEFAULT_SWEEP_INTERVAL_MS,
        )?,
    })
}

pub(crate) fn positive(
    source: &Source,
    key: &str,
    value: Option<&Spanned<u64>>,
    default: u64,
) -> Result<u64, SpecError> {
    match value {
        None => Ok(default),
        Some(value) if *value.get_ref() == 0 => {
            Err(source.error_at(Some(value.span()), format!("{key}: must be more than 0")))
        }
        Some(value) => Ok(*value.get_ref()),
    }
}

/// The period of a loop the run runs: at least [`crate::model::work::PERIOD_MS_MIN`].
fn period(source: &Source, key: &str, value: Option<&Spanned<u64>>, default: u64) -> Result<u64, SpecError> {
    let min = crate::model::work::PERIOD_MS_MIN;
    match value {
        Some(value) if *value.get_ref() < min => Err(source.error_at(
            Some(value.span()),
            format!(
                "{key}: {} ms is shorter than the {min} ms a loop's period may be (docs/formats.md, \"Bounds on a run's work\")",
                value.get_ref()
            ),
        )),
        _ => positive(source, key, value, default),
    }
}

pub(crate) fn per_mille(source: &Source, key: &str, value: Option<&Spanned<u32>>) -> Result<u32, SpecError> {
    match value {
        None => Ok(0),
        Some(value) if *value.get_ref() > 1000 => Err(source
            .error_at(Some(value.span()), format!("{key}: a per-mille rate is 0 to 1000, not {}", value.get_ref()))),
        Some(value) => Ok(*value.get_ref()),
    }
}

pub(crate) fn resolve_network(source: &Source, file: &NetworkFile) -> Result<LinkConfig, SpecError> {
    let mut link = LinkConfig::default();
    if let Some(latency) = &file.latency_ms {
        let range = latency.get_ref();
        if range.min > range.max {
            return Err(source.error_at(Some(latency.span()), "network.latency_ms: min is more than max"));
        }
        link.latency_min_ms = range.min;
        link.latency_max_ms = range.max;
    }
    link.request_loss_per_mille =
        per_mille(source, "network.request_loss_per_mille", file.request_loss_per_mille.as_ref())?;
    link.response_loss_per_mille =
        per_mille(source, "network.response_loss_per_mille", file.response_loss_per_mille.as_ref())?;
    Ok(link)
}

fn unknown_host(source: &Source, span: Range<usize>, key: &str, name: &str, fleet: &FleetSpec) -> SpecError {
    source.error_at(
        Some(span),
        format!(
            "{key}: unknown host \"{name}\" (this fleet has {CONTROLLER}, {HUB}, {}..{})",
            fleet.node_name(1),
            fleet.node_name(fleet.nodes)
        ),
    )
}

/// What fires a step: the clock, an onboarding stage, the end of a phase, or a point of the rollout.
enum Triggered {
    At(TimedStep),
    OnStage(StageStep),
    After(PhaseStep),
    OnRollout(RolloutStepTrigger),
}

fn parse_step(
    source: &Source,
    index: usize,
    table: &Spanned<toml::Table>,
    fleet: &FleetSpec,
    onboarding: Option<&OnboardingSpec>,
    instances: Option<&instances::InstancesSpec>,
    duration_ms: u64,
) -> Result<Triggered, SpecError> {
    let span = table.span();
    let key = format!("step[{index}]");
    let mut fields = table.get_ref().clone();
    let at_ms = fields.remove("at_ms");
    let on_stage = fields.remove("on_stage");
    // An `operator` step's `workflow` names the workflow it acts on, not a stage trigger's machine.
    let operator = fields.get("kind").and_then(toml::Value::as_str) == Some("operator");
    let workflow = if operator { None } else { fields.remove("workflow") };
    let occurrence = fields.remove("occurrence");
    let after = fields.remove("after");
    let wait_ms = fields.remove("wait_ms");
    if let Some(point) = fields.remove("on_rollout") {
        if at_ms.is_some() || on_stage.is_some() || workflow.is_some() || after.is_some() || wait_ms.is_some() {
            return Err(source.error_at(
                Some(span),
                format!("{key}: on_rollout (with node and occurrence) is a trigger of its own: give no at_ms, on_stage, workflow, after or wait_ms"),
            ));
        }
        let node = fields.remove("node");
        let triggered = parse_rollout_trigger(source, &key, span.clone(), point, node, occurrence, fleet)?;
        let step = Step::deserialize(toml::Value::Table(fields)).map_err(|error| {
            let message = error.message().trim_end().replace('\n', "; ");
            source.error_at(Some(span.clone()), format!("{key}: {message}"))
        })?;
        validate_step(source, &key, span.clone(), &step, fleet, onboarding, instances)?;
        if is_driver_action(&step) {
            return Err(source
                .error_at(Some(span), format!("{key}: a {} step is a driver action; give it an at_ms", step.kind())));
        }
        let (point, node, occurrence) = triggered;
        return Ok(Triggered::OnRollout(RolloutStepTrigger { point, node, occurrence, step }));
    }
    if let Some(after) = after {
        if at_ms.is_some() || on_stage.is_some() || workflow.is_some() || occurrence.is_some() {
            return Err(source.error_at(
                Some(span),
                format!("{key}: after (with wait_ms) is a trigger of its own: give no at_ms, on_stage, workflow or occurrence"),
            ));
        }
        let phase = parse_phase(source, &key, span.clone(), &after, onboarding)?;
        let delay_ms = match wait_ms {
            None => 0,
            Some(toml::Value::Integer(delay)) if delay >= 0 && (delay as u64) <= duration_ms => delay as u64,
            Some(other) => {
                return Err(source.error_at(
                    Some(span),
                    format!("{key}.wait_ms: must be a whole number of ms from 0 to the run's length ({duration_ms}), not {other}"),
                ));
            }
        };
        let step = Step::deserialize(toml::Value::Table(fields)).map_err(|error| {
            let message = error.message().trim_end().replace('\n', "; ");
            source.error_at(Some(span.clone()), format!("{key}: {message}"))
        })?;
        validate_step(source, &key, span.clone(), &step, fleet, onboarding, instances)?;
        return Ok(Triggered::After(PhaseStep { after: phase, wait_ms: delay_ms, step }));
    }
    if wait_ms.is_some() && on_stage.is_none() {
        return Err(source
            .error_at(Some(span), format!("{key}.wait_ms: goes with after = \"<phase>\" or on_stage = \"<stage>\"")));
    }
    let stage_wait_ms = match wait_ms {
        None => 0,
        Some(toml::Value::Integer(delay)) if delay >= 0 && (delay as u64) <= duration_ms => delay as u64,
        Some(other) => {
            return Err(source.error_at(
                Some(span),
                format!("{key}.wait_ms: must be a whole number of ms from 0 to the run's length ({duration_ms}), not {other}"),
            ));
        }
    };
    let trigger = match (at_ms, on_stage) {
        (Some(_), Some(_)) => {
            return Err(source.error_at(Some(span), format!("{key}: give at_ms or on_stage, not both")));
        }
        (None, None) => {
            return Err(source.error_at(Some(span), format!("{key}: missing at_ms (or on_stage, or after)")));
        }
        (Some(toml::Value::Integer(at)), None) if at >= 0 => {
            let at_ms = at as u64;
            if at_ms > duration_ms {
                return Err(source.error_at(
                    Some(span),
                    format!("{key}.at_ms: {at_ms} is after the end of the run ({duration_ms})"),
                ));
            }
            if workflow.is_some() || occurrence.is_some() {
                return Err(
                    source.error_at(Some(span), format!("{key}: workflow and occurrence go with on_stage, not at_ms"))
                );
            }
            None
        }
        (Some(_), None) => {
            return Err(source.error_at(Some(span), format!("{key}.at_ms: must be a whole number of ms, 0 or more")));
        }
        (None, Some(stage)) => {
            Some(parse_stage_trigger(source, &key, span.clone(), stage, workflow, occurrence, onboarding)?)
        }
    };
    let step = Step::deserialize(toml::Value::Table(fields)).map_err(|error| {
        let message = error.message().trim_end().replace('\n', "; ");
        source.error_at(Some(span.clone()), format!("{key}: {message}"))
    })?;
    validate_step(source, &key, span.clone(), &step, fleet, onboarding, instances)?;
    match trigger {
        None => {
            let at_ms = table.get_ref().get("at_ms").and_then(toml::Value::as_integer).unwrap_or(0) as u64;
            Ok(Triggered::At(TimedStep { at_ms, step }))
        }
        Some((workflow, stage, occurrence)) => {
            if is_driver_action(&step) {
                return Err(source.error_at(
                    Some(span),
                    format!("{key}: a {} step is a driver action; give it an at_ms", step.kind()),
                ));
            }
            Ok(Triggered::OnStage(StageStep { workflow, stage, occurrence, wait_ms: stage_wait_ms, step }))
        }
    }
}

/// `on_rollout = "<point>"`, `node = "<node>"` (optional), `occurrence = N` (default 1) of a rollout-triggered step.
fn parse_rollout_trigger(
    source: &Source,
    key: &str,
    span: Range<usize>,
    point: toml::Value,
    node: Option<toml::Value>,
    occurrence: Option<toml::Value>,
    fleet: &FleetSpec,
) -> Result<(RolloutPoint, Option<String>, u64), SpecError> {
    let point = point.as_str().and_then(RolloutPoint::parse).ok_or_else(|| {
        let names: Vec<&str> = RolloutPoint::ALL.iter().map(|point| point.as_str()).collect();
        source.error_at(
            Some(span.clone()),
            format!("{key}.on_rollout: {point} is not a point of the rollout (one of {})", names.join(", ")),
        )
    })?;
    let node = match node {
        None => None,
        Some(toml::Value::String(node)) if fleet.node_index(&node).is_some() => Some(node),
        Some(other) => {
            return Err(source.error_at(
                Some(span),
                format!(
                    "{key}.node: {other} is not a node of this fleet ({}..{})",
                    fleet.node_name(1),
                    fleet.node_name(fleet.nodes)
                ),
            ));
        }
    };
    if node.is_some() && point == RolloutPoint::Begin {
        return Err(source
            .error_at(Some(span), format!("{key}.node: on_rollout = \"begin\" is the controller's, not a node's")));
    }
    let occurrence = match occurrence {
        None => 1,
        Some(toml::Value::Integer(occurrence)) if occurrence >= 1 => occurrence as u64,
        Some(other) => {
            return Err(source.error_at(Some(span), format!("{key}.occurrence: must be 1 or more, not {other}")));
        }
    };
    Ok((point, node, occurrence))
}

/// `after = "<phase>"`: `onboarding` needs an `[onboarding]` table.
fn parse_phase(
    source: &Source,
    key: &str,
    span: Range<usize>,
    after: &toml::Value,
    onboarding: Option<&OnboardingSpec>,
) -> Result<Phase, SpecError> {
    let phase = Phase::ALL.into_iter().find(|phase| after.as_str() == Some(phase.as_str())).ok_or_else(|| {
        let names: Vec<&str> = Phase::ALL.iter().map(|phase| phase.as_str()).collect();
        source
            .error_at(Some(span.clone()), format!("{key}.after: {after} is not a phase (one of {})", names.join(", ")))
    })?;
    if phase == Phase::Onboarding && onboarding.is_none() {
        return Err(source.error_at(Some(span), format!("{key}.after: \"onboarding\" needs an [onboarding] table")));
    }
    Ok(phase)
}

/// `on_stage = "<stage>"`, `workflow = "<machine>"`, `occurrence = N` (default 1) of a stage-triggered step. A
/// decommission stage is written `decommission:<stage>` (or bare, when no onboarding stage has its name).
fn parse_stage_trigger(
    source: &Source,
    key: &str,
    span: Range<usize>,
    stage: toml::Value,
    workflow: Option<toml::Value>,
    occurrence: Option<toml::Value>,
    onboarding: Option<&OnboardingSpec>,
) -> Result<(String, engine::matrix::Stage, u64), SpecError> {
    let Some(onboarding) = onboarding else {
        return Err(source.error_at(Some(span), format!("{key}.on_stage: needs an [onboarding] table")));
    };
    let stage = stage.as_str().and_then(parse_stage).ok_or_else(|| {
        let names: Vec<String> = engine::matrix::Stage::all().map(stage_name).collect();
        source.error_at(
            Some(span.clone()),
            format!("{key}.on_stage: {stage} is not a stage of the recovery matrix (one of {})", names.join(", ")),
        )
    })?;
    let workflow = match workflow {
        Some(toml::Value::String(machine)) if onboarding.has_machine(&machine) => machine,
        Some(other) => {
            return Err(source.error_at(
                Some(span),
                format!(
                    "{key}.workflow: {other} is not a machine of the MAAS site ({})",
                    onboarding.machines.join(", ")
                ),
            ));
        }
        None => return Err(source.error_at(Some(span), format!("{key}: on_stage needs workflow = \"<machine>\""))),
    };
    let occurrence = match occurrence {
        None => 1,
        Some(toml::Value::Integer(occurrence)) if occurrence >= 1 => occurrence as u64,
        Some(other) => {
            return Err(source.error_at(Some(span), format!("{key}.occurrence: must be 1 or more, not {other}")));
        }
    };
    Ok((workflow, stage, occurrence))
}

/// The bound on a `commissioning_slow` step's `event_interval_ms` (exclusive): MAAS's `node_timeout` (30 minutes). A
/// script slower than that never reports before the status monitor fails the commissioning.
pub(crate) const COMMISSIONING_SLOW_INTERVAL_MAX_MS: u64 = fakes::maas::region::NODE_TIMEOUT_MIN * 60_000;

/// The longest wipe `erase_slow` may ask for: a day.
pub(crate) const ERASE_SLOW_MAX_MS: u64 = 24 * 60 * 60_000;
/// The most calls a `provider_fault` or `provider_answer_lost` may spoil.
pub(crate) const FAULT_COUNT_MAX: u32 = 1_000;

pub(crate) fn validate_step(
    source: &Source,
    key: &str,
    span: Range<usize>,
    step: &Step,
    fleet: &FleetSpec,
    onboarding: Option<&OnboardingSpec>,
    instances: Option<&instances::InstancesSpec>,
) -> Result<(), SpecError> {
    if step.is_instance_step() && instances.is_none() {
        return Err(source.error_at(
            Some(span),
            format!("{key}: a {} step acts on the instance lifecycle, which needs an [instances] table", step.kind()),
        ));
    }
    if let Step::ControllerDeath { subsystem: crate::model::faults::DeathSubsystem::Instances, .. } = step
        && instances.is_none()
    {
        return Err(source.error_at(Some(span), format!("{key}.subsystem: instances needs an [instances] table")));
    }
    if step.is_site_step() {
        let Some(onboarding) = onboarding else {
            return Err(source.error_at(
                Some(span),
                format!("{key}: a {} step acts on the MAAS site, which needs an [onboarding] table", step.kind()),
            ));
        };
        for (field, machine) in step.names() {
            if !onboarding.has_machine(machine) {
                let first = onboarding.machines.first().map_or("", String::as_str);
                let last = onboarding.machines.last().map_or("", String::as_str);
                return Err(source.error_at(
                    Some(span),
                    format!("{key}.{field}: \"{machine}\" is not a machine of the MAAS site ({first}..{last})"),
                ));
            }
        }
    } else {
        for (field, host) in step.names() {
            let maas = host == MAAS && onboarding.is_some();
            if !fleet.host_exists(host) && !maas {
                return Err(unknown_host(source, span, &format!("{key}.{field}"), host, fleet));
            }
        }
    }
    let problem = match step {
        Step::Partition { a, b } | Step::Repair { a, b } | Step::Hold { a, b } | Step::Release { a, b } if a == b => {
            Some(format!("{key}: a and b are both \"{a}\""))
        }
        Step::LinkLoss { a, b, .. } | Step::LinkLatency { a, b, .. } if a == b => {
            Some(format!("{key}: a and b are both \"{a}\""))
        }
        Step::PartitionOneway { from, to } | Step::RepairOneway { from, to } if from == to => {
            Some(format!("{key}: from and to are both \"{from}\""))
        }
        Step::LinkLoss { request_per_mille, response_per_mille, .. }
            if *request_per_mille > 1000 || *response_per_mille > 1000 =>
        {
            Some(format!("{key}: a per-mille rate is 0 to 1000"))
        }
        Step::LinkLatency { min_ms, max_ms, .. } if min_ms > max_ms => {
            Some(format!("{key}: min_ms is more than max_ms"))
        }
        Step::AgentStop { target }
        | Step::AgentStart { target }
        | Step::TaskLease { target, .. }
        | Step::TtlExpiry { target, .. }
        | Step::RotateCredential { target }
            if fleet.node_index(target).is_none() =>
        {
            Some(format!("{key}.target: \"{target}\" runs no agent (only nodes do)"))
        }
        Step::OpenEpoch { members } if members.is_empty() => {
            Some(format!("{key}.members: an epoch needs at least one member"))
        }
        Step::OpenEpoch { members } => members
            .iter()
            .find(|member| fleet.node_index(member).is_none())
            .map(|member| format!("{key}.members: \"{member}\" runs no agent (only nodes do)")),
        Step::CloseEpoch { epoch: 0 } => Some(format!("{key}.epoch: epochs are numbered from 1")),
        Step::TtlExpiry { silent_ms: 0, .. } => Some(format!("{key}.silent_ms: must be at least 1")),
        Step::MarkerDrift { target, .. }
        | Step::EndpointIdentityChange { target }
        | Step::StorageFault { target, .. }
            if fleet.node_index(target).is_none() =>
        {
            Some(format!("{key}.target: \"{target}\" is not a worker node"))
        }
        Step::SshTimeout { target, .. } if target == CONTROLLER => {
            Some(format!("{key}.target: the controller runs no SSH endpoint"))
        }
        Step::SshTimeout { count: 0, .. } => Some(format!("{key}.count: must be at least 1")),
        Step::StartRollout { revision } | Step::OldJournal { revision, .. }
            if revision.is_empty() || revision == PRIOR_REVISION =>
        {
            Some(format!("{key}.revision: must name a new revision (the fleet runs {PRIOR_REVISION})"))
        }
        Step::OldJournal { revision, .. } if !revision.bytes().all(|b| b.is_ascii_alphanumeric()) => Some(format!(
            "{key}.revision: letters and digits only (the old journal's rollout id is rollout-<revision>)"
        )),
        Step::MaasUnavailable { count: 0, .. }
        | Step::VaultUnavailable { count: 0 }
        | Step::TokenAnswerLost { count: 0, .. } => Some(format!("{key}.count: must be at least 1")),
        Step::EraseSlow { erase_ms, .. } if *erase_ms == 0 || *erase_ms > ERASE_SLOW_MAX_MS => Some(format!(
            "{key}.erase_ms: {erase_ms} must be from 1 to {ERASE_SLOW_MAX_MS} (a day: a full overwrite of the largest disks)"
        )),
        Step::CommissioningSlow { event_interval_ms: 0, .. } => {
            Some(format!("{key}.event_interval_ms: must be at least 1 (a slow commissioning still takes time)"))
        }
        Step::CommissioningSlow { event_interval_ms, .. }
            if *event_interval_ms >= COMMISSIONING_SLOW_INTERVAL_MAX_MS =>
        {
            Some(format!(
                "{key}.event_interval_ms: {event_interval_ms} must be less than {COMMISSIONING_SLOW_INTERVAL_MAX_MS}, MAAS's 30-minute node_timeout: a script that slow never reports before MAAS fails the commissioning (that is script_hang)"
            ))
        }
        Step::ResolverServfail { zones: Some(zones) } if zones.is_empty() => {
            Some(format!("{key}.zones: name at least one zone, or leave zones out for every query"))
        }
        Step::Operator { reason, .. } if reason.trim().is_empty() => {
            Some(format!("{key}.reason: an operator action needs a reason for its audit record (seed 000, section 8)"))
        }
        Step::Operator { actor, .. } if actor.trim().is_empty() => {
            Some(format!("{key}.actor: an operator action needs an actor id for its audit record"))
        }
        Step::Operator { reason, actor, .. }
            if reason.contains(engine::secret::SECRET_MARKER) || actor.contains(engine::secret::SECRET_MARKER) =>
        {
            Some(format!("{key}.reason: the audit record is journaled and traced, so it must not carry a credential"))
        }
        Step::ClockSkew { target, .. } if target == MAAS => {
            Some(format!("{key}.target: the maas host runs on the site's clock, which cannot be skewed"))
        }
        Step::Decommission { target } if instances.is_some_and(|instances| instances.bare_metal) => Some(format!(
            "{key}: in a bare-metal run {target} is decommissioned by terminating its instance (an instance_operator \
             step with op = \"terminate\" and target = \"{target}\")"
        )),
        // No rule on the values of the other kinds (or the values passed the rules above).
        Step::Partition { .. }
        | Step::PartitionOneway { .. }
        | Step::Repair { .. }
        | Step::RepairOneway { .. }
        | Step::Hold { .. }
        | Step::Release { .. }
        | Step::LinkLoss { .. }
        | Step::LinkLatency { .. }
        | Step::Crash { .. }
        | Step::Restart { .. }
        | Step::ClockSkew { .. }
        | Step::AgentStop { .. }
        | Step::AgentStart { .. }
        | Step::TtlExpiry { .. }
        | Step::CloseEpoch { .. }
        | Step::TaskLease { .. }
        | Step::RotateCredential { .. }
        | Step::StartRollout { .. }
        | Step::MarkerDrift { .. }
        | Step::SshTimeout { .. }
        | Step::EndpointIdentityChange { .. }
        | Step::StorageFault { .. }
        | Step::ArtifactMissing { .. }
        | Step::ControllerDeath { .. }
        | Step::RouteSwap
        | Step::CredentialExpiry { .. }
        | Step::HubTimeout { .. }
        | Step::StaleLock { .. }
        | Step::OperatorHold { .. }
        | Step::PrincipalRevoked { .. }
        | Step::OldJournal { .. }
        | Step::MacDrift { .. }
        | Step::ResolverServfail { .. }
        | Step::ResolverRepair
        | Step::ScriptHang { .. }
        | Step::ScriptFailure { .. }
        | Step::CommissioningSlow { .. }
        | Step::DatasourceFailure { .. }
        | Step::HardwareMissing { .. }
        | Step::AgentEnrolDelay { .. }
        | Step::HwSyncFailure { .. }
        | Step::HwSyncStops { .. }
        | Step::SshUnreachable { .. }
        | Step::TokenAnswerLost { .. }
        | Step::MaasUnavailable { .. }
        | Step::PreseedFailure { .. }
        | Step::TokenPolicyMissing
        | Step::MaasKeyRevoked
        | Step::MaasUnreachable { .. }
        | Step::VaultUnavailable { .. }
        | Step::PowerCredentialMissing { .. }
        | Step::BmcFault { .. }
        | Step::DhcpLeaseLoss { .. }
        | Step::DhcpRepair
        | Step::SiteDisabled
        | Step::MachineDeleted { .. }
        | Step::MachineAdvanced { .. }
        | Step::InterfaceDisconnected { .. }
        | Step::MachineHidden { .. }
        | Step::RegionWorkflowWedged { .. }
        | Step::RegisterMacs { .. }
        | Step::ResumeOnboarding { .. }
        | Step::Operator { .. }
        | Step::Decommission { .. }
        | Step::AllocationStuck { .. }
        | Step::CleanupResidue { .. }
        | Step::UninstallFailure { .. }
        | Step::AgentUnreachable { .. }
        | Step::InventoryUnavailable { .. }
        | Step::EraseFailure { .. }
        | Step::EraseSlow { .. }
        | Step::SecretsDeleteDenied
        | Step::NodeReactivated { .. } => None,
        Step::InstanceOperator { target, .. } if target.trim().is_empty() => {
            Some(format!("{key}.target: names no node, instance, pool member, pool or deferred operation"))
        }
        Step::InstanceOperator { reason, .. } if reason.contains(engine::secret::SECRET_MARKER) => {
            Some(format!("{key}.reason: holds a credential; reasons are audited"))
        }
        Step::InstanceOperator { op: InstanceOp::Acquire, target, .. }
            if !instances.is_some_and(|instances| instances.has_pool(target)) =>
        {
            Some(format!("{key}.target: \"{target}\" is not a pool of the [instances] table"))
        }
        Step::InstanceOperator { op, operation_id: Some(_), .. } if *op != InstanceOp::Provision => {
            Some(format!("{key}.operation_id: only a provision takes one"))
        }
        Step::InstanceOperator { operation_id: Some(id), .. } if id.trim().is_empty() || id.len() > 128 => {
            Some(format!("{key}.operation_id: must be 1 to 128 characters"))
        }
        Step::ProviderFault { count, .. } | Step::ProviderAnswerLost { count } if *count > FAULT_COUNT_MAX => {
            Some(format!("{key}.count: must be 0 to {FAULT_COUNT_MAX}"))
        }
        Step::InstanceOperator { .. }
        | Step::ProviderFault { .. }
        | Step::ProviderAnswerLost { .. }
        | Step::ProviderSyncStops { .. } => None,
    };
    match problem {
        Some(message) => Err(source.error_at(Some(span), message)),
        None => Ok(()),
    }
}

/// Eventually-properties are judged after the faults heal: the last step that touches the network or a host must
/// leave the liveness budget before the end of the run.
fn check_liveness_room(
    source: &Source,
    tables: &[Spanned<toml::Table>],
    steps: &[TimedStep],
    duration_ms: u64,
    liveness_budget_ms: u64,
) -> Result<(), SpecError> {
    let last = steps.iter().filter(|timed| !is_driver_action(&timed.step)).map(|timed| timed.at_ms).max();
    if let Some(last) = last {
        if last + liveness_budget_ms > duration_ms {
            // Point at the late step itself.
            let span = tables
                .iter()
                .find(|table| table.get_ref().get("at_ms").and_then(toml::Value::as_integer) == Some(last as i64))
                .or(tables.first())
                .map(Spanned::span);
            return Err(source.error_at(
                span,
                format!(
                    "duration_ms_max: the last fault step is at {last} ms; eventually-properties need {liveness_budget_ms} ms after it (liveness_budget_ms), so the run must last at least {} ms",
                    last + liveness_budget_ms
                ),
            ));
        }
    }
    Ok(())
}

pub(crate) fn is_driver_action(step: &Step) -> bool {
    step.step_kind().counted() == Counted::DriverAction
}

/// A stage as `on_stage` names it: an onboarding stage bare, a decommission stage with the `decommission:` prefix.
pub fn stage_name(stage: engine::matrix::Stage) -> String {
    match stage {
        engine::matrix::Stage::Onboarding(stage) => stage.as_str().to_owned(),
        engine::matrix::Stage::Decommission(stage) => {
            format!("{}{}", crate::model::pairs::DECOMMISSION_PAIR_PREFIX, stage.as_str())
        }
    }
}

/// The stage `on_stage` names: `decommission:<stage>`, or a bare name (onboarding's first: `load_site_config` is
/// in both workflows).
fn parse_stage(name: &str) -> Option<engine::matrix::Stage> {
    use engine::matrix::{DecommissionStage, OnboardingStage, Stage};
    if let Some(name) = name.strip_prefix(crate::model::pairs::DECOMMISSION_PAIR_PREFIX) {
        return DecommissionStage::ALL.into_iter().find(|stage| stage.as_str() == name).map(Stage::Decommission);
    }
    OnboardingStage::ALL
        .into_iter()
        .find(|stage| stage.as_str() == name)
        .map(Stage::Onboarding)
        .or_else(|| DecommissionStage::ALL.into_iter().find(|stage| stage.as_str() == name).map(Stage::Decommission))
}

/// The revision and generation every worker runs when a run starts (the RCCA's source before the incident rollout).
pub const PRIOR_REVISION: &str = "7f3bbd12";
pub const PRIOR_GENERATION: u64 = 4;

fn resolve_expect(
    source: &Source,
    file: &ExpectFile,
    fleet: &FleetSpec,
    one_life: bool,
) -> Result<Expectations, SpecError> {
    let mut must_hold = Vec::new();
    for name in &file.must_hold {
        let info = known_oracle(source, "expect.must_hold", name)?;
        if info.property == PropertyKind::Sometimes {
            return Err(source.error_at(
                Some(name.span()),
                format!("expect.must_hold: \"{}\" is a sometimes-property; list it under must_fire", info.name),
            ));
        }
        must_hold.push(info.name.to_owned());
    }
    let mut must_fire = Vec::new();
    for name in &file.must_fire {
        let info = known_oracle(source, "expect.must_fire", name)?;
        if must_hold.iter().any(|held| held == info.name) {
            return Err(
                source.error_at(Some(name.span()), format!("expect.must_fire: \"{}\" is also in must_hold", info.name))
            );
        }
        must_fire.push(info.name.to_owned());
    }
    let mut matrix_pairs = Vec::new();
    for pair in &file.matrix_pairs {
        let pairs = crate::model::pairs::listed_pair_workflow(pair.get_ref())
            .or_else(|| crate::model::pairs::implied_transient_pair_workflow(pair.get_ref()));
        if pairs.is_none() {
            return Err(source.error_at(
                Some(pair.span()),
                format!(
                    "expect.matrix_pairs: \"{}\" is not a pair the recovery matrix lists or implies (stage/failure_class, decommission:stage/failure_class; see docs/recovery-matrix.md)",
                    pair.get_ref()
                ),
            ));
        }
        matrix_pairs.push(pair.get_ref().clone());
    }
    let one_of =
        |key: &str, value: &Spanned<String>, known: &[&str]| one_of(source, &format!("expect.{key}"), value, known);
    let mut recovery_work = None;
    if let Some(entries) = &file.recovery_work {
        let mut checked = Vec::new();
        for entry in entries {
            if !crate::model::pairs::is_recovery_work(entry.get_ref()) {
                return Err(source.error_at(
                    Some(entry.span()),
                    format!(
                        "expect.recovery_work: \"{}\" is not stage/work/outcome (work: a compensation of the matrix or reseed; outcome: performed, not_due or failed)",
                        entry.get_ref()
                    ),
                ));
            }
            checked.push(entry.get_ref().clone());
        }
        checked.sort();
        checked.dedup();
        recovery_work = Some(checked);
    }
    let workflow_states: Vec<&str> = engine::matrix::WorkflowState::ALL.iter().map(|state| state.as_str()).collect();
    let node_states: Vec<&str> = engine::matrix::NodeState::ALL.iter().map(|state| state.as_str()).collect();
    let timeouts_known: Vec<&str> = engine::matrix::TimeoutKind::ALL.iter().map(|kind| kind.as_str()).collect();
    let conditions_known: Vec<&str> =
        engine::matrix::OutOfBandCondition::ALL.iter().map(|condition| condition.as_str()).collect();
    let actions_known: Vec<&str> = engine::matrix::RecoveryAction::ALL.iter().map(|action| action.as_str()).collect();
    let list = |key: &str, values: &[Spanned<String>], known: &[&str]| -> Result<Vec<String>, SpecError> {
        values.iter().map(|value| one_of(key, value, known)).collect()
    };
    Ok(Expectations {
        must_hold,
        must_fire,
        matrix_pairs,
        recovery_work,
        workflow_state: file
            .workflow_state
            .as_ref()
            .map(|v| one_of("workflow_state", v, &workflow_states))
            .transpose()?,
        node_state: file.node_state.as_ref().map(|v| one_of("node_state", v, &node_states)).transpose()?,
        attempts_max: file.attempts_max.as_ref().map(|value| *value.get_ref()),
        timeouts: list("timeouts", &file.timeouts, &timeouts_known)?,
        conditions: list("conditions", &file.conditions, &conditions_known)?,
        audits: list("audits", &file.audits, &actions_known)?,
        rollout: file
            .rollout
            .as_ref()
            .map(|rollout| resolve_rollout_expect(source, rollout, fleet, one_life))
            .transpose()?,
    })
}

/// `value` when it is one of `known`, else an error at its place naming `key` and what it may be.
fn one_of(source: &Source, key: &str, value: &Spanned<String>, known: &[&str]) -> Result<String, SpecError> {
    if known.contains(&value.get_ref().as_str()) {
        return Ok(value.get_ref().clone());
    }
    Err(source
        .error_at(Some(value.span()), format!("{key}: \"{}\" is not one of {}", value.get_ref(), known.join(", "))))
}

/// `[expect.rollout]`: known outcomes and verdicts, counts that add up to the fleet (at most the fleet, when the
/// site's machines are the fleet's: a rollout selects only the nodes enrolled), nodes the fleet has.
fn resolve_rollout_expect(
    source: &Source,
    file: &Spanned<RolloutExpectFile>,
    fleet: &FleetSpec,
    one_life: bool,
) -> Result<RolloutExpect, SpecError> {
    let one_of = |key: &str, value: &Spanned<String>, known: &[&str]| {
        one_of(source, &format!("expect.rollout.{key}"), value, known)
    };
    let rollout = file.get_ref();
    let outcome = rollout.outcome.as_ref().map(|value| one_of("outcome", value, &ROLLOUT_OUTCOMES)).transpose()?;
    let lanes = match &rollout.lanes {
        Some(lanes) => Some(lanes.iter().map(|lane| one_of("lanes", lane, &LANE_VERDICTS)).collect::<Result<_, _>>()?),
        None => None,
    };
    let mut nodes = BTreeMap::new();
    for (outcome, count) in &rollout.nodes {
        one_of("nodes", outcome, &reports::NODE_OUTCOMES)?;
        nodes.insert(outcome.get_ref().clone(), *count.get_ref());
    }
    let counted = nodes.values().fold(0u64, |total, count| total.saturating_add(*count));
    let fits = if one_life { counted <= u64::from(fleet.nodes) } else { counted == u64::from(fleet.nodes) };
    if !nodes.is_empty() && !fits {
        return Err(source.error_at(
            Some(file.span()),
            format!("expect.rollout.nodes: the counts add up to {counted} nodes, the fleet has {}", fleet.nodes),
        ));
    }
    let mut node = BTreeMap::new();
    for (name, outcome) in &rollout.node {
        if fleet.node_index(name.get_ref()).is_none() {
            return Err(source.error_at(
                Some(name.span()),
                format!(
                    "expect.rollout.node: \"{}\" is not a node of this fleet (node-01 … {})",
                    name.get_ref(),
                    fleet.node_name(fleet.nodes)
                ),
            ));
        }
        node.insert(name.get_ref().clone(), one_of("node", outcome, &reports::NODE_OUTCOMES)?);
    }
    Ok(RolloutExpect { outcome, lanes, nodes, node })
}

pub(crate) fn known_oracle(
    source: &Source,
    key: &str,
    name: &Spanned<String>,
) -> Result<&'static oracles::OracleInfo, SpecError> {
    oracles::info(name.get_ref()).ok_or_else(|| {
        let known: Vec<&str> = oracles::CATALOG.iter().map(|info| info.name).collect();
        source.error_at(
            Some(name.span()),
            format!("{key}: unknown oracle \"{}\" (known: {})", name.get_ref(), known.join(", ")),
        )
    })
}

pub mod instances;
pub mod write;

#[cfg(test)]
mod tests {
    use super::*;
    use fakes::cohort_journal::OldJournal;

    const MINIMAL: &str = r#"
schema_version = 1
description = "two nodes"
seed = 3
duration_ms_max = 1_000_000

[fleet]
nodes = 2
"#;

    fn err(text: &str) -> String {
        parse_scenario("s.toml", text).unwrap_err().to_string()
    }

    #[test]
    fn one_life_and_phase_triggers_are_checked() {
        let site = "\n[onboarding]\nnodes = 2\nfleet = true\n";
        let ok = parse_scenario(
            "s.toml",
            &format!("{MINIMAL}{site}\n[[step]]\nafter = \"onboarding\"\nwait_ms = 5\nkind = \"start_rollout\"\nrevision = \"2944aebb\"\n"),
        )
        .unwrap();
        let onboarding = ok.run.onboarding.as_ref().unwrap();
        assert_eq!(
            (onboarding.fleet, onboarding.machines.clone()),
            (true, vec!["node-01".to_owned(), "node-02".to_owned()])
        );
        assert_eq!(
            ok.run.phase_steps,
            vec![PhaseStep {
                after: Phase::Onboarding,
                wait_ms: 5,
                step: Step::StartRollout { revision: "2944aebb".into() }
            }]
        );
        assert!(ok.run.steps.is_empty());
        let mismatch = err(&format!("{MINIMAL}\n[onboarding]\nnodes = 3\nfleet = true\n"));
        assert!(
            mismatch.contains("onboarding.nodes: with fleet = true") && mismatch.contains("fleet.nodes (2), not 3"),
            "{mismatch}"
        );
        let step = |trigger: &str| format!("{MINIMAL}{site}\n[[step]]\n{trigger}\nkind = \"route_swap\"\n");
        let unknown = err(&step("after = \"lunch\""));
        assert!(unknown.contains("step[0].after: \"lunch\" is not a phase (one of onboarding, rollout)"), "{unknown}");
        let both = err(&step("after = \"rollout\"\nat_ms = 5"));
        assert!(both.contains("after (with wait_ms) is a trigger of its own"), "{both}");
        let stray = err(&step("at_ms = 5\nwait_ms = 5"));
        assert!(stray.contains("step[0].wait_ms: goes with after"), "{stray}");
        let no_site = err(&format!("{MINIMAL}\n[[step]]\nafter = \"onboarding\"\nkind = \"route_swap\"\n"));
        assert!(no_site.contains("\"onboarding\" needs an [onboarding] table"), "{no_site}");
        // An agent_enrol_delay keeps its own delay_ms under an after trigger.
        let delayed = parse_scenario(
            "s.toml",
            &step("after = \"onboarding\"\nwait_ms = 7")
                .replace("kind = \"route_swap\"", "kind = \"agent_enrol_delay\"\ntarget = \"node-01\"\ndelay_ms = 9"),
        )
        .unwrap();
        assert_eq!(delayed.run.phase_steps[0].step, Step::AgentEnrolDelay { target: "node-01".into(), delay_ms: 9 });
        // A one-life rollout expectation may count fewer nodes than the fleet (the rollout selects the enrolled).
        assert!(
            parse_scenario("s.toml", &format!("{MINIMAL}{site}\n[expect.rollout]\nnodes = {{ upgraded = 1 }}\n"))
                .is_ok()
        );
    }

    #[test]
    fn a_rollout_expectation_names_known_outcomes_counts_the_fleet_and_its_nodes() {
        let ok = parse_scenario(
            "s.toml",
            &format!("{MINIMAL}\n[expect.rollout]\noutcome = \"partial\"\nlanes = [\"successor\"]\nnodes = {{ upgraded = 1, quarantined = 1 }}\nnode = {{ \"node-02\" = \"quarantined\" }}\n"),
        )
        .unwrap();
        let rollout = ok.run.expect.rollout.unwrap();
        assert_eq!(rollout.outcome.as_deref(), Some("partial"));
        assert_eq!(rollout.node["node-02"], "quarantined");
        let cases = [
            (
                "outcome = \"converged\"",
                "s.toml:11:11: expect.rollout.outcome: \"converged\" is not one of successor, partial, refused, failed",
            ),
            (
                "lanes = [\"done\"]",
                "s.toml:11:10: expect.rollout.lanes: \"done\" is not one of successor, prior, stuck, uncommitted",
            ),
            (
                "nodes = { gone = 2 }",
                "s.toml:11:11: expect.rollout.nodes: \"gone\" is not one of upgraded, prior, quarantined, held, stuck",
            ),
            ("nodes = { upgraded = 1 }", "expect.rollout.nodes: the counts add up to 1 nodes, the fleet has 2"),
            (
                "node = { \"node-09\" = \"upgraded\" }",
                "s.toml:11:10: expect.rollout.node: \"node-09\" is not a node of this fleet (node-01 … node-02)",
            ),
            ("colour = \"red\"", "unknown field `colour`"),
        ];
        for (line, message) in cases {
            let found = err(&format!("{MINIMAL}\n[expect.rollout]\n{line}\n"));
            assert!(found.contains(message), "{line}: {found}");
        }
    }

    #[test]
    fn a_minimal_scenario_gets_the_documented_defaults() {
        let scenario = parse_scenario("s.toml", MINIMAL).unwrap();
        assert_eq!(scenario.seed, 3);
        assert_eq!(scenario.run.engine.hub_expiry, ExpiryPolicy::EpochAware);
        assert_eq!(scenario.run.hub.agent_ttl_ms, 3_600_000);
        assert_eq!(scenario.run.fleet.node_names(), ["node-01", "node-02"]);
        assert_eq!(scenario.run.liveness_budget_ms, DEFAULT_LIVENESS_BUDGET_MS);
    }

    #[test]
    fn an_operator_step_names_its_workflow_and_needs_a_reason() {
        let site = format!("{MINIMAL}\n[onboarding]\nnodes = 1\n");
        let step = |fields: &str| {
            format!("{site}\n[[step]]\nat_ms = 1000\nkind = \"operator\"\ntarget = \"node-03\"\n{fields}\n")
        };
        let scenario =
            parse_scenario("s.toml", &step("workflow = \"decommission\"\naction = \"cancel\"\nreason = \"r\""))
                .unwrap();
        assert_eq!(
            scenario.run.steps[0].step,
            Step::Operator {
                target: "node-03".into(),
                workflow: engine::matrix::Workflow::Decommission,
                action: engine::matrix::RecoveryAction::Cancel,
                actor: crate::model::faults::DEFAULT_OPERATOR_ACTOR.into(),
                role: engine::recovery::ActorRole::Operator,
                reason: "r".into(),
                resolves_freeze: false,
            }
        );
        let blank = err(&step("workflow = \"onboarding\"\naction = \"resume\"\nreason = \" \""));
        assert!(
            blank.contains("s.toml:") && blank.contains("step[0].reason: an operator action needs a reason"),
            "{blank}"
        );
        let missing = err(&step("workflow = \"onboarding\"\naction = \"resume\""));
        assert!(missing.contains("step[0]: missing field `reason`"), "{missing}");
        let action = err(&step("workflow = \"onboarding\"\naction = \"reboot\"\nreason = \"r\""));
        assert!(action.contains("step[0]: unknown variant `reboot`"), "{action}");
        let secret = err(&step("workflow = \"onboarding\"\naction = \"resume\"\nreason = \"fleetsim-secret-x\""));
        assert!(secret.contains("step[0].reason: the audit record"), "{secret}");
    }

    #[test]
    fn rollout_triggered_steps_are_validated_and_kept() {
        let rollout = "\n[[step]]\nat_ms = 0\nkind = \"start_rollout\"\nrevision = \"2944aebb\"\n";
        let text = |body: &str| format!("{MINIMAL}{rollout}\n[[step]]\n{body}\n");
        let ok = parse_scenario(
            "s.toml",
            &text("on_rollout = \"install\"\nnode = \"node-02\"\noccurrence = 2\nkind = \"ssh_timeout\"\ntarget = \"node-02\"\ncount = 1"),
        )
        .unwrap();
        assert_eq!(
            ok.run.rollout_steps,
            [RolloutStepTrigger {
                point: RolloutPoint::Step(engine::ports::events::NodeStep::Install),
                node: Some("node-02".into()),
                occurrence: 2,
                step: Step::SshTimeout { target: "node-02".into(), count: 1 },
            }]
        );
        let begin = parse_scenario("s.toml", &text("on_rollout = \"begin\"\nkind = \"stale_lock\"\nlease_ms = 60_000"))
            .unwrap();
        assert_eq!(begin.run.rollout_steps[0].point, RolloutPoint::Begin);
        let point = err(&text("on_rollout = \"polish\"\nkind = \"route_swap\""));
        assert!(
            point.contains("step[1].on_rollout: \"polish\" is not a point of the rollout (one of begin, hold"),
            "{point}"
        );
        let node = err(&text("on_rollout = \"hold\"\nnode = \"node-09\"\nkind = \"route_swap\""));
        assert!(node.contains("step[1].node: \"node-09\" is not a node of this fleet (node-01..node-02)"), "{node}");
        let begin_node = err(&text("on_rollout = \"begin\"\nnode = \"node-01\"\nkind = \"route_swap\""));
        assert!(begin_node.contains("step[1].node: on_rollout = \"begin\" is the controller's"), "{begin_node}");
        let both = err(&text("on_rollout = \"hold\"\nat_ms = 5\nkind = \"route_swap\""));
        assert!(both.contains("step[1]: on_rollout (with node and occurrence) is a trigger of its own"), "{both}");
        let driver = err(&text("on_rollout = \"hold\"\nkind = \"start_rollout\"\nrevision = \"c0ffee1\""));
        assert!(driver.contains("step[1]: a start_rollout step is a driver action; give it an at_ms"), "{driver}");
        let zero = err(&text("on_rollout = \"hold\"\noccurrence = 0\nkind = \"route_swap\""));
        assert!(zero.contains("step[1].occurrence: must be 1 or more, not 0"), "{zero}");
        let alone = err(&format!("{MINIMAL}\n[[step]]\non_rollout = \"hold\"\nkind = \"route_swap\"\n"));
        assert!(
            alone.contains("s.toml:10:1: step[0].on_rollout: the run starts no rollout (add a start_rollout step)"),
            "{alone}"
        );
        let ttl = err(&format!(
            "{MINIMAL}\n[[step]]\nat_ms = 0\nkind = \"ttl_expiry\"\ntarget = \"node-01\"\nsilent_ms = 0\n"
        ));
        assert!(ttl.contains("step[0].silent_ms: must be at least 1"), "{ttl}");
        // Written back, it reads as it was.
        let written = crate::model::spec::write::scenario_toml(&ok.run, ok.seed, &[]).unwrap();
        assert_eq!(parse_scenario("s.toml", &written).unwrap().run.rollout_steps, ok.run.rollout_steps);
    }

    #[test]
    fn node_names_pad_to_the_fleet_width() {
        assert_eq!(node_name(9, 3), "node-03");
        assert_eq!(node_name(1000, 7), "node-0007");
        let fleet = FleetSpec { nodes: 50, durable: BTreeSet::new(), lane_size: 8, availability_floor: 0 };
        assert_eq!(fleet.node_index("node-50"), Some(50));
        assert_eq!(fleet.node_index("node-5"), None);
        assert_eq!(fleet.node_index("node-51"), None);
    }

    #[test]
    fn stage_triggered_steps_and_matrix_pairs_are_validated_with_their_position() {
        let site = format!("{MINIMAL}\n[onboarding]\nnodes = 1\n");
        let step = |body: &str| err(&format!("{site}\n[[step]]\n{body}\nkind = \"site_disabled\"\n"));
        let both = step("at_ms = 5\non_stage = \"commission_node\"\nworkflow = \"node-03\"");
        assert!(both.starts_with("s.toml:13:1: step[0]: give at_ms or on_stage, not both"), "{both}");
        let stage = step("on_stage = \"polish_node\"\nworkflow = \"node-03\"");
        assert!(stage.contains("step[0].on_stage: \"polish_node\" is not a stage of the recovery matrix"), "{stage}");
        assert!(stage.contains("decommission:load_site_config"), "the decommission stages are named: {stage}");
        let machine = step("on_stage = \"commission_node\"\nworkflow = \"node-09\"");
        assert!(
            machine.contains("step[0].workflow: \"node-09\" is not a machine of the MAAS site (node-03)"),
            "{machine}"
        );
        let missing = step("on_stage = \"commission_node\"");
        assert!(missing.contains("step[0]: on_stage needs workflow = \"<machine>\""), "{missing}");
        let zero = step("on_stage = \"commission_node\"\nworkflow = \"node-03\"\noccurrence = 0");
        assert!(zero.contains("step[0].occurrence: must be 1 or more, not 0"), "{zero}");
        let stray = step("at_ms = 5\nworkflow = \"node-03\"");
        assert!(stray.contains("workflow and occurrence go with on_stage"), "{stray}");
        let no_site = err(&format!(
            "{MINIMAL}\n[[step]]\non_stage = \"commission_node\"\nworkflow = \"node-03\"\nkind = \"crash\"\ntarget = \"hub\"\n"
        ));
        assert!(no_site.contains("step[0].on_stage: needs an [onboarding] table"), "{no_site}");
        let pair = err(&format!("{site}\n[expect]\nmatrix_pairs = [\"commission_node/hardware_mismatch\"]\n"));
        assert!(pair.starts_with("s.toml:14:"), "{pair}");
        assert!(
            pair.contains("\"commission_node/hardware_mismatch\" is not a pair the recovery matrix lists or implies"),
            "{pair}"
        );
        let ok = parse_scenario(
            "s.toml",
            &format!("{site}\n[[step]]\non_stage = \"commission_node\"\nworkflow = \"node-03\"\noccurrence = 2\nkind = \"site_disabled\"\n[expect]\nmatrix_pairs = [\"commission_node/state_ambiguity\"]\n"),
        )
        .unwrap();
        assert_eq!(ok.run.stage_steps.len(), 1);
        assert_eq!((ok.run.stage_steps[0].occurrence, ok.run.steps.len()), (2, 0));
        assert_eq!(ok.run.expect.matrix_pairs, vec!["commission_node/state_ambiguity".to_owned()]);
    }

    #[test]
    fn errors_name_file_line_column_and_key() {
        let unknown_key = err(&format!("{MINIMAL}colour = 1\n"));
        assert!(
            unknown_key
                .starts_with("s.toml:9:1: fleet.colour: unknown field `colour`, expected one of `nodes`, `durable`"),
            "{unknown_key}"
        );
        let syntax = err("schema_version = = 1");
        assert!(syntax.starts_with("s.toml:1:"), "{syntax}");
        let step = format!("{MINIMAL}\n[[step]]\nat_ms = 5\nkind = \"partition\"\na = \"node-01\"\nb = \"node-99\"\n");
        let unknown_host = err(&step);
        assert!(unknown_host.starts_with("s.toml:10:1: step[0].b: unknown host \"node-99\""), "{unknown_host}");
        let bad_kind = err(&format!("{MINIMAL}\n[[step]]\nat_ms = 5\nkind = \"meteor\"\n"));
        assert!(bad_kind.contains("step[0]: unknown variant `meteor`"), "{bad_kind}");
        let bad_oracle = err(&format!("{MINIMAL}\n[expect]\nmust_hold = [\"nothing_bad\"]\n"));
        assert!(
            bad_oracle.starts_with("s.toml:11:14: expect.must_hold: unknown oracle \"nothing_bad\""),
            "{bad_oracle}"
        );
        let version = err(&MINIMAL.replace("schema_version = 1", "schema_version = 2"));
        assert!(version.starts_with("s.toml:2:18: schema_version: this fleetsim reads version 1"), "{version}");
    }

    #[test]
    fn duplicate_keys_type_errors_and_bad_bytes_name_their_key() {
        let duplicate = err(&MINIMAL.replace("[fleet]\n", "[fleet]\nnodes = 2\n"));
        assert!(duplicate.contains(": fleet.nodes: duplicate key"), "{duplicate}");
        let typed = err(&MINIMAL.replace("nodes = 2", "nodes = \"three\""));
        assert!(typed.contains(": fleet.nodes: invalid type: string \"three\""), "{typed}");
        let table = err(&format!("{MINIMAL}[hub]\nagent_ttl_ms = {{ a = 1 }}\n"));
        assert!(table.contains(": hub.agent_ttl_ms: invalid type"), "{table}");
        let mut bytes = MINIMAL.replace("description = \"", "description = \"\u{1}").into_bytes();
        let at = bytes.iter().position(|byte| *byte == 1).unwrap();
        bytes[at] = 0xff;
        let error = text_of("s.toml", bytes).unwrap_err().to_string();
        assert!(error.starts_with("s.toml:3:16: description: not UTF-8 text: byte 0xff"), "{error}");
    }

    #[test]
    fn echoed_input_is_escaped_and_credentials_are_withheld() {
        let step = format!("{MINIMAL}\n[[step]]\nat_ms = 5\nkind = \"crash\"\ntarget = \"\\u001b[2Jnode\"\n");
        let error = err(&step);
        assert!(!error.contains('\u{1b}') && error.contains("\\u{1b}[2Jnode"), "{error}");
        let leaked =
            err(&format!("{MINIMAL}\n[[step]]\nat_ms = 5\nkind = \"crash\"\ntarget = \"fleetsim-secret-abc\"\n"));
        assert!(!leaked.contains("fleetsim-secret-abc") && leaked.contains(WITHHELD), "{leaked}");
        let fix = sanitize("maas.api_key_file: mode 0644 lets others read the credential; run `chmod 600 /s/key`");
        assert!(fix.ends_with("run `chmod 600 /s/key`"), "a credential file's path and its fix are echoed: {fix}");
        assert_eq!(
            sanitize("maas.api_key: \"k:t:s\" is not a key"),
            format!("maas.api_key: \"{WITHHELD}\" is not a key")
        );
        assert_eq!(sanitize("fleet.nodes: `3` is odd"), "fleet.nodes: `3` is odd");
    }

    #[test]
    fn every_count_and_duration_has_a_bound_named_with_its_key() {
        let huge = err(&MINIMAL.replace("duration_ms_max = ", "duration_ms_max = 9223372036854775807 #"));
        assert!(
            huge.ends_with(
                "duration_ms_max: 9223372036854775807 is more than 86400000, the longest a run may last (24 h)"
            ),
            "{huge}"
        );
        let step = err(&format!(
            "{MINIMAL}\n[[step]]\nat_ms = 5\nkind = \"ssh_timeout\"\ntarget = \"node-01\"\ncount = 4000000000\n"
        ));
        assert!(step.contains(": step[0].count: 4000000000 is more than 1000000, the most a count may be"), "{step}");
        let at = err(&format!("{MINIMAL}\n[[step]]\nat_ms = 604800001\nkind = \"crash\"\ntarget = \"hub\"\n"));
        assert!(at.contains(": step[0].at_ms: 604800001 is more than 604800000"), "{at}");
        let skew = err(&format!(
            "{MINIMAL}\n[[step]]\nat_ms = 5\nkind = \"clock_skew\"\ntarget = \"hub\"\nskew_ms = -9000000000\n"
        ));
        assert!(skew.contains(": step[0].skew_ms: -9000000000 is less than -604800000"), "{skew}");
    }

    #[test]
    fn a_fault_too_late_for_the_liveness_budget_is_refused() {
        let late = format!("{MINIMAL}\n[[step]]\nat_ms = 900_000\nkind = \"crash\"\ntarget = \"hub\"\n");
        assert!(err(&late).contains("must last at least 1500000 ms"), "{}", err(&late));
    }

    #[test]
    fn rollout_steps_are_validated() {
        let step = |body: &str| err(&format!("{MINIMAL}\n[[step]]\nat_ms = 5\n{body}\n"));
        assert!(
            step("kind = \"marker_drift\"\ntarget = \"hub\"\nshape = \"env_absent\"")
                .contains("step[0].target: \"hub\" is not a worker node")
        );
        assert!(
            step("kind = \"storage_fault\"\ntarget = \"controller\"\nstorage = \"full\"")
                .contains("is not a worker node")
        );
        assert!(
            step("kind = \"ssh_timeout\"\ntarget = \"node-01\"\ncount = 0")
                .contains("step[0].count: must be at least 1")
        );
        assert!(step("kind = \"ssh_timeout\"\ntarget = \"controller\"\ncount = 1").contains("runs no SSH endpoint"));
        assert!(step("kind = \"start_rollout\"\nrevision = \"7f3bbd12\"").contains("must name a new revision"));
        assert!(
            step("kind = \"marker_drift\"\ntarget = \"node-01\"\nshape = \"melted\"")
                .contains("unknown variant `melted`")
        );
        let old = |shape: &str, revision: &str| {
            step(&format!("kind = \"old_journal\"\nshape = \"{shape}\"\nrevision = \"{revision}\""))
        };
        assert!(
            old("armed", "7f3bbd12").contains("step[0].revision: must name a new revision"),
            "{}",
            old("armed", "")
        );
        let spaced = old("armed", "2944 aebb");
        assert!(spaced.contains("step[0].revision: letters and digits only"), "{spaced}");
        assert!(old("half_written", "2944aebb").contains("unknown variant `half_written`"));
        let fine = format!(
            "{MINIMAL}\n[[step]]\nat_ms = 0\nkind = \"old_journal\"\nshape = \"conflicting_plans\"\nrevision = \"2944aebb\"\n"
        );
        let steps = parse_scenario("s.toml", &fine).unwrap().run.steps;
        let expected = Step::OldJournal { shape: OldJournal::ConflictingPlans, revision: "2944aebb".into() };
        assert_eq!(steps[0].step, expected);
    }

    #[test]
    fn a_rotation_names_a_node_whose_agent_it_rotates_and_is_a_driver_action() {
        let step = |body: &str| err(&format!("{MINIMAL}\n[[step]]\nat_ms = 5\n{body}\n"));
        assert!(
            step("kind = \"rotate_credential\"\ntarget = \"hub\"")
                .contains("step[0].target: \"hub\" runs no agent (only nodes do)")
        );
        assert!(step("kind = \"rotate_credential\"\ntarget = \"node-99\"").contains("step[0].target"));
        assert!(step("kind = \"rotate_credential\"").contains("missing field `target`"));
        let text = format!("{MINIMAL}\n[[step]]\nat_ms = 5\nkind = \"rotate_credential\"\ntarget = \"node-01\"\n");
        let scenario = parse_scenario("s.toml", &text).unwrap();
        assert_eq!(scenario.run.steps[0].step, Step::RotateCredential { target: "node-01".into() });
        assert!(is_driver_action(&scenario.run.steps[0].step), "exempt from the liveness rule");
    }

    #[test]
    fn a_seed_above_the_largest_toml_integer_is_a_string_of_digits() {
        let big = MINIMAL.replace("seed = 3", "seed = \"18446744073709551615\"");
        assert_eq!(parse_scenario("s.toml", &big).unwrap().seed, u64::MAX);
        assert!(err(&MINIMAL.replace("seed = 3", "seed = \"x1\"")).contains("seed: \"x1\" is not a whole number"));
        assert!(err(&MINIMAL.replace("seed = 3", "seed = -1")).contains("seed: must be 0 or more"));
    }

    #[test]
    fn a_slow_commissioning_needs_an_interval_inside_the_node_timeout() {
        let site = format!("{MINIMAL}\n[onboarding]\nnodes = 1\n");
        let step = |interval: &str| {
            format!("{site}\n[[step]]\nat_ms = 0\nkind = \"commissioning_slow\"\ntarget = \"node-03\"\n{interval}\n")
        };
        let scenario = parse_scenario("s.toml", &step("event_interval_ms = 120_000")).unwrap();
        assert_eq!(
            scenario.run.steps[0].step,
            Step::CommissioningSlow { target: "node-03".into(), event_interval_ms: 120_000 }
        );
        let zero = err(&step("event_interval_ms = 0"));
        assert!(zero.starts_with("s.toml:13:1: step[0].event_interval_ms: must be at least 1"), "{zero}");
        let long = err(&step("event_interval_ms = 1_800_000"));
        assert!(
            long.contains(
                "step[0].event_interval_ms: 1800000 must be less than 1800000, MAAS's 30-minute node_timeout"
            ),
            "{long}"
        );
        let missing = err(&step(""));
        assert!(missing.contains("step[0]: missing field `event_interval_ms`"), "{missing}");
    }

    #[test]
    fn a_sometimes_property_cannot_be_required_to_hold() {
        let text = format!("{MINIMAL}\n[expect]\nmust_hold = [\"agent_tombstoned\"]\n");
        assert!(err(&text).contains("is a sometimes-property"));
    }
}
