//! The engine's real MAAS adapter (`engine::adapters::http::maas::MaasClient`) over real HTTP
//! (`sim::wire::http::HyperTransport` on loopback TCP), against wiremock stubs that answer as a real MAAS 2.0 region
//! does (shapes, statuses, exact messages and `Retry-After` from `reference/maas-api-notes.md` §2–§4).
//!
//! The stubs also check the request: method, path, `?op=` and every query pair, the form body pair by pair (repeated
//! keys included), and an `Authorization` header that parses, as MAAS's server parses it, into OAuth 1.0 PLAINTEXT
//! with the controller's consumer key, token and `&<token secret>` signature. Each stub expects exactly one call.
//!
//! The scenario bodies (`body_*`) take any `MaasApi`, so the same assertions run against the fake MAAS served over
//! TCP once its front end exists (`docs/fidelity.md` lists which test checks which behaviour).

#![recursion_limit = "256"]

use std::future::Future;
use std::sync::{Arc, Mutex};

use engine::adapters::http::HttpTransport;
use engine::adapters::http::maas::{MaasClient, VlanNumber};
use engine::adapters::http::oauth::HeaderStyle;
use engine::ports::site::{Interface, MaasApi, MaasError, MachineStatus, NewMachine, PowerState};
use engine::ports::{Clock, TransportError};
use engine::secret::Secret;
use serde_json::{Value, json};
use sim::wire::http::HyperTransport;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

// --- the client under test ------------------------------------------------------------------------------------------

const CONSUMER_KEY: &str = "Dc9ZqSvjNuVRqTzbAB";
const TOKEN_KEY: &str = "LtwmCqD8ymDyUPPgPh";
const TOKEN_SECRET: &str = "fleetsim-secret-tokenSecret9Xk2";
const POWER_PASS: &str = "fleetsim-secret-bmcPass";
const USER_DATA: &str = "#cloud-config\nbootstrap_token: fleetsim-secret-userData\n";
/// 2026-01-01T01:00:00Z.
const NOW_MS: u64 = 1_767_229_200_000;
const API: &str = "/MAAS/api/2.0/";

struct FixedClock(u64);

impl Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        self.0
    }

    fn monotonic_ms(&self) -> u64 {
        self.0
    }

    fn sleep_ms(&self, _duration_ms: u64) -> impl Future<Output = ()> {
        std::future::ready(())
    }
}

fn api_key() -> Secret {
    Secret::new(format!("{CONSUMER_KEY}:{TOKEN_KEY}:{TOKEN_SECRET}"))
}

fn client(base_url: &str) -> MaasClient<impl HttpTransport + use<>, FixedClock> {
    let transport = HyperTransport::tcp(base_url).expect("the mock server's url");
    MaasClient::new(transport, FixedClock(NOW_MS), &api_key(), 7, 5_000).expect("a well-formed key")
}

// --- request checks -------------------------------------------------------------------------------------------------

/// The `Authorization` header as MAAS reads it (`parse_auth_params`: after `OAuth`, split on `,`, then on the first
/// `=`, strip quotes; piston then percent-decodes each value).
fn oauth_params(request: &Request) -> Option<Vec<(String, String)>> {
    let header = request.headers.get("authorization")?.to_str().ok()?;
    let params = header.strip_prefix("OAuth ")?;
    let mut pairs = Vec::new();
    for part in params.split(',') {
        let (name, value) = part.trim().split_once('=')?;
        pairs.push((name.to_owned(), unquote(value.trim_matches('"'))?));
    }
    Some(pairs)
}

/// Python's `urllib.parse.unquote`: `%XX` decoded, everything else (`&`, `+`) kept.
fn unquote(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn signed_by_the_controller(request: &Request) -> bool {
    let Some(params) = oauth_params(request) else { return false };
    let get = |name: &str| params.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str());
    get("oauth_signature_method") == Some("PLAINTEXT")
        && get("oauth_consumer_key") == Some(CONSUMER_KEY)
        && get("oauth_token") == Some(TOKEN_KEY)
        && get("oauth_signature") == Some(&format!("&{TOKEN_SECRET}"))
        && get("oauth_timestamp") == Some(&(NOW_MS / 1000).to_string())
        && get("oauth_nonce").is_some_and(|nonce| !nonce.is_empty())
        && get("oauth_version").is_none_or(|version| version == "1.0")
}

fn pairs(text: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(text.as_bytes()).map(|(name, value)| (name.into_owned(), value.into_owned())).collect()
}

/// One MAAS call as the adapter must send it.
struct Call {
    method: &'static str,
    path: String,
    query: Vec<(String, String)>,
    /// `None`: no form body is checked (GET, DELETE).
    form: Option<Vec<(String, String)>>,
}

impl wiremock::Match for Call {
    fn matches(&self, request: &Request) -> bool {
        let form_ok = match &self.form {
            None => true,
            Some(expected) => {
                let content_type = request.headers.get("content-type").and_then(|value| value.to_str().ok());
                content_type == Some("application/x-www-form-urlencoded")
                    && pairs(&String::from_utf8_lossy(&request.body)) == *expected
            }
        };
        request.method.as_str() == self.method
            && request.url.path() == self.path
            && pairs(request.url.query().unwrap_or_default()) == self.query
            && form_ok
            && signed_by_the_controller(request)
    }
}

fn owned(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect()
}

/// Mounts a stub that answers `response` to exactly one call `method path?query` with `form`.
async fn stub(
    server: &MockServer,
    method: &'static str,
    path: &str,
    query: &[(&str, &str)],
    form: Option<&[(&str, &str)]>,
    response: ResponseTemplate,
) {
    let call = Call { method, path: format!("{API}{path}"), query: owned(query), form: form.map(owned) };
    Mock::given(call).respond_with(response).expect(1).mount(server).await;
}

// --- real MAAS answers ----------------------------------------------------------------------------------------------

fn json_answer(status: u16, body: Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(body).insert_header("X-MAAS-API-Hash", "0c7e5fd8")
}

/// `MAASAPIException` bodies: `text/plain; charset=utf-8` holding the message.
fn text_answer(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .set_body_raw(message.as_bytes().to_vec(), "text/plain; charset=utf-8")
        .insert_header("X-MAAS-API-Hash", "0c7e5fd8")
}

fn vlan(id: u64, mtu: u16) -> Value {
    json!({"id": id, "name": "untagged", "vid": 0, "mtu": mtu, "fabric": format!("fabric-{id}"), "fabric_id": id - 5000,
           "primary_rack": "7xkwq3", "secondary_rack": null, "dhcp_on": id == 5001, "external_dhcp": null,
           "relay_vlan": null, "space": "undefined", "resource_uri": format!("/MAAS/api/2.0/vlans/{id}/")})
}

