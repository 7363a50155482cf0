//! The ids of a machine's MAAS workflows, which the controller names them by (stable across its restarts and across
//! resumes): `onboard-<machine>` and `decommission-<machine>`, and the machine a workflow id names.

use crate::matrix::Workflow;

/// The id of `machine`'s onboarding workflow.
pub fn onboarding_workflow_id(machine: &str) -> String {
    format!("onboard-{machine}")
}

/// The id of `machine`'s decommission workflow.
pub fn decommission_workflow_id(machine: &str) -> String {
    format!("decommission-{machine}")
}

/// The id of `machine`'s `workflow`.
pub fn workflow_id(workflow: Workflow, machine: &str) -> String {
    match workflow {
        Workflow::Onboarding => onboarding_workflow_id(machine),
        Workflow::Decommission => decommission_workflow_id(machine),
    }
}

/// The machine a workflow id names (`onboard-<machine>`, `decommission-<machine>`); any other id as it is.
pub fn machine_of_workflow(workflow: &str) -> &str {
    workflow.strip_prefix("onboard-").or_else(|| workflow.strip_prefix("decommission-")).unwrap_or(workflow)
}
