//! The runbook's sections as tests of the decisions, one or more per section, and a property test that drives
//! random operator and provider steps and checks every decision's records fold, legally, into what a replay of
//! the journal reads back.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::approval::{Done, Governance, Policy, Requested};
use super::control::{Control, ControlRefusal, ProviderCall};
use super::cordon::{CordonRefusal, CordonState, DrainCordon, DrainRefusal, UncordonRefusal, UncordonState};
use super::inventory::{Backing, Decided, DeferredOperation, InstanceRecord, Inventory, InventoryError};
use super::metal::MetalCall;
use super::pool::{LifecycleClass, Pool, PoolRefusal, PoolState, ReleaseDisposition, Released};
use super::provision::{AgentPhase, ProviderStep, ProvisionRefusal, Provisioned};
use super::state::InstanceState;
use super::stuck::Stuck;
use super::sync::{ListedVm, SyncSignal};
use crate::matrix::WorkflowState;
use crate::ports::bare_metal::{MetalPower, MetalStatus};

/// An inventory and the journal lines its decisions wrote, kept together as a driver keeps them.
#[derive(Default)]
struct Platform {
    inventory: Inventory,
    journal: Vec<String>,
}

impl Platform {
    fn commit<T>(&mut self, decided: Decided<T>) -> T {
        for record in &decided.records {
            self.journal.push(record.to_line());
            self.inventory.apply(record).expect("a decision's records apply");
        }
        decided.outcome
    }

    fn replayed(&self) -> Inventory {
        Inventory::replay(self.journal.iter().map(String::as_str)).expect("the journal replays")
    }

    fn node(&mut self, name: &str) -> String {
        let decided = self.inventory.create_node("acme", name, "t-edge", None, BTreeMap::new()).unwrap();
        self.commit(decided)
    }

    /// A running cloud instance of a new node.
    fn running(&mut self, name: &str, now_ms: u64) -> String {
        let node = self.node(name);
        let provisioned = self.inventory.provision(&node, cloud(), Some(&format!("op-{name}")), now_ms).unwrap();
        let id = self.commit(provisioned).instance().to_owned();
        self.boot(&id, now_ms);
        id
    }

    fn boot(&mut self, id: &str, now_ms: u64) {
        let begun = self.inventory.begin_provisioning(id, now_ms).unwrap();
        self.commit(begun);
        let created = self.inventory.handle_created(id, &format!("vm-{id}"));
        self.commit(created);
        let ready = self.inventory.handle_heartbeat(id, AgentPhase::Ready, now_ms + 90_000);
        self.commit(ready);
    }

    fn state(&self, id: &str) -> InstanceState {
        self.inventory.instance(id).unwrap().state
    }

    fn pool_state(&self, id: &str) -> Option<PoolState> {
        self.inventory.instance(id).unwrap().pool.as_ref().map(|m| m.state)
    }

    fn pool(&mut self, id: &str, target_size: u32, max_size: u32, disposition: ReleaseDisposition) {
        let pool = Pool {
            id: id.into(),
            account: "acme".into(),
            class: LifecycleClass::Ephemeral,
            target_size,
            max_size,
            ready_ttl_seconds: 3_600,
            disposition,
            region: "region-a".into(),
            instance_type: "type-small".into(),
            template_id: "t-runner".into(),
        };
        let created = self.inventory.create_pool(pool).unwrap();
        self.commit(created);
    }

    /// Replenishes the pool and boots every new member to ready.
    fn ready_members(&mut self, pool: &str, now_ms: u64) -> Vec<String> {
        let minted = self.inventory.replenish(pool, now_ms).unwrap();
        let minted = self.commit(minted);
        for id in &minted {
            self.boot(id, now_ms);
        }
        minted
    }
}

fn cloud() -> Backing {
    Backing::Cloud { region: "region-a".into(), instance_type: "type-small".into() }
}

const MINUTE: u64 = 60_000;

#[test]
fn the_happy_path_goes_pending_provisioning_running_and_a_replay_reads_the_same_rows() {
    let mut platform = Platform::default();
    let node = platform.node("edge-tokyo-01");
    let id = platform.commit(platform.inventory.provision(&node, cloud(), Some("op-1"), 0).unwrap());
    let id = id.instance().to_owned();
    assert_eq!(platform.state(&id), InstanceState::Pending);
    assert_eq!(platform.inventory.instance(&id).unwrap().name, "edge-tokyo-01-0");
    platform.commit(platform.inventory.begin_provisioning(&id, 1_000).unwrap());
    assert_eq!(platform.state(&id), InstanceState::Provisioning);
    let instance = platform.inventory.instance(&id).unwrap();
    assert!(matches!(platform.inventory.provider_step(instance, None), ProviderStep::Create { tag, .. } if tag == id));
    platform.commit(platform.inventory.handle_created(&id, "vm-1"));
    platform.commit(platform.inventory.handle_heartbeat(&id, AgentPhase::Booting, 30_000));
    assert_eq!(platform.state(&id), InstanceState::Provisioning, "a booting heartbeat is not running");
    platform.commit(platform.inventory.handle_heartbeat(&id, AgentPhase::Ready, 91_000));
    assert_eq!(platform.state(&id), InstanceState::Running);
    let instance = platform.inventory.instance(&id).unwrap();
    assert_eq!((instance.first_heartbeat_ms, instance.state_since_ms), (Some(30_000), 91_000));
    assert!(platform.inventory.handle_heartbeat(&id, AgentPhase::Ready, 121_000).records.is_empty());
    assert_eq!(platform.replayed(), platform.inventory);
}

#[test]
fn node_names_are_unique_per_account_and_need_a_template() {
    let mut platform = Platform::default();
    platform.node("edge-01");
    let again = platform.inventory.create_node("acme", "edge-01", "t", None, BTreeMap::new());
    assert!(matches!(again, Err(super::provision::NodeRefusal::NameTaken { .. })));
    assert!(platform.inventory.create_node("other", "edge-01", "t", None, BTreeMap::new()).is_ok());
    assert!(platform.inventory.create_node("acme", "edge-02", " ", None, BTreeMap::new()).is_err());
    assert!(platform.inventory.create_node("acme", "", "t", None, BTreeMap::new()).is_err());
}

#[test]
fn a_retry_with_the_same_operation_id_reuses_the_row_and_adopts_the_vm_whose_answer_was_lost() {
    let mut platform = Platform::default();
    let node = platform.node("edge-01");
    let first = platform.commit(platform.inventory.provision(&node, cloud(), Some("op-7"), 0).unwrap());
    platform.commit(platform.inventory.begin_provisioning(first.instance(), 1).unwrap());
    // The create executed at the provider; its answer was lost, so the row has no VM id. The caller retries.
    let retry = platform.inventory.provision(&node, cloud(), Some("op-7"), 5_000).unwrap();
    assert!(retry.records.is_empty(), "a reused row writes nothing");
    assert_eq!(retry.outcome, Provisioned::Reused { instance: first.instance().to_owned() });
    let instance = platform.inventory.instance(first.instance()).unwrap();
    assert_eq!(
        platform.inventory.provider_step(instance, Some("vm-9")),
        ProviderStep::Adopt { cloud_instance_id: "vm-9".into() },
        "a VM carrying the tag is adopted, never created again"
    );
    // Without an operation id: a distinct, time-stamped instance every time.
    let a = platform.commit(platform.inventory.provision(&node, cloud(), None, 6_000).unwrap());
    let b = platform.commit(platform.inventory.provision(&node, cloud(), None, 7_000).unwrap());
    assert!(matches!((&a, &b), (Provisioned::Created { .. }, Provisioned::Created { .. })));
    assert_ne!(a.instance(), b.instance());
    assert_ne!(
        platform.inventory.instance(a.instance()).unwrap().name,
        platform.inventory.instance(b.instance()).unwrap().name
    );
    assert_eq!(platform.inventory.instances.len(), 3);
}