fn subnet(id: u64, cidr: &str, vlan_id: u64, mtu: u16) -> Value {
    json!({"id": id, "name": cidr, "description": "", "vlan": vlan(vlan_id, mtu), "cidr": cidr, "rdns_mode": 2,
           "gateway_ip": null, "dns_servers": [], "allow_dns": true, "allow_proxy": true, "active_discovery": false,
           "managed": true, "disabled_boot_architectures": [], "space": "undefined",
           "resource_uri": format!("/MAAS/api/2.0/subnets/{id}/")})
}

fn interface(system_id: &str, id: u64, name: &str, mac: &str, vlan_value: Value, links: Value, tags: Value) -> Value {
    json!({"system_id": system_id, "id": id, "name": name, "type": "physical", "vlan": vlan_value,
           "mac_address": mac, "parents": [], "children": [], "tags": tags, "enabled": true, "links": links,
           "params": "", "discovered": null, "effective_mtu": 1500, "vendor": "Mellanox Technologies",
           "product": "MT2910 Family [ConnectX-7]", "firmware_version": "28.39.1002", "link_connected": true,
           "interface_speed": 400000, "link_speed": 400000, "numa_node": 0, "sriov_max_vf": 0,
           "resource_uri": format!("/MAAS/api/2.0/nodes/{system_id}/interfaces/{id}/")})
}

fn boss_disk(system_id: &str) -> Value {
    json!({"system_id": system_id, "id": 37, "name": "sda", "uuid": null, "type": "physical",
           "path": "/dev/disk/by-dname/sda", "model": "Dell BOSS-N1", "serial": "BOSS0001", "id_path": null,
           "size": 480_103_981_056u64, "block_size": 512, "available_size": 0, "used_size": 480_103_981_056u64,
           "used_for": "GPT partitioned with 2 partitions", "tags": ["ssd"], "filesystem": null,
           "partition_table_type": "GPT", "partitions": [], "firmware_version": "1.0", "storage_pool": null,
           "numa_node": 0, "resource_uri": format!("/MAAS/api/2.0/nodes/{system_id}/blockdevices/37/")})
}

fn nvme_disk(system_id: &str) -> Value {
    json!({"system_id": system_id, "id": 38, "name": "nvme0n1", "uuid": null, "type": "physical",
           "path": "/dev/disk/by-dname/nvme0n1", "model": "SAMSUNG MZWLO3T8HCLS", "serial": "S6NANE0W1", "id_path": null,
           "size": 3_840_755_982_336u64, "block_size": 4096, "available_size": 3_840_755_982_336u64, "used_size": 0,
           "used_for": "Unused", "tags": ["ssd"], "filesystem": null, "partition_table_type": null,
           "partitions": [], "firmware_version": "GDC7102Q", "storage_pool": null, "numa_node": 1,
           "resource_uri": format!("/MAAS/api/2.0/nodes/{system_id}/blockdevices/38/")})
}

/// A deployed machine with hardware sync on, last synced 10 minutes before `NOW_MS` (interval 15 minutes).
fn deployed_machine() -> Value {
    let system_id = "d8n3re";
    let boot = interface(
        system_id,
        69,
        "eno1",
        "0C:42:A1:00:00:01",
        vlan(5001, 1500),
        json!([{"id": 4, "mode": "auto", "ip_address": "10.0.0.21", "subnet": subnet(3, "10.0.0.0/24", 5001, 1500)}]),
        json!([]),
    );
    let roce = interface(system_id, 70, "ens1f0np0", "0c:42:a1:00:00:02", vlan(5002, 9000), json!([]), json!(["roce"]));
    json!({
        "system_id": system_id, "hostname": "gpu-node-01", "description": "", "hardware_uuid": null,
        "domain": {"id": 0, "name": "maas"}, "fqdn": "gpu-node-01.maas", "owner": "controller", "owner_data": {},
        "locked": false, "bios_boot_method": "uefi", "architecture": "amd64/generic", "min_hwe_kernel": "",
        "hwe_kernel": "ga-22.04", "cpu_count": 128, "cpu_speed": 2000, "memory": 1_048_576, "swap_size": null,
        "storage": 4_320_859.96, "status": 6, "osystem": "ubuntu", "distro_series": "jammy", "ephemeral_deploy": false,
        "error_description": "", "netboot": false, "power_type": "redfish", "power_state": "on",
        "tag_names": [], "address_ttl": null, "ip_addresses": ["10.0.0.21"],
        "boot_interface": boot, "interface_set": [boot, roce],
        "zone": {"id": 1, "name": "default"}, "pool": {"id": 0, "name": "default"}, "disable_ipv4": false,
        "boot_disk": boss_disk(system_id), "blockdevice_set": [boss_disk(system_id), nvme_disk(system_id)],
        "physicalblockdevice_set": [], "virtualblockdevice_set": [], "volume_groups": [], "raids": [],
        "cache_sets": [], "bcaches": [], "special_filesystems": [], "parent": null,
        "status_action": "", "status_message": "Deployed", "status_name": "Deployed",
        "node_type": 0, "node_type_name": "Machine",
        "default_gateways": {"ipv4": {"gateway_ip": null, "link_id": null}, "ipv6": {"gateway_ip": null, "link_id": null}},
        "commissioning_status": 2, "commissioning_status_name": "Passed", "testing_status": 2,
        "testing_status_name": "Passed", "interface_test_status": -1, "interface_test_status_name": "Unknown",
        "hardware_info": {"system_vendor": "Dell Inc.", "system_product": "PowerEdge XE9680"},
        "workload_annotations": {}, "enable_hw_sync": true, "sync_interval": 900,
        "last_sync": "2026-01-01T00:50:00.123", "next_sync": "2026-01-01T01:05:00.123",
        "enable_kernel_crash_dump": false, "is_dpu": false,
        "resource_uri": format!("/MAAS/api/2.0/machines/{system_id}/")
    })
}

/// A machine MAAS just enlisted: New, no hardware sync, no status message yet.
fn new_machine() -> Value {
    let system_id = "4y3h7n";
    let boot = interface(system_id, 81, "eth0", "0c:42:a1:00:01:01", vlan(5001, 1500), json!([]), json!([]));
    json!({
        "system_id": system_id, "hostname": "gpu-node-02", "fqdn": "gpu-node-02.maas", "owner": null, "locked": false,
        "architecture": "amd64/generic", "cpu_count": 0, "memory": 0, "status": 0, "status_name": "New",
        "status_message": null, "status_action": null, "power_type": "redfish", "power_state": "unknown",
        "osystem": "", "distro_series": "", "netboot": true, "ip_addresses": [], "boot_interface": boot,
        "interface_set": [boot], "boot_disk": null, "blockdevice_set": [], "enable_hw_sync": false,
        "sync_interval": null, "last_sync": null, "next_sync": null, "node_type": 0, "node_type_name": "Machine",
        "resource_uri": format!("/MAAS/api/2.0/machines/{system_id}/")
    })
}

