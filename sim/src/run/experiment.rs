//! Paired experiments (`fleetsim experiment`): a base and a variant campaign run on the same run seeds, so run `i`
//! of each meets the same seed and, when the change leaves the fault mix alone, the same fault plan. The pure parts
//! live here: which settings differ ([`differences`]), the paired outcome table ([`pair`]) and its rendering.

use reports::{DiscordantPair, ExperimentReport, PairTable, RunRecord};

use crate::model::campaign::Campaign;

/// The settings in which `variant` differs from `base`, compared on the resolved campaigns field by field, named
/// by their dotted key in the resolved configuration (`engine.rollout_policy`, `faults.partition.per_mille`,
/// `fleet.nodes`). `seed`, `runs`, `description` and the file's path do not count: the experiment sets the first two
/// for both, and the others change no behaviour.
pub fn differences(base: &Campaign, variant: &Campaign) -> Vec<String> {
    let (a, b) = (settings(base), settings(variant));
    let mut out = Vec::new();
    diff("", &a, &b, &mut out);
    out
}

fn settings(campaign: &Campaign) -> serde_json::Value {
    let mut value = serde_json::to_value(campaign).expect("campaigns serialise");
    if let Some(map) = value.as_object_mut() {
        map.remove("seed");
        map.remove("runs");
        // The base run's settings are the file's top-level keys and sections; lift them so they are named as there.
        if let Some(serde_json::Value::Object(base)) = map.remove("base") {
            for (key, setting) in base {
                if key != "source" && key != "description" {
                    map.insert(key, setting);
                }
            }
        }
    }
    value
}

fn diff(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                diff(&child, a.get(key).unwrap_or(&Value::Null), b.get(key).unwrap_or(&Value::Null), out);
            }
        }
        _ if a != b => out.push(path.to_owned()),
        _ => {}
    }
}

/// The command that replays run `index` of a campaign file in an experiment: `--seed` when the experiment's seed is
/// not the file's, `--runs` when the index is past the file's own runs.
pub fn repro_line(campaign: &Campaign, file_seed: u64, file_runs: u64, index: u64) -> String {
    let seed = if campaign.seed != file_seed { format!(" --seed {}", campaign.seed) } else { String::new() };
    let runs = if index >= file_runs { format!(" --runs {}", campaign.runs) } else { String::new() };
    format!("fleetsim campaign {}{seed}{runs} --run {index}", campaign.source)
}

/// Pairs the two arms' records run by run (both in run order, same length) and counts the four outcomes; the
/// discordant pairs carry both verdicts and the commands that replay each side (`repro(arm, index)`, arm 0 the base).
pub fn pair(
    base: &[RunRecord],
    variant: &[RunRecord],
    repro: impl Fn(usize, u64) -> String,
) -> (PairTable, Vec<DiscordantPair>) {
    let mut table = PairTable::default();
    let mut discordant = Vec::new();
    for (b, v) in base.iter().zip(variant) {
        let index = b.run_index.unwrap_or(0);
        match (b.verdict.passed(), v.verdict.passed()) {
            (true, true) => table.both_pass += 1,
            (false, false) => table.both_fail += 1,
            (base_passed, _) => {
                if base_passed {
                    table.only_variant_fails += 1;
                } else {
                    table.only_base_fails += 1;
                }
                discordant.push(DiscordantPair {
                    run_index: index,
                    seed: b.seed,
                    base: b.verdict,
                    variant: v.verdict,
                    base_repro: repro(0, index),
                    variant_repro: repro(1, index),
                });
            }
        }
    }
    (table, discordant)
}

