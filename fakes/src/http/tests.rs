//! Tests of the HTTP and UDP front ends: requests through the routers with `tower::ServiceExt::oneshot` (no
//! sockets), checked against the wire formats of `/work/wire-spec.md` and MAAS's exact texts.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use axum::Router;
use axum::body::Body;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::*;
use crate::hub::{Hub, HubConfig};
use crate::maas::{DnsFault, PowerCredential, SiteConfig};

const OPERATOR: &str = "operator";

struct Fixture {
    shared: SharedSite,
    clock: Clock,
    now_ms: Arc<AtomicU64>,
    key: String,
    bmc: PowerCredential,
    mac: String,
}

fn fixture() -> Fixture {
    let mut site = Site::new(SiteConfig::new(7));
    let bmc = site.add_machine("node-01");
    let mac = site.machine("node-01").and_then(|m| m.hardware().pxe_nic()).map(|nic| nic.mac.clone()).unwrap();
    let mut front = SiteFront::new(site);
    let key = front.api_key_for(OPERATOR);
    let now_ms = Arc::new(AtomicU64::new(0));
    let reader = now_ms.clone();
    let clock: Clock = Arc::new(move || reader.load(Ordering::SeqCst));
    Fixture { shared: front.shared(), clock, now_ms, key, bmc, mac }
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

async fn send(router: Router, request: Request<Body>) -> Reply {
    let response = router.oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes().to_vec();
    Reply { status, headers, body }
}

/// MAAS's own curtin header: unquoted, `&` bare.
fn unquoted_header(key: &str, timestamp: &str) -> String {
    let parts: Vec<&str> = key.split(':').collect();
    format!(
        "OAuth oauth_version=1.0, oauth_signature_method=PLAINTEXT, oauth_consumer_key={}, oauth_token={}, \
         oauth_signature=&{}, oauth_nonce=n-1, oauth_timestamp={timestamp}",
        parts[0], parts[1], parts[2]
    )
}

/// gomaasclient's header: quoted, percent-escaped (`%26`), with a realm, in another key order.
fn quoted_header(key: &str) -> String {
    let parts: Vec<&str> = key.split(':').collect();
    format!(
        "OAuth realm=\"MAAS API\", oauth_signature=\"%26{}\", oauth_nonce=\"abc123\", oauth_timestamp=\"1767225600\", \
         oauth_consumer_key=\"{}\", oauth_token=\"{}\", oauth_signature_method=\"PLAINTEXT\", oauth_version=\"1.0\"",
        parts[2], parts[0], parts[1]
    )
}

fn maas_request(fx: &Fixture, method: Method, path_and_query: &str, form: &[(&str, &str)]) -> Request<Body> {
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for (key, value) in form {
        serializer.append_pair(key, value);
    }
    Request::builder()
        .method(method)
        .uri(format!("/MAAS/api/2.0/{path_and_query}"))
        .header("authorization", quoted_header(&fx.key))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(serializer.finish()))
        .unwrap()
}

async fn maas(fx: &Fixture, method: Method, path_and_query: &str, form: &[(&str, &str)]) -> Reply {
    let reply =
        send(maas::router(fx.shared.clone(), fx.clock.clone()), maas_request(fx, method, path_and_query, form)).await;
    assert_eq!(reply.header("x-maas-api-hash"), Some(maas::API_HASH), "every response carries X-MAAS-API-Hash");
    reply
}

async fn create_machine(fx: &Fixture) -> Value {
    let form = [
        ("hostname", "gpu-01"),
        ("architecture", "amd64"),
        ("mac_addresses", fx.mac.as_str()),
        ("power_type", "redfish"),
        ("power_parameters_power_address", "node-01"),
        ("power_parameters_power_user", "root"),
        ("power_parameters_power_pass", fx.bmc.password.expose()),
        ("commission", "true"),
    ];
    let reply = maas(fx, Method::POST, "machines/", &form).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    reply.json()
}

/// Polls `future` once: it must still be pending (a handler that gives no answer).
fn assert_pending<F: Future>(future: F) {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    assert!(matches!(future.as_mut().poll(&mut context), Poll::Pending), "the request was answered");
}

// ---- MAAS ----------------------------------------------------------------------------------------------------------

#[tokio::test]
async fn both_oauth_header_forms_are_accepted() {
    let fx = fixture();
    for header in [unquoted_header(&fx.key, "1767225600"), quoted_header(&fx.key)] {
        let request = Request::get("/MAAS/api/2.0/machines/").header("authorization", header).body(Body::empty());
        let reply = send(maas::router(fx.shared.clone(), fx.clock.clone()), request.unwrap()).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        assert_eq!(reply.json(), json!([]));
    }
}

#[tokio::test]
async fn a_wrong_or_missing_key_is_401_and_a_bad_timestamp_400() {
    let fx = fixture();
    let wrong = fx.key.replace("fleetsim-secret-maas-", "fleetsim-secret-maas-0");
    let cases = [
        (Some(quoted_header(&wrong)), 401, maas::INVALID_API_KEY),
        (None, 401, maas::INVALID_API_KEY),
        (Some("Basic dXNlcjpwYXNz".to_owned()), 401, maas::INVALID_API_KEY),
        (Some(unquoted_header(&fx.key, "soon")), 400, "Invalid oauth_timestamp: not an integer"),
    ];
    for (header, status, text) in cases {
        let mut request = Request::get("/MAAS/api/2.0/machines/");
        if let Some(header) = header {
            request = request.header("authorization", header);
        }
        let reply = send(maas::router(fx.shared.clone(), fx.clock.clone()), request.body(Body::empty()).unwrap()).await;
        assert_eq!((reply.status.as_u16(), reply.text().as_str()), (status, text));
        assert_eq!(reply.header("content-type"), Some("text/plain; charset=utf-8"));
        assert_eq!(reply.header("x-maas-api-hash"), Some(maas::API_HASH));
    }
}

#[tokio::test]
async fn a_created_machine_commissions_as_the_keys_user_with_the_real_field_names() {
    let fx = fixture();
    let machine = create_machine(&fx).await;
    assert_eq!((machine["status"].as_u64(), machine["status_name"].as_str()), (Some(1), Some("Commissioning")));
    assert_eq!(machine["owner"], json!(OPERATOR), "the request ran as the API key's user");
    let system_id = machine["system_id"].as_str().unwrap().to_owned();
    let read = maas(&fx, Method::GET, &format!("machines/{system_id}/"), &[]).await.json();
    for field in [
        "system_id",
        "hostname",
        "status",
        "status_name",
        "status_message",
        "power_state",
        "power_type",
        "boot_interface",
        "interface_set",
        "boot_disk",
        "blockdevice_set",
        "enable_hw_sync",
        "sync_interval",
        "last_sync",
        "next_sync",
        "resource_uri",
    ] {
        assert!(read.get(field).is_some(), "machine JSON lacks {field}: {read}");
    }
    assert!(read.get("last_sync_ms").is_none() && read.get("is_sync_healthy").is_none(), "model-only fields leaked");
    let iface = &read["interface_set"][0];
    assert_eq!(iface["mac_address"], json!(fx.mac));
    assert_eq!(iface["vlan"]["mtu"], json!(1500));
    assert!(iface["vlan"].get("fabric_id").is_some() && iface.get("links").is_some() && iface.get("tags").is_some());
    assert_eq!(read["resource_uri"], json!(format!("/MAAS/api/2.0/machines/{system_id}/")));
    assert_eq!(read["last_sync"], Value::Null);
    // The power parameters are a separate call, secrets included.
    let power = maas(&fx, Method::GET, &format!("machines/{system_id}/?op=power_parameters"), &[]).await.json();
    assert_eq!(power["power_address"], json!("node-01"));
    assert_eq!(power["power_pass"], json!(fx.bmc.password.expose()));
}

