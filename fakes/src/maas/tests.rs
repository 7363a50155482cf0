//! Site-level tests of the MAAS fakes: whole boots driven by time, the 2026-07-20 incident signature, hardware
//! faults, determinism, and a property test with the transition table as its oracle.

use proptest::prelude::*;

use super::machine::{BOOTSTRAP_TOKEN_KEY, HwSyncFault, SeedError, encode_base64};
use super::region::{EventRecord, MachineView};
use super::status::INITIAL;
use super::vault::SECRET_PREFIX;
use super::*;

const ADMIN: &str = "admin";
const MINUTE_MS: u64 = 60_000;

fn site() -> Site {
    let mut site = Site::new(SiteConfig::new(20_260_720));
    site.add_machine("node-01");
    site
}

fn call(site: &mut Site, now_ms: u64, request: MaasRequest, events: &mut Vec<SiteEvent>) -> MaasResponse {
    site.handle_maas(now_ms, ADMIN, request, events).expect("the region answers")
}

fn create(site: &mut Site, commission: bool, events: &mut Vec<SiteEvent>) -> String {
    let request = site.create_request("node-01", "gpu-01", commission).unwrap();
    let now_ms = site.now_ms();
    let response = call(site, now_ms, request, events);
    response.machine().unwrap().system_id.clone()
}

fn view(site: &Site, system_id: &str) -> MachineView {
    site.region.view(system_id).unwrap()
}

/// The node's events at `level` and above, oldest first.
fn node_events(site: &Site, system_id: &str, level: EventLevel) -> Vec<EventRecord> {
    site.region.events().iter().filter(|e| e.node == system_id && e.level >= level).cloned().collect()
}

fn types(events: &[EventRecord]) -> Vec<&str> {
    events.iter().map(|e| e.event_type.as_str()).collect()
}

fn commissioned(site: &mut Site, events: &mut Vec<SiteEvent>) -> String {
    let id = create(site, true, events);
    events.extend(site.advance(20 * MINUTE_MS));
    assert_eq!(view(site, &id).status_name, "Ready");
    id
}

fn user_data(token: &str) -> Secret {
    Secret::new(encode_base64(format!("#cloud-config\n{BOOTSTRAP_TOKEN_KEY}: {token}\n").as_bytes()))
}

#[test]
fn commissioning_emits_the_real_event_sequence_and_script_results_on_completion() {
    let mut site = site();
    let mut events = Vec::new();
    let id = commissioned(&mut site, &mut events);
    let info = node_events(&site, &id, EventLevel::Info);
    assert_eq!(
        types(&info),
        ["Commissioning", "Performing PXE boot", "Loading ephemeral", "Gathering information", "Ready"]
    );
    let gathering_ms = info[3].created_ms;
    let results: Vec<EventRecord> =
        node_events(&site, &id, EventLevel::Debug).into_iter().filter(|e| e.event_type == "Script result").collect();
    let scripts = region::default_commissioning_scripts();
    assert_eq!(results.len(), scripts.len());
    let mut done_ms = gathering_ms;
    for (result, script) in results.iter().zip(&scripts) {
        done_ms += script.duration_ms;
        assert_eq!(result.created_ms, done_ms, "{} is logged when it completes, not when it starts", script.name);
        assert_eq!(result.description, format!("{} changed status from 'Running' to 'Passed'", script.name));
    }
    let machine = view(&site, &id);
    assert_eq!((machine.status, machine.owner.clone(), machine.commissioning_status), (4, None, 2));
    assert_eq!(machine.interface_set.iter().filter(|i| i.tags.contains(&"roce".to_owned())).count(), 2);
    assert!(machine.blockdevice_set.iter().any(|d| d.model == "Dell BOSS-N1"));
    assert_eq!(machine.boot_interface.as_ref().unwrap().name, "eno1");
    assert!(!site.machine("node-01").unwrap().is_powered(), "commissioning ends with a power-off");
    assert!(events.iter().any(|e| matches!(&e.kind, SiteEventKind::Dhcp { mtu_option: None, ip: Some(_), .. })));
}

