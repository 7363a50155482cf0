//! The real MAAS adapter: [`MaasClient`] implements [`MaasApi`] against the MAAS region's REST API 2.0
//! (`/MAAS/api/2.0/`, `reference/maas-api-notes.md` §2–§4), through any [`HttpTransport`].
//!
//! Every request is signed with OAuth 1.0 PLAINTEXT ([`super::oauth`]), a fresh deterministic nonce and the clock's
//! time; operations go in `?op=`, bodies are `application/x-www-form-urlencoded` with repeated keys. Answers are
//! decoded into private wire structs (only the fields the port needs; serde ignores the rest), then into the port's
//! types, exactly as the simulator's in-process adapter (`sim::site::SimMaas`) reads the fake's model:
//! - a machine's `power_address` comes from `?op=power_parameters` (the machine JSON carries no power parameters):
//!   one bulk call for [`MaasApi::machines`], one call for [`MaasApi::machine`];
//! - `hw_sync_healthy` is derived here (the REST API has no `is_sync_healthy`, only the websocket handler does):
//!   `enable_hw_sync and last_sync and sync_interval and now <= last_sync + 1.5 × sync_interval`;
//! - disks are the machine's `boot_disk` plus `GET nodes/{id}/blockdevices/`;
//! - events are `op=query` with `level=DEBUG`, `limit=1000` and `after`.
//!
//! Errors: a non-2xx answer is [`MaasError::Http`] with the status, the text body (or a JSON form-error dict
//! rendered `field: msg; field2: msg`) and `Retry-After`; a transport failure is [`MaasError::Transport`]; a 2xx
//! whose body does not decode is `Http { status, "unexpected answer body: ..." }`, which names the op and where the
//! decoder stopped, never the body. API Boundary: no secret (token secret, power password, user-data) reaches a log
//! line or an error text: the log lines carry the op and the status only.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::oauth::{ApiKey, HeaderStyle, NonceSource, authorization_header, percent_escape};
use super::{HttpRequest, HttpResponse, HttpTransport, Method};
use crate::ports::Clock;
use crate::ports::site::{
    Disk, Interface, MaasApi, MaasError, MaasEvent, Machine, MachineStatus, NewMachine, PowerState, RegionService,
    Subnet,
};
use crate::secret::Secret;

pub use super::oauth::ApiKeyError;

/// The API's root on the region (the `/MAAS` prefix is the deployment's, as every `resource_uri` shows).
pub const API_ROOT: &str = "/MAAS/api/2.0/";
/// The events query's hard limit (more is a 400).
pub const EVENTS_LIMIT_MAX: u32 = 1000;

/// What the port's "VLAN vid" carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum VlanNumber {
    /// The VLAN's MAAS id (`vlan.id`). Deviation (adapter), the same as the simulator's in-process adapter: the
    /// fake's two VLANs are both untagged (vid 0) on separate fabrics, so the site names them by their MAAS ids
    /// (5001 metal-admin, 5002 RoCE), unique on the site.
    #[default]
    MaasId,
    /// The 802.1Q tag (`vlan.vid`), for a site whose VLANs are tagged.
    Vid,
}

/// The MAAS region API over HTTP. Not `Sync` (the nonce counter is a `Cell`): the engine runs on one thread.
pub struct MaasClient<T: HttpTransport, C: Clock> {
    transport: T,
    clock: C,
    key: ApiKey,
    style: HeaderStyle,
    nonces: NonceSource,
    call_timeout_ms: u64,
    clock_origin_unix_ms: u64,
    vlan_number: VlanNumber,
}

impl<T: HttpTransport, C: Clock> fmt::Debug for MaasClient<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaasClient")
            .field("key", &self.key)
            .field("style", &self.style)
            .field("call_timeout_ms", &self.call_timeout_ms)
            .field("clock_origin_unix_ms", &self.clock_origin_unix_ms)
            .field("vlan_number", &self.vlan_number)
            .finish_non_exhaustive()
    }
}

impl<T: HttpTransport, C: Clock> MaasClient<T, C> {
    /// A client signing with `api_key` (`consumer_key:token_key:token_secret`) in the quoted header style, its
    /// nonces derived from `nonce_seed`, each call bounded by `call_timeout_ms`.
    pub fn new(
        transport: T,
        clock: C,
        api_key: &Secret,
        nonce_seed: u64,
        call_timeout_ms: u64,
    ) -> Result<MaasClient<T, C>, ApiKeyError> {
        Ok(MaasClient {
            transport,
            clock,
            key: ApiKey::parse(api_key)?,
            style: HeaderStyle::default(),
            nonces: NonceSource::new(nonce_seed),
            call_timeout_ms,
            clock_origin_unix_ms: 0,
            vlan_number: VlanNumber::default(),
        })
    }

