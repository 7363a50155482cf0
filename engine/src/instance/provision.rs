//! Creating nodes, provisioning instances idempotently, and the boot: the provider's answer, a failure, and the
//! agent's heartbeats up to the first `phase=ready` (runbook phases 1–3).
//!
//! `provision(node, backing, operation_id)` with an operation id already on a live row of that node reuses the row,
//! so a retried call never creates a second VM. The create itself carries the instance id as the VM's tag, and the
//! driver looks for a VM with that tag before it creates one ([`Inventory::provider_step`]): a create that executed
//! and whose answer was lost is adopted, not repeated. A call without an operation id mints a distinct,
//! time-stamped instance every time, as the runbook warns.

use std::collections::BTreeMap;

use super::control::leave_pool;
use super::inventory::{Backing, Decided, Instance, InstanceRecord, Inventory, Node};
use super::state::{IllegalTransition, InstanceEvent, InstanceState};
use super::terms::PoolState;

/// Why a node could not be created; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeRefusal {
    #[error("a node needs a name")]
    BlankName,
    #[error("a node needs a template_id")]
    BlankTemplate,
    #[error("account {account} already has a node named {name}")]
    NameTaken { account: String, name: String },
}

/// Why a provision was refused; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProvisionRefusal {
    #[error("no such node {0}")]
    UnknownNode(String),
    #[error("node {0} is disabled")]
    Disabled(String),
    #[error("operation {operation_id} is instance {instance}, which is in error: terminate it, then re-provision")]
    TerminateFirst { operation_id: String, instance: String },
}

/// Why a boot event could not be applied; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootError {
    #[error("no such instance {0}")]
    Unknown(String),
    #[error(transparent)]
    Illegal(#[from] IllegalTransition),
    #[error("instance {instance} is {state}: only a pending or provisioning instance has a provision task to cancel")]
    NotProvisioning { instance: String, state: InstanceState },
}

/// What a provision did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provisioned {
    /// A new instance row, pending (with the operation id it carries, if any).
    Created { instance: String },
    /// The retry of an operation whose row is live: that row, untouched.
    Reused { instance: String },
}

impl Provisioned {
    pub fn instance(&self) -> &str {
        match self {
            Provisioned::Created { instance } | Provisioned::Reused { instance } => instance,
        }
    }
}

/// What the driver does at the provider for a provisioning instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderStep {
    /// The row already has its VM: nothing to create.
    Created { cloud_instance_id: String },
    /// The provider lists a VM carrying this instance's tag: a create that executed and whose answer was lost.
    Adopt { cloud_instance_id: String },
    /// No VM carries the tag: create one, tagged.
    Create { backing: Backing, name: String, tag: String },
}

/// A heartbeat from an instance's agent, as the hub saw it.
pub use crate::ports::platform::AgentPhase;

impl Inventory {
    /// Phase 1: a logical row; no provider resource is touched.
    pub fn create_node(
        &self,
        account: &str,
        name: &str,
        template_id: &str,
        worker_id: Option<&str>,
        config: BTreeMap<String, String>,
    ) -> Result<Decided<String>, NodeRefusal> {
        if name.trim().is_empty() {
            return Err(NodeRefusal::BlankName);
        }
        if template_id.trim().is_empty() {
            return Err(NodeRefusal::BlankTemplate);
        }
        if self.nodes.values().any(|node| node.account == account && node.name == name) {
            return Err(NodeRefusal::NameTaken { account: account.to_owned(), name: name.to_owned() });
        }
        let id = self.new_node_id(0);
        let node = Node {
            id: id.clone(),
            account: account.to_owned(),
            name: name.to_owned(),
            template_id: template_id.to_owned(),
            worker_id: worker_id.map(str::to_owned),
            enabled: true,
            config,
        };
        Ok(Decided::new(vec![InstanceRecord::NodeCreated { node }], id))
    }

    /// Phase 2: a pending instance row for `node` (or the live row of the same operation).
    pub fn provision(
        &self,
        node_id: &str,
        backing: Backing,
        operation_id: Option<&str>,
        now_ms: u64,
    ) -> Result<Decided<Provisioned>, ProvisionRefusal> {
        let node = self.nodes.get(node_id).ok_or_else(|| ProvisionRefusal::UnknownNode(node_id.to_owned()))?;
        if !node.enabled {
            return Err(ProvisionRefusal::Disabled(node_id.to_owned()));
        }
        if let Some(operation_id) = operation_id {
            let same =
                self.instances.values().rev().find(|instance| {
                    instance.node == node_id && instance.operation_id.as_deref() == Some(operation_id)
                });
            match same {
                Some(instance) if instance.state == InstanceState::Error => {
                    return Err(ProvisionRefusal::TerminateFirst {
                        operation_id: operation_id.to_owned(),
                        instance: instance.id.clone(),
                    });
                }
                // A terminated row is history: the operation starts a fresh row that carries the same id.
                Some(instance) if instance.state != InstanceState::Terminated => {
                    return Ok(Decided::new(Vec::new(), Provisioned::Reused { instance: instance.id.clone() }));
                }
                _ => {}
            }
        }
        let id = self.next_instance_id();
        let name = format!("{}-{now_ms}", node.name);
        let instance = Instance::pending(
            id.clone(),
            node_id.to_owned(),
            name,
            backing,
            operation_id.map(str::to_owned),
            None,
            now_ms,
        );
        let records = vec![InstanceRecord::InstanceCreated { instance: Box::new(instance) }];
        Ok(Decided::new(records, Provisioned::Created { instance: id }))
    }

