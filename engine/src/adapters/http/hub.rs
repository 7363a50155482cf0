//! The hub client: [`Hub`] over the agent hub's HTTP API (JSON bodies under `/v1/hub/`, errors as
//! `{"error": "<kind>", "message": "..."}`).
//!
//! Semantics mirror the simulator's in-process adapter (`SimHub`): [`Hub::authenticate`] presents the credential and
//! keeps it; [`Hub::acquire_lock`] and [`Hub::supersede_lock`] keep the fence they were granted; every later mutation
//! carries `X-Fleet-Principal`, `X-Fleet-Token` and, while a fence is held, `X-Fleet-Fence` (the fake hub's
//! `Request::Authorized` envelope). Reads (holds, heartbeats, the route bundle, an agent's references) are public at
//! the hub and go bare,
//! as in `SimHub`. A release that finds nothing to release (409 `conflict`, or `released: false`) answers
//! `Ok(false)`. An agent's credential rotation (issue, status, commit, abort under
//! `/v1/hub/agents/{agent}/rotations/{rotation}`) goes under the controller's credential, reads included; the hub
//! does not fence it by the deployment lock: rotation is not deployment. The successor token an issue answers is read into a
//! [`Secret`] at once.
//!
//! Status mapping: 401 → `Unauthorized`; 409 whose kind names the fence (`stale_fence`) → `Fenced`; 503 (the hub is
//! down: the request did not run) → `Transport(ConnectionRefused)`; any other 5xx (it may have run) →
//! `Transport(ConnectionReset)`, so the engine retries as it does when the hub host is unreachable; any other
//! status → `Rejected` with the hub's message. An answer that is not the expected JSON is `Rejected`.
//!
//! API Boundary: the credential goes out in one header; error texts carry the hub's message (with the credential
//! replaced by `[redacted]` should the hub echo it), never the request.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::secrets::{path_segment, scrub};
use super::{HttpRequest, HttpResponse, HttpTransport, Method};
use crate::ports::{
    AgentReferences, HeartbeatSnapshot, Hub, HubError, InstanceHeartbeat, IssuedCredential, LockGrant, RotationState,
    RotationStatus, TransportError,
};
use crate::secret::Secret;

/// What the client presents with every mutation: the credential it authenticated with and the fence it holds.
#[derive(Default)]
struct Session {
    token: Option<Secret>,
    fence: Option<u64>,
}

/// [`Hub`] over HTTP. The transport carries the hub's base URL; paths here are absolute (`/v1/hub/...`).
pub struct HubClient<T> {
    transport: T,
    principal: String,
    call_timeout_ms: u64,
    session: RefCell<Session>,
}

/// An error answer, read once: the kind the hub names and its message.
struct ErrorAnswer {
    status: u16,
    kind: String,
    message: String,
}

impl ErrorAnswer {
    fn is_conflict(&self) -> bool {
        self.status == 409 && self.kind == "conflict"
    }

    fn into_error(self) -> HubError {
        match self.status {
            401 => HubError::Unauthorized(self.message),
            409 if self.kind.contains("fence") => HubError::Fenced(self.message),
            503 => HubError::Transport(TransportError::ConnectionRefused),
            500..=599 => HubError::Transport(TransportError::ConnectionReset),
            _ => HubError::Rejected(self.message),
        }
    }
}

fn unexpected(what: &str) -> HubError {
    HubError::Rejected(format!("unexpected answer to a {what} request"))
}

fn u64_field(body: &Value, key: &str, what: &str) -> Result<u64, HubError> {
    body.get(key).and_then(Value::as_u64).ok_or_else(|| unexpected(what))
}

fn bool_field(body: &Value, key: &str, what: &str) -> Result<bool, HubError> {
    body.get(key).and_then(Value::as_bool).ok_or_else(|| unexpected(what))
}

fn strings(value: &Value) -> Option<Vec<String>> {
    value.as_array()?.iter().map(|item| item.as_str().map(str::to_owned)).collect()
}

