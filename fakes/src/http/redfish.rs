//! The Redfish BMC front end over [`Site::handle_redfish`](crate::maas::Site::handle_redfish) (maas-api-notes §7.1,
//! sushy-tools' emulator): `GET /redfish/v1/Systems`, `GET /redfish/v1/Systems/{id}` (with `ETag` and
//! `@odata.etag`), `PATCH /redfish/v1/Systems/{id}` (`Boot` override, `If-Match` checked: 412 on a stale ETag, 204),
//! `POST /redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset` (204). HTTP Basic auth on every route: a request
//! without it answers 401; wrong credentials get the model's 401.
//!
//! Errors carry Redfish's error object `{"error":{"code":"Base.1.0.GeneralError","message":"..."}}`.
//! An unreachable BMC (the model's `None`) gives no answer: see [`super::no_answer`].

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
use axum::routing::{get, post};
use http::{HeaderValue, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Clock, SharedSite, lock, no_answer};
use crate::maas::bmc::{OverrideEnabled, RedfishBody, ResetType, SystemView};
use crate::maas::machine::decode_base64;
use crate::maas::{BasicAuth, BootTarget, PowerCredential, PowerState, RedfishRequest, RedfishResponse, Secret};

const SYSTEMS: &str = "/redfish/v1/Systems";

#[derive(Clone)]
struct RedfishState {
    shared: SharedSite,
    clock: Clock,
}

/// The BMC service of the site at `/redfish/v1/...` (one endpoint for every system, as sushy-tools serves many).
pub fn router(shared: SharedSite, clock: Clock) -> Router {
    Router::new()
        .route("/redfish/v1", get(service_root))
        .route("/redfish/v1/", get(service_root))
        .route(SYSTEMS, get(list_systems))
        .route("/redfish/v1/Systems/{system}", get(get_system).patch(patch_system))
        .route("/redfish/v1/Systems/{system}/Actions/ComputerSystem.Reset", post(reset))
        .with_state(RedfishState { shared, clock })
}

/// The service root (DSP0266): public, as on real BMCs, and the entry point Redfish clients (sushy, gofish) read
/// first. Only `Systems` is linked: no session service (clients fall back to Basic auth), no managers or chassis.
async fn service_root() -> Response {
    let root = json!({
        "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot",
        "@odata.id": "/redfish/v1/",
        "Id": "RootService",
        "Name": "Root Service",
        "RedfishVersion": "1.6.0",
        "UUID": "00000000-0000-0000-0000-00000000f1ee",
        "Systems": { "@odata.id": SYSTEMS },
    });
    axum::response::IntoResponse::into_response((StatusCode::OK, axum::Json(root)))
}

/// The Systems collection as the login sees it: the emulator login sees every system (sushy-tools serves many
/// systems behind one login); a BMC's own login sees its own system, as a real BMC's endpoint shows only itself.
/// A login that opens no system is a 401. So a Redfish client walks the collection with the login it was given.
async fn list_systems(State(state): State<RedfishState>, headers: HeaderMap) -> Response {
    let auth = match basic_auth(&headers) {
        Ok(auth) => auth,
        Err(response) => return response,
    };
    let visible: Vec<String> = {
        let front = lock(&state.shared);
        let emulator = front.redfish_login.as_ref().is_some_and(|login| is_login(login, &auth));
        front
            .site
            .bmc
            .system_ids()
            .into_iter()
            .filter(|system| emulator || front.site.bmc.credential(system).is_some_and(|login| is_login(login, &auth)))
            .collect()
    };
    if visible.is_empty() {
        return unauthorized();
    }
    render(RedfishResponse { status: 200, body: RedfishBody::Systems(visible) })
}

fn is_login(login: &PowerCredential, auth: &BasicAuth) -> bool {
    login.user == auth.user && login.password == auth.password
}

async fn get_system(State(state): State<RedfishState>, Path(system): Path<String>, headers: HeaderMap) -> Response {
    let auth = match basic_auth(&headers) {
        Ok(auth) => auth,
        Err(response) => return response,
    };
    match ask(&state, &auth, RedfishRequest::GetSystem { system }) {
        Some(response) => render(response),
        None => no_answer().await,
    }
}

#[derive(Deserialize)]
struct PatchBody {
    #[serde(rename = "Boot")]
    boot: Option<BootPatch>,
}

