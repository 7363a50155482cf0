//! `fleetsim experiment`: two campaign files that differ in one setting are paired run by run on the same seeds; two
//! settings are refused with both named unless `--allow-multi`; the table agrees with the two campaigns run alone.

#[path = "support/small_campaign.rs"]
mod small_campaign;
use small_campaign::{SSH_TIMEOUTS, small_campaign};

use sim::model::exit::{EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS};

#[path = "support/in_process.rs"]
mod in_process;
use in_process::fleetsim;

fn base_text() -> String {
    small_campaign("experiment base: lanes", 3, 5, &[SSH_TIMEOUTS, "marker_drift = { per_mille = 300 }"], &[])
}

/// The base under the incident's serial controller: another description and seed, which do not count.
fn legacy() -> String {
    base_text()
        .replace("[faults]", "[engine]\nrollout_policy = \"legacy\"\n\n[faults]")
        .replace("experiment base: lanes", "experiment variant: legacy")
        .replace("seed = 3", "seed = 4")
}

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        Files { dir: tempfile::tempdir().unwrap() }
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

#[test]
fn a_one_setting_experiment_pairs_runs_on_the_base_seeds_and_its_table_matches_the_campaigns_alone() {
    let files = Files::new();
    let base = files.write("base.toml", &base_text());
    let variant = files.write("legacy.toml", &legacy());
    let out = files.path("exp");
    let (code, text, err) = fleetsim(&["experiment", &base, &variant, "--runs", "4", "--jobs", "2", "--out", &out]);
    assert_eq!(code, EXIT_PASS, "{text}{err}");
    assert!(text.contains("  differs in    engine.rollout_policy\n"), "{text}");
    let report: reports::ExperimentReport =
        serde_json::from_str(&std::fs::read_to_string(format!("{out}/experiment.json")).unwrap()).unwrap();
    assert_eq!(report.kind, "experiment");
    assert_eq!(report.differences, ["engine.rollout_policy"]);
    assert_eq!((report.runs, report.seed), (4, 3));

    // The same two campaigns run alone, the variant on the base's seed: their verdicts, paired by index.
    let alone = |file: &str, name: &str| -> reports::CampaignReport {
        let dir = files.path(name);
        let (code, _, err) = fleetsim(&["campaign", file, "--runs", "4", "--seed", "3", "--jobs", "2", "--out", &dir]);
        assert!(code == EXIT_PASS || code == EXIT_FAIL, "{err}");
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/report.json")).unwrap()).unwrap()
    };
    let (a, b) = (alone(&base, "a"), alone(&variant, "b"));
    let mut expected = reports::PairTable::default();
    for (x, y) in a.runs.iter().zip(&b.runs) {
        assert_eq!(x.seed, y.seed, "paired runs share their seed");
        match (x.verdict.passed(), y.verdict.passed()) {
            (true, true) => expected.both_pass += 1,
            (false, true) => expected.only_base_fails += 1,
            (true, false) => expected.only_variant_fails += 1,
            (false, false) => expected.both_fail += 1,
        }
    }
    assert_eq!(report.table, expected);
    assert!(report.table.only_variant_fails > 0, "the serial controller breaks the floor: {:?}", report.table);
    assert_eq!(report.base.campaign_digest, a.summary.campaign_digest);
    assert_eq!(report.variant.campaign_digest, b.summary.campaign_digest);
    let discordant = report.discordant.len() as u64;
    assert_eq!(discordant, expected.only_base_fails + expected.only_variant_fails);
    for pair in &report.discordant {
        let index = pair.run_index as usize;
        assert_eq!(pair.seed, a.runs[index].seed);
        assert_eq!(pair.base_repro, format!("fleetsim campaign {base} --run {index}"));
        assert_eq!(pair.variant_repro, format!("fleetsim campaign {variant} --seed 3 --run {index}"));
        assert!(text.contains(&format!("    variant: {}\n", pair.variant_repro)), "{text}");
    }
}

#[test]
fn two_settings_are_refused_with_both_named_unless_allowed() {
    let files = Files::new();
    let base = files.write("base.toml", &base_text());
    let variant = files.write("two.toml", &legacy().replace("nodes = 6", "nodes = 7"));
    let (code, out, err) = fleetsim(&["experiment", &base, &variant, "--runs", "1"]);
    assert_eq!((code, out.as_str()), (EXIT_BAD_INPUT, ""));
    assert_eq!(
        err,
        format!(
            "error: {variant}: differs from {base} in 2 settings (engine.rollout_policy, fleet.nodes); an experiment changes one, so an outcome can be put down to it — pass --allow-multi to compare them anyway\n"
        )
    );
    let out_dir = files.path("multi");
    let (code, out, err) =
        fleetsim(&["experiment", &base, &variant, "--runs", "1", "--allow-multi", "--out", &out_dir]);
    assert_eq!(code, EXIT_PASS, "{err}");
    assert!(out.contains("  differs in    engine.rollout_policy, fleet.nodes\n"), "{out}");

    let same = files.write("same.toml", &base_text().replace("seed = 3", "seed = 8"));
    let (code, _, err) = fleetsim(&["experiment", &base, &same, "--runs", "1"]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(err.contains("differs from") && err.contains("in no setting"), "{err}");
}
