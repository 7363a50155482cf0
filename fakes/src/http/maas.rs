//! The MAAS REST front end: `/MAAS/api/2.0/...` over [`Site::handle_maas`](crate::maas::Site::handle_maas), as real
//! MAAS serves it (`/work/shared/reference/maas-api-notes.md` §2–§5): `?op=` dispatch, form-encoded bodies with
//! repeated keys, the real JSON field names, `text/plain` errors with MAAS's exact strings, JSON form errors,
//! `Retry-After`, 204 on DELETE and `X-MAAS-API-Hash` on every response.
//!
//! Auth is OAuth 1.0 PLAINTEXT, parsed as `maasserver/api/auth.py` does: the header must start with `OAuth`, is split
//! on `,` then on the first `=`, quotes are stripped and values percent-decoded, so both MAAS's own unquoted header
//! and gomaasclient's quoted, percent-escaped one (`oauth_signature="%26<secret>"`) are accepted. The key picks the
//! MAAS user the request runs as (the model's `caller`). A missing or wrong key answers 401
//! `Authorization Error: Invalid API key.`; a non-integer `oauth_timestamp` answers 400. The key is checked from the
//! headers before the body is read (a client without one cannot hold a connection open by trickling a body); the
//! answers are the ones the whole request would get, in MAAS's order (no answer from an unreachable region, 404 for
//! an unknown path, then the key).
//!
//! An unreachable region (the model's `None`) gives no answer at all: see [`super::no_answer`].

#![expect(
    clippy::result_large_err,
    reason = "an early HTTP answer is the error of every decode step here; it is built once per request, never hot"
)]

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::{HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};

use super::{BODY_LIMIT_BYTES, Clock, SharedSite, form_pairs, iso_datetime_at, lock, maas_event_created_at, no_answer};
use crate::maas::region::{
    BlockDevice, CreateMachine, EventRecord, EventsPage, InterfaceView, Link, MachineView, PowerParameters, Vlan,
};
use crate::maas::{EventLevel, EventsQuery, MaasBody, MaasRequest, MaasResponse, NodeStatus, Secret, Site};

/// The API's path prefix.
pub const API_PREFIX: &str = "/MAAS/api/2.0/";

/// `X-MAAS-API-Hash`. Deviation: real MAAS sends the SHA-1 of its API description; the fake sends a fixed value
/// (clients only compare it between calls).
pub const API_HASH: &str = "f1ee75113c0ffee0000000000000000000000000";

/// How old an `oauth_timestamp` may be, in seconds (python-oauth's `OAuthServer.timestamp_threshold`, which piston3
/// and so MAAS use; a real region's answer quotes it: `... has a greater difference than threshold 300`).
pub const OAUTH_TIMESTAMP_THRESHOLD_S: i64 = 300;

/// The 401 text of a missing or wrong key (piston's answer to "Invalid consumer.").
pub const INVALID_API_KEY: &str = "Authorization Error: Invalid API key.";

#[derive(Clone)]
struct MaasState {
    shared: SharedSite,
    clock: Clock,
}

/// The MAAS API at `/MAAS/api/2.0/...` (the router matches whole paths itself; mount it at the root). Every other
/// path answers 404 `Unknown API endpoint: <path>.`.
pub fn router(shared: SharedSite, clock: Clock) -> Router {
    Router::new().fallback(handle).with_state(MaasState { shared, clock })
}

async fn handle(State(state): State<MaasState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if parts.method == Method::GET && parts.uri.path() == format!("{API_PREFIX}describe/") {
        // Anonymous, as in MAAS: clients read it before they authenticate.
        let host = parts.headers.get(header::HOST).and_then(|value| value.to_str().ok()).unwrap_or("localhost");
        return with_hash(json_response(200, super::describe::describe(&format!("http://{host}"))));
    }
    match refused_before_body(&state, &parts) {
        Some(Some(response)) => return with_hash(response),
        Some(None) => return no_answer().await,
        None => {}
    }
    let Ok(body) = axum::body::to_bytes(body, BODY_LIMIT_BYTES).await else {
        return with_hash(text(413, "Request body too large"));
    };
    // MAAS reads a form body either URL-encoded or as multipart/form-data (python-libmaas and the CLI send the latter).
    let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or("");
    let body_pairs = match multer::parse_boundary(content_type) {
        // python-libmaas sends a parameterless operation (commission, abort, delete) as the boundary, a blank line
        // and the closing boundary; Django reads that as an empty form.
        Ok(boundary) if super::is_empty_multipart(&body, &boundary) => Vec::new(),
        Ok(boundary) => match super::multipart_pairs(body.clone(), boundary).await {
            Ok(pairs) => pairs,
            Err(error) => return with_hash(text(400, format!("Malformed multipart body: {error}"))),
        },
        Err(_) => form_pairs(&body),
    };
    let authorization = parts.headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok());
    let call = Call {
        method: &parts.method,
        path: parts.uri.path(),
        query: parts.uri.query().unwrap_or(""),
        authorization,
        body: body_pairs,
    };
    match answer(&state, &call) {
        Some(response) => with_hash(response),
        None => no_answer().await,
    }
}