impl<T: HttpTransport> HubClient<T> {
    /// A client acting as `principal`; each call waits at most `call_timeout_ms` for its answer. It presents no
    /// credential until [`Hub::authenticate`] succeeds.
    pub fn new(transport: T, principal: &str, call_timeout_ms: u64) -> HubClient<T> {
        HubClient { transport, principal: principal.to_owned(), call_timeout_ms, session: RefCell::default() }
    }

    /// The fence the client presents with its mutations, if it holds one.
    pub fn fence(&self) -> Option<u64> {
        self.session.borrow().fence
    }

    /// A request with a JSON body; a `DELETE` goes without one (`body` is ignored), as HTTP intermediaries expect.
    fn json_request(method: Method, path: &str, body: &Value) -> HttpRequest {
        let request = HttpRequest::new(method, path).header("accept", "application/json");
        if method == Method::Delete {
            return request;
        }
        request.header("content-type", "application/json").body(body.to_string().into_bytes())
    }

    /// The controller's envelope: principal, credential (empty before authentication: the hub refuses it) and fence.
    fn authorized(&self, request: HttpRequest) -> HttpRequest {
        let session = self.session.borrow();
        let token = session.token.as_ref().map(|token| token.expose().to_owned()).unwrap_or_default();
        let request = request.header("x-fleet-principal", self.principal.as_str()).header("x-fleet-token", token);
        match session.fence {
            Some(fence) => request.header("x-fleet-fence", fence.to_string()),
            None => request,
        }
    }

    fn error_answer(&self, response: &HttpResponse, presented: Option<&Secret>) -> ErrorAnswer {
        let body = serde_json::from_slice::<Value>(&response.body).ok();
        let field = |key: &str| body.as_ref().and_then(|body| body.get(key)).and_then(Value::as_str).map(str::to_owned);
        let kind = field("error").unwrap_or_default();
        let message = field("message").filter(|message| !message.is_empty()).unwrap_or_else(|| {
            let text = String::from_utf8_lossy(&response.body).trim().chars().take(200).collect::<String>();
            if !kind.is_empty() {
                kind.clone()
            } else if text.is_empty() {
                format!("http status {}", response.status)
            } else {
                text
            }
        });
        let session = self.session.borrow();
        let mut message = message;
        for token in presented.into_iter().chain(session.token.as_ref()) {
            message = scrub(message, token);
        }
        ErrorAnswer { status: response.status, kind, message }
    }

    /// Sends `request`: its JSON body on 2xx, the hub's error answer otherwise.
    async fn exchange(
        &self,
        request: HttpRequest,
        what: &str,
        presented: Option<&Secret>,
    ) -> Result<Result<Value, ErrorAnswer>, HubError> {
        let response = self.transport.send(request, self.call_timeout_ms).await?;
        if !(200..300).contains(&response.status) {
            return Ok(Err(self.error_answer(&response, presented)));
        }
        if response.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Ok(json!({})));
        }
        serde_json::from_slice(&response.body).map(Ok).map_err(|_| unexpected(what))
    }

    async fn call(&self, request: HttpRequest, what: &str) -> Result<Value, HubError> {
        self.exchange(request, what, None).await?.map_err(ErrorAnswer::into_error)
    }

    async fn mutate(&self, method: Method, path: &str, body: &Value, what: &str) -> Result<Value, HubError> {
        self.call(self.authorized(Self::json_request(method, path, body)), what).await
    }

    /// A mutation whose "nothing to do" answer is a 409 `conflict` (a release of what is not there): `Ok(None)`.
    async fn mutate_or_conflict(
        &self,
        method: Method,
        path: &str,
        body: &Value,
        what: &str,
    ) -> Result<Option<Value>, HubError> {
        let request = self.authorized(Self::json_request(method, path, body));
        match self.exchange(request, what, None).await? {
            Ok(body) => Ok(Some(body)),
            Err(answer) if answer.is_conflict() => Ok(None),
            Err(answer) => Err(answer.into_error()),
        }
    }

    /// The path of rotation `rotation` of `agent`, with `suffix` (`""`, `"/commit"`, `"/abort"`).
    fn rotation_path(agent: &str, rotation: &str, suffix: &str) -> String {
        format!("/v1/hub/agents/{}/rotations/{}{suffix}", path_segment(agent), path_segment(rotation))
    }

    async fn read(&self, path: &str, what: &str) -> Result<Value, HubError> {
        self.call(HttpRequest::new(Method::Get, path).header("accept", "application/json"), what).await
    }

    /// How long the held lock has left on the hub's clock: the answer's `remaining_ms`, else `expires_at_ms` less
    /// its `now_ms`, else less the hub's clock read from the heartbeat table (a public read), so a skewed controller
    /// clock never enters the sum.
    async fn remaining_ms(&self, body: &Value, what: &str) -> Result<u64, HubError> {
        if let Some(remaining_ms) = body.get("remaining_ms").and_then(Value::as_u64) {
            return Ok(remaining_ms);
        }
        let expires_at_ms = u64_field(body, "expires_at_ms", what)?;
        let hub_now_ms = match body.get("now_ms").and_then(Value::as_u64) {
            Some(now_ms) => now_ms,
            None => self.read_heartbeats().await?.hub_now_ms,
        };
        Ok(expires_at_ms.saturating_sub(hub_now_ms))
    }
}

