//! The instance desk: the provisioning runbook's controller (seed 004). It opens the driver on the journal, creates
//! what the configuration names and the journal does not have yet (pools, plain nodes and their first provision, a
//! node per racked machine in a bare-metal site), then runs a pass every period, sooner when a request comes:
//! the requests waiting, the agents' heartbeats read at the hub, pending rows advanced and owed destroys finished,
//! the replenisher when due, the stuck sensor, and the hourly cloud sync. A stuck row pages a person at every pass
//! while it stays stuck; what they answer at once is performed before the pass goes on.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::controller::config::InstanceSettings;
use crate::controller::host::Host;
use crate::controller::machine::RequestId;
use crate::controller::metal::ControllerMetal;
use crate::controller::request::{Answer, Desk, Event, InstanceOrder, InstanceVerb, Page, Request, operated_outcome};
use crate::controller::service::{Service, sleep_until};
use crate::instance::control::Control;
use crate::instance::driver::{Cleared, DriverError, InstanceDriver};
use crate::instance::inventory::{Backing, DeferredOperation, Instance, InstanceRecord};
use crate::instance::operator::OperatorStep;
use crate::instance::state::InstanceState;
use crate::instance::stuck::Stuck;
use crate::ports::platform::{AgentFeed, AgentPhase, Heard};
use crate::ports::provider::{Provider, ProviderError};
use crate::ports::{Clock, Journal, JournalError};

/// The controller's journal as the instance desk writes it: each instance record's `record` tag is noted as it
/// becomes durable, so a verb's audit names what it wrote.
struct Noting<'a, J> {
    journal: J,
    wrote: &'a std::cell::RefCell<Vec<String>>,
}

impl<J: Journal> Journal for Noting<'_, J> {
    async fn append(&self, record: &str) -> Result<(), JournalError> {
        self.journal.append(record).await?;
        if let Some(Ok(instance)) = InstanceRecord::from_line(record) {
            self.wrote.borrow_mut().push(record_kind(&instance));
        }
        Ok(())
    }

    async fn replay(&self) -> Result<Vec<String>, JournalError> {
        self.journal.replay().await
    }

    async fn replay_subject(&self, subject: &str) -> Result<Vec<String>, JournalError> {
        self.journal.replay_subject(subject).await
    }
}

/// The `record` tag of an instance record.
pub fn record_kind(record: &InstanceRecord) -> String {
    serde_json::to_value(record)
        .ok()
        .and_then(|value| value.get("record").and_then(|kind| kind.as_str().map(str::to_owned)))
        .unwrap_or_default()
}

type Driver<'a, H> = InstanceDriver<
    'a,
    Noting<'a, <H as Host>::Journal>,
    <H as Host>::Provider,
    ControllerMetal<'a, H>,
    <H as Host>::Platform,
>;

fn cloud_backing(settings: &InstanceSettings) -> Backing {
    Backing::Cloud { region: settings.region.clone(), instance_type: settings.instance_type.clone() }
}

fn node_by_name<H: Host>(settings: &InstanceSettings, driver: &Driver<'_, H>, name: &str) -> Option<String> {
    driver
        .inventory()
        .nodes
        .values()
        .find(|node| node.account == settings.account && node.name == name)
        .map(|node| node.id.clone())
}

/// The instance a request's `target` names: an instance id (`i-00003`), a pool's k-th live member (`edge[2]`, in
/// id order, 1-based, not terminated), or a node's name (its latest instance).
fn resolve_instance<H: Host>(settings: &InstanceSettings, driver: &Driver<'_, H>, target: &str) -> Option<String> {
    let inventory = driver.inventory();
    if inventory.instances.contains_key(target) {
        return Some(target.to_owned());
    }
    if let Some((pool, rest)) = target.split_once('[') {
        let k: usize = rest.strip_suffix(']')?.parse().ok()?;
        return inventory
            .members(pool)
            .filter(|member| member.state != InstanceState::Terminated)
            .nth(k.checked_sub(1)?)
            .map(|member| member.id.clone());
    }
    let node = node_by_name::<H>(settings, driver, target)?;
    inventory.instances.values().rfind(|instance| instance.node == node).map(|instance| instance.id.clone())
}