fn http_error(status: u16, message: &str, retry_after_s: Option<u32>) -> MaasError {
    MaasError::Http { status, message: message.to_owned(), retry_after_s }
}

// --- scenario bodies (any MaasApi) ----------------------------------------------------------------------------------

async fn body_reads_a_deployed_machine(maas: &impl MaasApi, system_id: &str, power_address: &str) {
    let machine = maas.machine(system_id).await.expect("the machine");
    assert_eq!(machine.system_id, system_id);
    assert_eq!(machine.status, MachineStatus::Deployed);
    assert_eq!(machine.power_address.as_deref(), Some(power_address));
    assert!(machine.enable_hw_sync);
    assert!(machine.hw_sync_healthy, "synced within 1.5 intervals");
    assert!(machine.macs.iter().all(|mac| *mac == mac.to_ascii_lowercase()), "{:?}", machine.macs);
}

async fn body_unknown_machine_is_404(maas: &impl MaasApi, system_id: &str) {
    let error = maas.machine(system_id).await.expect_err("no such machine");
    assert_eq!(error, http_error(404, "No Machine matches the given query.", None));
    assert!(!error.is_transient());
}

async fn body_deploy_of_a_new_machine_is_409(maas: &impl MaasApi, system_id: &str) {
    let error = maas.deploy(system_id, &Secret::new(USER_DATA), true).await.expect_err("New cannot deploy");
    assert_eq!(error, http_error(409, "Can't deploy a machine that is in the 'New' state", None));
}

async fn body_mark_fixed_of_a_machine_not_broken_is_409(maas: &impl MaasApi, system_id: &str) {
    let error = maas.mark_fixed(system_id).await.expect_err("not broken");
    assert_eq!(error, http_error(409, "Can't mark a non-broken node as 'Ready'.", None));
}

async fn body_wrong_key_is_401(maas: &impl MaasApi) {
    let error = maas.machines().await.expect_err("an unknown key");
    assert_eq!(error, http_error(401, "Authorization Error: Invalid API key.", None));
    assert_eq!(error.status(), Some(401));
}

// --- wiremock: real MAAS answers ------------------------------------------------------------------------------------

#[tokio::test]
async fn machines_are_listed_with_their_power_addresses_from_one_bulk_call() {
    let server = MockServer::start().await;
    stub(&server, "GET", "machines/", &[], None, json_answer(200, json!([deployed_machine(), new_machine()]))).await;
    let params = json!({
        "d8n3re": {"power_address": "bmc-gpu-node-01", "power_user": "root", "power_pass": POWER_PASS, "node_id": "1"},
        "4y3h7n": {}
    });
    let query = [("op", "power_parameters"), ("id", "d8n3re"), ("id", "4y3h7n")];
    stub(&server, "GET", "machines/", &query, None, json_answer(200, params)).await;

    let machines = client(&server.uri()).machines().await.expect("the list");
    assert_eq!(machines.len(), 2);
    let (deployed, new) = (&machines[0], &machines[1]);
    assert_eq!(
        (deployed.system_id.as_str(), deployed.hostname.as_str(), &deployed.status),
        ("d8n3re", "gpu-node-01", &MachineStatus::Deployed)
    );
    assert_eq!(deployed.status_message, "Deployed");
    assert_eq!(deployed.power_address.as_deref(), Some("bmc-gpu-node-01"));
    assert_eq!(deployed.macs, ["0c:42:a1:00:00:01", "0c:42:a1:00:00:02"], "boot first, lowercase, once each");
    assert!(deployed.enable_hw_sync && deployed.hw_sync_healthy);
    assert_eq!((new.status.clone(), new.status_message.as_str()), (MachineStatus::New, ""));
    assert_eq!(new.power_address, None, "no power parameters");
    assert!(!new.enable_hw_sync && !new.hw_sync_healthy);
}

#[tokio::test]
async fn hardware_sync_overdue_by_more_than_half_an_interval_is_unhealthy() {
    let server = MockServer::start().await;
    let mut machine = deployed_machine();
    machine["last_sync"] = json!("2026-01-01T00:37:29.999"); // 22 min 30 s + 1 ms before now, interval 15 min
    stub(&server, "GET", "machines/d8n3re/", &[], None, json_answer(200, machine)).await;
    let params = json!({"power_address": "bmc-gpu-node-01", "power_user": "root", "power_pass": POWER_PASS});
    stub(&server, "GET", "machines/d8n3re/", &[("op", "power_parameters")], None, json_answer(200, params)).await;
    let machine = client(&server.uri()).machine("d8n3re").await.expect("the machine");
    assert!(machine.enable_hw_sync && !machine.hw_sync_healthy);
}

#[tokio::test]
async fn a_machine_is_read_with_its_power_parameters() {
    let server = MockServer::start().await;
    stub(&server, "GET", "machines/d8n3re/", &[], None, json_answer(200, deployed_machine())).await;
    let params = json!({"power_address": "bmc-gpu-node-01", "power_user": "root", "power_pass": POWER_PASS});
    stub(&server, "GET", "machines/d8n3re/", &[("op", "power_parameters")], None, json_answer(200, params)).await;
    body_reads_a_deployed_machine(&client(&server.uri()), "d8n3re", "bmc-gpu-node-01").await;
}

#[tokio::test]
async fn an_unknown_machine_is_404_with_maas_s_text() {
    let server = MockServer::start().await;
    stub(&server, "GET", "machines/xyz999/", &[], None, text_answer(404, "No Machine matches the given query.")).await;
    body_unknown_machine_is_404(&client(&server.uri()), "xyz999").await;
}

