//! The rollout desk and the rotation desk. The rollout desk runs the latest rollout taken unless the journal shows
//! it terminal (a rollout the journal shows in flight is adopted by the driver), then waits for the next order; a
//! refused, partial or failed rollout is not retried here: a new order, or a controller that boots again, runs the
//! next attempt. The rotation desk runs every rotation taken, in order, one at a time (one the journal shows ended is
//! answered as it ended, by the driver, which then does nothing). Each order is journaled as it is taken, so a
//! controller that boots again knows it.

use std::rc::Rc;

use crate::controller::host::{Host, WorkerWork};
use crate::controller::machine::Controller;
use crate::controller::request::{Answer, Desk, Event, Request};
use crate::controller::service::Service;
use crate::ports::Journal;
use crate::rollout::driver::Ports;
use crate::rotation::driver::RotationPorts;

impl<H: Host> Service<H> {
    /// Takes the rollout orders waiting, each journaled as the request it runs as.
    async fn take_rollout_orders(&self) {
        while let Some(request) = self.host.take_request(Desk::Rollout) {
            let Request::Rollout(order) = &request else { unreachable!("the rollout desk takes only rollout orders") };
            self.machine().take_rollout(order.clone());
            self.journal_records().await;
            self.host.emit(Event::Answered { request, answer: Answer::Taken });
        }
    }

    /// The rollout desk's task.
    pub(super) async fn run_rollouts(self: Rc<Self>) {
        loop {
            self.take_rollout_orders().await;
            let request = self.machine().latest_rollout().cloned();
            if let Some(request) = request {
                let journal = self.host.journal();
                let lines = journal.replay().await.unwrap_or_default();
                if !Controller::rollout_finished(&lines, &request.rollout) {
                    let host = &self.host;
                    let (clock, hub, ssh, signals) =
                        (host.clock(), host.hub(), host.worker_ssh(WorkerWork::Rollout), host.signals());
                    let (jitter, secrets, artifacts, verifier) =
                        (host.jitter(), host.secrets(), host.artifacts(), host.verifier());
                    let ports = Ports {
                        clock: &clock,
                        hub: &hub,
                        ssh: &ssh,
                        journal: &journal,
                        signals: &signals,
                        jitter: &jitter,
                        secrets: &secrets,
                        artifacts: &artifacts,
                        verifier: &verifier,
                        rules: self.rules.rollout.as_ref(),
                    };
                    self.host.emit(Event::RolloutBegins { rollout: request.rollout.clone() });
                    ports.run_rollout(&request).await;
                }
                self.machine().rollout_ended();
                self.journal_records().await;
                self.host.emit(Event::RolloutRested { rollout: request.rollout.clone() });
            }
            self.host.requests_waiting(Desk::Rollout).await;
        }
    }

    /// The rotation desk's task.
    pub(super) async fn run_rotations(self: Rc<Self>) {
        let mut next = 0;
        loop {
            while let Some(request) = self.host.take_request(Desk::Rotation) {
                let Request::Rotation(order) = &request else {
                    unreachable!("the rotation desk takes only rotation orders")
                };
                self.machine().take_rotation(order.clone());
                self.journal_records().await;
                self.host.emit(Event::Answered { request, answer: Answer::Taken });
            }
            let request = self.machine().rotation(next).cloned();
            let Some(request) = request else {
                self.host.requests_waiting(Desk::Rotation).await;
                continue;
            };
            next += 1;
            let host = &self.host;
            let ports = RotationPorts {
                clock: &host.clock(),
                hub: &host.hub(),
                ssh: &host.worker_ssh(WorkerWork::Rotation),
                journal: &host.journal(),
                signals: &host.signals(),
                jitter: &host.jitter(),
                secrets: &host.secrets(),
            };
            ports.run_rotation(&request).await;
            self.machine().rotation_ended(next - 1);
            self.journal_records().await;
        }
    }
}
