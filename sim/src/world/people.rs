//! The people around the controller, as the simulator models them: the operator, whose steps become requests in
//! the controller's inbox (a rollout order over the fleet as it is enrolled, a rotation, a resume, a decommission, a
//! recovery action, a runbook verb), and the on-call, who answers the controller's pages about stuck rows with the
//! runbook's recovery (`on_call = true`, the default). Neither decides anything for the controller: each only asks,
//! through the same entry point a person uses.
//!
//! The on-call answers a page at once and keeps notes of what it recovered: a row recovered (or found needing
//! nothing: a pending row the passes retry, a silent agent someone must restart by hand) is not answered again; one
//! whose recovery failed is answered again at the next page. Its notes are per controller incarnation: a controller
//! that boots again pages afresh.

use std::cell::RefCell;
use std::collections::BTreeSet;

use engine::controller::request::{
    Answer, InstanceOrder, InstanceVerb, Page, RecoveryOrder, Request, RolloutOrder, RotationOrder,
};
use engine::instance::stuck::Stuck;
use engine::ports::Endpoint;
use fakes::artifacts::capsule_set;

use crate::model::faults::{InstanceOp, Step};
use crate::model::spec::HUB;
use crate::observe::trace::Body;
use crate::world::World;

/// The actor the on-call's requests name.
pub const ON_CALL: &str = "on-call";

/// What the people remember.
#[derive(Default)]
pub(crate) struct People {
    /// The route bundle of the operator's latest rollout order: the one approved.
    approved_route_digest: RefCell<Option<String>>,
    /// The on-call's notes: the stuck rows it recovered, as (instance, row, since when).
    recovered: RefCell<BTreeSet<(String, Stuck, u64)>>,
    /// The page the on-call is answering.
    answering: RefCell<Option<(String, Stuck, u64)>>,
}

/// A runbook verb as the engine names it.
pub(crate) fn instance_verb(op: InstanceOp) -> InstanceVerb {
    match op {
        InstanceOp::Provision => InstanceVerb::Provision,
        InstanceOp::PlaceHold => InstanceVerb::PlaceHold,
        InstanceOp::LiftHold => InstanceVerb::LiftHold,
        InstanceOp::Start => InstanceVerb::Start,
        InstanceOp::Stop => InstanceVerb::Stop,
        InstanceOp::Reboot => InstanceVerb::Reboot,
        InstanceOp::Terminate => InstanceVerb::Terminate,
        InstanceOp::Cordon => InstanceVerb::Cordon,
        InstanceOp::Uncordon => InstanceVerb::Uncordon,
        InstanceOp::Drain => InstanceVerb::Drain,
        InstanceOp::Approve => InstanceVerb::Approve,
        InstanceOp::Deny => InstanceVerb::Deny,
        InstanceOp::ClearStuck => InstanceVerb::ClearStuck,
        InstanceOp::Acquire => InstanceVerb::Acquire,
        InstanceOp::Release => InstanceVerb::Release,
    }
}

impl World {
    /// An operator's step becomes its request in the controller's inbox (the rollout's selection is traced as the
    /// operator makes it).
    pub(crate) fn ask_controller(&self, step: &Step) {
        let request = match step {
            Step::StartRollout { revision } => {
                let order = self.rollout_order(revision);
                let nodes = order.nodes.iter().map(|endpoint| endpoint.node.clone()).collect();
                self.record_sim(Body::RolloutSelected { rollout: format!("rollout-{revision}"), nodes });
                *self.people.approved_route_digest.borrow_mut() = Some(order.route_digest.clone());
                Request::Rollout(order)
            }
            Step::RotateCredential { target } => {
                let endpoint = self.nodes.endpoints().into_iter().find(|endpoint| &endpoint.node == target);
                let Some(endpoint) = endpoint else { return };
                Request::Rotation(RotationOrder { endpoint })
            }
            Step::ResumeOnboarding { target } => Request::Onboard { machine: target.clone(), instance: None },
            Step::Decommission { target } => Request::Decommission { machine: target.clone() },
            Step::Operator { target, workflow, action, actor, role, reason, resolves_freeze } => {
                Request::Recovery(RecoveryOrder {
                    machine: target.clone(),
                    workflow: *workflow,
                    action: *action,
                    actor: actor.clone(),
                    role: *role,
                    reason: reason.clone(),
                    resolves_freeze: *resolves_freeze,
                })
            }
            Step::InstanceOperator { target, op, reason, actor, force, operation_id } => {
                Request::Instance(InstanceOrder {
                    target: target.clone(),
                    verb: instance_verb(*op),
                    reason: reason.clone(),
                    actor: actor.clone(),
                    force: *force,
                    operation_id: operation_id.clone(),
                })
            }
            _ => unreachable!("{} is no request to the controller", step.kind()),
        };
        self.submit(request);
    }

