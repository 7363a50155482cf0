//! `engine::adapters::http::secrets::SecretsClient` over real loopback TCP: against wiremock stubs (the exact requests
//! it sends, and how each error status reads) and against the served fake store (`fakes::http::vault::router`).
//!
//! The scenario bodies (`body_*`) take any `SiteSecrets`, so the same assertions run against a stub that answers as
//! the store's API is documented and against the fake store itself.

use std::sync::Arc;

use engine::adapters::http::secrets::{SecretsClient, SiteConfigDefaults};
use engine::adapters::http::{HttpRequest, HttpTransport};
use engine::ports::site::{SiteConfig, SiteSecrets};
use engine::ports::{SecretsError, TransportError};
use engine::secret::{SECRET_MARKER, Secret};
use fakes::http::{SharedSite, SiteFront};
use fakes::maas::{PowerCredential, Site, SiteConfig as FakeSiteConfig, VaultRequest};
use serde_json::json;
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TOKEN: &str = "fleetsim-secret-vault-token-wire";
const CALL_TIMEOUT_MS: u64 = 5_000;
const NODE: &str = "node-07";

/// The transport the clients use: hyper over loopback TCP.
fn transport(base_url: &str) -> impl HttpTransport + use<> {
    sim::wire::http::HyperTransport::tcp(base_url).expect("a loopback base url")
}

fn defaults() -> SiteConfigDefaults {
    SiteConfigDefaults { metadata_host: "metadata.maas-internal".into(), pxe_vlan_vid: 5001, roce_vlan_vid: 5002 }
}

fn client_at(base_url: &str, token: &str) -> SecretsClient<impl HttpTransport + use<>> {
    SecretsClient::new(transport(base_url), Secret::new(token), CALL_TIMEOUT_MS).with_site_defaults(defaults())
}

fn client(server: &MockServer) -> SecretsClient<impl HttpTransport + use<>> {
    client_at(&server.uri(), TOKEN)
}

fn ok(body: serde_json::Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

fn errors(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({"errors": [message]}))
}

// --- scenario bodies ------------------------------------------------------------------------------------------------

async fn body_reads_an_enabled_site(secrets: &impl SiteSecrets) {
    let config = secrets.site_config().await.expect("the site configuration");
    let expected = SiteConfig {
        enabled: true,
        metadata_host: "metadata.maas-internal".into(),
        pxe_vlan_vid: 5001,
        roce_vlan_vid: 5002,
        roce_mandatory: false,
        timeouts: Default::default(),
    };
    assert_eq!(config, expected);
}

async fn body_resolves_the_power_credential(secrets: &impl SiteSecrets) {
    let credential = secrets.power_credential(NODE).await.expect("the power credential");
    assert_eq!(credential.user, "root");
    assert!(credential.password.expose().starts_with(SECRET_MARKER));
}

async fn body_has_no_power_credential(secrets: &impl SiteSecrets) {
    let error = secrets.power_credential(NODE).await.expect_err("no credential");
    assert_eq!(error, SecretsError::NotFound(format!("power credential of {NODE}")));
}

async fn body_issues_a_token_then_deletes_the_node_s_secrets(secrets: &impl SiteSecrets) {
    let token = secrets.bootstrap_token(NODE, 3_600_000).await.expect("a bootstrap token");
    assert!(token.expose().starts_with(SECRET_MARKER));
    let capabilities = secrets.node_secrets_capabilities().await.expect("the capabilities");
    assert!(capabilities.iter().any(|capability| capability == "delete"), "{capabilities:?}");
    assert_eq!(secrets.delete_node_secrets(NODE).await, Ok(2), "the override and the token");
    assert_eq!(secrets.delete_node_secrets(NODE).await, Ok(0), "a second delete finds nothing");
}

async fn body_is_unavailable_once(secrets: &impl SiteSecrets) {
    let error = secrets.site_config().await.expect_err("unavailable");
    assert_eq!(error, SecretsError::Unavailable("vault is unavailable".into()));
    secrets.site_config().await.expect("available again");
}

async fn body_has_no_token_policy(secrets: &impl SiteSecrets) {
    let error = secrets.bootstrap_token(NODE, 60_000).await.expect_err("no policy");
    assert_eq!(error, SecretsError::Unsupported("the site has no bootstrap-token policy".into()));
}

async fn body_is_a_disabled_site(secrets: &impl SiteSecrets) {
    assert_eq!(secrets.site_config().await, Err(SecretsError::Refused("site is disabled".into())));
}