impl<H: Host> Service<H> {
    /// The instance desk's task.
    pub(super) async fn run_instances(self: Rc<Self>) {
        let Some(settings) = self.config().instances else { return };
        let wrote = std::cell::RefCell::new(Vec::new());
        let journal = Noting { journal: self.host.journal(), wrote: &wrote };
        let provider = self.host.provider();
        let platform = self.host.platform();
        let metal = ControllerMetal::new(&self.host, self.config().site.is_some());
        let mut driver = match InstanceDriver::open(&journal, &provider, &metal, &platform).await {
            Ok(driver) => driver,
            Err(error) => return self.pass_failed("open", &error),
        };
        let desk = InstanceDesk { service: &self, settings: &settings, wrote: &wrote };
        if let Err(error) = desk.set_up(&mut driver).await {
            self.pass_failed("set_up", &error);
        }
        let clock = self.host.clock();
        self.machine().instances_begin(clock.monotonic_ms());
        // What an earlier process took and did not answer is performed again first.
        let adopted = self.machine().instances_adopted();
        self.journal_records().await;
        for (id, order) in adopted {
            desk.perform(&mut driver, Request::Instance(order), Some(id)).await;
        }
        loop {
            let now_ms = clock.monotonic_ms();
            desk.take_requests(&mut driver).await;
            let heartbeats = desk.read_agents(&mut driver).await;
            if let Err(error) = driver.resume(now_ms).await {
                self.pass_failed("resume", &error);
            }
            if self.machine().replenish_due(now_ms) {
                for pool in &settings.pools {
                    if let Err(error) = driver.replenish(&pool.id, now_ms).await {
                        self.pass_failed("replenish", &error);
                    }
                }
            }
            if let Some(heartbeats) = heartbeats {
                desk.sense(&mut driver, &heartbeats, now_ms).await;
            }
            if self.machine().sync_due(now_ms) {
                match driver.sync(&settings.region, now_ms).await {
                    Ok(report) => self.host.emit(Event::InstanceSync {
                        region: settings.region.clone(),
                        mapped_terminated: report.mapped_terminated,
                        signals: report.signals,
                    }),
                    Err(error) => self.pass_failed("sync", &error),
                }
                for signal in driver.inventory().stale_syncs([settings.region.as_str()], now_ms) {
                    self.host.emit(Event::InstanceSyncSignal(signal));
                }
            }
            let next_ms = self.machine().next_pass_ms(now_ms);
            let waiting = std::pin::pin!(self.host.requests_waiting(Desk::Instances));
            let sleeping = std::pin::pin!(sleep_until(&clock, next_ms));
            futures_util::future::select(waiting, sleeping).await;
        }
    }

    fn pass_failed(&self, pass: &str, error: &DriverError) {
        self.host.emit(Event::InstancePassFailed { pass: pass.to_owned(), error: error.to_string() });
    }
}

/// The instance desk's pass, over one driver.
struct InstanceDesk<'a, H: Host> {
    service: &'a Rc<Service<H>>,
    settings: &'a InstanceSettings,
    /// The instance records' tags written, in order (what a verb wrote is the slice its run added).
    wrote: &'a std::cell::RefCell<Vec<String>>,
}