#[test]
fn set_boot_disk_is_refused_unless_ready() {
    let mut site = site();
    let mut events = Vec::new();
    let id = commissioned(&mut site, &mut events);
    let boss = view(&site, &id).blockdevice_set.iter().find(|d| d.model == "Dell BOSS-N1").unwrap().id;
    let set = |id: &str| MaasRequest::SetBootDisk { system_id: id.to_owned(), block_device_id: boss };
    let now_ms = site.now_ms();
    let ok = call(&mut site, now_ms, set(&id), &mut events);
    assert_eq!((ok.status, ok.text_body()), (200, Some("OK")));
    assert_eq!(view(&site, &id).boot_disk.unwrap().id, boss);
    let deploy =
        MaasRequest::Deploy { system_id: id.clone(), distro_series: None, user_data: None, enable_hw_sync: false };
    call(&mut site, now_ms, deploy, &mut events);
    let refused = call(&mut site, now_ms, set(&id), &mut events);
    assert_eq!(
        (refused.status, refused.text_body()),
        (409, Some("Cannot set as boot disk because the machine is not Ready."))
    );
    let missing = MaasRequest::SetBootDisk { system_id: id.clone(), block_device_id: 9_999 };
    assert_eq!(call(&mut site, now_ms, missing, &mut events).status, 404);
}

#[test]
fn deploy_reaches_deployed_then_the_agent_enrols_and_hardware_sync_reports() {
    let mut site = site();
    let mut events = Vec::new();
    let id = commissioned(&mut site, &mut events);
    site.machine_mut("node-01").unwrap().faults.agent_enrol_delay_ms = 5 * MINUTE_MS;
    let token = "fleetsim-secret-bootstrap-0001";
    let deploy = MaasRequest::Deploy {
        system_id: id.clone(),
        distro_series: None,
        user_data: Some(user_data(token)),
        enable_hw_sync: true,
    };
    let start_ms = site.now_ms();
    assert!(site.at_rest(), "a Ready machine changes nothing by itself");
    assert_eq!(call(&mut site, start_ms, deploy, &mut events).machine().unwrap().status_name, "Deploying");
    assert!(!site.at_rest(), "a deploy under way, with its status deadline");
    events.extend(site.advance(start_ms + 60 * MINUTE_MS));
    let machine = view(&site, &id);
    assert_eq!(machine.status_name, "Deployed", "{:#?}", node_events(&site, &id, EventLevel::Debug));
    let info = node_events(&site, &id, EventLevel::Info);
    let deploy_types: Vec<&str> = types(&info).into_iter().skip_while(|t| *t != "Deploying").collect();
    assert_eq!(
        deploy_types,
        [
            "Deploying",
            "Performing PXE boot",
            "Loading ephemeral",
            "Configuring storage",
            "Installing OS",
            "Configuring OS",
            "Rebooting",
            "Deployed",
            "Image Deployed"
        ]
    );
    assert_eq!(info.last().unwrap().description, "deployed ubuntu/jammy/amd64");
    let deployed_ms = info.last().unwrap().created_ms;
    let enrol: Vec<&SiteEvent> = events.iter().filter(|e| matches!(e.kind, SiteEventKind::AgentEnrol { .. })).collect();
    assert_eq!(enrol.len(), 1);
    assert_eq!(enrol[0].at_ms, deployed_ms + 5 * MINUTE_MS, "late enrolment");
    let SiteEventKind::AgentEnrol { token: sent, .. } = &enrol[0].kind else { unreachable!() };
    assert_eq!(sent.expose(), token);
    assert!(!format!("{events:?}").contains(SECRET_PREFIX), "no secret in any event's Debug");
    let now_ms = site.now_ms();
    assert_eq!(machine.sync_interval, Some(900));
    assert!(!machine.is_sync_healthy(now_ms), "no sync before the seed: {machine:?}");
    // The onboarding workflow's seed over SSH starts the timer; a second seed changes nothing.
    site.machine_mut("node-01").unwrap().seed_hw_sync(now_ms).unwrap();
    site.advance(now_ms + 1);
    site.machine_mut("node-01").unwrap().seed_hw_sync(now_ms + 1).unwrap();
    let machine = view(&site, &id);
    assert!(machine.is_sync_healthy(now_ms + 1), "{machine:?}");
    assert_eq!(machine.next_sync_ms, Some(machine.last_sync_ms.unwrap() + 900_000));
    assert!(site.at_rest(), "deployed and enrolled: only the periodic hardware sync is left");
}

