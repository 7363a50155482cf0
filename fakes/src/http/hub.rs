//! The hub front end (our own JSON API, documented in `docs/http-apis.md`) over [`Hub::handle`](crate::hub::Hub).
//!
//! Controller calls carry `X-Fleet-Principal` and `X-Fleet-Token` and, once the lock is held, `X-Fleet-Fence`: the
//! front end wraps the request in the model's `Request::Authorized` envelope, exactly as the simulator's `SimHub`
//! does for its mutations (lock, supersede, renew, release, holds, epochs, resurrections) and for every call of an agent-credential
//! rotation (issue, read, commit, abort; the read too, and none of them fenced by the deployment lock). Reads (holds,
//! heartbeats, route bundle, an agent's references) are public and sent bare, as `SimHub` sends them. Agents
//! authenticate with their token as `Authorization: Bearer`. A rotation's successor token is in the answer to its
//! issue and nowhere else.
//!
//! Credentials before bodies: every route that reads a body checks the caller's credential from the headers first
//! (the [`Controller`] and [`Agent`] extractors run before the body's), and answers 401 without reading the body when
//! it fails, so a client without a credential cannot hold a connection open by trickling a body.
//!
//! Deviation from the in-process hub: a bare request is the hub's trusted operator console in the model; over HTTP a
//! mutation without `X-Fleet-Principal`/`X-Fleet-Token` is refused with 401 (the operator console is the caller's
//! direct access to [`SharedHub`]).
//!
//! Errors: `{"error":"<kind>","message":"..."}` with the model's status (401, 404, 409), 400 for a malformed body or
//! header, 503 `unavailable` when [`HubFront::available`](super::HubFront) is false. The front end never runs the
//! TTL sweeper; whoever owns the hub calls `Hub::sweep`.

#![expect(
    clippy::result_large_err,
    reason = "an early HTTP answer is the error of every decode step here; it is built once per request, never hot"
)]

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Path, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::response::Response;
use axum::routing::{get, post, put};
use http::{HeaderValue, StatusCode, header};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{Clock, SharedHub, lock, no_answer};
use crate::hub::{AgentKind, HubError, Request, Response as HubResponse};

pub const PRINCIPAL_HEADER: &str = "x-fleet-principal";
pub const TOKEN_HEADER: &str = "x-fleet-token";
pub const FENCE_HEADER: &str = "x-fleet-fence";

#[derive(Clone)]
struct HubState {
    shared: SharedHub,
    clock: Clock,
}

/// The hub at `/v1/hub/...`.
pub fn router(shared: SharedHub, clock: Clock) -> Router {
    Router::new()
        .route("/v1/hub/auth", post(authenticate))
        .route("/v1/hub/lock", post(acquire_lock))
        .route("/v1/hub/lock/supersede", post(supersede_lock))
        .route("/v1/hub/lock/renew", post(renew_lock))
        .route("/v1/hub/lock/release", post(release_lock))
        .route("/v1/hub/holds", get(read_holds))
        .route("/v1/hub/holds/{agent}/{owner}", put(place_hold).delete(release_hold))
        .route("/v1/hub/heartbeats", get(read_heartbeats))
        .route("/v1/hub/epochs", post(open_epoch))
        .route("/v1/hub/epochs/{epoch}/close", post(close_epoch))
        .route("/v1/hub/route-bundle", get(route_bundle))
        .route("/v1/hub/agents/{agent}/register", post(register))
        .route("/v1/hub/agents/{agent}/heartbeat", post(heartbeat))
        .route("/v1/hub/agents/{agent}/rotations/{rotation}", post(begin_rotation).get(read_rotation))
        .route("/v1/hub/agents/{agent}/rotations/{rotation}/commit", post(commit_rotation))
        .route("/v1/hub/agents/{agent}/rotations/{rotation}/abort", post(abort_rotation))
        .route("/v1/hub/agents/{agent}/references", get(read_references))
        .route("/v1/hub/agents/{agent}/resurrect", post(resurrect))
        .with_state(HubState { shared, clock })
}

