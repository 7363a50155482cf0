//! Cordon, uncordon and drain (runbook phase 5): a cordon fences scheduling and leaves the instance running; a
//! drain is a cordon and then a stop through the choke point.
//!
//! Each refusal comes back before anything is decided, so a refused cordon, uncordon or drain writes nothing — and
//! the approval gate asks these refusals first, so a refused request parks no approval either
//! ([`super::approval`]). A drain decides its stop before it writes its cordon: a stop the table or a hold refuses
//! makes the whole drain an error, never `drained: true` with a cordon left behind.

use serde::{Deserialize, Serialize};

use super::control::{Control, ControlRefusal, Controlled};
use super::inventory::{Cordon, Decided, Instance, InstanceRecord, Inventory};
use super::state::InstanceState;
use super::terms::PoolState;

/// What a cordon did (the runbook's `cordon_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CordonState {
    /// A ready pool member flipped to draining: the allocator will not hand it out.
    Fenced,
    /// A member a consumer holds: marker only (flipping it would strand it; its release reads the marker).
    Claimed,
    /// Already draining (a drain or recycle in flight): marker only, and an uncordon will not restore it.
    AlreadyFenced,
    /// Not a pool member: marker only; a deployment's replica reconciler leaves it out of the live count.
    NotPooled,
}

impl CordonState {
    pub const ALL: [CordonState; 4] =
        [CordonState::Fenced, CordonState::Claimed, CordonState::AlreadyFenced, CordonState::NotPooled];

    pub fn as_str(self) -> &'static str {
        match self {
            CordonState::Fenced => "fenced",
            CordonState::Claimed => "claimed",
            CordonState::AlreadyFenced => "already_fenced",
            CordonState::NotPooled => "not_pooled",
        }
    }
}

/// Why a cordon was refused outright; nothing written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CordonRefusal {
    #[error("no such instance {0}")]
    Unknown(String),
    #[error("a cordon needs a reason")]
    BlankReason,
    #[error("instance {0} is a warming pool member: not acquirable yet, a cordon is not placed ahead of its admission")]
    Warming(String),
    #[error("instance {0} is in error: already on its way out")]
    Errored(String),
    #[error("instance {0} is terminated")]
    Terminated(String),
    #[error("instance {instance} is already cordoned by {by} ({reason})")]
    AlreadyCordoned { instance: String, by: String, reason: String },
}

/// What an uncordon did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UncordonState {
    /// A member this cordon fenced, still draining and running: ready again, with a fresh ready-TTL anchor.
    Restored,
    /// The marker cleared; nothing else written (not pooled, claimed, or it left draining while cordoned).
    Cleared,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UncordonRefusal {
    #[error("no such instance {0}")]
    Unknown(String),
    #[error("instance {0} is not cordoned")]
    NotCordoned(String),
    #[error("instance {instance} is a fenced pool member that is {state}: start it, then uncordon")]
    FencedNotRunning { instance: String, state: InstanceState },
}

/// How a drain found the cordon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DrainCordon {
    /// This drain placed the cordon, with this outcome.
    Placed(CordonState),
    /// A cordon was already in place (the runbook's step 0): kept as it is.
    AlreadyCordoned,
}

/// A drain that went through: cordoned (or found cordoned) and the stop dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drained {
    pub cordon: DrainCordon,
    pub stop: Controlled,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrainRefusal {
    #[error("the drain's cordon was refused: {0}")]
    Cordon(CordonRefusal),
    #[error("the drain's stop was refused: {0}")]
    Stop(ControlRefusal),
}

impl Inventory {
    /// Why `cordon` would refuse, if it would: what the approval gate asks before it parks anything.
    pub fn cordon_refusal(&self, instance_id: &str, reason: &str) -> Option<CordonRefusal> {
        let Ok(instance) = self.instance(instance_id) else {
            return Some(CordonRefusal::Unknown(instance_id.to_owned()));
        };
        if reason.trim().is_empty() {
            return Some(CordonRefusal::BlankReason);
        }
        cordon_blocker(instance).or_else(|| {
            instance.cordon.as_ref().map(|cordon| CordonRefusal::AlreadyCordoned {
                instance: instance_id.to_owned(),
                by: cordon.by.clone(),
                reason: cordon.reason.clone(),
            })
        })
    }

    /// Marks an instance unschedulable and, for a ready pool member, fences it with a write conditional on it
    /// still being ready.
    pub fn cordon(
        &self,
        instance_id: &str,
        reason: &str,
        by: &str,
        now_ms: u64,
    ) -> Result<Decided<CordonState>, CordonRefusal> {
        if let Some(refusal) = self.cordon_refusal(instance_id, reason) {
            return Err(refusal);
        }
        let instance = self.instance(instance_id).expect("checked by cordon_refusal");
        Ok(place_cordon(instance, reason, by, now_ms))
    }

    /// Why `uncordon` would refuse, if it would.
    pub fn uncordon_refusal(&self, instance_id: &str) -> Option<UncordonRefusal> {
        let Ok(instance) = self.instance(instance_id) else {
            return Some(UncordonRefusal::Unknown(instance_id.to_owned()));
        };
        if instance.cordon.is_none() {
            return Some(UncordonRefusal::NotCordoned(instance_id.to_owned()));
        }
        (restorable(instance) && instance.state != InstanceState::Running)
            .then(|| UncordonRefusal::FencedNotRunning { instance: instance_id.to_owned(), state: instance.state })
    }

