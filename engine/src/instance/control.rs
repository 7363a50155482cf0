//! The one choke point for start, stop, reboot and terminate (the runbook's `InstanceControlService`), and the
//! operator's ops hold it enforces.
//!
//! A hold refuses start, reboot and terminate for every caller and `force` does not override it; stop is
//! deliberately allowed, so a drain still works on a held instance. A cordon refuses nothing here: it fences
//! scheduling (see [`super::cordon`]), the two compose. Every caller that changes an instance's power state — the
//! operator verbs, a drain, a pool's recycle, an approved terminate — comes through [`Inventory::control`].

use super::inventory::{Backing, Decided, Hold, Instance, InstanceRecord, Inventory};
use super::state::{IllegalTransition, InstanceEvent, InstanceState};
pub use super::terms::Control;
use super::terms::PoolState;

/// The call the driver dispatches once the records are journaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderCall {
    Start {
        backing: Backing,
        cloud_instance_id: Option<String>,
    },
    /// `hard`: the caller's `force` — a power-off instead of a graceful shutdown. It overrides no hold.
    Stop {
        backing: Backing,
        cloud_instance_id: Option<String>,
        hard: bool,
    },
    Reboot {
        backing: Backing,
        cloud_instance_id: Option<String>,
    },
    /// Destroy the VM. Without a provider id (the create's answer never came), the driver looks the VM up by its
    /// `tag`, the instance id the create carried, and destroys what it finds.
    Destroy {
        backing: Backing,
        cloud_instance_id: Option<String>,
        tag: String,
    },
}

/// What the choke point did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controlled {
    pub instance: String,
    pub state: InstanceState,
    pub provider_call: ProviderCall,
    /// Terminate only: the cascade (certificates revoked, bootstrap tokens expired, peers removed) is owed.
    pub cascade: bool,
}

/// Why the choke point refused; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlRefusal {
    #[error("no such instance {0}")]
    Unknown(String),
    #[error("instance {instance} is under an ops hold by {by} ({reason}): {} refused, force does not override it", action.as_str())]
    Held { instance: String, action: Control, by: String, reason: String },
    #[error("instance {instance}: {transition}")]
    Illegal { instance: String, transition: IllegalTransition },
}

/// Why a hold could not be placed or lifted; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HoldRefusal {
    #[error("no such instance {0}")]
    Unknown(String),
    #[error("a hold needs a reason")]
    BlankReason,
    #[error("instance {0} is terminated")]
    Terminated(String),
    #[error("instance {instance} is already held by {by}")]
    AlreadyHeld { instance: String, by: String },
    #[error("instance {0} is not held")]
    NotHeld(String),
}

impl Inventory {
    /// Start, stop, reboot or terminate one instance: the only way any of them happens.
    pub fn control(
        &self,
        instance_id: &str,
        action: Control,
        force: bool,
        now_ms: u64,
    ) -> Result<Decided<Controlled>, ControlRefusal> {
        let instance = self.instance(instance_id).map_err(|_| ControlRefusal::Unknown(instance_id.to_owned()))?;
        if let Some(hold) = &instance.hold
            && action.held_by_ops_hold()
        {
            return Err(ControlRefusal::Held {
                instance: instance_id.to_owned(),
                action,
                by: hold.by.clone(),
                reason: hold.reason.clone(),
            });
        }
        let transition = self
            .event(instance, event_of(action), now_ms)
            .map_err(|transition| ControlRefusal::Illegal { instance: instance_id.to_owned(), transition })?;
        let mut records = vec![transition];
        let backing = instance.backing.clone();
        let cloud_instance_id = instance.cloud_instance_id.clone();
        let provider_call = match action {
            Control::Start => ProviderCall::Start { backing, cloud_instance_id },
            Control::Stop => ProviderCall::Stop { backing, cloud_instance_id, hard: force },
            Control::Reboot => ProviderCall::Reboot { backing, cloud_instance_id },
            Control::Terminate => {
                records.push(InstanceRecord::DestroyRequested { instance: instance_id.to_owned(), at_ms: now_ms });
                records.extend(leave_pool(instance));
                ProviderCall::Destroy { backing, cloud_instance_id, tag: instance_id.to_owned() }
            }
        };
        let state = match &records[0] {
            InstanceRecord::Transition { to, .. } => *to,
            _ => unreachable!("the first record is the transition"),
        };
        let outcome = Controlled {
            instance: instance_id.to_owned(),
            state,
            provider_call,
            cascade: action == Control::Terminate,
        };
        Ok(Decided::new(records, outcome))
    }