#[test]
fn an_errored_operation_must_be_terminated_before_it_is_provisioned_again() {
    let mut platform = Platform::default();
    let node = platform.node("edge-01");
    let first = platform.commit(platform.inventory.provision(&node, cloud(), Some("op-1"), 0).unwrap());
    let id = first.instance().to_owned();
    platform.commit(platform.inventory.begin_provisioning(&id, 1).unwrap());
    platform.commit(platform.inventory.handle_failed(&id, 2).unwrap());
    assert_eq!(platform.state(&id), InstanceState::Error);
    assert_eq!(
        platform.inventory.provision(&node, cloud(), Some("op-1"), 3),
        Err(ProvisionRefusal::TerminateFirst { operation_id: "op-1".into(), instance: id.clone() })
    );
    platform.commit(platform.inventory.control(&id, Control::Terminate, false, 4).unwrap());
    let again = platform.commit(platform.inventory.provision(&node, cloud(), Some("op-1"), 5).unwrap());
    assert!(matches!(&again, Provisioned::Created { instance } if *instance != id));
    assert_eq!(platform.inventory.nodes.len(), 1, "the Node row outlives its instances");
}

#[test]
fn the_ops_hold_refuses_start_reboot_and_terminate_even_forced_and_allows_stop() {
    let mut platform = Platform::default();
    let id = platform.running("edge-01", 0);
    platform.commit(platform.inventory.place_hold(&id, "ops", "disk swap", 10).unwrap());
    for action in [Control::Reboot, Control::Terminate] {
        for force in [false, true] {
            let refused = platform.inventory.control(&id, action, force, 20);
            assert!(matches!(refused, Err(ControlRefusal::Held { action: a, .. }) if a == action), "{action:?}");
        }
    }
    let stop = platform.commit(platform.inventory.control(&id, Control::Stop, true, 30).unwrap());
    assert!(matches!(stop.provider_call, ProviderCall::Stop { hard: true, .. }));
    platform.commit(platform.inventory.handle_stopped(&id, 40).unwrap());
    assert_eq!(platform.state(&id), InstanceState::Stopped);
    assert!(matches!(platform.inventory.control(&id, Control::Start, true, 50), Err(ControlRefusal::Held { .. })));
    platform.commit(platform.inventory.lift_hold(&id, "ops").unwrap());
    let terminate = platform.commit(platform.inventory.control(&id, Control::Terminate, false, 60).unwrap());
    assert!(terminate.cascade);
    assert!(matches!(terminate.provider_call, ProviderCall::Destroy { cloud_instance_id: Some(_), .. }));
    assert_eq!(
        platform.inventory.place_hold(&id, "ops", "x", 70),
        Err(super::control::HoldRefusal::Terminated(id.clone()))
    );
    assert!(platform.inventory.place_hold("nope", "ops", "x", 70).is_err());
}

#[test]
fn a_drain_works_on_a_held_instance_and_a_refused_stop_writes_nothing() {
    let mut platform = Platform::default();
    let id = platform.running("edge-01", 0);
    platform.commit(platform.inventory.place_hold(&id, "ops", "window", 1).unwrap());
    let drained = platform.commit(platform.inventory.drain(&id, "ops", 2).unwrap());
    assert_eq!(drained.cordon, DrainCordon::Placed(CordonState::NotPooled));
    assert_eq!(platform.state(&id), InstanceState::Stopping);
    assert_eq!(platform.inventory.instance(&id).unwrap().drain_started_ms, Some(2));
    platform.commit(platform.inventory.handle_stopped(&id, 3).unwrap());
    assert_eq!(platform.inventory.instance(&id).unwrap().drain_started_ms, None, "the drain's stop is done");
    // Stopped: a second drain's stop is illegal, so the drain is an error and nothing is written.
    let again = platform.inventory.drain(&id, "ops", 4);
    assert!(matches!(again, Err(DrainRefusal::Stop(ControlRefusal::Illegal { .. }))), "{again:?}");
}

#[test]
fn every_cordon_outcome_and_every_refusal() {
    let mut platform = Platform::default();
    platform.pool("p", 3, 4, ReleaseDisposition::ReuseWithoutReset);
    let members = platform.ready_members("p", 0);
    let (ready, claimed, draining) = (&members[0], &members[1], &members[2]);
    let claim = platform.inventory.acquire("p").unwrap();
    assert_eq!(&claim.outcome, ready, "the oldest ready member, lowest id");
    // Claim the second one instead of the first: take the first out of the allocator first.
    let fenced = platform.commit(platform.inventory.cordon(ready, "kernel patch", "ops", 10).unwrap());
    assert_eq!(fenced, CordonState::Fenced);
    assert_eq!(platform.pool_state(ready), Some(PoolState::Draining));
    assert_eq!(&platform.commit(platform.inventory.acquire("p").unwrap()), claimed);
    assert_eq!(platform.commit(platform.inventory.cordon(claimed, "r", "ops", 11).unwrap()), CordonState::Claimed);
    assert_eq!(platform.pool_state(claimed), Some(PoolState::Claimed), "a claimed member is never flipped");
    let recycle = platform.inventory.recycle_stale("p", 3_600_001 + 90_000).unwrap();
    assert!(recycle.outcome.contains(draining));
    // Fence the third by hand as a recycle would, without terminating it: a draining member's cordon is marker only.
    platform.commit(Decided::new(vec![recycle.records[0].clone()], ()));
    assert_eq!(
        platform.commit(platform.inventory.cordon(draining, "r", "ops", 12).unwrap()),
        CordonState::AlreadyFenced
    );
    // A fence this cordon did not place is not this cordon's to lift: the uncordon clears the marker only.
    assert_eq!(platform.commit(platform.inventory.uncordon(draining, "ops", 13).unwrap()), UncordonState::Cleared);
    assert_eq!(platform.pool_state(draining), Some(PoolState::Draining));
    let plain = platform.running("edge-01", 0);
    assert_eq!(platform.commit(platform.inventory.cordon(&plain, "r", "ops", 13).unwrap()), CordonState::NotPooled);
    assert!(
        platform
            .inventory
            .cordon(&plain, "r", "ops", 14)
            .is_err_and(|e| matches!(e, CordonRefusal::AlreadyCordoned { .. }))
    );

    let other = platform.running("edge-02", 0);
    assert_eq!(platform.inventory.cordon(&other, "  ", "ops", 15), Err(CordonRefusal::BlankReason));
    let warming = platform.commit(platform.inventory.replenish("p", 20).unwrap());
    assert_eq!(platform.inventory.cordon(&warming[0], "r", "ops", 21), Err(CordonRefusal::Warming(warming[0].clone())));
    platform.commit(platform.inventory.handle_failed(&warming[0], 22).unwrap());
    assert_eq!(platform.inventory.cordon(&warming[0], "r", "ops", 23), Err(CordonRefusal::Errored(warming[0].clone())));
    platform.commit(platform.inventory.control(&other, Control::Terminate, false, 24).unwrap());
    assert_eq!(platform.inventory.cordon(&other, "r", "ops", 25), Err(CordonRefusal::Terminated(other.clone())));
    assert_eq!(platform.replayed(), platform.inventory);
}

