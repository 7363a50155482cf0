//! The decommission workflow's journal records: one line `decommission <json>` per run start, stage attempt, stop,
//! completion, compensation and refusal, and what they say about the workflow's history (the shared fold of [`crate::workflow::record`]).

use serde::{Deserialize, Serialize};

use crate::matrix::{DecommissionStage, FailureClass, WorkflowState};
use crate::ports::events::{RecoveryWork, WorkOutcome, WorkerReference};
use crate::workflow::record::{self, Entry, History, WorkflowRecord};

/// A journal line of a decommission workflow: `decommission <json>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case", deny_unknown_fields)]
pub enum DecommissionRecord {
    RunStarted {
        workflow: String,
        run: u32,
    },
    Checkpoint {
        workflow: String,
        run: u32,
        stage: DecommissionStage,
        attempt: u32,
    },
    Stopped {
        workflow: String,
        run: u32,
        stage: DecommissionStage,
        class: FailureClass,
        workflow_state: WorkflowState,
    },
    Completed {
        workflow: String,
        run: u32,
        workflow_state: WorkflowState,
    },
    /// A compensation done for a failure of `stage`, and what came of it.
    Work {
        workflow: String,
        run: u32,
        stage: DecommissionStage,
        work: RecoveryWork,
        outcome: WorkOutcome,
    },
    /// A request refused before its run began, naming what references the worker; no run, nothing changed.
    Refused {
        workflow: String,
        stage: DecommissionStage,
        class: FailureClass,
        workflow_state: WorkflowState,
        references: Vec<WorkerReference>,
    },
}

impl DecommissionRecord {
    pub fn encode(&self) -> String {
        record::encode(self)
    }

    /// `None` for another subsystem's line.
    pub fn decode(line: &str) -> Option<Result<DecommissionRecord, String>> {
        record::decode(line)
    }
}

impl WorkflowRecord for DecommissionRecord {
    type Stage = DecommissionStage;
    /// The state a completed workflow ended in (`completed`, or `completed_with_follow_up_record`).
    type Completion = WorkflowState;
    const PREFIX: &'static str = "decommission ";
    const KIND: &'static str = "decommission";

    fn entry(&self) -> Entry<'_, DecommissionStage, WorkflowState> {
        match self {
            DecommissionRecord::RunStarted { workflow, run } => Entry::RunStarted { workflow, run: *run },
            DecommissionRecord::Checkpoint { workflow, stage, .. } => Entry::Checkpoint { workflow, stage: *stage },
            DecommissionRecord::Stopped { workflow, workflow_state, .. } => {
                Entry::Stopped { workflow, workflow_state: *workflow_state }
            }
            DecommissionRecord::Completed { workflow, workflow_state, .. } => {
                Entry::Completed { workflow, completion: *workflow_state }
            }
            DecommissionRecord::Work { workflow, .. } => Entry::Work { workflow },
            DecommissionRecord::Refused { workflow, .. } => Entry::Refused { workflow },
        }
    }
}

/// What the journal says about one decommission workflow: `interrupted_at` is the stage the last run's controller
/// died at (stages run strictly in order, so every stage before it was done or passed by the matrix).
pub type DecommissionHistory = History<DecommissionRecord>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_counts_runs_failed_runs_and_completion_of_one_workflow_only() {
        let lines = [
            DecommissionRecord::RunStarted { workflow: "w".into(), run: 1 }.encode(),
            DecommissionRecord::Checkpoint {
                workflow: "w".into(),
                run: 1,
                stage: DecommissionStage::DrainNode,
                attempt: 1,
            }
            .encode(),
            DecommissionRecord::Stopped {
                workflow: "w".into(),
                run: 1,
                stage: DecommissionStage::DisableNode,
                class: FailureClass::UpstreamTransient,
                workflow_state: WorkflowState::FailedRetryable,
            }
            .encode(),
            DecommissionRecord::RunStarted { workflow: "other".into(), run: 7 }.encode(),
            "onboard {\"record\":\"run_started\",\"workflow\":\"w\",\"run\":9}".to_owned(),
        ];
        let history = DecommissionHistory::of("w", lines.iter().map(String::as_str)).expect("decodes");
        assert_eq!(history.runs, 1);
        assert_eq!(history.failed_retryable_runs, 1);
        assert_eq!(history.last_stage, Some(DecommissionStage::DrainNode));
        assert_eq!(history.completed, None);
        assert_eq!(history.interrupted_at, None, "the run stopped");
        assert!(!history.unfinished, "the run stopped");
        let died = [
            DecommissionRecord::RunStarted { workflow: "w".into(), run: 1 }.encode(),
            DecommissionRecord::Checkpoint {
                workflow: "w".into(),
                run: 1,
                stage: DecommissionStage::ReleaseMaasNode,
                attempt: 1,
            }
            .encode(),
        ];
        let history = DecommissionHistory::of("w", died.iter().map(String::as_str)).expect("decodes");
        assert_eq!(history.interrupted_at, Some(DecommissionStage::ReleaseMaasNode));
        assert!(history.unfinished);
        let refused = DecommissionRecord::Refused {
            workflow: "w".into(),
            stage: DecommissionStage::DisableNode,
            class: FailureClass::StateAmbiguity,
            workflow_state: WorkflowState::FailedRetryable,
            references: vec![WorkerReference::Hold { owner: "operator:x".into() }],
        };
        let line = refused.encode();
        assert_eq!(
            line,
            r#"decommission {"record":"refused","workflow":"w","stage":"disable_node","class":"state_ambiguity","workflow_state":"failed_retryable","references":[{"kind":"hold","owner":"operator:x"}]}"#
        );
        let after = [lines[0].clone(), lines[2].clone(), line.clone(), line];
        let history = DecommissionHistory::of("w", after.iter().map(String::as_str)).expect("decodes");
        assert_eq!((history.runs, history.failed_retryable_runs, history.refusals), (1, 1, 2), "a refusal is no run");
        assert_eq!(history.last_stop, Some(WorkflowState::FailedRetryable), "the last run's stop stands");
        let bad = ["decommission {\"record\":\"nope\"}"];
        assert!(DecommissionHistory::of("w", bad).is_err(), "an undecodable line of ours is an error");
    }
}
