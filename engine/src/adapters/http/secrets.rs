//! The site secrets client: [`SiteSecrets`] over the secrets store's HTTP API (Vault-like: `X-Vault-Token`, JSON
//! bodies, errors as `{"errors": [...]}` with the status saying what kind).
//!
//! Semantics mirror the simulator's in-process adapter (`SimSiteSecrets`): the same calls, the same error kinds, and
//! the store's own message as the error text, so a run over the wire reads like a run over the fast transport.
//!
//! Status mapping (any call): 503 → `Unavailable` (worth retrying), 404 → `NotFound`, 401/403 → `Refused`, 501 →
//! `Unsupported`; any other 5xx → `Unavailable`, any other 4xx → `Refused`; no answer → `Transport`. An answer that
//! is not the expected JSON is `Refused` (a retry cannot fix a store that speaks another dialect), as the
//! simulator's adapter does with an answer of the wrong kind.
//!
//! API Boundary: the token goes out in one header and nowhere else. Error texts carry the store's message, never the
//! request; a message that echoes the token has it replaced by `[redacted]`.

use serde_json::{Value, json};

use super::{HttpRequest, HttpResponse, HttpTransport, Method};
use crate::ports::SecretsError;
use crate::ports::site::{PowerCredential, SiteConfig, SiteSecrets, StageTimeouts};
use crate::secret::Secret;

/// The node-secrets path the capability probe asks about (Vault's `sys/capabilities-self`).
pub const NODE_SECRETS_PATH: &str = "secret/data/nodes";

/// Site-configuration values the client falls back on when the store's configuration does not name them. A real
/// site names them (`metadata_host`, `pxe_vlan_vid`, `roce_vlan_vid`); the simulator's fake store does not, and its
/// wiring passes the fake site's values here (the engine knows no fake).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteConfigDefaults {
    pub metadata_host: String,
    pub pxe_vlan_vid: u16,
    pub roce_vlan_vid: u16,
}

/// [`SiteSecrets`] over HTTP. The transport carries the store's base URL; paths here are absolute (`/v1/...`).
pub struct SecretsClient<T> {
    transport: T,
    token: Secret,
    call_timeout_ms: u64,
    site_defaults: Option<SiteConfigDefaults>,
}

impl<T: HttpTransport> SecretsClient<T> {
    /// A client presenting `token` with every call; each call waits at most `call_timeout_ms` for its answer.
    pub fn new(transport: T, token: Secret, call_timeout_ms: u64) -> SecretsClient<T> {
        SecretsClient { transport, token, call_timeout_ms, site_defaults: None }
    }

    /// Values for the site-configuration keys the store leaves out. Without them, a configuration lacking
    /// `metadata_host`, `pxe_vlan_vid` or `roce_vlan_vid` is refused (an input error a person must fix).
    pub fn with_site_defaults(mut self, defaults: SiteConfigDefaults) -> SecretsClient<T> {
        self.site_defaults = Some(defaults);
        self
    }

    fn request(&self, method: Method, path: &str) -> HttpRequest {
        HttpRequest::new(method, path).header("accept", "application/json").header("x-vault-token", self.token.expose())
    }

    fn json_request(&self, method: Method, path: &str, body: &Value) -> HttpRequest {
        self.request(method, path).header("content-type", "application/json").body(body.to_string().into_bytes())
    }

    /// Sends `request` and answers its JSON body, or the store's error in the port's terms.
    async fn call(&self, request: HttpRequest, what: &str) -> Result<Value, SecretsError> {
        let response = self.transport.send(request, self.call_timeout_ms).await?;
        if !(200..300).contains(&response.status) {
            return Err(status_error(&response, &self.token));
        }
        serde_json::from_slice(&response.body).map_err(|_| unexpected(what))
    }
}

/// The store's message from an error body (`{"errors": [...]}`, joined by `; `), else its text, else the status.
fn error_message(response: &HttpResponse, token: &Secret) -> String {
    let from_json = serde_json::from_slice::<Value>(&response.body).ok().and_then(|body| {
        let errors: Vec<&str> = body.get("errors")?.as_array()?.iter().filter_map(Value::as_str).collect();
        (!errors.is_empty()).then(|| errors.join("; "))
    });
    let message = from_json.unwrap_or_else(|| {
        let text = String::from_utf8_lossy(&response.body).trim().chars().take(200).collect::<String>();
        if text.is_empty() { format!("http status {}", response.status) } else { text }
    });
    scrub(message, token)
}

