//! The simulated network of the fast transport: a message-level model between named hosts.
//!
//! Per directed link: a latency range in ms, request loss and response loss in per-mille, a one-way partition flag
//! and a hold. The fault model (what stays recoverable):
//! - a **partition** drops every message on the blocked direction, including those in flight when it starts;
//!   callers see a timeout (the incident's "Connection ... timed out"), never an error that names the cause;
//! - **request loss** drops the request: the call did not run, the caller times out;
//! - **response loss** drops the answer: the call ran but the caller never hears (idempotency must survive it);
//! - a **hold** queues messages on a link until it is released; then they are delivered, possibly after the caller
//!   gave up (late execution);
//! - a call to a host that is down is **refused** after one round trip; a host that crashes while it holds a call
//!   **resets** it.
//!
//! [`NetState`] is the synchronous part (what happens to the next message); the async call path lives in
//! [`crate::world`]. Every draw comes from the network's own seeded stream, in call order.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use tokio::sync::Notify;

use crate::model::link::LinkConfig;

pub type HostId = usize;

/// What the network decided for one call, drawn when the call is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallPlan {
    pub request_latency_ms: u64,
    pub response_latency_ms: u64,
    pub request_lost: bool,
    pub response_lost: bool,
}

/// The network's state: links, partitions, holds.
pub struct NetState {
    rng: ChaCha8Rng,
    default_link: LinkConfig,
    overrides: BTreeMap<(HostId, HostId), LinkConfig>,
    /// Blocked directions `(from, to)`.
    blocked: BTreeSet<(HostId, HostId)>,
    /// Held directions and the notifier that wakes waiting messages on release.
    held: BTreeMap<(HostId, HostId), Rc<Notify>>,
}

impl NetState {
    pub fn new(rng: ChaCha8Rng, default_link: LinkConfig) -> NetState {
        NetState { rng, default_link, overrides: BTreeMap::new(), blocked: BTreeSet::new(), held: BTreeMap::new() }
    }

    pub fn link(&self, from: HostId, to: HostId) -> LinkConfig {
        self.overrides.get(&(from, to)).copied().unwrap_or(self.default_link)
    }

    pub fn set_link(&mut self, from: HostId, to: HostId, config: LinkConfig) {
        if config == self.default_link {
            self.overrides.remove(&(from, to));
        } else {
            self.overrides.insert((from, to), config);
        }
    }

    /// The largest one-way latency any link can have right now.
    pub fn latency_max_ms(&self) -> u64 {
        self.overrides.values().map(|link| link.latency_max_ms).fold(self.default_link.latency_max_ms, u64::max)
    }

    /// `partition`: both directions between `a` and `b` drop.
    pub fn partition(&mut self, a: HostId, b: HostId) {
        self.partition_oneway(a, b);
        self.partition_oneway(b, a);
    }

    /// `repair`: both directions between `a` and `b` deliver again.
    pub fn repair(&mut self, a: HostId, b: HostId) {
        self.repair_oneway(a, b);
        self.repair_oneway(b, a);
    }

    /// `hold`: messages both ways between `a` and `b` wait until released.
    pub fn hold_both(&mut self, a: HostId, b: HostId) {
        self.hold(a, b);
        self.hold(b, a);
    }

    /// `release`: the held messages both ways between `a` and `b` go on.
    pub fn release_both(&mut self, a: HostId, b: HostId) {
        self.release(a, b);
        self.release(b, a);
    }

    /// `link_loss`: both directions between `a` and `b` lose requests and answers at these rates.
    pub fn set_loss(&mut self, a: HostId, b: HostId, request_per_mille: u32, response_per_mille: u32) {
        self.change_both(a, b, |link| {
            link.request_loss_per_mille = request_per_mille;
            link.response_loss_per_mille = response_per_mille;
        });
    }

    /// `link_latency`: both directions between `a` and `b` take between `min_ms` and `max_ms`.
    pub fn set_latency(&mut self, a: HostId, b: HostId, min_ms: u64, max_ms: u64) {
        self.change_both(a, b, |link| {
            link.latency_min_ms = min_ms;
            link.latency_max_ms = max_ms;
        });
    }

    /// Changes both directions' links between `a` and `b` the same way.
    fn change_both(&mut self, a: HostId, b: HostId, change: impl Fn(&mut LinkConfig)) {
        for (x, y) in [(a, b), (b, a)] {
            let mut link = self.link(x, y);
            change(&mut link);
            self.set_link(x, y, link);
        }
    }

    pub fn partition_oneway(&mut self, from: HostId, to: HostId) {
        self.blocked.insert((from, to));
    }