    /// Hands `request` to the controller's inbox. An onboarding asked for an instance tells the machine's agent
    /// the instance it enrols as. Deviation: on a real site the instance id reaches the agent with its deployment
    /// (cloud-init); the fake site does not carry it, so the inbox hands it over.
    pub(crate) fn submit(&self, request: Request) {
        if let (Request::Onboard { machine, instance: Some(instance) }, Some(instances)) = (&request, &self.instances) {
            instances.enrols_as(machine, instance);
        }
        self.inbox.push(request);
    }

    /// The route bundle the operator's latest rollout order approved, if there is one.
    pub(crate) fn approved_route_digest(&self) -> Option<String> {
        self.people.approved_route_digest.borrow().clone()
    }

    /// The operator's order for `revision`: every node (in a run whose machines are the fleet's, every node
    /// enrolled at the hub and up now), the next generation after the newest barrier any worker has passed, the
    /// route bundle the hub publishes now, the revision's capsules.
    fn rollout_order(&self, revision: &str) -> RolloutOrder {
        let mut nodes = self.nodes.endpoints();
        if self.one_life() {
            nodes.retain(|endpoint| self.fleet_node_enrolled(&endpoint.node));
        }
        RolloutOrder {
            revision: revision.to_owned(),
            generation: self.nodes.newest_generation() + 1,
            route_digest: self.hub.route_digest(),
            nodes,
            hub_endpoint: Endpoint { node: HUB.to_owned(), host_key: self.hub.ssh_host_key() },
            capsules: capsule_set(revision).into_iter().map(|capsule| capsule.digest).collect(),
        }
    }

    /// The on-call is paged about a stuck row: what it asks of the controller at once.
    pub(crate) fn on_call_paged(&self, page: &Page) -> Vec<Request> {
        if !self.instances.as_ref().is_some_and(|instances| instances.spec().on_call) {
            return Vec::new();
        }
        let key = (page.instance.clone(), page.stuck, page.since_ms);
        if self.people.recovered.borrow().contains(&key) {
            return Vec::new();
        }
        if matches!(page.stuck, Stuck::Pending | Stuck::Silent) {
            // The passes retry the same operation already; a silent agent is someone's to restart by hand.
            self.people.recovered.borrow_mut().insert(key);
            return Vec::new();
        }
        *self.people.answering.borrow_mut() = Some(key);
        vec![Request::Instance(InstanceOrder {
            target: page.instance.clone(),
            verb: InstanceVerb::Recover(page.stuck),
            reason: String::new(),
            actor: ON_CALL.to_owned(),
            force: false,
            operation_id: None,
        })]
    }

    /// The controller answered a request: the on-call notes a recovery done (performed, refused by a hold, whose
    /// owner resolves it, or nothing to do); a failed one it tries again at the next page.
    pub(crate) fn on_call_answered(&self, request: &Request, answer: &Answer) {
        let Request::Instance(InstanceOrder { verb: InstanceVerb::Recover(_), .. }) = request else { return };
        let Some(key) = self.people.answering.borrow_mut().take() else { return };
        let done = match answer {
            Answer::Nothing => true,
            Answer::Done { outcome, .. } => outcome != "failed",
            Answer::Taken => false,
        };
        if done {
            self.people.recovered.borrow_mut().insert(key);
        }
    }

    /// A controller boots: the on-call's notes start afresh.
    pub(crate) fn on_call_new_controller(&self) {
        self.people.recovered.borrow_mut().clear();
        self.people.answering.borrow_mut().take();
    }
}