impl<T: HttpTransport> Hub for HubClient<T> {
    async fn authenticate(&self, credential: &Secret) -> Result<u64, HubError> {
        let what = "authentication";
        let request = Self::json_request(Method::Post, "/v1/hub/auth", &json!({}))
            .header("x-fleet-principal", self.principal.as_str())
            .header("x-fleet-token", credential.expose());
        let body = self.exchange(request, what, Some(credential)).await?.map_err(ErrorAnswer::into_error)?;
        let expires_at_ms = u64_field(&body, "expires_at_ms", what)?;
        self.session.borrow_mut().token = Some(credential.clone());
        Ok(expires_at_ms)
    }

    async fn acquire_lock(&self, holder: &str, lease_ms: u64) -> Result<LockGrant, HubError> {
        let what = "lock";
        let body =
            self.mutate(Method::Post, "/v1/hub/lock", &json!({ "holder": holder, "lease_ms": lease_ms }), what).await?;
        let fence = u64_field(&body, "fence", what)?;
        if bool_field(&body, "granted", what)? {
            self.session.borrow_mut().fence = Some(fence);
            return Ok(LockGrant::Granted { fence });
        }
        let holder = body.get("holder").and_then(Value::as_str).ok_or_else(|| unexpected(what))?.to_owned();
        let remaining_ms = self.remaining_ms(&body, what).await?;
        Ok(LockGrant::Held { holder, fence, remaining_ms })
    }

    async fn supersede_lock(&self, holder: &str, fence: u64, lease_ms: u64) -> Result<u64, HubError> {
        let what = "lock supersede";
        let body = json!({ "holder": holder, "fence": fence, "lease_ms": lease_ms });
        let answer = self.mutate(Method::Post, "/v1/hub/lock/supersede", &body, what).await?;
        let fence = u64_field(&answer, "fence", what)?;
        self.session.borrow_mut().fence = Some(fence);
        Ok(fence)
    }

    async fn renew_lock(&self, fence: u64, lease_ms: u64) -> Result<(), HubError> {
        let body = json!({ "fence": fence, "lease_ms": lease_ms });
        self.mutate(Method::Post, "/v1/hub/lock/renew", &body, "lock renewal").await?;
        Ok(())
    }

    async fn release_lock(&self, fence: u64) -> Result<bool, HubError> {
        let what = "lock release";
        let body = json!({ "fence": fence });
        let Some(answer) = self.mutate_or_conflict(Method::Post, "/v1/hub/lock/release", &body, what).await? else {
            return Ok(false);
        };
        let released = bool_field(&answer, "released", what)?;
        if released {
            self.session.borrow_mut().fence = None;
        }
        Ok(released)
    }

    async fn read_holds(&self) -> Result<BTreeMap<String, Vec<String>>, HubError> {
        let what = "holds";
        let body = self.read("/v1/hub/holds", what).await?;
        let holds = body.get("holds").and_then(Value::as_object).ok_or_else(|| unexpected(what))?;
        holds
            .iter()
            .map(|(agent, owners)| Ok((agent.clone(), strings(owners).ok_or_else(|| unexpected(what))?)))
            .collect()
    }

