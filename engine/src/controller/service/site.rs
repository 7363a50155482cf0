//! The site desk: the MAAS workflows of the controller's site. At its start time it reads the journal and takes the
//! site up (every onboarding not completed runs, every decommission a dead controller left unfinished runs again);
//! then it takes the requests that reach it — an onboarding (a person's resume, or the instance lifecycle's
//! bare-metal provision), a decommission, a recovery action — and runs each as a task of its own.
//!
//! Each onboarding run waits for admission under the site's concurrency limit and is run again after a stop
//! `failed_retryable`, as [`crate::controller::machine::rerun_after`] says. A decommission waits while the machine's
//! onboarding is in flight. A recovery action is authorized and audited by [`crate::operator`] before anything is
//! done; a run it calls for waits for a run of the same workflow in flight to end first.

use std::rc::Rc;

use crate::controller::host::Host;
use crate::controller::machine::{RequestId, SiteWork, decommission_entry, rerun_after};
use crate::controller::request::{Answer, Desk, Event, RecoveryOrder, Request};
use crate::controller::service::{Service, sleep_until};
use crate::decommission::driver::{DecommissionOutcome, DecommissionPorts, DecommissionRequest};
use crate::matrix::{Compensation, DecommissionStage, RecoveryAction, Stage, Workflow, WorkflowState};
use crate::onboarding::driver::{OnboardPorts, OnboardRequest};
use crate::operator::{
    Applied, NextStep, apply_operator_action, observe_decommission_checkpoint, observe_onboarding_checkpoint,
    settle_after_run, workflow_status,
};
use crate::ports::{Clock, Journal};
use crate::recovery::{AuditRecord, Lifecycle, OperatorRequest};
use crate::workflow::ids;

impl<H: Host> Service<H> {
    /// The site desk's task.
    pub(super) async fn run_site(self: Rc<Self>) {
        let Some(settings) = self.config().site else { return };
        sleep_until(&self.host.clock(), settings.start_at_ms).await;
        let lines = self.host.journal().replay().await.unwrap_or_default();
        let journal = self.machine().site_journal(&lines);
        let start = self.machine().site_begins(&journal);
        self.journal_records().await;
        for machine in start {
            self.spawn_onboarding(machine);
        }
        self.flush_events();
        let decommissions = self.machine().site_decommissions(&journal);
        self.journal_records().await;
        for machine in decommissions {
            self.spawn_decommission(machine);
        }
        let recoveries = self.machine().site_recoveries();
        for work in recoveries {
            self.start_site_work(work);
        }
        loop {
            self.host.requests_waiting(Desk::Site).await;
            while let Some(request) = self.host.take_request(Desk::Site) {
                self.take_site_request(request).await;
            }
        }
    }

    async fn take_site_request(self: &Rc<Self>, request: Request) {
        // A recovery action's correlation id: its workflow, its action, the controller's clock when it was taken.
        let correlation_id = match &request {
            Request::Recovery(order) => format!(
                "{}/{}/{}",
                ids::workflow_id(order.workflow, &order.machine),
                order.action.as_str(),
                self.host.clock().now_ms()
            ),
            _ => String::new(),
        };
        let work = self.machine().take_site_request(request.clone(), correlation_id);
        self.journal_records().await;
        self.start_site_work(work);
        self.host.emit(Event::Answered { request, answer: Answer::Taken });
    }

    fn start_site_work(self: &Rc<Self>, work: SiteWork) {
        match work {
            SiteWork::Onboard(machine) => self.spawn_onboarding(machine),
            SiteWork::Decommission(machine) => self.spawn_decommission(machine),
            SiteWork::Recovery { request, order, correlation_id, resumed } => {
                let service = self.clone();
                self.host
                    .spawn(Box::pin(async move { service.recover(request, order, correlation_id, resumed).await }));
            }
            SiteWork::Joined => {}
        }
    }

    /// The onboarding request of `machine`, from the operator's record of it as it stands now.
    fn onboard_request(&self, machine: &str) -> OnboardRequest {
        let settings = self.config().site.expect("a site desk");
        let node = self.host.racked(machine).unwrap_or_else(|| panic!("{machine} is not racked"));
        OnboardRequest {
            workflow: ids::onboarding_workflow_id(machine),
            node,
            policy: settings.policy,
            stall_window_ms: settings.stall_window_ms,
            poll_ms: settings.poll_ms,
            retry: settings.retry,
            site_policy: settings.site_policy,
            bootstrap_token_ttl_ms: settings.bootstrap_token_ttl_ms,
        }
    }