    /// The provider says a stop finished: `stopping → stopped`.
    pub fn handle_stopped(&self, instance_id: &str, now_ms: u64) -> Result<Decided<()>, ControlRefusal> {
        let instance = self.instance(instance_id).map_err(|_| ControlRefusal::Unknown(instance_id.to_owned()))?;
        let record = self
            .event(instance, InstanceEvent::MarkStopped, now_ms)
            .map_err(|transition| ControlRefusal::Illegal { instance: instance_id.to_owned(), transition })?;
        Ok(Decided::new(vec![record], ()))
    }

    /// The provider no longer lists a terminated instance's VM: the destroy is done.
    pub fn handle_destroyed(&self, instance_id: &str) -> Decided<()> {
        let owed = self.instances.get(instance_id).is_some_and(|instance| instance.destroy_pending_since_ms.is_some());
        let records =
            if owed { vec![InstanceRecord::DestroyConfirmed { instance: instance_id.to_owned() }] } else { Vec::new() };
        Decided::new(records, ())
    }

    /// Places an operator ops hold.
    pub fn place_hold(
        &self,
        instance_id: &str,
        by: &str,
        reason: &str,
        now_ms: u64,
    ) -> Result<Decided<()>, HoldRefusal> {
        let instance = self.instance(instance_id).map_err(|_| HoldRefusal::Unknown(instance_id.to_owned()))?;
        if reason.trim().is_empty() {
            return Err(HoldRefusal::BlankReason);
        }
        if instance.state == InstanceState::Terminated {
            return Err(HoldRefusal::Terminated(instance_id.to_owned()));
        }
        if let Some(hold) = &instance.hold {
            return Err(HoldRefusal::AlreadyHeld { instance: instance_id.to_owned(), by: hold.by.clone() });
        }
        let hold = Hold { by: by.to_owned(), reason: reason.to_owned(), at_ms: now_ms };
        Ok(Decided::new(vec![InstanceRecord::HoldPlaced { instance: instance_id.to_owned(), hold }], ()))
    }

    /// Lifts the hold: only an explicit operator step does, never anything automatic.
    pub fn lift_hold(&self, instance_id: &str, by: &str) -> Result<Decided<()>, HoldRefusal> {
        let instance = self.instance(instance_id).map_err(|_| HoldRefusal::Unknown(instance_id.to_owned()))?;
        if instance.hold.is_none() {
            return Err(HoldRefusal::NotHeld(instance_id.to_owned()));
        }
        Ok(Decided::new(vec![InstanceRecord::HoldLifted { instance: instance_id.to_owned(), by: by.to_owned() }], ()))
    }
}

/// The record that takes a pool member out of its pool when its instance leaves for good (terminated or error).
pub(super) fn leave_pool(instance: &Instance) -> Option<InstanceRecord> {
    let membership = instance.pool.as_ref()?;
    (membership.state != PoolState::Released).then(|| InstanceRecord::PoolStateChanged {
        instance: instance.id.clone(),
        from: membership.state,
        to: PoolState::Released,
        anchor_ms: None,
        by_cordon: false,
    })
}

/// The transition a verb of the choke point asks of the state table.
fn event_of(control: Control) -> InstanceEvent {
    match control {
        Control::Start => InstanceEvent::Start,
        Control::Stop => InstanceEvent::Stop,
        Control::Reboot => InstanceEvent::Reboot,
        Control::Terminate => InstanceEvent::Terminate,
    }
}
