//! The release gate: a policy file (`campaigns/release-gate.toml`, documented in `docs/formats.md`) and the pure
//! decision [`decide`] over a campaign report, that policy and the evidence the command line gathered (the campaign
//! file's configuration hash, the replay of every run — or of a sample drawn at gate time from the operating
//! system's random source — and the checked-out commit). `fleetsim gate` does the I/O; everything judged here is a
//! plain function, so each threshold has a unit test.
//!
//! The gate trusts nothing it did not compute (`docs/trust.md`): a report's digests are plain SHA-256 over its own
//! content, so whoever can edit a report can make any edit agree with itself; only a replay can tell. So by default
//! the gate replays every run from the campaign file and the run's seed with this build and compares whole records.
//! A sample, where a policy or `--recheck N` asks for one, is drawn from a source the report's author cannot predict
//! or steer, and the gate prints the chance that forged runs escape it.

use std::collections::BTreeMap;
use std::path::Path;

use reports::CampaignReport;
use reports::render::{LANE_ORACLE, Rollouts};
use serde::Deserialize;
use toml::Spanned;

use crate::model::spec::{self, Source, SpecError};

/// The most items (runs, pairs) one unmet line names before `and N more`.
const LISTED: usize = 10;

/// A resolved gate policy. Every threshold is optional: one the file does not set is not checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    pub source: String,
    pub description: String,
    /// `[runs] min`: the report holds at least this many runs.
    pub runs_min: Option<u64>,
    /// `[runs] pass_per_mille_min`: passed runs × 1000 ≥ this × runs.
    pub pass_per_mille_min: Option<u32>,
    /// `[runs] sometimes_all_reached`: every sometimes-property the campaign names was reached by some run.
    pub sometimes_all_reached: bool,
    /// `[lanes] converged_per_mille_min`: of the runs that started a rollout, the share without an
    /// `every_lane_converged` violation.
    pub lanes_converged_per_mille_min: Option<u32>,
    /// `[nodes] upgraded_per_mille_min`: of the selected nodes of every rollout account in the report, the share
    /// upgraded (RCCA all-selected acceptance: a quarantined, prior, held or stuck node counts against it).
    pub nodes_upgraded_per_mille_min: Option<u32>,
    /// `[violations] max`: the most violations, over all runs, of each named oracle.
    pub violations_max: BTreeMap<String, u64>,
    /// `[violations] others_max`: the most violations of any oracle `max` does not name.
    pub violations_others_max: Option<u64>,
    /// `[faults] min`: each step kind *effective* at least this many times over all runs (it landed and something
    /// changed course because of it: the runs' `fault_log`).
    pub faults_min: BTreeMap<String, u64>,
    /// `[faults] injected_min`: each step kind injected at least this many times over all runs.
    pub faults_injected_min: BTreeMap<String, u64>,
    /// `[faults] aimed`: for each step kind, the coarse phase its injections must land in and the least share of
    /// them (per mille) that must.
    pub faults_aimed: BTreeMap<String, Aim>,
    /// `[matrix] required`: recovery-matrix pairs (`stage/failure_class`) each hit at least once.
    pub matrix_required: Vec<String>,
    /// `[matrix] listed`: pairs of which at least `listed_per_mille_min` per mille must be hit.
    pub matrix_listed: Vec<String>,
    pub matrix_listed_per_mille_min: Option<u32>,
    /// `[determinism] recheck`: replay every run (the default) or a sample of them.
    pub recheck: Recheck,
    /// `[commit] matches_head`: the report was written by the checked-out commit.
    pub commit_matches_head: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    schema_version: Spanned<u32>,
    kind: Spanned<String>,
    description: String,
    #[serde(default)]
    runs: RunsFile,
    lanes: Option<LanesFile>,
    nodes: Option<NodesFile>,
    #[serde(default)]
    violations: ViolationsFile,
    #[serde(default)]
    faults: FaultsFile,
    #[serde(default)]
    matrix: MatrixFile,
    determinism: Option<DeterminismFile>,
    commit: Option<CommitFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsFile {
    min: Option<Spanned<u64>>,
    pass_per_mille_min: Option<Spanned<u32>>,
    #[serde(default)]
    sometimes_all_reached: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LanesFile {
    converged_per_mille_min: Spanned<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodesFile {
    upgraded_per_mille_min: Spanned<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ViolationsFile {
    max: Option<Spanned<BTreeMap<String, u64>>>,
    others_max: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultsFile {
    min: Option<Spanned<BTreeMap<String, u64>>>,
    injected_min: Option<Spanned<BTreeMap<String, u64>>>,
    aimed: Option<Spanned<BTreeMap<String, Aim>>>,
}

/// Where a fault kind's injections must land: `phase` (one of `reports::FAULT_PHASES`) for at least `per_mille_min`
/// of them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aim {
    pub phase: String,
    pub per_mille_min: u32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatrixFile {
    #[serde(default)]
    required: Vec<Spanned<String>>,
    #[serde(default)]
    listed: Vec<Spanned<String>>,
    listed_per_mille_min: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeterminismFile {
    recheck: Option<Spanned<RecheckFile>>,
    /// The key of the hash-drawn sample this format had before `recheck`; refused with what to write instead.
    recheck_runs: Option<Spanned<toml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RecheckFile {
    Word(String),
    Sample(SampleFile),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SampleFile {
    sample: u64,
}

/// Which runs the gate replays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Recheck {
    /// Every run of the report (`recheck = "all"`, the default).
    #[default]
    All,
    /// This many runs, drawn at gate time from the operating system's random source (`recheck = { sample = N }`).
    Sample(u64),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitFile {
    matches_head: bool,
}

/// The `kind` of a gate policy file, which tells it from scenarios and campaigns.
pub const POLICY_KIND: &str = "gate_policy";

/// The most runs a policy's sample may name (each is a full run; more is `recheck = "all"`).
pub const RECHECK_SAMPLE_MAX: u64 = reports::RUNS_MAX;

pub fn load_policy(path: &Path) -> Result<Policy, SpecError> {
    let text = spec::read(path)?;
    parse_policy(&path.display().to_string(), &text)
}

/// Parses and validates a gate policy; errors name the file, line, column and key like the other parsers.
pub fn parse_policy(path: &str, text: &str) -> Result<Policy, SpecError> {
    let source = Source { path, text };
    let file: PolicyFile = source.parse()?;
    spec::check_schema_version(&source, &file.schema_version)?;
    if file.kind.get_ref() != POLICY_KIND {
        return Err(source.error_at(
            Some(file.kind.span()),
            format!("kind: a gate policy has kind = \"{POLICY_KIND}\", not \"{}\"", file.kind.get_ref()),
        ));
    }
    let per_mille = |key: &str, value: &Option<Spanned<u32>>| -> Result<Option<u32>, SpecError> {
        match value {
            Some(value) if *value.get_ref() > 1000 => Err(source.error_at(
                Some(value.span()),
                format!("{key}: a per-mille share is 0 to 1000, not {}", value.get_ref()),
            )),
            Some(value) => Ok(Some(*value.get_ref())),
            None => Ok(None),
        }
    };
    let mut policy = Policy {
        source: path.to_owned(),
        description: file.description,
        runs_min: file.runs.min.as_ref().map(|min| *min.get_ref()),
        pass_per_mille_min: per_mille("runs.pass_per_mille_min", &file.runs.pass_per_mille_min)?,
        sometimes_all_reached: file.runs.sometimes_all_reached,
        lanes_converged_per_mille_min: per_mille(
            "lanes.converged_per_mille_min",
            &file.lanes.map(|lanes| lanes.converged_per_mille_min),
        )?,
        nodes_upgraded_per_mille_min: per_mille(
            "nodes.upgraded_per_mille_min",
            &file.nodes.map(|nodes| nodes.upgraded_per_mille_min),
        )?,
        violations_others_max: file.violations.others_max,
        commit_matches_head: file.commit.is_some_and(|commit| commit.matches_head),
        ..Policy::default()
    };
    if let Some(max) = &file.violations.max {
        for (name, count) in max.get_ref() {
            match crate::model::oracles::info(name) {
                None => {
                    let known: Vec<&str> = crate::model::oracles::CATALOG
                        .iter()
                        .filter(|info| info.property != reports::PropertyKind::Sometimes)
                        .map(|info| info.name)
                        .collect();
                    return Err(source.error_at(
                        Some(max.span()),
                        format!("violations.max.{name}: unknown oracle (known: {})", known.join(", ")),
                    ));
                }
                Some(info) if info.property == reports::PropertyKind::Sometimes => {
                    return Err(source.error_at(
                        Some(max.span()),
                        format!(
                            "violations.max.{name}: a sometimes-property has no violations; require it with [runs] sometimes_all_reached"
                        ),
                    ));
                }
                Some(_) => {
                    policy.violations_max.insert(name.clone(), *count);
                }
            }
        }
    }
    let known_kind = |key: &str, span: std::ops::Range<usize>, kind: &str| {
        let kinds = crate::model::faults::StepKind::ALL.iter().map(|kind| kind.name());
        if kinds.clone().any(|known| known == kind) {
            Ok(())
        } else {
            let known = kinds.collect::<Vec<_>>().join(", ");
            Err(source.error_at(Some(span), format!("faults.{key}.{kind}: unknown step kind (known: {known})")))
        }
    };
    for (key, file_min, out) in [
        ("min", &file.faults.min, &mut policy.faults_min),
        ("injected_min", &file.faults.injected_min, &mut policy.faults_injected_min),
    ] {
        if let Some(min) = file_min {
            for (kind, count) in min.get_ref() {
                known_kind(key, min.span(), kind)?;
                out.insert(kind.clone(), *count);
            }
        }
    }
    if let Some(aimed) = &file.faults.aimed {
        for (kind, aim) in aimed.get_ref() {
            known_kind("aimed", aimed.span(), kind)?;
            if !reports::FAULT_PHASES.contains(&aim.phase.as_str()) {
                return Err(source.error_at(
                    Some(aimed.span()),
                    format!(
                        "faults.aimed.{kind}.phase: \"{}\" is not a phase (one of {})",
                        aim.phase,
                        reports::FAULT_PHASES.join(", ")
                    ),
                ));
            }
            if aim.per_mille_min > 1000 {
                return Err(source.error_at(
                    Some(aimed.span()),
                    format!("faults.aimed.{kind}.per_mille_min: {} is more than 1000", aim.per_mille_min),
                ));
            }
            policy.faults_aimed.insert(kind.clone(), aim.clone());
        }
    }
    for (key, pairs, out) in [
        ("matrix.required", &file.matrix.required, &mut policy.matrix_required),
        ("matrix.listed", &file.matrix.listed, &mut policy.matrix_listed),
    ] {
        for pair in pairs {
            check_matrix_pair(pair.get_ref()).map_err(|reason| {
                source.error_at(Some(pair.span()), format!("{key}: \"{}\" {reason}", pair.get_ref()))
            })?;
            out.push(pair.get_ref().clone());
        }
    }
    policy.matrix_listed_per_mille_min = per_mille("matrix.listed_per_mille_min", &file.matrix.listed_per_mille_min)?;
    match (&file.matrix.listed_per_mille_min, policy.matrix_listed.is_empty()) {
        (Some(min), true) => {
            return Err(
                source.error_at(Some(min.span()), "matrix.listed_per_mille_min: needs a non-empty matrix.listed")
            );
        }
        (None, false) => {
            let span = file.matrix.listed.first().map(Spanned::span);
            return Err(source.error_at(span, "matrix.listed: needs matrix.listed_per_mille_min, the share to hit"));
        }
        _ => {}
    }
    if let Some(determinism) = &file.determinism {
        if let Some(old) = &determinism.recheck_runs {
            return Err(source.error_at(
                Some(old.span()),
                "determinism.recheck_runs: replaced by `recheck`: the gate replays every run by default \
                 (`recheck = \"all\"`); `recheck = { sample = N }` replays N drawn at gate time",
            ));
        }
        if let Some(recheck) = &determinism.recheck {
            policy.recheck = match recheck.get_ref() {
                RecheckFile::Word(word) if word == "all" => Recheck::All,
                RecheckFile::Word(word) => {
                    return Err(source.error_at(
                        Some(recheck.span()),
                        format!("determinism.recheck: \"{word}\" is neither \"all\" nor {{ sample = N }}"),
                    ));
                }
                RecheckFile::Sample(SampleFile { sample }) if *sample == 0 || *sample > RECHECK_SAMPLE_MAX => {
                    return Err(source.error_at(
                        Some(recheck.span()),
                        format!("determinism.recheck.sample: 1 to {RECHECK_SAMPLE_MAX} runs, not {sample}"),
                    ));
                }
                RecheckFile::Sample(SampleFile { sample }) => Recheck::Sample(*sample),
            };
        }
    }
    Ok(policy)
}

/// A recovery-matrix pair is `stage/failure_class`, both names of `engine::matrix`.
fn check_matrix_pair(pair: &str) -> Result<(), String> {
    use engine::matrix::{DecommissionStage, FailureClass, OnboardingStage};
    let Some((stage, class)) = pair.split_once('/') else {
        return Err("is not a `stage/failure_class` pair".to_owned());
    };
    // Reports name a decommission pair `decommission:stage/class` (the workflows share `load_site_config`).
    match stage.strip_prefix(crate::model::pairs::DECOMMISSION_PAIR_PREFIX) {
        Some(stage) if !DecommissionStage::ALL.iter().any(|known| known.as_str() == stage) => {
            return Err(format!("names no decommission stage of the recovery matrix: `{stage}`"));
        }
        Some(_) => {}
        None if OnboardingStage::ALL.iter().any(|known| known.as_str() == stage) => {}
        None if DecommissionStage::ALL.iter().any(|known| known.as_str() == stage) => {
            return Err(format!(
                "names the decommission stage `{stage}` without its prefix: write `decommission:{stage}/{class}`"
            ));
        }
        None => return Err(format!("names no stage of the recovery matrix: `{stage}`")),
    }
    let classes: Vec<&str> = FailureClass::ALL.iter().map(|class| class.as_str()).collect();
    if !classes.contains(&class) {
        return Err(format!("names no failure class: `{class}` (known: {})", classes.join(", ")));
    }
    Ok(())
}

/// One run replayed for the determinism re-check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    pub run_index: u64,
    pub seed: u64,
    /// The digest in the report.
    pub reported: String,
    /// The digest of the replay.
    pub replayed: String,
    /// The record's fields the replay disagrees on ([`record_differences`]); empty when it is the report's record.
    pub differences: Vec<String>,
}

/// The fields of a run record in which `replayed` differs from `reported`, in the record's order: everything a run
/// record says (verdict, digest, faults, violations, reached properties, lanes, workflows, …) except `commit` and
/// `tool_version`, which name the build and not the run (`commit.matches_head` judges those).
pub fn record_differences(reported: &reports::RunRecord, replayed: &reports::RunRecord) -> Vec<String> {
    let (serde_json::Value::Object(reported), serde_json::Value::Object(replayed)) = (
        serde_json::to_value(reported).expect("records serialise"),
        serde_json::to_value(replayed).expect("records serialise"),
    ) else {
        unreachable!("a run record serialises to an object");
    };
    let mut keys: Vec<&String> = replayed.keys().collect();
    keys.extend(reported.keys().filter(|key| !replayed.contains_key(*key)));
    keys.into_iter()
        .filter(|key| !matches!(key.as_str(), "commit" | "tool_version"))
        .filter(|key| reported.get(*key) != replayed.get(*key))
        .cloned()
        .collect()
}

/// What the command line found out that the report cannot say about itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Evidence {
    /// The configuration hash of the report's campaign file, resolved with the report's seed and runs.
    pub campaign_config_hash: String,
    /// Runs whose seed or configuration differ from what the campaign file gives for their index, one line each.
    pub run_mismatches: Vec<String>,
    /// The runs replayed (empty when none were, e.g. because the configuration does not match).
    pub rechecks: Vec<Replayed>,
    /// `git rev-parse HEAD`, or why it could not be read; `None` when the policy does not ask.
    pub head: Option<Result<String, String>>,
    /// The report's signature checked against a trusted key (`--trusted-key`): the key's id, or why it does not
    /// hold; `None` when no key was given.
    pub signature: Option<Result<String, String>>,
    /// No run was replayed because the report is signed by a trusted key and no `--recheck` asked for replays.
    pub replays_waived: bool,
}

/// A threshold the report does not meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmet {
    /// The policy key or the check, e.g. `runs.min`, `faults.min.controller_death`, `config_hash`.
    pub threshold: String,
    pub reason: String,
}

/// The gate's verdict: how many checks ran, and every one that failed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    pub checks: usize,
    pub unmet: Vec<Unmet>,
}

impl Decision {
    pub fn passed(&self) -> bool {
        self.unmet.is_empty()
    }

    fn check(&mut self, threshold: impl Into<String>, met: bool, reason: impl FnOnce() -> String) {
        self.checks += 1;
        if !met {
            self.unmet.push(Unmet { threshold: threshold.into(), reason: reason() });
        }
    }
}

fn listed<T: std::fmt::Display>(items: &[T]) -> String {
    let mut text: Vec<String> = items.iter().take(LISTED).map(ToString::to_string).collect();
    if items.len() > LISTED {
        text.push(format!("and {} more", items.len() - LISTED));
    }
    text.join(", ")
}

/// The runs of `report` that are not what `campaign` (resolved with the report's seed and runs) gives: a run without
/// an index, past the campaign's runs or held twice, a seed or configuration other than the campaign's plan for that
/// index, and (for a whole report) indices no run holds. One line each; empty when every run is the campaign's.
pub fn run_mismatches(report: &CampaignReport, campaign: &crate::model::campaign::Campaign) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for run in &report.runs {
        let Some(index) = run.run_index else {
            problems.push(format!("a run without run_index (seed {})", run.seed));
            continue;
        };
        if index >= campaign.runs {
            problems.push(format!("run {index} is past the campaign's {} runs", campaign.runs));
            continue;
        }
        if !seen.insert(index) {
            problems.push(format!("run {index} appears twice"));
        }
        let seed = campaign.run_seed(index);
        if run.seed != seed {
            problems.push(format!("run {index} has seed {}, the campaign gives it {seed}", run.seed));
        } else if run.config_hash != campaign.run_spec(index).config_hash() {
            problems.push(format!("run {index}'s configuration is not the campaign's plan for it"));
        }
    }
    let sometimes: Vec<&String> = report.summary.sometimes_reached.keys().collect();
    let named: std::collections::BTreeSet<&String> = campaign.oracles.sometimes.iter().collect();
    if sometimes != named.into_iter().collect::<Vec<_>>() {
        problems.push(format!(
            "the summary judges the sometimes-properties [{}], the campaign names [{}]",
            listed(&sometimes),
            listed(&campaign.oracles.sometimes)
        ));
    }
    if report.summary.matrix_listed != crate::run::campaign::matrix_listed(campaign) {
        problems.push("the summary's listed matrix pairs are not the campaign's".to_owned());
    }
    if report.shard.is_none() {
        let missing: Vec<u64> = (0..campaign.runs).filter(|index| !seen.contains(index)).collect();
        if !missing.is_empty() {
            problems.push(format!("runs missing: {}", listed(&missing)));
        }
    }
    problems
}

/// Which runs the determinism re-check replays: every run's index for [`Recheck::All`]; for [`Recheck::Sample`], `n`
/// distinct run indices of the report drawn with a ChaCha8 generator from `seed`, in index order. The command line
/// draws `seed` from the operating system's random source at gate time (`cli::gate`), never from the report, so
/// whoever wrote the report cannot know or steer which runs are replayed.
pub fn recheck_sample(report: &CampaignReport, recheck: Recheck, seed: u64) -> Vec<u64> {
    let held: Vec<u64> = report.runs.iter().filter_map(|run| run.run_index).collect();
    match recheck {
        Recheck::All => held,
        Recheck::Sample(n) => sample_indices(&held, n, seed),
    }
}

/// `n` distinct indices of `held` (all of them when it holds fewer) drawn without replacement by a ChaCha8
/// generator from `seed`, in index order.
pub fn sample_indices(held: &[u64], n: u64, seed: u64) -> Vec<u64> {
    use rand::{Rng, SeedableRng};
    let mut positions: Vec<usize> = (0..held.len()).collect();
    let n = usize::try_from(n).unwrap_or(usize::MAX).min(positions.len());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    // A partial Fisher–Yates shuffle: the first n positions are a uniform draw without replacement.
    for i in 0..n.min(positions.len().saturating_sub(1)) {
        let j = rng.random_range(i..positions.len());
        positions.swap(i, j);
    }
    let mut indices: Vec<u64> = positions[..n].iter().map(|&position| held[position]).collect();
    indices.sort_unstable();
    indices.dedup();
    indices
}

/// The probability that a sample of `sample` runs drawn uniformly without replacement from `runs` misses all of
/// `forged` forged runs: C(runs − forged, sample) / C(runs, sample).
pub fn escape_probability(runs: u64, forged: u64, sample: u64) -> f64 {
    if forged == 0 {
        return 1.0;
    }
    if sample > runs.saturating_sub(forged) {
        return 0.0;
    }
    (0..sample).fold(1.0, |p, i| p * (runs - forged - i) as f64 / (runs - i) as f64)
}

/// The line a sampled gate prints: how the sample was drawn and the chance that forged runs escape it.
pub fn sample_line(runs: u64, sample: u64) -> String {
    let odds: Vec<String> = [1u64, 2, 5, 10]
        .into_iter()
        .filter(|forged| *forged <= runs)
        .map(|forged| format!("{forged}: {:.1} %", 100.0 * escape_probability(runs, forged, sample)))
        .collect();
    format!(
        "  sample: {} of {runs} runs replayed, drawn at gate time from the operating system's random source; a report with k forged runs passes unseen with probability C({runs}-k, {0})/C({runs}, {0}), for k = {}; `--recheck all` leaves none unseen\n",
        sample.min(runs),
        odds.join(", ")
    )
}

/// Judges `report` against `policy` with the gathered `evidence`. Every check runs; every unmet one is listed.
pub fn decide(report: &CampaignReport, policy: &Policy, evidence: &Evidence) -> Decision {
    let mut decision = Decision::default();
    let summary = &report.summary;
    decision.check("report", report.shard.is_none(), || {
        let shard = report.shard.expect("checked");
        format!(
            "the report holds shard {shard} of its campaign ({} of {} runs); merge the shards with `fleetsim report merge` and gate the merged report",
            report.runs.len(),
            shard.runs_total
        )
    });
    let config_matches = report.config_hash == evidence.campaign_config_hash;
    decision.check("config_hash", config_matches, || {
        format!(
            "the report's config hash {} is not that of {} with seed {} and {} runs ({}): the campaign file changed since the report was written",
            report.config_hash, report.campaign, report.seed, summary.runs, evidence.campaign_config_hash
        )
    });
    decision.check("runs", evidence.run_mismatches.is_empty(), || {
        format!("runs that are not the campaign's: {}", listed(&evidence.run_mismatches))
    });
    if let Some(min) = policy.runs_min {
        decision.check("runs.min", summary.runs >= min, || {
            format!("the report has {} runs, the policy needs at least {min}", summary.runs)
        });
    }
    if let Some(min) = policy.pass_per_mille_min {
        let met = summary.runs > 0 && summary.passed * 1000 >= u64::from(min) * summary.runs;
        decision.check("runs.pass_per_mille_min", met, || {
            let failing: Vec<String> = report
                .runs
                .iter()
                .filter(|run| !run.verdict.passed())
                .map(|run| format!("run {} ({})", run.run_index.unwrap_or(0), run.verdict.label()))
                .collect();
            format!(
                "{} of {} runs passed ({} per mille), the policy needs {min} per mille; failing: {}",
                summary.passed,
                summary.runs,
                (summary.passed * 1000).checked_div(summary.runs).unwrap_or(0),
                if failing.is_empty() { "none".to_owned() } else { listed(&failing) }
            )
        });
    }
    if policy.sometimes_all_reached {
        decision.check("runs.sometimes_all_reached", summary.sometimes_never_reached.is_empty(), || {
            format!("never reached: {}", listed(&summary.sometimes_never_reached))
        });
    }
    if let Some(min) = policy.lanes_converged_per_mille_min {
        let rollouts = Rollouts::of(report);
        let converged = rollouts.runs_with_rollout.saturating_sub(rollouts.runs_lanes_not_converged);
        let met = rollouts.runs_with_rollout > 0 && converged * 1000 >= u64::from(min) * rollouts.runs_with_rollout;
        decision.check("lanes.converged_per_mille_min", met, || {
            if rollouts.runs_with_rollout == 0 {
                "no run started a rollout, so no lane was judged".to_owned()
            } else {
                format!(
                    "{LANE_ORACLE} held in {converged} of the {} runs that started a rollout, the policy needs {min} per mille",
                    rollouts.runs_with_rollout
                )
            }
        });
    }
    if let Some(min) = policy.nodes_upgraded_per_mille_min {
        let total = |outcome: Option<&str>| {
            summary
                .rollout_nodes
                .iter()
                .filter(|(name, _)| outcome.is_none_or(|outcome| name.as_str() == outcome))
                .fold(0u64, |sum, (_, count)| sum.saturating_add(*count))
        };
        let (selected, upgraded) = (total(None), total(Some("upgraded")));
        let met = selected > 0 && upgraded.saturating_mul(1000) >= u64::from(min).saturating_mul(selected);
        decision.check("nodes.upgraded_per_mille_min", met, || {
            if let Some(share) = upgraded.saturating_mul(1000).checked_div(selected) {
                let others: Vec<String> = summary
                    .rollout_nodes
                    .iter()
                    .filter(|(name, count)| name.as_str() != "upgraded" && **count > 0)
                    .map(|(name, count)| format!("{count} {name}"))
                    .collect();
                format!(
                    "{upgraded} of the {selected} selected nodes upgraded ({share} per mille; {}), the policy needs {min} per mille",
                    others.join(", ")
                )
            } else {
                "no rollout accounted for a selected node".to_owned()
            }
        });
    }
    for (oracle, max) in &policy.violations_max {
        let found = summary.violations_by_oracle.get(oracle).copied().unwrap_or(0);
        decision.check(format!("violations.max.{oracle}"), found <= *max, || {
            format!("{found} violations over all runs, the policy allows {max}")
        });
    }
    if let Some(max) = policy.violations_others_max {
        let over: Vec<String> = summary
            .violations_by_oracle
            .iter()
            .filter(|(oracle, count)| !policy.violations_max.contains_key(*oracle) && **count > max)
            .map(|(oracle, count)| format!("{oracle} {count}"))
            .collect();
        decision.check("violations.others_max", over.is_empty(), || {
            format!("violations over the {max} allowed: {}", listed(&over))
        });
    }
    for (kind, min) in &policy.faults_min {
        let effective = summary.faults_effective.get(kind).copied().unwrap_or(0);
        let injected = summary.faults.get(kind).copied().unwrap_or(0);
        decision.check(format!("faults.min.{kind}"), effective >= *min, || {
            format!("effective {effective} times over all runs ({injected} injected), the policy needs at least {min}")
        });
    }
    for (kind, min) in &policy.faults_injected_min {
        let injected = summary.faults.get(kind).copied().unwrap_or(0);
        decision.check(format!("faults.injected_min.{kind}"), injected >= *min, || {
            format!("injected {injected} times over all runs, the policy needs at least {min}")
        });
    }
    for (kind, aim) in &policy.faults_aimed {
        let logged = |phase: Option<&str>| -> u64 {
            summary
                .fault_landings
                .iter()
                .filter(|(key, _)| {
                    let mut parts = key.split('/');
                    parts.next() == Some(kind.as_str()) && phase.is_none_or(|phase| parts.next() == Some(phase))
                })
                .map(|(_, count)| *count)
                .sum()
        };
        let (all, aimed) = (logged(None), logged(Some(&aim.phase)));
        let min = u64::from(aim.per_mille_min);
        decision.check(format!("faults.aimed.{kind}"), all > 0 && aimed * 1000 >= min * all, || {
            format!("{aimed} of {all} landed in {}, the policy needs {min} per mille", aim.phase)
        });
    }
    let hit = |pair: &String| summary.matrix_pairs.get(pair).is_some_and(|count| *count > 0);
    for pair in &policy.matrix_required {
        decision.check(format!("matrix.required.{pair}"), hit(pair), || "no run hit this pair".to_owned());
    }
    if let Some(min) = policy.matrix_listed_per_mille_min {
        let missed: Vec<&String> = policy.matrix_listed.iter().filter(|pair| !hit(pair)).collect();
        let listed_count = policy.matrix_listed.len() as u64;
        let covered = listed_count - missed.len() as u64;
        decision.check("matrix.listed_per_mille_min", covered * 1000 >= u64::from(min) * listed_count, || {
            format!(
                "{covered} of {listed_count} listed pairs hit, the policy needs {min} per mille; not hit: {}",
                listed(&missed)
            )
        });
    }
    {
        let wanted = match policy.recheck {
            Recheck::All => report.runs.len(),
            Recheck::Sample(n) => usize::try_from(n).unwrap_or(usize::MAX).min(report.runs.len()),
        };
        let done = evidence.rechecks.len();
        if let Some(signature) = &evidence.signature {
            decision.check("signature", signature.is_ok(), || match signature {
                Err(reason) => format!("the report's signature does not hold: {reason}"),
                Ok(_) => unreachable!("checked"),
            });
        }
        let signed = evidence.replays_waived && matches!(evidence.signature, Some(Ok(_)));
        decision.check("determinism.recheck", signed || (done >= wanted && wanted > 0), || {
            if wanted == 0 {
                "the report holds no run to re-check".to_owned()
            } else if !config_matches {
                format!(
                    "{wanted} runs not re-checked: the campaign file does not resolve to the report's configuration"
                )
            } else {
                format!("{done} of {wanted} runs re-checked")
            }
        });
        for recheck in &evidence.rechecks {
            decision.check(
                format!("determinism.run.{}", recheck.run_index),
                recheck.reported == recheck.replayed && recheck.differences.is_empty(),
                || {
                    if recheck.reported == recheck.replayed {
                        format!(
                            "run {} (seed {}) replayed to the report's trace digest but another record: it differs in {}",
                            recheck.run_index,
                            recheck.seed,
                            listed(&recheck.differences)
                        )
                    } else {
                        format!(
                            "run {} (seed {}) replayed to trace digest {}, the report has {}",
                            recheck.run_index, recheck.seed, recheck.replayed, recheck.reported
                        )
                    }
                },
            );
        }
    }
    if policy.commit_matches_head {
        let (met, reason) = match &evidence.head {
            Some(Ok(head)) if *head == report.commit => (true, String::new()),
            Some(Ok(head)) => {
                (false, format!("the report was written at commit {}, the checkout is at {head}", report.commit))
            }
            Some(Err(error)) => (false, format!("cannot read the checked-out commit: {error}")),
            None => (false, "the checked-out commit was not read".to_owned()),
        };
        decision.check("commit.matches_head", met, || reason);
    }
    decision
}

/// The gate's output: one line on a pass; on a failure a line, then every unmet threshold on its own line.
pub fn render(
    decision: &Decision,
    report_name: &str,
    report: &CampaignReport,
    policy: &Policy,
    evidence: &Evidence,
) -> String {
    let rechecked = evidence.rechecks.len();
    let mut text = if decision.passed() {
        format!(
            "gate PASS: {report_name} meets {}: {} runs, {} passed, {} checks met, {rechecked} runs re-checked\n",
            policy.source, report.summary.runs, report.summary.passed, decision.checks
        )
    } else {
        let mut text = format!(
            "gate FAIL: {report_name} against {}: {} of {} checks unmet\n",
            policy.source,
            decision.unmet.len(),
            decision.checks
        );
        for unmet in &decision.unmet {
            text.push_str(&format!("  {}: {}\n", unmet.threshold, unmet.reason));
        }
        text
    };
    if let (Recheck::Sample(sample), true) = (policy.recheck, rechecked > 0) {
        text.push_str(&sample_line(report.runs.len() as u64, sample));
    }
    if let (true, Some(Ok(key))) = (evidence.replays_waived, &evidence.signature) {
        text.push_str(&format!(
            "  signature: signed by trusted key {key} over exactly these bytes, so no run was replayed (docs/trust.md: what a signature proves)\n"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use reports::{FailureKind, RunRecord, Shard, Verdict};

    const POLICY: &str = r#"schema_version = 1
kind = "gate_policy"
description = "test gate"

[runs]
min = 4
pass_per_mille_min = 750
sometimes_all_reached = true

[lanes]
converged_per_mille_min = 1000

[violations]
max = { every_lane_converged = 0 }
others_max = 0

[faults]
min = { ssh_timeout = 2, controller_death = 1 }
injected_min = { ssh_timeout = 2 }
aimed = { ssh_timeout = { phase = "rollout", per_mille_min = 500 } }

[matrix]
required = ["wait_for_ready/pxe_discovery_failure"]
listed = ["wait_for_ready/pxe_discovery_failure", "commission_node/bmc_power_failure"]
listed_per_mille_min = 500

[determinism]
recheck = { sample = 2 }

[commit]
matches_head = true
"#;

    fn policy() -> Policy {
        parse_policy("gate.toml", POLICY).unwrap()
    }

    fn record(index: u64) -> RunRecord {
        RunRecord {
            schema_version: 1,
            tool_version: "0.1.0".into(),
            commit: "c0ffee".into(),
            config_hash: "h".into(),
            config: serde_json::json!({"steps": [{"at_ms": 0, "step": {"kind": "start_rollout", "revision": "r"}}]}),
            source: "c.toml".into(),
            run_index: Some(index),
            seed: index,
            verdict: Verdict::PASS,
            trace_digest: format!("d{index}"),
            trace_events: 1,
            virtual_duration_ms: 1,
            faults: BTreeMap::from([("ssh_timeout".to_owned(), 1), ("controller_death".to_owned(), 1)]),
            matrix_pairs: BTreeMap::from([("wait_for_ready/pxe_discovery_failure".to_owned(), 1)]),
            fault_phases: Default::default(),
            fault_log: vec![
                logged(1, "ssh_timeout", "rollout:quiesce", "retried"),
                logged(2, "controller_death", "rollout:lanes", "stopped"),
            ],
            availability: vec![],
            availability_cut_ms: None,
            batches: vec![],
            lanes: vec![],
            rollouts: vec![],
            workflows: vec![],
            violations: vec![],
            violation_counts: BTreeMap::new(),
            reached: vec![reports::Firing {
                oracle: "node_quarantined".into(),
                property: reports::PropertyKind::Sometimes,
                t_ms: 1,
                evidence: String::new(),
                expected: false,
            }],
            unmet: vec![],
            panic: None,
            repro: String::new(),
        }
    }

    fn logged(fault: u64, kind: &str, phase: &str, effect: &str) -> reports::FaultEntry {
        reports::FaultEntry {
            fault,
            kind: kind.into(),
            target: String::new(),
            injected_ms: 0,
            landed_ms: Some(1),
            phase: phase.into(),
            effect: effect.into(),
        }
    }

    fn report(runs: Vec<RunRecord>) -> CampaignReport {
        let summary = reports::summarize(&runs, &["node_quarantined".into()], |_| "digest".into());
        CampaignReport {
            schema_version: 1,
            tool_version: "0.1.0".into(),
            commit: "c0ffee".into(),
            config_hash: "campaign-hash".into(),
            campaign: "c.toml".into(),
            description: "d".into(),
            seed: 1,
            shard: None,
            summary,
            runs,
        }
    }

    /// Run `i` replayed to the report's own record.
    fn replayed(i: u64) -> Replayed {
        Replayed { run_index: i, seed: i, reported: format!("d{i}"), replayed: format!("d{i}"), differences: vec![] }
    }

    fn good() -> (CampaignReport, Evidence) {
        let report = report((0..4).map(record).collect());
        let rechecks = recheck_sample(&report, Recheck::Sample(2), 7).into_iter().map(replayed).collect();
        let evidence = Evidence {
            campaign_config_hash: "campaign-hash".into(),
            run_mismatches: vec![],
            rechecks,
            head: Some(Ok("c0ffee".into())),
            signature: None,
            replays_waived: false,
        };
        (report, evidence)
    }

    fn unmet(report: &CampaignReport, evidence: &Evidence) -> Vec<String> {
        decide(report, &policy(), evidence)
            .unmet
            .into_iter()
            .map(|u| format!("{}: {}", u.threshold, u.reason))
            .collect()
    }

    #[test]
    fn a_report_that_meets_every_threshold_passes_in_one_line() {
        let (report, evidence) = good();
        let decision = decide(&report, &policy(), &evidence);
        assert!(decision.passed(), "{:?}", decision.unmet);
        // report, config_hash, runs, runs.min, pass rate, sometimes, lanes, 1 oracle, others, 2 effective and 1
        // injected fault minimums, 1 aimed kind, 1 required pair, listed share, determinism count, 2 re-checked
        // runs, commit.
        assert_eq!(decision.checks, 19);
        let text = render(&decision, "r.json", &report, &policy(), &evidence);
        let pass = "gate PASS: r.json meets gate.toml: 4 runs, 4 passed, 19 checks met, 2 runs re-checked\n";
        assert_eq!(text, format!("{pass}{}", sample_line(4, 2)), "a sampled gate says what its sample cannot see");
        let every = Policy { recheck: Recheck::All, ..policy() };
        let evidence = Evidence { rechecks: (0..4).map(replayed).collect(), ..evidence };
        let decision = decide(&report, &every, &evidence);
        let text = render(&decision, "r.json", &report, &every, &evidence);
        assert_eq!(text, "gate PASS: r.json meets gate.toml: 4 runs, 4 passed, 21 checks met, 4 runs re-checked\n");
    }

    #[test]
    fn the_upgraded_share_counts_every_selected_node_of_every_account() {
        let (mut report, evidence) = good();
        let account = |upgraded: u64, quarantined: u64| reports::RolloutAccount {
            rollout: "rollout-r".into(),
            outcome: "partial".into(),
            counts: BTreeMap::from([("upgraded".to_owned(), upgraded), ("quarantined".to_owned(), quarantined)]),
            nodes: vec![],
        };
        report.runs[0].rollouts = vec![account(7, 1)];
        report.runs[1].rollouts = vec![account(8, 0)];
        report.summary = reports::summarize(&report.runs, &["node_quarantined".into()], |_| "digest".into());
        let mut policy = policy();
        let judge = |report: &CampaignReport, policy: &Policy| {
            let decision = decide(report, policy, &evidence);
            decision.unmet.iter().map(|u| format!("{}: {}", u.threshold, u.reason)).collect::<Vec<_>>()
        };
        policy.nodes_upgraded_per_mille_min = Some(937);
        assert_eq!(judge(&report, &policy), Vec::<String>::new(), "15 of 16 is 937.5 per mille");
        policy.nodes_upgraded_per_mille_min = Some(938);
        assert_eq!(
            judge(&report, &policy),
            [
                "nodes.upgraded_per_mille_min: 15 of the 16 selected nodes upgraded (937 per mille; 1 quarantined), the policy needs 938 per mille"
            ]
        );
        for run in &mut report.runs {
            run.rollouts.clear();
        }
        report.summary = reports::summarize(&report.runs, &["node_quarantined".into()], |_| "digest".into());
        assert_eq!(judge(&report, &policy), ["nodes.upgraded_per_mille_min: no rollout accounted for a selected node"]);
        let file = POLICY.replace("[lanes]", "[nodes]\nupgraded_per_mille_min = 1001\n\n[lanes]");
        let error = parse_policy("gate.toml", &file).unwrap_err().to_string();
        assert!(error.contains("nodes.upgraded_per_mille_min: a per-mille share is 0 to 1000, not 1001"), "{error}");
    }

    #[test]
    fn every_unmet_threshold_is_listed() {
        let (mut report, mut evidence) = good();
        report.runs[1].verdict = Verdict::fail(FailureKind::LivenessFailure);
        report.runs[1].violation_counts = BTreeMap::from([("every_lane_converged".to_owned(), 2)]);
        report.runs[2].violation_counts = BTreeMap::from([("lane_bound".to_owned(), 1)]);
        for run in &mut report.runs {
            run.faults.remove("controller_death");
            run.fault_log.retain(|entry| entry.kind != "controller_death");
            run.matrix_pairs.clear();
            run.reached.clear();
        }
        // Three of the four SSH timeouts never landed: one is effective, and one of four landed in the rollout.
        for run in &mut report.runs[..3] {
            run.fault_log[0] = reports::FaultEntry { landed_ms: None, ..logged(1, "ssh_timeout", "idle", "none") };
        }
        report.summary = reports::summarize(&report.runs, &["node_quarantined".into()], |_| "digest".into());
        evidence.rechecks[1].replayed = "other".into();
        let replayed_index = evidence.rechecks[1].run_index;
        evidence.head = Some(Err("git is not available (not found)".into()));
        let lines = unmet(&report, &evidence);
        assert_eq!(
            lines,
            vec![
                "runs.sometimes_all_reached: never reached: node_quarantined".to_owned(),
                "lanes.converged_per_mille_min: every_lane_converged held in 3 of the 4 runs that started a rollout, the policy needs 1000 per mille".to_owned(),
                "violations.max.every_lane_converged: 2 violations over all runs, the policy allows 0".to_owned(),
                "violations.others_max: violations over the 0 allowed: lane_bound 1".to_owned(),
                "faults.min.controller_death: effective 0 times over all runs (0 injected), the policy needs at least 1".to_owned(),
                "faults.min.ssh_timeout: effective 1 times over all runs (4 injected), the policy needs at least 2".to_owned(),
                "faults.aimed.ssh_timeout: 1 of 4 landed in rollout, the policy needs 500 per mille".to_owned(),
                "matrix.required.wait_for_ready/pxe_discovery_failure: no run hit this pair".to_owned(),
                "matrix.listed_per_mille_min: 0 of 2 listed pairs hit, the policy needs 500 per mille; not hit: wait_for_ready/pxe_discovery_failure, commission_node/bmc_power_failure".to_owned(),
                format!("determinism.run.{replayed_index}: run {replayed_index} (seed {replayed_index}) replayed to trace digest other, the report has d{replayed_index}"),
                "commit.matches_head: cannot read the checked-out commit: git is not available (not found)".to_owned(),
            ],
            "3 of 4 passing meets 750 per mille exactly, so the pass rate is not listed"
        );
    }

    #[test]
    fn too_few_runs_a_low_pass_rate_and_another_commit_fail() {
        let (mut report, mut evidence) = good();
        report.runs.truncate(2);
        report.runs[0].verdict = Verdict::fail(FailureKind::Panic);
        report.summary = reports::summarize(&report.runs, &["node_quarantined".into()], |_| "digest".into());
        evidence.head = Some(Ok("beef".into()));
        let lines = unmet(&report, &evidence);
        assert!(
            lines.contains(&"runs.min: the report has 2 runs, the policy needs at least 4".to_owned()),
            "{lines:?}"
        );
        assert!(lines.iter().any(|l| l.starts_with("runs.pass_per_mille_min: 1 of 2 runs passed (500 per mille)")));
        assert!(lines.contains(
            &"commit.matches_head: the report was written at commit c0ffee, the checkout is at beef".to_owned()
        ));
    }

    #[test]
    fn a_shard_a_changed_campaign_and_foreign_runs_fail_closed() {
        let (mut report, mut evidence) = good();
        report.shard = Some(Shard { index: 1, count: 2, runs_total: 8 });
        evidence.campaign_config_hash = "edited".into();
        evidence.run_mismatches = vec!["run 3 has seed 9, the campaign gives it 3".into()];
        evidence.rechecks.clear();
        let lines = unmet(&report, &evidence);
        assert!(lines[0].starts_with("report: the report holds shard 1/2 of its campaign (4 of 8 runs)"), "{lines:?}");
        assert!(
            lines[1].starts_with("config_hash: the report's config hash campaign-hash is not that of c.toml"),
            "{lines:?}"
        );
        assert_eq!(lines[2], "runs: runs that are not the campaign's: run 3 has seed 9, the campaign gives it 3");
        assert!(lines.contains(&"determinism.recheck: 2 runs not re-checked: the campaign file does not resolve to the report's configuration".to_owned()), "{lines:?}");
    }

    #[test]
    fn every_run_is_replayed_unless_a_sample_is_asked_for_and_the_sample_is_drawn_from_its_seed() {
        let report = report((0..10).map(record).collect());
        assert_eq!(recheck_sample(&report, Recheck::All, 1), (0..10).collect::<Vec<_>>());
        assert_eq!(Policy::default().recheck, Recheck::All, "a policy that says nothing replays every run");
        let sample = recheck_sample(&report, Recheck::Sample(3), 1);
        assert_eq!(sample.len(), 3);
        assert!(sample.windows(2).all(|pair| pair[0] < pair[1]), "distinct, in index order: {sample:?}");
        assert_eq!(recheck_sample(&report, Recheck::Sample(3), 1), sample, "a function of its seed");
        let draws: std::collections::BTreeSet<Vec<u64>> =
            (0..20).map(|seed| recheck_sample(&report, Recheck::Sample(3), seed)).collect();
        assert!(draws.len() > 10, "other seeds draw other runs: {draws:?}");
        assert_eq!(recheck_sample(&report, Recheck::Sample(50), 1), (0..10).collect::<Vec<_>>(), "at most all");
    }

    #[test]
    fn a_report_signed_by_a_trusted_key_needs_no_replay_and_a_bad_signature_fails() {
        let (report, mut evidence) = good();
        let every = Policy { recheck: Recheck::All, ..policy() };
        evidence.rechecks.clear();
        let unmet = |evidence: &Evidence| {
            decide(&report, &every, evidence).unmet.into_iter().map(|u| u.threshold).collect::<Vec<_>>()
        };
        assert_eq!(unmet(&evidence), ["determinism.recheck"], "unsigned and not replayed");
        evidence.signature = Some(Ok("0123456789abcdef".into()));
        evidence.replays_waived = true;
        assert_eq!(unmet(&evidence), Vec::<String>::new());
        let text = render(&decide(&report, &every, &evidence), "r.json", &report, &every, &evidence);
        assert!(text.ends_with("  signature: signed by trusted key 0123456789abcdef over exactly these bytes, so no run was replayed (docs/trust.md: what a signature proves)\n"), "{text}");
        evidence.signature = Some(Err("the report was changed after it was signed".into()));
        assert_eq!(unmet(&evidence), ["signature", "determinism.recheck"], "a bad signature waives nothing");
    }

    #[test]
    fn the_chance_that_forged_runs_escape_a_sample_is_the_hypergeometric_zero() {
        // C(N-k, n) / C(N, n): 5 of 100 miss one forged run 95 times in 100, six of them 73 times in 100.
        assert!((escape_probability(100, 1, 5) - 0.95).abs() < 1e-12);
        let six = (0..5).fold(1.0, |p, i| p * (94 - i) as f64 / (100 - i) as f64);
        assert!((escape_probability(100, 6, 5) - six).abs() < 1e-12 && (six - 0.7291).abs() < 1e-4, "{six}");
        assert_eq!(escape_probability(100, 0, 5), 1.0);
        assert_eq!(escape_probability(10, 6, 5), 0.0, "five of ten cannot all miss six");
        assert_eq!(escape_probability(100, 1, 100), 0.0, "every run replayed: nothing escapes");
        assert_eq!(
            sample_line(100, 5),
            "  sample: 5 of 100 runs replayed, drawn at gate time from the operating system's random source; a report with k forged runs passes unseen with probability C(100-k, 5)/C(100, 5), for k = 1: 95.0 %, 2: 90.2 %, 5: 77.0 %, 10: 58.4 %; `--recheck all` leaves none unseen\n"
        );
    }

    #[test]
    fn a_replay_that_differs_in_any_field_but_the_build_is_named() {
        let reported = record(1);
        let mut replayed = record(1);
        replayed.commit = "another build".into();
        assert!(record_differences(&reported, &replayed).is_empty());
        replayed.verdict = Verdict::fail(FailureKind::SafetyViolation);
        replayed.reached.clear();
        replayed.violation_counts.insert("lane_bound".into(), 1);
        assert_eq!(record_differences(&reported, &replayed), ["reached", "verdict", "violation_counts"]);
        let (report, mut evidence) = good();
        evidence.rechecks[0].differences = vec!["verdict".into(), "violations".into()];
        let index = evidence.rechecks[0].run_index;
        let lines = unmet(&report, &evidence);
        assert_eq!(
            lines,
            [format!(
                "determinism.run.{index}: run {index} (seed {index}) replayed to the report's trace digest but another record: it differs in verdict, violations"
            )]
        );
    }

    #[test]
    fn a_malformed_policy_names_file_line_and_field() {
        let error =
            |from: &str, to: &str| parse_policy("gate.toml", &POLICY.replace(from, to)).unwrap_err().to_string();
        assert_eq!(
            error("pass_per_mille_min = 750", "pass_per_mille_min = 1750"),
            "gate.toml:7:22: runs.pass_per_mille_min: a per-mille share is 0 to 1000, not 1750"
        );
        assert!(
            error("min = 4", "min = 4\nmni = 3").starts_with("gate.toml:7:1: runs.mni: unknown field `mni`"),
            "{}",
            error("min = 4", "min = 4\nmni = 3")
        );
        assert!(
            error("every_lane_converged = 0 }", "every_lane_convergd = 0 }")
                .starts_with("gate.toml:14:7: violations.max.every_lane_convergd: unknown oracle (known: ")
        );
        assert!(
            error("every_lane_converged = 0 }", "node_quarantined = 0 }")
                .starts_with("gate.toml:14:7: violations.max.node_quarantined: a sometimes-property has no violations")
        );
        assert!(
            error("ssh_timeout = 2", "ssh_timeot = 2")
                .starts_with("gate.toml:18:7: faults.min.ssh_timeot: unknown step kind (known: partition")
        );
        assert!(
            error("injected_min = { ssh_timeout", "injected_min = { ssh_timout")
                .starts_with("gate.toml:19:16: faults.injected_min.ssh_timout: unknown step kind (known: partition")
        );
        assert_eq!(
            error("phase = \"rollout\"", "phase = \"lanes\""),
            "gate.toml:20:9: faults.aimed.ssh_timeout.phase: \"lanes\" is not a phase (one of rollout, onboarding, decommission, rotation, instances, idle)"
        );
        assert_eq!(
            error("per_mille_min = 500 }", "per_mille_min = 1500 }"),
            "gate.toml:20:9: faults.aimed.ssh_timeout.per_mille_min: 1500 is more than 1000"
        );
        assert!(
            error("required = [\"wait_for_ready/pxe_discovery_failure\"]", "required = [\"wait_for_ready\"]")
                .starts_with(
                    "gate.toml:23:13: matrix.required: \"wait_for_ready\" is not a `stage/failure_class` pair"
                )
        );
        assert!(
            error("\"commission_node/bmc_power_failure\"", "\"commission_node/meteor\"")
                .starts_with("gate.toml:24:51: matrix.listed: \"commission_node/meteor\" names no failure class")
        );
        assert!(
            error("\"commission_node/bmc_power_failure\"", "\"drain_node/agent_enrollment_failure\"")
                .contains("write `decommission:drain_node/agent_enrollment_failure`"),
            "a bare decommission stage never matches a report's keys"
        );
        assert!(
            error("\"commission_node/bmc_power_failure\"", "\"decommission:polish_node/upstream_transient\"")
                .contains("names no decommission stage of the recovery matrix: `polish_node`")
        );
        assert!(check_matrix_pair("decommission:drain_node/agent_enrollment_failure").is_ok());
        assert!(check_matrix_pair("decommission:load_site_config/site_capability_missing").is_ok());
        assert_eq!(
            error("schema_version = 1", "schema_version = 2"),
            "gate.toml:1:18: schema_version: this fleetsim reads version 1, the file has 2"
        );
        assert!(
            error("recheck = { sample = 2 }", "recheck_runs = 5")
                .starts_with("gate.toml:28:16: determinism.recheck_runs: replaced by `recheck`: the gate replays every run by default"),
            "{}",
            error("recheck = { sample = 2 }", "recheck_runs = 5")
        );
        assert_eq!(
            error("recheck = { sample = 2 }", "recheck = { sample = 0 }"),
            "gate.toml:28:11: determinism.recheck.sample: 1 to 100000 runs, not 0"
        );
        assert_eq!(
            error("recheck = { sample = 2 }", "recheck = \"some\""),
            "gate.toml:28:11: determinism.recheck: \"some\" is neither \"all\" nor { sample = N }"
        );
        assert_eq!(
            parse_policy("gate.toml", &POLICY.replace("{ sample = 2 }", "\"all\"")).unwrap().recheck,
            Recheck::All
        );
    }
}