    fn decommission_request(&self, machine: &str) -> DecommissionRequest {
        let settings = self.config().site.expect("a site desk");
        DecommissionRequest {
            workflow: ids::decommission_workflow_id(machine),
            node: machine.to_owned(),
            hostname: machine.to_owned(),
            poll_ms: settings.poll_ms,
            retry: settings.retry,
            site_policy: settings.site_policy,
        }
    }

    /// Runs `body` with the onboarding driver's ports for `workflow`.
    async fn with_onboard_ports<T>(
        &self,
        workflow: &str,
        body: impl AsyncFnOnce(
            &OnboardPorts<
                '_,
                H::Clock,
                H::Maas,
                H::Resolver,
                H::SiteSecrets,
                H::Hub,
                H::SiteSsh,
                H::Journal,
                H::Signals,
            >,
        ) -> T,
    ) -> T {
        let host = &self.host;
        let (clock, maas, resolver, secrets) =
            (host.clock(), host.maas(workflow), host.resolver(), host.site_secrets());
        let (hub, ssh, journal, signals) = (host.hub(), host.site_ssh(), host.journal(), host.signals());
        let ports = OnboardPorts {
            clock: &clock,
            maas: &maas,
            resolver: &resolver,
            secrets: &secrets,
            hub: &hub,
            ssh: &ssh,
            journal: &journal,
            signals: &signals,
            rules: self.rules.onboarding.as_ref(),
        };
        body(&ports).await
    }

    /// Runs `body` with the decommission driver's ports for `workflow`.
    async fn with_decommission_ports<T>(
        &self,
        workflow: &str,
        body: impl AsyncFnOnce(
            &DecommissionPorts<'_, H::Clock, H::Maas, H::SiteSecrets, H::Fleet, H::Hub, H::Journal, H::Signals>,
        ) -> T,
    ) -> T {
        let host = &self.host;
        let ports = DecommissionPorts {
            clock: &host.clock(),
            maas: &host.maas(workflow),
            secrets: &host.site_secrets(),
            fleet: &host.fleet(),
            hub: &host.hub(),
            journal: &host.journal(),
            signals: &host.signals(),
        };
        body(&ports).await
    }

    /// `machine`'s onboarding, as a task: admitted, run (and run again while it stops `failed_retryable` and the
    /// request has runs left), then out of flight.
    fn spawn_onboarding(self: &Rc<Self>, machine: String) {
        let service = self.clone();
        self.host.spawn(Box::pin(async move {
            service.admitted().await;
            let request = service.onboard_request(&machine);
            let settings = service.config().site.expect("a site desk");
            let clock = service.host.clock();
            let outcome = service
                .with_onboard_ports(&request.workflow, async |ports| {
                    let mut run = 1;
                    loop {
                        let outcome = ports.run_onboarding(&request).await;
                        match rerun_after(&settings, run, outcome.workflow_state) {
                            Some(delay_ms) => clock.sleep_ms(delay_ms).await,
                            None => return outcome,
                        }
                        run += 1;
                    }
                })
                .await;
            service.host.emit(Event::OnboardingEnded { machine: machine.clone(), outcome });
            service.machine().onboarding_ended(&machine);
            service.journal_records().await;
            service.flush_events();
            service.release();
        }));
    }

    /// `machine`'s decommission, as a task: once its onboarding is no longer in flight.
    fn spawn_decommission(self: &Rc<Self>, machine: String) {
        let service = self.clone();
        self.host.spawn(Box::pin(async move {
            let poll_ms = service.config().site.expect("a site desk").busy_poll_ms;
            let clock = service.host.clock();
            while service.machine().decommission_waits(&machine) {
                clock.sleep_ms(poll_ms).await;
            }
            let outcome = service.run_decommission(&machine, None).await;
            service.host.emit(Event::DecommissionEnded { machine: machine.clone(), outcome });
            service.machine().decommission_ended(&machine);
            service.journal_records().await;
        }));
    }

    /// Runs `machine`'s decommission once (from `start_at`, for a recovery action).
    async fn run_decommission(&self, machine: &str, start_at: Option<DecommissionStage>) -> DecommissionOutcome {
        let request = self.decommission_request(machine);
        self.with_decommission_ports(&request.workflow, async |ports| {
            ports.run_decommission_from(&request, start_at).await
        })
        .await
    }