/// What the request gets before its body is read, from its headers alone: `Some(None)` no answer (the region is
/// unreachable), `Some(Some(_))` a 404 for an unknown path or the key's refusal, `None` read the body and answer.
fn refused_before_body(state: &MaasState, parts: &http::request::Parts) -> Option<Option<Response>> {
    let front = lock(&state.shared);
    if !front.site.region.is_reachable() {
        return Some(None);
    }
    if !known_endpoint(parts.uri.path()) {
        return Some(Some(text(404, format!("Unknown API endpoint: {}.", parts.uri.path()))));
    }
    let now_unix_ms = match &front.oauth_clock_unix_ms {
        Some(clock) => clock(),
        None => front.wire_epoch_unix_ms.saturating_add((state.clock)()),
    };
    let authorization = parts.headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok());
    authenticate(authorization, &front.api_keys, now_unix_ms).err().map(Some)
}

struct Call<'a> {
    method: &'a Method,
    path: &'a str,
    query: &'a str,
    authorization: Option<&'a str>,
    body: Vec<(String, String)>,
}

/// The whole request, synchronously, under the lock. `None`: the region gives no answer.
fn answer(state: &MaasState, call: &Call<'_>) -> Option<Response> {
    let mut front = lock(&state.shared);
    if !front.site.region.is_reachable() {
        return None;
    }
    // URL resolution comes before the handler's auth in MAAS (Django): an unknown path is 404 for anyone.
    if !known_endpoint(call.path) {
        return Some(text(404, format!("Unknown API endpoint: {}.", call.path)));
    }
    let now_unix_ms = match &front.oauth_clock_unix_ms {
        Some(clock) => clock(),
        None => front.wire_epoch_unix_ms.saturating_add((state.clock)()),
    };
    let caller = match authenticate(call.authorization, &front.api_keys, now_unix_ms) {
        Ok(user) => user,
        Err(response) => return Some(response),
    };
    let query = Params(form_pairs(call.query.as_bytes()));
    let body = Params(call.body.clone());
    if call.method == Method::GET
        && call.path.trim_end_matches('/') == format!("{API_PREFIX}machines")
        && query.get("op") == Some("power_parameters")
    {
        let now_ms = (state.clock)();
        let front = &mut *front;
        return Some(bulk_power_parameters(front, now_ms, &caller, &query.all("id")));
    }
    let request = match route(call.method, call.path, &query, &body) {
        Ok(Route::Model(request)) => request,
        Ok(Route::Version) => return Some(json_response(200, version())),
        Err(response) => return Some(response),
    };
    let now_ms = (state.clock)();
    let front = &mut *front;
    let response = front.site.handle_maas(now_ms, &caller, request, &mut front.events)?;
    Some(render(&front.site, front.wire_epoch_unix_ms, &query, response))
}

/// `GET machines/?op=power_parameters&id=a&id=b` (`PowersMixin.power_parameters`): the power parameters of each
/// machine named (of every machine when none is), as one object keyed by system id. An unknown id is skipped.
fn bulk_power_parameters(front: &mut super::SiteFront, now_ms: u64, caller: &str, ids: &[String]) -> Response {
    let ids: Vec<String> = if ids.is_empty() { front.site.region.system_ids() } else { ids.to_vec() };
    let mut all = serde_json::Map::new();
    for system_id in ids {
        let request = MaasRequest::PowerParameters { system_id: system_id.clone() };
        let Some(response) = front.site.handle_maas(now_ms, caller, request, &mut front.events) else {
            continue;
        };
        if let MaasBody::PowerParameters(parameters) = response.body {
            let value = match parameters {
                Some(parameters) => json!({
                    "power_address": parameters.power_address,
                    "power_user": parameters.power_user,
                    "power_pass": parameters.power_pass.expose(),
                }),
                None => json!({}),
            };
            all.insert(system_id, value);
        }
    }
    json_response(200, Value::Object(all))
}

// ---- auth ----------------------------------------------------------------------------------------------------------

