//! The HTTP and UDP front ends of the fakes: axum routers (MAAS, Redfish BMC, the Vault-like secrets store, the hub)
//! and a DNS responder, each over shared model state. They only translate: every handler decodes the wire request
//! into the model's request type, calls the very method the simulator's fast transport calls (`Site::handle_maas`,
//! `Site::handle_redfish`, `Site::handle_vault`, `Site::handle_dns`, `Hub::handle`) and encodes the answer.
//!
//! Time: each router gets a [`Clock`] giving the model's `now_ms` (wall-clock-elapsed in `fleetsim serve`, sim time
//! in the wire transport); the models never read a clock themselves.
//!
//! "No answer": when a model returns `None` (the region is unreachable, a BMC is unreachable), the handler awaits
//! [`no_answer`], a future that never completes, so the client's own per-call timeout fires exactly as the fast
//! transport's `Delivery::Hang` makes it fire. Nothing is written on the connection; the handler's task lives until
//! the client closes it (a timed-out hyper client drops that connection, so it is not reused).
//!
//! Locking: the shared state sits behind a `std::sync::Mutex` that is taken and released inside one synchronous
//! block per request, never held across an `.await`.
//!
//! API Boundary: the public items here are the contract of `docs/http-apis.md` and `/work/wire-spec.md`.

pub mod cloud;
pub mod describe;
pub mod dns;
pub mod hub;
pub mod inventory;
pub mod maas;
pub mod redfish;
pub mod vault;
mod wire_time;

#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, MutexGuard};

use crate::hub::{Hub, HubEvent};
use crate::maas::vault::splitmix64;
use crate::maas::{Secret, Site, SiteEvent, vault::SECRET_PREFIX};

pub use wire_time::{WIRE_EPOCH, iso_datetime, iso_datetime_at, maas_event_created, maas_event_created_at};

/// The model's clock: `now_ms` on the model's time line.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// A site behind the MAAS, Redfish, secrets and DNS front ends.
pub type SharedSite = Arc<Mutex<SiteFront>>;

/// A hub behind its front end.
pub type SharedHub = Arc<Mutex<HubFront>>;

/// The largest request body a front end reads (bigger: 413).
pub const BODY_LIMIT_BYTES: usize = 1 << 20;

/// One MAAS API key the fake accepts: `consumer_key:token_key:token_secret`, and the MAAS user requests made with it
/// run as (the model's `caller`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub consumer_key: String,
    pub token_key: String,
    /// Starts with `fleetsim-secret-` so leak checks find it.
    pub token_secret: Secret,
    pub user: String,
}

impl ApiKey {
    /// The key as a client is given it: `consumer_key:token_key:token_secret`.
    pub fn to_key_string(&self) -> String {
        format!("{}:{}:{}", self.consumer_key, self.token_key, self.token_secret.expose())
    }
}

/// The site and what its front ends need besides it: the event sink, the API keys and the secrets-store tokens.
#[derive(Debug)]
pub struct SiteFront {
    pub site: Site,
    /// Every event the model emitted while answering wire requests, oldest first; the caller drains it.
    pub events: Vec<SiteEvent>,
    /// The MAAS API keys accepted, in minting order.
    pub api_keys: Vec<ApiKey>,
    /// The `X-Vault-Token` values the secrets store accepts.
    pub vault_tokens: Vec<Secret>,
    /// The Unix time (ms) of the model's `now_ms = 0`, for the datetimes on the wire: [`WIRE_EPOCH`] by default (the
    /// simulator's clocks read virtual ms from it); `fleetsim serve` sets the wall clock at its start, so that a
    /// client on the host's clock reads `last_sync` as recent.
    pub wire_epoch_unix_ms: u64,
    /// The Redfish emulator's login, accepted for every system (sushy-tools style; `fleetsim serve` prints it).
    /// `None`: only each BMC's own login opens its system.
    pub redfish_login: Option<crate::maas::PowerCredential>,
    /// The Unix time (ms) MAAS's OAuth timestamp check compares with. `None`: the model's time line
    /// (`wire_epoch_unix_ms` + now), as in the simulator, where the client's clock is the model's. `fleetsim serve`
    /// runs its model faster than the wall clock and gives the wall clock here.
    pub oauth_clock_unix_ms: Option<fn() -> u64>,
}

impl SiteFront {
    /// A front for `site` with no API key yet and one secrets-store token minted from the site seed.
    pub fn new(site: Site) -> SiteFront {
        let vault_token = Secret::mint("vault-token", splitmix64(site.seed() ^ 0x7661_756c_7400));
        SiteFront {
            site,
            events: Vec::new(),
            api_keys: Vec::new(),
            vault_tokens: vec![vault_token],
            wire_epoch_unix_ms: WIRE_EPOCH * 1000,
            redfish_login: None,
            oauth_clock_unix_ms: None,
        }
    }

    /// Wraps the front for the routers.
    pub fn shared(self) -> SharedSite {
        Arc::new(Mutex::new(self))
    }