    /// A recovery action, as a task: observed (for an adoption), authorized and audited, then the compensation and
    /// the run it calls for, then the settled audit record; answered once all of it is over. One an earlier process
    /// took (`resumed`) goes on from where its audit trail says it got: not audited yet, it is performed whole;
    /// audited and settled, it is over; audited and not settled, its run was in flight and runs again (a
    /// compensation it called for is not done again), then it is settled.
    async fn recover(self: Rc<Self>, request: RequestId, order: RecoveryOrder, correlation_id: String, resumed: bool) {
        let audited = if resumed { self.audit_trail(&correlation_id).await } else { Vec::new() };
        let error = match audited.first() {
            None => self.perform_recovery(order.clone(), correlation_id).await.err(),
            Some(_) if audited.iter().any(|record| record.actual_next_state.is_some()) => None,
            Some(record) => self.finish_recovery(&order, record).await.err(),
        };
        self.machine().answer(request);
        self.journal_records().await;
        self.host.emit(Event::RecoveryEnded { order, error });
    }

    /// The audit records the journal holds of the recovery action with `correlation_id`, in order.
    async fn audit_trail(&self, correlation_id: &str) -> Vec<AuditRecord> {
        let lines = self.host.journal().replay().await.unwrap_or_default();
        lines
            .iter()
            .filter_map(|line| AuditRecord::decode(line).and_then(Result::ok))
            .filter(|record| record.correlation_id == correlation_id)
            .collect()
    }

    async fn perform_recovery(&self, order: RecoveryOrder, correlation_id: String) -> Result<(), String> {
        let RecoveryOrder { machine, workflow, action, actor, role, reason, resolves_freeze } = order;
        let workflow_id = ids::workflow_id(workflow, &machine);
        let request =
            OperatorRequest { actor_id: actor, actor_role: role, action, reason, correlation_id, resolves_freeze };
        let (journal, signals) = (self.host.journal(), self.host.signals());
        let observed = self.observe_checkpoint(workflow, &workflow_id, &machine, action).await;
        let applied = match apply_operator_action(&journal, &signals, workflow, &workflow_id, &request, observed).await
        {
            Ok(applied) => applied,
            Err(error) => {
                tracing::warn!(%workflow_id, %error, "operator action not performed");
                return Err(error.to_string());
            }
        };
        self.host.emit(Event::Audit(applied.record.clone()));
        let Applied { record, settled, next, authorized } = applied;
        if let Some(settled) = settled {
            self.host.emit(Event::Audit(settled));
        }
        match next {
            NextStep::Nothing => return Ok(()),
            NextStep::Compensate { stage, compensation } => {
                self.compensate_resting(&machine, stage, compensation).await;
                return Ok(());
            }
            // `restart_clean`: "explicitly compensate/reset progress, then start again".
            NextStep::CompensateThenRun { stage, compensation } => {
                self.compensate_resting(&machine, stage, compensation).await;
            }
            NextStep::Run => {}
        }
        match workflow {
            Workflow::Onboarding => self.run_onboarding_for_recovery(&machine).await,
            Workflow::Decommission => {
                self.run_decommission_for_recovery(&machine, decommission_entry(authorized.as_ref())).await;
            }
        }
        self.settle(workflow, &record).await
    }

    /// A recovery action audited and not settled by the process that took it: its run, then its settled record.
    async fn finish_recovery(&self, order: &RecoveryOrder, record: &AuditRecord) -> Result<(), String> {
        if !matches!(record.outcome, crate::recovery::AuditOutcome::Accepted { .. }) {
            return Ok(());
        }
        match order.workflow {
            Workflow::Onboarding => self.run_onboarding_for_recovery(&order.machine).await,
            Workflow::Decommission => {
                let start_at = match (record.requested_action, record.prior_stage) {
                    (
                        RecoveryAction::Resume | RecoveryAction::RetryStage | RecoveryAction::AdoptObservedState,
                        Stage::Decommission(stage),
                    ) => Some(stage),
                    _ => None,
                };
                self.run_decommission_for_recovery(&order.machine, start_at).await;
            }
        }
        self.settle(order.workflow, record).await
    }