/// The MAAS user of a valid `Authorization: OAuth ...` header.
fn authenticate(header: Option<&str>, keys: &[super::ApiKey], now_unix_ms: u64) -> Result<String, Response> {
    let unauthorized = || text(401, INVALID_API_KEY);
    let Some(rest) = header.map(str::trim_start).and_then(|header| header.strip_prefix("OAuth")) else {
        return Err(unauthorized());
    };
    let params = parse_auth_params(rest);
    let get = |key: &str| params.iter().find(|(name, _)| name == key).map(|(_, value)| value.as_str());
    let required = [
        "oauth_consumer_key",
        "oauth_token",
        "oauth_signature",
        "oauth_signature_method",
        "oauth_timestamp",
        "oauth_nonce",
    ];
    if required.iter().any(|key| get(key).is_none()) {
        return Err(unauthorized());
    }
    if get("oauth_timestamp").is_some_and(|timestamp| timestamp.parse::<i64>().is_err()) {
        // Deviation: the 400's body text was not read from MAAS; the fake names the parameter.
        return Err(text(400, "Invalid oauth_timestamp: not an integer"));
    }
    if get("oauth_signature_method") != Some("PLAINTEXT") {
        return Err(unauthorized());
    }
    // python-oauth's `OAuthServer._get_version`, which piston3 runs: a version other than 1.0 is refused.
    if let Some(version) = get("oauth_version").filter(|version| !version.is_empty() && *version != "1.0") {
        return Err(text(401, format!("Authorization Error: 'OAuth version {version} not supported.'")));
    }
    let consumer = get("oauth_consumer_key").unwrap_or_default();
    let token = get("oauth_token").unwrap_or_default();
    let signature = get("oauth_signature").unwrap_or_default();
    // python-oauth's `verify_request` order: the version, the consumer and token, then the timestamp, then the
    // signature. Deviation: nonces are not checked for replay.
    let key =
        keys.iter().find(|key| key.consumer_key == consumer && key.token_key == token).ok_or_else(unauthorized)?;
    // `OAuthServer._check_timestamp`: `lapsed = now - timestamp`, refused above 300 s (a timestamp from the future
    // passes, as there).
    let timestamp = get("oauth_timestamp").and_then(|timestamp| timestamp.parse::<i64>().ok()).unwrap_or_default();
    let now_s = i64::try_from(now_unix_ms / 1000).unwrap_or(i64::MAX);
    if now_s.saturating_sub(timestamp) > OAUTH_TIMESTAMP_THRESHOLD_S {
        return Err(text(
            401,
            format!(
                "Authorization Error: 'Expired timestamp: given {timestamp} and now {now_s} has a greater \
                 difference than threshold {OAUTH_TIMESTAMP_THRESHOLD_S}'"
            ),
        ));
    }
    if signature.strip_prefix('&') != Some(key.token_secret.expose()) {
        return Err(unauthorized());
    }
    Ok(key.user.clone())
}

/// `parse_auth_params`: split on `,`, then on the first `=`; trim, strip quotes, percent-decode. A pair whose value
/// does not decode is dropped (the header is then missing that parameter).
fn parse_auth_params(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|pair| {
            let (name, value) = pair.split_once('=')?;
            let value = value.trim().trim_matches('"');
            Some((name.trim().to_owned(), super::percent_decode(value)?))
        })
        .collect()
}

// ---- requests ------------------------------------------------------------------------------------------------------

/// Form or query parameters, in order, repeated keys kept.
struct Params(Vec<(String, String)>);

impl Params {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(name, _)| name == key).map(|(_, value)| value.as_str())
    }

    fn all(&self, key: &str) -> Vec<String> {
        self.0.iter().filter(|(name, _)| name == key).map(|(_, value)| value.clone()).collect()
    }

    fn owned(&self, key: &str) -> Option<String> {
        self.get(key).map(str::to_owned)
    }

    /// Django's `BooleanField` reading of a form value; absent: `default`.
    fn flag(&self, key: &str, default: bool) -> Result<bool, Response> {
        match self.get(key).map(str::to_ascii_lowercase).as_deref() {
            None => Ok(default),
            Some("true" | "1" | "on" | "yes") => Ok(true),
            Some("false" | "0" | "off" | "no" | "") => Ok(false),
            Some(_) => Err(form_error(key, "Enter a valid boolean value.")),
        }
    }

    fn required(&self, key: &str) -> Result<&str, Response> {
        self.get(key).filter(|value| !value.is_empty()).ok_or_else(|| form_error(key, "This field is required."))
    }
}

enum Route {
    Model(MaasRequest),
    Version,
}