#[derive(Deserialize)]
struct BootPatch {
    #[serde(rename = "BootSourceOverrideEnabled")]
    enabled: Option<OverrideEnabled>,
    #[serde(rename = "BootSourceOverrideTarget")]
    target: Option<BootTarget>,
}

/// Reads the system (the model's `GetSystem`) to check `If-Match` and fill the fields the patch leaves out, then
/// applies it (`PatchBoot`).
///
/// Deviation: the BMC model itself does not check `If-Match` (bmc.rs); the front end compares it with the ETag the
/// model reports. A patch without `If-Match` is accepted, as sushy-tools does.
async fn patch_system(
    State(state): State<RedfishState>,
    Path(system): Path<String>,
    _: SystemLogin,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let auth = match basic_auth(&headers) {
        Ok(auth) => auth,
        Err(response) => return response,
    };
    let patch: PatchBody = match serde_json::from_slice(&body) {
        Ok(patch) => patch,
        Err(error) => return error_response(400, "Base.1.0.MalformedJSON", &format!("malformed patch body: {error}")),
    };
    let Some(boot) = patch.boot else {
        return error_response(400, "Base.1.0.PropertyMissing", "the patch has no Boot object");
    };
    let if_match = headers.get(header::IF_MATCH).and_then(|value| value.to_str().ok()).map(str::to_owned);
    let answer = {
        let mut front = lock(&state.shared);
        let front = &mut *front;
        let auth = as_system_login(front, &auth, &RedfishRequest::GetSystem { system: system.clone() });
        let now_ms = (state.clock)();
        let read = front.site.handle_redfish(
            now_ms,
            &auth,
            RedfishRequest::GetSystem { system: system.clone() },
            &mut front.events,
        );
        match read {
            None => None,
            Some(RedfishResponse { body: RedfishBody::System(view), .. }) => {
                if if_match.as_deref().is_some_and(|tag| tag != "*" && tag != view.etag) {
                    Some(error_response(412, "Base.1.0.PreconditionFailed", "the ETag does not match (If-Match)"))
                } else {
                    let request = RedfishRequest::PatchBoot {
                        system,
                        enabled: boot.enabled.unwrap_or(view.boot_override_enabled),
                        target: boot.target.unwrap_or(view.boot_override_target),
                    };
                    front.site.handle_redfish(now_ms, &auth, request, &mut front.events).map(render)
                }
            }
            Some(other) => Some(render(other)),
        }
    };
    match answer {
        Some(response) => response,
        None => no_answer().await,
    }
}

#[derive(Deserialize)]
struct ResetBody {
    #[serde(rename = "ResetType")]
    reset: Value,
}

async fn reset(
    State(state): State<RedfishState>,
    Path(system): Path<String>,
    _: SystemLogin,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let auth = match basic_auth(&headers) {
        Ok(auth) => auth,
        Err(response) => return response,
    };
    let body: ResetBody = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(error) => return error_response(400, "Base.1.0.MalformedJSON", &format!("malformed reset body: {error}")),
    };
    let Ok(reset) = serde_json::from_value::<ResetType>(body.reset.clone()) else {
        return error_response(
            400,
            "Base.1.0.ActionParameterNotSupported",
            &format!("ResetType {} is not supported", body.reset),
        );
    };
    match ask(&state, &auth, RedfishRequest::Reset { system, reset }) {
        Some(response) => render(response),
        None => no_answer().await,
    }
}

fn ask(state: &RedfishState, auth: &BasicAuth, request: RedfishRequest) -> Option<RedfishResponse> {
    let mut front = lock(&state.shared);
    let front = &mut *front;
    let auth = &as_system_login(front, auth, &request);
    let now_ms = (state.clock)();
    front.site.handle_redfish(now_ms, auth, request, &mut front.events)
}

/// The emulator login stands for the addressed system's own login (the model checks only a BMC's own login).
fn as_system_login(front: &super::SiteFront, auth: &BasicAuth, request: &RedfishRequest) -> BasicAuth {
    let system = match request {
        RedfishRequest::ListSystems => return auth.clone(),
        RedfishRequest::GetSystem { system }
        | RedfishRequest::PatchBoot { system, .. }
        | RedfishRequest::Reset { system, .. } => system,
    };
    match (&front.redfish_login, front.site.bmc.credential(system)) {
        (Some(emulator), Some(own)) if is_login(emulator, auth) => {
            BasicAuth { user: own.user.clone(), password: own.password.clone() }
        }
        _ => auth.clone(),
    }
}

