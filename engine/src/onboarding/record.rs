//! The onboarding workflow's journal records: one line `onboard <json>` per run start, stage attempt, stop,
//! completion and piece of recovery work, and what they say about the workflow's history (the shared fold of [`crate::workflow::record`]).

use serde::{Deserialize, Serialize};

use crate::matrix::{FailureClass, OnboardingStage, WorkflowState};
use crate::ports::events::{RecoveryWork, WorkOutcome};
use crate::workflow::record::{self, Entry, History, WorkflowRecord};

/// A journal line of an onboarding workflow: `onboard <json>`, next to the other subsystems' records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case", deny_unknown_fields)]
pub enum OnboardRecord {
    /// A run of the workflow begins (1 for the first; a resume or a restarted controller starts the next).
    RunStarted {
        workflow: String,
        run: u32,
    },
    /// A stage attempt begins: where a restarted controller knows the workflow had got to.
    Checkpoint {
        workflow: String,
        run: u32,
        stage: OnboardingStage,
        attempt: u32,
        system_id: Option<String>,
    },
    Stopped {
        workflow: String,
        run: u32,
        stage: OnboardingStage,
        class: FailureClass,
        workflow_state: WorkflowState,
    },
    Completed {
        workflow: String,
        run: u32,
        system_id: String,
    },
    /// Recovery work done for a failure of `stage` (a compensation, a reseed), and what came of it.
    Work {
        workflow: String,
        run: u32,
        stage: OnboardingStage,
        work: RecoveryWork,
        outcome: WorkOutcome,
    },
}

impl OnboardRecord {
    pub fn encode(&self) -> String {
        record::encode(self)
    }

    /// `None` for another subsystem's line (or an onboarding line that does not decode: it is reported by replay).
    pub fn decode(line: &str) -> Option<Result<OnboardRecord, String>> {
        record::decode(line)
    }
}

impl WorkflowRecord for OnboardRecord {
    type Stage = OnboardingStage;
    /// The MAAS system id of the machine a completed workflow onboarded.
    type Completion = String;
    const PREFIX: &'static str = "onboard ";
    const KIND: &'static str = "onboarding";

    fn entry(&self) -> Entry<'_, OnboardingStage, String> {
        match self {
            OnboardRecord::RunStarted { workflow, run } => Entry::RunStarted { workflow, run: *run },
            OnboardRecord::Checkpoint { workflow, stage, .. } => Entry::Checkpoint { workflow, stage: *stage },
            OnboardRecord::Stopped { workflow, workflow_state, .. } => {
                Entry::Stopped { workflow, workflow_state: *workflow_state }
            }
            OnboardRecord::Completed { workflow, system_id, .. } => {
                Entry::Completed { workflow, completion: system_id.clone() }
            }
            OnboardRecord::Work { workflow, .. } => Entry::Work { workflow },
        }
    }
}

/// What the journal says about one onboarding workflow. `reached(deploy_via_maas)`: an earlier run got as far as
/// asking MAAS to deploy, so a deploy-phase machine may be this workflow's own; `interrupted_after(deploy_via_maas)`:
/// the last run's controller died after it, and a deploy it sent may be in flight or done, to be adopted instead of
/// undone and sent again.
pub type OnboardHistory = History<OnboardRecord>;