#[test]
fn uncordon_restores_what_this_cordon_fenced_clears_the_rest_and_fails_closed_on_a_stopped_member() {
    let mut platform = Platform::default();
    platform.pool("p", 2, 2, ReleaseDisposition::ReuseWithoutReset);
    let members = platform.ready_members("p", 0);
    let (a, b) = (&members[0], &members[1]);
    platform.commit(platform.inventory.cordon(a, "patch", "ops", 10).unwrap());
    let restored = platform.commit(platform.inventory.uncordon(a, "ops", 5_000_000).unwrap());
    assert_eq!(restored, UncordonState::Restored);
    let membership = platform.inventory.instance(a).unwrap().pool.clone().unwrap();
    assert_eq!((membership.state, membership.anchor_ms), (PoolState::Ready, 5_000_000), "a fresh ready-TTL anchor");
    // Fenced, then stopped: the uncordon refuses rather than hand out a dead VM as ready.
    platform.commit(platform.inventory.drain(b, "ops", 20).unwrap());
    platform.commit(platform.inventory.handle_stopped(b, 21).unwrap());
    assert_eq!(
        platform.inventory.uncordon(b, "ops", 22),
        Err(UncordonRefusal::FencedNotRunning { instance: b.clone(), state: InstanceState::Stopped })
    );
    // It left draining while cordoned (terminated): the marker clears, ready is never written.
    platform.commit(platform.inventory.control(b, Control::Terminate, false, 23).unwrap());
    assert_eq!(platform.commit(platform.inventory.uncordon(b, "ops", 24).unwrap()), UncordonState::Cleared);
    assert_eq!(platform.pool_state(b), Some(PoolState::Released));
    assert_eq!(platform.inventory.uncordon(b, "ops", 25), Err(UncordonRefusal::NotCordoned(b.clone())));
}

#[test]
fn a_release_recycles_or_reuses_and_fences_a_cordoned_member_that_an_uncordon_hands_back() {
    let mut platform = Platform::default();
    platform.pool("recycled", 1, 1, ReleaseDisposition::Recycled);
    platform.pool("reused", 2, 2, ReleaseDisposition::ReuseWithoutReset);
    let recycled = platform.ready_members("recycled", 0)[0].clone();
    platform.commit(platform.inventory.acquire("recycled").unwrap());
    assert_eq!(platform.commit(platform.inventory.release(&recycled, 10).unwrap()), Released::Recycled);
    assert_eq!(
        (platform.state(&recycled), platform.pool_state(&recycled)),
        (InstanceState::Terminated, Some(PoolState::Released))
    );

    let members = platform.ready_members("reused", 0);
    let first = platform.commit(platform.inventory.acquire("reused").unwrap());
    assert_eq!(platform.commit(platform.inventory.release(&first, 20).unwrap()), Released::Reused);
    assert_eq!(platform.pool_state(&first), Some(PoolState::Ready));
    let claimed = platform.commit(platform.inventory.acquire("reused").unwrap());
    platform.commit(platform.inventory.cordon(&claimed, "patch", "ops", 30).unwrap());
    assert_eq!(platform.commit(platform.inventory.release(&claimed, 40).unwrap()), Released::Fenced);
    assert_eq!(platform.pool_state(&claimed), Some(PoolState::Draining));
    assert_eq!(platform.commit(platform.inventory.uncordon(&claimed, "ops", 50).unwrap()), UncordonState::Restored);
    assert_eq!(platform.pool_state(&claimed), Some(PoolState::Ready));
    assert!(members.contains(&claimed));
    assert!(matches!(platform.inventory.release(&claimed, 60), Err(PoolRefusal::NotClaimed { .. })));
}

#[test]
fn the_allocator_hands_out_only_ready_members_with_a_conditional_write() {
    let mut platform = Platform::default();
    platform.pool("p", 2, 3, ReleaseDisposition::Recycled);
    let warming = platform.commit(platform.inventory.replenish("p", 0).unwrap());
    assert!(matches!(platform.inventory.acquire("p"), Err(PoolRefusal::NoneReady(_))), "warming is not acquirable");
    platform.boot(&warming[0], 0);
    let first = platform.inventory.acquire("p").unwrap();
    let second = platform.inventory.acquire("p").unwrap();
    assert_eq!(first.outcome, second.outcome, "decided on the same rows, both pick the one ready member");
    platform.commit(first);
    let lost = platform.inventory.apply(&second.records[0]);
    assert!(matches!(lost, Err(InventoryError::StateMismatch { .. })), "the second write's condition fails");
    assert!(matches!(platform.inventory.acquire("p"), Err(PoolRefusal::NoneReady(_))), "claimed is not acquirable");
    // A ready member stopped through the choke point (a stop, not a drain) is not handed out as a dead VM.
    platform.boot(&warming[1], 0);
    platform.commit(platform.inventory.control(&warming[1], Control::Stop, false, 10).unwrap());
    assert_eq!(platform.pool_state(&warming[1]), Some(PoolState::Ready));
    assert!(
        matches!(platform.inventory.acquire("p"), Err(PoolRefusal::NoneReady(_))),
        "a stopping member is not acquirable"
    );
}

#[test]
fn the_replenisher_counts_a_fenced_member_as_gone_never_exceeds_max_and_the_ttl_recycles_ready_members() {
    let mut platform = Platform::default();
    platform.pool("p", 2, 3, ReleaseDisposition::Recycled);
    let members = platform.ready_members("p", 0);
    assert_eq!(members.len(), 2);
    assert!(platform.inventory.replenish("p", MINUTE).unwrap().outcome.is_empty(), "at target");
    platform.commit(platform.inventory.cordon(&members[0], "patch", "ops", MINUTE).unwrap());
    let replacement = platform.ready_members("p", 2 * MINUTE);
    assert_eq!(replacement.len(), 1, "the fenced member counts as gone");
    platform.commit(platform.inventory.cordon(&members[1], "patch", "ops", 3 * MINUTE).unwrap());
    assert!(platform.inventory.replenish("p", 4 * MINUTE).unwrap().outcome.is_empty(), "three members is max_size");
    let node = &platform.inventory.nodes[&platform.inventory.instance(&replacement[0]).unwrap().node];
    assert_eq!(node.config.get("instance_pool_id").map(String::as_str), Some("p"), "the class lives on the pool");
    // One hour after its anchor the ready replacement is recycled; the fenced ones are never touched.
    let anchor = platform.inventory.instance(&replacement[0]).unwrap().pool.as_ref().unwrap().anchor_ms;
    assert!(platform.inventory.recycle_stale("p", anchor + 3_600_000).unwrap().outcome.is_empty());
    let recycled = platform.commit(platform.inventory.recycle_stale("p", anchor + 3_600_001).unwrap());
    assert_eq!(recycled, replacement);
    assert_eq!(platform.state(&replacement[0]), InstanceState::Terminated);
    assert_eq!(platform.pool_state(&members[0]), Some(PoolState::Draining));
    // The recycled member is out of the pool: the two fenced ones and one new member make max_size again.
    assert_eq!(platform.inventory.members("p").count(), 2);
    assert_eq!(platform.inventory.replenish("p", anchor + 3_600_002).unwrap().outcome.len(), 1);
}