/// Replaces any occurrence of the token in a server's message (a store that echoes what it was sent).
pub(crate) fn scrub(message: String, token: &Secret) -> String {
    let value = token.expose();
    if value.is_empty() || !message.contains(value) { message } else { message.replace(value, "[redacted]") }
}

fn status_error(response: &HttpResponse, token: &Secret) -> SecretsError {
    let message = error_message(response, token);
    match response.status {
        503 => SecretsError::Unavailable(message),
        404 => SecretsError::NotFound(message),
        401 | 403 => SecretsError::Refused(message),
        501 => SecretsError::Unsupported(message),
        500..=599 => SecretsError::Unavailable(message),
        _ => SecretsError::Refused(message),
    }
}

fn unexpected(what: &str) -> SecretsError {
    SecretsError::Refused(format!("the secrets store answered something else to a {what} request"))
}

/// A path segment, percent-encoded: unreserved characters, `:` and `@` pass (RFC 3986 `pchar`), the rest is `%XX`.
pub(crate) fn path_segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b':' | b'@') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A configuration value as text: the store keeps strings, but a number or a boolean is read the same.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// The site configuration in the engine's terms, with the same reading as the simulator's adapter: `enabled`
/// unless it says `false`, `roce_mandatory` only when it says `true`.
fn site_config(
    data: &serde_json::Map<String, Value>,
    defaults: Option<&SiteConfigDefaults>,
) -> Result<SiteConfig, SecretsError> {
    let text = |key: &str| data.get(key).and_then(scalar);
    let vid = |key: &str, default: Option<u16>| -> Result<u16, SecretsError> {
        match text(key) {
            Some(value) => value.trim().parse::<u16>().map_err(|_| {
                SecretsError::Refused(format!("the site configuration's {key} is not a vlan id: {value:?}"))
            }),
            None => default.ok_or_else(|| SecretsError::Refused(format!("the site configuration names no {key}"))),
        }
    };
    let metadata_host = match text("metadata_host") {
        Some(host) => host,
        None => defaults
            .map(|defaults| defaults.metadata_host.clone())
            .ok_or_else(|| SecretsError::Refused("the site configuration names no metadata_host".to_owned()))?,
    };
    Ok(SiteConfig {
        enabled: text("enabled").is_none_or(|value| value != "false"),
        metadata_host,
        pxe_vlan_vid: vid("pxe_vlan_vid", defaults.map(|defaults| defaults.pxe_vlan_vid))?,
        roce_vlan_vid: vid("roce_vlan_vid", defaults.map(|defaults| defaults.roce_vlan_vid))?,
        roce_mandatory: text("roce_mandatory").is_some_and(|value| value == "true"),
        timeouts: StageTimeouts::from_settings(text).map_err(SecretsError::Refused)?,
    })
}

impl<T: HttpTransport> SiteSecrets for SecretsClient<T> {
    async fn site_config(&self) -> Result<SiteConfig, SecretsError> {
        let what = "site configuration";
        let body = self.call(self.request(Method::Get, "/v1/secret/data/site/config"), what).await?;
        let data = body.pointer("/data/data").and_then(Value::as_object).ok_or_else(|| unexpected(what))?;
        site_config(data, self.site_defaults.as_ref())
    }

    async fn power_credential(&self, node: &str) -> Result<PowerCredential, SecretsError> {
        let what = "power credential";
        let path = format!("/v1/secret/data/power/{}", path_segment(node));
        let body = match self.call(self.request(Method::Get, &path), what).await {
            // The simulator's adapter names what is missing, not the store's sentence.
            Err(SecretsError::NotFound(_)) => {
                return Err(SecretsError::NotFound(format!("power credential of {node}")));
            }
            other => other?,
        };
        let data = body.pointer("/data/data").ok_or_else(|| unexpected(what))?;
        let user = data.get("user").and_then(Value::as_str).ok_or_else(|| unexpected(what))?;
        let password = data.get("password").and_then(Value::as_str).ok_or_else(|| unexpected(what))?;
        Ok(PowerCredential { user: user.to_owned(), password: Secret::new(password) })
    }

    async fn bootstrap_token(&self, node: &str, ttl_ms: u64) -> Result<Secret, SecretsError> {
        let what = "bootstrap token";
        let request =
            self.json_request(Method::Post, "/v1/auth/bootstrap/token", &json!({ "node": node, "ttl_ms": ttl_ms }));
        let body = self.call(request, what).await?;
        let token = body.pointer("/auth/client_token").and_then(Value::as_str).ok_or_else(|| unexpected(what))?;
        Ok(Secret::new(token))
    }