    /// The API key of MAAS user `user` as `consumer_key:token_key:token_secret`, minted deterministically from the
    /// site seed and the user name on first use (the same seed and user give the same key).
    pub fn api_key_for(&mut self, user: &str) -> String {
        if let Some(key) = self.api_keys.iter().find(|key| key.user == user) {
            return key.to_key_string();
        }
        let user_seed = user
            .bytes()
            .fold(splitmix64(self.site.seed() ^ 0x6d61_6173), |acc, byte| splitmix64(acc ^ u64::from(byte)));
        let key = ApiKey {
            consumer_key: format!("ck{:016x}", splitmix64(user_seed ^ 1)),
            token_key: format!("tk{:016x}", splitmix64(user_seed ^ 2)),
            token_secret: Secret::mint("maas", user_seed ^ 3),
            user: user.to_owned(),
        };
        debug_assert!(key.token_secret.expose().starts_with(SECRET_PREFIX));
        let text = key.to_key_string();
        self.api_keys.push(key);
        text
    }

    /// The first secrets-store token (what `fleetsim serve` prints).
    pub fn vault_token(&self) -> Secret {
        self.vault_tokens.first().cloned().unwrap_or_default()
    }

    /// Takes the events recorded so far.
    pub fn drain_events(&mut self) -> Vec<SiteEvent> {
        std::mem::take(&mut self.events)
    }
}

/// The hub, its event sink, and whether it answers.
#[derive(Debug)]
pub struct HubFront {
    pub hub: Hub,
    pub events: Vec<HubEvent>,
    /// False: every request gets 503 `{"error":"unavailable",...}` (the hub's database is down).
    pub available: bool,
    /// Fault: the next this-many controller calls (`X-Fleet-Principal` envelope) are carried out and their answer is
    /// lost: the client times out (the fast transport's `hub_timeouts`).
    pub lose_next_answers: u32,
    /// The bootstrap token each agent may first register with over HTTP (its cloud-init's, issued by the secrets
    /// store); a registered agent re-registers only with its current credential. Never logged.
    pub bootstrap_tokens: std::collections::BTreeMap<String, Secret>,
    /// Refused registrations, oldest first (the caller drains them to its audit log). No token is recorded.
    pub audit: Vec<HubAudit>,
}

/// A refused agent registration, as the audit log records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubAudit {
    pub at_ms: u64,
    pub agent: String,
    /// Why it was refused, e.g. `the token is not the agent's current credential`.
    pub reason: String,
}

impl HubFront {
    pub fn new(hub: Hub) -> HubFront {
        HubFront {
            hub,
            events: Vec::new(),
            available: true,
            lose_next_answers: 0,
            bootstrap_tokens: std::collections::BTreeMap::new(),
            audit: Vec::new(),
        }
    }

    pub fn shared(self) -> SharedHub {
        Arc::new(Mutex::new(self))
    }

    pub fn drain_events(&mut self) -> Vec<HubEvent> {
        std::mem::take(&mut self.events)
    }
}

/// The MAAS, Redfish and secrets routers merged into one app (their paths do not overlap). `fleetsim serve` binds
/// them to separate ports instead; this is for a single-port test server.
///
/// The MAAS router's catch-all answers every path the other two do not (`Unknown API endpoint: ...`).
pub fn site_app(shared: SharedSite, clock: Clock) -> axum::Router {
    redfish::router(shared.clone(), clock.clone())
        .merge(vault::router(shared.clone(), clock.clone()))
        .merge(maas::router(shared, clock))
}

/// The answer of a host that gives none: never completes. The client's per-call timeout ends the call (see the
/// module docs).
pub async fn no_answer() -> axum::response::Response {
    std::future::pending::<()>().await;
    unreachable!("a pending future never completes")
}

/// Locks shared state. A lock poisoned by a panicking handler is taken anyway: the panic is the bug to look at, and
/// every later request failing with it would hide which request it was.
pub(crate) fn lock<T>(shared: &Mutex<T>) -> MutexGuard<'_, T> {
    shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Percent-decodes `text` (`+` stays `+`); `None` on a malformed escape or non-UTF-8 result.
pub(crate) fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = bytes.get(index + 1..index + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Form or query parameters in order, repeated keys kept.
/// The text fields of a multipart/form-data body, in order (a file part's content is read as text too: MAAS's
/// forms take every field as a string).
pub(crate) async fn multipart_pairs(
    body: bytes::Bytes,
    boundary: String,
) -> Result<Vec<(String, String)>, multer::Error> {
    let stream = futures_util::stream::once(async move { Ok::<_, std::convert::Infallible>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut pairs = Vec::new();
    while let Some(field) = multipart.next_field().await? {
        let name = field.name().unwrap_or_default().to_owned();
        // Django decodes a part sent with `Content-Transfer-Encoding: base64` (python-libmaas sends its fields so).
        let base64 = field
            .headers()
            .get("content-transfer-encoding")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.eq_ignore_ascii_case("base64"));
        let text = field.text().await?;
        let value = if base64 {
            crate::maas::machine::decode_base64(text.trim())
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .unwrap_or(text)
        } else {
            text
        };
        pairs.push((name, value));
    }
    Ok(pairs)
}

/// Whether a multipart body holds no part at all: the boundary, blank lines, and the closing boundary (what
/// python-libmaas sends for an operation without parameters; `multer` calls it an incomplete stream).
pub(crate) fn is_empty_multipart(body: &[u8], boundary: &str) -> bool {
    let Ok(text) = std::str::from_utf8(body) else { return false };
    let Some(rest) = text.trim().strip_prefix("--").and_then(|rest| rest.strip_prefix(boundary)) else {
        return false;
    };
    let rest = rest.trim_start();
    rest.is_empty() || rest.strip_prefix("--").and_then(|rest| rest.strip_prefix(boundary)) == Some("--")
}

pub(crate) fn form_pairs(text: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(text).map(|(key, value)| (key.into_owned(), value.into_owned())).collect()
}