    /// The `Authorization` header's spelling (default [`HeaderStyle::Quoted`]).
    pub fn with_header_style(mut self, style: HeaderStyle) -> MaasClient<T, C> {
        self.style = style;
        self
    }

    /// The Unix time, in ms, at which `clock.now_ms()` reads 0: 0 for a host clock (the default); the fake's epoch
    /// (2026-01-01T00:00:00Z) for a simulated clock that starts at 0. Used for `oauth_timestamp` and to judge
    /// `last_sync` (an absolute datetime on the wire) against now.
    pub fn with_clock_origin_unix_ms(mut self, origin_unix_ms: u64) -> MaasClient<T, C> {
        self.clock_origin_unix_ms = origin_unix_ms;
        self
    }

    /// What [`Interface::vlan_vid`] and [`Subnet::vlan_vid`] carry (default [`VlanNumber::MaasId`]).
    pub fn with_vlan_number(mut self, vlan_number: VlanNumber) -> MaasClient<T, C> {
        self.vlan_number = vlan_number;
        self
    }

    fn now_unix_ms(&self) -> u64 {
        self.clock_origin_unix_ms.saturating_add(self.clock.now_ms())
    }

    /// One signed request; a non-2xx answer becomes [`MaasError::Http`].
    async fn call(&self, op: &'static str, method: Method, path_and_query: String, form: Option<Form>) -> Answer {
        let timestamp_s = self.now_unix_ms() / 1000;
        let authorization = authorization_header(&self.key, self.style, &self.nonces.next_nonce(), timestamp_s);
        let mut request = HttpRequest::new(method, path_and_query)
            .header("authorization", authorization)
            .header("accept", "application/json");
        if let Some(form) = form {
            request = request.header("content-type", "application/x-www-form-urlencoded").body(form.finish());
        }
        let response = match self.transport.send(request, self.call_timeout_ms).await {
            Ok(response) => response,
            Err(error) => {
                tracing::debug!(op, error = %error, "maas call failed");
                return Err(MaasError::Transport(error));
            }
        };
        tracing::debug!(op, status = response.status, "maas answered");
        if (200..300).contains(&response.status) { Ok(response) } else { Err(http_error(&response)) }
    }

    async fn get<W: DeserializeOwned>(&self, op: &'static str, path_and_query: String) -> Result<W, MaasError> {
        let response = self.call(op, Method::Get, path_and_query, None).await?;
        decode(op, &response)
    }

    async fn post_machine_op(&self, op: &'static str, system_id: &str, form: Form) -> Result<Machine, MaasError> {
        let response = self.call(op, Method::Post, machine_op_path(system_id, op), Some(form)).await?;
        let wire: MachineWire = decode(op, &response)?;
        // The op's answer carries no power parameters, and a second read after a mutation could turn a done
        // mutation into an error: see `Machine::power_address` in the module docs.
        self.machine_from_wire(op, wire, None, response.status)
    }

    fn machine_from_wire(
        &self,
        op: &'static str,
        wire: MachineWire,
        power_address: Option<String>,
        status: u16,
    ) -> Result<Machine, MaasError> {
        let hw_sync_healthy = match wire.hw_sync_healthy(self.now_unix_ms()) {
            Ok(healthy) => healthy,
            Err(why) => return Err(unexpected_body(op, status, &why)),
        };
        let mut macs: Vec<String> = Vec::new();
        for iface in wire.boot_interface.iter().chain(&wire.interface_set) {
            let mac = iface.mac_address.clone().unwrap_or_default().to_ascii_lowercase();
            if !mac.is_empty() && !macs.contains(&mac) {
                macs.push(mac);
            }
        }
        Ok(Machine {
            status: MachineStatus::from_code(wire.status, &wire.status_name),
            system_id: wire.system_id,
            hostname: wire.hostname,
            status_message: wire.status_message.unwrap_or_default(),
            power_address,
            macs,
            enable_hw_sync: wire.enable_hw_sync.unwrap_or(false),
            hw_sync_healthy,
        })
    }

    fn vlan_number(&self, vlan: &VlanWire) -> u16 {
        match self.vlan_number {
            VlanNumber::MaasId => u16::try_from(vlan.id).unwrap_or(u16::MAX),
            VlanNumber::Vid => vlan.vid,
        }
    }
}

type Answer = Result<HttpResponse, MaasError>;

