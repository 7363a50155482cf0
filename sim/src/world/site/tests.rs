//! Tests of the site's adapters (their mappings from the fakes' answers to the engine's port types and errors), of
//! the `[onboarding]` table and the site's steps in scenario files, and of onboarding runs' determinism.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use engine::ports::site::{DnsAnswer as PortDnsAnswer, MaasApi, MaasError, MachineStatus, Resolver, SiteSecrets};
use engine::ports::{SecretsError, TransportError};
use fakes::maas::{MaasBody, MaasResponse, NodeStatus, VaultError};

use super::*;
use crate::model::spec::parse_scenario;
use crate::run::runner::{RunIdentity, run};
use crate::world::CONTROLLER_ID;

const ONBOARDING: &str = r#"
schema_version = 1
description = "onboarding test"
seed = 5
duration_ms_max = 7_200_000
[fleet]
nodes = 1
[network]
latency_ms = { min = 5, max = 5 }
[onboarding]
nodes = 2
start_at_ms = 3_600_000
"#;

/// Runs `body` in a fresh onboarding world whose hosts are up but run nothing; the onboarding starts after the body.
fn in_site<T>(body: impl AsyncFnOnce(Rc<World>) -> T) -> T {
    let spec = Rc::new(parse_scenario("t.toml", ONBOARDING).unwrap().run);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let sink = Box::new(crate::observe::observers::Observers::for_run(&spec));
        let world = World::new(spec, 1, false, sink);
        world.boot_all();
        let out = body(world.clone()).await;
        world.shutdown();
        out
    })
}

fn maas(world: &Rc<World>) -> SimMaas {
    SimMaas { world: world.clone(), from: CONTROLLER_ID, workflow: "onboard-test".into() }
}

#[test]
fn status_codes_map_to_the_engines_statuses() {
    let cases = [
        (NodeStatus::New, MachineStatus::New),
        (NodeStatus::Commissioning, MachineStatus::Commissioning),
        (NodeStatus::FailedCommissioning, MachineStatus::FailedCommissioning),
        (NodeStatus::Ready, MachineStatus::Ready),
        (NodeStatus::Allocated, MachineStatus::Allocated),
        (NodeStatus::Deploying, MachineStatus::Deploying),
        (NodeStatus::Deployed, MachineStatus::Deployed),
        (NodeStatus::FailedDeployment, MachineStatus::FailedDeployment),
        (NodeStatus::Releasing, MachineStatus::Releasing),
        (NodeStatus::Broken, MachineStatus::Broken),
        (NodeStatus::Testing, MachineStatus::Other { code: 21, name: "Testing".into() }),
    ];
    for (fake, engine) in cases {
        assert_eq!(MachineStatus::from_code(fake.code(), fake.label()), engine, "{fake:?}");
    }
}

#[test]
fn http_errors_keep_status_message_and_retry_after() {
    let unavailable =
        MaasResponse { status: 503, body: MaasBody::Text("Service Unavailable".into()), retry_after_s: Some(10) };
    let error = maas_error(&unavailable);
    assert_eq!(error, MaasError::Http { status: 503, message: "Service Unavailable".into(), retry_after_s: Some(10) });
    assert!(error.is_transient());
    let form = MaasResponse {
        status: 400,
        body: MaasBody::FormErrors(BTreeMap::from([(
            "__all__".to_owned(),
            vec!["Commission is not available.".into()],
        )])),
        retry_after_s: None,
    };
    assert_eq!(
        maas_error(&form),
        MaasError::Http { status: 400, message: "__all__: Commission is not available.".into(), retry_after_s: None }
    );
}

#[test]
fn resolver_and_secrets_errors_map_to_the_ports() {
    assert_eq!(
        dns_answer(fakes::maas::DnsAnswer::NoError { address: "10.10.0.2".into() }),
        PortDnsAnswer::Address("10.10.0.2".into())
    );
    assert_eq!(dns_answer(fakes::maas::DnsAnswer::ServFail), PortDnsAnswer::ServFail);
    assert_eq!(dns_answer(fakes::maas::DnsAnswer::NxDomain), PortDnsAnswer::NxDomain);
    assert!(matches!(secrets_error(VaultError::Unavailable), SecretsError::Unavailable(_)));
    assert!(matches!(secrets_error(VaultError::NoPowerCredential { node: "n".into() }), SecretsError::NotFound(_)));
    assert!(matches!(secrets_error(VaultError::SiteDisabled), SecretsError::Refused(_)));
    assert!(matches!(secrets_error(VaultError::TokenExpired { token_id: "bt-1".into() }), SecretsError::Refused(_)));
    let config = site_config(&BTreeMap::from([("enabled".to_owned(), "true".to_owned())])).unwrap();
    assert_eq!(
        (config.metadata_host.as_str(), config.pxe_vlan_vid, config.roce_vlan_vid, config.roce_mandatory),
        (fakes::maas::METADATA_HOST, 5001, 5002, false)
    );
}

