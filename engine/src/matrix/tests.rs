//! The matrix is the seed: every table here is checked, cell by cell, against the verbatim TSV copies of the seed's
//! tables in `docs/recovery-matrix/`, and `docs/recovery-matrix.md` against [`render_markdown`].

use super::*;

const ONBOARDING_TSV: &str = include_str!("../../../docs/recovery-matrix/onboarding-matrix.tsv");
const DECOMMISSION_TSV: &str = include_str!("../../../docs/recovery-matrix/decommission-matrix.tsv");
const FAILURE_CLASSES_TSV: &str = include_str!("../../../docs/recovery-matrix/failure-classes.tsv");
const RECOVERY_ACTIONS_TSV: &str = include_str!("../../../docs/recovery-matrix/recovery-actions.tsv");
const TIMEOUTS_TSV: &str = include_str!("../../../docs/recovery-matrix/timeouts.tsv");

const STAGE_HEADER: [&str; 9] = [
    "Stage",
    "Typical failure classes",
    "Detect from",
    "Retryable?",
    "Safe recovery default",
    "Compensation",
    "Manual intervention boundary",
    "Resulting workflow state",
    "Resulting node state",
];

/// The rows of a TSV after checking its header.
fn tsv<'a>(text: &'a str, header: &[&str]) -> Vec<Vec<&'a str>> {
    let mut lines = text.lines();
    let first: Vec<&str> = lines.next().expect("a header line").split('\t').collect();
    assert_eq!(first, header, "tsv header");
    lines
        .map(|line| {
            let cells: Vec<&str> = line.split('\t').collect();
            assert_eq!(cells.len(), header.len(), "cells of {line:?}");
            cells
        })
        .collect()
}

fn check_stage_table(text: &str, rows: &[StageRow]) {
    let cells = tsv(text, &STAGE_HEADER);
    assert_eq!(cells.len(), rows.len(), "row count");
    for (tsv_row, row) in cells.iter().zip(rows) {
        let stage = row.stage.table_text();
        assert_eq!(tsv_row[0], stage, "stage");
        let classes: Vec<&str> = row.failure_classes.iter().map(|class| class.as_str()).collect();
        assert_eq!(tsv_row[1].split(", ").collect::<Vec<_>>(), classes, "{stage}: typical failure classes");
        assert_eq!(tsv_row[2], row.detect_from, "{stage}: detect from");
        assert_eq!(tsv_row[3], row.retryability_text, "{stage}: retryable?");
        assert_eq!(Retryability::from_table_text(tsv_row[3]), Some(row.retryability), "{stage}: typed retryability");
        assert_eq!(tsv_row[4], row.safe_default.text, "{stage}: safe recovery default");
        assert_eq!(tsv_row[5], row.compensation_text, "{stage}: compensation");
        assert_eq!(tsv_row[5].starts_with("none"), row.compensation.is_none(), "{stage}: typed compensation");
        assert_eq!(tsv_row[6], row.manual_intervention_boundary, "{stage}: manual intervention boundary");
        assert_eq!(tsv_row[7], row.workflow_states_text(), "{stage}: resulting workflow state");
        assert_eq!(tsv_row[8], row.node_states.table_text(), "{stage}: resulting node state");
    }
}

#[test]
fn the_onboarding_table_is_section_4_of_the_seed() {
    check_stage_table(ONBOARDING_TSV, ONBOARDING);
    let stages: Vec<Stage> = ONBOARDING.iter().map(|row| row.stage).collect();
    let expected: Vec<Stage> = OnboardingStage::ALL.into_iter().map(Stage::Onboarding).collect();
    assert_eq!(stages, expected, "16 stages, in order");
}

#[test]
fn the_decommission_table_is_section_5_of_the_seed() {
    check_stage_table(DECOMMISSION_TSV, DECOMMISSION);
    let stages: Vec<Stage> = DECOMMISSION.iter().map(|row| row.stage).collect();
    let expected: Vec<Stage> = DecommissionStage::ALL.into_iter().map(Stage::Decommission).collect();
    assert_eq!(stages, expected, "11 stages, in order");
}

