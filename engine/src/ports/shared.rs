//! An adapter several holders share is the adapter: each port is implemented for `Rc<T>` by delegation, so a
//! deployment that keeps one authenticated client (a hub session, a MAAS client with its nonce stream, one journal
//! connection) hands the controller a handle to it wherever a port wants an owned adapter.

use std::future::Future;
use std::rc::Rc;

use crate::matrix::NodeState;
use crate::ports::fleet::{Fleet, FleetError, FleetRecord, NodeTask, TaskOutcome};
use crate::ports::site::{
    Disk, DnsAnswer, Interface, MaasApi, MaasError, MaasEvent, Machine, NewMachine, PowerCredential, PowerState,
    RegionService, Resolver, SiteConfig, SiteSecrets, Subnet,
};
use crate::ports::{
    AgentReferences, Endpoint, HeartbeatSnapshot, Hub, HubError, IssuedCredential, Journal, JournalError, LockGrant,
    RotationStatus, SecretsError, Ssh, SshError, SshRequest, SshResponse, TransportError,
};
use crate::secret::Secret;

impl<T: MaasApi> MaasApi for Rc<T> {
    fn machines(&self) -> impl Future<Output = Result<Vec<Machine>, MaasError>> {
        (**self).machines()
    }
    fn machines_with_mac(&self, mac: &str) -> impl Future<Output = Result<Vec<Machine>, MaasError>> {
        (**self).machines_with_mac(mac)
    }
    fn new_machines(&self) -> impl Future<Output = Result<Vec<Machine>, MaasError>> {
        (**self).new_machines()
    }
    fn machine(&self, system_id: &str) -> impl Future<Output = Result<Machine, MaasError>> {
        (**self).machine(system_id)
    }
    fn create_machine(&self, new: &NewMachine) -> impl Future<Output = Result<Machine, MaasError>> {
        (**self).create_machine(new)
    }
    fn commission(&self, system_id: &str) -> impl Future<Output = Result<Machine, MaasError>> {
        (**self).commission(system_id)
    }
    fn events(&self, system_id: &str, after: Option<u64>) -> impl Future<Output = Result<Vec<MaasEvent>, MaasError>> {
        (**self).events(system_id, after)
    }
    fn disks(&self, system_id: &str) -> impl Future<Output = Result<Vec<Disk>, MaasError>> {
        (**self).disks(system_id)
    }
    fn set_boot_disk(&self, system_id: &str, disk_id: u64) -> impl Future<Output = Result<(), MaasError>> {
        (**self).set_boot_disk(system_id, disk_id)
    }
    fn interfaces(&self, system_id: &str) -> impl Future<Output = Result<Vec<Interface>, MaasError>> {
        (**self).interfaces(system_id)
    }
    fn subnets(&self) -> impl Future<Output = Result<Vec<Subnet>, MaasError>> {
        (**self).subnets()
    }
    fn region_services(&self) -> impl Future<Output = Result<Vec<RegionService>, MaasError>> {
        (**self).region_services()
    }
    fn link_subnet_auto(
        &self,
        system_id: &str,
        interface_id: u64,
        subnet_id: u64,
    ) -> impl Future<Output = Result<(), MaasError>> {
        (**self).link_subnet_auto(system_id, interface_id, subnet_id)
    }
    fn disconnect_interface(&self, system_id: &str, interface_id: u64) -> impl Future<Output = Result<(), MaasError>> {
        (**self).disconnect_interface(system_id, interface_id)
    }
    fn deploy(
        &self,
        system_id: &str,
        user_data: &Secret,
        enable_hw_sync: bool,
    ) -> impl Future<Output = Result<Machine, MaasError>> {
        (**self).deploy(system_id, user_data, enable_hw_sync)
    }
    fn release(&self, system_id: &str, erase: bool) -> impl Future<Output = Result<Machine, MaasError>> {
        (**self).release(system_id, erase)
    }
    fn abort(&self, system_id: &str) -> impl Future<Output = Result<Machine, MaasError>> {
        (**self).abort(system_id)
    }
    fn mark_fixed(&self, system_id: &str) -> impl Future<Output = Result<Machine, MaasError>> {
        (**self).mark_fixed(system_id)
    }
    fn power_off(&self, system_id: &str) -> impl Future<Output = Result<(), MaasError>> {
        (**self).power_off(system_id)
    }
    fn power_on(&self, system_id: &str) -> impl Future<Output = Result<(), MaasError>> {
        (**self).power_on(system_id)
    }
    fn power_state(&self, system_id: &str) -> impl Future<Output = Result<PowerState, MaasError>> {
        (**self).power_state(system_id)
    }
    fn delete_machine(&self, system_id: &str) -> impl Future<Output = Result<(), MaasError>> {
        (**self).delete_machine(system_id)
    }
}

impl<T: Resolver> Resolver for Rc<T> {
    fn resolve(&self, name: &str) -> impl Future<Output = Result<DnsAnswer, TransportError>> {
        (**self).resolve(name)
    }
}