    pub fn uncordon(
        &self,
        instance_id: &str,
        by: &str,
        now_ms: u64,
    ) -> Result<Decided<UncordonState>, UncordonRefusal> {
        if let Some(refusal) = self.uncordon_refusal(instance_id) {
            return Err(refusal);
        }
        let instance = self.instance(instance_id).expect("checked by uncordon_refusal");
        let mut records = vec![InstanceRecord::Uncordoned { instance: instance_id.to_owned(), by: by.to_owned() }];
        let outcome = if restorable(instance) {
            records.push(InstanceRecord::PoolStateChanged {
                instance: instance_id.to_owned(),
                from: PoolState::Draining,
                to: PoolState::Ready,
                anchor_ms: Some(now_ms),
                by_cordon: false,
            });
            UncordonState::Restored
        } else {
            UncordonState::Cleared
        };
        Ok(Decided::new(records, outcome))
    }

    /// Cordon, then stop through the choke point (so a hold still allows it). The relocation of workloads is the
    /// operator's, before this: a drain does not wait for it.
    pub fn drain(&self, instance_id: &str, by: &str, now_ms: u64) -> Result<Decided<Drained>, DrainRefusal> {
        let instance = self
            .instance(instance_id)
            .map_err(|_| DrainRefusal::Cordon(CordonRefusal::Unknown(instance_id.to_owned())))?;
        let (mut records, cordon) = match &instance.cordon {
            Some(_) => (Vec::new(), DrainCordon::AlreadyCordoned),
            None => {
                if let Some(refusal) = cordon_blocker(instance) {
                    return Err(DrainRefusal::Cordon(refusal));
                }
                let placed = place_cordon(instance, "drain", by, now_ms);
                (placed.records, DrainCordon::Placed(placed.outcome))
            }
        };
        let stop = self.control(instance_id, Control::Stop, false, now_ms).map_err(DrainRefusal::Stop)?;
        records.extend(stop.records);
        records.push(InstanceRecord::DrainStarted { instance: instance_id.to_owned(), at_ms: now_ms });
        Ok(Decided::new(records, Drained { cordon, stop: stop.outcome }))
    }

    /// A deployment's live replicas: the active (not terminated, not error) instances that are not cordoned. A
    /// cordoned replica is left out, so reconciliation provisions its replacement.
    pub fn live_replicas<'a>(&'a self, replicas: &'a [String]) -> impl Iterator<Item = &'a Instance> + 'a {
        self.active(replicas).filter(|instance| instance.cordon.is_none())
    }

    /// The order a scale-in takes victims in: cordoned first, then newest first among the rest.
    pub fn scale_in_order(&self, replicas: &[String]) -> Vec<String> {
        let mut victims: Vec<&Instance> = self.active(replicas).collect();
        victims.sort_by(|a, b| {
            (b.cordon.is_some(), b.state_since_ms, &b.id).cmp(&(a.cordon.is_some(), a.state_since_ms, &a.id))
        });
        victims.into_iter().map(|instance| instance.id.clone()).collect()
    }

    fn active<'a>(&'a self, replicas: &'a [String]) -> impl Iterator<Item = &'a Instance> + 'a {
        replicas
            .iter()
            .filter_map(|id| self.instances.get(id))
            .filter(|instance| !matches!(instance.state, InstanceState::Terminated | InstanceState::Error))
    }
}

/// The refusals that do not depend on an existing cordon.
fn cordon_blocker(instance: &Instance) -> Option<CordonRefusal> {
    let id = instance.id.clone();
    match instance.state {
        InstanceState::Terminated => Some(CordonRefusal::Terminated(id)),
        InstanceState::Error => Some(CordonRefusal::Errored(id)),
        _ if instance.pool.as_ref().is_some_and(|m| m.state == PoolState::Warming) => Some(CordonRefusal::Warming(id)),
        _ => None,
    }
}

fn place_cordon(instance: &Instance, reason: &str, by: &str, now_ms: u64) -> Decided<CordonState> {
    let pool_state_before = instance.pool.as_ref().map(|m| m.state);
    let cordon = Cordon { by: by.to_owned(), reason: reason.to_owned(), at_ms: now_ms, pool_state_before };
    let mut records = vec![InstanceRecord::Cordoned { instance: instance.id.clone(), cordon }];
    let outcome = match pool_state_before {
        None | Some(PoolState::Released) => CordonState::NotPooled,
        Some(PoolState::Ready) => {
            records.push(InstanceRecord::PoolStateChanged {
                instance: instance.id.clone(),
                from: PoolState::Ready,
                to: PoolState::Draining,
                anchor_ms: None,
                by_cordon: true,
            });
            CordonState::Fenced
        }
        Some(PoolState::Claimed) => CordonState::Claimed,
        Some(PoolState::Draining) => CordonState::AlreadyFenced,
        Some(PoolState::Warming) => unreachable!("a warming member's cordon is refused"),
    };
    Decided::new(records, outcome)
}

/// A member this cordon fenced, still draining: what an uncordon hands back as ready.
fn restorable(instance: &Instance) -> bool {
    instance.pool.as_ref().is_some_and(|m| m.state == PoolState::Draining && m.fenced_by_cordon)
}