#[test]
fn approval_parks_the_operation_writes_nothing_until_approved_and_a_denial_writes_nothing() {
    let mut platform = Platform::default();
    let id = platform.running("edge-01", 0);
    let before = platform.inventory.instance(&id).unwrap().clone();
    let cordon = DeferredOperation::Cordon { instance: id.clone(), reason: "patch".into(), by: "agent".into() };
    let requested = platform.inventory.request(cordon.clone(), Governance::default(), 10).unwrap();
    assert!(requested.records.iter().all(|r| matches!(r, InstanceRecord::Deferred { .. })));
    let Requested::Pending { deferred } = platform.commit(requested) else { panic!("gated by default") };
    assert_eq!(platform.inventory.instance(&id).unwrap(), &before, "nothing written before the approval");
    let done = platform.commit(platform.inventory.approve(&deferred, "ops", 20).unwrap());
    assert_eq!(done, Done::Cordoned(CordonState::NotPooled));
    assert!(platform.inventory.instance(&id).unwrap().cordon.is_some());
    assert!(platform.inventory.approve(&deferred, "ops", 21).is_err(), "decided once");

    let terminate = DeferredOperation::Terminate { instance: id.clone(), by: "agent".into() };
    let Requested::Pending { deferred } =
        platform.commit(platform.inventory.request(terminate, Governance::default(), 30).unwrap())
    else {
        panic!("gated")
    };
    let denied = platform.inventory.deny(&deferred, "ops").unwrap();
    assert!(denied.records.iter().all(|r| matches!(r, InstanceRecord::Decided { .. })));
    platform.commit(denied);
    assert_eq!(platform.state(&id), InstanceState::Running);
    // A request that would be refused is refused inline, and parks nothing.
    let refused = platform.inventory.request(cordon, Governance::default(), 40);
    assert!(refused.is_err());
    let open = Governance { instance_cordon: Policy::Allow, terminate: Policy::Allow };
    let uncordon = DeferredOperation::Uncordon { instance: id.clone(), by: "ops".into() };
    let done = platform.commit(platform.inventory.request(uncordon, open, 50).unwrap());
    assert_eq!(done, Requested::Done(Done::Uncordoned(UncordonState::Cleared)));
    assert_eq!(platform.replayed(), platform.inventory);
}

#[test]
fn every_stuck_row_of_the_runbook_is_signalled_past_its_bound_and_not_before() {
    let mut platform = Platform::default();
    let node = platform.node("edge-01");
    let pending =
        platform.commit(platform.inventory.provision(&node, cloud(), Some("a"), 0).unwrap()).instance().to_owned();
    let provisioning =
        platform.commit(platform.inventory.provision(&node, cloud(), Some("b"), 0).unwrap()).instance().to_owned();
    platform.commit(platform.inventory.begin_provisioning(&provisioning, 0).unwrap());
    let never_ready =
        platform.commit(platform.inventory.provision(&node, cloud(), Some("c"), 0).unwrap()).instance().to_owned();
    platform.commit(platform.inventory.begin_provisioning(&never_ready, 0).unwrap());
    platform.commit(platform.inventory.handle_heartbeat(&never_ready, AgentPhase::Booting, 2 * MINUTE));
    let silent = platform.running("edge-02", 0);
    let draining = platform.running("edge-03", 0);
    platform.commit(platform.inventory.drain(&draining, "ops", 2 * MINUTE).unwrap());
    let terminating = platform.running("edge-04", 0);
    platform.commit(platform.inventory.control(&terminating, Control::Terminate, false, 2 * MINUTE).unwrap());

    let at = |now_ms: u64| -> Vec<(String, Stuck)> {
        platform.inventory.stuck(now_ms, |_| Some(90_000)).into_iter().map(|s| (s.instance, s.stuck)).collect()
    };
    assert_eq!(at(4 * MINUTE + 30_000), vec![], "silent 3 min after its last heartbeat at 1.5 min: not yet");
    let mut expected = vec![(pending.clone(), Stuck::Pending), (silent.clone(), Stuck::Silent)];
    let mut seen = at(5 * MINUTE + 1);
    assert!(expected.iter().all(|e| seen.contains(e)), "{seen:?}");
    assert!(seen.iter().all(|(_, s)| *s != Stuck::Provisioning), "provisioning is 10 min: {seen:?}");
    expected.extend([(never_ready.clone(), Stuck::NeverReady), (terminating.clone(), Stuck::TerminateStalled)]);
    seen = at(7 * MINUTE + 1);
    assert!(expected.iter().all(|e| seen.contains(e)), "{seen:?}");
    seen = at(32 * MINUTE + 1);
    assert!(seen.contains(&(provisioning, Stuck::Provisioning)));
    assert!(seen.contains(&(draining, Stuck::DrainStalled)));
    assert_eq!(seen.len(), 6, "{seen:?}");
}

fn metal() -> Backing {
    Backing::BareMetal { mac: "52:54:00:00:00:01".into() }
}

/// A pending bare-metal instance of a new node.
fn metal_row(platform: &mut Platform, name: &str) -> String {
    let node = platform.node(name);
    let provisioned = platform.inventory.provision(&node, metal(), Some(&format!("op-{name}")), 0).unwrap();
    platform.commit(provisioned).instance().to_owned()
}

/// The step of a row given its machine's status (and power reading): its call, and the kinds of the records that
/// follow it. The records are then committed.
fn metal_step(
    platform: &mut Platform,
    id: &str,
    status: &MetalStatus,
    powered: Option<bool>,
    now_ms: u64,
) -> (Option<MetalCall>, Vec<String>) {
    let instance = platform.inventory.instance(id).unwrap().clone();
    let step = platform.inventory.metal_step(&instance, status, powered, now_ms);
    let kinds = step.then.records.iter().map(record_kind).collect();
    platform.commit(step.then);
    (step.call, kinds)
}

fn record_kind(record: &InstanceRecord) -> String {
    let line = record.to_line();
    let json: serde_json::Value = serde_json::from_str(line.split_once(' ').unwrap().1).unwrap();
    json["record"].as_str().unwrap().to_owned()
}

fn onboarding(system_id: Option<&str>) -> MetalStatus {
    MetalStatus::Onboarding { system_id: system_id.map(str::to_owned) }
}

fn deployed() -> MetalStatus {
    MetalStatus::Deployed { system_id: "abc123".into() }
}

