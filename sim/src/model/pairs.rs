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
