//! Operator steps on instances, audited as the recovery actions are (`recovery.rs`): who asked for what, on which
//! row, why, and what came of it — performed, parked behind an approval, or refused with the refusal's text.
//!
//! The audit record is written first, then the step's own records; a refused step writes its audit record and
//! nothing else, so "a refusal writes nothing" holds of every row while the refusal itself is still on record.

use super::approval::{Governance, Policy, Requested};
use super::inventory::{Decided, InstanceRecord, Inventory};
pub use super::terms::{AuditOutcome, InstanceAudit, OperatorStep};

impl Inventory {
    /// Decides an operator step and audits it. Always answers: the records are the audit record and, unless the
    /// step was refused, the step's own; the outcome says which.
    pub fn operate(
        &self,
        actor: &str,
        step: OperatorStep,
        governance: Governance,
        now_ms: u64,
    ) -> Decided<AuditOutcome> {
        let decided: Result<(Vec<InstanceRecord>, AuditOutcome), String> = match &step {
            OperatorStep::PlaceHold { instance, reason } => self
                .place_hold(instance, actor, reason, now_ms)
                .map(|d| (d.records, AuditOutcome::Performed))
                .map_err(|e| e.to_string()),
            OperatorStep::LiftHold { instance } => {
                self.lift_hold(instance, actor).map(|d| (d.records, AuditOutcome::Performed)).map_err(|e| e.to_string())
            }
            OperatorStep::Control { instance, action, force } => self
                .control(instance, *action, *force, now_ms)
                .map(|d| (d.records, AuditOutcome::Performed))
                .map_err(|e| e.to_string()),
            // A drain cordons: under a gated cordon policy it needs the cordon approved first (the runbook's step
            // 0, a cordon already in place), or it would be a cordon no one approved.
            OperatorStep::Drain { instance }
                if governance.instance_cordon == Policy::RequireApproval
                    && self.instances.get(instance).is_some_and(|row| row.cordon.is_none()) =>
            {
                Err(format!(
                    "a drain of {instance} cordons it, and cordons need an approval here: request the cordon, have it approved, then drain"
                ))
            }
            OperatorStep::Drain { instance } => self
                .drain(instance, actor, now_ms)
                .map(|d| (d.records, AuditOutcome::Performed))
                .map_err(|e| e.to_string()),
            OperatorStep::Request { operation } => self
                .request(operation.clone(), governance, now_ms)
                .map(|d| {
                    let outcome = match d.outcome {
                        Requested::Pending { deferred } => AuditOutcome::Pending { deferred },
                        Requested::Done(_) => AuditOutcome::Performed,
                    };
                    (d.records, outcome)
                })
                .map_err(|e| e.to_string()),
            OperatorStep::Approve { deferred } => self
                .approve(deferred, actor, now_ms)
                .map(|d| (d.records, AuditOutcome::Performed))
                .map_err(|e| e.to_string()),
            OperatorStep::Deny { deferred } => {
                self.deny(deferred, actor).map(|d| (d.records, AuditOutcome::Performed)).map_err(|e| e.to_string())
            }
        };
        let (records, outcome) = decided.unwrap_or_else(|refusal| (Vec::new(), AuditOutcome::Refused { refusal }));
        let correlation_id = format!("{actor}/{}/{}/{now_ms}", step.verb(), step.subject());
        let audit =
            InstanceAudit { actor: actor.to_owned(), step, outcome: outcome.clone(), correlation_id, at_ms: now_ms };
        let mut all = vec![InstanceRecord::Audited { audit }];
        all.extend(records);
        Decided::new(all, outcome)
    }
}