#[test]
fn a_bare_metal_row_is_provisioned_by_its_onboarding_and_runs_on_its_agents_first_ready_heartbeat() {
    let mut platform = Platform::default();
    let id = metal_row(&mut platform, "node-02");
    let step = |p: &mut Platform, status: &MetalStatus| metal_step(p, &id, status, None, MINUTE);
    assert_eq!(
        step(&mut platform, &MetalStatus::Racked),
        (Some(MetalCall::Onboard), vec!["transition".to_owned()]),
        "a racked machine is asked for, then the row provisions"
    );
    assert_eq!(platform.state(&id), InstanceState::Provisioning);
    assert_eq!(
        step(&mut platform, &MetalStatus::Racked),
        (Some(MetalCall::Onboard), vec![]),
        "asked for and no run began (the request died queued with its controller): asked again, nothing written"
    );
    assert_eq!(step(&mut platform, &onboarding(None)), (Some(MetalCall::Onboard), vec![]), "a run to resume");
    assert_eq!(
        step(&mut platform, &onboarding(Some("abc123"))),
        (Some(MetalCall::Onboard), vec!["provider_created".to_owned()]),
        "the system id, once a checkpoint names it"
    );
    assert_eq!(platform.inventory.instance(&id).unwrap().cloud_instance_id.as_deref(), Some("abc123"));
    assert_eq!(step(&mut platform, &onboarding(Some("abc123"))), (Some(MetalCall::Onboard), vec![]), "once");
    let retrying = MetalStatus::OnboardingRetrying { system_id: Some("abc123".into()) };
    assert_eq!(step(&mut platform, &retrying), (None, vec![]), "a retryable stop is the runner's to rerun");
    assert_eq!(step(&mut platform, &deployed()), (None, vec![]), "deployed: the agent's heartbeat says running");
    assert_eq!(platform.state(&id), InstanceState::Provisioning);
    platform.commit(platform.inventory.handle_heartbeat(&id, AgentPhase::Ready, 2 * MINUTE));
    assert_eq!(platform.state(&id), InstanceState::Running);
    assert_eq!(step(&mut platform, &deployed()), (None, vec![]), "a running row owes nothing");

    // A controller that died after the onboarding began (or completed) finds the row still pending and adopts it.
    let late = metal_row(&mut platform, "node-03");
    assert_eq!(
        metal_step(&mut platform, &late, &onboarding(Some("def456")), None, MINUTE),
        (Some(MetalCall::Onboard), vec!["provider_created".to_owned(), "transition".to_owned()])
    );
    let retried = metal_row(&mut platform, "node-05");
    assert_eq!(
        metal_step(&mut platform, &retried, &MetalStatus::OnboardingRetrying { system_id: None }, None, MINUTE),
        (None, vec!["transition".to_owned()])
    );
    assert_eq!(platform.state(&retried), InstanceState::Provisioning);
    let done = metal_row(&mut platform, "node-04");
    assert_eq!(
        metal_step(&mut platform, &done, &deployed(), None, MINUTE),
        (None, vec!["provider_created".to_owned(), "transition".to_owned()])
    );
    assert_eq!(platform.state(&done), InstanceState::Provisioning);
    assert_eq!(platform.replayed(), platform.inventory);
}

#[test]
fn a_provisioning_row_learns_its_machine_s_system_id_from_a_retrying_onboarding_too() {
    let mut platform = Platform::default();
    let id = metal_row(&mut platform, "node-02");
    platform.commit(platform.inventory.begin_provisioning(&id, 0).unwrap());
    let retrying =
        |system_id: Option<&str>| MetalStatus::OnboardingRetrying { system_id: system_id.map(str::to_owned) };
    assert_eq!(metal_step(&mut platform, &id, &retrying(None), None, MINUTE), (None, vec![]), "no id yet");
    assert_eq!(
        metal_step(&mut platform, &id, &retrying(Some("abc123")), None, MINUTE),
        (None, vec!["provider_created".to_owned()]),
        "the checkpoint named it before the stop: the row records it, and the runner reruns the onboarding"
    );
    assert_eq!(platform.inventory.instance(&id).unwrap().cloud_instance_id.as_deref(), Some("abc123"));
    assert_eq!(metal_step(&mut platform, &id, &retrying(Some("abc123")), None, MINUTE), (None, vec![]), "once");
    assert_eq!(platform.state(&id), InstanceState::Provisioning);
    assert_eq!(platform.replayed(), platform.inventory);
}

#[test]
fn an_onboarding_stopped_for_good_or_a_machine_retired_under_it_errors_a_provisioning_row() {
    let failed = MetalStatus::OnboardingFailed { state: WorkflowState::FailedManualIntervention };
    let retired = MetalStatus::DecommissionFailed { state: WorkflowState::FailedManualIntervention };
    for status in
        [failed, MetalStatus::Decommissioning, MetalStatus::DecommissionRetrying, retired, MetalStatus::Decommissioned]
    {
        for provisioning in [false, true] {
            let mut platform = Platform::default();
            let id = metal_row(&mut platform, "node-02");
            if provisioning {
                platform.commit(platform.inventory.begin_provisioning(&id, 0).unwrap());
            }
            assert_eq!(
                metal_step(&mut platform, &id, &status, None, MINUTE),
                (None, vec!["transition".to_owned()]),
                "{status:?}"
            );
            assert_eq!(platform.state(&id), InstanceState::Error, "{status:?}");
            assert_eq!(metal_step(&mut platform, &id, &status, None, MINUTE), (None, vec![]), "error is at rest");
        }
    }
}

#[test]
fn a_bare_metal_terminate_is_its_decommission_and_is_confirmed_once_the_workflow_completed() {
    let mut platform = Platform::default();
    let id = metal_row(&mut platform, "node-02");
    platform.commit(platform.inventory.begin_provisioning(&id, 0).unwrap());
    platform.commit(platform.inventory.handle_heartbeat(&id, AgentPhase::Ready, MINUTE));
    platform.commit(platform.inventory.control(&id, Control::Terminate, false, 2 * MINUTE).unwrap());
    let failed = MetalStatus::OnboardingFailed { state: WorkflowState::FailedManualIntervention };
    let retrying = MetalStatus::OnboardingRetrying { system_id: None };
    for status in [deployed(), onboarding(Some("abc123")), retrying, failed, MetalStatus::Decommissioning] {
        assert_eq!(
            metal_step(&mut platform, &id, &status, None, 3 * MINUTE),
            (Some(MetalCall::Decommission), vec![]),
            "{status:?}"
        );
    }
    let stuck = MetalStatus::DecommissionFailed { state: WorkflowState::FailedManualIntervention };
    assert_eq!(metal_step(&mut platform, &id, &stuck, None, 3 * MINUTE), (None, vec![]), "a person's follow-up");
    let rerun = MetalStatus::DecommissionRetrying;
    assert_eq!(metal_step(&mut platform, &id, &rerun, None, 3 * MINUTE), (None, vec![]), "the runner's rerun");
    assert!(platform.inventory.instance(&id).unwrap().destroy_pending_since_ms.is_some(), "not released");
    assert_eq!(
        metal_step(&mut platform, &id, &MetalStatus::Decommissioned, None, 4 * MINUTE),
        (None, vec!["destroy_confirmed".to_owned()])
    );
    assert_eq!(metal_step(&mut platform, &id, &MetalStatus::Decommissioned, None, 4 * MINUTE), (None, vec![]));

    // A pending row terminated before its machine was ever asked for: nothing to release.
    let never = metal_row(&mut platform, "node-03");
    platform.commit(platform.inventory.control(&never, Control::Terminate, false, MINUTE).unwrap());
    assert_eq!(
        metal_step(&mut platform, &never, &MetalStatus::Racked, None, MINUTE),
        (None, vec!["destroy_confirmed".to_owned()])
    );
    assert_eq!(platform.replayed(), platform.inventory);
}