    async fn node_secrets_capabilities(&self) -> Result<Vec<String>, SecretsError> {
        let what = "capabilities";
        let request =
            self.json_request(Method::Post, "/v1/sys/capabilities-self", &json!({ "paths": [NODE_SECRETS_PATH] }));
        let body = self.call(request, what).await?;
        let capabilities = body.get("capabilities").and_then(Value::as_array).ok_or_else(|| unexpected(what))?;
        capabilities
            .iter()
            .map(|capability| capability.as_str().map(str::to_owned).ok_or_else(|| unexpected(what)))
            .collect()
    }

    async fn delete_node_secrets(&self, node: &str) -> Result<u32, SecretsError> {
        let what = "delete";
        let path = format!("/v1/secret/data/nodes/{}", path_segment(node));
        let body = self.call(self.request(Method::Delete, &path), what).await?;
        body.get("deleted")
            .and_then(Value::as_u64)
            .and_then(|count| u32::try_from(count).ok())
            .ok_or_else(|| unexpected(what))
    }

    async fn revoke_bootstrap_tokens(&self, node: &str) -> Result<u32, SecretsError> {
        let what = "revoke";
        let request = self.json_request(Method::Post, "/v1/auth/bootstrap/revoke", &json!({ "node": node }));
        let body = self.call(request, what).await?;
        body.get("revoked")
            .and_then(Value::as_u64)
            .and_then(|count| u32::try_from(count).ok())
            .ok_or_else(|| unexpected(what))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::future::Future;

    use futures_util::FutureExt;

    use super::*;
    use crate::ports::TransportError;

    /// An in-memory transport: records every request, answers canned responses in order.
    #[derive(Default)]
    pub(crate) struct Stub {
        pub(crate) requests: RefCell<Vec<HttpRequest>>,
        pub(crate) answers: RefCell<VecDeque<Result<HttpResponse, TransportError>>>,
    }

    impl Stub {
        pub(crate) fn answering(answers: Vec<Result<HttpResponse, TransportError>>) -> Stub {
            Stub { requests: RefCell::default(), answers: RefCell::new(answers.into()) }
        }

        pub(crate) fn last(&self) -> HttpRequest {
            self.requests.borrow().last().cloned().expect("a request was sent")
        }
    }

    pub(crate) fn json(status: u16, body: Value) -> Result<HttpResponse, TransportError> {
        Ok(HttpResponse {
            status,
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: body.to_string().into_bytes(),
        })
    }

    impl HttpTransport for &Stub {
        fn send(
            &self,
            request: HttpRequest,
            _timeout_ms: u64,
        ) -> impl Future<Output = Result<HttpResponse, TransportError>> {
            self.requests.borrow_mut().push(request);
            let answer = self.answers.borrow_mut().pop_front().expect("a canned answer is left");
            std::future::ready(answer)
        }
    }

    /// Runs a future whose transport answers at once (no runtime in the engine).
    pub(crate) fn now<F: Future>(future: F) -> F::Output {
        future.now_or_never().expect("the stub answers at once")
    }

    pub(crate) fn header<'a>(request: &'a HttpRequest, name: &str) -> Option<&'a str> {
        request.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    const TOKEN: &str = "fleetsim-secret-vault-token-1";

    fn client(stub: &Stub) -> SecretsClient<&Stub> {
        SecretsClient::new(stub, Secret::new(TOKEN), 2_000)
    }

