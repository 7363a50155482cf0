//! The operator recovery actions' oracles: every action audited with every section 8 field, no automation on a
//! frozen workflow, and every accepted action reaching the state it promised. They read the `step` events of
//! `operator` steps, the controller's `engine.audit` records, and the workflows' MAAS requests and stage starts.

use std::collections::BTreeMap;

use engine::matrix::RecoveryAction;
use engine::recovery::AuditRecord;

use super::{Finding, Oracle};
use crate::model::faults::Step;
use crate::observe::trace::{Body, Event, OnboardingBody};

/// MAAS operations that change nothing (the rest of `site.request`'s operations are mutations).
const READ_OPS: [&str; 9] =
    ["list", "list_by_mac", "list_new", "read", "events", "disks", "interfaces", "subnets", "query_power_state"];

/// An audit record as first traced (requested), not its settled repetition.
fn requested(body: &Body) -> Option<&AuditRecord> {
    match body {
        Body::Audit { record } if record.actual_next_state.is_none() => Some(record),
        _ => None,
    }
}

/// Every `operator` step has an audit record with every section 8 field, and none carries a credential.
#[derive(Default)]
pub(super) struct AuditRecordsComplete {
    /// (workflow id, action) of operator steps applied and not yet audited, with when.
    pending: BTreeMap<(String, RecoveryAction), Vec<u64>>,
}

impl Oracle for AuditRecordsComplete {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if let Body::Step { step: Step::Operator { target, workflow, action, .. }, .. } = &event.body {
            let key = (crate::model::ids::workflow_id(*workflow, target), *action);
            self.pending.entry(key).or_default().push(event.t_ms);
            return;
        }
        let Body::Audit { record } = &event.body else { return };
        let missing = record.missing_fields();
        if !missing.is_empty() {
            let fields: Vec<&str> = missing.iter().map(|field| field.text()).collect();
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!(
                    "{}: the audit record of {} lacks {}",
                    record.workflow_id,
                    record.requested_action.as_str(),
                    fields.join(", ")
                ),
            });
        }
        if record.carries_secret() {
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!(
                    "{}: the audit record of {} carries a credential",
                    record.workflow_id,
                    record.requested_action.as_str()
                ),
            });
        }
        if record.actual_next_state.is_none() {
            let key = (record.workflow_id.clone(), record.requested_action);
            if let Some(times) = self.pending.get_mut(&key) {
                if !times.is_empty() {
                    times.remove(0);
                }
            }
        }
    }

    fn on_finish(&mut self, _end_ms: u64, out: &mut Vec<Finding>) {
        for ((workflow, action), times) in &self.pending {
            for t_ms in times {
                out.push(Finding {
                    t_ms: *t_ms,
                    evidence: format!("{workflow}: the operator's {} has no audit record", action.as_str()),
                });
            }
        }
    }
}

/// From an accepted `mark_manual_intervention_required` until an accepted action lifts the freeze, the workflow
/// sends no MAAS mutation and starts no stage.
#[derive(Default)]
pub(super) struct NoAutomationOnFrozenWorkflow {
    /// Frozen workflow ids, with when the freeze was set.
    frozen: BTreeMap<String, u64>,
}

impl Oracle for NoAutomationOnFrozenWorkflow {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if let Some(record) = requested(&event.body) {
            if record.is_accepted() {
                if record.requested_action == RecoveryAction::MarkManualInterventionRequired {
                    self.frozen.insert(record.workflow_id.clone(), event.t_ms);
                } else {
                    self.frozen.remove(&record.workflow_id);
                }
            }
            return;
        }
        let (workflow, what) = match &event.body {
            Body::SiteRequest { workflow, op, system_id, .. } if !READ_OPS.contains(&op.as_str()) => {
                (workflow, format!("sent {op} of {}", system_id.as_deref().unwrap_or("a new machine")))
            }
            Body::Onboarding { workflow, event: OnboardingBody::StageStarted { stage, .. } }
            | Body::Decommission { workflow, event: OnboardingBody::StageStarted { stage, .. } } => {
                (workflow, format!("started stage {stage}"))
            }
            _ => return,
        };
        if let Some(since_ms) = self.frozen.get(workflow) {
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!("{workflow} is frozen for manual intervention since {since_ms} ms and {what}"),
            });
        }
    }
}

