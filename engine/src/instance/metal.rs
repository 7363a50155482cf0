//! A NodeInstance over MAAS (runbook: "one state machine over both providers"): the machine is provisioned by the
//! onboarding workflow and terminated by the decommission workflow, and the instance row follows what those
//! workflows journaled — never MAAS's stages directly, which stay the recovery matrix's to drive.
//!
//! [`metal_status`] folds the two workflows' journal records into a [`MetalStatus`]; [`Inventory::metal_step`]
//! decides, for one bare-metal row and that status, which request to make of the runner (onboard, decommission) or
//! of MAAS's power, and which records follow it:
//!
//! | row | machine | request | then |
//! |---|---|---|---|
//! | pending | racked, onboarding | onboard | `mark_provisioning` (and the system id once known) |
//! | pending | onboarding retrying | — | `mark_provisioning` (and the system id once known) |
//! | pending, provisioning | deployed | — | the system id; `mark_running` waits for the agent's first `phase=ready` |
//! | provisioning | onboarding | onboard (a run in flight is the same; a dead controller's is resumed) | the system id once known |
//! | provisioning | onboarding retrying | — (the runner's reruns, then a person's) | the system id once known |
//! | pending, provisioning | onboarding failed, or the machine decommissioned under it | — | `mark_errored` |
//! | terminated, destroy owed | racked, decommissioned | — | destroy confirmed (then the cascade) |
//! | terminated, destroy owed | onboarding, retrying, deployed, failed, decommissioning | decommission | — |
//! | terminated, destroy owed | decommission retrying or failed | — | — (the runner's reruns, then a person's) |
//! | stopping | powered | power off | — |
//! | stopping | not powered | — | `mark_stopped` |
//! | starting | not powered | power on | — (`mark_running` on the agent's heartbeat) |
//!
//! Every request is idempotent at the runner (a workflow in flight is the same request), so a pass that repeats one
//! after a lost answer or a controller restart does no harm. A workflow that stopped retryably is not asked for
//! again: the runner reruns it within its bound (the matrix escalates a run after `failed_runs_max`), and a request
//! on every pass would make that bound unbounded.
//!
//! Architecture Invariant: no I/O and no clock.

use crate::decommission::record::DecommissionHistory;
use crate::matrix::WorkflowState;
use crate::onboarding::record::{OnboardHistory, last_system_id};
use crate::ports::bare_metal::{MetalPower, MetalStatus};

use super::inventory::{Backing, Decided, Instance, InstanceRecord, Inventory};
use super::state::{InstanceEvent, InstanceState};

/// What the journal's records of a machine's two workflows say about it. `onboarding` and `decommission` are the
/// lines of each workflow (others are skipped); a record of theirs that does not decode is an error.
pub fn metal_status(
    onboarding_workflow: &str,
    onboarding: &[String],
    decommission_workflow: &str,
    decommission: &[String],
) -> Result<MetalStatus, String> {
    let retired = DecommissionHistory::of(decommission_workflow, decommission.iter().map(String::as_str))?;
    if retired.runs > 0 {
        return Ok(match (retired.completed, retired.last_stop) {
            (Some(_), _) => MetalStatus::Decommissioned,
            (None, Some(WorkflowState::FailedRetryable)) => MetalStatus::DecommissionRetrying,
            (None, Some(state)) => MetalStatus::DecommissionFailed { state },
            (None, None) => MetalStatus::Decommissioning,
        });
    }
    if retired.refusals > 0 {
        // Refused before a run began (something still references the worker), `failed_retryable` by its record: it
        // rests until a person clears what references it and asks again. Asking on every pass would only be refused
        // again, a journal line each time.
        return Ok(MetalStatus::DecommissionRetrying);
    }
    let onboarded = OnboardHistory::of(onboarding_workflow, onboarding.iter().map(String::as_str))?;
    let system_id = || last_system_id(onboarding_workflow, onboarding);
    Ok(match (onboarded.runs, onboarded.completed, onboarded.last_stop) {
        (0, _, _) => MetalStatus::Racked,
        (_, Some(system_id), _) => MetalStatus::Deployed { system_id },
        (_, None, Some(WorkflowState::FailedRetryable)) => MetalStatus::OnboardingRetrying { system_id: system_id() },
        (_, None, Some(state)) => MetalStatus::OnboardingFailed { state },
        (_, None, None) => MetalStatus::Onboarding { system_id: system_id() },
    })
}

/// A request of the runner or of MAAS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetalCall {
    Onboard,
    Decommission,
    Power(MetalPower),
}

/// One bare-metal row's step: the request to make, if any, and the records to write once it is made (at once when
/// there is none). A request that fails writes nothing; the next pass decides again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetalStep {
    pub call: Option<MetalCall>,
    pub then: Decided<()>,
}

impl MetalStep {
    fn call(call: MetalCall, records: Vec<InstanceRecord>) -> MetalStep {
        MetalStep { call: Some(call), then: Decided::new(records, ()) }
    }

    fn write(records: Vec<InstanceRecord>) -> MetalStep {
        MetalStep { call: None, then: Decided::new(records, ()) }
    }

