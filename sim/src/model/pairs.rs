//! The recovery matrix's (stage, failure class) pairs as runs, reports and files name them: `stage/failure_class`
//! for onboarding, `decommission:stage/failure_class` for decommission.

/// How a decommission `stage/failure_class` pair is named among the matrix pairs (the two workflows share the stage
/// name `load_site_config`).
pub const DECOMMISSION_PAIR_PREFIX: &str = "decommission:";

/// The recovery matrix's listed (typical) `stage/failure_class` pairs of the onboarding workflow, in table order:
/// what a campaign report's `summary.matrix_listed` holds, so the report can show coverage without the engine.
pub fn matrix_listed_pairs() -> Vec<String> {
    workflow_listed_pairs(engine::matrix::Workflow::Onboarding)
}

/// The listed pairs of one workflow, in table order; a decommission pair is named `decommission:stage/class`
/// (the two workflows share the stage name `load_site_config`).
pub fn workflow_listed_pairs(workflow: engine::matrix::Workflow) -> Vec<String> {
    engine::matrix::Stage::all()
        .filter(|stage| stage.workflow() == workflow)
        .flat_map(|stage| {
            let prefix = match workflow {
                engine::matrix::Workflow::Onboarding => "",
                engine::matrix::Workflow::Decommission => DECOMMISSION_PAIR_PREFIX,
            };
            stage
                .row()
                .failure_classes
                .iter()
                .map(move |class| format!("{prefix}{}/{}", stage.as_str(), class.as_str()))
        })
        .collect()
}

/// The workflow whose listed pairs include `pair`, if any.
pub fn listed_pair_workflow(pair: &str) -> Option<engine::matrix::Workflow> {
    [engine::matrix::Workflow::Onboarding, engine::matrix::Workflow::Decommission]
        .into_iter()
        .find(|workflow| workflow_listed_pairs(*workflow).iter().any(|listed| listed == pair))
}

/// The workflow of an implied pair: `stage/upstream_transient` (or `decommission:stage/upstream_transient`) of a row
/// that lists other classes but retries "only a transient cause" ("yes if transient dependency", "usually no": only a
/// transient read is retried). Such a row's transient is handled by the row (retried, its compensation run), but it
/// is not among the 60 listed pairs coverage counts; a conformance case may declare it.
pub fn implied_transient_pair_workflow(pair: &str) -> Option<engine::matrix::Workflow> {
    use engine::matrix::{FailureClass, Retryability, Stage};
    let (workflow, rest) = match pair.strip_prefix(DECOMMISSION_PAIR_PREFIX) {
        Some(rest) => (engine::matrix::Workflow::Decommission, rest),
        None => (engine::matrix::Workflow::Onboarding, pair),
    };
    let stage = rest.strip_suffix(&format!("/{}", FailureClass::UpstreamTransient.as_str()))?;
    let stage = Stage::all().find(|known| known.workflow() == workflow && known.as_str() == stage)?;
    let row = stage.row();
    let transient_only = matches!(row.retryability, Retryability::TransientOnly | Retryability::UsuallyNo);
    (transient_only && !row.failure_classes.contains(&FailureClass::UpstreamTransient)).then_some(workflow)
}

/// The recovery work a run can name, `stage/work/outcome` (decommission stages prefixed as in a pair): a stage of
/// the workflow, a compensation of the matrix or `reseed`, and `performed`, `not_due` or `failed`.
pub fn is_recovery_work(entry: &str) -> bool {
    let mut parts = entry.rsplitn(3, '/');
    let (Some(outcome), Some(work), Some(stage)) = (parts.next(), parts.next(), parts.next()) else { return false };
    let stage_known = match stage.strip_prefix(DECOMMISSION_PAIR_PREFIX) {
        Some(stage) => engine::matrix::DecommissionStage::ALL.iter().any(|known| known.as_str() == stage),
        None => engine::matrix::OnboardingStage::ALL.iter().any(|known| known.as_str() == stage),
    };
    let work_known =
        work == "reseed" || engine::matrix::Compensation::ALL.iter().any(|compensation| compensation.as_str() == work);
    stage_known && work_known && ["performed", "not_due", "failed"].contains(&outcome)
}

/// The compensation a `stage/work/outcome` entry performed, if it is one.
pub fn performed_compensation(entry: &str) -> Option<&str> {
    let mut parts = entry.rsplitn(3, '/');
    let (outcome, work) = (parts.next()?, parts.next()?);
    (outcome == "performed" && work != "reseed").then_some(work)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transient_is_implied_only_where_the_row_retries_transients_and_does_not_list_them() {
        let onboarding = Some(engine::matrix::Workflow::Onboarding);
        assert_eq!(implied_transient_pair_workflow("render_cloud_init/upstream_transient"), onboarding);
        assert_eq!(listed_pair_workflow("render_cloud_init/upstream_transient"), None);
        // Listed already, another class, a row that retries everything, an unknown stage: not implied.
        assert_eq!(implied_transient_pair_workflow("load_site_config/upstream_transient"), None);
        assert_eq!(implied_transient_pair_workflow("render_cloud_init/hardware_mismatch"), None);
        assert_eq!(implied_transient_pair_workflow("decommission:render_cloud_init/upstream_transient"), None);
        assert_eq!(implied_transient_pair_workflow("no_such_stage/upstream_transient"), None);
    }

    #[test]
    fn the_listed_matrix_pairs_are_the_onboarding_table() {
        let pairs = matrix_listed_pairs();
        assert_eq!(pairs.len(), 39, "docs/recovery-matrix.md: 39 onboarding pairs");
        assert_eq!(pairs.first().map(String::as_str), Some("load_site_config/input_config_error"));
        assert!(pairs.contains(&"wait_for_agent_enrollment/state_ambiguity".to_owned()));
    }

    #[test]
    fn recovery_work_names_a_stage_a_work_and_an_outcome() {
        assert!(is_recovery_work("ensure_pxe_interface_auto/unlink_relink_interface/performed"));
        assert!(is_recovery_work("decommission:release_maas_node/abort_mark_fixed_no_erase_release/not_due"));
        assert!(is_recovery_work("wait_for_hardware_sync_healthy/reseed/failed"));
        for bad in ["x/reseed/performed", "wait_for_ready/dance/performed", "wait_for_ready/reseed/maybe", "reseed"] {
            assert!(!is_recovery_work(bad), "{bad}");
        }
        assert_eq!(performed_compensation("deploy_via_maas/release_to_ready/performed"), Some("release_to_ready"));
        assert_eq!(performed_compensation("deploy_via_maas/release_to_ready/not_due"), None);
    }
}