#[tokio::test]
async fn create_sends_the_redfish_form_and_returns_the_commissioning_machine() {
    let server = MockServer::start().await;
    let form = [
        ("hostname", "gpu-node-02"),
        ("architecture", "amd64"),
        ("mac_addresses", "0c:42:a1:00:01:01"),
        ("power_type", "redfish"),
        ("power_parameters_power_address", "bmc-gpu-node-02"),
        ("power_parameters_power_user", "root"),
        ("power_parameters_power_pass", POWER_PASS),
        ("commission", "true"),
    ];
    let mut created = new_machine();
    created["status"] = json!(1);
    created["status_name"] = json!("Commissioning");
    created["status_message"] = json!("Commissioning");
    stub(&server, "POST", "machines/", &[], Some(&form), json_answer(200, created)).await;
    let new = NewMachine {
        hostname: "gpu-node-02".into(),
        pxe_mac: "0c:42:a1:00:01:01".into(),
        power_address: "bmc-gpu-node-02".into(),
        power_user: "root".into(),
        power_password: Secret::new(POWER_PASS),
    };
    let machine = client(&server.uri()).create_machine(&new).await.expect("created");
    assert_eq!(machine.status, MachineStatus::Commissioning);
    assert_eq!(machine.power_address.as_deref(), Some("bmc-gpu-node-02"));
    assert_eq!(machine.macs, ["0c:42:a1:00:01:01"]);
}

#[tokio::test]
async fn deploy_sends_base64_user_data_and_hardware_sync() {
    let server = MockServer::start().await;
    let encoded = "I2Nsb3VkLWNvbmZpZwpib290c3RyYXBfdG9rZW46IGZsZWV0c2ltLXNlY3JldC11c2VyRGF0YQo=";
    let form = [("user_data", encoded), ("enable_hw_sync", "true")];
    let mut deploying = deployed_machine();
    deploying["status"] = json!(9);
    deploying["status_name"] = json!("Deploying");
    stub(&server, "POST", "machines/d8n3re/", &[("op", "deploy")], Some(&form), json_answer(200, deploying)).await;
    let machine = client(&server.uri()).deploy("d8n3re", &Secret::new(USER_DATA), true).await.expect("deploying");
    assert_eq!(machine.status, MachineStatus::Deploying);
    assert_eq!(machine.power_address, None, "an op's answer carries no power parameters (no second call)");
}

#[tokio::test]
async fn deploy_of_a_new_machine_is_409_with_maas_s_text() {
    let server = MockServer::start().await;
    let encoded = "I2Nsb3VkLWNvbmZpZwpib290c3RyYXBfdG9rZW46IGZsZWV0c2ltLXNlY3JldC11c2VyRGF0YQo=";
    let form = [("user_data", encoded), ("enable_hw_sync", "true")];
    let answer = text_answer(409, "Can't deploy a machine that is in the 'New' state");
    stub(&server, "POST", "machines/4y3h7n/", &[("op", "deploy")], Some(&form), answer).await;
    body_deploy_of_a_new_machine_is_409(&client(&server.uri()), "4y3h7n").await;
}

#[tokio::test]
async fn a_serialisation_conflict_is_409_with_retry_after_5() {
    let server = MockServer::start().await;
    let answer = text_answer(409, "Conflict: could not serialize access due to concurrent update")
        .insert_header("Retry-After", "5");
    stub(&server, "POST", "machines/d8n3re/", &[("op", "commission")], Some(&[]), answer).await;
    let error = client(&server.uri()).commission("d8n3re").await.expect_err("a conflict");
    assert_eq!(error, http_error(409, "Conflict: could not serialize access due to concurrent update", Some(5)));
    assert!(!error.is_transient(), "a 409 is the engine's to judge, not a blind retry");
}

#[tokio::test]
async fn an_unavailable_region_is_503_with_retry_after_10_and_transient() {
    let server = MockServer::start().await;
    let answer = text_answer(503, "Unable to connect to any rack controller 7xkwq3; no connections available.")
        .insert_header("Retry-After", "10");
    stub(&server, "POST", "machines/d8n3re/", &[("op", "release")], Some(&[("erase", "true")]), answer).await;
    let error = client(&server.uri()).release("d8n3re", true).await.expect_err("unavailable");
    assert_eq!(
        error,
        http_error(503, "Unable to connect to any rack controller 7xkwq3; no connections available.", Some(10))
    );
    assert!(error.is_transient());
}

#[tokio::test]
async fn a_form_error_dict_is_rendered_field_by_field() {
    let server = MockServer::start().await;
    let answer =
        json_answer(400, json!({"__all__": ["Commission is not available because of the current state of the node."]}));
    stub(&server, "POST", "machines/d8n3re/", &[("op", "commission")], Some(&[]), answer).await;
    let error = client(&server.uri()).commission("d8n3re").await.expect_err("a form error");
    assert_eq!(
        error,
        http_error(400, "__all__: Commission is not available because of the current state of the node.", None)
    );
}

#[tokio::test]
async fn a_wrong_key_is_401_with_maas_s_text() {
    let server = MockServer::start().await;
    // The stub answers every GET machines/ whatever its signature, as MAAS does for a key it does not know.
    Mock::given(wiremock::matchers::method("GET"))
        .and(wiremock::matchers::path(format!("{API}machines/")))
        .respond_with(text_answer(401, "Authorization Error: Invalid API key."))
        .expect(1)
        .mount(&server)
        .await;
    body_wrong_key_is_401(&client(&server.uri())).await;
}

#[tokio::test]
async fn mark_fixed_of_a_machine_not_broken_is_409_with_maas_s_text() {
    let server = MockServer::start().await;
    let answer = text_answer(409, "Can't mark a non-broken node as 'Ready'.");
    stub(&server, "POST", "machines/d8n3re/", &[("op", "mark_fixed")], Some(&[]), answer).await;
    body_mark_fixed_of_a_machine_not_broken_is_409(&client(&server.uri()), "d8n3re").await;
}

#[tokio::test]
async fn abort_release_without_erase_and_mark_fixed_post_their_ops() {
    let server = MockServer::start().await;
    let mut allocated = deployed_machine();
    allocated["status"] = json!(10);
    allocated["status_name"] = json!("Allocated");
    stub(&server, "POST", "machines/d8n3re/", &[("op", "abort")], Some(&[]), json_answer(200, allocated)).await;
    let mut releasing = deployed_machine();
    releasing["status"] = json!(12);
    releasing["status_name"] = json!("Releasing");
    let form = [("erase", "false")];
    stub(&server, "POST", "machines/d8n3re/", &[("op", "release")], Some(&form), json_answer(200, releasing)).await;
    let mut ready = deployed_machine();
    ready["status"] = json!(4);
    ready["status_name"] = json!("Ready");
    stub(&server, "POST", "machines/d8n3re/", &[("op", "mark_fixed")], Some(&[]), json_answer(200, ready)).await;
    let maas = client(&server.uri());
    assert_eq!(maas.abort("d8n3re").await.expect("aborted").status, MachineStatus::Allocated);
    assert_eq!(maas.release("d8n3re", false).await.expect("releasing").status, MachineStatus::Releasing);
    assert_eq!(maas.mark_fixed("d8n3re").await.expect("fixed").status, MachineStatus::Ready);
}