    fn nothing() -> MetalStep {
        MetalStep::write(Vec::new())
    }
}

/// Whether a bare-metal row is in flight, so that [`Inventory::metal_step`] may owe it a step: pending,
/// provisioning, stopping, starting, or terminated with its destroy owed (a destroy is requested only by the
/// terminate). Any other row (and every cloud row) gets no step whatever its machine shows; the driver follows only
/// these.
pub fn metal_owed(instance: &Instance) -> bool {
    matches!(instance.backing, Backing::BareMetal { .. })
        && (matches!(
            instance.state,
            InstanceState::Pending | InstanceState::Provisioning | InstanceState::Stopping | InstanceState::Starting
        ) || (instance.state == InstanceState::Terminated && instance.destroy_pending_since_ms.is_some()))
}

impl Inventory {
    /// The step of one bare-metal row given where its machine got to (`powered`: MAAS's power reading, asked only
    /// for a stopping or starting row). A cloud row, or a row with nothing owed, gets no step.
    pub fn metal_step(
        &self,
        instance: &Instance,
        status: &MetalStatus,
        powered: Option<bool>,
        now_ms: u64,
    ) -> MetalStep {
        if !metal_owed(instance) {
            return MetalStep::nothing();
        }
        let created = |system_id: &Option<String>| -> Vec<InstanceRecord> {
            match (system_id, &instance.cloud_instance_id) {
                (Some(system_id), None) => vec![InstanceRecord::ProviderCreated {
                    instance: instance.id.clone(),
                    cloud_instance_id: system_id.clone(),
                }],
                _ => Vec::new(),
            }
        };
        let event = |event: InstanceEvent| self.event(instance, event, now_ms).ok().into_iter();
        match (instance.state, status) {
            (InstanceState::Pending, MetalStatus::Racked) => {
                MetalStep::call(MetalCall::Onboard, event(InstanceEvent::MarkProvisioning).collect())
            }
            (InstanceState::Pending, MetalStatus::Onboarding { system_id }) => MetalStep::call(
                MetalCall::Onboard,
                created(system_id).into_iter().chain(event(InstanceEvent::MarkProvisioning)).collect(),
            ),
            (InstanceState::Provisioning, MetalStatus::Onboarding { system_id }) => {
                MetalStep::call(MetalCall::Onboard, created(system_id))
            }
            // Asked for, and no run of it began: the request was lost before the runner took it up (its controller
            // died with the request still queued). Asked again; a request already in flight is the same request.
            (InstanceState::Provisioning, MetalStatus::Racked) => MetalStep::call(MetalCall::Onboard, Vec::new()),
            (InstanceState::Pending, MetalStatus::OnboardingRetrying { system_id }) => {
                MetalStep::write(created(system_id).into_iter().chain(event(InstanceEvent::MarkProvisioning)).collect())
            }
            (InstanceState::Provisioning, MetalStatus::OnboardingRetrying { system_id }) => {
                MetalStep::write(created(system_id))
            }
            (InstanceState::Pending | InstanceState::Provisioning, MetalStatus::Deployed { system_id }) => {
                let mut records = created(&Some(system_id.clone()));
                if instance.state == InstanceState::Pending {
                    records.extend(event(InstanceEvent::MarkProvisioning));
                }
                MetalStep::write(records)
            }
            (
                InstanceState::Pending | InstanceState::Provisioning,
                MetalStatus::OnboardingFailed { .. }
                | MetalStatus::Decommissioning
                | MetalStatus::DecommissionRetrying
                | MetalStatus::DecommissionFailed { .. }
                | MetalStatus::Decommissioned,
            ) => match self.handle_failed(&instance.id, now_ms) {
                Ok(failed) => MetalStep::write(failed.records),
                Err(_) => MetalStep::nothing(),
            },
            // `metal_owed` lets a terminated row through only while its destroy is pending.
            (InstanceState::Terminated, _) => match status {
                MetalStatus::Racked | MetalStatus::Decommissioned => {
                    MetalStep::write(self.handle_destroyed(&instance.id).records)
                }
                MetalStatus::DecommissionRetrying | MetalStatus::DecommissionFailed { .. } => MetalStep::nothing(),
                MetalStatus::Onboarding { .. }
                | MetalStatus::OnboardingRetrying { .. }
                | MetalStatus::Deployed { .. }
                | MetalStatus::OnboardingFailed { .. }
                | MetalStatus::Decommissioning => MetalStep::call(MetalCall::Decommission, Vec::new()),
            },
            (InstanceState::Stopping, _) => match powered {
                Some(true) => MetalStep::call(MetalCall::Power(MetalPower::Off), Vec::new()),
                Some(false) => match self.handle_stopped(&instance.id, now_ms) {
                    Ok(stopped) => MetalStep::write(stopped.records),
                    Err(_) => MetalStep::nothing(),
                },
                None => MetalStep::nothing(),
            },
            (InstanceState::Starting, _) if powered == Some(false) => {
                MetalStep::call(MetalCall::Power(MetalPower::On), Vec::new())
            }
            _ => MetalStep::nothing(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decommission::record::DecommissionRecord;
    use crate::matrix::{DecommissionStage, FailureClass, OnboardingStage};
    use crate::onboarding::record::OnboardRecord;

    const ON: &str = "onboard-node-01";
    const DE: &str = "decommission-node-01";

    fn lines<R>(records: &[R], encode: impl Fn(&R) -> String) -> Vec<String> {
        records.iter().map(encode).collect()
    }

    fn onboard(records: &[OnboardRecord]) -> Vec<String> {
        lines(records, OnboardRecord::encode)
    }

    fn checkpoint(system_id: Option<&str>) -> OnboardRecord {
        OnboardRecord::Checkpoint {
            workflow: ON.into(),
            run: 1,
            stage: OnboardingStage::WaitForDeployed,
            attempt: 1,
            system_id: system_id.map(str::to_owned),
        }
    }

    fn stopped(state: WorkflowState) -> OnboardRecord {
        OnboardRecord::Stopped {
            workflow: ON.into(),
            run: 1,
            stage: OnboardingStage::WaitForDeployed,
            class: FailureClass::StateAmbiguity,
            workflow_state: state,
        }
    }

    fn status(on: &[OnboardRecord], de: &[DecommissionRecord]) -> MetalStatus {
        metal_status(ON, &onboard(on), DE, &lines(de, DecommissionRecord::encode)).expect("decodes")
    }

    #[test]
    fn the_status_follows_the_onboarding_then_the_decommission() {
        let started = OnboardRecord::RunStarted { workflow: ON.into(), run: 1 };
        assert_eq!(status(&[], &[]), MetalStatus::Racked);
        assert_eq!(status(std::slice::from_ref(&started), &[]), MetalStatus::Onboarding { system_id: None });
        assert_eq!(
            status(&[started.clone(), checkpoint(Some("abc123"))], &[]),
            MetalStatus::Onboarding { system_id: Some("abc123".into()) }
        );
        let retryable = [started.clone(), checkpoint(Some("abc123")), stopped(WorkflowState::FailedRetryable)];
        assert_eq!(status(&retryable, &[]), MetalStatus::OnboardingRetrying { system_id: Some("abc123".into()) });
        let manual = [started.clone(), stopped(WorkflowState::FailedManualIntervention)];
        assert_eq!(
            status(&manual, &[]),
            MetalStatus::OnboardingFailed { state: WorkflowState::FailedManualIntervention }
        );
        let done = [started, OnboardRecord::Completed { workflow: ON.into(), run: 1, system_id: "abc123".into() }];
        assert_eq!(status(&done, &[]), MetalStatus::Deployed { system_id: "abc123".into() });
        let begun = DecommissionRecord::RunStarted { workflow: DE.into(), run: 1 };
        assert_eq!(status(&done, std::slice::from_ref(&begun)), MetalStatus::Decommissioning);
        let stop = |workflow_state| DecommissionRecord::Stopped {
            workflow: DE.into(),
            run: 1,
            stage: DecommissionStage::ALL[0],
            class: FailureClass::StateAmbiguity,
            workflow_state,
        };
        assert_eq!(
            status(&done, &[begun.clone(), stop(WorkflowState::FailedManualIntervention)]),
            MetalStatus::DecommissionFailed { state: WorkflowState::FailedManualIntervention }
        );
        assert_eq!(
            status(&done, &[begun.clone(), stop(WorkflowState::FailedRetryable)]),
            MetalStatus::DecommissionRetrying
        );
        let again = DecommissionRecord::RunStarted { workflow: DE.into(), run: 2 };
        assert_eq!(
            status(&done, &[begun.clone(), stop(WorkflowState::FailedRetryable), again]),
            MetalStatus::Decommissioning,
            "a rerun is in flight again"
        );
        let completed =
            DecommissionRecord::Completed { workflow: DE.into(), run: 1, workflow_state: WorkflowState::Completed };
        assert_eq!(status(&done, &[begun.clone(), completed.clone()]), MetalStatus::Decommissioned);
        // Refused before a run began: it rests for a person (no request on every pass), until a run of it begins.
        let refused = DecommissionRecord::Refused {
            workflow: DE.into(),
            stage: DecommissionStage::ALL[0],
            class: FailureClass::StateAmbiguity,
            workflow_state: WorkflowState::FailedRetryable,
            references: Vec::new(),
        };
        assert_eq!(status(&done, std::slice::from_ref(&refused)), MetalStatus::DecommissionRetrying);
        assert_eq!(status(&done, &[refused.clone(), begun.clone()]), MetalStatus::Decommissioning);
        assert_eq!(status(&done, &[refused, begun, completed]), MetalStatus::Decommissioned);
    }

    #[test]
    fn a_record_of_the_workflow_that_does_not_decode_is_an_error() {
        let broken = vec![format!("onboard {{\"record\":\"checkpoint\",\"workflow\":\"{ON}\"}}")];
        assert!(metal_status(ON, &broken, DE, &[]).is_err());
    }
}
