//! `fleetsim serve` over real loopback sockets: the engine's real adapters reach every served fake, and faults
//! injected through the admin API while it runs reach them as the real services' failures would.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use engine::adapters::http::dns::DnsClient;
use engine::adapters::http::maas::MaasClient;
use engine::adapters::http::secrets::SecretsClient;
use engine::ports::site::{DnsAnswer, MaasApi, MaasError, Resolver, SiteSecrets};
use engine::secret::Secret;
use sim::live::serve::{ServeConfig, Served};
use sim::wire::http::HyperTransport;
use sim::wire::udp::UdpTransport;

fn config(machines: u32) -> ServeConfig {
    ServeConfig {
        seed: 3,
        machines: sim::live::serve::machine_names(machines),
        bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port: 0,
        speed: 60,
        write_site: None,
        secrets: sim::live::serve::SecretSource::Random,
        limits: sim::live::listen::Limits::default(),
    }
}

fn url(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

/// The engine's clock as the served site's MAAS sees it: the host's, since MAAS refuses an OAuth timestamp more
/// than 300 s old.
struct Clock;

impl engine::ports::Clock for Clock {
    #[expect(clippy::disallowed_methods, reason = "the served site runs on the wall clock; so does its client")]
    fn now_ms(&self) -> u64 {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    }
    fn monotonic_ms(&self) -> u64 {
        0
    }
    async fn sleep_ms(&self, _duration_ms: u64) {}
}

async fn post_fault_as(admin: SocketAddr, token: Option<&str>, body: &str) -> u16 {
    let transport = HyperTransport::tcp(&url(admin)).unwrap();
    let mut request = engine::adapters::http::HttpRequest::new(engine::adapters::http::Method::Post, "/admin/faults");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request.header("content-type", "application/json").body(body.as_bytes().to_vec());
    let response = engine::adapters::http::HttpTransport::send(&transport, request, 5_000).await.unwrap();
    response.status
}

async fn post_fault(served: &Served, body: &str) -> u16 {
    post_fault_as(served.admin, Some(&served.credentials.admin_token), body).await
}

fn maas(served: &Served) -> MaasClient<HyperTransport<hyper_util::client::legacy::connect::HttpConnector>, Clock> {
    let transport = HyperTransport::tcp(&url(served.maas)).unwrap();
    MaasClient::new(transport, Clock, &Secret::new(served.maas_api_key.clone()), 7, 5_000).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_s_adapters_reach_the_served_site_and_admin_faults_reach_them() {
    let (served, _fleet) = sim::live::serve::start(&config(2)).await.unwrap();
    assert_eq!(served.maas.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));

    // MAAS with the printed API key: an empty region, then a 503 with Retry-After once the admin API asks for one.
    let client = maas(&served);
    assert_eq!(client.machines().await.unwrap(), Vec::new());
    assert_eq!(post_fault(&served, r#"{"fault":"maas_503","count":1,"retry_after_s":4}"#).await, 200);
    match client.machines().await {
        Err(MaasError::Http { status: 503, retry_after_s: Some(4), .. }) => {}
        other => panic!("expected a 503 with Retry-After: 4, got {other:?}"),
    }
    assert!(client.machines().await.is_ok(), "the fault is spent after one answer");

    // A wrong key is MAAS's 401.
    let wrong = MaasClient::new(
        HyperTransport::tcp(&url(served.maas)).unwrap(),
        Clock,
        &Secret::new("ck:tk:fleetsim-secret-wrong"),
        7,
        5_000,
    )
    .unwrap();
    assert!(matches!(wrong.machines().await, Err(MaasError::Http { status: 401, .. })));

    // The secrets store with the printed token names the site's configuration.
    let secrets = SecretsClient::new(
        HyperTransport::tcp(&url(served.secrets)).unwrap(),
        Secret::new(served.secrets_token.clone()),
        5_000,
    );
    let site = secrets.site_config().await.unwrap();
    assert!(site.enabled);
    assert_eq!(site.metadata_host, fakes::maas::METADATA_HOST);
    assert_eq!(secrets.power_credential("gpu-01").await.unwrap().user, "root");

    // The rack resolver over UDP, then SERVFAIL while the admin fault is on, then healed.
    let resolver = DnsClient::new(UdpTransport::new(served.dns), 1, 2_000);
    assert!(matches!(resolver.resolve(fakes::maas::METADATA_HOST).await.unwrap(), DnsAnswer::Address(_)));
    assert_eq!(post_fault(&served, r#"{"fault":"dns_servfail","on":true}"#).await, 200);
    assert_eq!(resolver.resolve(fakes::maas::METADATA_HOST).await.unwrap(), DnsAnswer::ServFail);
    assert_eq!(post_fault(&served, r#"{"fault":"dns_servfail","on":false}"#).await, 200);
    assert!(matches!(resolver.resolve(fakes::maas::METADATA_HOST).await.unwrap(), DnsAnswer::Address(_)));

    // An unknown fault, or one naming no machine, is refused and changes nothing.
    assert_eq!(post_fault(&served, r#"{"fault":"meteor_strike"}"#).await, 400);
    assert_eq!(post_fault(&served, r#"{"fault":"mac_drift","machine":"gpu-99"}"#).await, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redfish_wants_basic_auth_and_the_secrets_store_has_each_bmc_s_login() {
    let (served, _fleet) = sim::live::serve::start(&config(1)).await.unwrap();
    let secrets = SecretsClient::new(
        HyperTransport::tcp(&url(served.secrets)).unwrap(),
        Secret::new(served.secrets_token.clone()),
        5_000,
    );
    let login = secrets.power_credential("gpu-01").await.unwrap();
    let redfish = HyperTransport::tcp(&url(served.redfish)).unwrap();
    let get = |auth: Option<String>| {
        let mut request =
            engine::adapters::http::HttpRequest::new(engine::adapters::http::Method::Get, "/redfish/v1/Systems/gpu-01");
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        request
    };
    let anonymous = engine::adapters::http::HttpTransport::send(&redfish, get(None), 5_000).await.unwrap();
    assert_eq!(anonymous.status, 401);
    let basic = format!(
        "Basic {}",
        engine::adapters::http::maas::base64_encode(format!("{}:{}", login.user, login.password.expose()).as_bytes())
    );
    let system = engine::adapters::http::HttpTransport::send(&redfish, get(Some(basic)), 5_000).await.unwrap();
    assert_eq!(system.status, 200);
    let body: serde_json::Value = serde_json::from_slice(&system.body).unwrap();
    assert_eq!(body["PowerState"], "Off");
    assert!(system.header("etag").is_some());
}

#[test]
fn serve_refuses_a_base_port_with_no_room_for_its_services() {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = sim::cli::main_with(["fleetsim", "serve", "--port", "65534"].map(Into::into), &mut out, &mut err);
    let err = String::from_utf8_lossy(&err);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("port 65534 leaves no room"), "{err}");
}

#[test]
fn serve_refuses_a_scenario_without_a_maas_site() {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/hub-crashes-and-restarts-mid-run.toml");
    let code = sim::cli::main_with(["fleetsim", "serve", "--scenario", scenario].map(Into::into), &mut out, &mut err);
    let err = String::from_utf8_lossy(&err);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("hub-crashes-and-restarts-mid-run.toml") && err.contains("no [onboarding] table"), "{err}");
}

#[test]
fn drive_names_the_file_line_and_field_of_a_malformed_site_file() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site.toml");
    std::fs::write(&site, "[maas]\nurl = \"http://127.0.0.1:5240/MAAS\"\napi_key_file = 7\n").unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args = ["fleetsim", "drive", "status", "--site", site.to_str().unwrap()];
    let code = sim::cli::main_with(args.map(Into::into), &mut out, &mut err);
    let err = String::from_utf8_lossy(&err);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("site.toml:3:"), "the line of the bad field: {err}");
    assert!(err.contains("api_key_file") || err.contains("invalid type"), "{err}");
}

async fn http(addr: SocketAddr, method: engine::adapters::http::Method, path: &str, auth: Option<String>) -> u16 {
    let transport = HyperTransport::tcp(&url(addr)).unwrap();
    let mut request = engine::adapters::http::HttpRequest::new(method, path)
        .header("content-type", "application/json")
        .body(br#"{"from":"active","to":"quarantined"}"#.to_vec());
    if let Some(auth) = auth {
        request = request.header("authorization", auth);
    }
    engine::adapters::http::HttpTransport::send(&transport, request, 5_000).await.unwrap().status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_state_changing_api_wants_its_credential() {
    use engine::adapters::http::Method::{Get, Post};
    let (served, _fleet) = sim::live::serve::start(&config(1)).await.unwrap();
    let credentials = &served.credentials;
    // The admin API's changes want the admin token; its state read is public.
    assert_eq!(post_fault_as(served.admin, None, r#"{"fault":"dns_servfail","on":true}"#).await, 401);
    assert_eq!(post_fault_as(served.admin, Some("wrong"), r#"{"fault":"dns_servfail","on":true}"#).await, 401);
    assert_eq!(
        post_fault_as(served.admin, Some(&credentials.inventory_token), r#"{"fault":"dns_servfail","on":true}"#).await,
        401
    );
    assert_eq!(http(served.admin, Get, "/admin/state", None).await, 200);
    let resolver = DnsClient::new(UdpTransport::new(served.dns), 1, 2_000);
    assert!(matches!(resolver.resolve(fakes::maas::METADATA_HOST).await.unwrap(), DnsAnswer::Address(_)), "no fault");
    // The inventory wants its bearer token on every route.
    let path = "/v1/inventory/nodes/gpu-01";
    assert_eq!(http(served.hub, Get, path, None).await, 401);
    assert_eq!(http(served.hub, Post, &format!("{path}/transition"), None).await, 401);
    let bearer = Some(format!("Bearer {}", credentials.inventory_token));
    assert_eq!(http(served.hub, Get, path, bearer.clone()).await, 200);
    // The hub: a registration with a made-up token is refused.
    let transport = HyperTransport::tcp(&url(served.hub)).unwrap();
    let register = engine::adapters::http::HttpRequest::new(Post, "/v1/hub/agents/gpu-01/register")
        .header("content-type", "application/json")
        .body(br#"{"kind":"durable","token":"made-up"}"#.to_vec());
    let answer = engine::adapters::http::HttpTransport::send(&transport, register, 5_000).await.unwrap();
    assert_eq!(answer.status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_random_per_start_unless_the_seed_asks_for_reproducible_ones() {
    let (first, _a) = sim::live::serve::start(&config(1)).await.unwrap();
    let (second, _b) = sim::live::serve::start(&config(1)).await.unwrap();
    assert_ne!(first.credentials, second.credentials);
    assert_ne!(first.maas_api_key, second.maas_api_key);
    assert_ne!(first.credentials.admin_token, second.credentials.admin_token);
    let seeded = ServeConfig { secrets: sim::live::serve::SecretSource::Seeded, ..config(1) };
    let (third, _c) = sim::live::serve::start(&seeded).await.unwrap();
    let (fourth, _d) = sim::live::serve::start(&seeded).await.unwrap();
    assert_eq!(third.credentials, fourth.credentials);
    let banner = sim::live::serve::banner(&seeded, &third);
    assert!(banner.contains("REPRODUCIBLE: derived from seed 3"), "{banner}");
    assert!(sim::live::serve::banner(&config(1), &first).contains("random for this start"));
    assert!(!format!("{:?}", third.credentials).contains("fleetsim-secret"), "Debug redacts");
    // The files --write-site writes are what --credentials reads back, and a copy readable by others is refused.
    let dir = tempfile::tempdir().unwrap();
    sim::live::serve::write_site(dir.path(), &first, &_a).unwrap();
    let given = ServeConfig { secrets: sim::live::serve::SecretSource::Files(dir.path().to_owned()), ..config(1) };
    let (fifth, _e) = sim::live::serve::start(&given).await.unwrap();
    assert_eq!(fifth.credentials, first.credentials);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path().join("admin-token"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = sim::live::serve::start(&given).await.err().expect("a world-readable credential file").to_string();
    assert!(refused.contains("admin-token") && refused.contains("chmod 600"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_site_leaves_every_credential_file_0600_even_over_a_wider_one() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // A site directory written before, its credential files since copied or edited to 0644.
    let private: Vec<&str> = sim::live::serve::CREDENTIAL_FILES.iter().copied().chain(["admin-header"]).collect();
    for name in &private {
        std::fs::write(dir.path().join(name), "stale").unwrap();
        std::fs::set_permissions(dir.path().join(name), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let config = ServeConfig { write_site: Some(dir.path().to_owned()), ..config(1) };
    let (served, _fleet) = sim::live::serve::start(&config).await.unwrap();
    for name in &private {
        let path = dir.path().join(name);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name} kept mode {mode:04o}");
        assert_ne!(std::fs::read_to_string(&path).unwrap(), "stale", "{name} rewritten");
    }
    assert_eq!(std::fs::read_to_string(dir.path().join("admin-token")).unwrap(), served.credentials.admin_token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_that_is_not_loopback_needs_explicit_credentials() {
    let open = ServeConfig { bind: IpAddr::V4(Ipv4Addr::UNSPECIFIED), ..config(1) };
    let error = sim::live::serve::start(&open).await.err().expect("refused").to_string();
    assert!(error.contains("--bind 0.0.0.0 is not loopback") && error.contains("--credentials DIR"), "{error}");
}

/// How many sockets this process may hold for a flood, leaving room for everything else it opens (both ends of every
/// served connection are in this process).
fn flood_size() -> usize {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let soft = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(3))
        .and_then(|soft| soft.parse::<usize>().ok())
        .unwrap_or(1_024);
    (soft.saturating_sub(1_024) / 2).clamp(600, 3_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_idle_connections_do_not_stop_the_site_for_a_real_client() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // No header timeout within the test's reach: only the connection cap can close the flood's connections.
    let limits = sim::live::listen::Limits { header_read: std::time::Duration::from_secs(3_600), ..Default::default() };
    let (served, _fleet) = sim::live::serve::start(&ServeConfig { limits, ..config(2) }).await.unwrap();
    let connections_max = limits.connections_max;
    let flood = flood_size();
    assert!(flood > connections_max, "a flood of {flood} does not pass the cap of {connections_max}");
    let mut idle = Vec::new();
    for index in 0..flood {
        let mut stream = tokio::net::TcpStream::connect(served.maas).await.unwrap();
        if index % 3 == 0 {
            // A third of them half-send a request (slowloris) and stop.
            stream.write_all(b"GET /MAAS/api/2.0/machines/ HTTP/1.1\r\nHost: maas\r\n").await.unwrap();
        }
        idle.push(stream);
    }
    // The engine's MAAS adapter, a real client, gets its answer.
    assert_eq!(maas(&served).machines().await.unwrap(), Vec::new());
    // The oldest of the flood was closed to make room (a read ends), where an uncapped listener keeps it open.
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(std::time::Duration::from_secs(20), idle[0].read(&mut byte)).await;
    assert!(matches!(read, Ok(Ok(0) | Err(_))), "the longest-idle of {flood} connections is still open: {read:?}");
}

/// Writes `request` on a fresh connection and reads the whole answer (the request says `Connection: close`).
async fn raw(addr: SocketAddr, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(20), stream.read_to_end(&mut answer)).await;
    assert!(matches!(read, Ok(Ok(_))), "no answer from {addr} within the guard: {read:?}");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_trickling_bodies_on_every_port_do_not_stop_a_real_client() {
    use tokio::io::AsyncWriteExt;
    // No deadline or rate within the test's reach: only the cap's eviction of connections stalled in a body can make
    // room (the previous listener counted them busy and refused the real client).
    let limits = sim::live::listen::Limits {
        header_read: std::time::Duration::from_secs(3_600),
        request: std::time::Duration::from_secs(3_600),
        body_read: std::time::Duration::from_secs(3_600),
        body_bytes_per_s_min: 0,
        ..Default::default()
    };
    let (served, _fleet) = sim::live::serve::start(&ServeConfig { limits, ..config(2) }).await.unwrap();
    let credentials = &served.credentials;
    let parts: Vec<&str> = credentials.maas_api_key.split(':').collect();
    #[expect(clippy::disallowed_methods, reason = "the served MAAS checks OAuth timestamps against the wall clock")]
    let now_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let oauth = format!(
        "OAuth oauth_version=1.0, oauth_signature_method=PLAINTEXT, oauth_consumer_key={}, oauth_token={}, \
         oauth_signature=&{}, oauth_nonce=n, oauth_timestamp={now_s}",
        parts[0], parts[1], parts[2]
    );
    let redfish_login = {
        let text = format!("{}:{}", sim::live::serve::REDFISH_EMULATOR_USER, credentials.redfish_password);
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in text.as_bytes().chunks(3) {
            let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
            for i in 0..4 {
                out.push(if i <= chunk.len() { ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char } else { '=' });
            }
        }
        format!("Basic {out}")
    };
    let hub_auth = format!(
        "X-Fleet-Principal: {}\r\nX-Fleet-Token: {}",
        sim::live::serve::CONTROLLER_PRINCIPAL,
        credentials.hub_credential
    );
    // Per port: the credential header, a route that reads a body, and a real client's request.
    let ports = [
        (
            "maas",
            served.maas,
            format!("Authorization: {oauth}"),
            "/MAAS/api/2.0/machines/",
            "GET /MAAS/api/2.0/version/",
        ),
        (
            "redfish",
            served.redfish,
            format!("Authorization: {redfish_login}"),
            "/redfish/v1/Systems/gpu-01/Actions/ComputerSystem.Reset",
            "GET /redfish/v1/Systems",
        ),
        (
            "secrets",
            served.secrets,
            format!("X-Vault-Token: {}", credentials.secrets_token),
            "/v1/auth/bootstrap/token",
            "GET /v1/secret/data/site/config",
        ),
        ("hub", served.hub, hub_auth.clone(), "/v1/hub/lock", "POST /v1/hub/auth"),
        (
            "admin",
            served.admin,
            format!("Authorization: Bearer {}", credentials.admin_token),
            "/admin/faults",
            "GET /admin/state",
        ),
    ];
    for (name, addr, credential, body_route, real) in ports {
        let mut trickling = Vec::new();
        for index in 0..1_000 {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            // Most carry the credential, so their bodies are read (a trickle); some carry none and are refused at once.
            let header = if index % 4 == 3 { String::new() } else { format!("{credential}\r\n") };
            let head =
                format!("POST {body_route} HTTP/1.1\r\nHost: {addr}\r\n{header}Content-Length: 100000\r\n\r\n{{");
            stream.write_all(head.as_bytes()).await.unwrap();
            trickling.push(stream);
        }
        let request = format!(
            "{real} HTTP/1.1\r\nHost: {addr}\r\n{credential}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let answer = raw(addr, &request).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{name}: a real client was not answered: {answer}");
        // A request without a credential is refused from its headers, its body never waited for.
        let refused =
            raw(addr, &format!("POST {body_route} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 100000\r\n\r\n{{")).await;
        assert!(refused.starts_with("HTTP/1.1 40"), "{name}: {refused}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_served_credential_is_redacted_by_its_value_even_without_the_marker() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let values = [
        "ck7a1c:tk9e2b:plain-served-maas-secret-41d0",
        "plain-served-vault-token-8c2f",
        "plain-served-hub-credential-5e71",
        "plain-served-inventory-token-0b9a",
        "plain-served-admin-token-77c3",
        "plain-served-redfish-password-2d64",
        "plain-served-provider-token-93fe",
    ];
    for (name, value) in sim::live::serve::CREDENTIAL_FILES.iter().zip(values) {
        std::fs::write(dir.path().join(name), value).unwrap();
        std::fs::set_permissions(dir.path().join(name), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let given = ServeConfig { secrets: sim::live::serve::SecretSource::Files(dir.path().to_owned()), ..config(1) };
    let (served, _fleet) = sim::live::serve::start(&given).await.unwrap();
    assert_eq!(served.credentials.admin_token, values[4]);
    for value in values.into_iter().chain(["plain-served-maas-secret-41d0"]) {
        let line = format!("a log line that quotes {value} by mistake");
        assert_eq!(engine::secret::redact(&line), "a log line that quotes [redacted] by mistake", "{value}");
    }
    // Too short a credential could not be told from a word: refused.
    std::fs::write(dir.path().join("admin-token"), "short").unwrap();
    let refused = sim::live::serve::start(&given).await.err().expect("a too-short credential").to_string();
    assert!(refused.contains("admin-token") && refused.contains("too short"), "{refused}");
}