    async fn read_heartbeats(&self) -> Result<HeartbeatSnapshot, HubError> {
        let what = "heartbeat read";
        let body = self.read("/v1/hub/heartbeats", what).await?;
        let hub_now_ms = u64_field(&body, "now_ms", what)?;
        let rows = body.get("rows").and_then(Value::as_array).ok_or_else(|| unexpected(what))?;
        let instances = rows
            .iter()
            .map(|row| {
                let text = |key: &str| row.get(key).and_then(Value::as_str).ok_or_else(|| unexpected(what));
                Ok(InstanceHeartbeat {
                    instance: text("agent")?.to_owned(),
                    last_heartbeat_ms: u64_field(row, "last_seen_ms", what)?,
                    registered: text("status")? != "tombstoned",
                    revision: row.get("revision").and_then(Value::as_str).map(str::to_owned),
                })
            })
            .collect::<Result<Vec<_>, HubError>>()?;
        Ok(HeartbeatSnapshot { hub_now_ms, instances })
    }

    async fn place_hold(&self, agent: &str, owner: &str) -> Result<(), HubError> {
        let path = format!("/v1/hub/holds/{}/{}", path_segment(agent), path_segment(owner));
        self.mutate(Method::Put, &path, &json!({}), "hold").await?;
        Ok(())
    }

    async fn release_hold(&self, agent: &str, owner: &str) -> Result<bool, HubError> {
        let what = "hold release";
        let path = format!("/v1/hub/holds/{}/{}", path_segment(agent), path_segment(owner));
        // No such hold: released already (a replay), which is what the caller wanted.
        match self.mutate_or_conflict(Method::Delete, &path, &json!({}), what).await? {
            Some(answer) => bool_field(&answer, "released", what),
            None => Ok(false),
        }
    }

    async fn open_epoch(&self, members: &[String]) -> Result<u64, HubError> {
        let what = "epoch";
        let body = self.mutate(Method::Post, "/v1/hub/epochs", &json!({ "members": members }), what).await?;
        u64_field(&body, "epoch", what)
    }

    async fn close_epoch(&self, epoch: u64, untouched: &[String]) -> Result<bool, HubError> {
        let what = "epoch close";
        let path = format!("/v1/hub/epochs/{epoch}/close");
        match self.mutate_or_conflict(Method::Post, &path, &json!({ "untouched": untouched }), what).await? {
            Some(answer) => bool_field(&answer, "closed", what),
            None => Ok(false),
        }
    }

    async fn route_bundle(&self) -> Result<String, HubError> {
        let what = "route bundle";
        let body = self.read("/v1/hub/route-bundle", what).await?;
        body.get("digest").and_then(Value::as_str).map(str::to_owned).ok_or_else(|| unexpected(what))
    }

    async fn begin_rotation(&self, agent: &str, rotation: &str) -> Result<IssuedCredential, HubError> {
        let what = "rotation";
        let path = Self::rotation_path(agent, rotation, "");
        let body = self.mutate(Method::Post, &path, &json!({}), what).await?;
        let generation = u64_field(&body, "generation", what)?;
        // The token is read into a `Secret` at once; an answer without it names nothing of the body.
        let token = body.get("token").and_then(Value::as_str).ok_or_else(|| unexpected(what))?;
        Ok(IssuedCredential { generation, token: Secret::new(token) })
    }

    async fn rotation_status(&self, agent: &str, rotation: &str) -> Result<Option<RotationStatus>, HubError> {
        let what = "rotation status";
        let request = self.authorized(
            HttpRequest::new(Method::Get, Self::rotation_path(agent, rotation, ""))
                .header("accept", "application/json"),
        );
        let body = match self.exchange(request, what, None).await? {
            Ok(body) => body,
            Err(answer) if answer.status == 404 && answer.kind == "unknown_rotation" => return Ok(None),
            Err(answer) => return Err(answer.into_error()),
        };
        let state = match body.get("state").and_then(Value::as_str) {
            Some("open") => RotationState::Open,
            Some("committed") => RotationState::Committed,
            Some("aborted") => RotationState::Aborted,
            _ => return Err(unexpected(what)),
        };
        Ok(Some(RotationStatus {
            state,
            generation: u64_field(&body, "generation", what)?,
            successor_heartbeats: u64_field(&body, "successor_heartbeats", what)?,
        }))
    }