#[test]
fn a_bare_metal_stop_and_start_follow_maas_power_and_a_cloud_row_gets_no_metal_step() {
    let mut platform = Platform::default();
    let id = metal_row(&mut platform, "node-02");
    platform.commit(platform.inventory.begin_provisioning(&id, 0).unwrap());
    platform.commit(platform.inventory.handle_heartbeat(&id, AgentPhase::Ready, MINUTE));
    assert_eq!(metal_step(&mut platform, &id, &deployed(), Some(false), MINUTE), (None, vec![]), "running");
    let stop = platform.commit(platform.inventory.control(&id, Control::Stop, false, 2 * MINUTE).unwrap());
    assert_eq!(stop.provider_call, ProviderCall::Stop { backing: metal(), cloud_instance_id: None, hard: false });
    let off = Some(MetalCall::Power(MetalPower::Off));
    assert_eq!(metal_step(&mut platform, &id, &deployed(), Some(true), 3 * MINUTE), (off, vec![]), "still on");
    assert_eq!(metal_step(&mut platform, &id, &deployed(), None, 3 * MINUTE), (None, vec![]), "no reading");
    assert_eq!(
        metal_step(&mut platform, &id, &deployed(), Some(false), 3 * MINUTE),
        (None, vec!["transition".to_owned()])
    );
    assert_eq!(platform.state(&id), InstanceState::Stopped);
    platform.commit(platform.inventory.control(&id, Control::Start, false, 4 * MINUTE).unwrap());
    let on = Some(MetalCall::Power(MetalPower::On));
    assert_eq!(metal_step(&mut platform, &id, &deployed(), Some(false), 5 * MINUTE), (on, vec![]), "still off");
    assert_eq!(metal_step(&mut platform, &id, &deployed(), Some(true), 5 * MINUTE), (None, vec![]), "booting");
    assert_eq!(platform.state(&id), InstanceState::Starting);

    let vm = platform.running("vm-01", 0);
    let cloud_row = platform.inventory.instance(&vm).unwrap().clone();
    platform.commit(platform.inventory.control(&vm, Control::Terminate, false, MINUTE).unwrap());
    let cloud_row_terminated = platform.inventory.instance(&vm).unwrap().clone();
    for row in [cloud_row, cloud_row_terminated] {
        let step = platform.inventory.metal_step(&row, &MetalStatus::Decommissioned, Some(true), MINUTE);
        assert_eq!((step.call, step.then.records.len()), (None, 0));
    }
}

#[test]
fn a_bare_metal_row_is_not_held_to_the_vm_bounds_its_workflows_keep() {
    let mut platform = Platform::default();
    let pending = metal_row(&mut platform, "node-02");
    let provisioning = metal_row(&mut platform, "node-03");
    platform.commit(platform.inventory.begin_provisioning(&provisioning, 0).unwrap());
    let never_ready = metal_row(&mut platform, "node-04");
    platform.commit(platform.inventory.begin_provisioning(&never_ready, 0).unwrap());
    platform.commit(platform.inventory.handle_heartbeat(&never_ready, AgentPhase::Booting, MINUTE));
    let terminating = metal_row(&mut platform, "node-05");
    platform.commit(platform.inventory.begin_provisioning(&terminating, 0).unwrap());
    platform.commit(platform.inventory.handle_heartbeat(&terminating, AgentPhase::Ready, MINUTE));
    platform.commit(platform.inventory.control(&terminating, Control::Terminate, false, 2 * MINUTE).unwrap());
    let silent = metal_row(&mut platform, "node-06");
    platform.commit(platform.inventory.begin_provisioning(&silent, 0).unwrap());
    platform.commit(platform.inventory.handle_heartbeat(&silent, AgentPhase::Ready, MINUTE));
    let seen: Vec<(String, Stuck)> = platform
        .inventory
        .stuck(60 * MINUTE, |_| Some(MINUTE))
        .into_iter()
        .map(|signal| (signal.instance, signal.stuck))
        .collect();
    assert_eq!(
        seen,
        vec![(never_ready, Stuck::NeverReady), (silent, Stuck::Silent)],
        "not {pending} nor {provisioning} nor {terminating}"
    );
}

#[test]
fn the_cloud_sync_maps_vanished_vms_adopts_tagged_ones_signals_a_present_guest_and_goes_stale() {
    let mut platform = Platform::default();
    let gone = platform.running("edge-01", 0);
    let kept = platform.running("edge-02", 0);
    let terminated = platform.running("edge-03", 0);
    // Terminate committed; the process died before the destroy reached the provider.
    platform.commit(platform.inventory.control(&terminated, Control::Terminate, false, MINUTE).unwrap());
    let node = platform.node("edge-04");
    let lost =
        platform.commit(platform.inventory.provision(&node, cloud(), Some("x"), 0).unwrap()).instance().to_owned();
    platform.commit(platform.inventory.begin_provisioning(&lost, 0).unwrap());
    let listed = [
        ListedVm { cloud_instance_id: format!("vm-{kept}"), tag: kept.clone() },
        ListedVm { cloud_instance_id: format!("vm-{terminated}"), tag: terminated.clone() },
        ListedVm { cloud_instance_id: "vm-lost".into(), tag: lost.clone() },
    ];
    let report = platform.commit(platform.inventory.sync_region("region-a", &listed, 60 * MINUTE));
    assert_eq!(report.mapped_terminated, vec![gone.clone()]);
    assert_eq!(report.adopted, vec![lost.clone()]);
    assert_eq!(
        report.signals,
        vec![SyncSignal::CloudSyncTerminatedGuestPresent {
            instance: terminated.clone(),
            cloud_instance_id: format!("vm-{terminated}")
        }]
    );
    assert_eq!(platform.state(&gone), InstanceState::Terminated);
    // Destroyed by a person: the next sync stops naming it and confirms the destroy.
    let report = platform.commit(platform.inventory.sync_region("region-a", &listed[..1], 120 * MINUTE));
    assert!(report.signals.is_empty());
    assert_eq!(platform.inventory.instance(&terminated).unwrap().destroy_pending_since_ms, None);
    assert!(platform.inventory.stale_syncs(["region-a", "region-b"], 300 * MINUTE).is_empty());
    assert_eq!(
        platform.inventory.stale_syncs(["region-a", "region-b"], 300 * MINUTE + 1),
        vec![SyncSignal::CloudSyncCheckStale { region: "region-a".into(), last_check_ms: 120 * MINUTE }],
        "a region never synced is not stale; one synced before is"
    );
}

#[test]
fn a_cordoned_replica_is_out_of_the_live_count_and_the_first_scale_in_victim() {
    let mut platform = Platform::default();
    let replicas: Vec<String> = (0..3).map(|n| platform.running(&format!("web-{n}"), n * MINUTE)).collect();
    platform.commit(platform.inventory.cordon(&replicas[0], "patch", "ops", 10 * MINUTE).unwrap());
    assert_eq!(platform.inventory.live_replicas(&replicas).count(), 2);
    assert_eq!(
        platform.inventory.scale_in_order(&replicas),
        vec![replicas[0].clone(), replicas[2].clone(), replicas[1].clone()]
    );
}

/// One random step of an operator, a provider or the pool machinery.
#[derive(Debug, Clone)]
enum Step {
    Provision { node: usize, operation: Option<u8> },
    Begin(usize),
    Created(usize),
    Failed(usize),
    Heartbeat(usize, bool),
    Control(usize, Control, bool),
    Stopped(usize),
    Hold(usize),
    Lift(usize),
    Cordon(usize),
    Uncordon(usize),
    Drain(usize),
    Replenish,
    Acquire,
    Release(usize),
    Recycle,
    Sync(u8),
}

