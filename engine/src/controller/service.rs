//! The controller's service: the one async loop of the control plane, which the simulator runs on its controller
//! host and a production process runs on its real adapters. It owns the state machine ([`Controller`]) and a few
//! tasks that each ask it what to do, await only what they are told (a driver's run, a port, a sleep, a wake-up)
//! and report back:
//!
//! - the main task, which starts the rollout and rotation desks and runs the instance-status sensor;
//! - the site desk ([`site`]): at its start time it takes the site up from the journal, then takes onboarding,
//!   decommission and recovery-action requests, each run as a task of its own;
//! - the rollout desk and the rotation desk ([`fleet`]);
//! - the instance desk ([`instances`]): the runbook's passes, its requests and its pages.
//!
//! A task that changes the machine's state performs what that change calls for at once (wakes the ticket admitted
//! next, reports the events), so work starts in the order it was decided.

pub mod fleet;
pub mod instances;
pub mod site;

use std::cell::{RefCell, RefMut};
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::controller::config::ControllerConfig;
use crate::controller::host::Host;
use crate::controller::machine::{Controller, Ticket};
use crate::controller::wake::Notify;
use crate::ports::{Clock, Journal};

/// The engine's decisions the drivers run with: production's ([`Default`]), or a test's with one decision replaced
/// by a historical defect.
#[derive(Clone)]
pub struct Rules {
    pub rollout: Rc<dyn crate::rollout::rules::Rules>,
    pub onboarding: Rc<dyn crate::onboarding::rules::Rules>,
}

impl Default for Rules {
    fn default() -> Rules {
        Rules { rollout: Rc::new(crate::rollout::rules::Rcca), onboarding: Rc::new(crate::onboarding::rules::Matrix) }
    }
}

impl std::fmt::Debug for Rules {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Rules")
    }
}

/// One controller process's service.
pub struct Service<H: Host> {
    host: H,
    rules: Rules,
    machine: RefCell<Controller>,
    /// The wake-up of each ticket waiting for admission.
    admissions: RefCell<BTreeMap<Ticket, Rc<Notify>>>,
}

impl<H: Host> Service<H> {
    /// Boots a controller process on `host`: the machine reads `journal` (the journal's lines, as the process finds
    /// them), and the service's tasks start — the main task, then the site desk and the instance desk when the
    /// configuration has them.
    pub fn start(host: H, config: ControllerConfig, rules: Rules, journal: &[String]) -> Rc<Service<H>> {
        let machine = Controller::boot(config, host.process(), journal);
        let service =
            Rc::new(Service { host, rules, machine: RefCell::new(machine), admissions: RefCell::new(BTreeMap::new()) });
        let main = service.clone();
        service.host.spawn(Box::pin(async move { main.run_main().await }));
        if service.config().site.is_some() {
            let site = service.clone();
            service.host.spawn(Box::pin(async move { site.run_site().await }));
        }
        if service.config().instances.is_some() {
            let instances = service.clone();
            service.host.spawn(Box::pin(async move { instances.run_instances().await }));
        }
        service
    }

    pub fn host(&self) -> &H {
        &self.host
    }

    /// The configuration the service runs with.
    pub fn config(&self) -> ControllerConfig {
        self.machine.borrow().config().clone()
    }

    /// The machine, borrowed for one decision (never across an await).
    fn machine(&self) -> RefMut<'_, Controller> {
        self.machine.borrow_mut()
    }

    /// Reports the events the machine has decided, in order.
    fn flush_events(&self) {
        loop {
            let event = self.machine().poll_event();
            let Some(event) = event else { return };
            self.host.emit(event);
        }
    }

    /// Journals the records the machine has decided (what it took, what it answered), in order: before the work a
    /// taken request announces starts.
    async fn journal_records(&self) {
        loop {
            let record = self.machine().poll_record();
            let Some(record) = record else { return };
            if let Err(error) = self.host.journal().append(&record).await {
                tracing::error!(%error, "a controller record is not journaled");
            }
        }
    }

    /// Waits until the machine admits a run under the concurrency limit.
    async fn admitted(&self) {
        let (ticket, now) = self.machine().admit();
        if now {
            return;
        }
        let notify = Rc::new(Notify::new());
        self.admissions.borrow_mut().insert(ticket, notify.clone());
        notify.notified().await;
    }

    /// An admitted run gives its place back: the ticket admitted next is woken.
    fn release(&self) {
        let next = self.machine().release();
        if let Some(ticket) = next {
            let notify = self.admissions.borrow_mut().remove(&ticket);
            if let Some(notify) = notify {
                notify.notify_one();
            }
        }
    }

    /// The main task: the rollout and rotation desks, then the instance-status sensor (when configured) for the
    /// process's life.
    async fn run_main(self: Rc<Self>) {
        let rollout = self.clone();
        self.host.spawn(Box::pin(async move { rollout.run_rollouts().await }));
        let rotation = self.clone();
        self.host.spawn(Box::pin(async move { rotation.run_rotations().await }));
        let Some(sensor) = self.config().sensor else { return };
        let (clock, hub, signals, journal) =
            (self.host.clock(), self.host.hub(), self.host.signals(), self.host.journal());
        crate::sensor::run_instance_status_sensor(&clock, &hub, &signals, &journal, sensor).await;
    }
}

/// Sleeps until the monotonic clock reads `at_ms` (at once, through the clock, when it has).
pub(crate) async fn sleep_until<C: Clock>(clock: &C, at_ms: u64) {
    clock.sleep_ms(at_ms.saturating_sub(clock.monotonic_ms())).await;
}