#[tokio::test]
async fn events_ask_for_debug_and_up_a_thousand_at_a_time_after_the_last_seen() {
    let server = MockServer::start().await;
    let page = json!({
        "count": 2,
        "events": [
            {"username": "controller", "node": "d8n3re", "hostname": "gpu-node-01", "id": 1667, "level": "INFO",
             "created": "Thu, 01 Jan. 2026 00:58:10", "type": "Loading ephemeral", "description": ""},
            {"username": "controller", "node": "d8n3re", "hostname": "gpu-node-01", "id": 1666, "level": "DEBUG",
             "created": "Thu, 01 Jan. 2026 00:58:02", "type": "PXE Request", "description": "commissioning"}
        ],
        "next_uri": "/MAAS/api/2.0/events/?op=query&id=d8n3re&level=DEBUG&limit=1000&after=1667",
        "prev_uri": "/MAAS/api/2.0/events/?op=query&id=d8n3re&level=DEBUG&limit=1000&before=1666"
    });
    let query = [("op", "query"), ("id", "d8n3re"), ("level", "DEBUG"), ("limit", "1000"), ("after", "1665")];
    stub(&server, "GET", "events/", &query, None, json_answer(200, page)).await;
    let query = [("op", "query"), ("id", "d8n3re"), ("level", "DEBUG"), ("limit", "1000")];
    let empty = json!({"count": 0, "events": [], "next_uri": "/MAAS/api/2.0/events/?op=query&limit=1000&after=0",
                       "prev_uri": null});
    stub(&server, "GET", "events/", &query, None, json_answer(200, empty)).await;
    let maas = client(&server.uri());
    let events = maas.events("d8n3re", Some(1665)).await.expect("the page");
    let seen: Vec<(u64, &str, &str, &str)> = events
        .iter()
        .map(|event| (event.id, event.level.as_str(), event.text.as_str(), event.description.as_str()))
        .collect();
    assert_eq!(
        seen,
        [(1667, "INFO", "Loading ephemeral", ""), (1666, "DEBUG", "PXE Request", "commissioning")],
        "MAAS's order (newest first) kept"
    );
    assert_eq!(maas.events("d8n3re", None).await.expect("an empty page"), []);
}

#[tokio::test]
async fn disks_are_the_block_devices_with_the_machine_s_boot_disk_marked() {
    let server = MockServer::start().await;
    stub(&server, "GET", "machines/d8n3re/", &[], None, json_answer(200, deployed_machine())).await;
    let devices = json!([boss_disk("d8n3re"), nvme_disk("d8n3re")]);
    stub(&server, "GET", "nodes/d8n3re/blockdevices/", &[], None, json_answer(200, devices)).await;
    let disks = client(&server.uri()).disks("d8n3re").await.expect("the disks");
    let seen: Vec<(u64, &str, &str, &str, bool)> = disks
        .iter()
        .map(|disk| (disk.id, disk.name.as_str(), disk.model.as_str(), disk.serial.as_str(), disk.boot))
        .collect();
    assert_eq!(
        seen,
        [(37, "sda", "Dell BOSS-N1", "BOSS0001", true), (38, "nvme0n1", "SAMSUNG MZWLO3T8HCLS", "S6NANE0W1", false)]
    );
}

#[tokio::test]
async fn set_boot_disk_is_ok_when_ready_and_409_otherwise() {
    let server = MockServer::start().await;
    let op = [("op", "set_boot_disk")];
    stub(&server, "POST", "nodes/d8n3re/blockdevices/37/", &op, Some(&[]), text_answer(200, "OK")).await;
    let refused = text_answer(409, "Cannot set as boot disk because the machine is not Ready.");
    stub(&server, "POST", "nodes/d8n3re/blockdevices/38/", &op, Some(&[]), refused).await;
    let maas = client(&server.uri());
    maas.set_boot_disk("d8n3re", 37).await.expect("piston's OK");
    assert_eq!(
        maas.set_boot_disk("d8n3re", 38).await,
        Err(http_error(409, "Cannot set as boot disk because the machine is not Ready.", None))
    );
}

#[tokio::test]
async fn interfaces_carry_their_vlan_auto_link_and_roce_tag() {
    let server = MockServer::start().await;
    let machine = deployed_machine();
    let list = machine["interface_set"].clone();
    Mock::given(Call { method: "GET", path: format!("{API}nodes/d8n3re/interfaces/"), query: vec![], form: None })
        .respond_with(json_answer(200, list))
        .expect(2)
        .mount(&server)
        .await;
    let interfaces = client(&server.uri()).interfaces("d8n3re").await.expect("the interfaces");
    let interface = |id: u64, name: &str, mac: &str, vlan_vid: u16, auto_linked: bool, roce: bool| Interface {
        id,
        name: name.to_owned(),
        mac: mac.to_owned(),
        vlan_vid: Some(vlan_vid),
        auto_linked,
        roce,
    };
    assert_eq!(
        interfaces,
        [
            interface(69, "eno1", "0c:42:a1:00:00:01", 5001, true, false),
            interface(70, "ens1f0np0", "0c:42:a1:00:00:02", 5002, false, true)
        ],
        "the VLAN's MAAS id by default (the site's VLANs are untagged)"
    );
    let by_vid = client(&server.uri()).with_vlan_number(VlanNumber::Vid);
    let interfaces = by_vid.interfaces("d8n3re").await.expect("the interfaces");
    assert_eq!(interfaces.iter().map(|iface| iface.vlan_vid).collect::<Vec<_>>(), [Some(0), Some(0)]);
}

#[tokio::test]
async fn subnets_carry_their_vlan_and_its_mtu() {
    let server = MockServer::start().await;
    let list = json!([subnet(3, "10.0.0.0/24", 5001, 1500), subnet(4, "172.16.0.0/16", 5002, 9000)]);
    stub(&server, "GET", "subnets/", &[], None, json_answer(200, list)).await;
    let subnets = client(&server.uri()).subnets().await.expect("the subnets");
    let seen: Vec<(u64, &str, u16, u16)> =
        subnets.iter().map(|subnet| (subnet.id, subnet.cidr.as_str(), subnet.vlan_vid, subnet.mtu)).collect();
    assert_eq!(seen, [(3, "10.0.0.0/24", 5001, 1500), (4, "172.16.0.0/16", 5002, 9000)]);
}

#[tokio::test]
async fn link_subnet_posts_mode_auto_and_the_subnet_id() {
    let server = MockServer::start().await;
    let answer = json_answer(200, deployed_machine()["interface_set"][0].clone());
    let form = [("mode", "AUTO"), ("subnet", "3")];
    stub(&server, "POST", "nodes/d8n3re/interfaces/69/", &[("op", "link_subnet")], Some(&form), answer).await;
    client(&server.uri()).link_subnet_auto("d8n3re", 69, 3).await.expect("linked");
}