/// Decodes method, path and parameters into a model request, or the error MAAS answers.
fn route(method: &Method, path: &str, query: &Params, body: &Params) -> Result<Route, Response> {
    let unknown_endpoint = || text(404, format!("Unknown API endpoint: {path}."));
    let Some(rest) = path.strip_prefix(API_PREFIX) else { return Err(unknown_endpoint()) };
    let segments: Vec<&str> = rest.split('/').filter(|segment| !segment.is_empty()).collect();
    // `op` comes from the query string, else from the form body (piston's `request.GET` / `request.POST`).
    let op = query.get("op").or_else(|| body.get("op"));
    let unrecognised = || text(400, format!("Unrecognised signature: method={method} op={}", op.unwrap_or("None")));
    let params = if method == Method::GET || method == Method::DELETE { query } else { body };
    let model = |request: MaasRequest| Ok(Route::Model(request));
    match (segments.as_slice(), method.as_str(), op) {
        (["version"], "GET", None) => Ok(Route::Version),
        (["machines"], "GET", None) => {
            let status = match params.get("status") {
                None => None,
                Some(label) => Some(
                    NodeStatus::ALL
                        .into_iter()
                        .find(|status| status.short_label() == label)
                        // Deviation: the filter form's exact text for an unknown status was not read.
                        .ok_or_else(|| form_error("status", &format!("Invalid status: {label}")))?,
                ),
            };
            model(MaasRequest::ListMachines {
                hostname: params.owned("hostname"),
                mac_address: params.owned("mac_address"),
                status,
            })
        }
        (["machines"], "POST", None) => model(MaasRequest::CreateMachine(create_machine(params)?)),
        (["machines", system_id], _, _) => {
            let system_id = (*system_id).to_owned();
            machine_op(method, op, system_id, params).ok_or_else(unrecognised)?.map(Route::Model)
        }
        (["nodes", system_id, "interfaces"], "GET", None) => {
            model(MaasRequest::ListInterfaces { system_id: (*system_id).to_owned() })
        }
        (["nodes", system_id, "interfaces", interface_id], "POST", Some(op)) => {
            let system_id = (*system_id).to_owned();
            let interface_id = object_id(interface_id, "Interface")?;
            match op {
                "link_subnet" => {
                    let mode = params.required("mode")?.to_owned();
                    let subnet_id = params
                        .required("subnet")?
                        .parse::<u64>()
                        // Deviation: MAAS also accepts a subnet's CIDR here; the fake takes its id only.
                        .map_err(|_| {
                            form_error(
                                "subnet",
                                "Select a valid choice. That choice is not one of the available choices.",
                            )
                        })?;
                    let ip_address = params.owned("ip_address");
                    model(MaasRequest::LinkSubnet { system_id, interface_id, mode, subnet_id, ip_address })
                }
                "disconnect" => model(MaasRequest::DisconnectInterface { system_id, interface_id }),
                _ => Err(unrecognised()),
            }
        }
        (["nodes", system_id, "blockdevices"], "GET", None) => {
            model(MaasRequest::ListBlockDevices { system_id: (*system_id).to_owned() })
        }
        (["nodes", system_id, "blockdevices", device_id], "POST", Some("set_boot_disk")) => {
            let block_device_id = object_id(device_id, "BlockDevice")?;
            model(MaasRequest::SetBootDisk { system_id: (*system_id).to_owned(), block_device_id })
        }
        (["subnets"], "GET", None) => model(MaasRequest::ListSubnets),
        (["regioncontrollers"], "GET", None) => model(MaasRequest::ListRegionControllers),
        (["subnets", id], "GET", None) => model(MaasRequest::ReadSubnet { id: object_id(id, "Subnet")? }),
        (["vlans", id], "GET", None) => model(MaasRequest::ReadVlan { id: object_id(id, "VLAN")? }),
        // Deviation: real MAAS updates a VLAN at `/fabrics/{fabric}/vlans/{vid}/`; the fake takes the VLAN's id
        // here and only its `mtu`.
        (["vlans", id], "PUT", None) => {
            let id = object_id(id, "VLAN")?;
            let mtu = params
                .required("mtu")?
                .parse::<u16>()
                .map_err(|_| form_error("mtu", "Ensure this value is less than or equal to 65535."))?;
            model(MaasRequest::UpdateVlan { id, mtu })
        }
        (["events"], "GET", Some("query")) => model(MaasRequest::QueryEvents(events_query(params)?)),
        _ if !known_endpoint(path) => Err(unknown_endpoint()),
        (_, "GET" | "POST" | "PUT", _) => Err(unrecognised()),
        _ => Err(text(405, "Method Not Allowed")),
    }
}

/// Whether `path` is one of the API's resources (whatever the method and op).
fn known_endpoint(path: &str) -> bool {
    let Some(rest) = path.strip_prefix(API_PREFIX) else { return false };
    let segments: Vec<&str> = rest.split('/').filter(|segment| !segment.is_empty()).collect();
    matches!(
        segments.as_slice(),
        ["version"]
            | ["machines"]
            | ["machines", _]
            | ["nodes", _, "interfaces" | "blockdevices"]
            | ["nodes", _, "interfaces" | "blockdevices", _]
            | ["subnets"]
            | ["subnets", _]
            | ["vlans", _]
            | ["regioncontrollers"]
            | ["events"]
    )
}

/// A request on `/machines/{system_id}/`; `None`: no such signature.
fn machine_op(
    method: &Method,
    op: Option<&str>,
    system_id: String,
    params: &Params,
) -> Option<Result<MaasRequest, Response>> {
    let comment = params.owned("comment");
    let request = match (method.as_str(), op) {
        ("GET", None) => Ok(MaasRequest::ReadMachine { system_id }),
        ("GET", Some("query_power_state")) => Ok(MaasRequest::QueryPowerState { system_id }),
        ("GET", Some("power_parameters")) => Ok(MaasRequest::PowerParameters { system_id }),
        ("DELETE", None) => Ok(MaasRequest::DeleteMachine { system_id }),
        // Deviation: the fake's PUT changes the power settings only, and needs `power_type` (real MAAS updates any
        // field given and keeps the rest).
        ("PUT", None) => params.required("power_type").map(|power_type| MaasRequest::UpdatePowerParameters {
            system_id,
            power_type: power_type.to_owned(),
            power_parameters: power_parameters(params),
        }),
        ("POST", Some("commission")) => Ok(MaasRequest::Commission { system_id }),
        ("POST", Some("deploy")) => params.flag("enable_hw_sync", false).map(|enable_hw_sync| MaasRequest::Deploy {
            system_id,
            distro_series: params.owned("distro_series"),
            // Base64 as clients send it; the model decodes it as MAAS's `prepare_user_data` does.
            user_data: params.get("user_data").map(Secret::new),
            enable_hw_sync,
        }),
        ("POST", Some("release")) => {
            params.flag("erase", false).map(|erase| MaasRequest::Release { system_id, comment, erase })
        }
        ("POST", Some("abort")) => Ok(MaasRequest::Abort { system_id, comment }),
        ("POST", Some("mark_broken")) => {
            let comment = comment.or_else(|| params.owned("error_description"));
            Ok(MaasRequest::MarkBroken { system_id, comment })
        }
        ("POST", Some("mark_fixed")) => Ok(MaasRequest::MarkFixed { system_id, comment }),
        ("POST", Some("power_on")) => Ok(MaasRequest::PowerOn { system_id }),
        ("POST", Some("power_off")) => Ok(MaasRequest::PowerOff { system_id }),
        _ => return None,
    };
    Some(request)
}

