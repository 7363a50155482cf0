//! The platform's rows — nodes, instances, pools, holds, cordons, deferred operations, sync checks — as a fold over
//! journal records, so that what a controller decided is exactly what a restarted one reads back.
//!
//! Every decision in this module's siblings is a `&self` method that returns the records it would write (or a typed
//! refusal that writes nothing); the caller journals each record and then [`Inventory::apply`]s it. `apply` is
//! strict: a record naming a row that does not exist, or a state change the table refuses, is an
//! [`InventoryError`], so a damaged or forged journal is reported, never folded into a state the engine could not
//! have reached.
//!
//! Architecture Invariant: no I/O and no clock; times come in as `now_ms` arguments and live in the records.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::state::{IllegalTransition, InstanceEvent, InstanceState, transition};
pub use super::terms::DeferredOperation;
use super::terms::{InstanceAudit, Pool, PoolState};

/// A Node: the logical row for a future or existing host. It outlives its instances, so a re-provision into the
/// same Node keeps its history and audit chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub id: String,
    /// The account the node was created in; `name` is unique within it.
    pub account: String,
    pub name: String,
    /// The template that composes the node's modules (required).
    pub template_id: String,
    /// The worker (the rollout's ovswarm worker) that services this node's tasks, if any.
    #[serde(default)]
    pub worker_id: Option<String>,
    pub enabled: bool,
    /// The only free-form field. A pool member reaches its pool through `config["instance_pool_id"]`.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

/// What an instance runs on: one state machine over both providers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "provider", rename_all = "snake_case", deny_unknown_fields)]
pub enum Backing {
    /// A VM at a cloud provider.
    Cloud { region: String, instance_type: String },
    /// A MAAS machine, provisioned by the onboarding workflow and terminated by the decommission workflow.
    BareMetal { mac: String },
}

/// An operator's ops hold: refuses start, reboot and terminate at the choke point, allows stop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hold {
    pub by: String,
    pub reason: String,
    pub at_ms: u64,
}

/// The cordon marker: who, why, when, and the pool state an uncordon restores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cordon {
    pub by: String,
    pub reason: String,
    pub at_ms: u64,
    /// The member's pool state when this cordon was placed (`None` off a pool).
    #[serde(default)]
    pub pool_state_before: Option<PoolState>,
}

/// An instance's place in a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Membership {
    pub pool: String,
    pub state: PoolState,
    /// The ready-TTL anchor (`pool_warming_started_at`): a ready member is recycled `ready_ttl_seconds` after it.
    pub anchor_ms: u64,
    /// The member is draining because a cordon fenced it (at the cordon, or at a `reuse_without_reset` release of
    /// a cordoned member): what an uncordon may restore to ready. A drain or recycle's draining is not.
    #[serde(default)]
    pub fenced_by_cordon: bool,
}

/// A NodeInstance row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Instance {
    pub id: String,
    pub node: String,
    /// `<node name>-<created at ms>`: the runbook's time-stamped naming.
    pub name: String,
    pub backing: Backing,
    pub state: InstanceState,
    /// When the instance entered `state`.
    pub state_since_ms: u64,
    /// The idempotency key the provision was called with (`config->>'operation_id'`).
    #[serde(default)]
    pub operation_id: Option<String>,
    /// The provider's id of the VM (or the MAAS system id), once the provider answered the create.
    #[serde(default)]
    pub cloud_instance_id: Option<String>,
    /// The agent's first heartbeat (any phase): the start of the "agent up but never running" clock.
    #[serde(default)]
    pub first_heartbeat_ms: Option<u64>,
    #[serde(default)]
    pub pool: Option<Membership>,
    #[serde(default)]
    pub cordon: Option<Cordon>,
    #[serde(default)]
    pub hold: Option<Hold>,
    /// A drain's stop was dispatched at this time and has not completed.
    #[serde(default)]
    pub drain_started_ms: Option<u64>,
    /// The terminate was committed but the provider has not confirmed the destroy.
    #[serde(default)]
    pub destroy_pending_since_ms: Option<u64>,
    /// The terminate cascade ran (certificates revoked, bootstrap tokens expired, peers removed).
    #[serde(default)]
    pub cascaded: bool,
}

