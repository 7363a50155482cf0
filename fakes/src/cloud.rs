//! The fake cloud/VM provider a NodeInstance runs on (`docs/instances.md`): regions with an instance quota,
//! instance types, and VMs that are created, boot, stop, start, reboot and are destroyed, each carrying the tag
//! the caller gave it.
//!
//! Modelled on an EC2-shaped API: a create answers at once with the VM `pending`; the guest boots, its agent comes
//! up (first heartbeat) and then reports `phase=ready`; a destroy answers at once and the VM is `shutting-down` until
//! the teardown finishes, after which it is `terminated` and no longer listed. The model only answers and says what
//! happened by a time ([`CloudProvider::poll`]); the simulator does the waiting and turns guest events into agent
//! heartbeats.
//!
//! Faults (each counts down, one VM per count): `refuse_quota` (the next creates are refused as over the limit,
//! whatever the count), `hang_creates` (the domain creation never finishes: `pending` for ever), `fail_boots` (the VM
//! goes `failed` and no agent comes up), `fail_module_pulls` (the agent comes up and never reaches ready),
//! `stick_teardowns` (a destroy is accepted and the VM stays `shutting-down`), and `stop_listing(region)` (the
//! region's list answers 503, so its sync stops).
//!
//! The API it is shaped on is EC2's (`RunInstances`, `DescribeInstances` with a tag filter, `StartInstances`,
//! `StopInstances`, `RebootInstances`, `TerminateInstances`); the texts are EC2's error codes with a short message.
//! Its deviations are marked `Deviation:` where they happen and listed in `docs/fidelity.md`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// How long the fake's steps take, in virtual milliseconds.
pub const BOOT_TO_AGENT_MS: u64 = 30_000;
/// From the agent's first heartbeat to `phase=ready` (enrol, module pull, mount): the runbook's ~90 s cold boot.
pub const AGENT_TO_READY_MS: u64 = 60_000;
pub const STOP_MS: u64 = 10_000;
pub const TEARDOWN_MS: u64 = 20_000;

/// The VM states, as the provider spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VmState {
    Pending,
    Running,
    Stopping,
    Stopped,
    ShuttingDown,
    Terminated,
    Failed,
}

impl VmState {
    pub fn as_str(self) -> &'static str {
        match self {
            VmState::Pending => "pending",
            VmState::Running => "running",
            VmState::Stopping => "stopping",
            VmState::Stopped => "stopped",
            VmState::ShuttingDown => "shutting-down",
            VmState::Terminated => "terminated",
            VmState::Failed => "failed",
        }
    }
}

/// How a VM's boot goes, fixed when it is created (or started, or rebooted) from the fault counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Boot {
    Normal,
    Hang,
    Fail,
    ModulePullFails,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vm {
    pub id: String,
    pub name: String,
    pub tag: String,
    pub region: String,
    pub instance_type: String,
    pub state: VmState,
    /// When the VM entered `state`.
    pub since_ms: u64,
    boot: Boot,
    /// The guest's agent has sent its first heartbeat / `phase=ready` in this boot.
    agent_up: bool,
    agent_ready: bool,
    stuck_teardown: bool,
}

/// What the guest did, for the simulator to turn into the agent's heartbeats.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum GuestEvent {
    /// The agent's first heartbeat of this boot (phase booting).
    AgentUp {
        tag: String,
        vm: String,
    },
    /// The agent's `phase=ready` heartbeat.
    AgentReady {
        tag: String,
        vm: String,
    },
    BootFailed {
        tag: String,
        vm: String,
    },
    Stopped {
        tag: String,
        vm: String,
    },
    Destroyed {
        tag: String,
        vm: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CloudError {
    #[error(
        "InstanceLimitExceeded: you have requested more instances than your current instance limit of {limit} allows in {region}"
    )]
    QuotaExceeded { region: String, limit: u32 },
    #[error("InvalidParameterValue: unknown region {0}")]
    UnknownRegion(String),
    #[error("InvalidParameterValue: unknown instance type {0}")]
    UnknownInstanceType(String),
    #[error("InvalidParameterValue: {0} must not be empty")]
    Blank(&'static str),
    #[error("InvalidInstanceID.NotFound: the instance ID '{0}' does not exist")]
    NotFound(String),
    #[error("IncorrectInstanceState: the instance '{id}' is not in a state from which it can be {verb} ({state})")]
    IncorrectState { id: String, verb: &'static str, state: &'static str },
    #[error("Unavailable: the service is unavailable in {0}")]
    Unavailable(String),
}