#[test]
fn a_seed_needs_a_running_deployed_os_and_fails_under_a_rejected_token() {
    let mut site = site();
    let mut events = Vec::new();
    let id = commissioned(&mut site, &mut events);
    let now_ms = site.now_ms();
    assert_eq!(site.machine_mut("node-01").unwrap().seed_hw_sync(now_ms), Err(SeedError::NotRunning));
    site.machine_mut("node-01").unwrap().faults.hw_sync = HwSyncFault::SeedFails;
    let deploy =
        MaasRequest::Deploy { system_id: id.clone(), distro_series: None, user_data: None, enable_hw_sync: true };
    call(&mut site, now_ms, deploy, &mut events);
    site.advance(now_ms + 60 * MINUTE_MS);
    let later_ms = site.now_ms();
    assert_eq!(site.machine_mut("node-01").unwrap().seed_hw_sync(later_ms), Err(SeedError::Rejected));
    site.advance(later_ms + 30 * MINUTE_MS);
    assert!(!view(&site, &id).is_sync_healthy(site.now_ms()));
}

#[test]
fn hardware_sync_that_stops_goes_unhealthy_and_a_reseed_repairs_it() {
    let mut site = site();
    let mut events = Vec::new();
    let id = commissioned(&mut site, &mut events);
    site.machine_mut("node-01").unwrap().faults.hw_sync = HwSyncFault::StopsAfter { syncs: 1 };
    let deploy =
        MaasRequest::Deploy { system_id: id.clone(), distro_series: None, user_data: None, enable_hw_sync: true };
    let start_ms = site.now_ms();
    call(&mut site, start_ms, deploy, &mut events);
    site.advance(start_ms + 30 * MINUTE_MS);
    let seeded_ms = site.now_ms();
    site.machine_mut("node-01").unwrap().seed_hw_sync(seeded_ms).unwrap();
    site.advance(seeded_ms + 60 * MINUTE_MS);
    let later_ms = site.now_ms();
    assert!(!view(&site, &id).is_sync_healthy(later_ms));
    // The engine's reseed is the seed run again: it restarts the stopped service.
    site.machine_mut("node-01").unwrap().seed_hw_sync(later_ms).unwrap();
    site.advance(later_ms + 1);
    assert!(view(&site, &id).is_sync_healthy(later_ms + 1));
}

#[test]
fn servfail_gives_zero_script_events_and_a_timeout_at_30_minutes() {
    let mut site = site();
    site.dns.set_fault(DnsFault::ServFailAll);
    let mut events = Vec::new();
    let id = create(&mut site, true, &mut events);
    events.extend(site.advance(29 * MINUTE_MS));
    assert_eq!(view(&site, &id).status_name, "Commissioning");
    let info = node_events(&site, &id, EventLevel::Info);
    assert_eq!(
        types(&info),
        ["Commissioning", "Performing PXE boot", "Loading ephemeral"],
        "silent after the ephemeral"
    );
    assert_eq!(site.machine("node-01").unwrap().stall(), Some(Stall::NoDatasource));
    assert!(events.iter().any(|e| matches!(e.kind, SiteEventKind::Stalled { stall: Stall::NoDatasource, .. })));
    events.extend(site.advance(30 * MINUTE_MS));
    let machine = view(&site, &id);
    assert_eq!(machine.status_name, "Failed commissioning");
    assert_eq!(machine.error_description, "Node operation 'Commissioning' timed out after 30 minutes.");
    let debug = node_events(&site, &id, EventLevel::Debug);
    assert!(!debug.iter().any(|e| e.event_type == "Script result" || e.event_type == "Gathering information"));
    let failed = debug.iter().find(|e| e.event_type == "Marking node failed").unwrap();
    assert_eq!((failed.level, failed.created_ms), (EventLevel::Error, 30 * MINUTE_MS));
}

