//! The instance controller's driver: it journals the decisions of [`Inventory`] and awaits the [`Provider`] port.
//!
//! Every record is appended to the journal before it is applied, so what the in-memory rows say is what a
//! restarted controller replays. The provider is called only after the records that announce the call are durable:
//! a controller killed between the two finds the intent in the journal and finishes it on [`InstanceDriver::resume`]
//! — a pending create is looked up by its tag before it is made again (never a second VM), a committed terminate
//! re-sends only the destroy and the cascade (never a second terminate), and holds and cordons are rows like any other
//! (never lost).

use super::approval::Governance;
use super::control::{Control, Controlled, ProviderCall};
use super::inventory::{Backing, Decided, Instance, InstanceRecord, Inventory, InventoryError, SUBJECT};
use super::metal::MetalCall;
use super::operator::{AuditOutcome, OperatorStep};
use super::pool::Released;
use super::provision::{ProviderStep, Provisioned};
use super::state::{InstanceEvent, InstanceState};
use super::sync::{ListedVm, SyncReport};
use crate::ports::bare_metal::{BareMetal, MetalPower, MetalStatus};
use crate::ports::platform::{PlatformError, PlatformRows};
use crate::ports::provider::{CreateVm, Provider, ProviderError};
use crate::ports::{Journal, JournalError};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("the journal's instance records do not fold: {0}")]
    Inventory(#[from] InventoryError),
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Platform(#[from] PlatformError),
    /// The decision refused the operation (its typed refusal, rendered); nothing was written.
    #[error("refused: {0}")]
    Refused(String),
}

/// Where a provisioning instance got to in one pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The VM exists (created now, adopted, or already known) and the instance is provisioning or beyond.
    Created { cloud_instance_id: String, adopted: bool },
    /// The provider refused for now (quota, unavailable, no answer): the row stays pending; retry with the same
    /// operation id. The error says why.
    Deferred(ProviderError),
    /// The provider refused for good: the instance is in error.
    Errored(ProviderError),
    /// A bare-metal row followed its machine's workflows (`super::metal`): where the machine got to.
    Metal(MetalStatus),
    /// Nothing to do: the instance is not pending.
    Nothing,
}

/// How a stuck provisioning instance was cleared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleared {
    /// The provider no longer listed its VM: the sync mapped the row to terminated.
    BySync,
    /// Cancelled into error, then terminated (the VM destroyed, by id or by tag).
    Terminated,
    /// Cancelled into error; the terminate was refused by an ops hold, so the row rests in error with its VM until
    /// the hold's owner lifts it and terminates.
    ErroredUnderHold,
}

/// What the hub heard of an instance's guest, for [`InstanceDriver::heard`].
pub use crate::ports::platform::Heard;

/// The controller: the rows as the journal says, and the ports — the cloud provider, the bare-metal site, the
/// platform's rows.
pub struct InstanceDriver<'a, J, P, M, R> {
    journal: &'a J,
    provider: &'a P,
    metal: &'a M,
    platform: &'a R,
    inventory: Inventory,
}

