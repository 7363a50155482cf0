//! Instance pools (runbook "lifecycle_class", `instance-pool-tuning.md`): warm capacity of one lifecycle class,
//! members that go warming → ready → claimed → released, the allocator's conditional `acquire`, the replenisher
//! and the ready-TTL recycle.
//!
//! The class (`ephemeral` or `spot`) lives on the pool, never on a node; a member node reaches its pool through
//! `config["instance_pool_id"]`. `draining` is a pool state (a cordon's fence, a drain, a recycle in flight), the one
//! state the allocator never picks and the recycle never touches.

use std::collections::BTreeMap;

use super::control::ControlRefusal;
use super::inventory::{Backing, Decided, Instance, InstanceRecord, Inventory, Membership, Node};
use super::state::InstanceState;
use super::terms::Control;
pub use super::terms::{LifecycleClass, Pool, PoolState, ReleaseDisposition};

/// Why a pool operation was refused; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolRefusal {
    #[error("no such pool {0}")]
    UnknownPool(String),
    #[error("pool {0} already exists")]
    Duplicate(String),
    #[error("pool {id}: target_size {target_size} is above max_size {max_size}")]
    TargetAboveMax { id: String, target_size: u32, max_size: u32 },
    #[error("pool {0}: ready_ttl_seconds must be at least 1")]
    ZeroTtl(String),
    #[error("pool {0} has no ready member")]
    NoneReady(String),
    #[error("no such instance {0}")]
    UnknownInstance(String),
    #[error("instance {instance} is {state} in its pool, not claimed: only a claimed member is released")]
    NotClaimed { instance: String, state: String },
    #[error(transparent)]
    Control(#[from] ControlRefusal),
}

/// What a release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// Terminated through the choke point.
    Recycled,
    /// Back to ready with a fresh TTL anchor.
    Reused,
    /// It carried a cordon marker: fenced (draining), restored to ready by an uncordon.
    Fenced,
}

impl Inventory {
    pub fn create_pool(&self, pool: Pool) -> Result<Decided<()>, PoolRefusal> {
        if self.pools.contains_key(&pool.id) {
            return Err(PoolRefusal::Duplicate(pool.id));
        }
        if pool.target_size > pool.max_size {
            return Err(PoolRefusal::TargetAboveMax {
                id: pool.id,
                target_size: pool.target_size,
                max_size: pool.max_size,
            });
        }
        if pool.ready_ttl_seconds == 0 {
            return Err(PoolRefusal::ZeroTtl(pool.id));
        }
        Ok(Decided::new(vec![InstanceRecord::PoolCreated { pool }], ()))
    }