    async fn commit_rotation(&self, agent: &str, rotation: &str) -> Result<bool, HubError> {
        let what = "rotation commit";
        let body =
            self.mutate(Method::Post, &Self::rotation_path(agent, rotation, "/commit"), &json!({}), what).await?;
        bool_field(&body, "revoked", what)
    }

    async fn abort_rotation(&self, agent: &str, rotation: &str) -> Result<bool, HubError> {
        let what = "rotation abort";
        let body = self.mutate(Method::Post, &Self::rotation_path(agent, rotation, "/abort"), &json!({}), what).await?;
        bool_field(&body, "revoked", what)
    }

    async fn agent_references(&self, agent: &str) -> Result<AgentReferences, HubError> {
        let what = "references";
        let body = self.read(&format!("/v1/hub/agents/{}/references", path_segment(agent)), what).await?;
        let epochs = body
            .get("epochs")
            .and_then(Value::as_array)
            .and_then(|epochs| epochs.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>())
            .ok_or_else(|| unexpected(what))?;
        let holds = body.get("holds").and_then(strings).ok_or_else(|| unexpected(what))?;
        // Absent or `null`: no active lease. Anything else must be a time on the hub's clock.
        let lease_until_ms = match body.get("lease_until_ms") {
            None | Some(Value::Null) => None,
            Some(value) => Some(value.as_u64().ok_or_else(|| unexpected(what))?),
        };
        Ok(AgentReferences { epochs, holds, lease_until_ms })
    }