#[tokio::test]
async fn last_sync_and_next_sync_are_iso_datetimes_from_the_wire_epoch() {
    let fx = fixture();
    let system_id = create_machine(&fx).await["system_id"].as_str().unwrap().to_owned();
    let front = lock(&fx.shared);
    let mut view = front.site.region.view(&system_id).unwrap();
    view.last_sync_ms = Some(5_000);
    view.next_sync_ms = Some(905_000);
    let value = maas::machine_json(&front.site, &view);
    assert_eq!(value["last_sync"], json!("2026-01-01T00:00:05.000"));
    assert_eq!(value["next_sync"], json!("2026-01-01T00:15:05.000"));
}

#[tokio::test]
async fn errors_carry_maas_texts_and_statuses() {
    let fx = fixture();
    let missing = maas(&fx, Method::GET, "machines/xyz123/", &[]).await;
    assert_eq!((missing.status.as_u16(), missing.text().as_str()), (404, "No Machine matches the given query."));
    assert_eq!(missing.header("content-type"), Some("text/plain; charset=utf-8"));
    let system_id = create_machine(&fx).await["system_id"].as_str().unwrap().to_owned();
    let deploy = maas(&fx, Method::POST, &format!("machines/{system_id}/?op=deploy"), &[]).await;
    assert_eq!(
        (deploy.status.as_u16(), deploy.text().as_str()),
        (409, "Can't deploy a machine that is in the 'Commissioning' state")
    );
    let unknown = maas(&fx, Method::POST, &format!("machines/{system_id}/?op=xyz"), &[]).await;
    assert_eq!((unknown.status.as_u16(), unknown.text().as_str()), (400, "Unrecognised signature: method=POST op=xyz"));
    let endpoint = maas(&fx, Method::GET, "nowhere/", &[]).await;
    assert_eq!(
        (endpoint.status.as_u16(), endpoint.text().as_str()),
        (404, "Unknown API endpoint: /MAAS/api/2.0/nowhere/.")
    );
    let form = maas(&fx, Method::POST, "machines/", &[("architecture", "amd64")]).await;
    assert_eq!(form.status, StatusCode::BAD_REQUEST);
    assert_eq!(form.header("content-type"), Some("application/json"));
    assert_eq!(form.json(), json!({ "mac_addresses": ["This field is required."] }));
}

#[tokio::test]
async fn an_injected_503_carries_retry_after_and_has_no_effect() {
    let fx = fixture();
    lock(&fx.shared).site.region.fail_next_with_503(10);
    let reply = maas(&fx, Method::GET, "machines/", &[]).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.header("retry-after"), Some("10"));
    assert_eq!(maas(&fx, Method::GET, "machines/", &[]).await.status, StatusCode::OK);
}

#[tokio::test]
async fn events_pages_link_to_newer_and_older_events() {
    let fx = fixture();
    let system_id = create_machine(&fx).await["system_id"].as_str().unwrap().to_owned();
    fx.now_ms.store(60_000, Ordering::SeqCst);
    let all = maas(&fx, Method::GET, &format!("events/?op=query&id={system_id}&level=DEBUG&limit=1000"), &[]).await;
    let all = all.json();
    let ids: Vec<u64> = all["events"].as_array().unwrap().iter().map(|e| e["id"].as_u64().unwrap()).collect();
    assert!(ids.len() >= 3, "commissioning logs several events: {all}");
    let page = maas(&fx, Method::GET, &format!("events/?op=query&id={system_id}&level=DEBUG&limit=2"), &[]).await;
    let page = page.json();
    assert_eq!(page["count"], json!(2));
    let event = &page["events"][0];
    for field in ["username", "node", "hostname", "id", "level", "created", "type", "description"] {
        assert!(event.get(field).is_some(), "event lacks {field}: {event}");
    }
    assert_eq!(event["node"], json!(system_id));
    assert!(event["created"].as_str().unwrap().starts_with("Thu, 01 Jan. 2026 "), "{event}");
    let (newest, oldest) = (ids[0], ids[1]);
    let query = format!("/MAAS/api/2.0/events/?op=query&id={system_id}&level=DEBUG&limit=2");
    assert_eq!(page["next_uri"], json!(format!("{query}&after={newest}")));
    assert_eq!(page["prev_uri"], json!(format!("{query}&before={oldest}")));
    // Following prev_uri gives the next older page.
    let prev = page["prev_uri"].as_str().unwrap().trim_start_matches("/MAAS/api/2.0/").to_owned();
    let older = maas(&fx, Method::GET, &prev, &[]).await.json();
    assert_eq!(older["events"][0]["id"], json!(ids[2]));
    let bad = maas(&fx, Method::GET, "events/?op=query&level=LOUD", &[]).await;
    assert_eq!((bad.status.as_u16(), bad.text().as_str()), (400, "Unrecognised log level: LOUD"));
}