/// A form body (`application/x-www-form-urlencoded`), keys repeated where MAAS takes several values.
struct Form(form_urlencoded::Serializer<'static, String>);

impl Form {
    fn new() -> Form {
        Form(form_urlencoded::Serializer::new(String::new()))
    }

    fn field(mut self, name: &str, value: &str) -> Form {
        self.0.append_pair(name, value);
        self
    }

    fn finish(mut self) -> Vec<u8> {
        self.0.finish().into_bytes()
    }
}

fn query(pairs: &[(&str, &str)]) -> String {
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        serializer.append_pair(name, value);
    }
    serializer.finish()
}

fn machine_path(system_id: &str) -> String {
    format!("{API_ROOT}machines/{}/", percent_escape(system_id))
}

fn machine_op_path(system_id: &str, op: &str) -> String {
    format!("{}?{}", machine_path(system_id), query(&[("op", op)]))
}

fn node_path(system_id: &str) -> String {
    format!("{API_ROOT}nodes/{}/", percent_escape(system_id))
}

/// An HTTP error answer in the port's terms.
fn http_error(response: &HttpResponse) -> MaasError {
    let json = response.header("content-type").is_some_and(|value| value.contains("json"));
    let text = String::from_utf8_lossy(&response.body);
    let rendered = if json { serde_json::from_slice(&response.body).ok().and_then(form_errors) } else { None };
    let message = match rendered {
        Some(message) => message,
        None if text.trim().is_empty() => format!("http {}", response.status),
        None => text.trim_end().to_owned(),
    };
    let retry_after_s = response.header("retry-after").and_then(|value| value.trim().parse::<u32>().ok());
    MaasError::Http { status: response.status, message, retry_after_s }
}

/// A form-error dict `{"field": ["msg", ...]}` as `field: msg msg; field2: msg` (fields in key order, as the fake's
/// `BTreeMap`), or a JSON list of messages joined with `; `.
fn form_errors(value: serde_json::Value) -> Option<String> {
    fn messages(value: &serde_json::Value) -> String {
        match value {
            serde_json::Value::String(text) => text.clone(),
            serde_json::Value::Array(items) => items.iter().map(messages).collect::<Vec<_>>().join(" "),
            other => other.to_string(),
        }
    }
    match value {
        serde_json::Value::Object(fields) => {
            let sorted: BTreeMap<&String, &serde_json::Value> = fields.iter().collect();
            Some(
                sorted
                    .into_iter()
                    .map(|(field, value)| format!("{field}: {}", messages(value)))
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        }
        serde_json::Value::Array(items) => Some(items.iter().map(messages).collect::<Vec<_>>().join("; ")),
        serde_json::Value::String(text) => Some(text),
        _ => None,
    }
}

fn decode<W: DeserializeOwned>(op: &'static str, response: &HttpResponse) -> Result<W, MaasError> {
    serde_json::from_slice(&response.body).map_err(|error| {
        // Where the decoder stopped, never what it read (a body may carry a power password).
        let category = match error.classify() {
            serde_json::error::Category::Io => "io",
            serde_json::error::Category::Syntax => "not json",
            serde_json::error::Category::Data => "unexpected shape",
            serde_json::error::Category::Eof => "truncated json",
        };
        let why = format!("{category} at line {} column {}", error.line(), error.column());
        unexpected_body(op, response.status, &why)
    })
}

fn unexpected_body(op: &str, status: u16, why: &str) -> MaasError {
    MaasError::Http { status, message: format!("unexpected answer body: {op}: {why}"), retry_after_s: None }
}

// --- the wire shapes (the fields the port reads; MAAS sends many more) ---------------------------------------------

#[derive(Deserialize)]
struct MachineWire {
    system_id: String,
    hostname: String,
    status: u8,
    status_name: String,
    #[serde(default)]
    status_message: Option<String>,
    #[serde(default)]
    boot_interface: Option<InterfaceWire>,
    #[serde(default)]
    interface_set: Vec<InterfaceWire>,
    /// Absent before MAAS 3.4 (gomaasclient derives it); `false` then.
    #[serde(default)]
    enable_hw_sync: Option<bool>,
    #[serde(default)]
    sync_interval: Option<u64>,
    #[serde(default)]
    last_sync: Option<String>,
}

impl MachineWire {
    /// The websocket handler's `is_sync_healthy`; `Err` when `last_sync` is not a datetime.
    fn hw_sync_healthy(&self, now_unix_ms: u64) -> Result<bool, String> {
        let (Some(true), Some(last_sync), Some(interval_s)) =
            (self.enable_hw_sync, &self.last_sync, self.sync_interval)
        else {
            return Ok(false);
        };
        let last_ms = parse_datetime_unix_ms(last_sync).ok_or_else(|| "last_sync is not an ISO datetime".to_owned())?;
        Ok(interval_s > 0 && now_unix_ms <= last_ms.saturating_add(interval_s.saturating_mul(1500)))
    }
}

#[derive(Deserialize)]
struct MachineRef {
    #[serde(default)]
    boot_disk: Option<BlockDeviceWire>,
}

#[derive(Deserialize)]
struct InterfaceWire {
    id: u64,
    name: String,
    #[serde(default)]
    mac_address: Option<String>,
    #[serde(default)]
    vlan: Option<VlanWire>,
    #[serde(default)]
    links: Vec<LinkWire>,
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(Deserialize)]
struct LinkWire {
    mode: String,
}

#[derive(Deserialize)]
struct VlanWire {
    id: u64,
    vid: u16,
    #[serde(default = "default_mtu")]
    mtu: u16,
}

fn default_mtu() -> u16 {
    1500
}

#[derive(Deserialize)]
struct BlockDeviceWire {
    id: u64,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    serial: Option<String>,
}

#[derive(Deserialize)]
struct SubnetWire {
    id: u64,
    cidr: String,
    vlan: VlanWire,
}

#[derive(Deserialize)]
struct RegionControllerWire {
    #[serde(default)]
    service_set: Vec<ServiceWire>,
}

#[derive(Deserialize)]
struct ServiceWire {
    name: String,
    status: String,
    #[serde(default)]
    status_info: String,
}

#[derive(Deserialize)]
struct EventsWire {
    events: Vec<EventWire>,
}

#[derive(Deserialize)]
struct EventWire {
    id: u64,
    level: String,
    #[serde(rename = "type")]
    event_type: String,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Deserialize)]
