//! The hourly cloud sync of one region (`System::CloudSyncService`): the provider's list reconciled against the
//! rows, and the two signals of the runbook that read its check events.
//!
//! A VM the provider no longer lists maps its row to terminated (the destroy is then confirmed); a VM listed with
//! the tag of a row that never heard its create's answer is adopted; a terminated row whose guest is still listed
//! is `cloud_sync_terminated_guest_present` — the process died between the terminate commit and the destroy — and
//! stands until a person acts or a later sync stops listing it. `cloud_sync_check_stale` is a region that synced
//! before, is still enabled, and has had no fresh check for 3 hours: nothing is looking there.

use serde::{Deserialize, Serialize};

use super::control::leave_pool;
use super::inventory::{Backing, Decided, InstanceRecord, Inventory};
use super::state::{InstanceEvent, InstanceState};

/// The stale sensor's lookback (the sync itself runs hourly: whoever schedules it, not this module, says when).
pub const SYNC_STALE_MS: u64 = 3 * 60 * 60_000;

/// One VM as the provider lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ListedVm {
    pub cloud_instance_id: String,
    /// The instance id the create carried.
    pub tag: String,
}

/// A signal the sync's check raises.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "signal", rename_all = "snake_case")]
pub enum SyncSignal {
    /// `system.cloud_sync_terminated_guest_present`: running and billing.
    CloudSyncTerminatedGuestPresent { instance: String, cloud_instance_id: String },
    /// `system.cloud_sync_check_stale`.
    CloudSyncCheckStale { region: String, last_check_ms: u64 },
}

/// What one region's sync found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Rows mapped to terminated because the provider no longer lists their VM.
    pub mapped_terminated: Vec<String>,
    pub adopted: Vec<String>,
    pub signals: Vec<SyncSignal>,
}

impl Inventory {
    /// Reconciles a region with a successful listing of its VMs.
    pub fn sync_region(&self, region: &str, listed: &[ListedVm], now_ms: u64) -> Decided<SyncReport> {
        let mut records = Vec::new();
        let mut report = SyncReport::default();
        for instance in self.instances.values() {
            if !matches!(&instance.backing, Backing::Cloud { region: r, .. } if r == region) {
                continue;
            }
            let by_id =
                instance.cloud_instance_id.as_ref().and_then(|id| listed.iter().find(|vm| &vm.cloud_instance_id == id));
            let by_tag = listed.iter().find(|vm| vm.tag == instance.id);
            match (instance.state, instance.cloud_instance_id.as_ref(), by_id.or(by_tag)) {
                (InstanceState::Terminated, _, Some(vm)) => {
                    report.signals.push(SyncSignal::CloudSyncTerminatedGuestPresent {
                        instance: instance.id.clone(),
                        cloud_instance_id: vm.cloud_instance_id.clone(),
                    });
                }
                (InstanceState::Terminated, _, None) => {
                    if instance.destroy_pending_since_ms.is_some() {
                        records.push(InstanceRecord::DestroyConfirmed { instance: instance.id.clone() });
                    }
                }
                (_, None, Some(vm)) => {
                    records.push(InstanceRecord::ProviderCreated {
                        instance: instance.id.clone(),
                        cloud_instance_id: vm.cloud_instance_id.clone(),
                    });
                    report.adopted.push(instance.id.clone());
                }
                (_, Some(_), None) => {
                    let event = self.event(instance, InstanceEvent::Terminate, now_ms).expect("not terminated");
                    records.push(event);
                    records.extend(leave_pool(instance));
                    report.mapped_terminated.push(instance.id.clone());
                }
                // Listed and live, or never created (pending with no VM yet): nothing to reconcile.
                (_, Some(_), Some(_)) | (_, None, None) => {}
            }
        }
        let mut ids: Vec<String> = listed.iter().map(|vm| vm.cloud_instance_id.clone()).collect();
        ids.sort();
        records.push(InstanceRecord::SyncChecked { region: region.to_owned(), at_ms: now_ms, listed: ids });
        Decided::new(records, report)
    }

    /// `cloud_sync_check_stale` for every enabled region that synced before and not within the lookback.
    pub fn stale_syncs<'a>(&self, enabled_regions: impl IntoIterator<Item = &'a str>, now_ms: u64) -> Vec<SyncSignal> {
        enabled_regions
            .into_iter()
            .filter_map(|region| {
                let (last_check_ms, _) = self.syncs.get(region)?;
                (now_ms.saturating_sub(*last_check_ms) > SYNC_STALE_MS).then(|| SyncSignal::CloudSyncCheckStale {
                    region: region.to_owned(),
                    last_check_ms: *last_check_ms,
                })
            })
            .collect()
    }
}