/// `power_parameters_<name>` keys. Deviation: the one-JSON-string `power_parameters` form is not read.
fn power_parameters(params: &Params) -> PowerParameters {
    PowerParameters {
        power_address: params.owned("power_parameters_power_address").unwrap_or_default(),
        power_user: params.owned("power_parameters_power_user").unwrap_or_default(),
        power_pass: Secret::new(params.get("power_parameters_power_pass").unwrap_or_default()),
    }
}

/// `POST machines/`, validated as MAAS's machine form validates it; every field's errors at once, as Django's
/// form errors are (`{"hostname": [...], "mac_addresses": [...]}`).
fn create_machine(params: &Params) -> Result<CreateMachine, Response> {
    let mut errors = serde_json::Map::new();
    let mut error = |field: &str, message: String| {
        if let Some(list) = errors.entry(field.to_owned()).or_insert_with(|| json!([])).as_array_mut() {
            list.push(json!(message));
        }
    };
    let architecture = match params.get("architecture").filter(|value| !value.is_empty()) {
        None => {
            error("architecture", "This field is required.".to_owned());
            String::new()
        }
        // `fix_architecture`: a value without a subarchitecture gets `/generic`.
        Some(value) if !value.contains('/') => format!("{value}/generic"),
        Some(value) => value.to_owned(),
    };
    if !architecture.is_empty() && !ARCHITECTURES.contains(&architecture.as_str()) {
        error("architecture", format!("Select a valid choice. {architecture} is not one of the available choices."));
    }
    let mac_addresses = params.all("mac_addresses");
    if mac_addresses.iter().all(String::is_empty) {
        error("mac_addresses", "This field is required.".to_owned());
    } else {
        let invalid: Vec<&String> = mac_addresses.iter().filter(|mac| !is_mac_address(mac)).collect();
        // `WithMACAddressesMixin.is_valid`: one message per bad MAC, or one for all when several were sent.
        match (invalid.as_slice(), mac_addresses.len()) {
            ([], _) => {}
            ([mac], 1) => error("mac_addresses", format!("'{mac}' is not a valid MAC address.")),
            _ => error("mac_addresses", "One or more MAC addresses is invalid.".to_owned()),
        }
    }
    let hostname = params.owned("hostname").filter(|hostname| !hostname.is_empty());
    if let Some(message) = hostname.as_deref().and_then(hostname_error) {
        error("hostname", message);
    }
    let power_type = params.owned("power_type").unwrap_or_default();
    if !power_type.is_empty() && !POWER_TYPES.contains(&power_type.as_str()) {
        error("power_type", format!("Select a valid choice. {power_type} is not one of the available choices."));
    }
    let commission = match params.flag("commission", true) {
        Ok(commission) => commission,
        Err(_) => {
            error("commission", "Enter a valid boolean value.".to_owned());
            true
        }
    };
    if !errors.is_empty() {
        return Err(json_response(400, Value::Object(errors)));
    }
    Ok(CreateMachine {
        hostname,
        architecture,
        mac_addresses,
        power_type,
        power_parameters: power_parameters(params),
        commission,
    })
}

/// The architectures the fake region has boot images for (MAAS offers only those: `list_all_usable_architectures`).
pub const ARCHITECTURES: &[&str] =
    &["amd64/generic", "amd64/hwe-22.04", "amd64/ga-22.04", "arm64/generic", "arm64/xgene-uboot", "i386/generic"];

/// The power drivers MAAS registers (`provisioningserver/drivers/power/registry.py`); the fake drives every one
/// but `manual` through its Redfish BMC.
pub const POWER_TYPES: &[&str] = &[
    "amt", "apc", "dli", "eaton", "hmc", "hmcz", "ipmi", "lxd", "manual", "moonshot", "mscm", "msftocs", "nova",
    "openbmc", "proxmox", "recs_box", "redfish", "sm15k", "ucsm", "vmware", "webhook", "wedge", "virsh",
];