impl<'a, J: Journal, P: Provider, M: BareMetal, R: PlatformRows> InstanceDriver<'a, J, P, M, R> {
    /// A controller starting (or restarting): the rows are the journal's instance records, folded.
    pub async fn open(
        journal: &'a J,
        provider: &'a P,
        metal: &'a M,
        platform: &'a R,
    ) -> Result<InstanceDriver<'a, J, P, M, R>, DriverError> {
        let lines = journal.replay_subject(SUBJECT).await?;
        let inventory = Inventory::replay(lines.iter().map(String::as_str))?;
        Ok(InstanceDriver { journal, provider, metal, platform, inventory })
    }

    pub fn inventory(&self) -> &Inventory {
        &self.inventory
    }

    /// Journals and applies a decision's records, in order; a failed append stops before the record is applied.
    pub async fn commit<T>(&mut self, decided: Decided<T>) -> Result<T, DriverError> {
        for record in &decided.records {
            self.journal.append(&record.to_line()).await?;
            self.inventory.apply(record)?;
        }
        Ok(decided.outcome)
    }

    /// `provision` and, for a new or reused row, one pass of [`InstanceDriver::advance`].
    pub async fn provision(
        &mut self,
        node: &str,
        backing: Backing,
        operation_id: Option<&str>,
        now_ms: u64,
    ) -> Result<(Provisioned, Progress), DriverError> {
        let decided = self
            .inventory
            .provision(node, backing, operation_id, now_ms)
            .map_err(|refusal| DriverError::Refused(refusal.to_string()))?;
        let provisioned = self.commit(decided).await?;
        let progress = self.advance(provisioned.instance(), now_ms).await?;
        Ok((provisioned, progress))
    }

    /// Moves a pending cloud instance to its VM: the provider is asked for a VM with the instance's tag first, and
    /// only when it lists none is one created. `mark_provisioning` follows the provider's acceptance, so a quota
    /// refusal leaves the row pending (the runbook's "pending > 5 min: provider quota"). A bare-metal row asks for
    /// its machine's onboarding instead ([`InstanceDriver::follow_metal`]).
    pub async fn advance(&mut self, instance_id: &str, now_ms: u64) -> Result<Progress, DriverError> {
        let instance = self.inventory.instance(instance_id)?.clone();
        let (region, instance_type) = match &instance.backing {
            Backing::Cloud { region, instance_type } => (region, instance_type),
            Backing::BareMetal { .. } if instance.state == InstanceState::Pending => {
                return self.follow_metal(instance_id, now_ms).await;
            }
            Backing::BareMetal { .. } => return Ok(Progress::Nothing),
        };
        if instance.state != InstanceState::Pending {
            return Ok(Progress::Nothing);
        }
        let tagged = match self.provider.find_by_tag(region, &instance.id).await {
            Ok(found) => found.into_iter().next().map(|vm| vm.cloud_instance_id),
            Err(error) => return Ok(Progress::Deferred(error)),
        };
        let (cloud_instance_id, adopted) = match self.inventory.provider_step(&instance, tagged.as_deref()) {
            ProviderStep::Created { cloud_instance_id } => (cloud_instance_id, false),
            ProviderStep::Adopt { cloud_instance_id } => (cloud_instance_id, true),
            ProviderStep::Create { name, tag, .. } => {
                let request = CreateVm { region: region.clone(), instance_type: instance_type.clone(), name, tag };
                match self.provider.create(&request).await {
                    Ok(id) => (id, false),
                    Err(error @ ProviderError::Rejected(_)) => {
                        let failed = self.inventory.handle_failed(instance_id, now_ms);
                        self.commit(failed.map_err(|e| DriverError::Refused(e.to_string()))?).await?;
                        return Ok(Progress::Errored(error));
                    }
                    Err(error) => return Ok(Progress::Deferred(error)),
                }
            }
        };
        if instance.cloud_instance_id.is_none() {
            let created = self.inventory.handle_created(instance_id, &cloud_instance_id);
            self.commit(created).await?;
        }
        let begun = self.inventory.begin_provisioning(instance_id, now_ms);
        self.commit(begun.map_err(|e| DriverError::Refused(e.to_string()))?).await?;
        Ok(Progress::Created { cloud_instance_id, adopted })
    }

    /// Applies what the hub heard of an instance's guest. A report the rows cannot take (a boot failure of a row
    /// already in error, a stop of a row not stopping) writes nothing and is answered as the refusal it is.
    pub async fn heard(&mut self, instance_id: &str, heard: Heard, now_ms: u64) -> Result<(), DriverError> {
        let decided = match heard {
            Heard::Heartbeat(phase) => self.inventory.handle_heartbeat(instance_id, phase, now_ms),
            Heard::BootFailed => self.inventory.handle_failed(instance_id, now_ms).map_err(refused)?,
            Heard::Stopped => self.inventory.handle_stopped(instance_id, now_ms).map_err(refused)?,
        };
        self.commit(decided).await
    }

    /// Start, stop, reboot or terminate through the choke point; the provider call follows the durable records.
    /// A terminate's destroy is then confirmed only once the provider no longer lists the VM, and its cascade
    /// (certificates revoked, bootstrap tokens expired, peers removed) runs and is journaled.
    pub async fn control(
        &mut self,
        instance_id: &str,
        action: Control,
        force: bool,
        now_ms: u64,
    ) -> Result<Controlled, DriverError> {
        let decided = self
            .inventory
            .control(instance_id, action, force, now_ms)
            .map_err(|refusal| DriverError::Refused(refusal.to_string()))?;
        let controlled = self.commit(decided).await?;
        match &controlled.provider_call {
            ProviderCall::Destroy { .. } => {
                self.finish_destroy(instance_id, now_ms).await?;
                self.cascade(instance_id).await?;
            }
            call => self.dispatch(call).await?,
        }
        Ok(controlled)
    }

    /// An operator step, audited (`super::operator`): the audit record and the step's records are journaled, and
    /// the provider calls their state changes announce follow — a start, stop or reboot dispatched, a terminate's
    /// destroy and cascade finished. A refused step journals its audit record only.
    pub async fn operate(
        &mut self,
        actor: &str,
        step: OperatorStep,
        governance: Governance,
        now_ms: u64,
    ) -> Result<AuditOutcome, DriverError> {
        let hard = matches!(step, OperatorStep::Control { action: Control::Stop, force: true, .. });
        let decided = self.inventory.operate(actor, step, governance, now_ms);
        let moves: Vec<(String, InstanceEvent)> = decided
            .records
            .iter()
            .filter_map(|record| match record {
                InstanceRecord::Transition { instance, event, .. } => Some((instance.clone(), *event)),
                _ => None,
            })
            .collect();
        let outcome = self.commit(decided).await?;
        for (instance_id, event) in moves {
            let instance = self.inventory.instance(&instance_id)?;
            let (backing, cloud_instance_id) = (instance.backing.clone(), instance.cloud_instance_id.clone());
            match event {
                InstanceEvent::Start => self.dispatch(&ProviderCall::Start { backing, cloud_instance_id }).await?,
                InstanceEvent::Stop => self.dispatch(&ProviderCall::Stop { backing, cloud_instance_id, hard }).await?,
                InstanceEvent::Reboot => self.dispatch(&ProviderCall::Reboot { backing, cloud_instance_id }).await?,
                InstanceEvent::Terminate => {
                    self.finish_destroy(&instance_id, now_ms).await?;
                    self.cascade(&instance_id).await?;
                }
                _ => {}
            }
        }
        Ok(outcome)
    }

    /// The replenisher's pass over one pool (every 60 s): ready members past the pool's TTL are fenced and
    /// terminated (their destroy and cascade finished), then warming members are minted up to the target and their
    /// VMs created. Returns the minted instance ids.
    pub async fn replenish(&mut self, pool_id: &str, now_ms: u64) -> Result<Vec<String>, DriverError> {
        let stale = self.inventory.recycle_stale(pool_id, now_ms).map_err(refused)?;
        for id in self.commit(stale).await? {
            self.finish_destroy(&id, now_ms).await?;
            self.cascade(&id).await?;
        }
        let minted = self.commit(self.inventory.replenish(pool_id, now_ms).map_err(refused)?).await?;
        for id in &minted {
            self.advance(id, now_ms).await?;
        }
        Ok(minted)
    }

    /// The allocator: claims one ready member of the pool (a conditional write) and answers its instance id.
    pub async fn acquire(&mut self, pool_id: &str) -> Result<String, DriverError> {
        let decided = self.inventory.acquire(pool_id).map_err(refused)?;
        self.commit(decided).await
    }

    /// A consumer returns a claimed member; a recycled one is terminated, its destroy and cascade finished.
    pub async fn release(&mut self, instance_id: &str, now_ms: u64) -> Result<Released, DriverError> {
        let decided = self.inventory.release(instance_id, now_ms).map_err(refused)?;
        let released = self.commit(decided).await?;
        if released == Released::Recycled {
            self.finish_destroy(instance_id, now_ms).await?;
            self.cascade(instance_id).await?;
        }
        Ok(released)
    }

    /// After a restart (and on every pass): every pending cloud row is advanced (adopting a VM whose create answer
    /// was lost), every committed terminate's destroy and cascade are finished, and a committed stop or start whose
    /// call did not reach the provider (the controller died or was cut off between the commit and the call) is sent
    /// again — only when the provider's VM shows it has not happened. A bare-metal row in flight (pending,
    /// provisioning, stopping, starting, a destroy owed) follows its machine ([`InstanceDriver::follow_metal`]).
    /// Returns the instances it touched, in id order.
    pub async fn resume(&mut self, now_ms: u64) -> Result<Vec<String>, DriverError> {
        let mut touched = Vec::new();
        let ids: Vec<String> = self.inventory.instances.keys().cloned().collect();
        for id in ids {
            let instance = self.inventory.instance(&id)?;
            if matches!(instance.backing, Backing::BareMetal { .. }) {
                let in_flight = crate::instance::metal::metal_owed(instance);
                if in_flight {
                    self.follow_metal(&id, now_ms).await?;
                }
                if in_flight || owes_cascade(self.inventory.instance(&id)?) {
                    self.cascade(&id).await?;
                    touched.push(id);
                }
            } else if instance.state == InstanceState::Pending {
                self.advance(&id, now_ms).await?;
                touched.push(id);
            } else if matches!(instance.state, InstanceState::Stopping | InstanceState::Starting) {
                if self.redispatch(&id).await? {
                    touched.push(id);
                }
            } else if instance.destroy_pending_since_ms.is_some() || owes_cascade(instance) {
                if instance.destroy_pending_since_ms.is_some() {
                    self.finish_destroy(&id, now_ms).await?;
                }
                self.cascade(&id).await?;
                touched.push(id);
            }
        }
        Ok(touched)
    }

    /// The runbook's "Clearing a stuck provisioning instance": cancel the provision task, reconcile the region
    /// with the provider (a VM it no longer lists maps the row to terminated), otherwise land the row in error and
    /// terminate it, which destroys whatever VM carries its tag. A region whose listing fails is not reconciled:
    /// the terminate's destroy by tag releases the VM all the same. Re-provision afterwards with the same operation
    /// id (a fresh row carrying it) or a fresh one.
    pub async fn clear_stuck_provisioning(&mut self, instance_id: &str, now_ms: u64) -> Result<Cleared, DriverError> {
        let instance = self.inventory.instance(instance_id)?.clone();
        if !matches!(instance.state, InstanceState::Pending | InstanceState::Provisioning) {
            return Err(DriverError::Refused(format!(
                "instance {instance_id} is {}, not stuck provisioning",
                instance.state
            )));
        }
        if let Backing::Cloud { region, .. } = &instance.backing {
            match self.sync(region, now_ms).await {
                Ok(_) | Err(DriverError::Provider(_)) => {}
                Err(error) => return Err(error),
            }
            if self.inventory.instance(instance_id)?.state == InstanceState::Terminated {
                self.cascade(instance_id).await?;
                return Ok(Cleared::BySync);
            }
        }
        let cancelled = self.inventory.cancel_provisioning(instance_id, now_ms);
        self.commit(cancelled.map_err(|e| DriverError::Refused(e.to_string()))?).await?;
        if self.inventory.instance(instance_id)?.hold.is_some() {
            return Ok(Cleared::ErroredUnderHold);
        }
        self.control(instance_id, Control::Terminate, false, now_ms).await?;
        Ok(Cleared::Terminated)
    }

    /// The hourly sync of one region: a failed listing writes nothing (and so, after 3 hours, the region is stale).
    pub async fn sync(&mut self, region: &str, now_ms: u64) -> Result<SyncReport, DriverError> {
        let listed: Vec<ListedVm> = self
            .provider
            .list(region)
            .await?
            .into_iter()
            .map(|vm| ListedVm { cloud_instance_id: vm.cloud_instance_id, tag: vm.tag })
            .collect();
        let decided = self.inventory.sync_region(region, &listed, now_ms);
        self.commit(decided).await
    }

    /// Sends a stopping row's stop again while its VM still runs, and a starting row's start while its VM is still
    /// stopped: the call the commit announced never took effect. Answers whether it sent one.
    async fn redispatch(&mut self, instance_id: &str) -> Result<bool, DriverError> {
        let instance = self.inventory.instance(instance_id)?.clone();
        let (Backing::Cloud { region, .. }, Some(cloud_instance_id)) = (&instance.backing, &instance.cloud_instance_id)
        else {
            return Ok(false);
        };
        let vms = self.provider.find_by_tag(region, instance_id).await?;
        let Some(vm) = vms.iter().find(|vm| &vm.cloud_instance_id == cloud_instance_id) else { return Ok(false) };
        let sent = match (instance.state, vm.state.as_str()) {
            (InstanceState::Stopping, "running" | "pending") => self.provider.stop(cloud_instance_id, false).await,
            (InstanceState::Starting, "stopped") => self.provider.start(cloud_instance_id).await,
            _ => return Ok(false),
        };
        match sent {
            Ok(()) | Err(ProviderError::WrongState(_)) => Ok(true),
            Err(error) => Err(error.into()),
        }
    }

    /// One step of a bare-metal row after its machine (`super::metal`): where the machine's workflows got to is
    /// read, the request the step names is made (onboard, decommission, power), and the step's records follow it.
    /// A status or a request that fails writes nothing: the row waits for the next pass (`Deferred`).
    pub async fn follow_metal(&mut self, instance_id: &str, now_ms: u64) -> Result<Progress, DriverError> {
        let instance = self.inventory.instance(instance_id)?.clone();
        let Backing::BareMetal { mac } = &instance.backing else {
            return Ok(Progress::Nothing);
        };
        let status = match self.metal.status(mac).await {
            Ok(status) => status,
            Err(error) => return Ok(Progress::Deferred(error)),
        };
        // The row holds the machine's system id once its onboarding named it: power is asked and sent by it.
        let system_id = instance.cloud_instance_id.as_deref();
        let powered = if matches!(instance.state, InstanceState::Stopping | InstanceState::Starting) {
            match self.metal.powered(mac, system_id).await {
                Ok(powered) => Some(powered),
                Err(error) => return Ok(Progress::Deferred(error)),
            }
        } else {
            None
        };
        let step = self.inventory.metal_step(&instance, &status, powered, now_ms);
        if let Some(call) = step.call {
            let made = match call {
                MetalCall::Onboard => self.metal.onboard(mac, instance_id).await,
                MetalCall::Decommission => self.metal.decommission(mac).await,
                MetalCall::Power(action) => self.metal.power(mac, system_id, action).await,
            };
            if let Err(error) = made {
                return Ok(Progress::Deferred(error));
            }
        }
        self.commit(step.then).await?;
        Ok(Progress::Metal(status))
    }

    /// Sends a committed terminate's destroy (by id, or every VM carrying the tag when the create's answer never
    /// came) and confirms it once the provider lists no VM with the tag. Idempotent: a VM already gone is done.
    /// A bare-metal row's destroy is its machine's decommission, confirmed once the workflow completed.
    async fn finish_destroy(&mut self, instance_id: &str, now_ms: u64) -> Result<(), DriverError> {
        let instance = self.inventory.instance(instance_id)?.clone();
        let region = match &instance.backing {
            Backing::Cloud { region, .. } => region,
            Backing::BareMetal { .. } => {
                self.follow_metal(instance_id, now_ms).await?;
                return Ok(());
            }
        };
        let mut ids: Vec<String> = instance.cloud_instance_id.iter().cloned().collect();
        for vm in self.provider.find_by_tag(region, instance_id).await? {
            if !ids.contains(&vm.cloud_instance_id) {
                ids.push(vm.cloud_instance_id);
            }
        }
        for id in &ids {
            match self.provider.destroy(id).await {
                Ok(()) | Err(ProviderError::NotFound(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        if self.provider.find_by_tag(region, instance_id).await?.is_empty() {
            let confirmed = self.inventory.handle_destroyed(instance_id);
            self.commit(confirmed).await?;
        }
        Ok(())
    }

    /// The terminate cascade, once: each call is idempotent, so a controller killed part-way repeats it harmlessly
    /// and the `cascaded` record is written only when all three are done.
    async fn cascade(&mut self, instance_id: &str) -> Result<(), DriverError> {
        if !owes_cascade(self.inventory.instance(instance_id)?) {
            return Ok(());
        }
        let certificates_revoked = self.platform.revoke_certificates(instance_id).await?;
        let bootstrap_tokens_expired = self.platform.expire_bootstrap_tokens(instance_id).await?;
        let peers_removed = self.platform.remove_peers(instance_id).await?;
        let record = InstanceRecord::Cascaded {
            instance: instance_id.to_owned(),
            certificates_revoked,
            bootstrap_tokens_expired,
            peers_removed,
        };
        self.commit(Decided::new(vec![record], ())).await
    }

    async fn dispatch(&self, call: &ProviderCall) -> Result<(), DriverError> {
        let (ProviderCall::Start { backing, cloud_instance_id, .. }
        | ProviderCall::Stop { backing, cloud_instance_id, .. }
        | ProviderCall::Reboot { backing, cloud_instance_id, .. }) = call
        else {
            return Ok(());
        };
        // A bare-metal row's `cloud_instance_id` is its machine's MAAS system id once its onboarding named it.
        let system_id = cloud_instance_id.as_deref();
        let result = match (backing, call) {
            // A bare-metal instance is powered through MAAS: a stop is a power-off (the runbook's `shutdown -h now`
            // over SSH ends the same way), a reboot a power cycle.
            (Backing::BareMetal { mac }, ProviderCall::Start { .. }) => {
                self.metal.power(mac, system_id, MetalPower::On).await
            }
            (Backing::BareMetal { mac }, ProviderCall::Stop { .. }) => {
                self.metal.power(mac, system_id, MetalPower::Off).await
            }
            (Backing::BareMetal { mac }, _) => self.metal.power(mac, system_id, MetalPower::Cycle).await,
            (_, ProviderCall::Start { cloud_instance_id: Some(id), .. }) => self.provider.start(id).await,
            (_, ProviderCall::Stop { cloud_instance_id: Some(id), hard, .. }) => self.provider.stop(id, *hard).await,
            (_, ProviderCall::Reboot { cloud_instance_id: Some(id), .. }) => self.provider.reboot(id).await,
            // A cloud row with no VM yet has nothing to power.
            _ => Ok(()),
        };
        Ok(result?)
    }
}

fn refused(refusal: impl std::fmt::Display) -> DriverError {
    DriverError::Refused(refusal.to_string())
}

/// A terminated row whose cascade has not run.
fn owes_cascade(instance: &Instance) -> bool {
    instance.state == InstanceState::Terminated && !instance.cascaded
}