    /// The fresh observation `adopt_observed_state` needs (section 7); no other action reads it. An onboarding's
    /// checkpoint is read at the hub or in MAAS, a decommission's in MAAS or the inventory, and only while the
    /// decommission rests stopped: a running or ended one is refused whatever is observed.
    async fn observe_checkpoint(
        &self,
        workflow: Workflow,
        workflow_id: &str,
        machine: &str,
        action: RecoveryAction,
    ) -> bool {
        if action != RecoveryAction::AdoptObservedState {
            return false;
        }
        let lines = self.host.journal().replay().await.unwrap_or_default();
        let Ok(status) = workflow_status(workflow, workflow_id, lines.iter().map(String::as_str), false) else {
            return false;
        };
        let maas = self.host.maas(workflow_id);
        match workflow {
            Workflow::Onboarding => {
                let request = self.onboard_request(machine);
                let hub = self.host.hub();
                observe_onboarding_checkpoint(&maas, &hub, machine, &request.node.pxe_mac, status.stage).await
            }
            Workflow::Decommission => {
                let stopped = matches!(
                    status.state,
                    Lifecycle::Workflow(WorkflowState::FailedRetryable | WorkflowState::FailedManualIntervention)
                );
                if !stopped {
                    return false;
                }
                let fleet = self.host.fleet();
                observe_decommission_checkpoint(&maas, &fleet, machine, machine, status.stage).await
            }
        }
    }

    async fn settle(&self, workflow: Workflow, record: &AuditRecord) -> Result<(), String> {
        match settle_after_run(&self.host.journal(), workflow, record).await {
            Ok(settled) => {
                self.host.emit(Event::Audit(settled));
                Ok(())
            }
            Err(error) => {
                tracing::warn!(workflow = %record.workflow_id, %error, "operator action not settled");
                Err(error.to_string())
            }
        }
    }

    /// The resting stage's compensation of a `cancel` or a `restart_clean`, by the workflow's driver. A
    /// decommission's compensations are its failures' own: none is an operator action's to make; the driver
    /// journals and reports that nothing was done.
    async fn compensate_resting(&self, machine: &str, stage: Stage, compensation: Compensation) {
        let stage = match stage {
            Stage::Onboarding(stage) => stage,
            Stage::Decommission(stage) => {
                let request = self.decommission_request(machine);
                self.with_decommission_ports(&request.workflow, async |ports| {
                    ports.record_cancel_uncompensated(&request, stage, compensation).await
                })
                .await;
                return;
            }
        };
        self.wait_for_onboarding_out_of_flight(machine).await;
        let request = self.onboard_request(machine);
        let outcome = self
            .with_onboard_ports(&request.workflow, async |ports| {
                ports.compensate_cancelled(&request, stage, compensation).await
            })
            .await;
        self.host.emit(Event::Compensated { machine: machine.to_owned(), compensation, outcome });
        self.machine().recovery_onboarding_ended(machine);
        self.journal_records().await;
    }

    /// Waits until no run of `machine`'s onboarding is in flight, and takes the slot.
    async fn wait_for_onboarding_out_of_flight(&self, machine: &str) {
        let poll_ms = self.config().site.expect("a site desk").busy_poll_ms;
        let clock = self.host.clock();
        while !self.machine().recovery_onboarding_may_start(machine) {
            clock.sleep_ms(poll_ms).await;
        }
    }

    async fn run_onboarding_for_recovery(&self, machine: &str) {
        self.wait_for_onboarding_out_of_flight(machine).await;
        self.admitted().await;
        let request = self.onboard_request(machine);
        let outcome =
            self.with_onboard_ports(&request.workflow, async |ports| ports.run_onboarding(&request).await).await;
        self.release();
        self.machine().recovery_onboarding_ended(machine);
        self.journal_records().await;
        self.host.emit(Event::OnboardingEnded { machine: machine.to_owned(), outcome });
    }

    async fn run_decommission_for_recovery(&self, machine: &str, start_at: Option<DecommissionStage>) {
        let poll_ms = self.config().site.expect("a site desk").busy_poll_ms;
        let clock = self.host.clock();
        while !self.machine().recovery_decommission_may_start(machine) {
            clock.sleep_ms(poll_ms).await;
        }
        let outcome = self.run_decommission(machine, start_at).await;
        self.machine().decommission_ended(machine);
        self.journal_records().await;
        self.host.emit(Event::DecommissionEnded { machine: machine.to_owned(), outcome });
    }
}