/// What a route makes of the model's answer.
type Encode = fn(HubResponse) -> Response;

/// The outcome of one exchange with the model.
enum Outcome {
    Answer(Response),
    /// The request was carried out and its answer is lost (see [`HubFront::lose_next_answers`](super::HubFront)).
    Lost,
}

async fn finish(outcome: Outcome) -> Response {
    match outcome {
        Outcome::Answer(response) => response,
        Outcome::Lost => no_answer().await,
    }
}

/// Sends `request` bare (a read or an agent call).
fn bare(state: &HubState, request: Request, encode: Encode) -> Outcome {
    exchange(state, request, false, encode)
}

/// Sends `request` in the controller's envelope built from the headers: a mutation, whose answer a
/// `lose_next_answers` may lose.
fn enveloped(state: &HubState, headers: &HeaderMap, request: Request, encode: Encode) -> Outcome {
    envelope(state, headers, request, true, encode)
}

/// Sends a read in the controller's envelope (its answer is never lost).
fn enveloped_read(state: &HubState, headers: &HeaderMap, request: Request, encode: Encode) -> Outcome {
    envelope(state, headers, request, false, encode)
}

fn envelope(state: &HubState, headers: &HeaderMap, request: Request, mutation: bool, encode: Encode) -> Outcome {
    let (principal, token) = match principal(headers) {
        Ok(pair) => pair,
        Err(response) => return Outcome::Answer(response),
    };
    let fence = match headers.get(FENCE_HEADER).map(|value| value.to_str().ok().and_then(|text| text.parse().ok())) {
        None => None,
        Some(Some(fence)) => Some(fence),
        Some(None) => return Outcome::Answer(error(400, "bad_request", "X-Fleet-Fence is not an integer")),
    };
    let request = Request::Authorized { principal, token, fence, request: Box::new(request) };
    exchange(state, request, mutation, encode)
}

fn exchange(state: &HubState, request: Request, mutation: bool, encode: Encode) -> Outcome {
    let mut front = lock(&state.shared);
    let front = &mut *front;
    if !front.available {
        return Outcome::Answer(error(503, "unavailable", "hub is unavailable"));
    }
    let now_ms = (state.clock)();
    let response = front.hub.handle(now_ms, request, &mut front.events);
    if mutation && front.lose_next_answers > 0 {
        front.lose_next_answers -= 1;
        return Outcome::Lost;
    }
    Outcome::Answer(encode(response))
}

fn principal(headers: &HeaderMap) -> Result<(String, String), Response> {
    let get = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::to_owned);
    match (get(PRINCIPAL_HEADER), get(TOKEN_HEADER)) {
        (Some(principal), Some(token)) => Ok((principal, token)),
        _ => Err(error(401, "credential_rejected", "X-Fleet-Principal and X-Fleet-Token are required")),
    }
}

/// A controller call whose principal and token (from the headers) the hub accepts now: checked with the model's own
/// `Authenticate` before the handler's body is read.
struct Controller;

impl FromRequestParts<HubState> for Controller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &HubState) -> Result<Self, Self::Rejection> {
        let (principal, token) = principal(&parts.headers)?;
        match exchange(state, Request::Authenticate { principal, token }, false, |response| match response {
            HubResponse::Authenticated { .. } => ok(json!({})),
            other => unexpected(other),
        }) {
            Outcome::Answer(response) if response.status() == StatusCode::OK => Ok(Controller),
            Outcome::Answer(response) => Err(response),
            Outcome::Lost => Err(error(503, "unavailable", "hub is unavailable")),
        }
    }
}

/// An agent call's token, from `Authorization: Bearer`: for the route to check before it reads the body.
struct Agent {
    name: String,
    token: String,
}

impl FromRequestParts<HubState> for Agent {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &HubState) -> Result<Self, Self::Rejection> {
        let Path(name) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| error(400, "bad_request", "the path names no agent"))?;
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(|token| token.trim().to_owned())
            .ok_or_else(|| error(401, "unauthorized", "Authorization: Bearer <the agent's token> is required"))?;
        Ok(Agent { name, token })
    }
}

