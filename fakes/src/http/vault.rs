//! The secrets-store front end (our own Vault-like API, documented in `docs/http-apis.md`) over
//! [`Site::handle_vault`](crate::maas::Site::handle_vault).
//!
//! Every route needs `X-Vault-Token` with a token of [`SiteFront::vault_tokens`](super::SiteFront); missing or wrong:
//! 403 `{"errors":["permission denied"]}`. Model errors map to `{"errors":["<message>"]}` with 503 (`Unavailable`,
//! plus `Retry-After`), 404 (no power credential), 403 (site disabled, token expired, unknown token, delete denied)
//! and 501 (no token policy). A malformed body answers 400 `{"errors":["malformed request body: ..."]}`; an unknown path axum's empty 404
//! (deviation: Vault answers `{"errors":[]}`; the router has no fallback so that [`super::site_app`] can merge it).

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
use axum::routing::{delete, get, post};
use http::{HeaderValue, StatusCode, header};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{Clock, SharedSite, lock, no_answer};
use crate::maas::vault::CredentialSource;
use crate::maas::{Secret, VaultError, VaultRequest, VaultResponse};

/// `Retry-After` of a 503 (the model gives none). Deviation: a fixed second.
pub const UNAVAILABLE_RETRY_AFTER_S: u32 = 1;

/// The path `capabilities-self` answers for; any other path gets `["deny"]`.
pub const NODE_SECRETS_PATH: &str = "secret/data/nodes";

#[derive(Clone)]
struct VaultState {
    shared: SharedSite,
    clock: Clock,
}

/// The site's secrets store at `/v1/...`.
pub fn router(shared: SharedSite, clock: Clock) -> Router {
    Router::new()
        .route("/v1/secret/data/site/config", get(site_config))
        .route("/v1/secret/data/power/{node}", get(power_credential))
        .route("/v1/auth/bootstrap/token", post(bootstrap_token))
        .route("/v1/auth/bootstrap/redeem", post(redeem))
        .route("/v1/auth/bootstrap/revoke", post(revoke))
        .route("/v1/secret/data/nodes/{node}", delete(delete_node_secrets))
        .route("/v1/sys/capabilities-self", post(capabilities))
        .with_state(VaultState { shared, clock })
}

async fn site_config(State(state): State<VaultState>, headers: HeaderMap) -> Response {
    ask(&state, &headers, VaultRequest::ReadSiteConfig).await
}

async fn power_credential(State(state): State<VaultState>, Path(node): Path<String>, headers: HeaderMap) -> Response {
    ask(&state, &headers, VaultRequest::ResolvePowerCredential { node }).await
}

#[derive(Deserialize)]
struct TokenBody {
    node: String,
    ttl_ms: u64,
}

async fn bootstrap_token(State(state): State<VaultState>, _: Token, headers: HeaderMap, body: Bytes) -> Response {
    match parse::<TokenBody>(&body) {
        Ok(body) => {
            ask(&state, &headers, VaultRequest::IssueBootstrapToken { node: body.node, ttl_ms: body.ttl_ms }).await
        }
        Err(response) => response,
    }
}

#[derive(Deserialize)]
struct RedeemBody {
    token: String,
}

async fn redeem(State(state): State<VaultState>, _: Token, headers: HeaderMap, body: Bytes) -> Response {
    match parse::<RedeemBody>(&body) {
        Ok(body) => ask(&state, &headers, VaultRequest::RedeemToken { value: Secret::new(body.token) }).await,
        Err(response) => response,
    }
}

#[derive(Deserialize)]
struct RevokeBody {
    node: String,
}

async fn revoke(State(state): State<VaultState>, _: Token, headers: HeaderMap, body: Bytes) -> Response {
    match parse::<RevokeBody>(&body) {
        Ok(body) => ask(&state, &headers, VaultRequest::RevokeBootstrapTokens { node: body.node }).await,
        Err(response) => response,
    }
}

async fn delete_node_secrets(
    State(state): State<VaultState>,
    Path(node): Path<String>,
    headers: HeaderMap,
) -> Response {
    ask(&state, &headers, VaultRequest::DeleteNodeSecrets { node }).await
}

#[derive(Deserialize)]
struct CapabilitiesBody {
    paths: Vec<String>,
}

