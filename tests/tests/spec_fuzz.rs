//! The scenario, campaign and gate-policy parsers on arbitrary bytes and on structure-aware mutations of every shipped
//! file: never a panic, and every refusal names the file, a line and column, and a key (`fuzz.toml:L:C: key: …`).
//! 10,240 cases in all (2,048 of arbitrary bytes, 8,192 of mutated files), each parsed by all three parsers.
//!
//! The bounded-work properties (at the end) draw scenario and campaign files across the sizes that make a run's work
//! — fleet, machines, length, loop periods, fault counts — and hold every accepted one to the stated bounds
//! (`sim::model::work`), running the small ones against their event budget.
//!
//! A hang has no wall-clock assertion here: every input is at most a few KiB, the parsers are linear in it, and no
//! integer past its bound reaches a resolver (`sim::model::spec::check_bounds`), so the test's own run time is the
//! bound (under a minute in the debug profile).

use std::path::Path;

use proptest::prelude::*;

/// Every shipped scenario, conformance case, campaign and gate policy.
fn shipped_files() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut paths = Vec::new();
    for dir in ["scenarios", "campaigns", "conformance"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                paths.extend(std::fs::read_dir(&path).unwrap().map(|entry| entry.unwrap().path()));
            } else {
                paths.push(path);
            }
        }
    }
    paths.retain(|path| path.extension().is_some_and(|ext| ext == "toml"));
    paths.sort();
    paths.into_iter().map(|path| std::fs::read_to_string(path).unwrap()).collect()
}

fn files() -> &'static [String] {
    static FILES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    FILES.get_or_init(shipped_files)
}

/// Whether `error` reads `fuzz.toml:LINE:COLUMN: KEY: …` with a key (`fleet.nodes`, `step[3].at_ms`, `(top level)`).
fn names_file_position_and_key(error: &str) -> bool {
    let Some(rest) = error.strip_prefix("fuzz.toml:") else { return false };
    let mut parts = rest.splitn(3, ':');
    let numeric =
        |part: Option<&str>| part.is_some_and(|text| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()));
    if !numeric(parts.next()) || !numeric(parts.next()) {
        return false;
    }
    let Some(message) = parts.next().and_then(|text| text.strip_prefix(' ')) else { return false };
    let Some((key, reason)) = message.split_once(": ") else { return false };
    let key_chars = key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '[' | ']'));
    (key == "(top level)" || (!key.is_empty() && key_chars)) && !reason.is_empty()
}