    #[test]
    fn every_call_presents_the_token_in_its_header() {
        let stub = Stub::answering(vec![json(200, json!({"capabilities": ["delete", "read"]}))]);
        let capabilities = now(client(&stub).node_secrets_capabilities()).unwrap();
        assert_eq!(capabilities, ["delete", "read"]);
        let request = stub.last();
        assert_eq!(request.method, Method::Post);
        assert_eq!(request.path_and_query, "/v1/sys/capabilities-self");
        assert_eq!(header(&request, "x-vault-token"), Some(TOKEN));
        assert_eq!(header(&request, "content-type"), Some("application/json"));
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body, json!({"paths": ["secret/data/nodes"]}));
        assert!(!format!("{request:?}").contains(TOKEN), "the request's Debug redacts the token");
    }

    #[test]
    fn the_site_configuration_reads_as_the_simulator_reads_it() {
        let body = json!({"data": {"data": {"enabled": "true", "maas_url": "http://maas", "metadata_host": "meta.x",
            "pxe_vlan_vid": "5001", "roce_vlan_vid": 5002, "roce_mandatory": "true", "deploy_timeout_ms": 600000}}});
        let stub = Stub::answering(vec![json(200, body)]);
        let config = now(client(&stub).site_config()).unwrap();
        assert_eq!(
            config,
            SiteConfig {
                enabled: true,
                metadata_host: "meta.x".into(),
                pxe_vlan_vid: 5001,
                roce_vlan_vid: 5002,
                roce_mandatory: true,
                timeouts: StageTimeouts { deploy_ms: 600_000, ..StageTimeouts::default() },
            }
        );
        assert_eq!(stub.last().path_and_query, "/v1/secret/data/site/config");
        assert_eq!(stub.last().method, Method::Get);
    }

    #[test]
    fn missing_site_keys_come_from_the_defaults_or_are_refused() {
        let body = json!({"data": {"data": {"enabled": "false"}}});
        let defaults = SiteConfigDefaults { metadata_host: "metadata.x".into(), pxe_vlan_vid: 1, roce_vlan_vid: 2 };
        let stub = Stub::answering(vec![json(200, body.clone()), json(200, body)]);
        let config = now(client(&stub).with_site_defaults(defaults).site_config()).unwrap();
        assert!(!config.enabled && !config.roce_mandatory);
        assert_eq!((config.metadata_host.as_str(), config.pxe_vlan_vid, config.roce_vlan_vid), ("metadata.x", 1, 2));
        let refused = now(client(&stub).site_config()).unwrap_err();
        assert_eq!(refused, SecretsError::Refused("the site configuration names no metadata_host".into()));
    }

    #[test]
    fn statuses_map_to_the_port_s_errors() {
        let error = |status: u16| json(status, json!({"errors": [format!("message {status}")]}));
        let cases = [
            (503, SecretsError::Unavailable("message 503".into())),
            (404, SecretsError::NotFound("message 404".into())),
            (403, SecretsError::Refused("message 403".into())),
            (401, SecretsError::Refused("message 401".into())),
            (501, SecretsError::Unsupported("message 501".into())),
            (500, SecretsError::Unavailable("message 500".into())),
            (400, SecretsError::Refused("message 400".into())),
        ];
        for (status, expected) in cases {
            let stub = Stub::answering(vec![error(status)]);
            assert_eq!(now(client(&stub).bootstrap_token("n1", 10)).unwrap_err(), expected, "status {status}");
        }
        let stub = Stub::answering(vec![Err(TransportError::Timeout)]);
        assert_eq!(
            now(client(&stub).delete_node_secrets("n1")).unwrap_err(),
            SecretsError::Transport(TransportError::Timeout)
        );
        let stub = Stub::answering(vec![error(404)]);
        assert_eq!(
            now(client(&stub).power_credential("n1")).unwrap_err(),
            SecretsError::NotFound("power credential of n1".into())
        );
        let stub = Stub::answering(vec![json(200, json!({"unexpected": true}))]);
        assert!(matches!(now(client(&stub).delete_node_secrets("n1")), Err(SecretsError::Refused(_))));
    }

    #[test]
    fn a_revoke_posts_the_node_and_reads_how_many_tokens_went() {
        let stub = Stub::answering(vec![json(200, json!({"revoked": 2})), json(200, json!({"revoked": "two"}))]);
        assert_eq!(now(client(&stub).revoke_bootstrap_tokens("n1")), Ok(2));
        let request = stub.requests.borrow()[0].clone();
        assert_eq!(request.path_and_query, "/v1/auth/bootstrap/revoke");
        assert_eq!(serde_json::from_slice::<Value>(&request.body).unwrap(), json!({"node": "n1"}));
        assert!(matches!(now(client(&stub).revoke_bootstrap_tokens("n1")), Err(SecretsError::Refused(_))));
    }

    #[test]
    fn a_token_echoed_by_the_store_never_reaches_an_error() {
        let stub = Stub::answering(vec![json(403, json!({"errors": [format!("bad token {TOKEN}")]}))]);
        let error = now(client(&stub).site_config()).unwrap_err();
        assert!(!format!("{error}").contains(TOKEN) && !format!("{error:?}").contains(TOKEN));
        assert_eq!(error, SecretsError::Refused("bad token [redacted]".into()));
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(path_segment("n1"), "n1");
        assert_eq!(path_segment("deploy:r1"), "deploy:r1");
        assert_eq!(path_segment("a/b c"), "a%2Fb%20c");
    }
}