/// Deviation from Vault: the model knows one path (`secret/data/nodes`); a request naming only other paths gets
/// `{"capabilities":["deny"]}` without asking it, and Vault's per-path keys are not sent.
async fn capabilities(State(state): State<VaultState>, _: Token, headers: HeaderMap, body: Bytes) -> Response {
    let body = match parse::<CapabilitiesBody>(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    if !body.paths.iter().any(|path| path.trim_matches('/') == NODE_SECRETS_PATH) {
        if let Err(response) = check_token(&state, &headers) {
            return response;
        }
        return json_response(200, json!({ "capabilities": ["deny"] }));
    }
    ask(&state, &headers, VaultRequest::NodeSecretsCapabilities).await
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, Response> {
    serde_json::from_slice(body).map_err(|error| errors(400, &format!("malformed request body: {error}")))
}

/// A request whose `X-Vault-Token` the store accepts, checked from the headers before the route reads its body (a
/// client without a token cannot hold a connection open by trickling one).
struct Token;

impl FromRequestParts<VaultState> for Token {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &VaultState) -> Result<Self, Self::Rejection> {
        check_token(state, &parts.headers).map(|()| Token)
    }
}

fn check_token(state: &VaultState, headers: &HeaderMap) -> Result<(), Response> {
    let presented = headers.get("x-vault-token").and_then(|value| value.to_str().ok());
    let front = lock(&state.shared);
    match presented {
        Some(token) if front.vault_tokens.iter().any(|known| known.expose() == token) => Ok(()),
        _ => Err(errors(403, "permission denied")),
    }
}

/// Checks the token and asks the model, under one lock; a lost answer is no answer at all.
async fn ask(state: &VaultState, headers: &HeaderMap, request: VaultRequest) -> Response {
    if let Err(response) = check_token(state, headers) {
        return response;
    }
    let result = {
        let mut front = lock(&state.shared);
        let front = &mut *front;
        let now_ms = (state.clock)();
        front.site.handle_vault(now_ms, request, &mut front.events)
    };
    match result {
        Ok(response) => render(response),
        Err(VaultError::AnswerLost) => no_answer().await,
        Err(error) => error_response(&error),
    }
}

fn render(response: VaultResponse) -> Response {
    let body = match response {
        VaultResponse::SiteConfig(values) => json!({ "data": { "data": values } }),
        VaultResponse::PowerCredential { credential, source } => json!({
            "data": { "data": { "user": credential.user, "password": credential.password.expose() } },
            "source": match source {
                CredentialSource::NodeOverride => "override",
                CredentialSource::SiteDefault => "site_default",
            },
        }),
        VaultResponse::Token(grant) => json!({
            "auth": {
                "client_token": grant.value.expose(),
                "accessor": grant.token_id,
                "expires_at_ms": grant.expires_ms,
            }
        }),
        VaultResponse::Redeemed { node, token_id } => json!({ "node": node, "token_id": token_id }),
        VaultResponse::Deleted { count } => json!({ "deleted": count }),
        VaultResponse::Capabilities(capabilities) => json!({ "capabilities": capabilities }),
        VaultResponse::Revoked { count } => json!({ "revoked": count }),
        // No route sends `PutPowerCredential`; answered as Vault answers a write.
        VaultResponse::Stored => return empty(204),
    };
    json_response(200, body)
}

/// The HTTP status of each model error (the mapping the model's docs give).
pub fn error_status(error: &VaultError) -> u16 {
    match error {
        VaultError::Unavailable => 503,
        VaultError::NoPowerCredential { .. } => 404,
        VaultError::SiteDisabled
        | VaultError::TokenExpired { .. }
        | VaultError::UnknownToken
        | VaultError::DeleteDenied { .. } => 403,
        VaultError::NoTokenPolicy => 501,
        // Never sent (the front end answers nothing); Vault's gateway-timeout status if a caller ever maps it.
        VaultError::AnswerLost => 504,
    }
}

fn error_response(error: &VaultError) -> Response {
    let mut response = errors(error_status(error), &error.to_string());
    if *error == VaultError::Unavailable {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(UNAVAILABLE_RETRY_AFTER_S));
    }
    response
}

fn errors(status: u16, message: &str) -> Response {
    json_response(status, json!({ "errors": [message] }))
}

fn json_response(status: u16, value: Value) -> Response {
    let mut response = Response::new(Body::from(value.to_string()));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn empty(status: u16) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
}