#[test]
fn the_seed_s_60_stage_and_failure_class_pairs_are_39_onboarding_and_21_decommission() {
    assert_eq!(pair_count(ONBOARDING), 39);
    assert_eq!(pair_count(DECOMMISSION), 21);
    assert_eq!(pair_count(ONBOARDING) + pair_count(DECOMMISSION), 60, "60 pairs across both tables");
    for row in ONBOARDING.iter().chain(DECOMMISSION) {
        let mut classes = row.failure_classes.to_vec();
        classes.sort();
        classes.dedup();
        assert_eq!(classes.len(), row.failure_classes.len(), "{}: a class listed twice", row.stage.as_str());
    }
}

#[test]
fn each_stage_finds_its_own_row() {
    for stage in Stage::all() {
        assert_eq!(stage.row().stage, stage);
    }
    assert_eq!(Stage::all().count(), 27);
}

#[test]
fn failure_classes_and_recovery_actions_are_sections_2_and_3_of_the_seed() {
    let classes = tsv(FAILURE_CLASSES_TSV, &["Class", "Meaning"]);
    assert_eq!(classes.len(), FailureClass::ALL.len());
    for (cells, class) in classes.iter().zip(FailureClass::ALL) {
        assert_eq!(cells[..], [class.as_str(), class.meaning()]);
    }
    let actions = tsv(RECOVERY_ACTIONS_TSV, &["Action", "Meaning"]);
    assert_eq!(actions.len(), RecoveryAction::ALL.len());
    for (cells, action) in actions.iter().zip(RecoveryAction::ALL) {
        assert_eq!(cells[..], [action.as_str(), action.meaning()]);
    }
}

#[test]
fn the_timeouts_are_section_6_of_the_seed() {
    let rows = tsv(TIMEOUTS_TSV, &["Timeout", "Failure class", "Default workflow state", "Recommended default action"]);
    assert_eq!(rows.len(), TIMEOUTS.len());
    for (cells, row) in rows.iter().zip(TIMEOUTS) {
        assert_eq!(cells[..], [row.name, row.failure_class_text, row.workflow_state_text, row.action_text]);
        for class in row.failure_classes {
            assert!(cells[1].contains(class.as_str()), "{}: {} is in the seed's words", row.name, class.as_str());
        }
        for state in row.workflow_states {
            assert!(cells[2].contains(state.as_str()), "{}: {} is in the seed's words", row.name, state.as_str());
        }
        assert!(row.default_ms > 0 && !row.default_source.is_empty(), "{}: a sourced default", row.name);
    }
    let kinds: Vec<TimeoutKind> = TIMEOUTS.iter().map(|row| row.timeout).collect();
    let mut sorted = kinds.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(kinds, sorted, "each timeout once, in order");
    assert_eq!(kinds, TimeoutKind::ALL, "TimeoutKind::ALL is section 6 in its order");
}

#[test]
fn every_timeout_bounds_a_stage_whose_row_lists_its_classes_and_states() {
    for timeout in TIMEOUTS {
        let row = timeout.stage.row();
        for class in timeout.failure_classes {
            assert!(row.lists(*class), "{}: {} is not typical at {}", timeout.name, class.as_str(), row.stage.as_str());
        }
        for state in timeout.workflow_states {
            assert!(
                row.admits_workflow_state(*state),
                "{}: {} at {}",
                timeout.name,
                state.as_str(),
                row.stage.as_str()
            );
        }
    }
}

