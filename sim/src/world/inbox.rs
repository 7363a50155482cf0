//! The controller's inbox in the simulated world: the requests people (and the controller's own instance lifecycle)
//! hand the controller, kept per desk until the desk takes them. The inbox is the world's, not the controller
//! host's, so a request made while the controller is down waits for it to boot again, as a request queue in front of
//! a real control plane does; what a desk has taken is the controller's (its journal keeps what must survive).
//!
//! The site desk takes its onboardings first, then its decommissions, then its recovery actions: a wake-up's
//! requests of the three kinds are started in that order.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use engine::controller::request::{Desk, Request};
use tokio::sync::Notify;

/// One desk's queue and its wake-up.
#[derive(Default)]
struct Queue {
    requests: VecDeque<Request>,
    notify: Rc<Notify>,
}

/// The controller's inbox.
#[derive(Default)]
pub(crate) struct Inbox {
    onboardings: RefCell<Queue>,
    decommissions: RefCell<Queue>,
    recoveries: RefCell<Queue>,
    rollouts: RefCell<Queue>,
    rotations: RefCell<Queue>,
    instances: RefCell<Queue>,
    /// The site desk's one wake-up, shared by its three queues.
    site: Rc<Notify>,
}

impl Inbox {
    fn queue(&self, request: &Request) -> &RefCell<Queue> {
        match request {
            Request::Onboard { .. } => &self.onboardings,
            Request::Decommission { .. } => &self.decommissions,
            Request::Recovery(_) => &self.recoveries,
            Request::Rollout(_) => &self.rollouts,
            Request::Rotation(_) => &self.rotations,
            Request::Instance(_) => &self.instances,
        }
    }

    fn notify(&self, desk: Desk) -> Rc<Notify> {
        match desk {
            Desk::Site => self.site.clone(),
            Desk::Rollout => self.rollouts.borrow().notify.clone(),
            Desk::Rotation => self.rotations.borrow().notify.clone(),
            Desk::Instances => self.instances.borrow().notify.clone(),
        }
    }

    /// Queues `request` at its desk and wakes the desk.
    pub(crate) fn push(&self, request: Request) {
        let desk = request.desk();
        self.queue(&request).borrow_mut().requests.push_back(request);
        self.notify(desk).notify_one();
    }

    /// The oldest request at `desk`, taken.
    pub(crate) fn take(&self, desk: Desk) -> Option<Request> {
        let queues: &[&RefCell<Queue>] = match desk {
            Desk::Site => &[&self.onboardings, &self.decommissions, &self.recoveries],
            Desk::Rollout => &[&self.rollouts],
            Desk::Rotation => &[&self.rotations],
            Desk::Instances => &[&self.instances],
        };
        queues.iter().find_map(|queue| queue.borrow_mut().requests.pop_front())
    }

    /// Completes at the desk's next wake-up (at once when one came since the last wait).
    pub(crate) async fn waiting(&self, desk: Desk) {
        let notify = self.notify(desk);
        notify.notified().await;
    }
}