/// MAAS's MAC field: six hex pairs separated by `:` or `-` (surrounding blanks allowed), or the bare 12 hex digits
/// and the dotted Cisco form netaddr also reads.
fn is_mac_address(text: &str) -> bool {
    let text = text.trim();
    let hex = |part: &str, len: usize| part.len() == len && part.bytes().all(|byte| byte.is_ascii_hexdigit());
    let separated = |separator: char| {
        let parts: Vec<&str> = text.split(separator).collect();
        parts.len() == 6 && parts.iter().all(|part| hex(part, 2))
    };
    let dotted = || {
        let parts: Vec<&str> = text.split('.').collect();
        parts.len() == 3 && parts.iter().all(|part| hex(part, 4))
    };
    separated(':') || separated('-') || dotted() || hex(text, 12)
}

/// `maasserver.utils.dns.validate_hostname`: the error MAAS's form gives a hostname, if any.
fn hostname_error(hostname: &str) -> Option<String> {
    if hostname.len() > 255 {
        return Some("Hostname is too long.  Maximum allowed is 255 characters.".to_owned());
    }
    let host_part = hostname.split('.').next().unwrap_or_default();
    if host_part.contains('_') {
        return Some(format!("Host label cannot contain underscore: {}.", python_repr(host_part)));
    }
    for label in hostname.split('.') {
        if label.is_empty() {
            return Some("DNS name contains an empty label.".to_owned());
        }
        if label.chars().count() > 63 {
            return Some(format!("Label is too long: {}.  Maximum allowed is 63 characters.", python_repr(label)));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some(format!("Label cannot start or end with hyphen: {}.", python_repr(label)));
        }
        if !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Some(format!("Label contains disallowed characters: {}.", python_repr(label)));
        }
    }
    None
}

/// Python's `%r` of a str: single quotes, unless the text holds one and no double quote.
fn python_repr(text: &str) -> String {
    if text.contains('\'') && !text.contains('"') {
        format!("\"{text}\"")
    } else {
        format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
    }
}

/// `GET /events/?op=query` parameters. Deviation: the texts of a non-integer `limit`, `after` or `before` were not
/// read from MAAS.
fn events_query(params: &Params) -> Result<EventsQuery, Response> {
    let level = match params.get("level") {
        None => None,
        Some(level) => Some(EventLevel::parse(level).map_err(|message| text(400, message))?),
    };
    let number = |key: &str| -> Result<Option<i64>, Response> {
        params
            .get(key)
            .map(|value| value.parse::<i64>().map_err(|_| text(400, format!("Invalid {key}: {value}"))))
            .transpose()
    };
    let id = |key: &str| -> Result<Option<u64>, Response> {
        number(key)?
            .map(|value| u64::try_from(value).map_err(|_| text(400, format!("Invalid {key}: {value}"))))
            .transpose()
    };
    Ok(EventsQuery {
        system_id: params.owned("id"),
        hostname: params.owned("hostname"),
        level,
        limit: number("limit")?,
        before: id("before")?,
        after: id("after")?,
    })
}

/// A numeric object id in a path; anything else is MAAS's 404 for that object kind.
fn object_id(segment: &str, kind: &str) -> Result<u64, Response> {
    segment.parse().map_err(|_| text(404, format!("No {kind} matches the given query.")))
}

/// Deviation: `GET /version/` is answered by the front end, not the region model.
fn version() -> Value {
    json!({
        "capabilities": ["networks-management", "static-ipaddresses", "ipv6-deployment-ubuntu", "devices-management",
                         "storage-deployment-ubuntu", "network-deployment-ubuntu", "bridging-interface-ubuntu",
                         "bridging-automatic-ubuntu", "authenticate-api"],
        "version": "3.5.0",
        "subversion": "fleetsim-fake",
    })
}

// ---- responses -----------------------------------------------------------------------------------------------------