    async fn resurrect_agent(&self, agent: &str, epoch: u64) -> Result<bool, HubError> {
        let what = "resurrection";
        let path = format!("/v1/hub/agents/{}/resurrect", path_segment(agent));
        let body = self.mutate(Method::Post, &path, &json!({ "epoch": epoch }), what).await?;
        bool_field(&body, "restored", what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::http::secrets::tests::{Stub, header, json, now};

    const CREDENTIAL: &str = "fleetsim-secret-hub-credential-1";

    fn client(stub: &Stub) -> HubClient<&Stub> {
        HubClient::new(stub, "controller", 2_000)
    }

    fn body(request: &HttpRequest) -> Value {
        serde_json::from_slice(&request.body).unwrap()
    }

    #[test]
    fn authentication_then_the_lock_put_credential_and_fence_on_every_mutation() {
        let stub = Stub::answering(vec![
            json(200, json!({"expires_at_ms": 9_000})),
            json(200, json!({"granted": true, "fence": 7, "expires_at_ms": 5_000})),
            json(200, json!({})),
        ]);
        let hub = client(&stub);
        assert_eq!(now(hub.authenticate(&Secret::new(CREDENTIAL))).unwrap(), 9_000);
        let auth = stub.last();
        assert_eq!((auth.method, auth.path_and_query.as_str()), (Method::Post, "/v1/hub/auth"));
        assert_eq!(header(&auth, "x-fleet-principal"), Some("controller"));
        assert_eq!(header(&auth, "x-fleet-token"), Some(CREDENTIAL));
        assert_eq!(header(&auth, "x-fleet-fence"), None);

        assert_eq!(now(hub.acquire_lock("c1", 3_000)).unwrap(), LockGrant::Granted { fence: 7 });
        let lock = stub.last();
        assert_eq!(lock.path_and_query, "/v1/hub/lock");
        assert_eq!(body(&lock), json!({"holder": "c1", "lease_ms": 3_000}));
        assert_eq!(header(&lock, "x-fleet-token"), Some(CREDENTIAL));
        assert_eq!(header(&lock, "x-fleet-fence"), None, "no fence is held before the grant");

        now(hub.place_hold("agent-1", "deploy:r1")).unwrap();
        let hold = stub.last();
        assert_eq!((hold.method, hold.path_and_query.as_str()), (Method::Put, "/v1/hub/holds/agent-1/deploy:r1"));
        assert_eq!(header(&hold, "x-fleet-principal"), Some("controller"));
        assert_eq!(header(&hold, "x-fleet-token"), Some(CREDENTIAL));
        assert_eq!(header(&hold, "x-fleet-fence"), Some("7"));
    }

    #[test]
    fn a_held_lock_answers_its_holder_and_time_left_on_the_hub_s_clock() {
        let stub = Stub::answering(vec![
            json(200, json!({"granted": false, "holder": "c0", "fence": 3, "expires_at_ms": 5_000, "now_ms": 4_000})),
            json(200, json!({"granted": false, "holder": "c0", "fence": 3, "expires_at_ms": 5_000})),
            json(200, json!({"now_ms": 4_500, "rows": []})),
        ]);
        let hub = client(&stub);
        let held = LockGrant::Held { holder: "c0".into(), fence: 3, remaining_ms: 1_000 };
        assert_eq!(now(hub.acquire_lock("c1", 3_000)).unwrap(), held);
        let held = LockGrant::Held { holder: "c0".into(), fence: 3, remaining_ms: 500 };
        assert_eq!(now(hub.acquire_lock("c1", 3_000)).unwrap(), held);
        assert_eq!(stub.last().path_and_query, "/v1/hub/heartbeats");
        assert_eq!(hub.fence(), None);
    }

    #[test]
    fn supersede_keeps_the_new_fence_and_release_drops_it() {
        let stub = Stub::answering(vec![
            json(200, json!({"fence": 8, "expires_at_ms": 5_000})),
            json(200, json!({})),
            json(200, json!({"released": true})),
            json(409, json!({"error": "conflict", "message": "conflict: no lock under fence 8"})),
        ]);
        let hub = client(&stub);
        assert_eq!(now(hub.supersede_lock("c1", 7, 3_000)).unwrap(), 8);
        assert_eq!(body(&stub.last()), json!({"holder": "c1", "fence": 7, "lease_ms": 3_000}));
        now(hub.renew_lock(8, 3_000)).unwrap();
        assert_eq!(header(&stub.last(), "x-fleet-fence"), Some("8"));
        assert_eq!(body(&stub.last()), json!({"fence": 8, "lease_ms": 3_000}));
        assert!(now(hub.release_lock(8)).unwrap());
        assert_eq!(hub.fence(), None);
        assert!(!now(hub.release_lock(8)).unwrap(), "a 409 conflict is nothing left to release");
    }

    #[test]
    fn statuses_map_to_the_port_s_errors() {
        let cases = [
            (401, "credential_rejected", HubError::Unauthorized("m".into())),
            (409, "stale_fence", HubError::Fenced("m".into())),
            (409, "held", HubError::Rejected("m".into())),
            (404, "unknown_epoch", HubError::Rejected("m".into())),
            (503, "unavailable", HubError::Transport(TransportError::ConnectionRefused)),
            (500, "internal", HubError::Transport(TransportError::ConnectionReset)),
        ];
        for (status, kind, expected) in cases {
            let stub = Stub::answering(vec![json(status, json!({"error": kind, "message": "m"}))]);
            assert_eq!(now(client(&stub).open_epoch(&["a".into()])).unwrap_err(), expected, "{status} {kind}");
        }
        let stub = Stub::answering(vec![Err(TransportError::ConnectionRefused)]);
        assert_eq!(
            now(client(&stub).route_bundle()).unwrap_err(),
            HubError::Transport(TransportError::ConnectionRefused)
        );
        let stub = Stub::answering(vec![json(200, json!({"nothing": 1}))]);
        assert!(matches!(now(client(&stub).route_bundle()), Err(HubError::Rejected(_))));
    }

    #[test]
    fn a_resurrection_is_a_fenced_mutation_naming_the_journal_s_epoch_and_a_refusal_is_rejected() {
        let stub = Stub::answering(vec![
            json(200, json!({"expires_at_ms": 9_000})),
            json(200, json!({"granted": true, "fence": 4, "expires_at_ms": 5_000})),
            json(200, json!({"restored": true})),
            json(200, json!({"restored": false})),
            json(409, json!({"error": "conflict", "message": "conflict: epoch 2 does not list node/1"})),
            json(200, json!({"resurrected": true})),
        ]);
        let hub = client(&stub);
        now(hub.authenticate(&Secret::new(CREDENTIAL))).unwrap();
        now(hub.acquire_lock("c1", 3_000)).unwrap();
        assert!(now(hub.resurrect_agent("node/1", 2)).unwrap());
        let call = stub.last();
        assert_eq!((call.method, call.path_and_query.as_str()), (Method::Post, "/v1/hub/agents/node%2F1/resurrect"));
        assert_eq!(body(&call), json!({"epoch": 2}));
        assert_eq!(header(&call, "x-fleet-token"), Some(CREDENTIAL));
        assert_eq!(header(&call, "x-fleet-fence"), Some("4"));
        assert!(!now(hub.resurrect_agent("node/1", 2)).unwrap(), "a replay restores nothing");
        assert_eq!(
            now(hub.resurrect_agent("node/1", 2)).unwrap_err(),
            HubError::Rejected("conflict: epoch 2 does not list node/1".into())
        );
        assert!(matches!(now(hub.resurrect_agent("node/1", 2)), Err(HubError::Rejected(_))), "no `restored` field");
    }

    #[test]
    fn releases_of_what_is_not_there_answer_false() {
        let conflict = || json(409, json!({"error": "conflict", "message": "conflict: no such hold"}));
        let stub = Stub::answering(vec![conflict(), json(200, json!({"released": true})), conflict()]);
        let hub = client(&stub);
        assert!(!now(hub.release_hold("a", "deploy:r1")).unwrap());
        assert!(now(hub.release_hold("a", "deploy:r1")).unwrap());
        let release = stub.last();
        assert_eq!((release.method, release.body.len()), (Method::Delete, 0));
        assert!(!now(hub.close_epoch(4, &[])).unwrap());
        assert_eq!(stub.last().path_and_query, "/v1/hub/epochs/4/close");
    }

    #[test]
    fn reads_go_bare_and_parse_the_hub_s_tables() {
        let stub = Stub::answering(vec![
            json(200, json!({"holds": {"a": ["deploy:r1", "ops"]}})),
            json(
                200,
                json!({"now_ms": 10, "rows": [
                {"agent": "a", "status": "online", "last_seen_ms": 4, "revision": "r1"},
                {"agent": "b", "status": "tombstoned", "last_seen_ms": 2, "revision": null}]}),
            ),
            json(200, json!({"digest": "sha256:abc"})),
        ]);
        let hub = client(&stub);
        let holds = now(hub.read_holds()).unwrap();
        assert_eq!(holds.get("a").map(Vec::len), Some(2));
        assert_eq!(header(&stub.last(), "x-fleet-token"), None);
        let snapshot = now(hub.read_heartbeats()).unwrap();
        assert_eq!(snapshot.hub_now_ms, 10);
        assert_eq!(snapshot.instances[0].revision.as_deref(), Some("r1"));
        assert!(snapshot.instances[0].registered && !snapshot.instances[1].registered);
        assert_eq!(now(hub.route_bundle()).unwrap(), "sha256:abc");
        assert_eq!(stub.last().method, Method::Get);
    }

    #[test]
    fn a_rotation_is_issued_read_committed_and_aborted_under_the_controller_s_credential() {
        let successor = "fleetsim-secret-agent-successor";
        let stub = Stub::answering(vec![
            json(200, json!({"expires_at_ms": 9_000})),
            json(200, json!({"generation": 2, "token": successor})),
            json(200, json!({"state": "open", "generation": 2, "successor_heartbeats": 1})),
            json(404, json!({"error": "unknown_rotation", "message": "unknown rotation r9 of n1"})),
            json(200, json!({"revoked": true})),
            json(200, json!({"revoked": false})),
            json(409, json!({"error": "conflict", "message": "conflict: rotation r1 of n1 is committed"})),
        ]);
        let hub = client(&stub);
        now(hub.authenticate(&Secret::new(CREDENTIAL))).unwrap();
        let issued = now(hub.begin_rotation("n1", "r1")).unwrap();
        assert_eq!((issued.generation, issued.token.expose()), (2, successor));
        assert!(!format!("{issued:?}").contains(successor), "the issued token never prints");
        let begin = stub.last();
        assert_eq!((begin.method, begin.path_and_query.as_str()), (Method::Post, "/v1/hub/agents/n1/rotations/r1"));
        assert_eq!(header(&begin, "x-fleet-token"), Some(CREDENTIAL));
        let status = now(hub.rotation_status("n1", "r1")).unwrap();
        assert_eq!(status, Some(RotationStatus { state: RotationState::Open, generation: 2, successor_heartbeats: 1 }));
        let read = stub.last();
        assert_eq!((read.method, header(&read, "x-fleet-token")), (Method::Get, Some(CREDENTIAL)));
        assert_eq!(now(hub.rotation_status("n1", "r9")).unwrap(), None, "a rotation the hub never issued");
        assert!(now(hub.commit_rotation("n1", "r1")).unwrap());
        assert_eq!(stub.last().path_and_query, "/v1/hub/agents/n1/rotations/r1/commit");
        assert!(!now(hub.abort_rotation("n1", "r2")).unwrap(), "nothing to revoke");
        assert_eq!(stub.last().path_and_query, "/v1/hub/agents/n1/rotations/r2/abort");
        let committed = now(hub.abort_rotation("n1", "r1")).unwrap_err();
        assert_eq!(committed, HubError::Rejected("conflict: rotation r1 of n1 is committed".into()));
    }

    #[test]
    fn a_rotation_answer_without_its_fields_is_rejected_without_echoing_the_body() {
        let stub = Stub::answering(vec![json(200, json!({"token": "fleetsim-secret-x"}))]);
        let error = now(client(&stub).begin_rotation("n1", "r1")).unwrap_err();
        assert_eq!(error, HubError::Rejected("unexpected answer to a rotation request".into()));
    }

    #[test]
    fn an_agent_s_references_are_a_bare_read_and_a_malformed_answer_is_no_answer() {
        let stub = Stub::answering(vec![
            json(200, json!({"epochs": [3], "holds": ["operator:x", "quarantine:r"], "lease_until_ms": 900})),
            json(200, json!({"epochs": [], "holds": [], "lease_until_ms": null})),
            json(200, json!({"epochs": [], "holds": []})),
            json(200, json!({"epochs": ["3"], "holds": [], "lease_until_ms": null})),
            json(200, json!({"epochs": [], "holds": [], "lease_until_ms": "soon"})),
            json(503, json!({"error": "unavailable", "message": "hub is unavailable"})),
        ]);
        let hub = client(&stub);
        let references = now(hub.agent_references("node/01")).unwrap();
        assert_eq!(
            references,
            AgentReferences {
                epochs: vec![3],
                holds: vec!["operator:x".into(), "quarantine:r".into()],
                lease_until_ms: Some(900)
            }
        );
        let read = stub.last();
        assert_eq!((read.method, read.path_and_query.as_str()), (Method::Get, "/v1/hub/agents/node%2F01/references"));
        assert_eq!(header(&read, "x-fleet-token"), None, "a read carries no credential");
        assert_eq!(now(hub.agent_references("a")).unwrap(), AgentReferences::default());
        assert_eq!(now(hub.agent_references("a")).unwrap(), AgentReferences::default(), "no lease field: no lease");
        // A reference the client cannot read is an error, never "no references".
        for _ in 0..2 {
            assert!(matches!(now(hub.agent_references("a")), Err(HubError::Rejected(_))));
        }
        assert_eq!(now(hub.agent_references("a")).unwrap_err(), HubError::Transport(TransportError::ConnectionRefused));
    }

    #[test]
    fn a_credential_echoed_by_the_hub_never_reaches_an_error() {
        let message = format!("invalid credential {CREDENTIAL}");
        let stub = Stub::answering(vec![json(401, json!({"error": "credential_rejected", "message": message}))]);
        let error = now(client(&stub).authenticate(&Secret::new(CREDENTIAL))).unwrap_err();
        assert!(!format!("{error}").contains(CREDENTIAL) && !format!("{error:?}").contains(CREDENTIAL));
        assert_eq!(error, HubError::Unauthorized("invalid credential [redacted]".into()));
    }
}