impl<H: Host> InstanceDesk<'_, H> {
    fn now_ms(&self) -> u64 {
        self.service.host.clock().monotonic_ms()
    }

    /// The pools and plain nodes the configuration names that the journal does not have yet, and each plain node's
    /// first provision under `op-<node>` (a retry of the same operation when a dead controller had begun it). In a
    /// bare-metal site every racked machine is a node too (its worker named as it), provisioned on its machine.
    async fn set_up(&self, driver: &mut Driver<'_, H>) -> Result<(), DriverError> {
        let settings = self.settings;
        let now_ms = self.now_ms();
        for pool in &settings.pools {
            if !driver.inventory().pools.contains_key(&pool.id) {
                let decided = driver
                    .inventory()
                    .create_pool(pool.clone())
                    .map_err(|refusal| DriverError::Refused(refusal.to_string()))?;
                driver.commit(decided).await?;
            }
        }
        let plain = settings.plain.iter().map(|name| (name.clone(), None, cloud_backing(settings)));
        let site = self.service.config().site;
        let machines: Vec<(String, Option<String>, Backing)> = match (&site, settings.bare_metal) {
            (Some(site), true) => {
                let mut machines: Vec<String> = site.machines.clone();
                machines.sort();
                machines
                    .into_iter()
                    .filter_map(|machine| {
                        let racked = self.service.host.racked(&machine)?;
                        Some((machine.clone(), Some(machine), Backing::BareMetal { mac: racked.pxe_mac }))
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        for (name, worker, backing) in plain.chain(machines) {
            let node_id = match node_by_name::<H>(settings, driver, &name) {
                Some(id) => id,
                None => {
                    let decided = driver
                        .inventory()
                        .create_node(&settings.account, &name, &settings.template, worker.as_deref(), BTreeMap::new())
                        .map_err(|refusal| DriverError::Refused(refusal.to_string()))?;
                    driver.commit(decided).await?
                }
            };
            let begun = driver.inventory().instances.values().any(|instance| instance.node == node_id);
            if !begun {
                let operation_id = format!("op-{name}");
                driver.provision(&node_id, backing, Some(&operation_id), now_ms).await?;
            }
        }
        Ok(())
    }

    /// Reads what the agents did from the hub and applies it; answers each agent's last heartbeat, or `None` when
    /// the hub did not answer (the stuck sensor then waits: it has no fresh view).
    async fn read_agents(&self, driver: &mut Driver<'_, H>) -> Option<BTreeMap<String, u64>> {
        let report = match self.service.host.agents().read().await {
            Ok(report) => report,
            Err(error) => {
                self.service.pass_failed("read_guests", &DriverError::Provider(ProviderError::Transport(error)));
                return None;
            }
        };
        let now_ms = self.now_ms();
        // What happened first, then each agent's latest heartbeat (one a dead or partitioned controller missed is
        // repeated every period): a fresh one in its phase.
        let fresh_ms = self.service.config().instances.map_or(0, |settings| settings.heartbeat_fresh_ms);
        let fresh =
            report.last_heartbeats.iter().filter(|(_, (at_ms, _))| now_ms.saturating_sub(*at_ms) <= fresh_ms).map(
                |(tag, (_, ready))| {
                    let phase = if *ready { AgentPhase::Ready } else { AgentPhase::Booting };
                    (tag.clone(), Heard::Heartbeat(phase))
                },
            );
        let all: Vec<(String, Heard)> = report.heard.clone().into_iter().chain(fresh).collect();
        for (tag, heard) in all {
            // A report the rows cannot take (a boot failure of a cancelled row) is no pass failure.
            match driver.heard(&tag, heard, now_ms).await {
                Ok(()) | Err(DriverError::Refused(_)) => {}
                Err(error) => self.service.pass_failed("heard", &error),
            }
        }
        Some(report.last_heartbeats.into_iter().map(|(tag, (at_ms, _))| (tag, at_ms)).collect())
    }

    /// The stuck sensor: raises each stuck row once per clock start, and pages a person about every stuck row at
    /// every pass; what they answer is performed at once.
    async fn sense(&self, driver: &mut Driver<'_, H>, heartbeats: &BTreeMap<String, u64>, now_ms: u64) {
        let signals = driver.inventory().stuck(now_ms, |id| heartbeats.get(id).copied());
        for signal in signals {
            let first = self.service.machine().stuck_seen(&signal.instance, signal.stuck, signal.since_ms);
            if first {
                self.service.host.emit(Event::InstanceStuck {
                    instance: signal.instance.clone(),
                    stuck: signal.stuck,
                    since_ms: signal.since_ms,
                });
            }
            let page =
                Page { instance: signal.instance.clone(), stuck: signal.stuck, since_ms: signal.since_ms, first };
            for request in self.service.host.page(&page) {
                self.perform(driver, request, None).await;
            }
        }
    }

    /// Takes the requests waiting, in the order they came (one that comes while another is performed is taken in
    /// the same pass).
    async fn take_requests(&self, driver: &mut Driver<'_, H>) {
        while let Some(request) = self.service.host.take_request(Desk::Instances) {
            self.perform(driver, request, None).await;
        }
    }

    /// Performs one instance request (taken now and journaled, or `adopted` from an earlier process) and reports
    /// it: its audit (`InstanceOperated`, with what it wrote) and its answer, journaled.
    async fn perform(&self, driver: &mut Driver<'_, H>, request: Request, adopted: Option<RequestId>) {
        let Request::Instance(order) = &request else { unreachable!("the instance desk takes only instance orders") };
        let id = match adopted {
            Some(id) => id,
            None => self.service.machine().take_instance(order.clone()),
        };
        self.service.journal_records().await;
        let answered = async |answer: Answer| {
            self.service.machine().answer(id);
            self.service.journal_records().await;
            self.service.host.emit(Event::Answered { request: request.clone(), answer });
        };
        let before = self.wrote.borrow().len();
        let outcome = match order.verb {
            InstanceVerb::Recover(stuck) => match self.recover(driver, &order.target, stuck).await {
                Some(outcome) => outcome,
                None => return answered(Answer::Nothing).await,
            },
            _ => self.operate(driver, order).await,
        };
        let (outcome, detail) = match outcome {
            Ok(operated) => operated,
            Err(DriverError::Refused(text)) => ("refused".to_owned(), Some(text)),
            Err(error) => ("failed".to_owned(), Some(error.to_string())),
        };
        let wrote = self.wrote.borrow()[before..].to_vec();
        self.service.host.emit(Event::InstanceOperated {
            actor: order.actor.clone(),
            verb: order.verb.as_str().to_owned(),
            target: order.target.clone(),
            outcome: outcome.clone(),
            wrote,
        });
        answered(Answer::Done { outcome, detail }).await;
    }

    /// The runbook's recovery of one stuck row; `None` when there is nothing to do (the row is gone, or its row's
    /// recovery is the passes' own: a pending row is retried by them, a silent agent is someone's to restart).
    async fn recover(
        &self,
        driver: &mut Driver<'_, H>,
        instance_id: &str,
        stuck: Stuck,
    ) -> Option<Result<(String, Option<String>), DriverError>> {
        let instance = driver.inventory().instance(instance_id).cloned().ok()?;
        let now_ms = self.now_ms();
        let result = match stuck {
            Stuck::Pending | Stuck::Silent => return None,
            Stuck::Provisioning => {
                let cleared = driver.clear_stuck_provisioning(instance_id, now_ms).await;
                match cleared {
                    Ok(Cleared::BySync | Cleared::Terminated) if instance.pool.is_none() => {
                        self.provision_again(driver, &instance, true).await
                    }
                    other => other.map(drop),
                }
            }
            Stuck::NeverReady => {
                let terminated = driver.control(instance_id, Control::Terminate, true, now_ms).await.map(drop);
                match terminated {
                    Ok(()) if instance.pool.is_none() => self.provision_again(driver, &instance, false).await,
                    other => other,
                }
            }
            Stuck::DrainStalled => driver.control(instance_id, Control::Terminate, true, now_ms).await.map(drop),
            Stuck::TerminateStalled => self
                .service
                .host
                .provider()
                .force_terminate(&self.settings.region, &instance.id)
                .await
                .map(drop)
                .map_err(DriverError::Provider),
        };
        Some(result.map(|()| ("performed".to_owned(), None)))
    }

    /// Provisions a recovered plain node again: under the same operation id (a fresh row carrying it) after a
    /// cleared provisioning, under a fresh one after a never-ready instance.
    async fn provision_again(
        &self,
        driver: &mut Driver<'_, H>,
        instance: &Instance,
        same_operation: bool,
    ) -> Result<(), DriverError> {
        let operation_id = match (&instance.operation_id, same_operation) {
            (Some(id), true) => id.clone(),
            (Some(id), false) => format!("{id}/after-{}", instance.id),
            (None, _) => format!("op-{}/after-{}", instance.node, instance.id),
        };
        driver.provision(&instance.node, instance.backing.clone(), Some(&operation_id), self.now_ms()).await.map(drop)
    }

    /// One runbook verb: the audited ones through the inventory's `operate`, the rest through the driver's own
    /// calls.
    async fn operate(
        &self,
        driver: &mut Driver<'_, H>,
        order: &InstanceOrder,
    ) -> Result<(String, Option<String>), DriverError> {
        let settings = self.settings;
        let (target, force, operation_id) = (order.target.as_str(), order.force, order.operation_id.as_deref());
        let (actor, reason) = (order.actor.as_str(), order.reason.as_str());
        let now_ms = self.now_ms();
        let unknown = || DriverError::Refused(format!("{target} names no instance"));
        let instance = |driver: &Driver<'_, H>| resolve_instance::<H>(settings, driver, target).ok_or_else(unknown);
        let step = match order.verb {
            InstanceVerb::Provision => {
                let node = node_by_name::<H>(settings, driver, target)
                    .ok_or_else(|| DriverError::Refused(format!("{target} names no node")))?;
                // A node is provisioned again on what backed it (its machine, for a bare-metal node).
                let backing = driver
                    .inventory()
                    .instances
                    .values()
                    .rfind(|instance| instance.node == node)
                    .map_or_else(|| cloud_backing(settings), |instance| instance.backing.clone());
                driver.provision(&node, backing, operation_id, now_ms).await?;
                return Ok(("performed".to_owned(), None));
            }
            InstanceVerb::ClearStuck => {
                let id = instance(driver)?;
                driver.clear_stuck_provisioning(&id, now_ms).await?;
                return Ok(("performed".to_owned(), None));
            }
            InstanceVerb::Acquire => {
                driver.acquire(target).await?;
                return Ok(("performed".to_owned(), None));
            }
            InstanceVerb::Release => {
                let id = instance(driver)?;
                driver.release(&id, now_ms).await?;
                return Ok(("performed".to_owned(), None));
            }
            InstanceVerb::Recover(_) => unreachable!("a recovery is performed by `recover`"),
            InstanceVerb::PlaceHold => {
                OperatorStep::PlaceHold { instance: instance(driver)?, reason: reason.to_owned() }
            }
            InstanceVerb::LiftHold => OperatorStep::LiftHold { instance: instance(driver)? },
            InstanceVerb::Start => OperatorStep::Control { instance: instance(driver)?, action: Control::Start, force },
            InstanceVerb::Stop => OperatorStep::Control { instance: instance(driver)?, action: Control::Stop, force },
            InstanceVerb::Reboot => {
                OperatorStep::Control { instance: instance(driver)?, action: Control::Reboot, force }
            }
            InstanceVerb::Drain => OperatorStep::Drain { instance: instance(driver)? },
            InstanceVerb::Terminate => OperatorStep::Request {
                operation: DeferredOperation::Terminate { instance: instance(driver)?, by: actor.to_owned() },
            },
            InstanceVerb::Cordon => OperatorStep::Request {
                operation: DeferredOperation::Cordon {
                    instance: instance(driver)?,
                    reason: reason.to_owned(),
                    by: actor.to_owned(),
                },
            },
            InstanceVerb::Uncordon => OperatorStep::Request {
                operation: DeferredOperation::Uncordon { instance: instance(driver)?, by: actor.to_owned() },
            },
            InstanceVerb::Approve => OperatorStep::Approve { deferred: target.to_owned() },
            InstanceVerb::Deny => OperatorStep::Deny { deferred: target.to_owned() },
        };
        let outcome = driver.operate(actor, step, settings.governance, now_ms).await?;
        let (outcome, detail) = operated_outcome(&outcome);
        Ok((outcome.to_owned(), detail))
    }
}