struct PowerStateWire {
    state: String,
}

/// `op=power_parameters`: only the address is read (the password is in the same dict and is never decoded).
#[derive(Deserialize)]
struct PowerParametersWire {
    #[serde(default)]
    power_address: Option<String>,
}

/// `2026-01-01T00:15:00`, with optional fractional seconds and an optional `Z` or `±hh:mm` (a space for the `T`
/// too): the shapes gomaasclient's `MAASTime` accepts. A datetime without a zone is UTC (MAAS stores UTC).
pub fn parse_datetime_unix_ms(text: &str) -> Option<u64> {
    let text = text.trim();
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes().all(|b| b.is_ascii_digit()).then(|| part.parse().ok())?
    };
    if bytes.len() < 19 || bytes[4] != b'-' || bytes[7] != b'-' || !matches!(bytes[10], b'T' | b' ') {
        return None;
    }
    if bytes[13] != b':' || bytes[16] != b':' {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0i64;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let padded = format!("{:0<3}", &fraction[..digits.min(3)]);
        millis = padded.parse().ok()?;
        rest = &fraction[digits..];
    }
    let offset_s = match rest {
        "" | "Z" => 0,
        zone => {
            let sign = match zone.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let zone = zone[1..].replace(':', "");
            if zone.len() != 4 || !zone.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let (hours, minutes): (i64, i64) = (zone[..2].parse().ok()?, zone[2..].parse().ok()?);
            sign * (hours * 3600 + minutes * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    u64::try_from(seconds * 1000 + millis).ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Standard base64 with padding (RFC 4648 §4), what MAAS's `prepare_user_data` decodes. Twenty lines here rather
/// than a dependency: the engine's dependency list stays the list of things it cannot reasonably write.
pub fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

impl<T: HttpTransport, C: Clock> MaasClient<T, C> {
    /// `GET /machines/?<filters>` (none: every machine), with each machine's BMC address from one
    /// `op=power_parameters` read of the machines listed.
    async fn list_machines(&self, what: &'static str, filters: &[(&str, &str)]) -> Result<Vec<Machine>, MaasError> {
        let path = if filters.is_empty() {
            format!("{API_ROOT}machines/")
        } else {
            format!("{API_ROOT}machines/?{}", query(filters))
        };
        let response = self.call(what, Method::Get, path, None).await?;
        let wires: Vec<MachineWire> = decode(what, &response)?;
        let mut addresses: BTreeMap<String, PowerParametersWire> = BTreeMap::new();
        if !wires.is_empty() {
            let mut pairs = vec![("op", "power_parameters")];
            pairs.extend(wires.iter().map(|wire| ("id", wire.system_id.as_str())));
            addresses = self.get("power_parameters", format!("{API_ROOT}machines/?{}", query(&pairs))).await?;
        }
        wires
            .into_iter()
            .map(|wire| {
                let power_address = addresses.remove(&wire.system_id).and_then(|params| params.power_address);
                self.machine_from_wire(what, wire, power_address, response.status)
            })
            .collect()
    }
}

impl<T: HttpTransport, C: Clock> MaasApi for MaasClient<T, C> {
    async fn machines(&self) -> Result<Vec<Machine>, MaasError> {
        self.list_machines("list", &[]).await
    }

    async fn machines_with_mac(&self, mac: &str) -> Result<Vec<Machine>, MaasError> {
        self.list_machines("list_by_mac", &[("mac_address", mac)]).await
    }

    async fn new_machines(&self) -> Result<Vec<Machine>, MaasError> {
        self.list_machines("list_new", &[("status", "new")]).await
    }

    async fn machine(&self, system_id: &str) -> Result<Machine, MaasError> {
        let response = self.call("read", Method::Get, machine_path(system_id), None).await?;
        let wire: MachineWire = decode("read", &response)?;
        let params: PowerParametersWire =
            self.get("power_parameters", machine_op_path(system_id, "power_parameters")).await?;
        self.machine_from_wire("read", wire, params.power_address, response.status)
    }

    async fn create_machine(&self, new: &NewMachine) -> Result<Machine, MaasError> {
        let form = Form::new()
            .field("hostname", &new.hostname)
            .field("architecture", "amd64")
            .field("mac_addresses", &new.pxe_mac)
            .field("power_type", "redfish")
            .field("power_parameters_power_address", &new.power_address)
            .field("power_parameters_power_user", &new.power_user)
            .field("power_parameters_power_pass", new.power_password.expose())
            .field("commission", "true");
        let response = self.call("create", Method::Post, format!("{API_ROOT}machines/"), Some(form)).await?;
        let wire: MachineWire = decode("create", &response)?;
        // The power address is the one just sent (what the region stored).
        self.machine_from_wire("create", wire, Some(new.power_address.clone()), response.status)
    }

    async fn commission(&self, system_id: &str) -> Result<Machine, MaasError> {
        self.post_machine_op("commission", system_id, Form::new()).await
    }

    async fn events(&self, system_id: &str, after: Option<u64>) -> Result<Vec<MaasEvent>, MaasError> {
        // DEBUG and up: script results and status changes are DEBUG events, and they are the signs of progress.
        let limit = EVENTS_LIMIT_MAX.to_string();
        let after = after.map(|after| after.to_string());
        let mut pairs = vec![("op", "query"), ("id", system_id), ("level", "DEBUG"), ("limit", limit.as_str())];
        if let Some(after) = &after {
            pairs.push(("after", after.as_str()));
        }
        let page: EventsWire = self.get("events", format!("{API_ROOT}events/?{}", query(&pairs))).await?;
        Ok(page
            .events
            .into_iter()
            .map(|event| MaasEvent {
                id: event.id,
                level: event.level,
                text: event.event_type,
                description: event.description.unwrap_or_default(),
            })
            .collect())
    }

    async fn disks(&self, system_id: &str) -> Result<Vec<Disk>, MaasError> {
        let machine: MachineRef = self.get("read", machine_path(system_id)).await?;
        let boot_id = machine.boot_disk.map(|disk| disk.id);
        let devices: Vec<BlockDeviceWire> =
            self.get("blockdevices", format!("{}blockdevices/", node_path(system_id))).await?;
        Ok(devices
            .into_iter()
            .map(|device| Disk {
                boot: Some(device.id) == boot_id,
                id: device.id,
                name: device.name.unwrap_or_default(),
                model: device.model.unwrap_or_default(),
                serial: device.serial.unwrap_or_default(),
            })
            .collect())
    }

    async fn set_boot_disk(&self, system_id: &str, disk_id: u64) -> Result<(), MaasError> {
        let path = format!("{}blockdevices/{disk_id}/?{}", node_path(system_id), query(&[("op", "set_boot_disk")]));
        self.call("set_boot_disk", Method::Post, path, Some(Form::new())).await.map(drop)
    }

    async fn interfaces(&self, system_id: &str) -> Result<Vec<Interface>, MaasError> {
        let wires: Vec<InterfaceWire> = self.get("interfaces", format!("{}interfaces/", node_path(system_id))).await?;
        Ok(wires
            .into_iter()
            .map(|wire| Interface {
                vlan_vid: wire.vlan.as_ref().map(|vlan| self.vlan_number(vlan)),
                auto_linked: wire.links.iter().any(|link| link.mode.eq_ignore_ascii_case("auto")),
                roce: wire.tags.iter().any(|tag| tag == "roce"),
                id: wire.id,
                name: wire.name,
                mac: wire.mac_address.unwrap_or_default().to_ascii_lowercase(),
            })
            .collect())
    }

    async fn region_services(&self) -> Result<Vec<RegionService>, MaasError> {
        let wires: Vec<RegionControllerWire> =
            self.get("regioncontrollers", format!("{API_ROOT}regioncontrollers/")).await?;
        Ok(wires
            .into_iter()
            .flat_map(|controller| controller.service_set)
            .map(|wire| RegionService { name: wire.name, status: wire.status, status_info: wire.status_info })
            .collect())
    }

    async fn subnets(&self) -> Result<Vec<Subnet>, MaasError> {
        let wires: Vec<SubnetWire> = self.get("subnets", format!("{API_ROOT}subnets/")).await?;
        Ok(wires
            .into_iter()
            .map(|wire| Subnet {
                vlan_vid: self.vlan_number(&wire.vlan),
                mtu: wire.vlan.mtu,
                id: wire.id,
                cidr: wire.cidr,
            })
            .collect())
    }

    async fn link_subnet_auto(&self, system_id: &str, interface_id: u64, subnet_id: u64) -> Result<(), MaasError> {
        let path = format!("{}interfaces/{interface_id}/?{}", node_path(system_id), query(&[("op", "link_subnet")]));
        let form = Form::new().field("mode", "AUTO").field("subnet", &subnet_id.to_string());
        self.call("link_subnet", Method::Post, path, Some(form)).await.map(drop)
    }

    async fn disconnect_interface(&self, system_id: &str, interface_id: u64) -> Result<(), MaasError> {
        let path = format!("{}interfaces/{interface_id}/?{}", node_path(system_id), query(&[("op", "disconnect")]));
        self.call("disconnect", Method::Post, path, Some(Form::new())).await.map(drop)
    }

    async fn deploy(&self, system_id: &str, user_data: &Secret, enable_hw_sync: bool) -> Result<Machine, MaasError> {
        let form = Form::new()
            .field("user_data", &base64_encode(user_data.expose().as_bytes()))
            .field("enable_hw_sync", if enable_hw_sync { "true" } else { "false" });
        self.post_machine_op("deploy", system_id, form).await
    }

    async fn release(&self, system_id: &str, erase: bool) -> Result<Machine, MaasError> {
        let form = Form::new().field("erase", if erase { "true" } else { "false" });
        self.post_machine_op("release", system_id, form).await
    }

    async fn abort(&self, system_id: &str) -> Result<Machine, MaasError> {
        self.post_machine_op("abort", system_id, Form::new()).await
    }

    async fn mark_fixed(&self, system_id: &str) -> Result<Machine, MaasError> {
        self.post_machine_op("mark_fixed", system_id, Form::new()).await
    }

    async fn power_off(&self, system_id: &str) -> Result<(), MaasError> {
        // The answer is the machine JSON, or `null` when no power action was sent: either is success.
        self.call("power_off", Method::Post, machine_op_path(system_id, "power_off"), Some(Form::new())).await.map(drop)
    }

    async fn power_on(&self, system_id: &str) -> Result<(), MaasError> {
        self.call("power_on", Method::Post, machine_op_path(system_id, "power_on"), Some(Form::new())).await.map(drop)
    }

    async fn power_state(&self, system_id: &str) -> Result<PowerState, MaasError> {
        let wire: PowerStateWire =
            self.get("query_power_state", machine_op_path(system_id, "query_power_state")).await?;
        Ok(match wire.state.as_str() {
            "on" => PowerState::On,
            "off" => PowerState::Off,
            _ => PowerState::Unknown,
        })
    }

    async fn delete_machine(&self, system_id: &str) -> Result<(), MaasError> {
        self.call("delete", Method::Delete, machine_path(system_id), None).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use futures_util::FutureExt;

    use super::*;
    use crate::ports::TransportError;

    /// Records what the client sends and answers from a script.
    struct Recorder {
        sent: RefCell<Vec<(HttpRequest, u64)>>,
        answers: RefCell<Vec<Result<HttpResponse, TransportError>>>,
    }

    impl HttpTransport for &Recorder {
        fn send(
            &self,
            request: HttpRequest,
            timeout_ms: u64,
        ) -> impl std::future::Future<Output = Result<HttpResponse, TransportError>> {
            self.sent.borrow_mut().push((request, timeout_ms));
            let answer = self.answers.borrow_mut().remove(0);
            std::future::ready(answer)
        }
    }

    struct At(u64);

    impl Clock for At {
        fn now_ms(&self) -> u64 {
            self.0
        }

        fn monotonic_ms(&self) -> u64 {
            self.0
        }

        fn sleep_ms(&self, _duration_ms: u64) -> impl std::future::Future<Output = ()> {
            std::future::ready(())
        }
    }

    fn answer(status: u16, headers: &[(&str, &str)], body: &str) -> Result<HttpResponse, TransportError> {
        let headers = headers.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect();
        Ok(HttpResponse { status, headers, body: body.as_bytes().to_vec() })
    }

    const MACHINE: &str = r#"{"system_id": "abc", "hostname": "n1", "status": 1, "status_name": "Commissioning",
        "status_message": "Commissioning", "boot_interface": null, "interface_set": []}"#;

    #[test]
    fn each_call_is_signed_with_a_fresh_nonce_the_clock_s_time_and_bounded_by_the_call_timeout() {
        let recorder = Recorder {
            sent: RefCell::new(Vec::new()),
            answers: RefCell::new(vec![answer(200, &[], MACHINE), answer(204, &[], "")]),
        };
        let key = Secret::new("ck:tk:fleetsim-secret-ts");
        let client = MaasClient::new(&recorder, At(1_767_229_200_999), &key, 7, 4_321).expect("a key");
        let machine = client.commission("abc").now_or_never().expect("ready").expect("commissioning");
        assert_eq!(machine.status, MachineStatus::Commissioning);
        client.delete_machine("a/b c").now_or_never().expect("ready").expect("deleted");

        let nonces = NonceSource::new(7);
        let sent = recorder.sent.borrow();
        let (commission, timeout_ms) = &sent[0];
        assert_eq!(*timeout_ms, 4_321);
        assert_eq!(
            (commission.method, commission.path_and_query.as_str()),
            (Method::Post, "/MAAS/api/2.0/machines/abc/?op=commission")
        );
        let authorization = format!(
            "OAuth realm=\"MAAS API\", oauth_consumer_key=\"ck\", oauth_token=\"tk\", \
             oauth_signature_method=\"PLAINTEXT\", oauth_signature=\"%26fleetsim-secret-ts\", \
             oauth_timestamp=\"1767229200\", oauth_nonce=\"{}\", oauth_version=\"1.0\"",
            nonces.next_nonce()
        );
        assert_eq!(
            commission.headers,
            [
                ("authorization".to_owned(), authorization),
                ("accept".to_owned(), "application/json".to_owned()),
                ("content-type".to_owned(), "application/x-www-form-urlencoded".to_owned()),
            ]
        );
        assert!(commission.body.is_empty());
        let (delete, _) = &sent[1];
        assert_eq!(
            (delete.method, delete.path_and_query.as_str()),
            (Method::Delete, "/MAAS/api/2.0/machines/a%2Fb%20c/")
        );
        assert!(delete.headers[0].1.contains(&format!("oauth_nonce=\"{}\"", nonces.next_nonce())));
        assert_eq!(delete.headers.len(), 2, "no body, no content type");
    }

    #[test]
    fn the_unquoted_style_and_a_clock_origin_change_the_header_only_as_asked() {
        let recorder = Recorder { sent: RefCell::new(Vec::new()), answers: RefCell::new(vec![answer(200, &[], "[]")]) };
        let key = Secret::new("ck:tk:fleetsim-secret-ts");
        let client = MaasClient::new(&recorder, At(61_000), &key, 1, 10)
            .expect("a key")
            .with_header_style(HeaderStyle::Unquoted)
            .with_clock_origin_unix_ms(1_767_225_600_000);
        assert_eq!(client.subnets().now_or_never().expect("ready"), Ok(vec![]));
        let sent = recorder.sent.borrow();
        assert_eq!(
            sent[0].0.headers[0].1,
            format!(
                "OAuth oauth_version=1.0, oauth_signature_method=PLAINTEXT, oauth_consumer_key=ck, oauth_token=tk, \
                 oauth_signature=&fleetsim-secret-ts, oauth_nonce={}, oauth_timestamp=1767225661",
                NonceSource::new(1).next_nonce()
            )
        );
    }

    #[test]
    fn answers_map_onto_the_port_s_errors() {
        let recorder = Recorder {
            sent: RefCell::new(Vec::new()),
            answers: RefCell::new(vec![
                Err(TransportError::Timeout),
                answer(503, &[("retry-after", " 10 ")], "Unable to connect to any rack controller\n"),
                answer(409, &[("retry-after", "Wed, 21 Oct 2026 07:28:00 GMT")], "Machine cannot be released"),
                answer(400, &[("content-type", "application/json")], r#"{"mode": ["Select a valid choice."]}"#),
                answer(500, &[], ""),
                answer(200, &[], r#"{"state": 1}"#),
            ]),
        };
        let client = MaasClient::new(&recorder, At(0), &Secret::new("a:b:c"), 0, 10).expect("a key");
        let call = || client.power_state("abc").now_or_never().expect("ready");
        assert_eq!(call(), Err(MaasError::Transport(TransportError::Timeout)));
        let http = |status, message: &str, retry_after_s| MaasError::Http {
            status,
            message: message.to_owned(),
            retry_after_s,
        };
        assert_eq!(call(), Err(http(503, "Unable to connect to any rack controller", Some(10))));
        assert_eq!(call(), Err(http(409, "Machine cannot be released", None)), "an HTTP-date Retry-After is not read");
        assert_eq!(call(), Err(http(400, "mode: Select a valid choice.", None)));
        assert_eq!(call(), Err(http(500, "http 500", None)));
        assert_eq!(
            call(),
            Err(http(200, "unexpected answer body: query_power_state: unexpected shape at line 1 column 11", None))
        );
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(plain.as_bytes()), encoded, "{plain:?}");
        }
        assert_eq!(base64_encode(&[0xfb, 0xff, 0xfe]), "+//+");
    }

    #[test]
    fn datetimes_in_every_shape_gomaasclient_accepts() {
        let epoch_2026 = 1_767_225_600_000;
        for (text, expected) in [
            ("2026-01-01T00:00:00", Some(epoch_2026)),
            ("2026-01-01T00:15:00.5", Some(epoch_2026 + 900_500)),
            ("2026-01-01T00:15:00.123456", Some(epoch_2026 + 900_123)),
            ("2026-01-01T00:15:00Z", Some(epoch_2026 + 900_000)),
            ("2026-01-01 00:15:00.999+00:00", Some(epoch_2026 + 900_999)),
            ("2026-01-01T02:00:00+02:00", Some(epoch_2026)),
            ("2025-12-31T22:00:00-02:00", Some(epoch_2026)),
            ("1970-01-01T00:00:00", Some(0)),
            ("2024-02-29T00:00:00", Some(1_709_164_800_000)),
            ("2026-13-01T00:00:00", None),
            ("2026-01-01", None),
            ("yesterday at noon", None),
            ("2026-01-01T00:00:00+0x:00", None),
            ("2026-01-01T00:00:00.", None),
        ] {
            assert_eq!(parse_datetime_unix_ms(text), expected, "{text}");
        }
    }

    #[test]
    fn form_errors_render_field_by_field() {
        let value =
            serde_json::json!({"mtu": ["Ensure this value is less than or equal to 65535."], "__all__": ["a", "b"]});
        assert_eq!(
            form_errors(value).as_deref(),
            Some("__all__: a b; mtu: Ensure this value is less than or equal to 65535.")
        );
        assert_eq!(form_errors(serde_json::json!(["one", "two"])).as_deref(), Some("one; two"));
    }

    #[test]
    fn hw_sync_health_is_judged_against_one_and_a_half_intervals() {
        let wire = |enabled: Option<bool>, last: Option<&str>, interval: Option<u64>| MachineWire {
            system_id: "abc".into(),
            hostname: "h".into(),
            status: 6,
            status_name: "Deployed".into(),
            status_message: None,
            boot_interface: None,
            interface_set: Vec::new(),
            enable_hw_sync: enabled,
            sync_interval: interval,
            last_sync: last.map(str::to_owned),
        };
        let last = 1_767_225_600_000;
        let synced = wire(Some(true), Some("2026-01-01T00:00:00"), Some(900));
        assert_eq!(synced.hw_sync_healthy(last + 1_350_000), Ok(true));
        assert_eq!(synced.hw_sync_healthy(last + 1_350_001), Ok(false));
        assert_eq!(wire(Some(false), Some("2026-01-01T00:00:00"), Some(900)).hw_sync_healthy(last), Ok(false));
        assert_eq!(wire(None, None, None).hw_sync_healthy(last), Ok(false));
        assert_eq!(wire(Some(true), None, Some(900)).hw_sync_healthy(last), Ok(false));
        assert_eq!(wire(Some(true), Some("2026-01-01T00:00:00"), Some(0)).hw_sync_healthy(last), Ok(false));
        assert!(wire(Some(true), Some("soon"), Some(900)).hw_sync_healthy(last).is_err());
    }
}