#[test]
fn the_adapter_creates_lists_and_reads_machines_in_the_engines_words() {
    in_site(async |world| {
        let maas = maas(&world);
        let secrets = SimSiteSecrets { world: world.clone(), from: CONTROLLER_ID };
        let credential = secrets.power_credential("node-02").await.unwrap();
        let racked = world.site().state.borrow().racked["node-02"].clone();
        let new = port::NewMachine {
            hostname: "node-02".into(),
            pxe_mac: racked.pxe_mac.to_uppercase(),
            power_address: "node-02".into(),
            power_user: credential.user,
            power_password: credential.password,
        };
        let created = maas.create_machine(&new).await.unwrap();
        assert_eq!(created.status, MachineStatus::Commissioning, "an admin-created machine commissions at once");
        assert_eq!(created.macs, std::slice::from_ref(&racked.pxe_mac), "lowercase, boot interface first");
        assert_eq!(created.power_address.as_deref(), Some("node-02"));
        assert!(!created.hw_sync_healthy);
        let listed = maas.machines().await.unwrap();
        assert_eq!(listed, [maas.machine(&created.system_id).await.unwrap()]);
        let subnets = maas.subnets().await.unwrap();
        let vlans: Vec<(u16, u16)> = subnets.iter().map(|subnet| (subnet.vlan_vid, subnet.mtu)).collect();
        assert_eq!(vlans, [(5001, 1500), (5002, 9000)]);
        let events = maas.events(&created.system_id, None).await.unwrap();
        assert!(events.windows(2).all(|pair| pair[0].id > pair[1].id), "newest first");
        let newest = events[0].id;
        assert_eq!(maas.events(&created.system_id, Some(newest)).await.unwrap(), []);
        let missing = maas.machine("nope00").await.unwrap_err();
        assert_eq!(missing.status(), Some(404));
        let token = secrets.bootstrap_token("node-02", 60_000).await.unwrap();
        assert!(token.expose().starts_with(engine::secret::SECRET_MARKER));
    });
}

#[test]
fn a_503_keeps_its_retry_after_and_a_silent_region_times_out() {
    in_site(async |world| {
        let maas = maas(&world);
        world.apply(&Step::MaasUnavailable { count: 1, retry_after_s: 7 });
        let error = maas.machines().await.unwrap_err();
        assert_eq!(
            error,
            MaasError::Http { status: 503, message: "Service Unavailable".into(), retry_after_s: Some(7) }
        );
        assert!(maas.machines().await.is_ok(), "only the next answer was a 503");
        world.apply(&Step::MaasUnreachable { down: true });
        let started_ms = world.now_ms();
        assert_eq!(maas.machines().await.unwrap_err(), MaasError::Transport(TransportError::Timeout));
        assert_eq!(world.now_ms() - started_ms, world.spec.engine.call_timeout_ms, "after the call timeout");
        world.apply(&Step::MaasUnreachable { down: false });
        assert!(maas.machines().await.is_ok());
    });
}

#[test]
fn the_resolver_probe_sees_servfail_and_the_secrets_store_its_faults() {
    in_site(async |world| {
        let resolver = SimResolver { world: world.clone(), from: CONTROLLER_ID };
        let secrets = SimSiteSecrets { world: world.clone(), from: CONTROLLER_ID };
        let host = fakes::maas::METADATA_HOST;
        assert_eq!(resolver.resolve(host).await, Ok(PortDnsAnswer::Address(fakes::maas::RACK_ADDRESS.into())));
        world.apply(&Step::ResolverServfail { zones: None });
        assert_eq!(resolver.resolve(host).await, Ok(PortDnsAnswer::ServFail));
        world.apply(&Step::ResolverRepair);
        world.apply(&Step::VaultUnavailable { count: 1 });
        assert!(matches!(secrets.site_config().await, Err(SecretsError::Unavailable(_))));
        assert!(secrets.site_config().await.is_ok());
        world.apply(&Step::PowerCredentialMissing { target: "node-03".into() });
        assert!(matches!(secrets.power_credential("node-03").await, Err(SecretsError::NotFound(_))));
        world.apply(&Step::SiteDisabled);
        assert!(matches!(secrets.site_config().await, Err(SecretsError::Refused(_))));
    });
}

#[test]
fn a_machine_enlisted_after_a_mac_drift_carries_its_bmc_address() {
    in_site(async |world| {
        world.apply(&Step::MacDrift { target: "node-02".into() });
        // An operator's out-of-band commissioning of an unknown machine is not possible; power it on through a
        // record made for the old MACs instead: the drift applies at that power-on and the boot enlists.
        let request = world.site().lock().site.create_request("node-02", "node-02", true).unwrap();
        let ran = Rc::new(Cell::new(false));
        let flag = ran.clone();
        world
            .call(CONTROLLER_ID, world.site().host, 1_000, move |world| {
                flag.set(true);
                world.at_site(|site, now_ms, events| site.handle_maas(now_ms, "admin", request, events))
            })
            .await
            .unwrap();
        assert!(ran.get());
        world.sleep_until_ms(1_200_000).await;
        let machines = maas(&world).machines().await.unwrap();
        let enlisted: Vec<_> = machines.iter().filter(|m| m.hostname != "node-02").collect();
        assert_eq!(enlisted.len(), 1, "{machines:?}");
        assert_eq!(enlisted[0].status, MachineStatus::New);
        assert_eq!(enlisted[0].power_address.as_deref(), Some("node-02"), "the enlistment detected the BMC");
        world.apply(&Step::RegisterMacs { target: "node-02".into() });
        let machines = maas(&world).machines().await.unwrap();
        assert_eq!(machines.len(), 1, "the stray record is gone: {machines:?}");
        let current = world.site().lock().site.machine("node-02").unwrap().hardware().pxe_nic().unwrap().mac.clone();
        assert!(machines[0].macs.contains(&current), "the original record carries the new MACs");
    });
}