fn render(site: &Site, epoch_unix_ms: u64, query: &Params, response: MaasResponse) -> Response {
    let status = response.status;
    let mut http = match response.body {
        MaasBody::Machine(view) => json_response(status, machine_json_at(site, epoch_unix_ms, &view)),
        MaasBody::Machines(views) => json_response(
            status,
            Value::Array(views.iter().map(|view| machine_json_at(site, epoch_unix_ms, view)).collect()),
        ),
        MaasBody::PowerState { state } => json_response(status, json!({ "state": state })),
        MaasBody::PowerParameters(parameters) => json_response(
            status,
            match parameters {
                Some(parameters) => json!({
                    "power_address": parameters.power_address,
                    "power_user": parameters.power_user,
                    "power_pass": parameters.power_pass.expose(),
                }),
                None => json!({}),
            },
        ),
        MaasBody::Interfaces(views) => {
            json_response(status, Value::Array(views.iter().map(|view| interface_json(site, view)).collect()))
        }
        MaasBody::Interface(view) => json_response(status, interface_json(site, &view)),
        MaasBody::BlockDevices(devices) => {
            // Deviation: the fake's block devices do not carry their machine; `system_id` is left out.
            json_response(status, Value::Array(devices.iter().map(|device| block_device_json(None, device)).collect()))
        }
        MaasBody::Subnets(views) => {
            json_response(status, Value::Array(views.iter().filter_map(|view| subnet_json(site, view.id)).collect()))
        }
        MaasBody::Subnet(view) => json_response(status, subnet_json(site, view.id).unwrap_or(Value::Null)),
        MaasBody::RegionControllers(controllers) => json_response(
            status,
            Value::Array(
                controllers
                    .iter()
                    .map(|controller| {
                        let services: Vec<Value> = controller
                            .service_set
                            .iter()
                            .map(|s| json!({"name": s.name, "status": s.status, "status_info": s.status_info}))
                            .collect();
                        json!({
                            "system_id": controller.system_id,
                            "hostname": controller.hostname,
                            "node_type": 3,
                            "node_type_name": "Region controller",
                            "service_set": services,
                            "resource_uri": format!("/MAAS/api/2.0/regioncontrollers/{}/", controller.system_id),
                        })
                    })
                    .collect(),
            ),
        ),
        MaasBody::Vlan(vlan) => json_response(status, vlan_json(&vlan)),
        MaasBody::Events(page) => json_response(status, events_json(epoch_unix_ms, &page, query)),
        MaasBody::Text(message) => text(status, message),
        MaasBody::FormErrors(errors) => json_response(status, json!(errors)),
        MaasBody::Empty => empty(status),
    };
    if let Some(seconds) = response.retry_after_s {
        http.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    http
}

/// The machine object with MAAS's field names (`DISPLAYED_MACHINE_FIELDS`, the ones the fake models).
pub fn machine_json(site: &Site, view: &MachineView) -> Value {
    machine_json_at(site, super::WIRE_EPOCH * 1000, view)
}

/// [`machine_json`] with its datetimes on a time line whose `now_ms = 0` is `epoch_unix_ms`.
pub fn machine_json_at(site: &Site, epoch_unix_ms: u64, view: &MachineView) -> Value {
    let system_id = &view.system_id;
    json!({
        "system_id": system_id,
        "hostname": view.hostname,
        // Deviation: every machine is in MAAS's default domain `maas`.
        "fqdn": format!("{}.maas", view.hostname),
        "domain": {
            "id": 0,
            "name": "maas",
            "authoritative": true,
            "ttl": null,
            "resource_record_count": 0,
            "is_default": true,
            "resource_uri": "/MAAS/api/2.0/domains/0/",
        },
        // Deviation: every machine is in MAAS's default zone and pool.
        "zone": { "id": 1, "name": "default", "description": "", "resource_uri": "/MAAS/api/2.0/zones/default/" },
        "pool": { "id": 0, "name": "default", "description": "Default pool", "resource_uri": "/MAAS/api/2.0/resourcepool/0/" },
        "architecture": view.architecture,
        "status": view.status,
        "status_name": view.status_name,
        "status_message": view.status_message,
        "owner": view.owner,
        "power_type": view.power_type,
        "power_state": view.power_state,
        "osystem": view.osystem,
        "distro_series": view.distro_series,
        "netboot": view.netboot,
        "locked": view.locked,
        "error_description": view.error_description,
        "cpu_count": view.cpu_count,
        "memory": view.memory,
        "ip_addresses": view.ip_addresses,
        "boot_interface": view.boot_interface.as_ref().map(|iface| interface_json(site, iface)),
        "interface_set": view.interface_set.iter().map(|iface| interface_json(site, iface)).collect::<Vec<_>>(),
        "boot_disk": view.boot_disk.as_ref().map(|disk| block_device_json(Some(system_id), disk)),
        "blockdevice_set":
            view.blockdevice_set.iter().map(|disk| block_device_json(Some(system_id), disk)).collect::<Vec<_>>(),
        "physicalblockdevice_set":
            view.blockdevice_set.iter().map(|disk| block_device_json(Some(system_id), disk)).collect::<Vec<_>>(),
        "commissioning_status": view.commissioning_status,
        "commissioning_status_name": view.commissioning_status_name,
        "enable_hw_sync": view.enable_hw_sync,
        "sync_interval": view.sync_interval,
        "last_sync": view.last_sync_ms.map(|ms| iso_datetime_at(epoch_unix_ms, ms)),
        "next_sync": view.next_sync_ms.map(|ms| iso_datetime_at(epoch_unix_ms, ms)),
        "node_type": 0,
        "node_type_name": "Machine",
        "resource_uri": format!("{API_PREFIX}machines/{system_id}/"),
    })
}

fn interface_json(site: &Site, view: &InterfaceView) -> Value {
    json!({
        "system_id": view.system_id,
        "id": view.id,
        "name": view.name,
        "type": view.interface_type,
        "mac_address": view.mac_address,
        "vlan": view.vlan.as_ref().map(vlan_json),
        "links": view.links.iter().map(|link| link_json(site, link)).collect::<Vec<_>>(),
        "tags": view.tags,
        "enabled": view.enabled,
        "effective_mtu": view.effective_mtu,
        "params": {},
        "parents": [],
        "children": [],
        "resource_uri": format!("{API_PREFIX}nodes/{}/interfaces/{}/", view.system_id, view.id),
    })
}

fn link_json(site: &Site, link: &Link) -> Value {
    let mut value = json!({
        "id": link.id,
        "mode": link.mode,
        "subnet": subnet_json(site, link.subnet_id),
    });
    if let (Some(address), Some(object)) = (&link.ip_address, value.as_object_mut()) {
        object.insert("ip_address".to_owned(), json!(address));
    }
    value
}

fn vlan_json(vlan: &Vlan) -> Value {
    json!({
        "id": vlan.id,
        "name": vlan.name,
        "vid": vlan.vid,
        "fabric": format!("fabric-{}", vlan.fabric_id),
        "fabric_id": vlan.fabric_id,
        "mtu": vlan.mtu,
        "dhcp_on": vlan.dhcp_on,
        "external_dhcp": null,
        "primary_rack": null,
        "secondary_rack": null,
        "relay_vlan": null,
        "space": "undefined",
        "resource_uri": format!("{API_PREFIX}vlans/{}/", vlan.id),
    })
}

fn subnet_json(site: &Site, subnet_id: u64) -> Option<Value> {
    let subnet = site.region.subnets().find(|subnet| subnet.id == subnet_id)?;
    let vlan = site.region.vlan(subnet.vlan_id)?;
    Some(json!({
        "id": subnet.id,
        "name": subnet.name,
        "description": "",
        "vlan": vlan_json(vlan),
        "cidr": subnet.cidr,
        "gateway_ip": subnet.gateway_ip,
        "dns_servers": subnet.dns_servers,
        "space": "undefined",
        "rdns_mode": 2,
        "active_discovery": false,
        "allow_dns": true,
        "allow_proxy": true,
        "managed": true,
        "disabled_boot_architectures": [],
        "resource_uri": format!("{API_PREFIX}subnets/{}/", subnet.id),
    }))
}

fn block_device_json(system_id: Option<&str>, device: &BlockDevice) -> Value {
    let mut value = json!({
        "id": device.id,
        "name": device.name,
        "model": device.model,
        "serial": device.serial,
        "size": device.size,
        "block_size": 512,
        "type": device.device_type,
        "path": device.path,
        // MAAS's `id_path` is the stable /dev/disk/by-id path; the fake derives it from the model and serial.
        "id_path": format!("/dev/disk/by-id/{}", by_id_name(&device.model, &device.serial)),
        "uuid": null,
        "tags": device.tags,
        "partitions": [],
        "filesystem": null,
    });
    if let (Some(system_id), Some(object)) = (system_id, value.as_object_mut()) {
        object.insert("system_id".to_owned(), json!(system_id));
        object.insert(
            "resource_uri".to_owned(),
            json!(format!("{API_PREFIX}nodes/{system_id}/blockdevices/{}/", device.id)),
        );
    }
    value
}

/// The `/dev/disk/by-id/` name udev gives a disk: `<bus>-<model>_<serial>` with blanks made `_`.
fn by_id_name(model: &str, serial: &str) -> String {
    let clean = |text: &str| {
        text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect::<String>()
    };
    format!("nvme-{}_{}", clean(model), clean(serial))
}

fn event_json(epoch_unix_ms: u64, event: &EventRecord) -> Value {
    json!({
        "username": event.username,
        "node": event.node,
        "hostname": event.hostname,
        "id": event.id,
        "level": event.level.name(),
        "created": maas_event_created_at(epoch_unix_ms, event.created_ms),
        "type": event.event_type,
        "description": event.description,
    })
}

/// The page with `next_uri` (`after=<newest id>`) and `prev_uri` (`before=<oldest id>`, or null), keeping the
/// request's other parameters in their order.
///
/// Deviation: when the page is empty and no `after` was asked, `next_uri` carries `after=0` (the oldest events next).
fn events_json(epoch_unix_ms: u64, page: &EventsPage, query: &Params) -> Value {
    let uri = |key: &str, value: u64| {
        let mut serializer = form_urlencoded::Serializer::new(String::new());
        serializer.append_pair("op", "query");
        for (name, value) in &query.0 {
            if !matches!(name.as_str(), "op" | "after" | "before") {
                serializer.append_pair(name, value);
            }
        }
        serializer.append_pair(key, &value.to_string());
        format!("{API_PREFIX}events/?{}", serializer.finish())
    };
    json!({
        "count": page.count,
        "events": page.events.iter().map(|event| event_json(epoch_unix_ms, event)).collect::<Vec<_>>(),
        "next_uri": uri("after", page.next_after.unwrap_or(0)),
        "prev_uri": page.prev_before.map(|before| uri("before", before)),
    })
}

fn text(status: u16, message: impl Into<String>) -> Response {
    let mut response = Response::new(Body::from(message.into()));
    *response.status_mut() = status_code(status);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

fn json_response(status: u16, value: Value) -> Response {
    let mut response = Response::new(Body::from(value.to_string()));
    *response.status_mut() = status_code(status);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn form_error(field: &str, message: &str) -> Response {
    json_response(400, json!({ field: [message] }))
}

fn empty(status: u16) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status_code(status);
    response
}

fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn with_hash(mut response: Response) -> Response {
    response.headers_mut().insert("x-maas-api-hash", HeaderValue::from_static(API_HASH));
    response
}