#[tokio::test]
async fn power_is_queried_switched_off_and_the_machine_deleted() {
    let server = MockServer::start().await;
    let op = [("op", "query_power_state")];
    stub(&server, "GET", "machines/d8n3re/", &op, None, json_answer(200, json!({"state": "on"}))).await;
    stub(&server, "GET", "machines/4y3h7n/", &op, None, json_answer(200, json!({"state": "error"}))).await;
    let op = [("op", "power_off")];
    stub(&server, "POST", "machines/d8n3re/", &op, Some(&[]), json_answer(200, deployed_machine())).await;
    stub(&server, "POST", "machines/4y3h7n/", &op, Some(&[]), json_answer(200, Value::Null)).await;
    Mock::given(Call { method: "DELETE", path: format!("{API}machines/d8n3re/"), query: vec![], form: None })
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    let maas = client(&server.uri());
    assert_eq!(maas.power_state("d8n3re").await, Ok(PowerState::On));
    assert_eq!(maas.power_state("4y3h7n").await, Ok(PowerState::Unknown));
    maas.power_off("d8n3re").await.expect("the machine JSON");
    maas.power_off("4y3h7n").await.expect("null: no power action was sent");
    maas.delete_machine("d8n3re").await.expect("204");
}

#[tokio::test]
async fn the_unquoted_header_style_is_read_the_same_way() {
    let server = MockServer::start().await;
    Mock::given(Call { method: "GET", path: format!("{API}subnets/"), query: vec![], form: None })
        .and(wiremock::matchers::header_regex("authorization", "^OAuth oauth_version=1.0, "))
        .respond_with(json_answer(200, json!([])))
        .expect(1)
        .mount(&server)
        .await;
    let maas = client(&server.uri()).with_header_style(HeaderStyle::Unquoted);
    assert_eq!(maas.subnets().await, Ok(vec![]));
}

#[tokio::test]
async fn every_request_carries_a_fresh_nonce() {
    let server = MockServer::start().await;
    Mock::given(Call { method: "GET", path: format!("{API}subnets/"), query: vec![], form: None })
        .respond_with(json_answer(200, json!([])))
        .expect(3)
        .mount(&server)
        .await;
    let maas = client(&server.uri());
    for _ in 0..3 {
        maas.subnets().await.expect("the subnets");
    }
    let requests = server.received_requests().await.expect("recording is on");
    let mut nonces: Vec<String> = requests
        .iter()
        .filter_map(oauth_params)
        .filter_map(|params| params.into_iter().find(|(name, _)| name == "oauth_nonce").map(|(_, nonce)| nonce))
        .collect();
    nonces.sort();
    nonces.dedup();
    assert_eq!(nonces.len(), 3, "{nonces:?}");
}

#[tokio::test]
async fn an_undecodable_2xx_is_an_error_that_names_the_op_not_the_body() {
    let server = MockServer::start().await;
    // A proxy's page, with a secret in it that must not be echoed.
    let answer =
        ResponseTemplate::new(200).set_body_raw(format!("<html>{POWER_PASS}</html>").into_bytes(), "text/html");
    stub(&server, "GET", "machines/d8n3re/", &[], None, answer).await;
    let error = client(&server.uri()).machine("d8n3re").await.expect_err("not JSON");
    assert_eq!(error, http_error(200, "unexpected answer body: read: not json at line 1 column 1", None));
}

#[tokio::test]
async fn nobody_listening_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let address = listener.local_addr().expect("bound");
    drop(listener);
    let error = client(&format!("http://{address}")).machines().await.expect_err("refused");
    assert_eq!(error, MaasError::Transport(TransportError::ConnectionRefused));
    assert!(error.is_transient());
}

/// A log sink for the tracing subscriber of one test thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[tokio::test]
async fn no_secret_reaches_an_error_a_debug_output_or_a_log_line() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(captured.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = MockServer::start().await;
    // Warm-up: the adapter's log callsites are registered by now (here or on another test's thread), then their
    // interest is recomputed with this thread's subscriber present. Otherwise a test thread that registered a callsite
    // while no subscriber existed could leave it switched off for the whole binary (tracing caches interest per
    // callsite), and this test would see no adapter line.
    stub(&server, "GET", "subnets/", &[], None, json_answer(200, json!([]))).await;
    client(&server.uri()).subnets().await.expect("warm-up");
    let _ = client("http://127.0.0.1:9").subnets().await;
    tracing::callsite::rebuild_interest_cache();

    let params = json!({"power_address": "bmc-gpu-node-01", "power_user": "root", "power_pass": POWER_PASS});
    stub(&server, "GET", "machines/d8n3re/", &[], None, json_answer(200, deployed_machine())).await;
    stub(&server, "GET", "machines/d8n3re/", &[("op", "power_parameters")], None, json_answer(200, params)).await;
    let encoded = "I2Nsb3VkLWNvbmZpZwpib290c3RyYXBfdG9rZW46IGZsZWV0c2ltLXNlY3JldC11c2VyRGF0YQo=";
    let form = [("user_data", encoded), ("enable_hw_sync", "false")];
    let refused = text_answer(409, "Can't deploy a machine that is in the 'Deployed' state");
    stub(&server, "POST", "machines/d8n3re/", &[("op", "deploy")], Some(&form), refused).await;
    let broken = ResponseTemplate::new(200)
        .set_body_raw(format!("{{\"state\": {POWER_PASS}}}").into_bytes(), "application/json");
    stub(&server, "GET", "machines/d8n3re/", &[("op", "query_power_state")], None, broken).await;

    let maas = client(&server.uri());
    let machine = maas.machine("d8n3re").await.expect("the machine");
    let deploy = maas.deploy("d8n3re", &Secret::new(USER_DATA), false).await.expect_err("refused");
    let power = maas.power_state("d8n3re").await.expect_err("undecodable");
    let bad_key = MaasClient::new(
        HyperTransport::tcp(&server.uri()).expect("a url"),
        FixedClock(NOW_MS),
        &Secret::new(format!("{TOKEN_SECRET}:only-two")),
        7,
        5_000,
    )
    .expect_err("two parts");
    let refused = client("http://127.0.0.1:9").machines().await.expect_err("nothing on the discard port");
    let logged = String::from_utf8_lossy(&captured.0.lock().expect("not poisoned")).into_owned();
    assert!(logged.contains("maas answered"), "the adapter logs its calls: {logged}");

    let outputs = [
        format!("{machine:?}"),
        format!("{deploy} {deploy:?}"),
        format!("{power} {power:?}"),
        format!("{bad_key} {bad_key:?}"),
        format!("{refused} {refused:?}"),
        format!("{maas:?}"),
        logged,
    ];
    for output in &outputs {
        for secret in [TOKEN_SECRET, POWER_PASS, "fleetsim-secret", "ZmxlZXRzaW0tc2VjcmV0"] {
            assert!(!output.contains(secret), "{secret} leaked into: {output}");
        }
    }
}