/// The MAAS machine the last checkpoint of `workflow_id` in the journal's `lines` names, if one does.
pub fn last_system_id(workflow_id: &str, lines: &[String]) -> Option<String> {
    lines.iter().rev().find_map(|line| match OnboardRecord::decode(line)? {
        Ok(OnboardRecord::Checkpoint { workflow, system_id: Some(system_id), .. }) if workflow == workflow_id => {
            Some(system_id)
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_reached_the_deploy_and_never_ended_is_an_interrupted_deploy() {
        let checkpoint = |run, stage| OnboardRecord::Checkpoint {
            workflow: "w".into(),
            run,
            stage,
            attempt: 1,
            system_id: Some("abc".into()),
        };
        let stopped = OnboardRecord::Stopped {
            workflow: "w".into(),
            run: 1,
            stage: OnboardingStage::WaitForDeployed,
            class: FailureClass::StateAmbiguity,
            workflow_state: WorkflowState::FailedManualIntervention,
        };
        let history = |records: &[OnboardRecord]| {
            let lines: Vec<String> = records.iter().map(OnboardRecord::encode).collect();
            OnboardHistory::of("w", lines.iter().map(String::as_str)).expect("decodes")
        };
        let died =
            [OnboardRecord::RunStarted { workflow: "w".into(), run: 1 }, checkpoint(1, OnboardingStage::DeployViaMaas)];
        assert!(history(&died).interrupted_after(OnboardingStage::DeployViaMaas));
        // A stop mid-deploy is the safe full rerun's case, not an interrupted deploy.
        let mut then_stopped = died.to_vec();
        then_stopped.push(stopped);
        assert!(!history(&then_stopped).interrupted_after(OnboardingStage::DeployViaMaas));
        assert!(history(&then_stopped).reached.contains(&OnboardingStage::DeployViaMaas));
        // A later run that died before its deploy: the earlier deploy is not this run's to adopt.
        then_stopped.push(OnboardRecord::RunStarted { workflow: "w".into(), run: 2 });
        then_stopped.push(checkpoint(2, OnboardingStage::CommissionNode));
        assert!(!history(&then_stopped).interrupted_after(OnboardingStage::DeployViaMaas));
    }

    #[test]
    fn history_counts_runs_failed_runs_and_completion_of_one_workflow_only() {
        let records = [
            OnboardRecord::RunStarted { workflow: "w1".into(), run: 1 },
            OnboardRecord::Checkpoint {
                workflow: "w1".into(),
                run: 1,
                stage: OnboardingStage::WaitForReady,
                attempt: 2,
                system_id: Some("abc123".into()),
            },
            OnboardRecord::Stopped {
                workflow: "w1".into(),
                run: 1,
                stage: OnboardingStage::WaitForReady,
                class: FailureClass::UpstreamTransient,
                workflow_state: WorkflowState::FailedRetryable,
            },
            OnboardRecord::RunStarted { workflow: "w2".into(), run: 1 },
            OnboardRecord::Completed { workflow: "w2".into(), run: 1, system_id: "def456".into() },
        ];
        let mut lines: Vec<String> = records.iter().map(OnboardRecord::encode).collect();
        lines.insert(2, "sensor.silent node-03".into());
        let w1 = OnboardHistory::of("w1", lines.iter().map(String::as_str)).unwrap();
        assert_eq!((w1.runs, w1.failed_retryable_runs, w1.completed), (1, 1, None));
        assert_eq!(w1.last_stage, Some(OnboardingStage::WaitForReady));
        let w2 = OnboardHistory::of("w2", lines.iter().map(String::as_str)).unwrap();
        assert_eq!(w2.completed.as_deref(), Some("def456"));
        let corrupt = ["onboard {\"record\":\"run_started\"".to_owned()];
        assert!(OnboardHistory::of("w1", corrupt.iter().map(String::as_str)).is_err());

        // Every workflow at once says what `of` says of each, and the same error for a line that does not decode.
        let all = OnboardHistory::per_workflow(lines.iter().map(String::as_str)).unwrap();
        assert_eq!(all.keys().map(String::as_str).collect::<Vec<_>>(), ["w1", "w2"]);
        assert_eq!(all["w1"], OnboardHistory::of("w1", lines.iter().map(String::as_str)).unwrap());
        assert_eq!(all["w2"], OnboardHistory::of("w2", lines.iter().map(String::as_str)).unwrap());
        let mut broken = lines.clone();
        broken.extend(corrupt);
        assert_eq!(
            OnboardHistory::per_workflow(broken.iter().map(String::as_str)).unwrap_err(),
            OnboardHistory::of("w9", broken.iter().map(String::as_str)).unwrap_err()
        );
    }
}
