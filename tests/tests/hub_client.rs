//! `engine::adapters::http::hub::HubClient` over real loopback TCP: against wiremock stubs (the exact requests it
//! sends, the credential and fence headers, and how each error status reads) and against the served fake hub
//! (`fakes::http::hub::router`).
//!
//! The scenario bodies (`body_*`) take any `Hub`, so the same assertions run against stubs that answer as the hub's
//! API is documented and against the fake hub itself: a controller session, lock contention, an agent-credential
//! rotation (issued, replayed, proved by a heartbeat of the successor, committed, its abort refused), an agent's
//! references, which a decommission reads before its first mutation, and the journal-bound resurrection of a
//! tombstoned identity an open epoch pins.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use engine::adapters::http::hub::HubClient;
use engine::adapters::http::{HttpRequest, HttpTransport, Method};
use engine::ports::{AgentReferences, Hub, HubError, LockGrant, RotationState, RotationStatus, TransportError};
use engine::secret::Secret;
use fakes::http::{HubFront, SharedHub};
use fakes::hub::{AgentKind, HubConfig, Request};
use serde_json::json;
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const CREDENTIAL: &str = "fleetsim-secret-hub-credential-wire";
const PRINCIPAL: &str = "controller";
const CALL_TIMEOUT_MS: u64 = 5_000;

/// The transport the clients use: hyper over loopback TCP.
fn transport(base_url: &str) -> impl HttpTransport + use<> {
    sim::wire::http::HyperTransport::tcp(base_url).expect("a loopback base url")
}

fn client(server: &MockServer) -> HubClient<impl HttpTransport + use<>> {
    HubClient::new(transport(&server.uri()), PRINCIPAL, CALL_TIMEOUT_MS)
}

fn ok(body: serde_json::Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

fn hub_error(status: u16, kind: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({"error": kind, "message": message}))
}