#[test]
fn mac_drift_makes_maas_enlist_the_machine_as_new_and_the_old_record_times_out() {
    let mut site = site();
    let mut events = Vec::new();
    let id = commissioned(&mut site, &mut events);
    let old_mac = site.machine("node-01").unwrap().hardware().pxe_nic().unwrap().mac.clone();
    site.drift_macs_at_next_power_cycle("node-01", 77);
    let start_ms = site.now_ms();
    call(&mut site, start_ms, MaasRequest::Commission { system_id: id.clone() }, &mut events);
    let mut after = std::mem::take(&mut events);
    after.extend(site.advance(start_ms + 30 * MINUTE_MS));
    let new_mac = site.machine("node-01").unwrap().hardware().pxe_nic().unwrap().mac.clone();
    assert_ne!(old_mac, new_mac);
    assert!(after.iter().any(|e| matches!(&e.kind, SiteEventKind::MacsDrifted { macs, .. } if macs.len() == 4)));
    assert!(
        after.iter().any(|e| matches!(&e.kind, SiteEventKind::Pxe { system_id: None, mac, .. } if *mac == new_mac))
    );
    let enlisted: Vec<String> = after
        .iter()
        .filter_map(|e| match &e.kind {
            SiteEventKind::Enlisted { system_id, .. } => Some(system_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(enlisted.len(), 1);
    let new = view(&site, &enlisted[0]);
    assert_eq!(new.status_name, "New");
    assert!(new.interface_set.iter().any(|i| i.mac_address == new_mac));
    // The old record heard nothing after "Commissioning": no PXE, no scripts — then the monitor fails it.
    let old_info = node_events(&site, &id, EventLevel::Info);
    let since: Vec<&str> = types(&old_info).into_iter().rev().take_while(|t| *t != "Commissioning").collect();
    assert_eq!(since, ["Marking node failed"]);
    assert_eq!(view(&site, &id).status_name, "Failed commissioning");
    after.clear();
    // With the resolver SERVFAILing as well, the drifted node still enlists (the enlistment ephemeral reaches the
    // metadata service by the rack's address, seed 001's "every post-apply boot an unknown node"), and the old
    // record times out as before.
    let mut site = self::site();
    let mut events = Vec::new();
    let id = commissioned(&mut site, &mut events);
    site.drift_macs_at_next_power_cycle("node-01", 77);
    site.dns.set_fault(DnsFault::ServFailAll);
    let start_ms = site.now_ms();
    call(&mut site, start_ms, MaasRequest::Commission { system_id: id.clone() }, &mut events);
    let after = site.advance(start_ms + 30 * MINUTE_MS);
    assert_eq!(after.iter().filter(|e| matches!(e.kind, SiteEventKind::Enlisted { .. })).count(), 1);
    assert_eq!(site.region.system_ids().len(), 2);
    assert_eq!(view(&site, &id).status_name, "Failed commissioning");
}

#[test]
fn a_hung_script_is_silent_from_its_start_and_times_out() {
    let mut site = site();
    site.machine_mut("node-01").unwrap().faults.hang_script = Some("maas-capture-lldpd".into());
    let mut events = Vec::new();
    let id = create(&mut site, true, &mut events);
    site.advance(30 * MINUTE_MS);
    let results: Vec<String> = node_events(&site, &id, EventLevel::Debug)
        .into_iter()
        .filter(|e| e.event_type == "Script result")
        .map(|e| e.description.split(' ').next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(results.len(), 6, "the scripts before the hung one reported: {results:?}");
    assert!(!results.iter().any(|name| name == "maas-capture-lldpd" || name == "maas-kernel-cmdline"));
    assert_eq!(view(&site, &id).status_name, "Failed commissioning");
}

#[test]
fn slow_scripts_report_a_steady_trickle_and_reach_ready_within_the_node_timeout() {
    let interval_ms = 2 * MINUTE_MS;
    let mut site = site();
    site.machine_mut("node-01").unwrap().faults.script_interval_ms = Some(interval_ms);
    let mut events = Vec::new();
    let id = create(&mut site, true, &mut events);
    events.extend(site.advance(30 * MINUTE_MS));
    let debug = node_events(&site, &id, EventLevel::Debug);
    let gathering_ms = debug.iter().find(|e| e.event_type == "Gathering information").unwrap().created_ms;
    let results: Vec<&EventRecord> = debug.iter().filter(|e| e.event_type == "Script result").collect();
    let scripts = region::default_commissioning_scripts();
    assert_eq!(results.len(), scripts.len(), "every script reports, late");
    for (index, (result, script)) in results.iter().zip(&scripts).enumerate() {
        assert_eq!(result.created_ms, gathering_ms + (index as u64 + 1) * interval_ms, "{}", script.name);
        assert_eq!(result.description, format!("{} changed status from 'Running' to 'Passed'", script.name));
    }
    // Slow, never silent: no two consecutive events of the node (DEBUG and up, what the engine reads) are further
    // apart than the interval, which is well inside the engine's five-minute stall window.
    let gaps: Vec<u64> = debug.windows(2).map(|pair| pair[1].created_ms - pair[0].created_ms).collect();
    assert!(gaps.iter().all(|gap| *gap <= interval_ms), "{gaps:?}");
    let ready = debug.iter().find(|e| e.event_type == "Ready").unwrap();
    assert_eq!(ready.created_ms, results.last().unwrap().created_ms);
    assert!((12 * MINUTE_MS..30 * MINUTE_MS).contains(&ready.created_ms), "Ready at {} ms", ready.created_ms);
    assert_eq!(view(&site, &id).status_name, "Ready", "inside MAAS's 30-minute node_timeout");
    assert!(!events.iter().any(|e| matches!(e.kind, SiteEventKind::Stalled { .. })));
    // The same machine without the fault is Ready in a fraction of the time, with the scripts' own durations.
    let mut fast = self::site();
    let id = commissioned(&mut fast, &mut Vec::new());
    let fast_ready_ms = node_events(&fast, &id, EventLevel::Info).last().unwrap().created_ms;
    assert!(fast_ready_ms * 3 < ready.created_ms, "{fast_ready_ms} ms against {} ms", ready.created_ms);
}

#[test]
fn a_datasource_failure_during_deploy_fails_the_deployment() {
    let mut site = site();
    let mut events = Vec::new();
    let id = commissioned(&mut site, &mut events);
    site.machine_mut("node-01").unwrap().faults.datasource_failure = true;
    let deploy =
        MaasRequest::Deploy { system_id: id.clone(), distro_series: None, user_data: None, enable_hw_sync: false };
    let start_ms = site.now_ms();
    call(&mut site, start_ms, deploy, &mut events);
    site.advance(start_ms + 20 * MINUTE_MS);
    let machine = view(&site, &id);
    assert_eq!(machine.status_name, "Failed deployment");
    assert_eq!(machine.error_description, "Installation failed (refer to the installation log for more information).");
}

#[test]
fn absent_hardware_is_absent_from_the_inventory_and_a_missing_boot_disk_fails_the_install() {
    let mut site = site();
    let machine = site.machine_mut("node-01").unwrap();
    assert!(machine.remove_disk("sda"));
    assert!(machine.remove_nic("ens1f1np1"));
    let mut events = Vec::new();
    let id = commissioned(&mut site, &mut events);
    let inventory = view(&site, &id);
    assert!(!inventory.blockdevice_set.iter().any(|d| d.model == "Dell BOSS-N1"));
    assert_eq!(inventory.interface_set.iter().filter(|i| i.tags.contains(&"roce".to_owned())).count(), 1);
    // The boot disk is the first disk found; if it vanishes before the install, curtin fails.
    site.machine_mut("node-01").unwrap().remove_disk("nvme0n1");
    let deploy =
        MaasRequest::Deploy { system_id: id.clone(), distro_series: None, user_data: None, enable_hw_sync: false };
    let start_ms = site.now_ms();
    call(&mut site, start_ms, deploy, &mut events);
    site.advance(start_ms + 20 * MINUTE_MS);
    assert_eq!(view(&site, &id).status_name, "Failed deployment");
    assert_eq!(site.machine("node-01").unwrap().stall(), Some(Stall::InstallFailed));
}

#[test]
fn dhcp_serves_option_26_only_after_the_vlan_mtu_leaves_1500() {
    let mut site = site();
    let mut events = Vec::new();
    let update = MaasRequest::UpdateVlan { id: PXE_VLAN_ID, mtu: 9000 };
    assert_eq!(call(&mut site, 0, update, &mut events).status, 200);
    let id = create(&mut site, true, &mut events);
    events.extend(site.advance(20 * MINUTE_MS));
    assert!(events.iter().any(|e| matches!(e.kind, SiteEventKind::Dhcp { mtu_option: Some(9000), .. })));
    assert_eq!(site.machine("node-01").unwrap().lease().map(Lease::mtu), None, "powered off after commissioning");
    assert_eq!(view(&site, &id).boot_interface.unwrap().effective_mtu, 9000);
    assert_eq!(call(&mut site, 0, MaasRequest::UpdateVlan { id: PXE_VLAN_ID, mtu: 500 }, &mut events).status, 400);
}

#[test]
fn an_ignored_bmc_command_leaves_the_machine_dark_until_the_timeout() {
    let mut site = site();
    site.bmc.set_fault("node-01", BmcFault::IgnoreCommands);
    let mut events = Vec::new();
    let id = create(&mut site, true, &mut events);
    assert_eq!(view(&site, &id).power_state, "error");
    events.extend(site.advance(30 * MINUTE_MS));
    assert!(!events.iter().any(|e| matches!(e.kind, SiteEventKind::Power { .. } | SiteEventKind::Dhcp { .. })));
    assert_eq!(view(&site, &id).status_name, "Failed commissioning");
}

#[test]
fn the_engine_can_power_cycle_through_the_bmc_directly_and_unknown_macs_enlist() {
    let mut site = site();
    let credential = site.vault.power_credential("node-01").unwrap().0;
    let auth = BasicAuth::from(&credential);
    let mut events = Vec::new();
    let reset = RedfishRequest::Reset { system: "node-01".into(), reset: bmc::ResetType::On };
    assert_eq!(site.handle_redfish(0, &auth, reset, &mut events).unwrap().status, 204);
    events.extend(site.advance(10 * MINUTE_MS));
    let ids = site.region.system_ids();
    assert_eq!(ids.len(), 1, "a never-seen machine that PXE-boots enlists itself");
    assert_eq!(view(&site, &ids[0]).status_name, "New");
    assert!(!site.machine("node-01").unwrap().is_powered(), "enlistment ends with a power-off");
    let wrong = BasicAuth { user: "root".into(), password: Secret::new("fleetsim-secret-wrong") };
    let get = RedfishRequest::GetSystem { system: "node-01".into() };
    assert_eq!(site.handle_redfish(site.now_ms(), &wrong, get, &mut events).unwrap().status, 401);
}

/// A scripted run touching every subsystem; returns everything observable.
fn scripted_run(seed: u64) -> String {
    let mut site = Site::new(SiteConfig::new(seed));
    site.add_machine("node-01");
    site.add_machine("node-02");
    let mut events = Vec::new();
    let mut responses = Vec::new();
    for (index, machine) in ["node-01", "node-02"].into_iter().enumerate() {
        let request = site.create_request(machine, &format!("gpu-{index}"), true).unwrap();
        responses.push(site.handle_maas(index as u64 * 1_000, ADMIN, request, &mut events));
    }
    site.drift_macs_at_next_power_cycle("node-02", seed);
    events.extend(site.advance(20 * MINUTE_MS));
    for system_id in site.region.system_ids() {
        let deploy = MaasRequest::Deploy {
            system_id: system_id.clone(),
            distro_series: None,
            user_data: Some(user_data("fleetsim-secret-t")),
            enable_hw_sync: true,
        };
        responses.push(site.handle_maas(21 * MINUTE_MS, ADMIN, deploy, &mut events));
        responses.push(site.handle_maas(21 * MINUTE_MS, ADMIN, MaasRequest::Commission { system_id }, &mut events));
    }
    events.extend(site.advance(60 * MINUTE_MS));
    site.dns.set_fault(DnsFault::ServFailAll);
    for system_id in site.region.system_ids() {
        responses.push(site.handle_maas(
            61 * MINUTE_MS,
            ADMIN,
            MaasRequest::Release { system_id: system_id.clone(), comment: None, erase: false },
            &mut events,
        ));
        responses.push(site.handle_maas(62 * MINUTE_MS, ADMIN, MaasRequest::Commission { system_id }, &mut events));
    }
    events.extend(site.advance(120 * MINUTE_MS));
    let query = MaasRequest::QueryEvents(EventsQuery {
        level: Some(EventLevel::Debug),
        limit: Some(1000),
        ..Default::default()
    });
    responses.push(site.handle_maas(121 * MINUTE_MS, ADMIN, query, &mut events));
    format!("{events:?}\n{responses:?}")
}

#[test]
fn two_identical_sites_driven_the_same_way_produce_identical_outputs() {
    let first = scripted_run(7);
    let second = scripted_run(7);
    assert_eq!(first, second);
    assert!(first.contains("Enlisted") && first.contains("AgentEnrol"), "the run reaches the interesting states");
    assert_ne!(first, scripted_run(8), "the seed matters");
}

/// One random operation of the property test.
#[derive(Debug, Clone)]
enum Op {
    Api(usize, u8),
    Advance(u64),
    Dns(bool),
    Drift(usize, u64),
    Bmc(usize, u8),
    Fail503,
    Hide(usize, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 0..12u8).prop_map(|(m, o)| Op::Api(m, o)),
        3 => (0..40 * MINUTE_MS).prop_map(Op::Advance),
        1 => any::<bool>().prop_map(Op::Dns),
        1 => (0..2usize, any::<u64>()).prop_map(|(m, s)| Op::Drift(m, s)),
        1 => (0..2usize, 0..3u8).prop_map(|(m, f)| Op::Bmc(m, f)),
        1 => Just(Op::Fail503),
        1 => (0..3usize, any::<bool>()).prop_map(|(m, h)| Op::Hide(m, h)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the engine, the operator and the faults do, every status write is one `NODE_TRANSITIONS` allows.
    #[test]
    fn random_operations_never_take_an_illegal_transition(ops in proptest::collection::vec(op(), 1..40)) {
        let mut site = Site::new(SiteConfig::new(3));
        let names = ["node-01", "node-02"];
        let mut events = Vec::new();
        for (index, name) in names.iter().enumerate() {
            site.add_machine(name);
            let request = site.create_request(name, &format!("gpu-{index}"), index == 0).unwrap();
            site.handle_maas(0, ADMIN, request, &mut events);
        }
        let mut now_ms = 0;
        for op in ops {
            let ids = site.region.system_ids();
            let pick = |m: usize| ids.get(m % ids.len().max(1)).cloned().unwrap_or_default();
            match op {
                Op::Api(m, o) => {
                    let system_id = pick(m);
                    let caller = if o % 5 == 4 { "operator" } else { ADMIN };
                    let request = match o {
                        0 => MaasRequest::Commission { system_id },
                        1 => MaasRequest::Deploy { system_id, distro_series: None, user_data: None, enable_hw_sync: true },
                        2 => MaasRequest::Release { system_id, comment: None, erase: false },
                        3 => MaasRequest::Abort { system_id, comment: None },
                        4 => MaasRequest::MarkBroken { system_id, comment: Some("x".into()) },
                        5 => MaasRequest::MarkFixed { system_id, comment: None },
                        6 => MaasRequest::PowerOn { system_id },
                        7 => MaasRequest::PowerOff { system_id },
                        8 => MaasRequest::QueryPowerState { system_id },
                        9 => MaasRequest::DeleteMachine { system_id },
                        10 => MaasRequest::SetBootDisk { system_id, block_device_id: 1 },
                        _ => MaasRequest::ReadMachine { system_id },
                    };
                    if let Some(response) = site.handle_maas(now_ms, caller, request, &mut events) {
                        prop_assert!([200, 204, 400, 403, 404, 409, 503].contains(&response.status), "{response:?}");
                    }
                }
                Op::Advance(dt_ms) => {
                    now_ms += dt_ms;
                    events.extend(site.advance(now_ms));
                }
                Op::Dns(broken) => if broken { site.dns.set_fault(DnsFault::ServFailAll) } else { site.dns.repair() },
                Op::Drift(m, seed) => site.drift_macs_at_next_power_cycle(names[m], seed),
                Op::Bmc(m, 0) => site.bmc.clear_fault(names[m]),
                Op::Bmc(m, 1) => site.bmc.set_fault(names[m], BmcFault::IgnoreCommands),
                Op::Bmc(m, _) => site.bmc.set_fault(names[m], BmcFault::Unreachable),
                Op::Fail503 => site.region.fail_next_with_503(10),
                Op::Hide(m, true) => site.region.hide_machine(&pick(m)),
                Op::Hide(m, false) => site.region.reveal_machine(&pick(m)),
            }
        }
        events.extend(site.advance(now_ms + 120 * MINUTE_MS));
        for record in site.region.transitions() {
            match record.from {
                None => prop_assert!(INITIAL.contains(&record.to), "{record:?}"),
                Some(from) => prop_assert!(from.can_transition_to(record.to), "{record:?}"),
            }
        }
        let written = events.iter().filter(|e| matches!(e.kind, SiteEventKind::StatusWritten { .. })).count();
        prop_assert_eq!(written, site.region.transitions().len(), "every write reaches the event stream once");
    }
}