fn step() -> impl Strategy<Value = Step> {
    let control = proptest::sample::select(vec![Control::Start, Control::Stop, Control::Reboot, Control::Terminate]);
    prop_oneof![
        (0..3usize, proptest::option::of(0..3u8)).prop_map(|(node, operation)| Step::Provision { node, operation }),
        (0..12usize).prop_map(Step::Begin),
        (0..12usize).prop_map(Step::Created),
        (0..12usize).prop_map(Step::Failed),
        (0..12usize, any::<bool>()).prop_map(|(i, ready)| Step::Heartbeat(i, ready)),
        (0..12usize, control, any::<bool>()).prop_map(|(i, c, force)| Step::Control(i, c, force)),
        (0..12usize).prop_map(Step::Stopped),
        (0..12usize).prop_map(Step::Hold),
        (0..12usize).prop_map(Step::Lift),
        (0..12usize).prop_map(Step::Cordon),
        (0..12usize).prop_map(Step::Uncordon),
        (0..12usize).prop_map(Step::Drain),
        Just(Step::Replenish),
        Just(Step::Acquire),
        (0..12usize).prop_map(Step::Release),
        Just(Step::Recycle),
        (0..16u8).prop_map(Step::Sync),
    ]
}

proptest! {
    /// Whatever the order of steps: every decision's records apply (so every transition is a row of the table and
    /// every conditional write holds), a held instance is never started, rebooted or terminated, a refusal writes
    /// nothing, the allocator never hands out anything but a ready member, and a replay of the journal reads the
    /// same rows.
    #[test]
    fn random_steps_keep_every_rule_and_replay_to_the_same_rows(steps in proptest::collection::vec(step(), 0..80)) {
        let mut platform = Platform::default();
        let nodes: Vec<String> = (0..3).map(|n| platform.node(&format!("node-{n}"))).collect();
        platform.pool("p", 2, 3, ReleaseDisposition::ReuseWithoutReset);
        let mut now_ms = 0;
        for step in steps {
            now_ms += 7 * MINUTE;
            let ids: Vec<String> = platform.inventory.instances.keys().cloned().collect();
            let pick = |i: usize| ids.get(i % ids.len().max(1)).cloned().unwrap_or_default();
            let inventory = platform.inventory.clone();
            let records: Option<Vec<InstanceRecord>> = match step {
                Step::Provision { node, operation } => {
                    let operation = operation.map(|o| format!("op-{o}"));
                    inventory.provision(&nodes[node], cloud(), operation.as_deref(), now_ms).ok().map(|d| d.records)
                }
                Step::Begin(i) => inventory.begin_provisioning(&pick(i), now_ms).ok().map(|d| d.records),
                Step::Created(i) => {
                    let id = pick(i);
                    inventory.instances.get(&id).filter(|x| x.cloud_instance_id.is_none())
                        .map(|_| inventory.handle_created(&id, &format!("vm-{id}")).records)
                }
                Step::Failed(i) => inventory.handle_failed(&pick(i), now_ms).ok().map(|d| d.records),
                Step::Heartbeat(i, ready) => {
                    let phase = if ready { AgentPhase::Ready } else { AgentPhase::Booting };
                    Some(inventory.handle_heartbeat(&pick(i), phase, now_ms).records)
                }
                Step::Control(i, action, force) => {
                    let id = pick(i);
                    let decided = inventory.control(&id, action, force, now_ms);
                    if inventory.instances.get(&id).is_some_and(|x| x.hold.is_some()) && action != Control::Stop {
                        prop_assert!(matches!(decided, Err(ControlRefusal::Held { .. })), "a hold was bypassed");
                    }
                    decided.ok().map(|d| d.records)
                }
                Step::Stopped(i) => inventory.handle_stopped(&pick(i), now_ms).ok().map(|d| d.records),
                Step::Hold(i) => inventory.place_hold(&pick(i), "ops", "window", now_ms).ok().map(|d| d.records),
                Step::Lift(i) => inventory.lift_hold(&pick(i), "ops").ok().map(|d| d.records),
                Step::Cordon(i) => inventory.cordon(&pick(i), "patch", "ops", now_ms).ok().map(|d| d.records),
                Step::Uncordon(i) => inventory.uncordon(&pick(i), "ops", now_ms).ok().map(|d| d.records),
                Step::Drain(i) => inventory.drain(&pick(i), "ops", now_ms).ok().map(|d| d.records),
                Step::Replenish => inventory.replenish("p", now_ms).ok().map(|d| d.records),
                Step::Acquire => match inventory.acquire("p") {
                    Ok(decided) => {
                        let member = inventory.instance(&decided.outcome).unwrap();
                        prop_assert_eq!(member.pool.as_ref().map(|m| m.state), Some(PoolState::Ready));
                        prop_assert!(member.cordon.is_none() && member.state == InstanceState::Running);
                        Some(decided.records)
                    }
                    Err(_) => None,
                },
                Step::Release(i) => inventory.release(&pick(i), now_ms).ok().map(|d| d.records),
                Step::Recycle => inventory.recycle_stale("p", now_ms).ok().map(|d| d.records),
                Step::Sync(mask) => {
                    let listed: Vec<ListedVm> = inventory.instances.values().enumerate()
                        .filter(|(n, x)| x.cloud_instance_id.is_some() && mask & (1 << (n % 4)) != 0)
                        .map(|(_, x)| ListedVm { cloud_instance_id: x.cloud_instance_id.clone().unwrap(), tag: x.id.clone() })
                        .collect();
                    Some(inventory.sync_region("region-a", &listed, now_ms).records)
                }
            };
            prop_assert_eq!(&platform.inventory, &inventory, "deciding wrote nothing");
            if let Some(records) = records {
                platform.commit(Decided::new(records, ()));
            }
        }
        prop_assert_eq!(platform.replayed(), platform.inventory.clone());
        // Never two live VMs for one operation of one node.
        let mut live: BTreeMap<(String, String), usize> = BTreeMap::new();
        for instance in platform.inventory.instances.values() {
            if let Some(operation) = &instance.operation_id && instance.state != InstanceState::Terminated {
                *live.entry((instance.node.clone(), operation.clone())).or_default() += 1;
            }
        }
        prop_assert!(live.values().all(|count| *count <= 1), "{live:?}");
    }
}

#[test]
fn every_name_a_report_or_an_error_prints_is_the_name_the_journal_stores() {
    fn serde_name(value: impl serde::Serialize) -> String {
        serde_json::to_value(value).unwrap().as_str().unwrap().to_owned()
    }
    for state in InstanceState::ALL {
        assert_eq!(state.as_str(), serde_name(state));
        assert_eq!(state.to_string(), state.as_str());
    }
    for event in super::state::InstanceEvent::ALL {
        assert_eq!(event.as_str(), serde_name(event));
    }
    for action in [Control::Start, Control::Stop, Control::Reboot, Control::Terminate] {
        assert_eq!(action.as_str(), serde_name(action));
    }
    for outcome in CordonState::ALL {
        assert_eq!(outcome.as_str(), serde_name(outcome));
    }
    for stuck in Stuck::ALL {
        assert_eq!(stuck.as_str(), serde_name(stuck));
    }
    for state in [PoolState::Warming, PoolState::Ready, PoolState::Claimed, PoolState::Draining, PoolState::Released] {
        assert_eq!(state.as_str(), serde_name(state));
    }
    let held = ControlRefusal::Held {
        instance: "i-1".into(),
        action: Control::Reboot,
        by: "ops".into(),
        reason: "window".into(),
    };
    assert_eq!(
        held.to_string(),
        "instance i-1 is under an ops hold by ops (window): reboot refused, force does not override it"
    );
}

