//! The scenario writer: a resolved [`RunSpec`] and a seed back to scenario TOML that [`parse_scenario`] accepts and
//! that resolves to the same `config_hash`, and a run record's `config` back to a [`RunSpec`].
//!
//! Keys whose value is the parser's default are left out, so a written file says only what differs from the defaults
//! (and `fleet.lane_size`, which is checked against the fleet only when given, is never written as a default a small
//! fleet would refuse). Every file written is parsed again before it is returned: a spec the scenario format cannot
//! say exactly is an error, never a file that runs something else.

use std::fmt::{self, Write as _};

use fakes::hub::{DEFAULT_AGENT_TTL_MS, DEFAULT_SWEEP_INTERVAL_MS, ExpiryPolicy};

use super::{
    DEFAULT_CALL_TIMEOUT_MS, DEFAULT_LIVENESS_BUDGET_MS, DEFAULT_ONBOARDING_CONCURRENCY, DEFAULT_ONBOARDING_POLL_MS,
    DEFAULT_ONBOARDING_STALL_WINDOW_MS, RunSpec, SCHEMA_VERSION, node_name, parse_scenario,
};
use crate::model::link::LinkConfig;

/// The lane size the parser gives a fleet that names none.
const DEFAULT_LANE_SIZE: u32 = 8;
/// The largest integer a TOML file can hold; a seed above it is written as a string of digits.
const TOML_INTEGER_MAX: u64 = i64::MAX as u64;

/// Why a spec could not be written as a scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteError(pub String);

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WriteError {}

/// A run record's `config` (what [`RunSpec::config_value`] wrote) back to a spec, without source and description.
pub fn spec_from_config(config: &serde_json::Value) -> Result<RunSpec, WriteError> {
    serde_json::from_value(config.clone())
        .map_err(|error| WriteError(format!("the record's config is not a run configuration: {error}")))
}

/// `3_600_000`: integers of five digits or more get `_` every three digits, as the shipped files write them.
fn int(value: impl Into<i128>) -> String {
    let value = value.into();
    let digits = value.unsigned_abs().to_string();
    if digits.len() < 5 {
        return value.to_string();
    }
    let mut grouped = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            grouped.push('_');
        }
        grouped.push(digit);
    }
    if value < 0 { format!("-{grouped}") } else { grouped }
}

/// A TOML basic string, escaped.
fn string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

fn strings(items: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    let items: Vec<String> = items.into_iter().map(|item| string(item.as_ref())).collect();
    format!("[{}]", items.join(", "))
}

/// A serialisable enum value as its snake_case name (`"epoch_aware"`).
fn name_of(value: &impl serde::Serialize) -> Result<String, WriteError> {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => Ok(name),
        other => Err(WriteError(format!("expected a named value, got {other:?}"))),
    }
}