/// Parses `bytes` as each kind of file; every refusal must name its position and key, and none may panic.
fn check(bytes: Vec<u8>) -> Result<(), TestCaseError> {
    let text = match sim::model::spec::text_of("fuzz.toml", bytes) {
        Ok(text) => text,
        Err(error) => {
            let error = error.to_string();
            prop_assert!(names_file_position_and_key(&error), "{error}");
            return Ok(());
        }
    };
    let errors = [
        sim::model::spec::parse_scenario("fuzz.toml", &text).err(),
        sim::model::campaign::parse_campaign("fuzz.toml", &text).err(),
        sim::run::gate::parse_policy("fuzz.toml", &text).err(),
    ];
    for error in errors.into_iter().flatten() {
        let error = error.to_string();
        prop_assert!(names_file_position_and_key(&error), "{error}\n--- input ---\n{text}");
        prop_assert!(!error.chars().any(char::is_control), "control characters echoed: {error:?}");
        prop_assert!(!error.contains("fleetsim-secret-"), "a credential echoed: {error}");
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete {
        at: usize,
        len: usize,
    },
    Insert {
        at: usize,
        text: Vec<u8>,
    },
    Replace {
        at: usize,
        byte: u8,
    },
    SwapLines {
        a: usize,
        b: usize,
    },
    DuplicateLine {
        line: usize,
    },
    /// The first integer at or after `at` replaced.
    Number {
        at: usize,
        text: String,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let tokens = prop_oneof![
        Just(b"=".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"[[step]]\n".to_vec()),
        Just(b"[fleet]\n".to_vec()),
        Just(b"-1".to_vec()),
        Just(b"99999999999999999999".to_vec()),
        Just(b"kind = \"crash\"\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"{".to_vec()),
        Just(b"target = \"node-00\"\n".to_vec()),
        Just(b"target = \"fleetsim-secret-abc\"\n".to_vec()),
        Just(b"\x1b[2J".to_vec()),
        Just(vec![0xff, 0xfe]),
        Just(vec![0xe2, 0x82]),
        "[a-z_ =0-9\\[\\]\"{}.,\n]{0,12}".prop_map(String::into_bytes),
    ];
    let numbers = prop_oneof![
        Just("0".to_owned()),
        Just("-1".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("1_000_000_000_000_000".to_owned()),
        Just("\"7\"".to_owned()),
        Just("1.5".to_owned()),
        (0u64..=u64::MAX).prop_map(|n| n.to_string()),
    ];
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<usize>(), tokens).prop_map(|(at, text)| Mutation::Insert { at, text }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Replace { at, byte }),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
        any::<usize>().prop_map(|line| Mutation::DuplicateLine { line }),
        (any::<usize>(), numbers).prop_map(|(at, text)| Mutation::Number { at, text }),
    ]
}

fn lines_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes.split(|byte| *byte == b'\n').map(<[u8]>::to_vec).collect()
}

fn apply(text: &str, mutations: &[Mutation]) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    for mutation in mutations {
        let len = bytes.len().max(1);
        match mutation {
            Mutation::Delete { at, len: n } => {
                let at = at % len;
                let end = (at + n).min(bytes.len());
                if at < end {
                    bytes.drain(at..end);
                }
            }
            Mutation::Insert { at, text } => {
                let at = at % (bytes.len() + 1);
                bytes.splice(at..at, text.iter().copied());
            }
            Mutation::Replace { at, byte } => {
                if !bytes.is_empty() {
                    let at = at % bytes.len();
                    bytes[at] = *byte;
                }
            }
            Mutation::SwapLines { a, b } => {
                let mut lines = lines_of(&bytes);
                let (a, b) = (a % lines.len(), b % lines.len());
                lines.swap(a, b);
                bytes = lines.join(&b'\n');
            }
            Mutation::DuplicateLine { line } => {
                let mut lines = lines_of(&bytes);
                let line = line % lines.len();
                lines.insert(line, lines[line].clone());
                bytes = lines.join(&b'\n');
            }
            Mutation::Number { at, text } => {
                let start = at % len;
                if let Some(offset) = bytes[start.min(bytes.len())..].iter().position(u8::is_ascii_digit) {
                    let from = start + offset;
                    let to = from + bytes[from..].iter().take_while(|b| b.is_ascii_digit() || **b == b'_').count();
                    bytes.splice(from..to, text.bytes());
                }
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn arbitrary_bytes_are_refused_by_position_and_key(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        check(bytes)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8192))]

    #[test]
    fn mutated_shipped_files_are_refused_by_position_and_key(
        file in 0usize..1024,
        mutations in proptest::collection::vec(mutation(), 1..6),
    ) {
        let files = files();
        check(apply(&files[file % files.len()], &mutations))?;
    }
}

#[test]
fn the_fuzzed_corpus_holds_every_kind_of_shipped_file() {
    let files = files();
    assert!(files.len() > 40, "{}", files.len());
    assert!(files.iter().any(|text| text.contains("kind = \"gate_policy\"")), "gate policies");
    assert!(files.iter().any(|text| text.contains("matrix_pairs")), "conformance cases");
    assert!(files.iter().any(|text| text.lines().any(|line| line.starts_with("runs ="))), "campaigns");
}

#[test]
fn the_refusal_format_check_can_fail() {
    assert!(names_file_position_and_key("fuzz.toml:3:7: fleet.nodes: duplicate key"));
    assert!(names_file_position_and_key("fuzz.toml:1:1: (top level): invalid key"));
    assert!(!names_file_position_and_key("fuzz.toml:3:7: duplicate key"), "no key");
    assert!(!names_file_position_and_key("fuzz.toml: not UTF-8 text"), "no position");
    assert!(!names_file_position_and_key("other.toml:1:1: a: b"), "another file");
}

// ---- Bounded work: no accepted input exceeds the stated bounds (docs/formats.md, "Bounds on a run's work") ----

/// A scenario file drawn across the sizes that matter to a run's work: the fleet, the site's machines, the run's
/// length, the loops' periods, and fault steps with their counts (some past every bound, most within).
fn sized_scenario() -> impl Strategy<Value = String> {
    (
        prop_oneof![3 => 1u32..=20, 1 => 1u32..=12_000],
        prop_oneof![2 => Just(0u32), 2 => 1u32..=4, 1 => 1u32..=1_200],
        prop_oneof![3 => 1u64..=3, 1 => 1u64..=26],
        proptest::option::of(1u64..=120_000),
        proptest::option::of(1u64..=60_000),
        proptest::collection::vec((0u32..4, 1u32..=3_000), 0..6),
    )
        .prop_map(|(nodes, machines, hours, sweep, poll, steps)| {
            let mut text = format!(
                "schema_version = 1\ndescription = \"work\"\nseed = 5\nduration_ms_max = {}\n\n[fleet]\nnodes = {nodes}\n",
                hours * 3_600_000
            );
            if let Some(sweep) = sweep {
                text.push_str(&format!("\n[hub]\nsweep_interval_ms = {sweep}\n"));
            }
            if machines > 0 {
                text.push_str(&format!("\n[onboarding]\nnodes = {machines}\n"));
                if let Some(poll) = poll {
                    text.push_str(&format!("poll_ms = {poll}\n"));
                }
            }
            for (index, (kind, count)) in steps.into_iter().enumerate() {
                let at_ms = 60_000 * (index as u64 + 1);
                text.push_str(&match kind {
                    0 => format!("\n[[step]]\nat_ms = {at_ms}\nkind = \"ssh_timeout\"\ntarget = \"node-01\"\ncount = {count}\n"),
                    1 => format!("\n[[step]]\nat_ms = {at_ms}\nkind = \"crash\"\ntarget = \"hub\"\n"),
                    2 => format!("\n[[step]]\nat_ms = {at_ms}\nkind = \"restart\"\ntarget = \"hub\"\n"),
                    _ => format!("\n[[step]]\nat_ms = {at_ms}\nkind = \"start_rollout\"\nrevision = \"2944aebb\"\n"),
                });
            }
            text
        })
}

/// A campaign file with a fault mix drawn from small to far past the bound.
fn sized_campaign() -> impl Strategy<Value = String> {
    (prop_oneof![3 => 1u32..=20, 1 => 1u32..=12_000], prop_oneof![3 => 1u64..=3, 1 => 1u64..=26], 1u32..=400, prop_oneof![1u32..=30, 1u32..=400], 1u32..=50)
        .prop_map(|(nodes, hours, partitions, bursts, timeouts)| {
            format!(
                "schema_version = 1\ndescription = \"work\"\nseed = 5\nruns = 10\nduration_ms = {}\nwindow_start_ms = 60_000\n\n\
                 [fleet]\nnodes = {nodes}\n\n[faults]\npartition = {{ per_mille = 1000, count_max = {partitions} }}\n\
                 ssh_timeout = {{ per_mille = 1000, count_max = {bursts}, timeouts_max = {timeouts} }}\n",
                hours * 3_600_000
            )
        })
}

/// The bounds an accepted run must keep, checked from its resolved spec.
fn within_bounds(spec: &sim::model::spec::RunSpec) -> Result<(), TestCaseError> {
    use sim::model::work;
    prop_assert!(work::entity_hours(spec) <= work::ENTITY_HOURS_MAX, "entity-hours {}", work::entity_hours(spec));
    prop_assert!(work::faults(spec) <= work::FAULTS_PER_RUN_MAX, "faults {}", work::faults(spec));
    prop_assert!(spec.hub.sweep_interval_ms >= work::PERIOD_MS_MIN);
    if let Some(onboarding) = &spec.onboarding {
        prop_assert!(onboarding.poll_ms >= work::PERIOD_MS_MIN);
    }
    prop_assert!(work::event_budget(spec) <= work::EVENTS_MAX);
    Ok(())
}

/// Runs `spec` when it is small enough for the test's time box, and holds it to its event budget.
fn runs_within_budget(spec: &sim::model::spec::RunSpec) -> Result<bool, TestCaseError> {
    if sim::model::work::entity_hours(spec) > 60 {
        return Ok(false);
    }
    let identity = sim::run::runner::RunIdentity { source: "fuzz.toml".into(), run_index: None, repro: String::new() };
    let output = sim::run::runner::run(spec, 5, &identity, false);
    let budget = sim::model::work::event_budget(spec);
    prop_assert!(
        output.record.trace_events <= budget,
        "{} events past a budget of {budget}",
        output.record.trace_events
    );
    prop_assert!(
        output.record.panic.as_deref().is_none_or(|panic| !panic.contains("its budget")),
        "{:?}",
        output.record.panic
    );
    Ok(true)
}

proptest! {
    // Time-boxed: the parses are cheap; only the accepted files of at most 60 entity-hours are run (about 35 of the
    // 192 cases, drawn towards small sizes: two seconds in the debug profile).
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_accepted_scenario_keeps_its_work_within_the_stated_bounds(text in sized_scenario()) {
        if let Ok(scenario) = sim::model::spec::parse_scenario("fuzz.toml", &text) {
            within_bounds(&scenario.run)?;
            runs_within_budget(&scenario.run)?;
        }
    }

    #[test]
    fn every_accepted_campaign_keeps_every_run_within_the_stated_bounds(text in sized_campaign()) {
        if let Ok(campaign) = sim::model::campaign::parse_campaign("fuzz.toml", &text) {
            prop_assert!(campaign.faults_max() <= sim::model::work::FAULTS_PER_RUN_MAX);
            for index in [0, 9] {
                let spec = campaign.run_spec(index);
                prop_assert!(sim::model::work::faults(&spec) <= campaign.faults_max(), "the mix bound under-counts");
                within_bounds(&spec)?;
            }
            runs_within_budget(&campaign.run_spec(0))?;
        }
    }
}

#[test]
fn the_bounds_refuse_what_the_issue_found_and_accept_the_heaviest_shipped_workload() {
    // Every fault count within its bound, their sum not: refused at `check`, naming the mix.
    let mix = "schema_version = 1\ndescription = \"d\"\nseed = 1\nruns = 1\nduration_ms = 3_600_000\n\
               window_start_ms = 60_000\n[fleet]\nnodes = 50\n[faults]\n\
               ssh_timeout = { per_mille = 1000, count_max = 100000, timeouts_max = 100000 }\n";
    let error = sim::model::campaign::parse_campaign("fuzz.toml", mix).unwrap_err().to_string();
    assert!(error.starts_with("fuzz.toml:9:1: faults: the fault mix can draw up to "), "{error}");
    // A day of the largest fleet; a millisecond sweep: refused.
    let day =
        "schema_version = 1\ndescription = \"d\"\nseed = 1\nduration_ms_max = 86_400_000\n[fleet]\nnodes = 10000\n";
    let error = sim::model::spec::parse_scenario("fuzz.toml", day).unwrap_err().to_string();
    assert!(error.contains("duration_ms_max: 10000 entities") && error.contains("240000 entity-hours"), "{error}");
    let sweep = "schema_version = 1\ndescription = \"d\"\nseed = 1\nduration_ms_max = 3_600_000\n[fleet]\nnodes = 3\n\
                 [hub]\nsweep_interval_ms = 1\n";
    let error = sim::model::spec::parse_scenario("fuzz.toml", sweep).unwrap_err().to_string();
    assert!(error.contains("hub.sweep_interval_ms: 1 ms is shorter than the 1000 ms"), "{error}");
    // The benchmark's 10,000 agents for two virtual hours is exactly at the bound, and accepted.
    let bench =
        "schema_version = 1\ndescription = \"d\"\nseed = 1\nduration_ms_max = 7_200_000\n[fleet]\nnodes = 10000\n";
    let spec = sim::model::spec::parse_scenario("fuzz.toml", bench).unwrap().run;
    assert_eq!(sim::model::work::entity_hours(&spec), sim::model::work::ENTITY_HOURS_MAX);
}