#[test]
fn only_a_pending_or_provisioning_row_has_a_provision_task_to_cancel() {
    let mut platform = Platform::default();
    let node = platform.node("edge-01");
    let pending = platform.commit(platform.inventory.provision(&node, cloud(), Some("a"), 0).unwrap());
    let pending = pending.instance().to_owned();
    platform.commit(platform.inventory.cancel_provisioning(&pending, 10).unwrap());
    assert_eq!(platform.state(&pending), InstanceState::Error);
    let running = platform.running("edge-02", 0);
    assert_eq!(
        platform.inventory.cancel_provisioning(&running, 20),
        Err(super::provision::BootError::NotProvisioning { instance: running.clone(), state: InstanceState::Running })
    );
    assert!(platform.inventory.cancel_provisioning("nope", 20).is_err());
}

#[test]
fn every_operator_step_is_audited_first_and_a_refused_one_writes_its_audit_record_only() {
    use super::operator::{AuditOutcome, OperatorStep};
    let mut platform = Platform::default();
    let id = platform.running("edge-01", 0);
    let before = platform.inventory.instance(&id).unwrap().clone();
    let step = OperatorStep::Request {
        operation: DeferredOperation::Cordon { instance: id.clone(), reason: " ".into(), by: "alice".into() },
    };
    let refused = platform.inventory.operate("alice", step, Governance::default(), 10);
    assert!(matches!(&refused.outcome, AuditOutcome::Refused { refusal } if refusal == "a cordon needs a reason"));
    assert!(matches!(refused.records.as_slice(), [InstanceRecord::Audited { .. }]), "{:?}", refused.records);
    platform.commit(refused);
    assert_eq!(platform.inventory.instance(&id).unwrap(), &before, "no row moved");

    let step = OperatorStep::Request {
        operation: DeferredOperation::Cordon { instance: id.clone(), reason: "patch".into(), by: "alice".into() },
    };
    let parked = platform.inventory.operate("alice", step, Governance::default(), 20);
    let AuditOutcome::Pending { deferred } = parked.outcome.clone() else { panic!("{:?}", parked.outcome) };
    assert!(matches!(parked.records.as_slice(), [InstanceRecord::Audited { .. }, InstanceRecord::Deferred { .. }]));
    platform.commit(parked);
    let approved = platform.inventory.operate(
        "bob",
        OperatorStep::Approve { deferred: deferred.clone() },
        Governance::default(),
        30,
    );
    assert_eq!(approved.outcome, AuditOutcome::Performed);
    platform.commit(approved);
    assert!(platform.inventory.instance(&id).unwrap().cordon.is_some());

    let audit: Vec<(String, String, String)> = platform
        .inventory
        .audit
        .iter()
        .map(|a| (a.actor.clone(), a.step.verb().to_owned(), a.correlation_id.clone()))
        .collect();
    assert_eq!(
        audit,
        vec![
            ("alice".into(), "cordon".into(), format!("alice/cordon/{id}/10")),
            ("alice".into(), "cordon".into(), format!("alice/cordon/{id}/20")),
            ("bob".into(), "approve".into(), format!("bob/approve/{deferred}/30")),
        ]
    );
    assert_eq!(platform.replayed(), platform.inventory, "the audit trail replays with the rows");
}

#[test]
fn a_drain_under_a_gated_cordon_policy_needs_its_cordon_approved_first() {
    use super::operator::{AuditOutcome, OperatorStep};
    let mut platform = Platform::default();
    let id = platform.running("edge-01", 0);
    let before = platform.inventory.instance(&id).unwrap().clone();
    let drain = || OperatorStep::Drain { instance: id.clone() };
    let refused = platform.inventory.operate("alice", drain(), Governance::default(), 10);
    assert!(
        matches!(&refused.outcome, AuditOutcome::Refused { refusal } if refusal.contains("cordons need an approval")),
        "{:?}",
        refused.outcome
    );
    assert!(matches!(refused.records.as_slice(), [InstanceRecord::Audited { .. }]), "{:?}", refused.records);
    platform.commit(refused);
    assert_eq!(platform.inventory.instance(&id).unwrap(), &before, "no row moved");

    // Under an open cordon policy the same drain cordons and stops.
    let open = Governance { instance_cordon: Policy::Allow, terminate: Policy::RequireApproval };
    let performed = platform.inventory.clone().operate("alice", drain(), open, 20);
    assert_eq!(performed.outcome, AuditOutcome::Performed);

    // Gated: the cordon approved first, the drain then keeps it and stops.
    let cordon = OperatorStep::Request {
        operation: DeferredOperation::Cordon { instance: id.clone(), reason: "patch".into(), by: "alice".into() },
    };
    let parked = platform.inventory.operate("alice", cordon, Governance::default(), 30);
    let AuditOutcome::Pending { deferred } = parked.outcome.clone() else { panic!("{:?}", parked.outcome) };
    platform.commit(parked);
    let approved = platform.inventory.operate("bob", OperatorStep::Approve { deferred }, Governance::default(), 40);
    platform.commit(approved);
    let drained = platform.inventory.operate("alice", drain(), Governance::default(), 50);
    assert_eq!(drained.outcome, AuditOutcome::Performed);
    platform.commit(drained);
    assert_eq!(platform.state(&id), InstanceState::Stopping);
}

/// `metal_owed` is the whole of which rows `metal_step` acts on: a row it calls settled gets nothing from any status
/// and power reading, and each in-flight state gets a call or a record from some status.
#[test]
fn a_bare_metal_row_is_owed_a_step_exactly_when_it_is_in_flight() {
    let mut platform = Platform::default();
    let id = metal_row(&mut platform, "node-02");
    let row = platform.inventory.instance(&id).unwrap().clone();
    let failed = WorkflowState::FailedManualIntervention;
    let statuses = [
        MetalStatus::Racked,
        onboarding(None),
        onboarding(Some("abc123")),
        MetalStatus::OnboardingRetrying { system_id: Some("abc123".into()) },
        deployed(),
        MetalStatus::OnboardingFailed { state: failed },
        MetalStatus::Decommissioning,
        MetalStatus::DecommissionRetrying,
        MetalStatus::DecommissionFailed { state: failed },
        MetalStatus::Decommissioned,
    ];
    let mut owed_states = Vec::new();
    for state in InstanceState::ALL {
        for destroy_pending in [None, Some(0)] {
            let instance =
                super::inventory::Instance { state, destroy_pending_since_ms: destroy_pending, ..row.clone() };
            let owed = super::metal::metal_owed(&instance);
            let acted = statuses.iter().any(|status| {
                [None, Some(true), Some(false)].into_iter().any(|powered| {
                    let step = platform.inventory.metal_step(&instance, status, powered, MINUTE);
                    step.call.is_some() || !step.then.records.is_empty()
                })
            });
            assert_eq!(owed, acted, "{state} (destroy pending: {destroy_pending:?})");
            if owed && destroy_pending.is_none() {
                owed_states.push(state);
            }
        }
    }
    let expected =
        [InstanceState::Pending, InstanceState::Provisioning, InstanceState::Starting, InstanceState::Stopping];
    assert_eq!(owed_states, expected);
    let cloud =
        super::inventory::Instance { backing: Backing::Cloud { region: "r".into(), instance_type: "t".into() }, ..row };
    assert!(!super::metal::metal_owed(&cloud), "a cloud row is never a bare-metal step's");
}