/// Every accepted action's settled record says the workflow reached the state the request expected; an accepted
/// action never settled by the end of the run is a violation too.
#[derive(Default)]
pub(super) struct ActionReachesExpectedState {
    /// Correlation ids of accepted requests not yet settled, with the request.
    unsettled: BTreeMap<String, (u64, AuditRecord)>,
}

impl Oracle for ActionReachesExpectedState {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        let Body::Audit { record } = &event.body else { return };
        if !record.is_accepted() {
            return;
        }
        let Some(actual) = record.actual_next_state else {
            self.unsettled.insert(record.correlation_id.clone(), (event.t_ms, record.clone()));
            return;
        };
        self.unsettled.remove(&record.correlation_id);
        if actual != record.expected_next_state {
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!(
                    "{}: {} by {} expected {} and reached {}",
                    record.workflow_id,
                    record.requested_action.as_str(),
                    record.actor_id,
                    record.expected_next_state,
                    actual
                ),
            });
        }
    }

    fn on_finish(&mut self, _end_ms: u64, out: &mut Vec<Finding>) {
        for (t_ms, record) in self.unsettled.values() {
            out.push(Finding {
                t_ms: *t_ms,
                evidence: format!(
                    "{}: {} by {} (expected {}) was never settled",
                    record.workflow_id,
                    record.requested_action.as_str(),
                    record.actor_id,
                    record.expected_next_state
                ),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use engine::matrix::{OnboardingStage, Stage, Workflow, WorkflowState};
    use engine::recovery::{ActorRole, AuditOutcome, FreezeChange, Lifecycle};

    use super::*;

    fn ev(t_ms: u64, body: Body) -> Event {
        Event { t_ms, host: Rc::from("controller"), body }
    }

    fn record(action: RecoveryAction, accepted: bool, expected: Lifecycle) -> AuditRecord {
        AuditRecord {
            actor_id: "alice".into(),
            actor_role: ActorRole::Operator,
            workflow_id: "onboard-node-02".into(),
            run_id: 1,
            prior_state: Lifecycle::Workflow(WorkflowState::FailedManualIntervention),
            prior_stage: Stage::Onboarding(OnboardingStage::WaitForDeployed),
            requested_action: action,
            reason: "ticket".into(),
            expected_next_state: expected,
            correlation_id: format!("c-{}", action.as_str()),
            outcome: if accepted {
                AuditOutcome::Accepted { freeze: FreezeChange::Unchanged }
            } else {
                let refusal = engine::recovery::Refusal::AlreadyFrozen;
                AuditOutcome::Refused { refusal, text: refusal.to_string() }
            },
            actual_next_state: None,
        }
    }

    fn run(oracle: &mut dyn Oracle, events: &[Event]) -> Vec<Finding> {
        let mut out = Vec::new();
        for event in events {
            oracle.on_event(event, "", &mut out);
        }
        oracle.on_finish(10_000_000, &mut out);
        out
    }

    const RUNNING: Lifecycle = Lifecycle::Workflow(WorkflowState::Running);

    #[test]
    fn an_operator_step_without_an_audit_record_or_with_a_blank_field_is_a_violation() {
        let step = Step::Operator {
            target: "node-02".into(),
            workflow: Workflow::Onboarding,
            action: RecoveryAction::Resume,
            actor: "alice".into(),
            role: ActorRole::Operator,
            reason: "ticket".into(),
            resolves_freeze: false,
        };
        let unaudited =
            run(&mut AuditRecordsComplete::default(), &[ev(1, Body::Step { step: step.clone(), fault: None })]);
        assert_eq!(unaudited.len(), 1, "{unaudited:?}");
        let audited = [
            ev(1, Body::Step { step: step.clone(), fault: None }),
            ev(2, Body::Audit { record: record(RecoveryAction::Resume, true, RUNNING) }),
        ];
        assert!(run(&mut AuditRecordsComplete::default(), &audited).is_empty());
        let mut blank = record(RecoveryAction::Resume, true, RUNNING);
        blank.correlation_id = " ".into();
        let found = run(
            &mut AuditRecordsComplete::default(),
            &[ev(1, Body::Step { step, fault: None }), ev(2, Body::Audit { record: blank })],
        );
        assert!(found.len() == 1 && found[0].evidence.contains("correlation id"), "{found:?}");
    }

    #[test]
    fn a_stage_start_or_a_mutation_of_a_frozen_workflow_is_a_violation_until_the_freeze_is_lifted() {
        let mark = record(RecoveryAction::MarkManualInterventionRequired, true, RUNNING);
        let stage = |t_ms| {
            ev(
                t_ms,
                Body::Onboarding {
                    workflow: "onboard-node-02".into(),
                    event: OnboardingBody::StageStarted { stage: "load_site_config".into(), attempt: 1 },
                },
            )
        };
        let read = ev(
            3,
            Body::SiteRequest {
                workflow: "onboard-node-02".into(),
                op: "read".into(),
                system_id: Some("abc".into()),
                status: Some(200),
            },
        );
        let deploy = ev(
            4,
            Body::SiteRequest {
                workflow: "onboard-node-02".into(),
                op: "deploy".into(),
                system_id: Some("abc".into()),
                status: Some(200),
            },
        );
        // The filtered lists are reads too: a frozen workflow may still look.
        let list = |op: &str| {
            ev(
                3,
                Body::SiteRequest {
                    workflow: "onboard-node-02".into(),
                    op: op.into(),
                    system_id: None,
                    status: Some(200),
                },
            )
        };
        let refused = record(RecoveryAction::Resume, false, RUNNING);
        let lift = record(RecoveryAction::Resume, true, RUNNING);
        let events = [
            ev(1, Body::Audit { record: mark }),
            stage(2),
            read,
            list("list_by_mac"),
            list("list_new"),
            deploy,
            ev(5, Body::Audit { record: refused }),
            stage(6),
            ev(7, Body::Audit { record: lift }),
            stage(8),
        ];
        let found = run(&mut NoAutomationOnFrozenWorkflow::default(), &events);
        let times: Vec<u64> = found.iter().map(|finding| finding.t_ms).collect();
        assert_eq!(times, [2, 4, 6], "{found:?}");
    }

    #[test]
    fn an_accepted_action_settled_elsewhere_or_never_settled_is_a_violation() {
        let resume = record(RecoveryAction::Resume, true, RUNNING);
        let good =
            [ev(1, Body::Audit { record: resume.clone() }), ev(2, Body::Audit { record: resume.settled(RUNNING) })];
        assert!(run(&mut ActionReachesExpectedState::default(), &good).is_empty());
        let stuck = resume.settled(Lifecycle::Workflow(WorkflowState::FailedManualIntervention));
        let bad = [ev(1, Body::Audit { record: resume.clone() }), ev(2, Body::Audit { record: stuck })];
        assert_eq!(run(&mut ActionReachesExpectedState::default(), &bad).len(), 1);
        let never = [ev(1, Body::Audit { record: resume })];
        assert_eq!(run(&mut ActionReachesExpectedState::default(), &never).len(), 1);
        let refused = [ev(1, Body::Audit { record: record(RecoveryAction::Rerun, false, RUNNING) })];
        assert!(run(&mut ActionReachesExpectedState::default(), &refused).is_empty(), "refusals are not judged");
    }
}
