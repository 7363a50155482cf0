//! The ids the world, the oracles and `drive` share: the engine's names of a machine's workflows.

pub use engine::workflow::ids::{decommission_workflow_id, machine_of_workflow, onboarding_workflow_id, workflow_id};