impl Instance {
    /// A new row, pending since `now_ms`, with nothing yet heard from the provider or the agent.
    pub fn pending(
        id: String,
        node: String,
        name: String,
        backing: Backing,
        operation_id: Option<String>,
        pool: Option<Membership>,
        now_ms: u64,
    ) -> Instance {
        Instance {
            id,
            node,
            name,
            backing,
            state: InstanceState::Pending,
            state_since_ms: now_ms,
            operation_id,
            cloud_instance_id: None,
            first_heartbeat_ms: None,
            pool,
            cordon: None,
            hold: None,
            drain_started_ms: None,
            destroy_pending_since_ms: None,
            cascaded: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeferredStatus {
    Pending,
    Approved,
    Denied,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deferred {
    pub id: String,
    pub operation: DeferredOperation,
    pub status: DeferredStatus,
    pub requested_at_ms: u64,
}

/// One journal record of the instance subsystem. Each is one line, `instances <json>`, whose subject is
/// [`SUBJECT`] so a driver reads the inventory's records by subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case", deny_unknown_fields)]
pub enum InstanceRecord {
    NodeCreated {
        node: Node,
    },
    PoolCreated {
        pool: Pool,
    },
    InstanceCreated {
        instance: Box<Instance>,
    },
    /// A state machine event, with the states it moved between (checked again on replay).
    Transition {
        instance: String,
        event: InstanceEvent,
        from: InstanceState,
        to: InstanceState,
        at_ms: u64,
    },
    /// The provider answered the create with its VM id (or an adopted VM carrying the operation's tag was found).
    ProviderCreated {
        instance: String,
        cloud_instance_id: String,
    },
    /// The agent's first heartbeat of this instance.
    AgentSeen {
        instance: String,
        at_ms: u64,
    },
    /// A member's pool state moved, conditionally on `from` (`anchor_ms` set when the ready-TTL anchor is reset;
    /// `by_cordon` when a cordon is what fences it).
    PoolStateChanged {
        instance: String,
        from: PoolState,
        to: PoolState,
        #[serde(default)]
        anchor_ms: Option<u64>,
        #[serde(default)]
        by_cordon: bool,
    },
    HoldPlaced {
        instance: String,
        hold: Hold,
    },
    HoldLifted {
        instance: String,
        by: String,
    },
    Cordoned {
        instance: String,
        cordon: Cordon,
    },
    Uncordoned {
        instance: String,
        by: String,
    },
    DrainStarted {
        instance: String,
        at_ms: u64,
    },
    /// Terminate committed: the row reads terminated (a `Transition` before this) and the destroy is owed.
    DestroyRequested {
        instance: String,
        at_ms: u64,
    },
    /// The provider confirmed the VM is gone (or no longer lists it).
    DestroyConfirmed {
        instance: String,
    },
    /// The terminate cascade: rows the platform keeps for the instance, revoked or removed.
    Cascaded {
        instance: String,
        certificates_revoked: u32,
        bootstrap_tokens_expired: u32,
        peers_removed: u32,
    },
    Deferred {
        deferred: Deferred,
    },
    Decided {
        deferred: String,
        status: DeferredStatus,
        by: String,
    },
    /// A successful sync of one region, with the provider VM ids it listed.
    SyncChecked {
        region: String,
        at_ms: u64,
        listed: Vec<String>,
    },
    /// An operator step, audited before its own records (performed or parked) or alone (refused).
    Audited {
        audit: InstanceAudit,
    },
}

/// The journal subject of every instance record.
pub const SUBJECT: &str = "instances";
/// The kind prefix of an instance journal line.
pub const PREFIX: &str = "instances ";

impl InstanceRecord {
    /// The journal line: `instances <json>` with `"workflow":"instances"` so [`crate::ports::record_subject`] reads it.
    pub fn to_line(&self) -> String {
        let mut value = serde_json::to_value(self).expect("an instance record is plain data");
        value.as_object_mut().expect("a tagged enum is an object").insert("workflow".into(), SUBJECT.into());
        format!("{PREFIX}{value}")
    }

    /// Reads a journal line back; `None` for another subsystem's line.
    pub fn from_line(line: &str) -> Option<Result<InstanceRecord, InventoryError>> {
        let json = line.strip_prefix(PREFIX)?;
        let decoded = serde_json::from_str::<serde_json::Value>(json)
            .and_then(|mut value| {
                if let Some(object) = value.as_object_mut() {
                    object.remove("workflow");
                }
                serde_json::from_value(value)
            })
            .map_err(|error| InventoryError::Undecodable(error.to_string()));
        Some(decoded)
    }
}

/// A record the fold refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InventoryError {
    #[error("an instance record does not decode: {0}")]
    Undecodable(String),
    #[error("no such {kind} {id}")]
    Unknown { kind: &'static str, id: String },
    #[error("{kind} {id} already exists")]
    Duplicate { kind: &'static str, id: String },
    #[error("instance {instance}: {transition}")]
    Illegal { instance: String, transition: IllegalTransition },
    #[error("instance {instance}: the record says it was {recorded} but the inventory has it {actual}")]
    StateMismatch { instance: String, recorded: String, actual: String },
}

/// Every row, in id order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    pub nodes: BTreeMap<String, Node>,
    pub instances: BTreeMap<String, Instance>,
    pub pools: BTreeMap<String, Pool>,
    pub deferred: BTreeMap<String, Deferred>,
    /// Per region: the last successful sync's time and the VM ids it listed.
    pub syncs: BTreeMap<String, (u64, Vec<String>)>,
    /// Every operator step, in order.
    pub audit: Vec<InstanceAudit>,
}

/// A decision: the records to journal and apply, in order, and what to tell the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided<T> {
    pub records: Vec<InstanceRecord>,
    pub outcome: T,
}

impl<T> Decided<T> {
    pub fn new(records: Vec<InstanceRecord>, outcome: T) -> Decided<T> {
        Decided { records, outcome }
    }
}

impl Inventory {
    /// Folds journal lines (other subsystems' lines skipped) into the inventory.
    pub fn replay<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<Inventory, InventoryError> {
        let mut inventory = Inventory::default();
        for line in lines {
            if let Some(record) = InstanceRecord::from_line(line) {
                inventory.apply(&record?)?;
            }
        }
        Ok(inventory)
    }

    /// Applies every record of a decision (what a test or a driver that has journaled them does).
    pub fn apply_all(&mut self, records: &[InstanceRecord]) -> Result<(), InventoryError> {
        records.iter().try_for_each(|record| self.apply(record))
    }

    pub fn instance(&self, id: &str) -> Result<&Instance, InventoryError> {
        self.instances.get(id).ok_or_else(|| InventoryError::Unknown { kind: "instance", id: id.to_owned() })
    }

    fn instance_mut(&mut self, id: &str) -> Result<&mut Instance, InventoryError> {
        self.instances.get_mut(id).ok_or_else(|| InventoryError::Unknown { kind: "instance", id: id.to_owned() })
    }

    /// Folds one record. Strict: see the module comment.
    pub fn apply(&mut self, record: &InstanceRecord) -> Result<(), InventoryError> {
        match record {
            InstanceRecord::NodeCreated { node } => {
                if self.nodes.contains_key(&node.id) {
                    return Err(InventoryError::Duplicate { kind: "node", id: node.id.clone() });
                }
                self.nodes.insert(node.id.clone(), node.clone());
            }
            InstanceRecord::PoolCreated { pool } => {
                if self.pools.contains_key(&pool.id) {
                    return Err(InventoryError::Duplicate { kind: "pool", id: pool.id.clone() });
                }
                self.pools.insert(pool.id.clone(), pool.clone());
            }
            InstanceRecord::InstanceCreated { instance } => {
                if self.instances.contains_key(&instance.id) {
                    return Err(InventoryError::Duplicate { kind: "instance", id: instance.id.clone() });
                }
                if !self.nodes.contains_key(&instance.node) {
                    return Err(InventoryError::Unknown { kind: "node", id: instance.node.clone() });
                }
                self.instances.insert(instance.id.clone(), (**instance).clone());
            }
            InstanceRecord::Transition { instance, event, from, to, at_ms } => {
                let row = self.instance_mut(instance)?;
                if row.state != *from {
                    return Err(InventoryError::StateMismatch {
                        instance: instance.clone(),
                        recorded: from.to_string(),
                        actual: row.state.to_string(),
                    });
                }
                let reached = transition(*from, *event)
                    .map_err(|transition| InventoryError::Illegal { instance: instance.clone(), transition })?;
                if reached != *to {
                    return Err(InventoryError::StateMismatch {
                        instance: instance.clone(),
                        recorded: to.to_string(),
                        actual: reached.to_string(),
                    });
                }
                row.state = reached;
                row.state_since_ms = *at_ms;
                if reached != InstanceState::Stopping {
                    row.drain_started_ms = None;
                }
            }
            InstanceRecord::ProviderCreated { instance, cloud_instance_id } => {
                self.instance_mut(instance)?.cloud_instance_id = Some(cloud_instance_id.clone());
            }
            InstanceRecord::AgentSeen { instance, at_ms } => {
                let row = self.instance_mut(instance)?;
                row.first_heartbeat_ms.get_or_insert(*at_ms);
            }
            InstanceRecord::PoolStateChanged { instance, from, to, anchor_ms, by_cordon } => {
                let row = self.instance_mut(instance)?;
                let membership = row
                    .pool
                    .as_mut()
                    .ok_or_else(|| InventoryError::Unknown { kind: "pool membership of", id: instance.clone() })?;
                if membership.state != *from {
                    return Err(InventoryError::StateMismatch {
                        instance: instance.clone(),
                        recorded: from.as_str().to_owned(),
                        actual: membership.state.as_str().to_owned(),
                    });
                }
                membership.state = *to;
                membership.fenced_by_cordon = *to == PoolState::Draining && *by_cordon;
                if let Some(anchor_ms) = anchor_ms {
                    membership.anchor_ms = *anchor_ms;
                }
            }
            InstanceRecord::HoldPlaced { instance, hold } => self.instance_mut(instance)?.hold = Some(hold.clone()),
            InstanceRecord::HoldLifted { instance, .. } => self.instance_mut(instance)?.hold = None,
            InstanceRecord::Cordoned { instance, cordon } => {
                self.instance_mut(instance)?.cordon = Some(cordon.clone());
            }
            InstanceRecord::Uncordoned { instance, .. } => self.instance_mut(instance)?.cordon = None,
            InstanceRecord::DrainStarted { instance, at_ms } => {
                self.instance_mut(instance)?.drain_started_ms = Some(*at_ms);
            }
            InstanceRecord::DestroyRequested { instance, at_ms } => {
                self.instance_mut(instance)?.destroy_pending_since_ms = Some(*at_ms);
            }
            InstanceRecord::DestroyConfirmed { instance } => {
                self.instance_mut(instance)?.destroy_pending_since_ms = None;
            }
            InstanceRecord::Cascaded { instance, .. } => self.instance_mut(instance)?.cascaded = true,
            InstanceRecord::Deferred { deferred } => {
                if self.deferred.contains_key(&deferred.id) {
                    return Err(InventoryError::Duplicate { kind: "deferred operation", id: deferred.id.clone() });
                }
                self.deferred.insert(deferred.id.clone(), deferred.clone());
            }
            InstanceRecord::Decided { deferred, status, .. } => {
                let row = self
                    .deferred
                    .get_mut(deferred)
                    .ok_or_else(|| InventoryError::Unknown { kind: "deferred operation", id: deferred.clone() })?;
                row.status = *status;
            }
            InstanceRecord::SyncChecked { region, at_ms, listed } => {
                self.syncs.insert(region.clone(), (*at_ms, listed.clone()));
            }
            InstanceRecord::Audited { audit } => self.audit.push(audit.clone()),
        }
        Ok(())
    }

    /// The record of one state machine event on an instance, or the typed refusal.
    pub(super) fn event(
        &self,
        instance: &Instance,
        event: InstanceEvent,
        now_ms: u64,
    ) -> Result<InstanceRecord, IllegalTransition> {
        let to = transition(instance.state, event)?;
        Ok(InstanceRecord::Transition { instance: instance.id.clone(), event, from: instance.state, to, at_ms: now_ms })
    }

    /// The next instance id: one more than the rows there are (rows are never deleted).
    pub(super) fn next_instance_id(&self) -> String {
        self.new_instance_id(0)
    }

    /// The id of the `k`-th instance row minted from here (`0`: the next one), for a decision that mints several.
    pub(super) fn new_instance_id(&self, k: usize) -> String {
        format!("i-{:05}", self.instances.len() + 1 + k)
    }

    /// The id of the `k`-th node row minted from here: one more than the rows there are (rows are never deleted).
    pub(super) fn new_node_id(&self, k: usize) -> String {
        format!("n-{:05}", self.nodes.len() + 1 + k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Node {
        Node {
            id: "n-1".into(),
            account: "acme".into(),
            name: "edge-tokyo-01".into(),
            template_id: "t-edge".into(),
            worker_id: None,
            enabled: true,
            config: BTreeMap::new(),
        }
    }

    #[test]
    fn a_record_round_trips_through_its_journal_line_with_the_inventory_as_subject() {
        let record = InstanceRecord::NodeCreated { node: node() };
        let line = record.to_line();
        assert!(line.starts_with("instances {"), "{line}");
        assert_eq!(crate::ports::record_subject(&line).as_deref(), Some(SUBJECT));
        assert_eq!(InstanceRecord::from_line(&line), Some(Ok(record)));
        assert_eq!(InstanceRecord::from_line("rollout {}"), None);
        assert!(matches!(InstanceRecord::from_line("instances {\"record\":\"bogus\"}"), Some(Err(_))));
    }

    #[test]
    fn apply_all_folds_a_decision_in_order_and_stops_at_its_first_refused_record() {
        let named = |id: &str| InstanceRecord::NodeCreated { node: Node { id: id.into(), ..node() } };
        let mut inventory = Inventory::default();
        inventory.apply_all(&[named("n-1"), named("n-2")]).unwrap();
        assert_eq!(inventory.nodes.keys().collect::<Vec<_>>(), ["n-1", "n-2"]);

        let refused = inventory.apply_all(&[named("n-3"), named("n-1"), named("n-4")]);
        assert!(
            matches!(refused, Err(InventoryError::Duplicate { kind: "node", ref id }) if id == "n-1"),
            "{refused:?}"
        );
        assert_eq!(
            inventory.nodes.keys().collect::<Vec<_>>(),
            ["n-1", "n-2", "n-3"],
            "applied up to the refusal, not past it"
        );
    }

    #[test]
    fn the_fold_refuses_a_transition_the_table_does_not_allow_or_from_the_wrong_state() {
        let mut inventory = Inventory::default();
        inventory.apply(&InstanceRecord::NodeCreated { node: node() }).unwrap();
        let instance = Instance::pending(
            "i-00001".into(),
            "n-1".into(),
            "edge-tokyo-01-0".into(),
            Backing::Cloud { region: "r".into(), instance_type: "t".into() },
            None,
            None,
            0,
        );
        inventory.apply(&InstanceRecord::InstanceCreated { instance: Box::new(instance) }).unwrap();
        let forged = InstanceRecord::Transition {
            instance: "i-00001".into(),
            event: InstanceEvent::Start,
            from: InstanceState::Pending,
            to: InstanceState::Starting,
            at_ms: 1,
        };
        assert!(matches!(inventory.apply(&forged), Err(InventoryError::Illegal { .. })));
        let stale = InstanceRecord::Transition {
            instance: "i-00001".into(),
            event: InstanceEvent::MarkRunning,
            from: InstanceState::Provisioning,
            to: InstanceState::Running,
            at_ms: 1,
        };
        assert!(matches!(inventory.apply(&stale), Err(InventoryError::StateMismatch { .. })));
        assert_eq!(inventory.instance("i-00001").unwrap().state, InstanceState::Pending);
        assert!(matches!(
            inventory.apply(&InstanceRecord::NodeCreated { node: node() }),
            Err(InventoryError::Duplicate { .. })
        ));
    }
}