impl CloudError {
    /// The HTTP status the provider's API answers with.
    pub fn status(&self) -> u16 {
        match self {
            CloudError::QuotaExceeded { .. }
            | CloudError::UnknownRegion(_)
            | CloudError::UnknownInstanceType(_)
            | CloudError::Blank(_) => 400,
            CloudError::NotFound(_) => 404,
            CloudError::IncorrectState { .. } => 409,
            CloudError::Unavailable(_) => 503,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum CloudRequest {
    Create { region: String, instance_type: String, name: String, tag: String },
    FindByTag { region: String, tag: String },
    List { region: String },
    Start { id: String },
    Stop { id: String, hard: bool },
    Reboot { id: String },
    Destroy { id: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "response", rename_all = "snake_case")]
pub enum CloudResponse {
    Created { id: String },
    Vms { vms: Vec<Vm> },
    Accepted,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Faults {
    refuse_quota: u32,
    hang_creates: u32,
    fail_boots: u32,
    fail_module_pulls: u32,
    stick_teardowns: u32,
    unlisted_regions: BTreeSet<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CloudProvider {
    /// Region → the most VMs (not terminated) it allows.
    quotas: BTreeMap<String, u32>,
    instance_types: BTreeSet<String>,
    vms: BTreeMap<String, Vm>,
    created: u64,
    faults: Faults,
}

impl CloudProvider {
    pub fn new() -> CloudProvider {
        CloudProvider::default()
    }

    pub fn add_region(&mut self, region: &str, quota: u32) {
        self.quotas.insert(region.to_owned(), quota);
    }

    pub fn add_instance_type(&mut self, instance_type: &str) {
        self.instance_types.insert(instance_type.to_owned());
    }

    pub fn refuse_quota(&mut self, count: u32) {
        self.faults.refuse_quota += count;
    }
    pub fn hang_creates(&mut self, count: u32) {
        self.faults.hang_creates += count;
    }
    pub fn fail_boots(&mut self, count: u32) {
        self.faults.fail_boots += count;
    }
    pub fn fail_module_pulls(&mut self, count: u32) {
        self.faults.fail_module_pulls += count;
    }
    pub fn stick_teardowns(&mut self, count: u32) {
        self.faults.stick_teardowns += count;
    }
    /// The region's list answers 503 from now on (`resume_listing` ends it).
    pub fn stop_listing(&mut self, region: &str) {
        self.faults.unlisted_regions.insert(region.to_owned());
    }
    pub fn resume_listing(&mut self, region: &str) {
        self.faults.unlisted_regions.remove(region);
    }

    /// Every VM ever created, terminated ones included, in id order.
    /// The provider console's force-terminate of a VM whose teardown is stuck (the runbook's "reap the orphan at the
    /// provider"): it finishes shutting down. Answers whether there was such a VM.
    pub fn reap(&mut self, id: &str) -> bool {
        match self.vms.get_mut(id) {
            Some(vm) if vm.state == VmState::ShuttingDown && vm.stuck_teardown => {
                vm.stuck_teardown = false;
                true
            }
            _ => false,
        }
    }

    pub fn vms(&self) -> impl Iterator<Item = &Vm> {
        self.vms.values()
    }

    /// The VMs that are not terminated and carry `tag`: what "two VMs for one operation" would be.
    pub fn live_with_tag<'a>(&'a self, tag: &'a str) -> impl Iterator<Item = &'a Vm> + 'a {
        self.vms.values().filter(move |vm| vm.tag == tag && vm.state != VmState::Terminated)
    }

    pub fn handle(&mut self, request: CloudRequest, now_ms: u64) -> Result<CloudResponse, CloudError> {
        match request {
            CloudRequest::Create { region, instance_type, name, tag } => {
                self.create(region, instance_type, name, tag, now_ms)
            }
            CloudRequest::FindByTag { region, tag } => {
                self.known_region(&region)?;
                let vms = self.listed(&region).filter(|vm| vm.tag == tag).cloned().collect();
                Ok(CloudResponse::Vms { vms })
            }
            CloudRequest::List { region } => {
                self.known_region(&region)?;
                if self.faults.unlisted_regions.contains(&region) {
                    return Err(CloudError::Unavailable(region));
                }
                Ok(CloudResponse::Vms { vms: self.listed(&region).cloned().collect() })
            }
            CloudRequest::Start { id } => {
                // The boot faults bite a create's first boot (a domain being created); a start or reboot of an
                // existing domain boots normally.
                let boot = Boot::Normal;
                let vm = self.vm_in(&id, "started", &[VmState::Stopped])?;
                vm.boot_again(boot, now_ms);
                Ok(CloudResponse::Accepted)
            }
            // Deviation: a hard stop takes as long as a graceful one (EC2's force skips the guest's shutdown).
            CloudRequest::Stop { id, hard: _ } => {
                let vm = self.vm_in(&id, "stopped", &[VmState::Pending, VmState::Running])?;
                vm.enter(VmState::Stopping, now_ms);
                Ok(CloudResponse::Accepted)
            }
            CloudRequest::Reboot { id } => {
                let boot = Boot::Normal;
                let vm = self.vm_in(&id, "rebooted", &[VmState::Running])?;
                vm.boot_again(boot, now_ms);
                Ok(CloudResponse::Accepted)
            }
            CloudRequest::Destroy { id } => {
                let stuck = self.faults.stick_teardowns > 0;
                let vm = self.vms.get_mut(&id).ok_or_else(|| CloudError::NotFound(id.clone()))?;
                // Idempotent, as EC2's TerminateInstances is: a VM already going or gone is accepted again.
                if !matches!(vm.state, VmState::ShuttingDown | VmState::Terminated) {
                    vm.enter(VmState::ShuttingDown, now_ms);
                    vm.stuck_teardown = stuck;
                    if stuck {
                        self.faults.stick_teardowns -= 1;
                    }
                }
                Ok(CloudResponse::Accepted)
            }
        }
    }

    fn create(
        &mut self,
        region: String,
        instance_type: String,
        name: String,
        tag: String,
        now_ms: u64,
    ) -> Result<CloudResponse, CloudError> {
        let limit = self.known_region(&region)?;
        if !self.instance_types.contains(&instance_type) {
            return Err(CloudError::UnknownInstanceType(instance_type));
        }
        if name.trim().is_empty() {
            return Err(CloudError::Blank("name"));
        }
        if tag.trim().is_empty() {
            return Err(CloudError::Blank("tag"));
        }
        let live = self.vms.values().filter(|vm| vm.region == region && vm.state != VmState::Terminated).count();
        if self.faults.refuse_quota > 0 || live >= limit as usize {
            self.faults.refuse_quota = self.faults.refuse_quota.saturating_sub(1);
            return Err(CloudError::QuotaExceeded { region, limit });
        }
        let boot = self.next_boot();
        self.created += 1;
        let id = format!("vm-{:08x}", self.created);
        let vm = Vm {
            id: id.clone(),
            name,
            tag,
            region,
            instance_type,
            state: VmState::Pending,
            since_ms: now_ms,
            boot,
            agent_up: false,
            agent_ready: false,
            stuck_teardown: false,
        };
        self.vms.insert(id.clone(), vm);
        Ok(CloudResponse::Created { id })
    }

    /// Advances every VM to `now_ms` and answers what its guest did, in VM id order.
    pub fn poll(&mut self, now_ms: u64) -> Vec<GuestEvent> {
        let mut events = Vec::new();
        for vm in self.vms.values_mut() {
            let (tag, id) = (vm.tag.clone(), vm.id.clone());
            let elapsed = now_ms.saturating_sub(vm.since_ms);
            match vm.state {
                VmState::Pending if vm.boot == Boot::Fail && elapsed >= BOOT_TO_AGENT_MS => {
                    vm.enter(VmState::Failed, now_ms);
                    events.push(GuestEvent::BootFailed { tag, vm: id });
                }
                VmState::Pending if vm.boot != Boot::Hang && vm.boot != Boot::Fail && elapsed >= BOOT_TO_AGENT_MS => {
                    vm.state = VmState::Running;
                    vm.agent_up = true;
                    events.push(GuestEvent::AgentUp { tag: tag.clone(), vm: id.clone() });
                    if vm.boot == Boot::Normal && elapsed >= BOOT_TO_AGENT_MS + AGENT_TO_READY_MS {
                        vm.agent_ready = true;
                        events.push(GuestEvent::AgentReady { tag, vm: id });
                    }
                }
                VmState::Running
                    if vm.boot == Boot::Normal
                        && !vm.agent_ready
                        && elapsed >= BOOT_TO_AGENT_MS + AGENT_TO_READY_MS =>
                {
                    vm.agent_ready = true;
                    events.push(GuestEvent::AgentReady { tag, vm: id });
                }
                VmState::Stopping if elapsed >= STOP_MS => {
                    vm.enter(VmState::Stopped, now_ms);
                    events.push(GuestEvent::Stopped { tag, vm: id });
                }
                VmState::ShuttingDown if !vm.stuck_teardown && elapsed >= TEARDOWN_MS => {
                    vm.enter(VmState::Terminated, now_ms);
                    events.push(GuestEvent::Destroyed { tag, vm: id });
                }
                _ => {}
            }
        }
        events
    }

    /// The next time [`CloudProvider::poll`] has something to say, if any.
    pub fn next_change_ms(&self) -> Option<u64> {
        self.vms
            .values()
            .filter_map(|vm| match vm.state {
                VmState::Pending if vm.boot != Boot::Hang => Some(vm.since_ms + BOOT_TO_AGENT_MS),
                VmState::Running if vm.boot == Boot::Normal && !vm.agent_ready => {
                    Some(vm.since_ms + BOOT_TO_AGENT_MS + AGENT_TO_READY_MS)
                }
                VmState::Stopping => Some(vm.since_ms + STOP_MS),
                VmState::ShuttingDown if !vm.stuck_teardown => Some(vm.since_ms + TEARDOWN_MS),
                _ => None,
            })
            .min()
    }

    fn known_region(&self, region: &str) -> Result<u32, CloudError> {
        self.quotas.get(region).copied().ok_or_else(|| CloudError::UnknownRegion(region.to_owned()))
    }

    /// Deviation: a terminated VM leaves the list at once; EC2 keeps describing it as `terminated` for about an
    /// hour. Nothing the engine decides reads a terminated VM's row.
    fn listed<'a>(&'a self, region: &'a str) -> impl Iterator<Item = &'a Vm> + 'a {
        self.vms.values().filter(move |vm| vm.region == region && vm.state != VmState::Terminated)
    }

    fn vm_in(&mut self, id: &str, verb: &'static str, from: &[VmState]) -> Result<&mut Vm, CloudError> {
        let vm = self.vms.get_mut(id).ok_or_else(|| CloudError::NotFound(id.to_owned()))?;
        if !from.contains(&vm.state) {
            return Err(CloudError::IncorrectState { id: id.to_owned(), verb, state: vm.state.as_str() });
        }
        Ok(vm)
    }

    /// The boot a new, started or rebooted VM gets: the fault counters, first come first served.
    fn next_boot(&mut self) -> Boot {
        let counters = [
            (&mut self.faults.hang_creates, Boot::Hang),
            (&mut self.faults.fail_boots, Boot::Fail),
            (&mut self.faults.fail_module_pulls, Boot::ModulePullFails),
        ];
        for (count, boot) in counters {
            if *count > 0 {
                *count -= 1;
                return boot;
            }
        }
        Boot::Normal
    }
}

impl Vm {
    /// The guest's agent is up and heartbeating: the VM runs and its agent has started in this boot.
    pub fn agent_heartbeating(&self) -> bool {
        self.state == VmState::Running && self.agent_up
    }

    /// The guest's agent has sent `phase=ready` in this boot (its heartbeats say so from then on).
    pub fn agent_ready(&self) -> bool {
        self.agent_ready
    }

    fn enter(&mut self, state: VmState, now_ms: u64) {
        self.state = state;
        self.since_ms = now_ms;
    }

    fn boot_again(&mut self, boot: Boot, now_ms: u64) {
        self.enter(VmState::Pending, now_ms);
        self.boot = boot;
        self.agent_up = false;
        self.agent_ready = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> CloudProvider {
        let mut provider = CloudProvider::new();
        provider.add_region("region-a", 2);
        provider.add_instance_type("type-small");
        provider
    }

    fn create(provider: &mut CloudProvider, tag: &str, now_ms: u64) -> Result<String, CloudError> {
        let request = CloudRequest::Create {
            region: "region-a".into(),
            instance_type: "type-small".into(),
            name: format!("node-{tag}"),
            tag: tag.into(),
        };
        match provider.handle(request, now_ms)? {
            CloudResponse::Created { id } => Ok(id),
            other => panic!("{other:?}"),
        }
    }

    fn state(provider: &CloudProvider, id: &str) -> VmState {
        provider.vms().find(|vm| vm.id == id).unwrap().state
    }

    #[test]
    fn a_vm_boots_its_agent_comes_up_then_reports_ready() {
        let mut provider = provider();
        let id = create(&mut provider, "i-1", 0).unwrap();
        assert_eq!(state(&provider, &id), VmState::Pending);
        assert_eq!(provider.next_change_ms(), Some(BOOT_TO_AGENT_MS));
        assert!(provider.poll(BOOT_TO_AGENT_MS - 1).is_empty());
        assert_eq!(provider.poll(BOOT_TO_AGENT_MS), vec![GuestEvent::AgentUp { tag: "i-1".into(), vm: id.clone() }]);
        assert_eq!(
            provider.poll(BOOT_TO_AGENT_MS + AGENT_TO_READY_MS),
            vec![GuestEvent::AgentReady { tag: "i-1".into(), vm: id.clone() }]
        );
        assert_eq!(provider.next_change_ms(), None);
    }

    #[test]
    fn the_quota_counts_live_vms_and_a_refusal_fault_refuses_below_it() {
        let mut provider = provider();
        provider.refuse_quota(1);
        let refused = create(&mut provider, "i-1", 0).unwrap_err();
        assert_eq!(refused.status(), 400);
        assert!(refused.to_string().starts_with("InstanceLimitExceeded"), "{refused}");
        let a = create(&mut provider, "i-1", 0).unwrap();
        create(&mut provider, "i-2", 0).unwrap();
        assert!(matches!(create(&mut provider, "i-3", 0), Err(CloudError::QuotaExceeded { limit: 2, .. })));
        provider.handle(CloudRequest::Destroy { id: a.clone() }, 1).unwrap();
        assert!(create(&mut provider, "i-3", 1).is_err(), "shutting-down still counts");
        provider.poll(1 + TEARDOWN_MS);
        assert!(create(&mut provider, "i-3", 1 + TEARDOWN_MS).is_ok());
    }

    #[test]
    fn the_provider_refuses_what_the_real_one_refuses() {
        let mut provider = provider();
        let unknown_type = CloudRequest::Create {
            region: "region-a".into(),
            instance_type: "type-huge".into(),
            name: "n".into(),
            tag: "t".into(),
        };
        assert_eq!(provider.handle(unknown_type, 0), Err(CloudError::UnknownInstanceType("type-huge".into())));
        assert!(matches!(
            provider.handle(CloudRequest::List { region: "region-z".into() }, 0),
            Err(CloudError::UnknownRegion(_))
        ));
        let id = create(&mut provider, "i-1", 0).unwrap();
        let start = provider.handle(CloudRequest::Start { id: id.clone() }, 1).unwrap_err();
        assert_eq!(start.status(), 409);
        assert_eq!(provider.handle(CloudRequest::Reboot { id: "vm-nope".into() }, 1).unwrap_err().status(), 404);
    }

    #[test]
    fn stop_start_and_reboot_walk_the_guest_through_a_new_boot() {
        let mut provider = provider();
        let id = create(&mut provider, "i-1", 0).unwrap();
        provider.poll(BOOT_TO_AGENT_MS + AGENT_TO_READY_MS);
        provider.handle(CloudRequest::Stop { id: id.clone(), hard: false }, 100_000).unwrap();
        assert_eq!(provider.poll(100_000 + STOP_MS), vec![GuestEvent::Stopped { tag: "i-1".into(), vm: id.clone() }]);
        provider.handle(CloudRequest::Start { id: id.clone() }, 200_000).unwrap();
        let events = provider.poll(200_000 + BOOT_TO_AGENT_MS + AGENT_TO_READY_MS);
        assert_eq!(events.len(), 2, "up and ready again: {events:?}");
        provider.handle(CloudRequest::Reboot { id: id.clone() }, 400_000).unwrap();
        assert_eq!(state(&provider, &id), VmState::Pending);
    }

    #[test]
    fn each_boot_fault_lands_on_one_vm() {
        let mut provider = provider();
        provider.add_region("region-b", 10);
        provider.hang_creates(1);
        provider.fail_boots(1);
        provider.fail_module_pulls(1);
        let tags = ["hang", "fail", "pull", "fine"];
        let ids: Vec<String> = tags
            .iter()
            .map(|tag| {
                let request = CloudRequest::Create {
                    region: "region-b".into(),
                    instance_type: "type-small".into(),
                    name: (*tag).into(),
                    tag: (*tag).into(),
                };
                match provider.handle(request, 0).unwrap() {
                    CloudResponse::Created { id } => id,
                    other => panic!("{other:?}"),
                }
            })
            .collect();
        let events = provider.poll(10 * 60_000);
        let states: Vec<VmState> = ids.iter().map(|id| state(&provider, id)).collect();
        assert_eq!(states, vec![VmState::Pending, VmState::Failed, VmState::Running, VmState::Running]);
        let ready: Vec<&GuestEvent> = events.iter().filter(|e| matches!(e, GuestEvent::AgentReady { .. })).collect();
        assert_eq!(ready, vec![&GuestEvent::AgentReady { tag: "fine".into(), vm: ids[3].clone() }]);
        assert!(events.contains(&GuestEvent::AgentUp { tag: "pull".into(), vm: ids[2].clone() }));
        assert!(events.contains(&GuestEvent::BootFailed { tag: "fail".into(), vm: ids[1].clone() }));
    }

    #[test]
    fn a_stuck_teardown_stays_shutting_down_and_listed_and_a_stopped_region_lists_nothing() {
        let mut provider = provider();
        let id = create(&mut provider, "i-1", 0).unwrap();
        provider.stick_teardowns(1);
        provider.handle(CloudRequest::Destroy { id: id.clone() }, 1).unwrap();
        provider.handle(CloudRequest::Destroy { id: id.clone() }, 2).unwrap();
        provider.poll(60 * 60_000);
        assert_eq!(state(&provider, &id), VmState::ShuttingDown);
        let listed = provider.handle(CloudRequest::FindByTag { region: "region-a".into(), tag: "i-1".into() }, 3);
        assert!(matches!(listed, Ok(CloudResponse::Vms { vms }) if vms.len() == 1));
        provider.stop_listing("region-a");
        assert_eq!(provider.handle(CloudRequest::List { region: "region-a".into() }, 4).unwrap_err().status(), 503);
        provider.resume_listing("region-a");
        assert!(provider.handle(CloudRequest::List { region: "region-a".into() }, 5).is_ok());
        assert_eq!(provider.live_with_tag("i-1").count(), 1);
        // The console's reap finishes the stuck teardown; a VM that is not stuck is no reap's.
        assert!(!provider.reap("vm-nope"));
        assert!(provider.reap(&id));
        assert!(!provider.reap(&id), "once");
        assert_eq!(provider.poll(60 * 60_000 + 1), vec![GuestEvent::Destroyed { tag: "i-1".into(), vm: id.clone() }]);
        assert_eq!(provider.live_with_tag("i-1").count(), 0);
    }

    #[test]
    fn boot_faults_bite_a_create_and_a_start_boots_normally_with_its_agent_heartbeating() {
        let mut provider = provider();
        let id = create(&mut provider, "i-1", 0).unwrap();
        provider.poll(BOOT_TO_AGENT_MS + AGENT_TO_READY_MS);
        let vm = |provider: &CloudProvider| provider.vms().find(|vm| vm.id == id).unwrap().clone();
        assert!(vm(&provider).agent_heartbeating() && vm(&provider).agent_ready());
        provider.handle(CloudRequest::Stop { id: id.clone(), hard: false }, 200_000).unwrap();
        provider.poll(200_000 + STOP_MS);
        assert!(!vm(&provider).agent_heartbeating());
        provider.hang_creates(1);
        provider.handle(CloudRequest::Start { id: id.clone() }, 300_000).unwrap();
        provider.poll(300_000 + BOOT_TO_AGENT_MS + AGENT_TO_READY_MS);
        assert!(vm(&provider).agent_ready(), "the start booted normally");
        let hung = create(&mut provider, "i-2", 400_000).unwrap();
        provider.poll(400_000 + 60 * 60_000);
        assert_eq!(state(&provider, &hung), VmState::Pending, "the fault waited for a create");
    }
}