impl<T: SiteSecrets> SiteSecrets for Rc<T> {
    fn site_config(&self) -> impl Future<Output = Result<SiteConfig, SecretsError>> {
        (**self).site_config()
    }
    fn power_credential(&self, node: &str) -> impl Future<Output = Result<PowerCredential, SecretsError>> {
        (**self).power_credential(node)
    }
    fn bootstrap_token(&self, node: &str, ttl_ms: u64) -> impl Future<Output = Result<Secret, SecretsError>> {
        (**self).bootstrap_token(node, ttl_ms)
    }
    fn node_secrets_capabilities(&self) -> impl Future<Output = Result<Vec<String>, SecretsError>> {
        (**self).node_secrets_capabilities()
    }
    fn delete_node_secrets(&self, node: &str) -> impl Future<Output = Result<u32, SecretsError>> {
        (**self).delete_node_secrets(node)
    }
    fn revoke_bootstrap_tokens(&self, node: &str) -> impl Future<Output = Result<u32, SecretsError>> {
        (**self).revoke_bootstrap_tokens(node)
    }
}

impl<T: Fleet> Fleet for Rc<T> {
    fn record(&self, node: &str) -> impl Future<Output = Result<Option<FleetRecord>, FleetError>> {
        (**self).record(node)
    }
    fn transition(&self, node: &str, from: NodeState, to: NodeState) -> impl Future<Output = Result<(), FleetError>> {
        (**self).transition(node, from, to)
    }
    fn release_allocations(&self, node: &str, force: bool) -> impl Future<Output = Result<Vec<String>, FleetError>> {
        (**self).release_allocations(node, force)
    }
    fn run_task(
        &self,
        node: &str,
        task: NodeTask,
        operation_id: &str,
    ) -> impl Future<Output = Result<TaskOutcome, FleetError>> {
        (**self).run_task(node, task, operation_id)
    }
    fn remove_record(&self, node: &str) -> impl Future<Output = Result<(), FleetError>> {
        (**self).remove_record(node)
    }
}

impl<T: Hub> Hub for Rc<T> {
    fn authenticate(&self, credential: &Secret) -> impl Future<Output = Result<u64, HubError>> {
        (**self).authenticate(credential)
    }
    fn acquire_lock(&self, holder: &str, lease_ms: u64) -> impl Future<Output = Result<LockGrant, HubError>> {
        (**self).acquire_lock(holder, lease_ms)
    }
    fn supersede_lock(&self, holder: &str, fence: u64, lease_ms: u64) -> impl Future<Output = Result<u64, HubError>> {
        (**self).supersede_lock(holder, fence, lease_ms)
    }
    fn renew_lock(&self, fence: u64, lease_ms: u64) -> impl Future<Output = Result<(), HubError>> {
        (**self).renew_lock(fence, lease_ms)
    }
    fn release_lock(&self, fence: u64) -> impl Future<Output = Result<bool, HubError>> {
        (**self).release_lock(fence)
    }
    fn read_holds(&self) -> impl Future<Output = Result<std::collections::BTreeMap<String, Vec<String>>, HubError>> {
        (**self).read_holds()
    }
    fn read_heartbeats(&self) -> impl Future<Output = Result<HeartbeatSnapshot, HubError>> {
        (**self).read_heartbeats()
    }
    fn place_hold(&self, agent: &str, owner: &str) -> impl Future<Output = Result<(), HubError>> {
        (**self).place_hold(agent, owner)
    }
    fn release_hold(&self, agent: &str, owner: &str) -> impl Future<Output = Result<bool, HubError>> {
        (**self).release_hold(agent, owner)
    }
    fn open_epoch(&self, members: &[String]) -> impl Future<Output = Result<u64, HubError>> {
        (**self).open_epoch(members)
    }
    fn close_epoch(&self, epoch: u64, untouched: &[String]) -> impl Future<Output = Result<bool, HubError>> {
        (**self).close_epoch(epoch, untouched)
    }
    fn route_bundle(&self) -> impl Future<Output = Result<String, HubError>> {
        (**self).route_bundle()
    }
    fn begin_rotation(&self, agent: &str, rotation: &str) -> impl Future<Output = Result<IssuedCredential, HubError>> {
        (**self).begin_rotation(agent, rotation)
    }
    fn rotation_status(
        &self,
        agent: &str,
        rotation: &str,
    ) -> impl Future<Output = Result<Option<RotationStatus>, HubError>> {
        (**self).rotation_status(agent, rotation)
    }
    fn commit_rotation(&self, agent: &str, rotation: &str) -> impl Future<Output = Result<bool, HubError>> {
        (**self).commit_rotation(agent, rotation)
    }
    fn abort_rotation(&self, agent: &str, rotation: &str) -> impl Future<Output = Result<bool, HubError>> {
        (**self).abort_rotation(agent, rotation)
    }
    fn agent_references(&self, agent: &str) -> impl Future<Output = Result<AgentReferences, HubError>> {
        (**self).agent_references(agent)
    }
    fn resurrect_agent(&self, agent: &str, epoch: u64) -> impl Future<Output = Result<bool, HubError>> {
        (**self).resurrect_agent(agent, epoch)
    }
}

impl<T: Journal> Journal for Rc<T> {
    fn append(&self, record: &str) -> impl Future<Output = Result<(), JournalError>> {
        (**self).append(record)
    }
    fn replay(&self) -> impl Future<Output = Result<Vec<String>, JournalError>> {
        (**self).replay()
    }
    fn replay_subject(&self, subject: &str) -> impl Future<Output = Result<Vec<String>, JournalError>> {
        (**self).replay_subject(subject)
    }
}

impl<T: Ssh> Ssh for Rc<T> {
    fn run(&self, endpoint: &Endpoint, request: SshRequest) -> impl Future<Output = Result<SshResponse, SshError>> {
        (**self).run(endpoint, request)
    }
}