/// `Authorization: Basic base64(user:password)`; anything else answers 401.
fn basic_auth(headers: &HeaderMap) -> Result<BasicAuth, Response> {
    let decoded = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Basic "))
        .and_then(|encoded| decode_base64(encoded.trim()))
        .and_then(|bytes| String::from_utf8(bytes).ok());
    let Some((user, password)) = decoded.as_deref().and_then(|text| text.split_once(':')) else {
        return Err(unauthorized());
    };
    Ok(BasicAuth { user: user.to_owned(), password: Secret::new(password) })
}

/// A request whose Basic login opens the path's system, checked from the headers before the route reads its body
/// (a client without the login cannot hold a connection open by trickling one). The BMC model's own read answers:
/// an unreachable BMC gives no answer, an unknown system 404, another login 401.
struct SystemLogin;

impl FromRequestParts<RedfishState> for SystemLogin {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &RedfishState) -> Result<Self, Self::Rejection> {
        let auth = basic_auth(&parts.headers)?;
        let Path(system) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| error_response(404, "Base.1.0.ResourceMissingAtURI", "no system in the path"))?;
        let read = {
            let mut front = lock(&state.shared);
            let request = RedfishRequest::GetSystem { system };
            let auth = as_system_login(&front, &auth, &request);
            front.site.bmc.handle(&auth, request)
        };
        match read {
            None => Err(no_answer().await),
            Some(RedfishResponse { status: 200, .. }) => Ok(SystemLogin),
            Some(refusal) => Err(render(refusal)),
        }
    }
}

fn unauthorized() -> Response {
    let mut response = error_response(401, "Base.1.0.GeneralError", "Unauthorized");
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"redfish\""));
    response
}

fn render(response: RedfishResponse) -> Response {
    match response.body {
        RedfishBody::Systems(ids) => json_response(
            response.status,
            json!({
                "@odata.id": SYSTEMS,
                "@odata.type": "#ComputerSystemCollection.ComputerSystemCollection",
                "Name": "Computer System Collection",
                "Members@odata.count": ids.len(),
                "Members": ids.iter().map(|id| json!({ "@odata.id": format!("{SYSTEMS}/{id}") })).collect::<Vec<_>>(),
            }),
        ),
        RedfishBody::System(view) => {
            let etag = view.etag.clone();
            let mut http = json_response(response.status, system_json(&view));
            if let Ok(value) = HeaderValue::from_str(&etag) {
                http.headers_mut().insert(header::ETAG, value);
            }
            http
        }
        RedfishBody::Empty => {
            let mut http = Response::new(Body::empty());
            *http.status_mut() = status_code(response.status);
            http
        }
        RedfishBody::Error(message) if response.status == 401 => {
            let mut http = error_response(401, "Base.1.0.GeneralError", &message);
            http.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"redfish\""));
            http
        }
        RedfishBody::Error(message) => {
            let code = if response.status == 404 { "Base.1.0.ResourceMissingAtURI" } else { "Base.1.0.GeneralError" };
            error_response(response.status, code, &message)
        }
    }
}

/// `GET Systems/{id}`. Deviation: only the fields MAAS reads, plus the reset action's allowed values.
fn system_json(view: &SystemView) -> Value {
    let id = &view.id;
    json!({
        "@odata.id": format!("{SYSTEMS}/{id}"),
        "@odata.type": "#ComputerSystem.v1_1_0.ComputerSystem",
        "@odata.etag": view.etag,
        "Id": id,
        "Name": id,
        "PowerState": match view.power_state { PowerState::On => "On", PowerState::Off => "Off" },
        "Boot": {
            "BootSourceOverrideEnabled": view.boot_override_enabled,
            "BootSourceOverrideTarget": view.boot_override_target,
            "BootSourceOverrideTarget@Redfish.AllowableValues": ["Pxe", "Hdd"],
        },
        "Actions": {
            "#ComputerSystem.Reset": {
                "target": format!("{SYSTEMS}/{id}/Actions/ComputerSystem.Reset"),
                "ResetType@Redfish.AllowableValues":
                    ["On", "ForceOn", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart"],
            }
        },
    })
}

fn error_response(status: u16, code: &str, message: &str) -> Response {
    json_response(status, json!({ "error": { "code": code, "message": message } }))
}

fn json_response(status: u16, value: Value) -> Response {
    let mut response = Response::new(Body::from(value.to_string()));
    *response.status_mut() = status_code(status);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}