async fn body_refuses_the_token(secrets: &impl SiteSecrets) {
    assert_eq!(secrets.site_config().await, Err(SecretsError::Refused("permission denied".into())));
    assert_eq!(secrets.delete_node_secrets(NODE).await, Err(SecretsError::Refused("permission denied".into())));
}

async fn body_is_denied_delete(secrets: &impl SiteSecrets) {
    let capabilities = secrets.node_secrets_capabilities().await.expect("the capabilities");
    assert!(!capabilities.iter().any(|capability| capability == "delete"), "{capabilities:?}");
    let error = secrets.delete_node_secrets(NODE).await.expect_err("denied");
    assert_eq!(error, SecretsError::Refused(format!("permission denied: delete on the secrets of {NODE}")));
}

// --- against wiremock -----------------------------------------------------------------------------------------------

fn site_config_answer() -> ResponseTemplate {
    ok(json!({"data": {"data": {"enabled": "true", "maas_url": "http://metadata.maas-internal:5240/MAAS"}}}))
}

#[tokio::test]
async fn stub_the_site_configuration_is_a_get_with_the_token() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/secret/data/site/config"))
        .and(header("x-vault-token", TOKEN))
        .respond_with(site_config_answer())
        .expect(1)
        .mount(&server)
        .await;
    body_reads_an_enabled_site(&client(&server)).await;
}

#[tokio::test]
async fn stub_the_power_credential_is_a_get_by_node() {
    let server = MockServer::start().await;
    let power = json!({"data": {"data": {"user": "root", "password": "fleetsim-secret-bmc-1"}}, "source": "override"});
    Mock::given(method("GET"))
        .and(path(format!("/v1/secret/data/power/{NODE}")))
        .and(header("x-vault-token", TOKEN))
        .respond_with(ok(power))
        .expect(1)
        .mount(&server)
        .await;
    body_resolves_the_power_credential(&client(&server)).await;
    let server = MockServer::start().await;
    let missing = format!("no power credential for node {NODE}: no override and no site default");
    Mock::given(method("GET")).respond_with(errors(404, &missing)).expect(1).mount(&server).await;
    body_has_no_power_credential(&client(&server)).await;
}

#[tokio::test]
async fn stub_token_capabilities_and_delete_send_their_json() {
    let server = MockServer::start().await;
    let token = json!({"auth": {"client_token": "fleetsim-secret-boot-1", "accessor": "bt-0001", "expires_at_ms": 9}});
    Mock::given(method("POST"))
        .and(path("/v1/auth/bootstrap/token"))
        .and(header("x-vault-token", TOKEN))
        .and(header("content-type", "application/json"))
        .and(body_json(json!({"node": NODE, "ttl_ms": 3_600_000})))
        .respond_with(ok(token))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/sys/capabilities-self"))
        .and(header("x-vault-token", TOKEN))
        .and(body_json(json!({"paths": ["secret/data/nodes"]})))
        .respond_with(ok(json!({"capabilities": ["create", "delete", "list", "read", "update"]})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path(format!("/v1/secret/data/nodes/{NODE}")))
        .and(header("x-vault-token", TOKEN))
        .respond_with(ok(json!({"deleted": 2})))
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path(format!("/v1/secret/data/nodes/{NODE}")))
        .respond_with(ok(json!({"deleted": 0})))
        .expect(1)
        .mount(&server)
        .await;
    body_issues_a_token_then_deletes_the_node_s_secrets(&client(&server)).await;
}

#[tokio::test]
async fn stub_each_error_status_reads_as_the_port_s_error() {
    let server = MockServer::start().await;
    let unavailable = errors(503, "vault is unavailable").insert_header("retry-after", "1");
    Mock::given(method("GET")).respond_with(unavailable).up_to_n_times(1).mount(&server).await;
    Mock::given(method("GET")).respond_with(site_config_answer()).mount(&server).await;
    body_is_unavailable_once(&client(&server)).await;

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(errors(501, "the site has no bootstrap-token policy"))
        .mount(&server)
        .await;
    body_has_no_token_policy(&client(&server)).await;

    let server = MockServer::start().await;
    Mock::given(method("GET")).respond_with(errors(403, "site is disabled")).mount(&server).await;
    body_is_a_disabled_site(&client(&server)).await;

    let server = MockServer::start().await;
    Mock::given(method("GET")).respond_with(errors(403, "permission denied")).mount(&server).await;
    Mock::given(method("DELETE")).respond_with(errors(403, "permission denied")).mount(&server).await;
    body_refuses_the_token(&client(&server)).await;

    let server = MockServer::start().await;
    let capabilities = json!({"capabilities": ["create", "list", "read", "update"]});
    Mock::given(method("POST")).respond_with(ok(capabilities)).mount(&server).await;
    let denied = format!("permission denied: delete on the secrets of {NODE}");
    Mock::given(method("DELETE")).respond_with(errors(403, &denied)).mount(&server).await;
    body_is_denied_delete(&client(&server)).await;
}