const SPEC_HEAD: &str = r#"
schema_version = 1
description = "spec test"
seed = 3
duration_ms_max = 1_000_000

[fleet]
nodes = 2
"#;

#[test]
fn the_onboarding_table_gets_its_defaults_and_names_machines_after_the_fleet() {
    let text = format!("{SPEC_HEAD}\n[onboarding]\nnodes = 2\npolicy = \"legacy\"\n");
    let onboarding = parse_scenario("s.toml", &text).unwrap().run.onboarding.unwrap();
    assert_eq!(onboarding.machines, ["node-03", "node-04"]);
    assert_eq!(onboarding.policy, engine::onboarding::driver::OnboardingPolicy::Legacy);
    assert_eq!(
        (onboarding.start_at_ms, onboarding.stall_window_ms, onboarding.poll_ms, onboarding.concurrency),
        (0, 300_000, 15_000, 8)
    );
    let without = parse_scenario("s.toml", SPEC_HEAD).unwrap().run;
    assert!(without.onboarding.is_none());
    assert!(!without.config_value().to_string().contains("onboarding"), "absent from the configuration hash");
}

#[test]
fn onboarding_errors_name_file_line_column_and_key() {
    let err = |text: String| parse_scenario("s.toml", &text).unwrap_err().to_string();
    let unknown = err(format!("{SPEC_HEAD}\n[onboarding]\nnodes = 2\ncolour = 1\n"));
    assert!(unknown.starts_with("s.toml:12:1: onboarding.colour: unknown field `colour`"), "{unknown}");
    let zero = err(format!("{SPEC_HEAD}\n[onboarding]\nnodes = 2\nconcurrency = 0\n"));
    assert!(zero.starts_with("s.toml:12:15: onboarding.concurrency: must be at least 1"), "{zero}");
    let policy = err(format!("{SPEC_HEAD}\n[onboarding]\nnodes = 2\npolicy = \"bold\"\n"));
    assert!(policy.contains("unknown variant `bold`"), "{policy}");
    let step = |body: &str, onboarding: &str| err(format!("{SPEC_HEAD}{onboarding}\n[[step]]\nat_ms = 5\n{body}\n"));
    let no_site = step("kind = \"mac_drift\"\ntarget = \"node-03\"", "");
    assert!(no_site.contains("step[0]: a mac_drift step acts on the MAAS site, which needs an [onboarding] table"));
    let table = "\n[onboarding]\nnodes = 1\n";
    let not_machine = step("kind = \"script_hang\"\ntarget = \"node-01\"", table);
    assert!(not_machine.contains("step[0].target: \"node-01\" is not a machine of the MAAS site (node-03..node-03)"));
    assert!(
        step("kind = \"maas_unavailable\"\ncount = 0\nretry_after_s = 5", table).contains("count: must be at least 1")
    );
    let ok =
        format!("{SPEC_HEAD}{table}\n[[step]]\nat_ms = 5\nkind = \"partition\"\na = \"controller\"\nb = \"maas\"\n");
    assert!(parse_scenario("s.toml", &ok).is_ok(), "the maas host exists in onboarding runs");
    assert!(step("kind = \"partition\"\na = \"controller\"\nb = \"maas\"", "").contains("unknown host \"maas\""));
}

#[test]
fn an_onboarding_run_gives_the_same_digest_twice_and_onboards_its_machines() {
    let text = r#"
schema_version = 1
description = "two machines onboard"
seed = 7
duration_ms_max = 3_600_000
[fleet]
nodes = 1
[onboarding]
nodes = 2
"#;
    let scenario = parse_scenario("t.toml", text).unwrap();
    let identity = RunIdentity { source: "t.toml".into(), run_index: None, repro: String::new() };
    let first = run(&scenario.run, scenario.seed, &identity, true);
    let second = run(&scenario.run, scenario.seed, &identity, false);
    assert_eq!(first.record.trace_digest, second.record.trace_digest);
    assert!(first.record.verdict.passed(), "{:#?}", first.record);
    let completed = first.trace.iter().filter(|line| line.contains("\"event\":\"completed\"")).count();
    assert_eq!(completed, 2);
    let enrolled = first.trace.iter().filter(|line| line.contains("\"kind\":\"site.agent_enrol\"")).count();
    assert_eq!(enrolled, 2);
}