/// The experiment for people: what differs, the 2×2 table, and each discordant pair with its replay commands.
pub fn render(report: &ExperimentReport) -> String {
    let t = &report.table;
    let mut text = format!(
        "experiment {} vs {}: {} paired runs, seed {}\n",
        report.base.campaign, report.variant.campaign, report.runs, report.seed
    );
    text.push_str(&format!("  differs in    {}\n", report.differences.join(", ")));
    text.push_str(&format!("  {:<28} {:>8}\n", "", "pairs"));
    text.push_str(&format!("  {:<28} {:>8}\n", "both pass", t.both_pass));
    text.push_str(&format!("  {:<28} {:>8}\n", "only base fails", t.only_base_fails));
    text.push_str(&format!("  {:<28} {:>8}\n", "only variant fails", t.only_variant_fails));
    text.push_str(&format!("  {:<28} {:>8}\n", "both fail", t.both_fail));
    text.push_str(&format!(
        "  base          {} passed, {} failed\n  variant       {} passed, {} failed\n",
        report.base.passed, report.base.failed, report.variant.passed, report.variant.failed
    ));
    if report.discordant.is_empty() {
        text.push_str("  discordant    none\n");
    }
    for pair in &report.discordant {
        text.push_str(&format!(
            "  run {} seed {}: base {}, variant {}\n    base:    {}\n    variant: {}\n",
            pair.run_index,
            pair.seed,
            pair.base.label(),
            pair.variant.label(),
            pair.base_repro,
            pair.variant_repro
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use reports::{FailureKind, Verdict};

    const BASE: &str = r#"
schema_version = 1
description = "base"
seed = 9
runs = 4
duration_ms = 7_200_000

[fleet]
nodes = 10

[faults]
partition = { per_mille = 1000, count_max = 3 }
"#;

    fn campaign(text: &str) -> Campaign {
        crate::model::campaign::parse_campaign("c.toml", text).unwrap()
    }

    #[test]
    fn seed_runs_and_description_do_not_count_and_every_other_setting_is_named() {
        let base = campaign(BASE);
        let same = campaign(
            &BASE.replace("seed = 9", "seed = 10").replace("runs = 4", "runs = 8").replace("\"base\"", "\"v\""),
        );
        assert_eq!(differences(&base, &same), Vec::<String>::new());
        let one = campaign(&BASE.replace("nodes = 10", "nodes = 11"));
        assert_eq!(differences(&base, &one), vec!["fleet.nodes"]);
        let two = campaign(&format!(
            "{}\n[engine]\nrollout_policy = \"legacy\"\n",
            BASE.replace("per_mille = 1000", "per_mille = 500")
        ));
        assert_eq!(differences(&base, &two), vec!["engine.rollout_policy", "faults.partition.per_mille"]);
        let added = campaign(&BASE.replace("[faults]", "[faults]\nhub_crash = { per_mille = 10 }"));
        assert_eq!(differences(&base, &added), vec!["faults.hub_crash"]);
    }

    fn record(index: u64, passed: bool) -> RunRecord {
        let verdict = if passed { Verdict::PASS } else { Verdict::fail(FailureKind::SafetyViolation) };
        RunRecord {
            schema_version: 1,
            tool_version: "0.1.0".into(),
            commit: "c".into(),
            config_hash: "h".into(),
            config: serde_json::json!({}),
            source: "c.toml".into(),
            run_index: Some(index),
            seed: 100 + index,
            verdict,
            trace_digest: "d".into(),
            trace_events: 1,
            virtual_duration_ms: 1,
            faults: Default::default(),
            matrix_pairs: Default::default(),
            fault_phases: Default::default(),
            fault_log: Vec::new(),
            availability: vec![],
            availability_cut_ms: None,
            batches: vec![],
            lanes: vec![],
            rollouts: vec![],
            workflows: vec![],
            violations: vec![],
            violation_counts: Default::default(),
            reached: vec![],
            unmet: vec![],
            panic: None,
            repro: String::new(),
        }
    }

    #[test]
    fn the_table_counts_each_pair_once_and_lists_the_discordant_ones_with_both_replays() {
        // base:    P P F F P F
        // variant: P F P F F F
        let base: Vec<RunRecord> =
            [true, true, false, false, true, false].iter().enumerate().map(|(i, p)| record(i as u64, *p)).collect();
        let variant: Vec<RunRecord> =
            [true, false, true, false, false, false].iter().enumerate().map(|(i, p)| record(i as u64, *p)).collect();
        let (table, discordant) = pair(&base, &variant, |arm, index| format!("arm {arm} run {index}"));
        assert_eq!(table, PairTable { both_pass: 1, only_base_fails: 1, only_variant_fails: 2, both_fail: 2 });
        let runs: Vec<(u64, u64)> = discordant.iter().map(|d| (d.run_index, d.seed)).collect();
        assert_eq!(runs, vec![(1, 101), (2, 102), (4, 104)]);
        assert_eq!(discordant[1].base_repro, "arm 0 run 2");
        assert_eq!(discordant[1].variant_repro, "arm 1 run 2");
        assert!(discordant[1].variant.passed() && !discordant[1].base.passed());
    }

    #[test]
    fn a_replay_line_names_the_seed_and_runs_only_when_the_file_does_not() {
        let mut c = campaign(BASE);
        assert_eq!(repro_line(&c, 9, 4, 2), "fleetsim campaign c.toml --run 2");
        c.seed = 5;
        c.runs = 10;
        assert_eq!(repro_line(&c, 9, 4, 7), "fleetsim campaign c.toml --seed 5 --runs 10 --run 7");
    }
}