/// The body's `token`, if it has one, must be the header's (an older client sent it there).
fn same_token(agent: &Agent, body_token: Option<&String>) -> Result<(), Response> {
    match body_token {
        Some(token) if *token != agent.token => {
            Err(error(401, "unauthorized", "the body's token is not the Authorization header's"))
        }
        _ => Ok(()),
    }
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, Response> {
    // An empty body reads as `{}`, so that body-less calls work.
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) { b"{}" } else { body };
    serde_json::from_slice(body).map_err(|e| error(400, "bad_request", &format!("malformed request body: {e}")))
}

/// A model answer the route has no special reading for: its error, or (a bug) an unexpected answer.
fn unexpected(response: HubResponse) -> Response {
    match response {
        HubResponse::Error(hub_error) => error_response(&hub_error),
        other => error(500, "unexpected", &format!("unexpected model answer: {other:?}")),
    }
}

async fn authenticate(State(state): State<HubState>, headers: HeaderMap) -> Response {
    let (principal, token) = match principal(&headers) {
        Ok(pair) => pair,
        Err(response) => return response,
    };
    finish(bare(&state, Request::Authenticate { principal, token }, |response| match response {
        HubResponse::Authenticated { expires_at_ms } => ok(json!({ "expires_at_ms": expires_at_ms })),
        other => unexpected(other),
    }))
    .await
}

#[derive(Deserialize)]
struct AcquireBody {
    holder: String,
    lease_ms: u64,
}