    /// The provider accepted the create (or a VM carrying the tag was adopted): `pending → provisioning`. The driver
    /// marks it only then, so a quota refusal or a lost answer leaves the row pending (the runbook's stuck-pending row).
    pub fn begin_provisioning(&self, instance_id: &str, now_ms: u64) -> Result<Decided<()>, BootError> {
        let instance = self.known(instance_id)?;
        Ok(Decided::new(vec![self.event(instance, InstanceEvent::MarkProvisioning, now_ms)?], ()))
    }

    /// What to do at the provider, given the VM (if any) it lists with this instance's tag.
    pub fn provider_step(&self, instance: &Instance, tagged: Option<&str>) -> ProviderStep {
        match (&instance.cloud_instance_id, tagged) {
            (Some(id), _) => ProviderStep::Created { cloud_instance_id: id.clone() },
            (None, Some(id)) => ProviderStep::Adopt { cloud_instance_id: id.to_owned() },
            (None, None) => ProviderStep::Create {
                backing: instance.backing.clone(),
                name: instance.name.clone(),
                tag: instance.id.clone(),
            },
        }
    }

    /// The provider answered the create (or a tagged VM was adopted).
    pub fn handle_created(&self, instance_id: &str, cloud_instance_id: &str) -> Decided<()> {
        let record = InstanceRecord::ProviderCreated {
            instance: instance_id.to_owned(),
            cloud_instance_id: cloud_instance_id.to_owned(),
        };
        Decided::new(vec![record], ())
    }

    /// The provider call or the boot failed for good: `mark_errored`, so no row is left dangling in provisioning;
    /// a pool member leaves its pool.
    pub fn handle_failed(&self, instance_id: &str, now_ms: u64) -> Result<Decided<()>, BootError> {
        let instance = self.known(instance_id)?;
        let mut records = vec![self.event(instance, InstanceEvent::MarkErrored, now_ms)?];
        records.extend(leave_pool(instance));
        Ok(Decided::new(records, ()))
    }

    /// The operator cancels a stuck provision task (the runbook's recovery of a row stuck in pending or
    /// provisioning): the worker stops and drives `mark_errored`, so the row lands in error, from where a terminate
    /// releases whatever the provider holds. Refused for a row that is not pending or provisioning.
    pub fn cancel_provisioning(&self, instance_id: &str, now_ms: u64) -> Result<Decided<()>, BootError> {
        let instance = self.known(instance_id)?;
        if !matches!(instance.state, InstanceState::Pending | InstanceState::Provisioning) {
            return Err(BootError::NotProvisioning { instance: instance_id.to_owned(), state: instance.state });
        }
        self.handle_failed(instance_id, now_ms)
    }

    /// A heartbeat from the instance's agent: the first one starts the never-ready clock; the first `phase=ready`
    /// after a boot, start or reboot is `mark_running`, and promotes a warming pool member to ready — or to
    /// draining if a cordon marker reached it. Any other heartbeat writes nothing.
    pub fn handle_heartbeat(&self, instance_id: &str, phase: AgentPhase, now_ms: u64) -> Decided<()> {
        let Some(instance) = self.instances.get(instance_id) else {
            return Decided::new(Vec::new(), ());
        };
        let mut records = Vec::new();
        if instance.first_heartbeat_ms.is_none() && instance.state != InstanceState::Terminated {
            records.push(InstanceRecord::AgentSeen { instance: instance_id.to_owned(), at_ms: now_ms });
        }
        if phase == AgentPhase::Ready
            && let Ok(running) = self.event(instance, InstanceEvent::MarkRunning, now_ms)
        {
            records.push(running);
            if let Some(membership) = instance.pool.as_ref().filter(|m| m.state == PoolState::Warming) {
                let cordoned = instance.cordon.is_some();
                records.push(InstanceRecord::PoolStateChanged {
                    instance: instance_id.to_owned(),
                    from: membership.state,
                    to: if cordoned { PoolState::Draining } else { PoolState::Ready },
                    anchor_ms: Some(now_ms),
                    by_cordon: cordoned,
                });
            }
        }
        Decided::new(records, ())
    }

    fn known(&self, instance_id: &str) -> Result<&Instance, BootError> {
        self.instances.get(instance_id).ok_or_else(|| BootError::Unknown(instance_id.to_owned()))
    }
}