// --- the fake MAAS served over loopback TCP: the same bodies -----------------------------------------------------

/// The fake MAAS (`fakes::http::maas::router`) served by axum on a loopback port, at model time `now_ms`.
struct ServedFake {
    shared: fakes::http::SharedSite,
    now_ms: Arc<std::sync::atomic::AtomicU64>,
    base_url: String,
    controller_key: String,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for ServedFake {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl ServedFake {
    async fn start(machines: &[&str]) -> ServedFake {
        let mut site = fakes::maas::Site::new(fakes::maas::SiteConfig::new(42));
        for name in machines {
            site.add_machine(name);
        }
        let mut front = fakes::http::SiteFront::new(site);
        let controller_key = front.api_key_for(sim::world::site::CONTROLLER_MAAS_USER);
        let shared = front.shared();
        let now_ms = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let clock: fakes::http::Clock = {
            let now_ms = now_ms.clone();
            Arc::new(move || now_ms.load(std::sync::atomic::Ordering::SeqCst))
        };
        let router = fakes::http::maas::router(shared.clone(), clock);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let base_url = format!("http://{}", listener.local_addr().expect("bound"));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        ServedFake { shared, now_ms, base_url, controller_key, server }
    }

    fn site<T>(&self, f: impl FnOnce(&mut fakes::maas::Site) -> T) -> T {
        f(&mut self.shared.lock().expect("not poisoned").site)
    }

    /// Moves the model's time on, the machines with it.
    fn advance_to(&self, now_ms: u64) {
        self.now_ms.store(now_ms, std::sync::atomic::Ordering::SeqCst);
        let mut front = self.shared.lock().expect("not poisoned");
        let events = front.site.advance(now_ms);
        front.events.extend(events);
    }

    /// The controller's client, its clock on the model's time line (the wire's epoch is the model's 0).
    fn client(&self) -> MaasClient<impl HttpTransport + use<>, FixedClock> {
        let transport = HyperTransport::tcp(&self.base_url).expect("the fake's url");
        let clock = FixedClock(self.now_ms.load(std::sync::atomic::Ordering::SeqCst));
        MaasClient::new(transport, clock, &Secret::new(self.controller_key.clone()), 7, 5_000)
            .expect("the fake mints well-formed keys")
            .with_clock_origin_unix_ms(fakes::http::WIRE_EPOCH * 1000)
    }

    /// What the operator's inventory says about a racked machine.
    fn inventory(&self, name: &str) -> NewMachine {
        self.site(|site| {
            let machine = site.machine(name).expect("racked");
            let pxe_mac = machine.hardware().pxe_nic().expect("a PXE NIC").mac.clone();
            let (credential, _) = site.vault.power_credential(name).expect("racked with a login");
            NewMachine {
                hostname: name.to_owned(),
                pxe_mac,
                power_address: name.to_owned(),
                power_user: credential.user.clone(),
                power_password: Secret::new(credential.password.expose()),
            }
        })
    }
}

#[tokio::test]
async fn fake_creates_reads_and_lists_machines_with_their_power_addresses() {
    let fake = ServedFake::start(&["gpu-node-01", "gpu-node-02"]).await;
    let maas = fake.client();
    let new = fake.inventory("gpu-node-01");
    let created = maas.create_machine(&new).await.expect("created");
    assert_eq!(created.status, MachineStatus::Commissioning);
    assert_eq!(created.power_address.as_deref(), Some("gpu-node-01"));
    assert_eq!(created.macs.first(), Some(&new.pxe_mac.to_ascii_lowercase()));
    let read = maas.machine(&created.system_id).await.expect("read");
    assert_eq!(read, created);
    let listed = maas.machines().await.expect("listed");
    assert_eq!(listed, [created]);
}

#[tokio::test]
async fn fake_filters_the_list_by_mac_and_by_status_as_maas_does() {
    let fake = ServedFake::start(&["gpu-node-01", "gpu-node-02"]).await;
    let maas = fake.client();
    let (one, two) = (fake.inventory("gpu-node-01"), fake.inventory("gpu-node-02"));
    let created = maas.create_machine(&one).await.expect("created");
    let by_mac = maas.machines_with_mac(&one.pxe_mac.to_ascii_uppercase()).await.expect("listed by MAC");
    assert_eq!(by_mac, std::slice::from_ref(&created), "MAAS matches a MAC whatever its case");
    assert_eq!(maas.machines_with_mac(&two.pxe_mac).await.expect("listed"), [], "no machine has that MAC yet");
    assert_eq!(maas.new_machines().await.expect("listed"), [], "a created machine commissions at once: not NEW");
    assert_eq!(maas.machines().await.expect("listed"), [created]);
}

#[tokio::test]
async fn fake_unknown_machine_is_404_with_maas_s_text() {
    let fake = ServedFake::start(&[]).await;
    body_unknown_machine_is_404(&fake.client(), "xyz999").await;
}

#[tokio::test]
async fn fake_deploy_of_a_new_machine_and_mark_fixed_of_a_machine_not_broken_are_409_with_maas_s_text() {
    let fake = ServedFake::start(&["gpu-node-01"]).await;
    let maas = fake.client();
    let created = maas.create_machine(&fake.inventory("gpu-node-01")).await.expect("created");
    assert_eq!(maas.abort(&created.system_id).await.expect("aborted").status, MachineStatus::New);
    body_deploy_of_a_new_machine_is_409(&maas, &created.system_id).await;
    body_mark_fixed_of_a_machine_not_broken_is_409(&maas, &created.system_id).await;
}

#[tokio::test]
async fn fake_wrong_key_is_401_with_maas_s_text() {
    let fake = ServedFake::start(&[]).await;
    let transport = HyperTransport::tcp(&fake.base_url).expect("the fake's url");
    let wrong = format!("{CONSUMER_KEY}:{TOKEN_KEY}:{TOKEN_SECRET}");
    let maas = MaasClient::new(transport, FixedClock(0), &Secret::new(wrong), 7, 5_000).expect("a key");
    body_wrong_key_is_401(&maas).await;
}

#[tokio::test]
async fn fake_conflict_and_unavailable_carry_retry_after() {
    let fake = ServedFake::start(&["gpu-node-01"]).await;
    let maas = fake.client();
    fake.site(|site| {
        site.region.fail_next_with_409(5);
        site.region.fail_next_with_503(10);
    });
    assert!(matches!(maas.subnets().await, Err(MaasError::Http { status: 409, retry_after_s: Some(5), .. })));
    let unavailable = maas.subnets().await.expect_err("unavailable");
    assert!(matches!(unavailable, MaasError::Http { status: 503, retry_after_s: Some(10), .. }));
    assert!(unavailable.is_transient());
}

#[tokio::test]
async fn fake_commissioning_to_ready_with_disks_interfaces_subnets_and_events() {
    let fake = ServedFake::start(&["gpu-node-01"]).await;
    let created = fake.client().create_machine(&fake.inventory("gpu-node-01")).await.expect("created");
    let system_id = created.system_id.clone();
    fake.advance_to(40 * 60_000);
    let maas = fake.client();
    assert_eq!(maas.machine(&system_id).await.expect("read").status, MachineStatus::Ready);
    let events = maas.events(&system_id, None).await.expect("events");
    assert!(events.windows(2).all(|pair| pair[0].id > pair[1].id), "newest first");
    assert!(events.iter().any(|event| event.level == "DEBUG"), "DEBUG asked for and answered");
    assert!(events.iter().any(|event| event.text == "Ready"));
    let newest = events.first().map(|event| event.id);
    assert_eq!(maas.events(&system_id, newest).await.expect("nothing newer"), []);

    let disks = maas.disks(&system_id).await.expect("disks");
    assert!(!disks.is_empty());
    let boss = disks.iter().find(|disk| disk.model.contains("BOSS")).expect("a BOSS disk").id;
    maas.set_boot_disk(&system_id, boss).await.expect("OK");
    assert!(maas.disks(&system_id).await.expect("disks").iter().any(|disk| disk.id == boss && disk.boot));
    assert_eq!(maas.commission(&system_id).await.expect("commissioning again").status, MachineStatus::Commissioning);
    let not_ready = maas.set_boot_disk(&system_id, boss).await;
    assert_eq!(not_ready, Err(http_error(409, "Cannot set as boot disk because the machine is not Ready.", None)));
    assert_eq!(maas.abort(&system_id).await.expect("aborted").status, MachineStatus::New);

    let subnets = maas.subnets().await.expect("subnets");
    let interfaces = maas.interfaces(&system_id).await.expect("interfaces");
    let pxe = interfaces.iter().find(|iface| iface.vlan_vid == Some(5001)).expect("a PXE interface");
    let subnet = subnets.iter().find(|subnet| subnet.vlan_vid == 5001).expect("the PXE subnet");
    maas.link_subnet_auto(&system_id, pxe.id, subnet.id).await.expect("linked");
    let interfaces = maas.interfaces(&system_id).await.expect("interfaces");
    assert!(interfaces.iter().any(|iface| iface.id == pxe.id && iface.auto_linked));
    assert!(interfaces.iter().any(|iface| iface.roce), "RoCE NICs carry the site's tag");

    assert_eq!(maas.power_state(&system_id).await, Ok(PowerState::Off));
    maas.power_off(&system_id).await.expect("powered off");
    maas.delete_machine(&system_id).await.expect("deleted");
    body_unknown_machine_is_404(&maas, &system_id).await;
}

#[test]
fn the_fake_s_datetimes_read_on_the_clients_time_line() {
    for now_ms in [0, 5, 900_123, 86_400_000 * 400 + 3_723_500] {
        let wire = fakes::http::iso_datetime(now_ms);
        let unix_ms = engine::adapters::http::maas::parse_datetime_unix_ms(&wire);
        assert_eq!(unix_ms, Some(fakes::http::WIRE_EPOCH * 1000 + now_ms), "{wire}");
    }
}

#[tokio::test]
async fn fake_deploys_with_hardware_sync_and_the_client_judges_its_health_on_the_wire_s_datetimes() {
    let fake = ServedFake::start(&["gpu-node-01"]).await;
    let system_id = fake.client().create_machine(&fake.inventory("gpu-node-01")).await.expect("created").system_id;
    fake.advance_to(40 * 60_000);
    let deploying = fake.client().deploy(&system_id, &Secret::new(USER_DATA), true).await.expect("deploying");
    assert_eq!(deploying.status, MachineStatus::Deploying);
    assert!(deploying.enable_hw_sync && !deploying.hw_sync_healthy, "not synced yet");
    fake.advance_to(80 * 60_000);
    assert_eq!(fake.client().machine(&system_id).await.expect("read").status, MachineStatus::Deployed);
    fake.site(|site| site.machine_mut("gpu-node-01").expect("racked").seed_hw_sync(80 * 60_000)).expect("seeded");
    fake.advance_to(81 * 60_000);
    let synced = fake.client().machine(&system_id).await.expect("read");
    assert!(synced.enable_hw_sync && synced.hw_sync_healthy, "synced within 1.5 intervals");
    body_reads_a_deployed_machine(&fake.client(), &system_id, "gpu-node-01").await;
    let error = fake.client().commission(&system_id).await.expect_err("a deployed machine does not commission");
    assert_eq!(
        error,
        http_error(400, "__all__: Commission is not available because of the current state of the node.", None)
    );
    // 15 min interval: overdue by more than half an interval without a sync (the model is not advanced, so no
    // sync happens; the client's clock alone moves on).
    let late = {
        let transport = HyperTransport::tcp(&fake.base_url).expect("the fake's url");
        MaasClient::new(
            transport,
            FixedClock(81 * 60_000 + 23 * 60_000),
            &Secret::new(fake.controller_key.clone()),
            7,
            5_000,
        )
        .expect("a key")
        .with_clock_origin_unix_ms(fakes::http::WIRE_EPOCH * 1000)
    };
    let overdue = late.machine(&system_id).await.expect("read");
    assert!(overdue.enable_hw_sync && !overdue.hw_sync_healthy);
}

#[tokio::test]
async fn fake_reads_maas_s_own_unquoted_header_too() {
    let fake = ServedFake::start(&[]).await;
    let maas = fake.client().with_header_style(HeaderStyle::Unquoted);
    assert_eq!(maas.machines().await, Ok(vec![]));
    let subnets = maas.subnets().await.expect("the site's subnets");
    let vlans: Vec<(u16, u16)> = subnets.iter().map(|subnet| (subnet.vlan_vid, subnet.mtu)).collect();
    assert!(vlans.contains(&(5001, 1500)), "{vlans:?}");
}