#[tokio::test]
async fn delete_answers_204_with_no_body() {
    let fx = fixture();
    let system_id = create_machine(&fx).await["system_id"].as_str().unwrap().to_owned();
    let deleted = maas(&fx, Method::DELETE, &format!("machines/{system_id}/"), &[]).await;
    assert_eq!((deleted.status, deleted.body.len()), (StatusCode::NO_CONTENT, 0));
    assert_eq!(maas(&fx, Method::GET, &format!("machines/{system_id}/"), &[]).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_unreachable_region_gives_no_answer_and_model_events_reach_the_sink() {
    let fx = fixture();
    create_machine(&fx).await;
    assert!(!lock(&fx.shared).drain_events().is_empty(), "creating a machine emits site events");
    lock(&fx.shared).site.region.set_reachable(false);
    let router = maas::router(fx.shared.clone(), fx.clock.clone());
    assert_pending(router.oneshot(maas_request(&fx, Method::GET, "machines/", &[])));
}

// ---- Redfish -------------------------------------------------------------------------------------------------------

fn basic(user: &str, password: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = format!("{user}:{password}").into_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Basic {out}")
}

async fn redfish(
    fx: &Fixture,
    method: Method,
    path: &str,
    auth: Option<String>,
    body: Value,
    if_match: Option<&str>,
) -> Reply {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(auth) = auth {
        request = request.header("authorization", auth);
    }
    if let Some(tag) = if_match {
        request = request.header("if-match", tag);
    }
    let body = if body.is_null() { Body::empty() } else { Body::from(body.to_string()) };
    send(redfish::router(fx.shared.clone(), fx.clock.clone()), request.body(body).unwrap()).await
}

#[tokio::test]
async fn redfish_needs_basic_auth_checks_if_match_and_resets() {
    let fx = fixture();
    let auth = || Some(basic("root", fx.bmc.password.expose()));
    let system = "/redfish/v1/Systems/node-01";
    let reset_path = format!("{system}/Actions/ComputerSystem.Reset");
    assert_eq!(redfish(&fx, Method::GET, system, None, Value::Null, None).await.status, StatusCode::UNAUTHORIZED);
    let wrong = redfish(&fx, Method::GET, system, Some(basic("root", "nope")), Value::Null, None).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    let list = redfish(&fx, Method::GET, "/redfish/v1/Systems", auth(), Value::Null, None).await.json();
    assert_eq!(list["Members"], json!([{ "@odata.id": system }]));
    let read = redfish(&fx, Method::GET, system, auth(), Value::Null, None).await;
    let etag = read.header("etag").unwrap().to_owned();
    let view = read.json();
    assert_eq!((view["@odata.etag"].as_str(), view["PowerState"].as_str()), (Some(etag.as_str()), Some("Off")));
    let patch = json!({ "Boot": { "BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Pxe" } });
    let stale = redfish(&fx, Method::PATCH, system, auth(), patch.clone(), Some("W/\"999\"")).await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
    let patched = redfish(&fx, Method::PATCH, system, auth(), patch, Some(&etag)).await;
    assert_eq!(patched.status, StatusCode::NO_CONTENT);
    let reset = redfish(&fx, Method::POST, &reset_path, auth(), json!({ "ResetType": "On" }), None);
    assert_eq!(reset.await.status, StatusCode::NO_CONTENT);
    let view = redfish(&fx, Method::GET, system, auth(), Value::Null, None).await.json();
    // The one-time PXE override was consumed by the power-on.
    assert_eq!(
        (view["PowerState"].as_str(), view["Boot"]["BootSourceOverrideEnabled"].as_str()),
        (Some("On"), Some("Disabled"))
    );
    let bad = redfish(&fx, Method::POST, &reset_path, auth(), json!({ "ResetType": "Nmi" }), None);
    assert_eq!(bad.await.status, StatusCode::BAD_REQUEST);
}

// ---- secrets -------------------------------------------------------------------------------------------------------

async fn secrets(fx: &Fixture, method: Method, path: &str, token: Option<&str>, body: Value) -> Reply {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        request = request.header("x-vault-token", token);
    }
    let body = if body.is_null() { Body::empty() } else { Body::from(body.to_string()) };
    send(vault::router(fx.shared.clone(), fx.clock.clone()), request.body(body).unwrap()).await
}

#[tokio::test]
async fn the_secrets_routes_answer_the_spec_shapes_and_map_errors() {
    let fx = fixture();
    let token = lock(&fx.shared).vault_token();
    let token = Some(token.expose());
    let denied = secrets(&fx, Method::GET, "/v1/secret/data/site/config", Some("nope"), Value::Null).await;
    assert_eq!((denied.status.as_u16(), denied.json()), (403, json!({ "errors": ["permission denied"] })));
    let config = secrets(&fx, Method::GET, "/v1/secret/data/site/config", token, Value::Null).await.json();
    assert_eq!(config["data"]["data"]["enabled"], json!("true"));
    let power = secrets(&fx, Method::GET, "/v1/secret/data/power/node-01", token, Value::Null).await.json();
    assert_eq!(power["data"]["data"], json!({ "user": "root", "password": fx.bmc.password.expose() }));
    assert_eq!(power["source"], json!("override"));
    let none = secrets(&fx, Method::GET, "/v1/secret/data/power/ghost", token, Value::Null).await;
    assert_eq!(none.status, StatusCode::NOT_FOUND);
    let issued =
        secrets(&fx, Method::POST, "/v1/auth/bootstrap/token", token, json!({ "node": "n1", "ttl_ms": 60_000 }));
    let issued = issued.await.json();
    let value = issued["auth"]["client_token"].as_str().unwrap().to_owned();
    assert!(value.starts_with("fleetsim-secret-"));
    assert_eq!(issued["auth"]["expires_at_ms"], json!(60_000));
    let redeemed = secrets(&fx, Method::POST, "/v1/auth/bootstrap/redeem", token, json!({ "token": value })).await;
    assert_eq!(redeemed.json(), json!({ "node": "n1", "token_id": issued["auth"]["accessor"] }));
    let spent = secrets(&fx, Method::POST, "/v1/auth/bootstrap/redeem", token, json!({ "token": value })).await;
    assert_eq!(spent.status, StatusCode::FORBIDDEN);
    // A lost answer: the token is minted and nothing is written back (the request never completes).
    lock(&fx.shared).site.vault.lose_token_answers("n1", 1);
    let lost = secrets(&fx, Method::POST, "/v1/auth/bootstrap/token", token, json!({ "node": "n1", "ttl_ms": 60_000 }));
    assert!(futures_util::FutureExt::now_or_never(lost).is_none(), "no answer for a lost token");
    assert_eq!(lock(&fx.shared).site.vault.unredeemed_tokens_of("n1"), 1);
    let revoke = || secrets(&fx, Method::POST, "/v1/auth/bootstrap/revoke", token, json!({ "node": "n1" }));
    assert_eq!(revoke().await.json(), json!({ "revoked": 1 }));
    assert_eq!(revoke().await.json(), json!({ "revoked": 0 }), "idempotent");
    let capabilities =
        secrets(&fx, Method::POST, "/v1/sys/capabilities-self", token, json!({ "paths": ["secret/data/nodes"] }));
    let capabilities = capabilities.await.json()["capabilities"].clone();
    assert!(capabilities.as_array().unwrap().contains(&json!("delete")), "{capabilities}");
    let deleted = secrets(&fx, Method::DELETE, "/v1/secret/data/nodes/node-01", token, Value::Null).await;
    assert_eq!(deleted.json(), json!({ "deleted": 1 }));
    lock(&fx.shared).site.vault.set_delete_policy(false);
    let denied_delete = secrets(&fx, Method::DELETE, "/v1/secret/data/nodes/node-01", token, Value::Null).await;
    assert_eq!(denied_delete.status, StatusCode::FORBIDDEN);
    lock(&fx.shared).site.vault.set_site_value("enabled", "false");
    let disabled = secrets(&fx, Method::GET, "/v1/secret/data/site/config", token, Value::Null).await;
    assert_eq!((disabled.status.as_u16(), disabled.json()), (403, json!({ "errors": ["site is disabled"] })));
    lock(&fx.shared).site.vault.set_site_value("enabled", "true");
    lock(&fx.shared).site.vault.set_token_policy(false);
    let unsupported =
        secrets(&fx, Method::POST, "/v1/auth/bootstrap/token", token, json!({ "node": "n1", "ttl_ms": 1 }));
    assert_eq!(unsupported.await.status, StatusCode::NOT_IMPLEMENTED);
    lock(&fx.shared).site.vault.fail_next(1);
    let unavailable = secrets(&fx, Method::GET, "/v1/secret/data/site/config", token, Value::Null).await;
    assert_eq!((unavailable.status, unavailable.header("retry-after")), (StatusCode::SERVICE_UNAVAILABLE, Some("1")));
    assert_eq!(unavailable.json(), json!({ "errors": ["vault is unavailable"] }));
    let malformed = secrets(&fx, Method::POST, "/v1/auth/bootstrap/token", token, json!({ "node": 3 })).await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
}

// ---- hub -----------------------------------------------------------------------------------------------------------

struct HubFixture {
    shared: SharedHub,
    clock: Clock,
}

fn hub_fixture() -> HubFixture {
    let mut hub = Hub::new(HubConfig::default());
    hub.issue_credential("controller", "fleetsim-secret-hub-token", 3_600_000);
    let mut front = HubFront::new(hub);
    front.bootstrap_tokens.insert("w1".into(), crate::maas::Secret::new("t1"));
    HubFixture { shared: front.shared(), clock: Arc::new(|| 1_000) }
}

async fn hub_call(fx: &HubFixture, method: Method, path: &str, fence: Option<&str>, body: Value) -> Reply {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("x-fleet-principal", "controller")
        .header("x-fleet-token", "fleetsim-secret-hub-token");
    if let Some(fence) = fence {
        request = request.header("x-fleet-fence", fence);
    }
    // An agent's call carries its token as `Authorization: Bearer` (checked before the body is read).
    if let Some(token) = body.get("token").and_then(Value::as_str) {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let body = if body.is_null() { Body::empty() } else { Body::from(body.to_string()) };
    send(hub::router(fx.shared.clone(), fx.clock.clone()), request.body(body).unwrap()).await
}

#[tokio::test]
async fn the_hub_routes_authenticate_lock_fence_and_hold() {
    let fx = hub_fixture();
    let auth = hub_call(&fx, Method::POST, "/v1/hub/auth", None, json!({})).await;
    assert_eq!(auth.json(), json!({ "expires_at_ms": 3_600_000 }));
    let bare = Request::post("/v1/hub/lock").body(Body::from(json!({ "holder": "c1", "lease_ms": 5 }).to_string()));
    let bare = send(hub::router(fx.shared.clone(), fx.clock.clone()), bare.unwrap()).await;
    assert_eq!((bare.status.as_u16(), bare.json()["error"].as_str()), (401, Some("credential_rejected")));
    let lock_reply =
        hub_call(&fx, Method::POST, "/v1/hub/lock", None, json!({ "holder": "c1", "lease_ms": 60_000 })).await;
    assert_eq!(lock_reply.json(), json!({ "granted": true, "fence": 1, "expires_at_ms": 61_000 }));
    let held = hub_call(&fx, Method::POST, "/v1/hub/lock", None, json!({ "holder": "c2", "lease_ms": 60_000 })).await;
    assert_eq!(held.json(), json!({ "granted": false, "holder": "c1", "fence": 1, "expires_at_ms": 61_000 }));
    // Register the agent the hold names (agents carry their bearer token in the body).
    let register =
        hub_call(&fx, Method::POST, "/v1/hub/agents/w1/register", None, json!({ "kind": "durable", "token": "t1" }));
    assert_eq!(register.await.json(), json!({}));
    let fenced = hub_call(&fx, Method::PUT, "/v1/hub/holds/w1/deploy", None, Value::Null).await;
    assert_eq!((fenced.status.as_u16(), fenced.json()["error"].as_str()), (409, Some("stale_fence")));
    let placed = hub_call(&fx, Method::PUT, "/v1/hub/holds/w1/deploy", Some("1"), Value::Null).await;
    assert_eq!((placed.status, placed.json()), (StatusCode::OK, json!({})));
    let holds = hub_call(&fx, Method::GET, "/v1/hub/holds", None, Value::Null).await.json();
    assert_eq!(holds, json!({ "holds": { "w1": ["deploy"] } }));
    let released = hub_call(&fx, Method::DELETE, "/v1/hub/holds/w1/deploy", Some("1"), Value::Null).await;
    assert_eq!(released.json(), json!({ "released": true }));
    let again = hub_call(&fx, Method::DELETE, "/v1/hub/holds/w1/deploy", Some("1"), Value::Null).await;
    assert_eq!((again.status, again.json()), (StatusCode::OK, json!({ "released": false })));
    let epoch = hub_call(&fx, Method::POST, "/v1/hub/epochs", Some("1"), json!({ "members": ["w1"] })).await;
    assert_eq!(epoch.json(), json!({ "epoch": 1 }));
    let closed = hub_call(&fx, Method::POST, "/v1/hub/epochs/1/close", Some("1"), json!({ "untouched": [] })).await;
    assert_eq!(closed.json(), json!({ "closed": true }));
    let renewed = hub_call(&fx, Method::POST, "/v1/hub/lock/renew", None, json!({ "fence": 1, "lease_ms": 5 })).await;
    assert_eq!(renewed.json(), json!({}));
    let release = hub_call(&fx, Method::POST, "/v1/hub/lock/release", None, json!({ "fence": 1 })).await;
    assert_eq!(release.json(), json!({ "released": true }));
    let bundle = hub_call(&fx, Method::GET, "/v1/hub/route-bundle", None, Value::Null).await;
    assert_eq!(bundle.json(), json!({ "digest": "sha256:routes-1" }));
}

#[tokio::test]
async fn hub_heartbeats_credentials_and_outage_map_to_their_statuses() {
    let fx = hub_fixture();
    hub_call(&fx, Method::POST, "/v1/hub/agents/w1/register", None, json!({ "kind": "fungible", "token": "t1" })).await;
    let beat =
        hub_call(&fx, Method::POST, "/v1/hub/agents/w1/heartbeat", None, json!({ "token": "t1", "revision": "r7" }));
    assert_eq!(beat.await.status, StatusCode::OK);
    let refused = hub_call(&fx, Method::POST, "/v1/hub/agents/w1/heartbeat", None, json!({ "token": "t2" })).await;
    assert_eq!((refused.status.as_u16(), refused.json()["error"].as_str()), (401, Some("unauthorized")));
    let unknown = hub_call(&fx, Method::POST, "/v1/hub/agents/w9/heartbeat", None, json!({ "token": "t" })).await;
    assert_eq!((unknown.status.as_u16(), unknown.json()["error"].as_str()), (404, Some("unknown_agent")));
    let rows = hub_call(&fx, Method::GET, "/v1/hub/heartbeats", None, Value::Null).await.json();
    assert_eq!(
        rows,
        json!({ "now_ms": 1_000, "rows": [{ "agent": "w1", "status": "online", "last_seen_ms": 1_000, "revision": "r7",
            "generation": 1 }] })
    );
    let request = Request::post("/v1/hub/auth")
        .header("x-fleet-principal", "controller")
        .header("x-fleet-token", "wrong")
        .body(Body::empty());
    let rejected = send(hub::router(fx.shared.clone(), fx.clock.clone()), request.unwrap()).await;
    assert_eq!((rejected.status.as_u16(), rejected.json()["error"].as_str()), (401, Some("credential_rejected")));
    assert!(!lock(&fx.shared).drain_events().is_empty(), "hub events reach the sink");
    lock(&fx.shared).available = false;
    let down = hub_call(&fx, Method::GET, "/v1/hub/holds", None, Value::Null).await;
    assert_eq!((down.status.as_u16(), down.json()["error"].as_str()), (503, Some("unavailable")));
    lock(&fx.shared).available = true;
    lock(&fx.shared).lose_next_answers = 1;
    let router = hub::router(fx.shared.clone(), fx.clock.clone());
    let request = Request::post("/v1/hub/epochs")
        .header("x-fleet-principal", "controller")
        .header("x-fleet-token", "fleetsim-secret-hub-token")
        .body(Body::from(json!({ "members": [] }).to_string()));
    assert_pending(router.oneshot(request.unwrap()));
    assert!(lock(&fx.shared).hub.epoch(1).is_some(), "the lost answer's request was carried out");
}

#[tokio::test]
async fn the_hub_resurrects_a_tombstoned_pinned_row_only_for_a_fenced_controller() {
    let fx = hub_fixture();
    hub_call(&fx, Method::POST, "/v1/hub/agents/w1/register", None, json!({ "kind": "fungible", "token": "t1" })).await;
    lock(&fx.shared).hub.sweep(crate::hub::DEFAULT_AGENT_TTL_MS + 2_000, &mut Vec::new());
    hub_call(&fx, Method::POST, "/v1/hub/lock", None, json!({ "holder": "c1", "lease_ms": 60_000 })).await;
    hub_call(&fx, Method::POST, "/v1/hub/epochs", Some("1"), json!({ "members": ["w1"] })).await;
    let path = "/v1/hub/agents/w1/resurrect";
    let body = json!({ "epoch": 1 });
    let bare = Request::post(path).body(Body::from(body.to_string())).unwrap();
    let bare = send(hub::router(fx.shared.clone(), fx.clock.clone()), bare).await;
    assert_eq!((bare.status.as_u16(), bare.json()["error"].as_str()), (401, Some("credential_rejected")));
    let unfenced = hub_call(&fx, Method::POST, path, None, body.clone()).await;
    assert_eq!((unfenced.status.as_u16(), unfenced.json()["error"].as_str()), (409, Some("stale_fence")));
    let malformed = hub_call(&fx, Method::POST, path, Some("1"), json!({ "epoch": "one" })).await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
    let unknown = hub_call(&fx, Method::POST, path, Some("1"), json!({ "epoch": 7 })).await;
    assert_eq!((unknown.status.as_u16(), unknown.json()["error"].as_str()), (404, Some("unknown_epoch")));
    assert!(!lock(&fx.shared).hub.is_registered("w1"), "nothing refused restored anything");
    let restored = hub_call(&fx, Method::POST, path, Some("1"), body.clone()).await;
    assert_eq!((restored.status, restored.json()), (StatusCode::OK, json!({ "restored": true })));
    assert!(lock(&fx.shared).hub.is_registered("w1"));
    let beat = hub_call(&fx, Method::POST, "/v1/hub/agents/w1/heartbeat", None, json!({ "token": "t1" })).await;
    assert_eq!(beat.status, StatusCode::OK, "the credential it had authenticates again");
    let replay = hub_call(&fx, Method::POST, path, Some("1"), body).await;
    assert_eq!(replay.json(), json!({ "restored": false }));
    let stranger = hub_call(&fx, Method::POST, "/v1/hub/agents/w9/resurrect", Some("1"), json!({ "epoch": 1 })).await;
    assert_eq!((stranger.status.as_u16(), stranger.json()["error"].as_str()), (409, Some("conflict")));
}

#[tokio::test]
async fn the_hub_rotation_routes_issue_read_commit_and_abort_behind_the_controller_s_credential() {
    let fx = hub_fixture();
    hub_call(&fx, Method::POST, "/v1/hub/agents/w1/register", None, json!({ "kind": "durable", "token": "t1" })).await;
    let path = "/v1/hub/agents/w1/rotations/rotation-w1-1";
    let bare = send(hub::router(fx.shared.clone(), fx.clock.clone()), Request::post(path).body(Body::empty()).unwrap());
    let bare = bare.await;
    assert_eq!((bare.status.as_u16(), bare.json()["error"].as_str()), (401, Some("credential_rejected")));
    let issued = hub_call(&fx, Method::POST, path, None, Value::Null).await.json();
    assert_eq!(issued["generation"], 2);
    let token = issued["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("fleetsim-secret-agent-"));
    let replay = hub_call(&fx, Method::POST, path, None, Value::Null).await.json();
    assert_eq!(replay, issued, "a replay answers the same successor");
    let beat = json!({ "token": token });
    let beat = hub_call(&fx, Method::POST, "/v1/hub/agents/w1/heartbeat", None, beat).await;
    assert_eq!(beat.status, StatusCode::OK);
    let read = hub_call(&fx, Method::GET, path, None, Value::Null).await;
    assert_eq!(read.json(), json!({ "state": "open", "generation": 2, "successor_heartbeats": 1 }));
    assert!(!String::from_utf8_lossy(&read.body).contains(&token), "the token is in the issue's answer only");
    let commit = format!("{path}/commit");
    assert_eq!(hub_call(&fx, Method::POST, &commit, None, Value::Null).await.json(), json!({ "revoked": true }));
    assert_eq!(hub_call(&fx, Method::POST, &commit, None, Value::Null).await.json(), json!({ "revoked": false }));
    let abort = hub_call(&fx, Method::POST, &format!("{path}/abort"), None, Value::Null).await;
    assert_eq!((abort.status.as_u16(), abort.json()["error"].as_str()), (409, Some("conflict")));
    let unknown = hub_call(&fx, Method::GET, "/v1/hub/agents/w1/rotations/never", None, Value::Null).await;
    assert_eq!((unknown.status.as_u16(), unknown.json()["error"].as_str()), (404, Some("unknown_rotation")));
    let old = hub_call(&fx, Method::POST, "/v1/hub/agents/w1/heartbeat", None, json!({ "token": "t1" })).await;
    assert_eq!(old.status.as_u16(), 401, "the predecessor is revoked");
    let nothing = hub_call(&fx, Method::POST, "/v1/hub/agents/w1/rotations/never/abort", None, Value::Null).await;
    assert_eq!(nothing.json(), json!({ "revoked": false }));
    lock(&fx.shared).lose_next_answers = 1;
    let router = hub::router(fx.shared.clone(), fx.clock.clone());
    let request = Request::post("/v1/hub/agents/w1/rotations/rotation-w1-2")
        .header("x-fleet-principal", "controller")
        .header("x-fleet-token", "fleetsim-secret-hub-token")
        .body(Body::empty());
    assert_pending(router.oneshot(request.unwrap()));
    assert!(lock(&fx.shared).hub.rotation("w1", "rotation-w1-2").is_some(), "the lost answer's issue was carried out");
}

// ---- DNS -----------------------------------------------------------------------------------------------------------

fn dns_query(id: u16, name: &str) -> Vec<u8> {
    use hickory_proto::op::{Message, Query};
    use hickory_proto::rr::{Name, RecordType};
    let mut message = Message::new();
    message.set_id(id).set_recursion_desired(true);
    message.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    message.to_vec().unwrap()
}

#[test]
fn dns_answers_noerror_nxdomain_and_servfail_echoing_the_id() {
    use hickory_proto::op::{Message, ResponseCode};
    use hickory_proto::rr::RData;
    let fx = fixture();
    let ask = |id: u16, name: &str| {
        Message::from_vec(&dns::answer(&fx.shared, &fx.clock, "10.10.0.50", &dns_query(id, name))).unwrap()
    };
    let found = ask(0x1234, "metadata.maas-internal.");
    assert_eq!((found.id(), found.response_code()), (0x1234, ResponseCode::NoError));
    assert_eq!(found.queries().len(), 1);
    let addresses: Vec<String> = found
        .answers()
        .iter()
        .filter_map(|record| match record.data() {
            RData::A(address) => Some(address.0.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(addresses, vec![crate::maas::RACK_ADDRESS.to_owned()]);
    let missing = ask(7, "nothing.maas-internal.");
    assert_eq!((missing.id(), missing.response_code(), missing.answers().len()), (7, ResponseCode::NXDomain, 0));
    lock(&fx.shared).site.dns.set_fault(DnsFault::ServFailAll);
    let failing = ask(8, "metadata.maas-internal.");
    assert_eq!((failing.id(), failing.response_code()), (8, ResponseCode::ServFail));
    let queries = lock(&fx.shared)
        .drain_events()
        .into_iter()
        .filter(|event| matches!(event.kind, crate::maas::SiteEventKind::DnsQuery { .. }))
        .count();
    assert_eq!(queries, 3, "each question reached the model");
    // Garbage with a full header: FORMERR with its id; shorter garbage: dropped.
    let mut garbage = vec![0xAB, 0xCD, 0x01, 0x00, 0x00, 0x05, 0, 0, 0, 0, 0, 0];
    garbage.extend_from_slice(&[0xFF; 3]);
    let formerr = Message::from_vec(&dns::answer(&fx.shared, &fx.clock, "c", &garbage)).unwrap();
    assert_eq!((formerr.id(), formerr.response_code()), (0xABCD, ResponseCode::FormErr));
    assert!(dns::answer(&fx.shared, &fx.clock, "c", &[1, 2, 3]).is_empty());
}

#[test]
fn api_keys_are_deterministic_per_seed_and_user_and_carry_the_secret_marker() {
    let mut a = SiteFront::new(Site::new(SiteConfig::new(7)));
    let mut b = SiteFront::new(Site::new(SiteConfig::new(7)));
    let mut c = SiteFront::new(Site::new(SiteConfig::new(8)));
    let key = a.api_key_for("controller");
    assert_eq!(key, b.api_key_for("controller"));
    assert_eq!(key, a.api_key_for("controller"), "a second call returns the same key");
    assert_ne!(key, c.api_key_for("controller"));
    assert_ne!(key, a.api_key_for("operator"));
    let parts: Vec<&str> = key.split(':').collect();
    assert_eq!(parts.len(), 3);
    assert!(parts[2].starts_with("fleetsim-secret-") && !parts[0].contains("secret") && !parts[1].contains("secret"));
    assert!(a.vault_token().expose().starts_with("fleetsim-secret-"));
    assert!(!format!("{a:?}").contains("fleetsim-secret-"), "Debug of the front redacts its secrets");
}

#[tokio::test]
async fn the_site_app_serves_maas_redfish_and_secrets_on_one_router() {
    let fx = fixture();
    let app = || site_app(fx.shared.clone(), fx.clock.clone());
    let machines = send(app(), maas_request(&fx, Method::GET, "machines/", &[])).await;
    assert_eq!(machines.status, StatusCode::OK);
    let systems = send(app(), Request::get("/redfish/v1/Systems").body(Body::empty()).unwrap()).await;
    assert_eq!(systems.status, StatusCode::UNAUTHORIZED);
    let config = send(app(), Request::get("/v1/secret/data/site/config").body(Body::empty()).unwrap()).await;
    assert_eq!(config.json(), json!({ "errors": ["permission denied"] }));
    let elsewhere = send(app(), Request::get("/nowhere").body(Body::empty()).unwrap()).await;
    assert_eq!((elsewhere.status.as_u16(), elsewhere.text().as_str()), (404, "Unknown API endpoint: /nowhere."));
}

/// python-libmaas's way: the form as multipart/form-data, text fields base64-encoded per part, as Django reads them.
#[tokio::test]
async fn a_multipart_form_with_base64_parts_creates_a_machine_as_a_url_encoded_one_does() {
    let fx = fixture();
    let b64 = |text: &str| crate::maas::machine::encode_base64(text.as_bytes());
    let fields = [
        ("hostname", b64("gpu-01"), true),
        ("architecture", "amd64".to_owned(), false),
        ("mac_addresses", fx.mac.clone(), false),
        ("power_type", "redfish".to_owned(), false),
        ("power_parameters_power_address", "node-01".to_owned(), false),
        ("power_parameters_power_user", "root".to_owned(), false),
        ("power_parameters_power_pass", fx.bmc.password.expose().to_owned(), false),
    ];
    let mut body = String::new();
    for (name, value, base64) in &fields {
        body.push_str(&format!("--XyZ\r\nContent-Disposition: form-data; name=\"{name}\"\r\n"));
        if *base64 {
            body.push_str("Content-Transfer-Encoding: base64\r\n");
        }
        body.push_str(&format!("\r\n{value}\r\n"));
    }
    body.push_str("--XyZ--\r\n");
    let request = Request::builder()
        .method(Method::POST)
        .uri("/MAAS/api/2.0/machines/")
        .header("authorization", quoted_header(&fx.key))
        .header("content-type", "multipart/form-data; boundary=XyZ")
        .body(Body::from(body))
        .unwrap();
    let reply = send(maas::router(fx.shared.clone(), fx.clock.clone()), request).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json()["hostname"], "gpu-01");
    assert_eq!(reply.json()["status_name"], "Commissioning");

    let broken = Request::builder()
        .method(Method::POST)
        .uri("/MAAS/api/2.0/machines/")
        .header("authorization", quoted_header(&fx.key))
        .header("content-type", "multipart/form-data; boundary=XyZ")
        .body(Body::from("--XyZ\r\nContent-Disposition: form-data; name=\"hostname\"\r\n\r\nunterminated"))
        .unwrap();
    let reply = send(maas::router(fx.shared.clone(), fx.clock.clone()), broken).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
}

#[tokio::test]
async fn describe_is_anonymous_and_names_the_machine_handlers_on_the_request_s_host() {
    let fx = fixture();
    let request =
        Request::builder().uri("/MAAS/api/2.0/describe/").header("host", "maas.test:5240").body(Body::empty()).unwrap();
    let reply = send(maas::router(fx.shared.clone(), fx.clock.clone()), request).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let description = reply.json();
    let machine = description["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|resource| resource["name"] == "MachineHandler")
        .expect("MachineHandler is described");
    assert_eq!(machine["auth"]["uri"], "http://maas.test:5240/MAAS/api/2.0/machines/{system_id}/");
}

// ---- fidelity regressions (issue 18) -------------------------------------------------------------------------------

#[tokio::test]
async fn a_parameterless_op_with_an_empty_multipart_body_is_an_empty_form() {
    let fx = fixture();
    let created = create_machine(&fx).await;
    let system_id = created["system_id"].as_str().unwrap().to_owned();
    // python-libmaas 0.6.8's body for `abort`: the boundary, a blank line, the closing boundary.
    let request = Request::builder()
        .method(Method::POST)
        .uri(format!("/MAAS/api/2.0/machines/{system_id}/?op=abort"))
        .header("authorization", quoted_header(&fx.key))
        .header("content-type", "multipart/form-data; boundary=d2e1b0a9")
        .body(Body::from("--d2e1b0a9\r\n\r\n--d2e1b0a9--\r\n"))
        .unwrap();
    let reply = send(maas::router(fx.shared.clone(), fx.clock.clone()), request).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json()["status_name"], "New");
}

#[tokio::test]
async fn machines_carry_zone_pool_an_authoritative_domain_and_a_boot_disk_id_path() {
    let fx = fixture();
    let created = create_machine(&fx).await;
    assert_eq!(created["zone"]["name"], "default");
    assert_eq!(created["pool"]["name"], "default");
    assert_eq!(created["domain"]["authoritative"], true);
    let system_id = created["system_id"].as_str().unwrap();
    let disks = maas(&fx, Method::GET, &format!("nodes/{system_id}/blockdevices/"), &[]).await.json();
    for disk in disks.as_array().unwrap() {
        assert!(disk["id_path"].as_str().unwrap().starts_with("/dev/disk/by-id/"), "{disk}");
    }
    let events = maas(&fx, Method::GET, "events/?op=query&level=DEBUG", &[]).await.json();
    assert!(events["events"].as_array().unwrap().iter().all(|event| event["type"].is_string()), "{events}");
}

#[tokio::test]
async fn machine_create_is_validated_as_maas_validates_its_form() {
    let fx = fixture();
    let create = |form: Vec<(&'static str, String)>| {
        let fx = &fx;
        async move {
            let pairs: Vec<(&str, &str)> = form.iter().map(|(key, value)| (*key, value.as_str())).collect();
            maas(fx, Method::POST, "machines/", &pairs).await
        }
    };
    let base = |hostname: &str, mac: &str, architecture: &str, power_type: &str| {
        vec![
            ("hostname", hostname.to_owned()),
            ("mac_addresses", mac.to_owned()),
            ("architecture", architecture.to_owned()),
            ("power_type", power_type.to_owned()),
        ]
    };
    let cases = [
        (
            base("bad host!", &fx.mac, "amd64", "redfish"),
            json!({"hostname": ["Label contains disallowed characters: 'bad host!'."]}),
        ),
        (
            base("gpu-01", "zz:zz", "amd64", "redfish"),
            json!({"mac_addresses": ["'zz:zz' is not a valid MAC address."]}),
        ),
        (
            base("gpu-01", &fx.mac, "nonsense", "nonsense"),
            json!({
                "architecture": ["Select a valid choice. nonsense/generic is not one of the available choices."],
                "power_type": ["Select a valid choice. nonsense is not one of the available choices."],
            }),
        ),
        (
            base("-gpu", &fx.mac, "amd64", "redfish"),
            json!({"hostname": ["Label cannot start or end with hyphen: '-gpu'."]}),
        ),
        (
            base("gpu_01", &fx.mac, "amd64", "redfish"),
            json!({"hostname": ["Host label cannot contain underscore: 'gpu_01'."]}),
        ),
    ];
    for (form, expected) in cases {
        let reply = create(form.clone()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{form:?}: {}", reply.text());
        assert_eq!(reply.header("content-type"), Some("application/json"));
        assert_eq!(reply.json(), expected, "{form:?}");
    }
    // An empty MAC with a percent-encoded non-UTF-8 hostname: both fields refused at once.
    let request = Request::builder()
        .method(Method::POST)
        .uri("/MAAS/api/2.0/machines/")
        .header("authorization", quoted_header(&fx.key))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from("hostname=%FF%FE&mac_addresses=&architecture=amd64&power_type=redfish"))
        .unwrap();
    let reply = send(maas::router(fx.shared.clone(), fx.clock.clone()), request).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text());
    let errors = reply.json();
    assert_eq!(errors["mac_addresses"], json!(["This field is required."]));
    assert!(errors["hostname"][0].as_str().unwrap().starts_with("Label contains disallowed characters"), "{errors}");
    // Nothing was created by any of them.
    assert_eq!(maas(&fx, Method::GET, "machines/", &[]).await.json(), json!([]));
}

#[tokio::test]
async fn oauth_version_and_an_expired_timestamp_are_refused_as_maas_refuses_them() {
    let fx = fixture();
    let epoch_s = WIRE_EPOCH;
    let ask = |header: String| {
        let fx = &fx;
        async move {
            let request = Request::builder()
                .uri("/MAAS/api/2.0/machines/")
                .header("authorization", header)
                .body(Body::empty())
                .unwrap();
            send(maas::router(fx.shared.clone(), fx.clock.clone()), request).await
        }
    };
    let now = ask(unquoted_header(&fx.key, &epoch_s.to_string())).await;
    assert_eq!(now.status, StatusCode::OK, "{}", now.text());
    let future = ask(unquoted_header(&fx.key, &(epoch_s + 3600).to_string())).await;
    assert_eq!(future.status, StatusCode::OK, "python-oauth lets a timestamp from the future pass");
    for stale in ["0", "-5", &(epoch_s - 301).to_string()] {
        let reply = ask(unquoted_header(&fx.key, stale)).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "timestamp {stale}");
        assert_eq!(
            reply.text(),
            format!(
                "Authorization Error: 'Expired timestamp: given {stale} and now {epoch_s} has a greater difference \
                 than threshold 300'"
            )
        );
    }
    let version =
        ask(unquoted_header(&fx.key, &epoch_s.to_string()).replace("oauth_version=1.0", "oauth_version=2.0")).await;
    assert_eq!(version.status, StatusCode::UNAUTHORIZED);
    assert_eq!(version.text(), "Authorization Error: 'OAuth version 2.0 not supported.'");
}

#[tokio::test]
async fn redfish_systems_are_walked_with_a_bmc_s_own_login_or_the_emulator_login() {
    let fx = fixture();
    let other = lock(&fx.shared).site.add_machine("node-02");
    let own = || Some(basic("root", fx.bmc.password.expose()));
    let list = redfish(&fx, Method::GET, "/redfish/v1/Systems", own(), Value::Null, None).await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.json()["Members"], json!([{ "@odata.id": "/redfish/v1/Systems/node-01" }]), "its own system only");
    for member in list.json()["Members"].as_array().unwrap() {
        let path = member["@odata.id"].as_str().unwrap();
        assert_eq!(redfish(&fx, Method::GET, path, own(), Value::Null, None).await.status, StatusCode::OK);
    }
    let nobody = redfish(&fx, Method::GET, "/redfish/v1/Systems", Some(basic("root", "wrong")), Value::Null, None);
    assert_eq!(nobody.await.status, StatusCode::UNAUTHORIZED);

    lock(&fx.shared).redfish_login =
        Some(PowerCredential { user: "admin".into(), password: Secret::new("fleetsim-secret-emulator") });
    let emulator = || Some(basic("admin", "fleetsim-secret-emulator"));
    let list = redfish(&fx, Method::GET, "/redfish/v1/Systems", emulator(), Value::Null, None).await;
    assert_eq!(list.json()["Members@odata.count"], 2);
    let reset = redfish(
        &fx,
        Method::POST,
        "/redfish/v1/Systems/node-02/Actions/ComputerSystem.Reset",
        emulator(),
        json!({"ResetType": "On"}),
        None,
    )
    .await;
    assert_eq!(reset.status, StatusCode::NO_CONTENT, "{}", reset.text());
    let read = redfish(&fx, Method::GET, "/redfish/v1/Systems/node-02", emulator(), Value::Null, None).await;
    assert_eq!(read.json()["PowerState"], "On");
    // node-01's login still does not open node-02.
    let crossed = redfish(&fx, Method::GET, "/redfish/v1/Systems/node-02", own(), Value::Null, None).await;
    assert_eq!(crossed.status, StatusCode::UNAUTHORIZED);
    let _ = other;
}

#[test]
fn a_question_in_another_class_than_in_is_refused_before_the_model() {
    use hickory_proto::op::{Message, Query, ResponseCode};
    use hickory_proto::rr::{DNSClass, Name, RecordType};
    let fx = fixture();
    let mut query = Query::query(Name::from_ascii("metadata.maas-internal.").unwrap(), RecordType::A);
    query.set_query_class(DNSClass::CH);
    let mut message = Message::new();
    message.set_id(0x5151).set_recursion_desired(true).add_query(query);
    let reply =
        Message::from_vec(&dns::answer(&fx.shared, &fx.clock, "10.10.0.50", &message.to_vec().unwrap())).unwrap();
    assert_eq!(reply.id(), 0x5151);
    assert_eq!(reply.response_code(), ResponseCode::Refused);
    assert!(reply.answers().is_empty());
    assert!(lock(&fx.shared).drain_events().is_empty(), "the model never saw it");
}

#[tokio::test]
async fn dns_over_tcp_answers_length_prefixed_queries_on_one_connection() {
    use hickory_proto::op::{Message, ResponseCode};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fx = fixture();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(dns::serve_tcp(listener, fx.shared.clone(), fx.clock.clone(), 4));
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    for (id, name, code) in
        [(1, "metadata.maas-internal.", ResponseCode::NoError), (2, "nothing.maas-internal.", ResponseCode::NXDomain)]
    {
        let query = dns_query(id, name);
        stream.write_all(&u16::try_from(query.len()).unwrap().to_be_bytes()).await.unwrap();
        stream.write_all(&query).await.unwrap();
        let mut length = [0u8; 2];
        stream.read_exact(&mut length).await.unwrap();
        let mut reply = vec![0u8; usize::from(u16::from_be_bytes(length))];
        stream.read_exact(&mut reply).await.unwrap();
        let reply = Message::from_vec(&reply).unwrap();
        assert_eq!((reply.id(), reply.response_code()), (id, code));
    }
    server.abort();
}

#[tokio::test]
async fn an_agent_registers_with_its_bootstrap_token_or_current_credential_and_an_impostor_is_refused_and_audited() {
    let fx = hub_fixture();
    let register = |agent: &'static str, token: &'static str| {
        let fx = &fx;
        async move {
            let body = json!({ "kind": "durable", "token": token });
            hub_call(fx, Method::POST, &format!("/v1/hub/agents/{agent}/register"), None, body).await
        }
    };
    let unknown = register("w2", "anything").await;
    assert_eq!((unknown.status.as_u16(), unknown.json()["error"].as_str()), (401, Some("unauthorized")));
    let wrong_bootstrap = register("w1", "not-t1").await;
    assert_eq!(wrong_bootstrap.status, StatusCode::UNAUTHORIZED);
    assert_eq!(register("w1", "t1").await.status, StatusCode::OK, "the bootstrap token enrols");
    assert_eq!(register("w1", "t1").await.status, StatusCode::OK, "the current credential re-registers");
    // The impostor: the enrolled agent's name with a new token and no credential.
    let impostor = register("w1", "impostor").await;
    assert_eq!((impostor.status.as_u16(), impostor.json()["error"].as_str()), (401, Some("unauthorized")));
    let beat = hub_call(&fx, Method::POST, "/v1/hub/agents/w1/heartbeat", None, json!({ "token": "t1" })).await;
    assert_eq!(beat.status, StatusCode::OK, "the real agent's heartbeats are still accepted");
    let audit = std::mem::take(&mut lock(&fx.shared).audit);
    let agents: Vec<&str> = audit.iter().map(|record| record.agent.as_str()).collect();
    assert_eq!(agents, ["w2", "w1", "w1"]);
    assert_eq!(audit[2].reason, "the token is not the agent's current credential");
    assert!(audit.iter().all(|record| !format!("{record:?}").contains("impostor")), "no token is audited");
}

// ---- Credentials before bodies -------------------------------------------------------------------------------------

/// A body that never arrives: a route that waited for it would never answer.
fn body_never_sent() -> Body {
    Body::from_stream(futures_util::stream::pending::<Result<bytes::Bytes, std::io::Error>>())
}

#[test]
fn every_route_that_reads_a_body_refuses_a_missing_or_wrong_credential_before_reading_it() {
    let fx = fixture();
    let hub = hub_fixture();
    let system_path = {
        let front = lock(&fx.shared);
        format!("/redfish/v1/Systems/{}", front.site.bmc.system_ids()[0])
    };
    let cases: Vec<(&str, Router, Request<Body>, u16)> = vec![
        (
            "maas POST machines without a key",
            maas::router(fx.shared.clone(), fx.clock.clone()),
            Request::post("/MAAS/api/2.0/machines/").body(body_never_sent()).unwrap(),
            401,
        ),
        (
            "maas POST machines with a wrong key",
            maas::router(fx.shared.clone(), fx.clock.clone()),
            Request::post("/MAAS/api/2.0/machines/")
                .header("authorization", quoted_header("ck:tk:fleetsim-secret-wrong"))
                .body(body_never_sent())
                .unwrap(),
            401,
        ),
        (
            "secrets bootstrap token without a token",
            vault::router(fx.shared.clone(), fx.clock.clone()),
            Request::post("/v1/auth/bootstrap/token").body(body_never_sent()).unwrap(),
            403,
        ),
        (
            "redfish reset with another login",
            redfish::router(fx.shared.clone(), fx.clock.clone()),
            Request::post(format!("{system_path}/Actions/ComputerSystem.Reset"))
                .header("authorization", basic("root", "wrong-password"))
                .body(body_never_sent())
                .unwrap(),
            401,
        ),
        (
            "redfish patch without a login",
            redfish::router(fx.shared.clone(), fx.clock.clone()),
            Request::patch(system_path.clone()).body(body_never_sent()).unwrap(),
            401,
        ),
        (
            "hub lock without a principal",
            hub::router(hub.shared.clone(), hub.clock.clone()),
            Request::post("/v1/hub/lock").body(body_never_sent()).unwrap(),
            401,
        ),
        (
            "hub lock with a wrong token",
            hub::router(hub.shared.clone(), hub.clock.clone()),
            Request::post("/v1/hub/lock")
                .header("x-fleet-principal", "controller")
                .header("x-fleet-token", "fleetsim-secret-wrong")
                .body(body_never_sent())
                .unwrap(),
            401,
        ),
        (
            "hub register with a made-up token",
            hub::router(hub.shared.clone(), hub.clock.clone()),
            Request::post("/v1/hub/agents/w1/register")
                .header("authorization", "Bearer made-up")
                .body(body_never_sent())
                .unwrap(),
            401,
        ),
        (
            "hub heartbeat without a token",
            hub::router(hub.shared.clone(), hub.clock.clone()),
            Request::post("/v1/hub/agents/w1/heartbeat").body(body_never_sent()).unwrap(),
            401,
        ),
    ];
    for (what, router, request, status) in cases {
        let answer = futures_util::FutureExt::now_or_never(router.oneshot(request))
            .unwrap_or_else(|| panic!("{what}: the route waited for the body before it checked the credential"))
            .unwrap();
        assert_eq!(answer.status().as_u16(), status, "{what}");
    }
}