async fn acquire_lock(State(state): State<HubState>, _: Controller, headers: HeaderMap, body: Bytes) -> Response {
    let body: AcquireBody = match parse(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let request = Request::AcquireLock { holder: body.holder, lease_ms: body.lease_ms };
    finish(enveloped(&state, &headers, request, |response| match response {
        HubResponse::LockGranted { fence, expires_at_ms } => {
            ok(json!({ "granted": true, "fence": fence, "expires_at_ms": expires_at_ms }))
        }
        HubResponse::LockHeld { holder, fence, expires_at_ms } => {
            ok(json!({ "granted": false, "holder": holder, "fence": fence, "expires_at_ms": expires_at_ms }))
        }
        other => unexpected(other),
    }))
    .await
}

#[derive(Deserialize)]
struct SupersedeBody {
    holder: String,
    fence: u64,
    lease_ms: u64,
}

async fn supersede_lock(State(state): State<HubState>, _: Controller, headers: HeaderMap, body: Bytes) -> Response {
    let body: SupersedeBody = match parse(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let request = Request::SupersedeLock { holder: body.holder, fence: body.fence, lease_ms: body.lease_ms };
    finish(enveloped(&state, &headers, request, |response| match response {
        HubResponse::LockGranted { fence, expires_at_ms } => {
            ok(json!({ "fence": fence, "expires_at_ms": expires_at_ms }))
        }
        other => unexpected(other),
    }))
    .await
}

#[derive(Deserialize)]
struct RenewBody {
    fence: u64,
    lease_ms: u64,
}

async fn renew_lock(State(state): State<HubState>, _: Controller, headers: HeaderMap, body: Bytes) -> Response {
    let body: RenewBody = match parse(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let request = Request::RenewLock { fence: body.fence, lease_ms: body.lease_ms };
    finish(enveloped(&state, &headers, request, |response| match response {
        HubResponse::LockGranted { .. } => ok(json!({})),
        other => unexpected(other),
    }))
    .await
}

#[derive(Deserialize)]
struct ReleaseBody {
    fence: u64,
}

/// A release whose fence holds no lock is the model's `Conflict`: answered `{"released":false}` (200), as `SimHub`
/// reads it (released already).
async fn release_lock(State(state): State<HubState>, _: Controller, headers: HeaderMap, body: Bytes) -> Response {
    let body: ReleaseBody = match parse(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    finish(enveloped(&state, &headers, Request::ReleaseLock { fence: body.fence }, released)).await
}

/// `Ok` → released; the model's `Conflict` → not released (both 200).
fn released(response: HubResponse) -> Response {
    match response {
        HubResponse::Ok => ok(json!({ "released": true })),
        HubResponse::Error(HubError::Conflict { .. }) => ok(json!({ "released": false })),
        other => unexpected(other),
    }
}

async fn read_holds(State(state): State<HubState>) -> Response {
    finish(bare(&state, Request::ReadHolds, |response| match response {
        HubResponse::Holds { holds } => ok(json!({ "holds": holds })),
        other => unexpected(other),
    }))
    .await
}

async fn place_hold(
    State(state): State<HubState>,
    Path((agent, owner)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    finish(enveloped(&state, &headers, Request::PlaceHold { agent, owner }, |response| match response {
        HubResponse::Ok => ok(json!({})),
        other => unexpected(other),
    }))
    .await
}

/// A hold that is not there is the model's `Conflict`: `{"released":false}` (200), as `SimHub` reads it.
async fn release_hold(
    State(state): State<HubState>,
    Path((agent, owner)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    finish(enveloped(&state, &headers, Request::ReleaseHold { agent, owner }, released)).await
}

async fn read_heartbeats(State(state): State<HubState>) -> Response {
    finish(bare(&state, Request::ReadHeartbeats, |response| match response {
        HubResponse::Heartbeats { now_ms, rows } => ok(json!({
            "now_ms": now_ms,
            "rows": rows.iter().map(|row| json!({
                "agent": row.agent,
                "status": row.status,
                "last_seen_ms": row.last_seen_ms,
                "revision": row.revision,
                "generation": row.generation,
            })).collect::<Vec<_>>(),
        })),
        other => unexpected(other),
    }))
    .await
}

/// What references `agent`: the open epochs listing it, the holds on it, its active task lease (`null` when none).
/// An agent the hub does not know is referenced by nothing: 200 with empty lists, as a query over the tables answers.
async fn read_references(State(state): State<HubState>, Path(agent): Path<String>) -> Response {
    finish(bare(&state, Request::ReadReferences { agent }, |response| match response {
        HubResponse::References { epochs, holds, lease_until_ms } => {
            ok(json!({ "epochs": epochs, "holds": holds, "lease_until_ms": lease_until_ms }))
        }
        other => unexpected(other),
    }))
    .await
}

#[derive(Deserialize)]
struct ResurrectBody {
    epoch: u64,
}

/// The journal-bound resurrection of a tombstoned agent row, under the open epoch the caller's journal names (fenced
/// like every deployment mutation). `{"restored":false}` when the row was not tombstoned (a replay); the model's
/// refusals (not a member, epoch terminal, principal revoked) are 409, an unknown epoch or agent 404.
async fn resurrect(
    State(state): State<HubState>,
    Path(agent): Path<String>,
    _: Controller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: ResurrectBody = match parse(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    finish(enveloped(&state, &headers, Request::Resurrect { agent, epoch: body.epoch }, |response| match response {
        HubResponse::Resurrected { restored } => ok(json!({ "restored": restored })),
        other => unexpected(other),
    }))
    .await
}

#[derive(Deserialize)]
struct OpenEpochBody {
    members: Vec<String>,
}

async fn open_epoch(State(state): State<HubState>, _: Controller, headers: HeaderMap, body: Bytes) -> Response {
    let body: OpenEpochBody = match parse(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    finish(enveloped(&state, &headers, Request::OpenEpoch { members: body.members }, |response| match response {
        HubResponse::EpochOpened { epoch } => ok(json!({ "epoch": epoch })),
        other => unexpected(other),
    }))
    .await
}

#[derive(Deserialize)]
struct CloseEpochBody {
    #[serde(default)]
    untouched: Vec<String>,
}

/// The model's `Conflict` (closed already, an untouched member without a hold) is `{"closed":false}` (200), as
/// `SimHub` reads it.
async fn close_epoch(
    State(state): State<HubState>,
    Path(epoch): Path<String>,
    _: Controller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(epoch) = epoch.parse::<u64>() else {
        return error(404, "unknown_epoch", &format!("unknown epoch {epoch}"));
    };
    let body: CloseEpochBody = match parse(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let request = Request::CloseEpoch { epoch, untouched: body.untouched };
    finish(enveloped(&state, &headers, request, |response| match response {
        HubResponse::Ok => ok(json!({ "closed": true })),
        HubResponse::Error(HubError::Conflict { .. }) => ok(json!({ "closed": false })),
        other => unexpected(other),
    }))
    .await
}

async fn route_bundle(State(state): State<HubState>) -> Response {
    finish(bare(&state, Request::ReadRouteBundle, |response| match response {
        HubResponse::RouteBundle { digest } => ok(json!({ "digest": digest })),
        other => unexpected(other),
    }))
    .await
}

#[derive(Deserialize)]
struct RegisterBody {
    kind: AgentKind,
    #[serde(default)]
    token: Option<String>,
}

/// The token (`Authorization: Bearer`) is checked by [`RegisteringAgent`], extracted before the body.
async fn register(State(state): State<HubState>, agent: RegisteringAgent, body: Bytes) -> Response {
    let RegisteringAgent(Agent { name: agent, token }) = agent;
    let body: RegisterBody = match parse(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    if let Err(response) = same_token(&Agent { name: agent.clone(), token: token.clone() }, body.token.as_ref()) {
        return response;
    }
    finish(bare(&state, Request::Register { agent, kind: body.kind, token }, |response| match response {
        HubResponse::Ok => ok(json!({})),
        other => unexpected(other),
    }))
    .await
}

/// An agent allowed to register ([`may_register`]), checked from the headers before the body is read.
struct RegisteringAgent(Agent);

impl FromRequestParts<HubState> for RegisteringAgent {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &HubState) -> Result<Self, Self::Rejection> {
        let agent = Agent::from_request_parts(parts, state).await?;
        may_register(state, &agent.name, &agent.token)?;
        Ok(RegisteringAgent(agent))
    }
}

/// An agent whose heartbeat the hub would take (`Hub::heartbeat_credential`), checked from the headers before the
/// body is read.
struct BeatingAgent(Agent);

impl FromRequestParts<HubState> for BeatingAgent {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &HubState) -> Result<Self, Self::Rejection> {
        let agent = Agent::from_request_parts(parts, state).await?;
        let front = lock(&state.shared);
        if !front.available {
            return Err(error(503, "unavailable", "hub is unavailable"));
        }
        front.hub.heartbeat_credential(&agent.name, &agent.token).map_err(|hub_error| error_response(&hub_error))?;
        drop(front);
        Ok(BeatingAgent(agent))
    }
}

/// A registration over HTTP carries the agent's bootstrap token (first enrolment) or its current credential
/// (a restart re-registering). Anything else is refused with 401 `unauthorized` and audited, so nobody can take an
/// enrolled agent's name and silence it. Deviation from the model: `Hub::handle` registers whatever it is sent (the
/// simulator's agents are trusted); the check lives here, at the edge.
fn may_register(state: &HubState, agent: &str, token: &str) -> Result<(), Response> {
    let mut front = lock(&state.shared);
    let reason = if front.hub.is_registered(agent) {
        if front.hub.holds_agent_token(agent, token) {
            return Ok(());
        }
        "the token is not the agent's current credential"
    } else {
        if front.bootstrap_tokens.get(agent).is_some_and(|bootstrap| bootstrap.expose() == token) {
            return Ok(());
        }
        "the token is not the agent's bootstrap token"
    };
    let at_ms = (state.clock)();
    front.audit.push(super::HubAudit { at_ms, agent: agent.to_owned(), reason: reason.to_owned() });
    Err(error(401, "unauthorized", &format!("registration of {agent} refused: {reason}")))
}

#[derive(Deserialize)]
struct HeartbeatBody {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    revision: Option<String>,
}

async fn heartbeat(State(state): State<HubState>, agent: BeatingAgent, body: Bytes) -> Response {
    let BeatingAgent(agent) = agent;
    let body: HeartbeatBody = match parse(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    if let Err(response) = same_token(&agent, body.token.as_ref()) {
        return response;
    }
    let request = Request::Heartbeat { agent: agent.name, token: agent.token, revision: body.revision };
    finish(bare(&state, request, |response| match response {
        HubResponse::Ok => ok(json!({})),
        other => unexpected(other),
    }))
    .await
}

/// Issues (or, on a replay of the same rotation, answers again) the successor: `{"generation":G,"token":"..."}`.
async fn begin_rotation(
    State(state): State<HubState>,
    Path((agent, rotation)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    finish(enveloped(&state, &headers, Request::BeginRotation { agent, rotation }, |response| match response {
        HubResponse::RotationIssued { generation, token } => {
            ok(json!({ "generation": generation, "token": token.expose() }))
        }
        other => unexpected(other),
    }))
    .await
}

/// `{"state":"open"|"committed"|"aborted","generation":G,"successor_heartbeats":N}`; 404 `unknown_rotation`.
async fn read_rotation(
    State(state): State<HubState>,
    Path((agent, rotation)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    finish(enveloped_read(&state, &headers, Request::ReadRotation { agent, rotation }, |response| match response {
        HubResponse::RotationRead { state, generation, successor_heartbeats } => ok(json!({
            "state": state,
            "generation": generation,
            "successor_heartbeats": successor_heartbeats,
        })),
        other => unexpected(other),
    }))
    .await
}

/// `{"revoked":true}`, or `{"revoked":false}` on a replay; 404 `unknown_rotation`, 409 `conflict` (aborted).
async fn commit_rotation(
    State(state): State<HubState>,
    Path((agent, rotation)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    finish(enveloped(&state, &headers, Request::CommitRotation { agent, rotation }, rotation_ended)).await
}

/// `{"revoked":true}`, or `{"revoked":false}` when there was nothing to revoke; 409 `conflict` (committed).
async fn abort_rotation(
    State(state): State<HubState>,
    Path((agent, rotation)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    finish(enveloped(&state, &headers, Request::AbortRotation { agent, rotation }, rotation_ended)).await
}

fn rotation_ended(response: HubResponse) -> Response {
    match response {
        HubResponse::RotationEnded { revoked } => ok(json!({ "revoked": revoked })),
        other => unexpected(other),
    }
}

/// The error kind (snake_case of the model's variant) and HTTP status of a model error.
pub fn error_kind(hub_error: &HubError) -> (u16, &'static str) {
    match hub_error {
        HubError::Unauthorized { .. } => (401, "unauthorized"),
        HubError::UnknownAgent { .. } => (404, "unknown_agent"),
        HubError::UnknownEpoch { .. } => (404, "unknown_epoch"),
        HubError::Conflict { .. } => (409, "conflict"),
        HubError::Held { .. } => (409, "held"),
        HubError::CredentialRejected { .. } => (401, "credential_rejected"),
        HubError::StaleFence { .. } => (409, "stale_fence"),
        HubError::PrincipalDrift { .. } => (409, "principal_drift"),
        HubError::ParticipantMissing { .. } => (404, "participant_missing"),
        HubError::UnknownRotation { .. } => (404, "unknown_rotation"),
    }
}

fn error_response(hub_error: &HubError) -> Response {
    let (status, kind) = error_kind(hub_error);
    error(status, kind, &hub_error.to_string())
}

fn error(status: u16, kind: &str, message: &str) -> Response {
    json_response(status, json!({ "error": kind, "message": message }))
}

fn ok(value: Value) -> Response {
    json_response(200, value)
}

fn json_response(status: u16, value: Value) -> Response {
    let mut response = Response::new(Body::from(value.to_string()));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
