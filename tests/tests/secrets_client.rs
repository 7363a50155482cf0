//! `engine::http::secrets::SecretsClient` over real loopback TCP: against wiremock stubs (the exact requests it
//! sends, and how each error status reads) and against the served fake store.

use engine::http::HttpRequest;
use engine::http::secrets::{SecretsClient, SiteConfigDefaults};
use engine::ports::site::{SiteConfig, SiteSecrets};
use engine::ports::{SecretsError, TransportError};
use engine::secret::Secret;
use serde_json::json;
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[path = "support/loopback_http.rs"]
mod loopback;

const TOKEN: &str = "fleetsim-secret-vault-token-wire";
const CALL_TIMEOUT_MS: u64 = 5_000;

/// The transport the clients use over loopback TCP.
type Transport = loopback::Loopback;

fn transport(base_url: &str) -> Transport {
    loopback::Loopback::new(base_url)
}

fn client(server: &MockServer) -> SecretsClient<Transport> {
    SecretsClient::new(transport(&server.uri()), Secret::new(TOKEN), CALL_TIMEOUT_MS)
}

fn ok(body: serde_json::Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

#[tokio::test]
async fn the_site_configuration_is_a_get_with_the_token() {
    let server = MockServer::start().await;
    let config = json!({"data": {"data": {"enabled": "true", "maas_url": "http://maas.example:5240/MAAS"}}});
    Mock::given(method("GET"))
        .and(path("/v1/secret/data/site/config"))
        .and(header("x-vault-token", TOKEN))
        .respond_with(ok(config))
        .expect(1)
        .mount(&server)
        .await;
    let defaults =
        SiteConfigDefaults { metadata_host: "metadata.maas-internal".into(), pxe_vlan_vid: 5001, roce_vlan_vid: 5002 };
    let config = client(&server).with_site_defaults(defaults).site_config().await.unwrap();
    assert_eq!(
        config,
        SiteConfig {
            enabled: true,
            metadata_host: "metadata.maas-internal".into(),
            pxe_vlan_vid: 5001,
            roce_vlan_vid: 5002,
            roce_mandatory: false,
        }
    );
}

#[tokio::test]
async fn each_call_sends_its_method_path_and_json_body() {
    let server = MockServer::start().await;
    let power = json!({"data": {"data": {"user": "root", "password": "fleetsim-secret-bmc-1"}}, "source": "override"});
    Mock::given(method("GET"))
        .and(path("/v1/secret/data/power/node-07"))
        .and(header("x-vault-token", TOKEN))
        .respond_with(ok(power))
        .expect(1)
        .mount(&server)
        .await;
    let token = json!({"auth": {"client_token": "fleetsim-secret-boot-1", "accessor": "tok-1", "expires_at_ms": 9}});
    Mock::given(method("POST"))
        .and(path("/v1/auth/bootstrap/token"))
        .and(header("x-vault-token", TOKEN))
        .and(header("content-type", "application/json"))
        .and(body_json(json!({"node": "node-07", "ttl_ms": 3_600_000})))
        .respond_with(ok(token))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/sys/capabilities-self"))
        .and(header("x-vault-token", TOKEN))
        .and(body_json(json!({"paths": ["secret/data/nodes"]})))
        .respond_with(ok(json!({"capabilities": ["delete", "read"]})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/v1/secret/data/nodes/node-07"))
        .and(header("x-vault-token", TOKEN))
        .respond_with(ok(json!({"deleted": 2})))
        .expect(1)
        .mount(&server)
        .await;

    let client = client(&server);
    let credential = client.power_credential("node-07").await.unwrap();
    assert_eq!((credential.user.as_str(), credential.password.expose()), ("root", "fleetsim-secret-bmc-1"));
    assert_eq!(client.bootstrap_token("node-07", 3_600_000).await.unwrap().expose(), "fleetsim-secret-boot-1");
    assert_eq!(client.node_secrets_capabilities().await.unwrap(), ["delete", "read"]);
    assert_eq!(client.delete_node_secrets("node-07").await.unwrap(), 2);
}

#[tokio::test]
async fn error_statuses_read_as_the_port_s_errors() {
    let cases = [
        (503, SecretsError::Unavailable("vault is unavailable".into())),
        (404, SecretsError::NotFound("power credential of node-07".into())),
        (403, SecretsError::Refused("vault is unavailable".into())),
        (501, SecretsError::Unsupported("vault is unavailable".into())),
    ];
    for (status, expected) in cases {
        let server = MockServer::start().await;
        let answer = ResponseTemplate::new(status)
            .set_body_json(json!({"errors": ["vault is unavailable"]}))
            .insert_header("retry-after", "5");
        Mock::given(method("GET")).respond_with(answer).mount(&server).await;
        let error = client(&server).power_credential("node-07").await.unwrap_err();
        assert_eq!(error, expected, "status {status}");
    }
}

#[tokio::test]
async fn a_store_that_is_not_listening_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let client = SecretsClient::new(transport(&format!("http://{address}")), Secret::new(TOKEN), CALL_TIMEOUT_MS);
    let error = client.site_config().await.unwrap_err();
    assert_eq!(error, SecretsError::Transport(TransportError::ConnectionRefused));
}

#[tokio::test]
async fn no_token_reaches_an_error_or_a_debug_output() {
    let server = MockServer::start().await;
    // A store that echoes the token it was sent: the client still never shows it.
    let echo = json!({"errors": [format!("permission denied for token {TOKEN}")]});
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(403).set_body_json(echo)).mount(&server).await;
    let client = client(&server);
    let mut errors = vec![client.site_config().await.unwrap_err(), client.power_credential("n1").await.unwrap_err()];
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(501)).mount(&server).await;
    errors.push(
        SecretsClient::new(transport(&server.uri()), Secret::new(TOKEN), CALL_TIMEOUT_MS)
            .bootstrap_token("n1", 5)
            .await
            .unwrap_err(),
    );
    for error in errors {
        assert!(!format!("{error}").contains(TOKEN), "{error}");
        assert!(!format!("{error:?}").contains(TOKEN), "{error:?}");
    }
    let request = HttpRequest::new(engine::http::Method::Get, "/").header("x-vault-token", TOKEN);
    assert!(!format!("{request:?}").contains(TOKEN));
}