    pub fn repair_oneway(&mut self, from: HostId, to: HostId) {
        self.blocked.remove(&(from, to));
    }

    pub fn is_blocked(&self, from: HostId, to: HostId) -> bool {
        self.blocked.contains(&(from, to))
    }

    pub fn hold(&mut self, from: HostId, to: HostId) {
        self.held.entry((from, to)).or_insert_with(|| Rc::new(Notify::new()));
    }

    /// Releases a hold and wakes every message queued on it.
    pub fn release(&mut self, from: HostId, to: HostId) {
        if let Some(notify) = self.held.remove(&(from, to)) {
            notify.notify_waiters();
        }
    }

    /// The notifier to wait on when `(from, to)` is held.
    /// Whether a fault set the latency of the direction `from` → `to` off the run's default.
    pub fn slowed(&self, from: HostId, to: HostId) -> bool {
        self.overrides.get(&(from, to)).is_some_and(|link| {
            (link.latency_min_ms, link.latency_max_ms)
                != (self.default_link.latency_min_ms, self.default_link.latency_max_ms)
        })
    }

    pub fn held(&self, from: HostId, to: HostId) -> Option<Rc<Notify>> {
        self.held.get(&(from, to)).cloned()
    }

    /// No link loses messages at random, and none holds any: from now on the network changes nothing by itself.
    pub fn at_rest(&self) -> bool {
        let lossless = |link: &LinkConfig| link.request_loss_per_mille == 0 && link.response_loss_per_mille == 0;
        self.held.is_empty() && lossless(&self.default_link) && self.overrides.values().all(lossless)
    }

    /// Draws latencies and losses for one call from `from` to `to` (and its answer back).
    pub fn plan_call(&mut self, from: HostId, to: HostId) -> CallPlan {
        let there = self.link(from, to);
        let back = self.link(to, from);
        CallPlan {
            request_latency_ms: self.rng.random_range(there.latency_min_ms..=there.latency_max_ms),
            response_latency_ms: self.rng.random_range(back.latency_min_ms..=back.latency_max_ms),
            request_lost: self.rng.random_range(0..1000) < there.request_loss_per_mille,
            response_lost: self.rng.random_range(0..1000) < back.response_loss_per_mille,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn net(link: LinkConfig) -> NetState {
        NetState::new(ChaCha8Rng::seed_from_u64(7), link)
    }

    #[test]
    fn loss_rates_are_per_mille_per_direction() {
        let mut state =
            net(LinkConfig { request_loss_per_mille: 250, response_loss_per_mille: 0, ..LinkConfig::default() });
        state.set_link(1, 0, LinkConfig { response_loss_per_mille: 1000, ..LinkConfig::default() });
        let plans: Vec<CallPlan> = (0..4000).map(|_| state.plan_call(0, 1)).collect();
        let lost = plans.iter().filter(|p| p.request_lost).count();
        assert!((800..1200).contains(&lost), "about a quarter of 4000 requests lost, got {lost}");
        assert!(plans.iter().all(|p| p.response_lost), "the answer direction 1->0 loses everything");
        assert!(plans.iter().all(|p| (1..=20).contains(&p.request_latency_ms)));
    }

    #[test]
    fn the_network_is_at_rest_without_loss_or_holds_whatever_its_partitions() {
        let mut state = net(LinkConfig::default());
        state.partition(0, 1);
        assert!(state.at_rest(), "a standing partition changes nothing by itself");
        state.set_loss(1, 2, 0, 10);
        assert!(!state.at_rest(), "a lossy link drops messages at random");
        state.set_loss(1, 2, 0, 0);
        state.hold(0, 2);
        assert!(!state.at_rest(), "a hold delivers late");
        state.release(0, 2);
        assert!(state.at_rest());
        let lossy = net(LinkConfig { request_loss_per_mille: 1, ..LinkConfig::default() });
        assert!(!lossy.at_rest(), "a lossy default link");
    }

    #[test]
    fn one_way_partitions_block_one_direction_and_repair_restores_it() {
        let mut state = net(LinkConfig::default());
        state.partition_oneway(0, 1);
        assert!(state.is_blocked(0, 1));
        assert!(!state.is_blocked(1, 0));
        state.repair_oneway(0, 1);
        assert!(!state.is_blocked(0, 1));
    }

    #[test]
    fn a_link_override_equal_to_the_default_is_dropped() {
        let mut state = net(LinkConfig::default());
        state.set_link(0, 1, LinkConfig { latency_max_ms: 500, ..LinkConfig::default() });
        assert_eq!(state.latency_max_ms(), 500);
        state.set_link(0, 1, LinkConfig::default());
        assert_eq!(state.latency_max_ms(), 20);
    }
}