#[tokio::test]
async fn a_store_that_is_not_listening_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let client = client_at(&format!("http://{address}"), TOKEN);
    let error = client.site_config().await.unwrap_err();
    assert_eq!(error, SecretsError::Transport(TransportError::ConnectionRefused));
}

#[tokio::test]
async fn no_token_reaches_an_error_or_a_debug_output() {
    let server = MockServer::start().await;
    // A store that echoes the token it was sent: the client still never shows it.
    let echo = format!("permission denied for token {TOKEN}");
    Mock::given(method("GET")).respond_with(errors(403, &echo)).mount(&server).await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(501)).mount(&server).await;
    Mock::given(method("DELETE")).respond_with(errors(503, &echo)).mount(&server).await;
    let client = client(&server);
    let errors = [
        client.site_config().await.unwrap_err(),
        client.power_credential("n1").await.unwrap_err(),
        client.bootstrap_token("n1", 5).await.unwrap_err(),
        client.delete_node_secrets("n1").await.unwrap_err(),
    ];
    for error in errors {
        assert!(!format!("{error}").contains(TOKEN), "{error}");
        assert!(!format!("{error:?}").contains(TOKEN), "{error:?}");
    }
    let request = HttpRequest::new(engine::adapters::http::Method::Get, "/").header("x-vault-token", TOKEN);
    assert!(!format!("{request:?}").contains(TOKEN));
}

// --- against the served fake store ----------------------------------------------------------------------------------

/// The fake site's secrets store served on a loopback port; its clock stands at 0.
struct ServedStore {
    shared: SharedSite,
    base_url: String,
    token: String,
}

impl ServedStore {
    async fn start() -> ServedStore {
        let shared = SiteFront::new(Site::new(FakeSiteConfig::new(7))).shared();
        let clock: fakes::http::Clock = Arc::new(|| 0);
        let router = fakes::http::vault::router(shared.clone(), clock);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let base_url = format!("http://{}", listener.local_addr().expect("its address"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        let token = shared.lock().expect("the front").vault_token().expose().to_owned();
        ServedStore { shared, base_url, token }
    }

    fn client(&self) -> SecretsClient<impl HttpTransport + use<>> {
        client_at(&self.base_url, &self.token)
    }

    fn with_vault<R>(&self, change: impl FnOnce(&mut fakes::maas::Vault) -> R) -> R {
        change(&mut self.shared.lock().expect("the front").site.vault)
    }

    fn put_override(&self) {
        let credential = PowerCredential { user: "root".into(), password: fakes::maas::Secret::mint("bmc", 3) };
        let put = VaultRequest::PutPowerCredential { node: Some(NODE.into()), credential };
        self.with_vault(|vault| vault.handle(0, put)).expect("stored");
    }
}

#[tokio::test]
async fn served_reads_the_site_and_the_power_credential() {
    let store = ServedStore::start().await;
    body_reads_an_enabled_site(&store.client()).await;
    body_has_no_power_credential(&store.client()).await;
    store.put_override();
    body_resolves_the_power_credential(&store.client()).await;
}

#[tokio::test]
async fn served_issues_a_token_then_deletes_the_node_s_secrets() {
    let store = ServedStore::start().await;
    store.put_override();
    body_issues_a_token_then_deletes_the_node_s_secrets(&store.client()).await;
}

#[tokio::test]
async fn served_errors_read_as_the_port_s_errors() {
    let store = ServedStore::start().await;
    store.with_vault(|vault| vault.fail_next(1));
    body_is_unavailable_once(&store.client()).await;
    store.with_vault(|vault| vault.set_token_policy(false));
    body_has_no_token_policy(&store.client()).await;
    store.with_vault(|vault| vault.set_delete_policy(false));
    body_is_denied_delete(&store.client()).await;
    body_refuses_the_token(&client_at(&store.base_url, TOKEN)).await;
    store.with_vault(|vault| vault.set_site_value("enabled", "false"));
    body_is_a_disabled_site(&store.client()).await;
}