/// One field value of a step, in TOML.
fn value(value: &toml::Value) -> String {
    match value {
        toml::Value::Integer(number) => int(*number),
        toml::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(self::value).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// Writes `spec` run with `seed` as a scenario file. `comment` lines come first, each prefixed with `# `.
///
/// The text is parsed again before it is returned, and its configuration hash compared with the spec's: a spec the
/// format cannot say (a step the parser would refuse, onboarding machines not named after the fleet) is an error.
pub fn scenario_toml(spec: &RunSpec, seed: u64, comment: &[String]) -> Result<String, WriteError> {
    let text = render(spec, seed, comment)?;
    let parsed = parse_scenario("<written scenario>", &text)
        .map_err(|error| WriteError(format!("the written scenario does not parse: {error}")))?;
    if parsed.seed != seed {
        return Err(WriteError(format!("the written scenario has seed {}, not {seed}", parsed.seed)));
    }
    if parsed.run.config_hash() != spec.config_hash() {
        return Err(WriteError(
            "the written scenario resolves to another configuration than the run's (config_hash differs)".to_owned(),
        ));
    }
    Ok(text)
}

fn render(spec: &RunSpec, seed: u64, comment: &[String]) -> Result<String, WriteError> {
    let mut out = String::new();
    for line in comment {
        for part in line.split('\n') {
            let _ = writeln!(out, "# {part}").map(|()| ());
        }
    }
    let _ = writeln!(out, "schema_version = {SCHEMA_VERSION}");
    let _ = writeln!(out, "description = {}", string(&spec.description));
    if seed <= TOML_INTEGER_MAX {
        let _ = writeln!(out, "seed = {}", int(seed));
    } else {
        let _ = writeln!(out, "seed = \"{seed}\"");
    }
    let _ = writeln!(out, "duration_ms_max = {}", int(spec.duration_ms));
    if spec.run_to_duration {
        let _ = writeln!(out, "run_to_duration = true");
    }
    if spec.liveness_budget_ms != DEFAULT_LIVENESS_BUDGET_MS {
        let _ = writeln!(out, "liveness_budget_ms = {}", int(spec.liveness_budget_ms));
    }

    let fleet = &spec.fleet;
    let _ = writeln!(out, "\n[fleet]\nnodes = {}", int(fleet.nodes));
    if !fleet.durable.is_empty() {
        let _ = writeln!(out, "durable = {}", strings(&fleet.durable));
    }
    if fleet.lane_size != DEFAULT_LANE_SIZE {
        let _ = writeln!(out, "lane_size = {}", int(fleet.lane_size));
    }
    if fleet.availability_floor != 0 {
        let _ = writeln!(out, "availability_floor = {}", int(fleet.availability_floor));
    }

    let engine = &spec.engine;
    let mut table = String::new();
    if engine.hub_expiry != ExpiryPolicy::EpochAware {
        let _ = writeln!(table, "hub_expiry = {}", string(&name_of(&engine.hub_expiry)?));
    }
    if engine.call_timeout_ms != DEFAULT_CALL_TIMEOUT_MS {
        let _ = writeln!(table, "call_timeout_ms = {}", int(engine.call_timeout_ms));
    }
    if engine.rollout_policy != engine::rollout::driver::RolloutPolicy::Lanes {
        let _ = writeln!(table, "rollout_policy = {}", string(&name_of(&engine.rollout_policy)?));
    }
    section(&mut out, "[engine]", &table);

    let mut table = String::new();
    if spec.hub.agent_ttl_ms != DEFAULT_AGENT_TTL_MS {
        let _ = writeln!(table, "agent_ttl_ms = {}", int(spec.hub.agent_ttl_ms));
    }
    if spec.hub.sweep_interval_ms != DEFAULT_SWEEP_INTERVAL_MS {
        let _ = writeln!(table, "sweep_interval_ms = {}", int(spec.hub.sweep_interval_ms));
    }
    section(&mut out, "[hub]", &table);

    let network = &spec.network;
    let default = LinkConfig::default();
    let mut table = String::new();
    if (network.latency_min_ms, network.latency_max_ms) != (default.latency_min_ms, default.latency_max_ms) {
        let _ = writeln!(
            table,
            "latency_ms = {{ min = {}, max = {} }}",
            int(network.latency_min_ms),
            int(network.latency_max_ms)
        );
    }
    if network.request_loss_per_mille != 0 {
        let _ = writeln!(table, "request_loss_per_mille = {}", network.request_loss_per_mille);
    }
    if network.response_loss_per_mille != 0 {
        let _ = writeln!(table, "response_loss_per_mille = {}", network.response_loss_per_mille);
    }
    section(&mut out, "[network]", &table);

    if let Some(onboarding) = &spec.onboarding {
        let count = onboarding.machines.len() as u32;
        let total = fleet.nodes + count;
        let named: Vec<String> = if onboarding.fleet {
            fleet.node_names()
        } else {
            (fleet.nodes + 1..=total).map(|index| node_name(total, index)).collect()
        };
        if named != onboarding.machines {
            return Err(WriteError(format!(
                "the onboarding machines {:?} are not named after the fleet's next {count} nodes",
                onboarding.machines
            )));
        }
        let _ = writeln!(out, "\n[onboarding]\nnodes = {}", int(count));
        if onboarding.policy != engine::onboarding::driver::OnboardingPolicy::Current {
            let _ = writeln!(out, "policy = {}", string(&name_of(&onboarding.policy)?));
        }
        if onboarding.start_at_ms != 0 {
            let _ = writeln!(out, "start_at_ms = {}", int(onboarding.start_at_ms));
        }
        if onboarding.stall_window_ms != DEFAULT_ONBOARDING_STALL_WINDOW_MS {
            let _ = writeln!(out, "stall_window_ms = {}", int(onboarding.stall_window_ms));
        }
        if onboarding.poll_ms != DEFAULT_ONBOARDING_POLL_MS {
            let _ = writeln!(out, "poll_ms = {}", int(onboarding.poll_ms));
        }
        if onboarding.concurrency != DEFAULT_ONBOARDING_CONCURRENCY {
            let _ = writeln!(out, "concurrency = {}", int(onboarding.concurrency));
        }
        if onboarding.no_erase_release_allowed {
            let _ = writeln!(out, "no_erase_release_allowed = true");
        }
        if onboarding.maas_delete_required {
            let _ = writeln!(out, "maas_delete_required = true");
        }
        if onboarding.roce_mandatory {
            let _ = writeln!(out, "roce_mandatory = true");
        }
        if onboarding.fleet {
            let _ = writeln!(out, "fleet = true");
        }
        if !onboarding.timeouts.is_empty() {
            let _ = writeln!(out, "\n[onboarding.timeouts]");
            for (kind, ms) in &onboarding.timeouts {
                let _ = writeln!(out, "{kind}_ms = {}", int(*ms));
            }
        }
    }

    if let Some(instances) = &spec.instances {
        // Every key, defaults included: the table is small and a written file then says all it runs.
        let _ = writeln!(out, "\n[instances]\nplain = {}", int(instances.plain));
        let _ = writeln!(out, "quota = {}", int(instances.quota));
        let _ = writeln!(out, "on_call = {}", instances.on_call);
        if instances.bare_metal {
            let _ = writeln!(out, "bare_metal = true");
        }
        let governance = &instances.governance;
        let _ = writeln!(
            out,
            "governance = {{ instance_cordon = {}, terminate = {} }}",
            string(&name_of(&governance.instance_cordon)?),
            string(&name_of(&governance.terminate)?)
        );
        for pool in &instances.pools {
            let _ = writeln!(out, "\n[[instances.pool]]\nname = {}", string(&pool.name));
            let _ = writeln!(out, "class = {}", string(&name_of(&pool.class)?));
            let _ = writeln!(out, "target = {}\nmax = {}", int(pool.target), int(pool.max));
            let _ = writeln!(out, "ready_ttl_s = {}", int(pool.ready_ttl_s));
            let _ = writeln!(out, "disposition = {}", string(&name_of(&pool.disposition)?));
        }
    }

    for timed in &spec.steps {
        let _ = writeln!(out, "\n[[step]]\nat_ms = {}", int(timed.at_ms));
        step_fields(&mut out, &timed.step)?;
    }
    for staged in &spec.stage_steps {
        let _ = writeln!(out, "\n[[step]]\non_stage = {}", string(&crate::model::spec::stage_name(staged.stage)));
        let _ = writeln!(out, "workflow = {}", string(&staged.workflow));
        if staged.occurrence != 1 {
            let _ = writeln!(out, "occurrence = {}", int(staged.occurrence));
        }
        if staged.wait_ms != 0 {
            let _ = writeln!(out, "wait_ms = {}", int(staged.wait_ms));
        }
        step_fields(&mut out, &staged.step)?;
    }
    for triggered in &spec.rollout_steps {
        let _ = writeln!(out, "\n[[step]]\non_rollout = {}", string(triggered.point.as_str()));
        if let Some(node) = &triggered.node {
            let _ = writeln!(out, "node = {}", string(node));
        }
        if triggered.occurrence != 1 {
            let _ = writeln!(out, "occurrence = {}", int(triggered.occurrence));
        }
        step_fields(&mut out, &triggered.step)?;
    }
    for phased in &spec.phase_steps {
        let _ = writeln!(out, "\n[[step]]\nafter = {}", string(phased.after.as_str()));
        if phased.wait_ms != 0 {
            let _ = writeln!(out, "wait_ms = {}", int(phased.wait_ms));
        }
        step_fields(&mut out, &phased.step)?;
    }

    let expect = &spec.expect;
    if *expect != crate::model::spec::Expectations::default() {
        let _ = writeln!(out, "\n[expect]");
        if !expect.must_hold.is_empty() {
            let _ = writeln!(out, "must_hold = {}", strings(&expect.must_hold));
        }
        if !expect.must_fire.is_empty() {
            let _ = writeln!(out, "must_fire = {}", strings(&expect.must_fire));
        }
        if !expect.matrix_pairs.is_empty() {
            let _ = writeln!(out, "matrix_pairs = {}", strings(&expect.matrix_pairs));
        }
        if let Some(work) = &expect.recovery_work {
            let _ = writeln!(out, "recovery_work = {}", strings(work));
        }
        if let Some(state) = &expect.workflow_state {
            let _ = writeln!(out, "workflow_state = {}", string(state));
        }
        if let Some(state) = &expect.node_state {
            let _ = writeln!(out, "node_state = {}", string(state));
        }
        if let Some(bound) = expect.attempts_max {
            let _ = writeln!(out, "attempts_max = {}", int(bound));
        }
        for (key, values) in
            [("timeouts", &expect.timeouts), ("conditions", &expect.conditions), ("audits", &expect.audits)]
        {
            if !values.is_empty() {
                let _ = writeln!(out, "{key} = {}", strings(values));
            }
        }
        if let Some(rollout) = &expect.rollout {
            let _ = writeln!(out, "\n[expect.rollout]");
            if let Some(outcome) = &rollout.outcome {
                let _ = writeln!(out, "outcome = {}", string(outcome));
            }
            if let Some(lanes) = &rollout.lanes {
                let _ = writeln!(out, "lanes = {}", strings(lanes));
            }
            let table = |pairs: Vec<(String, String)>| {
                let pairs: Vec<String> = pairs.into_iter().map(|(key, value)| format!("{key} = {value}")).collect();
                format!("{{ {} }}", pairs.join(", "))
            };
            if !rollout.nodes.is_empty() {
                let pairs = rollout.nodes.iter().map(|(outcome, count)| (outcome.clone(), int(*count))).collect();
                let _ = writeln!(out, "nodes = {}", table(pairs));
            }
            if !rollout.node.is_empty() {
                let pairs = rollout.node.iter().map(|(node, outcome)| (string(node), string(outcome))).collect();
                let _ = writeln!(out, "node = {}", table(pairs));
            }
        }
    }
    Ok(out)
}

/// A step's `kind` and its fields, as `[[step]]` lines.
fn step_fields(out: &mut String, step: &crate::model::faults::Step) -> Result<(), WriteError> {
    let table = match toml::Value::try_from(step) {
        Ok(toml::Value::Table(table)) => table,
        other => return Err(WriteError(format!("step {step:?} is not a table in TOML: {other:?}"))),
    };
    let _ = writeln!(out, "kind = {}", string(step.kind()));
    for (key, field) in &table {
        if key != "kind" {
            let _ = writeln!(out, "{key} = {}", value(field));
        }
    }
    Ok(())
}

/// A table header and its lines, or nothing when every key has its default.
fn section(out: &mut String, header: &str, lines: &str) {
    if !lines.is_empty() {
        let _ = write!(out, "\n{header}\n{lines}");
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::prelude::*;

    use super::*;
    use crate::model::faults::{Step, TimedStep};
    use crate::model::spec::load_scenario;

    /// The shipped scenarios and the conformance cases (which use stage-triggered steps and matrix pairs).
    fn scenarios() -> Vec<std::path::PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut files: Vec<_> = [root.join("scenarios"), root.join("conformance/onboarding")]
            .iter()
            .flat_map(|dir| std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().path()))
            .collect();
        files.sort();
        files
    }

    #[test]
    fn every_shipped_scenario_round_trips_to_the_same_config_hash() {
        let files = scenarios();
        assert!(files.len() >= 60, "the scenario directories were not found: {files:?}");
        for path in files {
            let scenario = load_scenario(&path).unwrap();
            let text = scenario_toml(&scenario.run, scenario.seed, &["written by a test".to_owned()])
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            let again = parse_scenario("again.toml", &text).unwrap();
            assert_eq!(again.run.config_hash(), scenario.run.config_hash(), "{}:\n{text}", path.display());
            assert_eq!(again.seed, scenario.seed);
            assert_eq!(again.run.description, scenario.run.description);
            assert!(text.starts_with("# written by a test\nschema_version = 1\n"), "{text}");
        }
    }

    #[test]
    fn a_record_config_reads_back_to_the_same_spec() {
        for path in scenarios() {
            let scenario = load_scenario(&path).unwrap();
            let back = spec_from_config(&scenario.run.config_value()).unwrap();
            assert_eq!(back.config_hash(), scenario.run.config_hash(), "{}", path.display());
            assert_eq!(back.steps, scenario.run.steps);
        }
        let error = spec_from_config(&serde_json::json!({"fleet": 3})).unwrap_err();
        assert!(error.0.starts_with("the record's config is not a run configuration"), "{error}");
    }

    #[test]
    fn campaign_run_plans_round_trip() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("campaigns");
        let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().path()).collect();
        files.sort();
        assert!(!files.is_empty());
        // Gate policies (`kind = "gate_policy"`) live beside the campaigns they judge.
        let campaigns = files.into_iter().filter(|path| {
            !std::fs::read_to_string(path).unwrap().lines().any(|line| line.trim() == "kind = \"gate_policy\"")
        });
        for path in campaigns {
            let campaign = crate::model::campaign::load_campaign(&path).unwrap();
            for index in 0..8 {
                let spec = campaign.run_spec(index);
                let seed = campaign.run_seed(index);
                let text = scenario_toml(&spec, seed, &[])
                    .unwrap_or_else(|error| panic!("{} run {index}: {error}", path.display()));
                let again = parse_scenario("again.toml", &text).unwrap();
                assert_eq!(again.run.config_hash(), spec.config_hash());
                assert_eq!(again.seed, seed, "a seed above TOML's largest integer is written as digits");
            }
        }
    }

    #[test]
    fn defaults_are_left_out_and_numbers_are_grouped() {
        let text =
            "schema_version = 1\ndescription = \"d\"\nseed = 3\nduration_ms_max = 1_000_000\n[fleet]\nnodes = 3\n";
        let scenario = parse_scenario("s.toml", text).unwrap();
        let written = scenario_toml(&scenario.run, 3, &[]).unwrap();
        assert_eq!(
            written,
            "schema_version = 1\ndescription = \"d\"\nseed = 3\nduration_ms_max = 1_000_000\n\n[fleet]\nnodes = 3\n"
        );
        assert_eq!(int(12_345u64), "12_345");
        assert_eq!(int(-1_234_567i64), "-1_234_567");
        assert_eq!(int(9999u64), "9999");
    }

    #[test]
    fn an_operator_step_is_written_with_the_workflow_it_acts_on() {
        let text = "schema_version = 1\ndescription = \"d\"\nseed = 3\nduration_ms_max = 1_000_000\n[fleet]\nnodes = 1\n[onboarding]\nnodes = 1\n[[step]]\nat_ms = 5\nkind = \"operator\"\ntarget = \"node-02\"\nworkflow = \"onboarding\"\naction = \"resume\"\nrole = \"sre\"\nreason = \"ticket \\\"OPS-1\\\"\"\nresolves_freeze = true\n";
        let scenario = parse_scenario("s.toml", text).unwrap();
        let written = scenario_toml(&scenario.run, 3, &[]).unwrap();
        assert!(written.contains("kind = \"operator\"\naction = \"resume\"\nactor = \"oncall\"\n"), "{written}");
        assert!(
            written.contains("workflow = \"onboarding\"") && written.contains("resolves_freeze = true"),
            "{written}"
        );
        assert_eq!(parse_scenario("again.toml", &written).unwrap().run.steps, scenario.run.steps);
    }

    #[test]
    fn a_spec_the_format_cannot_say_is_refused() {
        let text =
            "schema_version = 1\ndescription = \"d\"\nseed = 3\nduration_ms_max = 1_000_000\n[fleet]\nnodes = 3\n";
        let mut spec = parse_scenario("s.toml", text).unwrap().run;
        spec.steps.push(TimedStep { at_ms: 999_000, step: Step::Crash { target: "hub".into() } });
        let error = scenario_toml(&spec, 3, &[]).unwrap_err();
        assert!(error.0.contains("does not parse") && error.0.contains("must last at least"), "{error}");
    }

    fn step_strategy() -> impl Strategy<Value = Step> {
        let node = prop::sample::select(vec!["node-01", "node-02", "node-03", "hub", "controller"]);
        prop_oneof![
            (node.clone(), node.clone()).prop_map(|(a, b)| Step::Partition { a: a.into(), b: b.into() }),
            (node.clone(), node.clone()).prop_map(|(a, b)| Step::Repair { a: a.into(), b: b.into() }),
            (node.clone(), node.clone(), 0u32..=1000, 0u32..=1000).prop_map(|(a, b, request, response)| {
                Step::LinkLoss { a: a.into(), b: b.into(), request_per_mille: request, response_per_mille: response }
            }),
            // Within the bound every `_ms` value has (one week either way).
            (node.clone(), -604_800i32..=604_800)
                .prop_map(|(target, skew)| Step::ClockSkew { target: target.into(), skew_ms: i64::from(skew) * 1000 }),
            (1u32..=3, 1u32..10).prop_map(|(node, count)| Step::SshTimeout { target: node_name(3, node), count }),
            (1u32..=3).prop_map(|node| Step::AgentStop { target: node_name(3, node) }),
            Just(Step::RouteSwap),
            (1u64..100_000).prop_map(|lease_ms| Step::StaleLock { lease_ms }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_valid_spec_round_trips(
            steps in prop::collection::vec((0u64..=400_000, step_strategy()), 0..8),
            seed in any::<u64>(),
            floor in 0u32..3,
            lane in 1u32..=3,
            latency in (0u64..50, 0u64..50),
            description in "[ -~]{0,30}",
        ) {
            let mut spec = parse_scenario(
                "s.toml",
                "schema_version = 1\ndescription = \"d\"\nseed = 3\nduration_ms_max = 1_000_000\n[fleet]\nnodes = 3\n",
            ).unwrap().run;
            spec.description = description;
            spec.fleet.availability_floor = floor;
            spec.fleet.lane_size = lane;
            spec.network.latency_min_ms = latency.0.min(latency.1);
            spec.network.latency_max_ms = latency.0.max(latency.1);
            spec.steps = steps.into_iter().map(|(at_ms, step)| TimedStep { at_ms, step }).collect();
            spec.steps.sort_by_key(|timed| timed.at_ms);
            // Steps the parser refuses (a and b the same host) make the writer refuse too; the others round-trip.
            let valid = spec.steps.iter().all(|timed| timed.step.names().windows(2).all(|pair| pair[0].1 != pair[1].1));
            match scenario_toml(&spec, seed, &[]) {
                Ok(text) => {
                    let again = parse_scenario("again.toml", &text).unwrap();
                    prop_assert_eq!(again.run.config_hash(), spec.config_hash());
                    prop_assert_eq!(again.seed, seed);
                    prop_assert_eq!(again.run.description, spec.description);
                }
                Err(error) => prop_assert!(!valid, "a valid spec was refused: {}", error),
            }
        }
    }
}