#[tokio::test]
async fn a_controller_authenticates_takes_the_lock_and_mutates_under_its_fence() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/hub/auth"))
        .and(header("x-fleet-principal", PRINCIPAL))
        .and(header("x-fleet-token", CREDENTIAL))
        .respond_with(ok(json!({"expires_at_ms": 3_600_000})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/hub/lock"))
        .and(header("x-fleet-principal", PRINCIPAL))
        .and(header("x-fleet-token", CREDENTIAL))
        .and(body_json(json!({"holder": "c1", "lease_ms": 30_000})))
        .respond_with(ok(json!({"granted": true, "fence": 4, "expires_at_ms": 30_000})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/hub/epochs"))
        .and(header("x-fleet-token", CREDENTIAL))
        .and(header("x-fleet-fence", "4"))
        .and(body_json(json!({"members": ["agent-1", "agent-2"]})))
        .respond_with(ok(json!({"epoch": 9})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path("/v1/hub/holds/agent-1/deploy:r1"))
        .and(header("x-fleet-token", CREDENTIAL))
        .and(header("x-fleet-fence", "4"))
        .respond_with(ok(json!({})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/v1/hub/holds/agent-1/deploy:r1"))
        .and(header("x-fleet-fence", "4"))
        .respond_with(ok(json!({"released": true})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/hub/epochs/9/close"))
        .and(header("x-fleet-fence", "4"))
        .and(body_json(json!({"untouched": ["agent-2"]})))
        .respond_with(ok(json!({"closed": true})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/hub/lock/renew"))
        .and(header("x-fleet-fence", "4"))
        .and(body_json(json!({"fence": 4, "lease_ms": 30_000})))
        .respond_with(ok(json!({})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/hub/lock/release"))
        .and(header("x-fleet-fence", "4"))
        .and(body_json(json!({"fence": 4})))
        .respond_with(ok(json!({"released": true})))
        .expect(1)
        .mount(&server)
        .await;

    let hub = client(&server);
    assert_eq!(hub.authenticate(&Secret::new(CREDENTIAL)).await.unwrap(), 3_600_000);
    assert_eq!(hub.acquire_lock("c1", 30_000).await.unwrap(), LockGrant::Granted { fence: 4 });
    assert_eq!(hub.open_epoch(&["agent-1".into(), "agent-2".into()]).await.unwrap(), 9);
    hub.place_hold("agent-1", "deploy:r1").await.unwrap();
    assert!(hub.release_hold("agent-1", "deploy:r1").await.unwrap());
    assert!(hub.close_epoch(9, &["agent-2".into()]).await.unwrap());
    hub.renew_lock(4, 30_000).await.unwrap();
    assert!(hub.release_lock(4).await.unwrap());
    assert_eq!(hub.fence(), None);
}

#[tokio::test]
async fn reads_are_bare_gets() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/hub/holds"))
        .respond_with(ok(json!({"holds": {"agent-1": ["ops:maintenance"]}})))
        .expect(1)
        .mount(&server)
        .await;
    let rows = json!({"now_ms": 50, "rows": [{"agent": "agent-1", "status": "offline", "last_seen_ms": 20,
        "revision": "rev-a"}]});
    Mock::given(method("GET")).and(path("/v1/hub/heartbeats")).respond_with(ok(rows)).expect(1).mount(&server).await;
    Mock::given(method("GET"))
        .and(path("/v1/hub/route-bundle"))
        .respond_with(ok(json!({"digest": "sha256:routes"})))
        .expect(1)
        .mount(&server)
        .await;
    let hub = client(&server);
    assert_eq!(hub.read_holds().await.unwrap().get("agent-1").cloned(), Some(vec!["ops:maintenance".to_owned()]));
    let snapshot = hub.read_heartbeats().await.unwrap();
    assert_eq!(snapshot.hub_now_ms, 50);
    assert_eq!(snapshot.instances.len(), 1);
    assert!(snapshot.instances[0].registered);
    assert_eq!(hub.route_bundle().await.unwrap(), "sha256:routes");
    for request in server.received_requests().await.unwrap_or_default() {
        assert!(!request.headers.contains_key("x-fleet-token"), "a read carries no credential");
    }
}

#[tokio::test]
async fn a_held_lock_names_its_holder_and_its_time_left_on_the_hub_s_clock() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/hub/lock"))
        .respond_with(ok(json!({"granted": false, "holder": "c0", "fence": 3, "expires_at_ms": 40_000})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/hub/heartbeats"))
        .respond_with(ok(json!({"now_ms": 32_500, "rows": []})))
        .expect(1)
        .mount(&server)
        .await;
    let grant = client(&server).acquire_lock("c1", 30_000).await.unwrap();
    assert_eq!(grant, LockGrant::Held { holder: "c0".into(), fence: 3, remaining_ms: 7_500 });
}

#[tokio::test]
async fn error_statuses_read_as_the_port_s_errors() {
    let cases = [
        (
            hub_error(401, "credential_rejected", "credential of principal controller has expired"),
            HubError::Unauthorized("credential of principal controller has expired".into()),
        ),
        (
            hub_error(409, "stale_fence", "stale fence 3: the deployment lock is at fence 4 (c2)"),
            HubError::Fenced("stale fence 3: the deployment lock is at fence 4 (c2)".into()),
        ),
        (
            hub_error(409, "principal_drift", "participant a drifted"),
            HubError::Rejected("participant a drifted".into()),
        ),
        (hub_error(404, "unknown_epoch", "unknown epoch 9"), HubError::Rejected("unknown epoch 9".into())),
        (hub_error(503, "unavailable", "hub is unavailable"), HubError::Transport(TransportError::ConnectionRefused)),
    ];
    for (answer, expected) in cases {
        let server = MockServer::start().await;
        Mock::given(method("POST")).respond_with(answer).mount(&server).await;
        assert_eq!(client(&server).close_epoch(9, &[]).await.unwrap_err(), expected);
    }
}

#[tokio::test]
async fn releasing_what_is_not_there_answers_false() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/hub/lock/release"))
        .respond_with(ok(json!({"released": false})))
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .respond_with(hub_error(409, "conflict", "conflict: no hold deploy:r1 on agent-1"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/hub/epochs/9/close"))
        .respond_with(hub_error(409, "conflict", "conflict: epoch 9 is terminal"))
        .mount(&server)
        .await;
    let hub = client(&server);
    assert!(!hub.release_lock(4).await.unwrap());
    assert!(!hub.release_hold("agent-1", "deploy:r1").await.unwrap());
    assert!(!hub.close_epoch(9, &[]).await.unwrap());
}

#[tokio::test]
async fn a_hub_that_is_not_listening_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let hub = HubClient::new(transport(&format!("http://{address}")), PRINCIPAL, CALL_TIMEOUT_MS);
    assert_eq!(hub.read_holds().await.unwrap_err(), HubError::Transport(TransportError::ConnectionRefused));
}

#[tokio::test]
async fn no_credential_reaches_an_error_or_a_debug_output() {
    let server = MockServer::start().await;
    // A hub that echoes the credential it was sent: the client still never shows it.
    let echo = format!("invalid credential {CREDENTIAL} for principal controller");
    Mock::given(method("POST"))
        .and(path("/v1/hub/auth"))
        .respond_with(ok(json!({"expires_at_ms": 10})))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST")).respond_with(hub_error(401, "credential_rejected", &echo)).mount(&server).await;
    let hub = client(&server);
    hub.authenticate(&Secret::new(CREDENTIAL)).await.unwrap();
    let errors = [
        hub.acquire_lock("c1", 1).await.unwrap_err(),
        hub.open_epoch(&[]).await.unwrap_err(),
        hub.authenticate(&Secret::new(CREDENTIAL)).await.unwrap_err(),
    ];
    for error in errors {
        assert!(matches!(error, HubError::Unauthorized(_)), "{error:?}");
        assert!(!format!("{error}").contains(CREDENTIAL), "{error}");
        assert!(!format!("{error:?}").contains(CREDENTIAL), "{error:?}");
    }
}

// --- scenario bodies, against the stubs and the served fake ---------------------------------------------------------

const AGENT: &str = "agent-1";
const OWNER: &str = "deploy:r1";

/// Authenticates, takes the lock, and runs one deployment's hub calls under the fence: an epoch, a hold placed and
/// released (twice: the second finds nothing), the epoch closed (twice), the lock renewed and released (twice).
async fn body_a_controller_session(hub: &impl Hub, credential: &Secret) {
    assert_eq!(hub.authenticate(credential).await, Ok(3_600_000));
    let LockGrant::Granted { fence } = hub.acquire_lock("c1", 30_000).await.expect("the lock") else {
        panic!("the lock is free");
    };
    let epoch = hub.open_epoch(&[AGENT.to_owned()]).await.expect("an epoch");
    hub.place_hold(AGENT, OWNER).await.expect("a hold");
    let holds = hub.read_holds().await.expect("the holds");
    assert_eq!(holds.get(AGENT), Some(&vec![OWNER.to_owned()]));
    assert_eq!(hub.release_hold(AGENT, OWNER).await, Ok(true));
    assert_eq!(hub.release_hold(AGENT, OWNER).await, Ok(false), "released already");
    assert_eq!(hub.close_epoch(epoch, &[]).await, Ok(true));
    assert_eq!(hub.close_epoch(epoch, &[]).await, Ok(false), "terminal already");
    hub.renew_lock(fence, 30_000).await.expect("renewed");
    assert_eq!(hub.release_lock(fence).await, Ok(true));
    assert_eq!(hub.release_lock(fence).await, Ok(false), "released already");
}

/// A second controller finds the lock held by the first, 10 s into its 30 s lease (hub clock).
async fn body_a_held_lock(second: &impl Hub) {
    let grant = second.acquire_lock("c2", 30_000).await.expect("an answer");
    assert_eq!(grant, LockGrant::Held { holder: "c1".into(), fence: 1, remaining_ms: 20_000 });
}

/// The first controller, superseded by a successor, is fenced on its next mutation.
async fn body_a_superseded_controller_is_fenced(stale: &impl Hub) {
    let error = stale.place_hold(AGENT, OWNER).await.expect_err("fenced");
    assert_eq!(error, HubError::Fenced("stale fence 1: the deployment lock is at fence 2 (c2)".into()));
}

async fn body_an_expired_credential(hub: &impl Hub) {
    let error = hub.open_epoch(&[]).await.expect_err("expired");
    assert_eq!(error, HubError::Unauthorized(format!("credential of principal {PRINCIPAL} has expired")));
}

async fn body_a_hub_that_is_down(hub: &impl Hub) {
    assert_eq!(hub.read_heartbeats().await, Err(HubError::Transport(TransportError::ConnectionRefused)));
}

async fn body_reads_the_heartbeats(hub: &impl Hub) {
    let snapshot = hub.read_heartbeats().await.expect("the heartbeats");
    assert_eq!(snapshot.hub_now_ms, 10_000);
    assert_eq!(snapshot.instances.len(), 1);
    assert_eq!((snapshot.instances[0].instance.as_str(), snapshot.instances[0].registered), (AGENT, true));
    assert_eq!(hub.route_bundle().await, Ok("sha256:routes-1".to_owned()));
}

const ROTATION: &str = "rotation-agent-1-1";

/// Issues a successor (a replay answers the same one, minting nothing) and reads the rotation before its successor
/// authenticated anything; a rotation never issued reads as none. Answers the successor token.
async fn body_a_rotation_is_issued(hub: &impl Hub, credential: &Secret) -> Secret {
    hub.authenticate(credential).await.expect("authenticated");
    let issued = hub.begin_rotation(AGENT, ROTATION).await.expect("issued");
    assert_eq!(issued.generation, 2, "the enrolment credential is generation 1");
    assert!(issued.token.expose().starts_with("fleetsim-secret-"), "a minted token is marked secret");
    assert!(!format!("{issued:?}").contains(issued.token.expose()), "and never prints");
    assert_eq!(hub.begin_rotation(AGENT, ROTATION).await, Ok(issued.clone()), "a replay answers the same successor");
    let open = RotationStatus { state: RotationState::Open, generation: 2, successor_heartbeats: 0 };
    assert_eq!(hub.rotation_status(AGENT, ROTATION).await, Ok(Some(open)));
    assert_eq!(hub.rotation_status(AGENT, "never").await, Ok(None));
    issued.token
}

/// After one heartbeat authenticated by the successor: proved, committed once (a replay revokes nothing), an abort of
/// the committed rotation refused, and an abort of a rotation never issued revokes nothing.
async fn body_a_proved_rotation_is_committed(hub: &impl Hub) {
    let proved = RotationStatus { state: RotationState::Open, generation: 2, successor_heartbeats: 1 };
    assert_eq!(hub.rotation_status(AGENT, ROTATION).await, Ok(Some(proved)));
    assert_eq!(hub.commit_rotation(AGENT, ROTATION).await, Ok(true));
    assert_eq!(hub.commit_rotation(AGENT, ROTATION).await, Ok(false), "a replay");
    let refused = hub.abort_rotation(AGENT, ROTATION).await.expect_err("an abort never revokes a predecessor");
    assert!(matches!(refused, HubError::Rejected(_)), "{refused:?}");
    assert_eq!(hub.abort_rotation(AGENT, "never").await, Ok(false));
}

/// What references agent-1 while the session of [`served_an_agent_s_references`] holds it: epoch 2 open (epoch 1
/// closed), a deployment hold and an operator's, a task lease until 90 s; then, once the lease ran out, the hold
/// released and the epoch closed, nothing. An agent the hub does not know is referenced by nothing.
async fn body_an_agent_s_references(hub: &impl Hub, later: impl AsyncFnOnce()) {
    let references = hub.agent_references(AGENT).await.expect("the references");
    let held = AgentReferences {
        epochs: vec![2],
        holds: vec![OWNER.to_owned(), "operator:maintenance".to_owned()],
        lease_until_ms: Some(90_000),
    };
    assert_eq!(references, held);
    assert_eq!(hub.agent_references("agent-9").await, Ok(AgentReferences::default()));
    later().await;
    assert_eq!(hub.agent_references(AGENT).await, Ok(AgentReferences::default()));
}

/// The journal-bound resurrection of agent-1, tombstoned while open epoch `epoch` lists it, by a controller holding
/// the lock: restored once (a replay restores nothing), and an agent the epoch does not list is refused.
async fn body_a_pinned_identity_is_resurrected(hub: &impl Hub, epoch: u64) {
    assert_eq!(hub.resurrect_agent(AGENT, epoch).await, Ok(true));
    assert_eq!(hub.resurrect_agent(AGENT, epoch).await, Ok(false), "a replay restores nothing");
    let refused = hub.resurrect_agent("agent-9", epoch).await.expect_err("only a pinned identity is resurrected");
    assert!(matches!(refused, HubError::Rejected(_)), "{refused:?}");
}

// --- the bodies against stubs ---------------------------------------------------------------------------------------

/// A stub answering `call` once (in mount order, the first unused one matches).
async fn once(server: &MockServer, verb: &str, route: &str, answer: ResponseTemplate) {
    Mock::given(method(verb)).and(path(route)).respond_with(answer).up_to_n_times(1).expect(1).mount(server).await;
}

#[tokio::test]
async fn stub_a_controller_session() {
    let server = MockServer::start().await;
    once(&server, "POST", "/v1/hub/auth", ok(json!({"expires_at_ms": 3_600_000}))).await;
    once(&server, "POST", "/v1/hub/lock", ok(json!({"granted": true, "fence": 1, "expires_at_ms": 30_000}))).await;
    once(&server, "POST", "/v1/hub/epochs", ok(json!({"epoch": 1}))).await;
    once(&server, "PUT", "/v1/hub/holds/agent-1/deploy:r1", ok(json!({}))).await;
    once(&server, "GET", "/v1/hub/holds", ok(json!({"holds": {AGENT: [OWNER]}}))).await;
    once(&server, "DELETE", "/v1/hub/holds/agent-1/deploy:r1", ok(json!({"released": true}))).await;
    once(&server, "DELETE", "/v1/hub/holds/agent-1/deploy:r1", ok(json!({"released": false}))).await;
    once(&server, "POST", "/v1/hub/epochs/1/close", ok(json!({"closed": true}))).await;
    once(&server, "POST", "/v1/hub/epochs/1/close", ok(json!({"closed": false}))).await;
    once(&server, "POST", "/v1/hub/lock/renew", ok(json!({}))).await;
    once(&server, "POST", "/v1/hub/lock/release", ok(json!({"released": true}))).await;
    once(&server, "POST", "/v1/hub/lock/release", ok(json!({"released": false}))).await;
    body_a_controller_session(&client(&server), &Secret::new(CREDENTIAL)).await;
}

#[tokio::test]
async fn stub_lock_contention_expiry_and_outage() {
    let server = MockServer::start().await;
    let held = json!({"granted": false, "holder": "c1", "fence": 1, "expires_at_ms": 30_000});
    once(&server, "POST", "/v1/hub/lock", ok(held)).await;
    once(&server, "GET", "/v1/hub/heartbeats", ok(json!({"now_ms": 10_000, "rows": []}))).await;
    body_a_held_lock(&client(&server)).await;

    let server = MockServer::start().await;
    let fenced = hub_error(409, "stale_fence", "stale fence 1: the deployment lock is at fence 2 (c2)");
    once(&server, "PUT", "/v1/hub/holds/agent-1/deploy:r1", fenced).await;
    body_a_superseded_controller_is_fenced(&client(&server)).await;

    let server = MockServer::start().await;
    let expired = hub_error(401, "credential_rejected", "credential of principal controller has expired");
    once(&server, "POST", "/v1/hub/epochs", expired).await;
    body_an_expired_credential(&client(&server)).await;

    let server = MockServer::start().await;
    once(&server, "GET", "/v1/hub/heartbeats", hub_error(503, "unavailable", "hub is unavailable")).await;
    body_a_hub_that_is_down(&client(&server)).await;

    let server = MockServer::start().await;
    let rows = json!({"now_ms": 10_000, "rows": [{"agent": AGENT, "status": "online", "last_seen_ms": 0,
        "revision": null}]});
    once(&server, "GET", "/v1/hub/heartbeats", ok(rows)).await;
    once(&server, "GET", "/v1/hub/route-bundle", ok(json!({"digest": "sha256:routes-1"}))).await;
    body_reads_the_heartbeats(&client(&server)).await;
}

#[tokio::test]
async fn stub_a_rotation_under_the_controller_s_credential() {
    let server = MockServer::start().await;
    let route = "/v1/hub/agents/agent-1/rotations/rotation-agent-1-1";
    let successor = "fleetsim-secret-agent-0123";
    once(&server, "POST", "/v1/hub/auth", ok(json!({"expires_at_ms": 3_600_000}))).await;
    for _ in 0..2 {
        Mock::given(method("POST"))
            .and(path(route))
            .and(header("x-fleet-principal", PRINCIPAL))
            .and(header("x-fleet-token", CREDENTIAL))
            .respond_with(ok(json!({"generation": 2, "token": successor})))
            .up_to_n_times(1)
            .expect(1)
            .mount(&server)
            .await;
    }
    Mock::given(method("GET"))
        .and(path(route))
        .and(header("x-fleet-token", CREDENTIAL))
        .respond_with(ok(json!({"state": "open", "generation": 2, "successor_heartbeats": 0})))
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    let unknown = hub_error(404, "unknown_rotation", "unknown rotation never of agent agent-1");
    once(&server, "GET", "/v1/hub/agents/agent-1/rotations/never", unknown).await;
    once(&server, "GET", route, ok(json!({"state": "open", "generation": 2, "successor_heartbeats": 1}))).await;
    let commit = format!("{route}/commit");
    once(&server, "POST", &commit, ok(json!({"revoked": true}))).await;
    once(&server, "POST", &commit, ok(json!({"revoked": false}))).await;
    let committed = hub_error(409, "conflict", "conflict: rotation rotation-agent-1-1 of agent-1 is committed");
    once(&server, "POST", &format!("{route}/abort"), committed).await;
    once(&server, "POST", "/v1/hub/agents/agent-1/rotations/never/abort", ok(json!({"revoked": false}))).await;
    let hub = client(&server);
    let token = body_a_rotation_is_issued(&hub, &Secret::new(CREDENTIAL)).await;
    assert_eq!(token.expose(), successor);
    body_a_proved_rotation_is_committed(&hub).await;
}

#[tokio::test]
async fn stub_an_agent_s_references() {
    let server = MockServer::start().await;
    let held = json!({"epochs": [2], "holds": [OWNER, "operator:maintenance"], "lease_until_ms": 90_000});
    once(&server, "GET", "/v1/hub/agents/agent-1/references", ok(held)).await;
    let none = || ok(json!({"epochs": [], "holds": [], "lease_until_ms": null}));
    once(&server, "GET", "/v1/hub/agents/agent-9/references", none()).await;
    once(&server, "GET", "/v1/hub/agents/agent-1/references", none()).await;
    body_an_agent_s_references(&client(&server), async || {}).await;
    for request in server.received_requests().await.unwrap_or_default() {
        assert!(!request.headers.contains_key("x-fleet-token"), "a read carries no credential");
    }
}

#[tokio::test]
async fn stub_a_pinned_identity_is_resurrected() {
    let server = MockServer::start().await;
    once(&server, "POST", "/v1/hub/auth", ok(json!({"expires_at_ms": 3_600_000}))).await;
    once(&server, "POST", "/v1/hub/lock", ok(json!({"granted": true, "fence": 3, "expires_at_ms": 30_000}))).await;
    for restored in [true, false] {
        Mock::given(method("POST"))
            .and(path("/v1/hub/agents/agent-1/resurrect"))
            .and(header("x-fleet-token", CREDENTIAL))
            .and(header("x-fleet-fence", "3"))
            .and(body_json(json!({"epoch": 2})))
            .respond_with(ok(json!({"restored": restored})))
            .up_to_n_times(1)
            .expect(1)
            .mount(&server)
            .await;
    }
    let refusal = hub_error(409, "conflict", "conflict: epoch 2 does not list agent-9");
    once(&server, "POST", "/v1/hub/agents/agent-9/resurrect", refusal).await;
    let hub = client(&server);
    hub.authenticate(&Secret::new(CREDENTIAL)).await.expect("authenticated");
    hub.acquire_lock("c1", 30_000).await.expect("the lock");
    body_a_pinned_identity_is_resurrected(&hub, 2).await;
}

// --- the bodies against the served fake hub -------------------------------------------------------------------------

/// The fake hub served on a loopback port, with `agent-1` registered at 0, the controller's credential issued, and a
/// clock the test moves.
struct ServedHub {
    shared: SharedHub,
    now_ms: Arc<AtomicU64>,
    base_url: String,
}

impl ServedHub {
    async fn start() -> ServedHub {
        let mut front = HubFront::new(fakes::hub::Hub::new(HubConfig::default()));
        front.hub.issue_credential(PRINCIPAL, CREDENTIAL, 3_600_000);
        let register = Request::Register { agent: AGENT.into(), kind: AgentKind::Durable, token: "agent-token".into() };
        front.hub.handle(0, register, &mut front.events);
        let shared = front.shared();
        let now_ms = Arc::new(AtomicU64::new(0));
        let clock_ms = now_ms.clone();
        let clock: fakes::http::Clock = Arc::new(move || clock_ms.load(Ordering::SeqCst));
        let router = fakes::http::hub::router(shared.clone(), clock);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let base_url = format!("http://{}", listener.local_addr().expect("its address"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        ServedHub { shared, now_ms, base_url }
    }

    fn client(&self) -> HubClient<impl HttpTransport + use<>> {
        HubClient::new(transport(&self.base_url), PRINCIPAL, CALL_TIMEOUT_MS)
    }

    fn at(&self, now_ms: u64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }

    fn with_front<R>(&self, change: impl FnOnce(&mut HubFront) -> R) -> R {
        change(&mut self.shared.lock().expect("the front"))
    }
}

#[tokio::test]
async fn served_a_controller_session() {
    let hub = ServedHub::start().await;
    body_a_controller_session(&hub.client(), &Secret::new(CREDENTIAL)).await;
}

#[tokio::test]
async fn served_lock_contention_supersede_expiry_and_outage() {
    let hub = ServedHub::start().await;
    let credential = Secret::new(CREDENTIAL);
    let first = hub.client();
    first.authenticate(&credential).await.expect("authenticated");
    assert_eq!(first.acquire_lock("c1", 30_000).await, Ok(LockGrant::Granted { fence: 1 }));
    hub.at(10_000);
    let second = hub.client();
    second.authenticate(&credential).await.expect("authenticated");
    body_a_held_lock(&second).await;
    body_reads_the_heartbeats(&second).await;
    assert_eq!(second.supersede_lock("c2", 1, 30_000).await, Ok(2));
    body_a_superseded_controller_is_fenced(&first).await;
    hub.with_front(|front| front.hub.expire_credential(PRINCIPAL, 10_000));
    body_an_expired_credential(&second).await;
    hub.with_front(|front| front.available = false);
    body_a_hub_that_is_down(&second).await;
}

/// An agent's heartbeat over HTTP, with `token` as its bearer: the answer's status.
async fn agent_heartbeat(hub: &ServedHub, token: &str) -> u16 {
    let request = HttpRequest::new(Method::Post, format!("/v1/hub/agents/{AGENT}/heartbeat"))
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"))
        .body(b"{}".to_vec());
    transport(&hub.base_url).send(request, CALL_TIMEOUT_MS).await.expect("the hub answers").status
}

#[tokio::test]
async fn served_a_rotation_overlaps_until_the_proved_successor_is_committed() {
    let hub = ServedHub::start().await;
    let client = hub.client();
    let successor = body_a_rotation_is_issued(&client, &Secret::new(CREDENTIAL)).await;
    assert_eq!(agent_heartbeat(&hub, "agent-token").await, 200, "the predecessor is still valid (the overlap)");
    assert_eq!(agent_heartbeat(&hub, successor.expose()).await, 200, "and so is the successor");
    body_a_proved_rotation_is_committed(&client).await;
    assert_eq!(agent_heartbeat(&hub, "agent-token").await, 401, "the predecessor is revoked");
    assert_eq!(agent_heartbeat(&hub, successor.expose()).await, 200);
    let issued = hub.with_front(|front| {
        front
            .drain_events()
            .into_iter()
            .filter(|event| matches!(event, fakes::hub::HubEvent::CredentialIssued { .. }))
            .count()
    });
    assert_eq!(issued, 1, "one successor minted for the rotation");
}

#[tokio::test]
async fn served_an_agent_s_references() {
    let hub = ServedHub::start().await;
    let credential = Secret::new(CREDENTIAL);
    let controller = hub.client();
    controller.authenticate(&credential).await.expect("authenticated");
    let LockGrant::Granted { .. } = controller.acquire_lock("c1", 600_000).await.expect("the lock") else {
        panic!("the lock is free");
    };
    let closed = controller.open_epoch(&[AGENT.to_owned()]).await.expect("an epoch");
    assert_eq!(controller.close_epoch(closed, &[]).await, Ok(true));
    let open = controller.open_epoch(&[AGENT.to_owned()]).await.expect("an epoch");
    controller.place_hold(AGENT, OWNER).await.expect("a hold");
    hub.with_front(|front| {
        let operator = Request::PlaceHold { agent: AGENT.into(), owner: "operator:maintenance".into() };
        front.hub.handle(0, operator, &mut front.events);
        front.hub.handle(0, Request::GrantLease { agent: AGENT.into(), until_ms: 90_000 }, &mut front.events);
    });
    // A reader that never authenticated: references are a public read, as holds are.
    let reader = hub.client();
    body_an_agent_s_references(&reader, async || {
        hub.at(90_000);
        assert_eq!(controller.release_hold(AGENT, OWNER).await, Ok(true));
        assert_eq!(controller.close_epoch(open, &[]).await, Ok(true));
        hub.with_front(|front| {
            let operator = Request::ReleaseHold { agent: AGENT.into(), owner: "operator:maintenance".into() };
            front.hub.handle(90_000, operator, &mut front.events);
        });
    })
    .await;
    hub.with_front(|front| front.available = false);
    assert_eq!(reader.agent_references(AGENT).await, Err(HubError::Transport(TransportError::ConnectionRefused)));
}

#[tokio::test]
async fn served_a_pinned_identity_is_resurrected() {
    let hub = ServedHub::start().await;
    // agent-1 as fungible capacity, silent past the TTL while no epoch pinned it: the sweeper tombstones it.
    hub.with_front(|front| {
        let fungible =
            Request::Register { agent: AGENT.into(), kind: AgentKind::Fungible, token: "agent-token".into() };
        front.hub.handle(0, fungible, &mut front.events);
        front.hub.sweep(fakes::hub::DEFAULT_AGENT_TTL_MS + 1, &mut front.events);
        assert!(!front.hub.is_registered(AGENT));
    });
    let controller = hub.client();
    controller.authenticate(&Secret::new(CREDENTIAL)).await.expect("authenticated");
    controller.acquire_lock("c1", 600_000).await.expect("the lock");
    let epoch = controller.open_epoch(&[AGENT.to_owned()]).await.expect("an epoch");
    let stale = hub.client();
    stale.authenticate(&Secret::new(CREDENTIAL)).await.expect("authenticated");
    let fenced = stale.resurrect_agent(AGENT, epoch).await.expect_err("no fence presented under a held lock");
    assert!(matches!(fenced, HubError::Fenced(_)), "{fenced:?}");
    body_a_pinned_identity_is_resurrected(&controller, epoch).await;
    assert!(hub.with_front(|front| front.hub.is_registered(AGENT)));
}
