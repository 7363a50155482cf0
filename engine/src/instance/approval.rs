//! Approval gating of cordon, uncordon and terminate: under a `require_approval` policy the request parks a
//! deferred operation and writes nothing to the instance until an operator approves; a denial writes nothing to it
//! either.
//!
//! The gate asks the operation's own refusal first (`cordon_refusal`, `uncordon_refusal`, the choke point), so a
//! request that would be refused is refused inline and parks no approval. An approval decides the operation again
//! against the rows as they are then: if it would now be refused, the approval is refused with that reason and the
//! operation stays pending for an operator to deny.

use serde::{Deserialize, Serialize};

use super::control::{Control, ControlRefusal, Controlled};
use super::cordon::{CordonRefusal, CordonState, UncordonRefusal, UncordonState};
use super::inventory::{Decided, Deferred, DeferredOperation, DeferredStatus, InstanceRecord, Inventory};

/// An approval category's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    Allow,
    RequireApproval,
}

/// The policies of the two categories: `system.instance_cordon` (cordon and uncordon, one category) and
/// `system.task.terminate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Governance {
    pub instance_cordon: Policy,
    pub terminate: Policy,
}

impl Default for Governance {
    /// Both gated: the runbook's default for cordons; for terminate the runbook leaves it to policy, and a
    /// destructive verb defaults closed.
    fn default() -> Governance {
        Governance { instance_cordon: Policy::RequireApproval, terminate: Policy::RequireApproval }
    }
}

/// What a gated operation did when it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    Cordoned(CordonState),
    Uncordoned(UncordonState),
    Terminated(Controlled),
}

/// The answer to a gated request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requested {
    /// Parked: `{ pending: true, deferred_operation_id }`. Nothing was done to the instance.
    Pending {
        deferred: String,
    },
    Done(Done),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateRefusal {
    #[error(transparent)]
    Cordon(#[from] CordonRefusal),
    #[error(transparent)]
    Uncordon(#[from] UncordonRefusal),
    #[error(transparent)]
    Terminate(#[from] ControlRefusal),
    #[error("no such deferred operation {0}")]
    UnknownDeferred(String),
    #[error("deferred operation {id} was already {status:?}")]
    AlreadyDecided { id: String, status: DeferredStatus },
}

impl Inventory {
    /// Asks for a gated operation under `governance`.
    pub fn request(
        &self,
        operation: DeferredOperation,
        governance: Governance,
        now_ms: u64,
    ) -> Result<Decided<Requested>, GateRefusal> {
        let policy = match operation {
            DeferredOperation::Cordon { .. } | DeferredOperation::Uncordon { .. } => governance.instance_cordon,
            DeferredOperation::Terminate { .. } => governance.terminate,
        };
        // The refusal first, always: nothing parked for a request that would be refused.
        let done = self.run(&operation, now_ms)?;
        match policy {
            Policy::Allow => Ok(Decided::new(done.records, Requested::Done(done.outcome))),
            Policy::RequireApproval => {
                let id = format!("d-{:05}", self.deferred.len() + 1);
                let deferred =
                    Deferred { id: id.clone(), operation, status: DeferredStatus::Pending, requested_at_ms: now_ms };
                Ok(Decided::new(vec![InstanceRecord::Deferred { deferred }], Requested::Pending { deferred: id }))
            }
        }
    }

    /// An operator approves: the operation is decided again now and, if it still goes through, runs.
    pub fn approve(&self, deferred_id: &str, by: &str, now_ms: u64) -> Result<Decided<Done>, GateRefusal> {
        let deferred = self.pending(deferred_id)?;
        let done = self.run(&deferred.operation, now_ms)?;
        let mut records = vec![InstanceRecord::Decided {
            deferred: deferred_id.to_owned(),
            status: DeferredStatus::Approved,
            by: by.to_owned(),
        }];
        records.extend(done.records);
        Ok(Decided::new(records, done.outcome))
    }

    /// An operator denies: the deferred row says so; the instance is not touched.
    pub fn deny(&self, deferred_id: &str, by: &str) -> Result<Decided<()>, GateRefusal> {
        self.pending(deferred_id)?;
        let record = InstanceRecord::Decided {
            deferred: deferred_id.to_owned(),
            status: DeferredStatus::Denied,
            by: by.to_owned(),
        };
        Ok(Decided::new(vec![record], ()))
    }

    fn pending(&self, deferred_id: &str) -> Result<&Deferred, GateRefusal> {
        let deferred =
            self.deferred.get(deferred_id).ok_or_else(|| GateRefusal::UnknownDeferred(deferred_id.to_owned()))?;
        if deferred.status != DeferredStatus::Pending {
            return Err(GateRefusal::AlreadyDecided { id: deferred_id.to_owned(), status: deferred.status });
        }
        Ok(deferred)
    }

    fn run(&self, operation: &DeferredOperation, now_ms: u64) -> Result<Decided<Done>, GateRefusal> {
        Ok(match operation {
            DeferredOperation::Cordon { instance, reason, by } => {
                let done = self.cordon(instance, reason, by, now_ms)?;
                Decided::new(done.records, Done::Cordoned(done.outcome))
            }
            DeferredOperation::Uncordon { instance, by } => {
                let done = self.uncordon(instance, by, now_ms)?;
                Decided::new(done.records, Done::Uncordoned(done.outcome))
            }
            DeferredOperation::Terminate { instance, .. } => {
                let done = self.control(instance, Control::Terminate, false, now_ms)?;
                Decided::new(done.records, Done::Terminated(done.outcome))
            }
        })
    }
}