    /// The pool's members that are still in it (not released), in id order.
    pub fn members<'a>(&'a self, pool: &'a str) -> impl Iterator<Item = &'a Instance> + 'a {
        self.instances.values().filter(move |instance| {
            instance.pool.as_ref().is_some_and(|m| m.pool == pool && m.state != PoolState::Released)
        })
    }

    /// The replenisher's pass (every 60 s): mints warming members up to `target_size`, counting a fenced
    /// (draining) member as gone, and never above `max_size` members in the pool. Returns the new instance ids.
    pub fn replenish(&self, pool_id: &str, now_ms: u64) -> Result<Decided<Vec<String>>, PoolRefusal> {
        let pool = self.pools.get(pool_id).ok_or_else(|| PoolRefusal::UnknownPool(pool_id.to_owned()))?;
        let members: Vec<&Instance> = self.members(pool_id).collect();
        let counted = members.iter().filter(|m| m.pool.as_ref().is_some_and(|m| m.state != PoolState::Draining));
        let short = (pool.target_size as usize).saturating_sub(counted.count());
        let room = (pool.max_size as usize).saturating_sub(members.len());
        let mut records = Vec::new();
        let mut minted = Vec::new();
        for k in 0..short.min(room) {
            let node_id = self.new_node_id(k);
            let instance_id = self.new_instance_id(k);
            let node = Node {
                id: node_id.clone(),
                account: pool.account.clone(),
                name: format!("{}-{instance_id}", pool.id),
                template_id: pool.template_id.clone(),
                worker_id: None,
                enabled: true,
                config: BTreeMap::from([("instance_pool_id".to_owned(), pool.id.clone())]),
            };
            let membership = Membership {
                pool: pool.id.clone(),
                state: PoolState::Warming,
                anchor_ms: now_ms,
                fenced_by_cordon: false,
            };
            let instance = Instance::pending(
                instance_id.clone(),
                node_id,
                format!("{}-{now_ms}", node.name),
                Backing::Cloud { region: pool.region.clone(), instance_type: pool.instance_type.clone() },
                Some(format!("{}/replenish/{instance_id}", pool.id)),
                Some(membership),
                now_ms,
            );
            records.push(InstanceRecord::NodeCreated { node });
            records.push(InstanceRecord::InstanceCreated { instance: Box::new(instance) });
            minted.push(instance_id);
        }
        Ok(Decided::new(records, minted))
    }

    /// The allocator: hands out one ready, running, uncordoned member, with a write conditional on it still being
    /// ready (the record's `from`), so a member claimed a moment earlier is never handed out twice.
    pub fn acquire(&self, pool_id: &str) -> Result<Decided<String>, PoolRefusal> {
        if !self.pools.contains_key(pool_id) {
            return Err(PoolRefusal::UnknownPool(pool_id.to_owned()));
        }
        let member = self
            .members(pool_id)
            .filter(|m| m.pool.as_ref().is_some_and(|m| m.state == PoolState::Ready))
            .filter(|m| m.state == InstanceState::Running && m.cordon.is_none())
            .min_by_key(|m| (m.pool.as_ref().map(|m| m.anchor_ms), m.id.clone()))
            .ok_or_else(|| PoolRefusal::NoneReady(pool_id.to_owned()))?;
        let record = InstanceRecord::PoolStateChanged {
            instance: member.id.clone(),
            from: PoolState::Ready,
            to: PoolState::Claimed,
            anchor_ms: None,
            by_cordon: false,
        };
        Ok(Decided::new(vec![record], member.id.clone()))
    }

    /// A consumer returns a claimed member; the pool's disposition decides what happens to it.
    pub fn release(&self, instance_id: &str, now_ms: u64) -> Result<Decided<Released>, PoolRefusal> {
        let instance = self.instance(instance_id).map_err(|_| PoolRefusal::UnknownInstance(instance_id.to_owned()))?;
        let membership = instance.pool.as_ref().filter(|m| m.state == PoolState::Claimed).ok_or_else(|| {
            PoolRefusal::NotClaimed {
                instance: instance_id.to_owned(),
                state: instance.pool.as_ref().map_or("not pooled", |m| m.state.as_str()).to_owned(),
            }
        })?;
        let pool = self.pools.get(&membership.pool).ok_or_else(|| PoolRefusal::UnknownPool(membership.pool.clone()))?;
        let change = |to, anchor_ms, by_cordon| InstanceRecord::PoolStateChanged {
            instance: instance_id.to_owned(),
            from: PoolState::Claimed,
            to,
            anchor_ms,
            by_cordon,
        };
        match (pool.disposition, instance.cordon.is_some()) {
            (ReleaseDisposition::Recycled, _) => {
                let terminate = self.control(instance_id, Control::Terminate, false, now_ms)?;
                Ok(Decided::new(terminate.records, Released::Recycled))
            }
            (ReleaseDisposition::ReuseWithoutReset, true) => {
                Ok(Decided::new(vec![change(PoolState::Draining, None, true)], Released::Fenced))
            }
            (ReleaseDisposition::ReuseWithoutReset, false) => {
                Ok(Decided::new(vec![change(PoolState::Ready, Some(now_ms), false)], Released::Reused))
            }
        }
    }

    /// The stale recycle: every ready member whose anchor is older than the pool's `ready_ttl_seconds` is fenced
    /// and terminated, whatever the target size. A held member is fenced and left for its operator (the hold
    /// refuses the terminate). Returns the recycled instance ids.
    pub fn recycle_stale(&self, pool_id: &str, now_ms: u64) -> Result<Decided<Vec<String>>, PoolRefusal> {
        let pool = self.pools.get(pool_id).ok_or_else(|| PoolRefusal::UnknownPool(pool_id.to_owned()))?;
        let ttl_ms = pool.ready_ttl_seconds.saturating_mul(1000);
        let mut records = Vec::new();
        let mut recycled = Vec::new();
        let mut scratch = self.clone();
        for member in self.members(pool_id) {
            let membership = member.pool.as_ref().expect("a member");
            if membership.state != PoolState::Ready || now_ms.saturating_sub(membership.anchor_ms) <= ttl_ms {
                continue;
            }
            let fence = InstanceRecord::PoolStateChanged {
                instance: member.id.clone(),
                from: PoolState::Ready,
                to: PoolState::Draining,
                anchor_ms: None,
                by_cordon: false,
            };
            scratch.apply(&fence).expect("a ready member fences");
            records.push(fence);
            if let Ok(terminate) = scratch.control(&member.id, Control::Terminate, false, now_ms) {
                scratch.apply_all(&terminate.records).expect("the choke point's records apply");
                records.extend(terminate.records);
                recycled.push(member.id.clone());
            }
        }
        Ok(Decided::new(records, recycled))
    }
}