#[test]
fn serde_names_are_the_seed_s_names() {
    fn name<T: serde::Serialize>(value: T) -> String {
        serde_json::to_value(value).unwrap().as_str().unwrap().to_owned()
    }
    for class in FailureClass::ALL {
        assert_eq!(name(class), class.as_str());
        assert_eq!(serde_json::from_value::<FailureClass>(class.as_str().into()).unwrap(), class);
    }
    for action in RecoveryAction::ALL {
        assert_eq!(name(action), action.as_str());
    }
    for state in WorkflowState::ALL {
        assert_eq!(name(state), state.as_str());
    }
    for state in NodeState::ALL {
        assert_eq!(name(state), state.as_str());
    }
    for stage in OnboardingStage::ALL {
        assert_eq!(name(stage), stage.as_str());
    }
    for stage in DecommissionStage::ALL {
        assert_eq!(name(stage), stage.as_str());
    }
    for retryability in Retryability::ALL {
        assert_eq!(name(retryability), retryability.as_str());
    }
}

#[test]
fn every_retryability_phrase_of_the_seed_is_typed_once() {
    let mut phrases: Vec<&str> = Retryability::ALL.iter().flat_map(|r| r.table_texts().iter().copied()).collect();
    let count = phrases.len();
    phrases.sort_unstable();
    phrases.dedup();
    assert_eq!(phrases.len(), count, "a phrase typed twice");
    let mut used: Vec<&str> = ONBOARDING.iter().chain(DECOMMISSION).map(|row| row.retryability_text).collect();
    used.sort_unstable();
    used.dedup();
    assert_eq!(used, phrases, "the nine phrases of the seed, no more");
    assert_eq!(Retryability::from_table_text("maybe"), None);
}

#[test]
fn node_states_admit_what_the_row_says() {
    let either = NodeStates::OneOf(&[NodeState::Quarantined, NodeState::Retired]);
    assert!(either.admits(NodeState::Active, NodeState::Retired));
    assert!(!either.admits(NodeState::Active, NodeState::Active));
    assert!(NodeStates::Unchanged.admits(NodeState::Active, NodeState::Active));
    assert!(!NodeStates::Unchanged.admits(NodeState::Active, NodeState::Quarantined));
}

/// `docs/recovery-matrix.md` is generated from the table; `FLEETSIM_BLESS=1` rewrites it.
#[test]
fn docs_recovery_matrix_md_is_rendered_from_the_table() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/recovery-matrix.md");
    let rendered = render_markdown();
    if std::env::var_os("FLEETSIM_BLESS").is_some() {
        std::fs::write(&path, &rendered).expect("write docs/recovery-matrix.md");
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == rendered,
        "docs/recovery-matrix.md is not what engine::matrix::render_markdown renders: regenerate it with \
         `FLEETSIM_BLESS=1 cargo test -p engine matrix` and commit the result"
    );
}

#[test]
fn the_rendered_document_names_every_stage_class_and_timeout() {
    let markdown = render_markdown();
    for stage in Stage::all() {
        assert!(markdown.contains(&format!("`{}`", stage.table_text())), "{}", stage.as_str());
    }
    for class in FailureClass::ALL {
        assert!(markdown.contains(class.meaning()), "{}", class.as_str());
    }
    for timeout in TIMEOUTS {
        assert!(markdown.contains(&format!("{} ms", timeout.default_ms)), "{}", timeout.name);
    }
    assert!(markdown.contains("60 pairs in all"));
}

/// Found by cargo-mutants (`docs/testing.md`): a row lists exactly its typical classes, and each section 7 condition's
/// name is its serde name, the one conformance cases spell.
#[test]
fn a_row_lists_only_its_classes_and_each_condition_is_named_as_serde_names_it() {
    for stage in Stage::all() {
        let row = stage.row();
        for class in FailureClass::ALL {
            assert_eq!(row.lists(class), row.failure_classes.contains(&class), "{} {}", stage.as_str(), class.as_str());
        }
    }
    assert!(!Stage::Onboarding(OnboardingStage::RenderCloudInit).row().lists(FailureClass::UpstreamTransient));
    let mut names = Vec::new();
    for condition in OutOfBandCondition::ALL {
        assert_eq!(serde_json::to_value(condition).unwrap(), serde_json::json!(condition.as_str()));
        names.push(condition.as_str());
    }
    assert_eq!(
        names,
        ["late_agent_enrollment", "operator_changed_maas_state", "machine_reappeared_with_different_state"]
    );
}
