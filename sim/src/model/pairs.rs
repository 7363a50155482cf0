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
}
