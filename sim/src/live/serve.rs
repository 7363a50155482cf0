//! `fleetsim serve`: the fakes of one MAAS site on real loopback sockets, for people, their tools and `fleetsim drive`.
//!
//! A seeded fleet of machines is racked in a [`fakes::maas::Site`]; the region API (`/MAAS/api/2.0/`), the BMCs'
//! Redfish, the secrets store, the hub with the inventory, the rack resolver (DNS over UDP) and a small admin API each
//! listen on their own port. The models are the ones the simulator runs; the routers of [`fakes::http`] only
//! translate. Time is the wall clock since start, times `--speed` (a commissioning that takes MAAS minutes takes
//! seconds at `--speed 60`). One task advances the site every [`TICK_MS`]: machines boot, and the agents of deployed
//! machines enrol at the hub with their bootstrap token and heartbeat, as in the simulator.
//!
//! Architecture Invariant: this module and `drive` are the only simulator code that reads the wall clock; nothing
//! here runs inside a simulated run.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Json;
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use fakes::http::inventory::{AgentDirectory, InventoryFront, SharedInventory};
use fakes::http::{Clock, HubFront, SharedHub, SharedSite, SiteFront};
use fakes::hub::{AgentKind, Hub, HubConfig, Request as HubRequest};
use fakes::inventory::Inventory;
use fakes::maas::{BmcFault, DnsFault, Site, SiteConfig, SiteEventKind, VaultRequest, VaultResponse};
use serde::Deserialize;
use serde_json::json;

/// How often the site is advanced and agents heartbeat-checked (wall ms).
pub const TICK_MS: u64 = 20;
/// At most this many DNS-over-TCP connections are open at once.
pub const DNS_TCP_CONNECTIONS_MAX: usize = 256;
/// The hub principal `fleetsim drive` authenticates as.
pub const CONTROLLER_PRINCIPAL: &str = "controller";
/// Allocations a node's inventory record starts with once its agent enrolled.
const ALLOCATIONS_PER_NODE: u32 = 2;

/// What `fleetsim serve` was asked for.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub seed: u64,
    /// The machines' names (their BMC systems and fleet nodes).
    pub machines: Vec<String>,
    pub bind: IpAddr,
    /// The first port: MAAS, then Redfish, secrets, hub (+inventory), DNS (UDP) and admin on the ports after it;
    /// 0 gives every service an ephemeral port.
    pub port: u16,
    /// Virtual ms per wall ms.
    pub speed: u32,
    /// Where to write `site.toml` and the credential files `fleetsim drive` reads.
    pub write_site: Option<PathBuf>,
    /// Where the served credentials come from.
    pub secrets: SecretSource,
    /// The limits of every HTTP listener.
    pub limits: crate::live::listen::Limits,
}

/// Where `fleetsim serve`'s credentials come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// Fresh from the operating system's random source at every start (the default).
    Random,
    /// Derived from the site seed: the same on every start (`--seed` asks for it; the banner says so).
    Seeded,
    /// Read from the credential files in this directory (`--credentials DIR`, the files `--write-site` writes).
    Files(PathBuf),
}

/// The credentials of one served site. `Debug` shows none of them.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `consumer:token:secret` of the MAAS user `fleetsim drive` acts as.
    pub maas_api_key: String,
    pub secrets_token: String,
    pub hub_credential: String,
    /// `Authorization: Bearer` of the inventory API.
    pub inventory_token: String,
    /// `Authorization: Bearer` of the cloud provider API (`docs/http-apis.md`, "Cloud provider").
    pub provider_token: String,
    /// `Authorization: Bearer` of the admin API's POST routes (faults, the hardware-sync seed).
    pub admin_token: String,
    /// The Redfish emulator's password (user [`REDFISH_EMULATOR_USER`]), which opens every system.
    pub redfish_password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials { [redacted] }")
    }
}

/// The Redfish emulator's user name.
pub const REDFISH_EMULATOR_USER: &str = "admin";

/// The credential files, in the order `--write-site` writes them and `--credentials` reads them.
pub const CREDENTIAL_FILES: [&str; 7] = [
    "maas-api-key",
    "secrets-token",
    "hub-credential",
    "inventory-token",
    "admin-token",
    "redfish-password",
    "provider-token",
];

impl Credentials {
    /// Every credential, in the order of [`CREDENTIAL_FILES`].
    pub fn values(&self) -> [&String; 7] {
        [
            &self.maas_api_key,
            &self.secrets_token,
            &self.hub_credential,
            &self.inventory_token,
            &self.admin_token,
            &self.redfish_password,
            &self.provider_token,
        ]
    }

    /// Every credential derived from `seed`: the same seed gives the same ones (`--seed`).
    fn seeded(seed: u64, maas_api_key: String, secrets_token: String) -> Credentials {
        let mint =
            |label: &str, salt: u64| fakes::maas::Secret::mint(label, seed.rotate_left(17) ^ salt).expose().to_owned();
        Credentials {
            maas_api_key,
            secrets_token,
            hub_credential: format!("{}hub-{:016x}", engine::secret::SECRET_MARKER, seed.rotate_left(17)),
            inventory_token: mint("inventory", 0x0069_6e76),
            admin_token: mint("admin", 0x0061_646d),
            redfish_password: mint("redfish", 0x0072_6673),
            provider_token: mint("provider", 0x0070_7276),
        }
    }

    /// Every credential fresh from the OS's random source (128 bits each).
    fn random() -> Result<Credentials, ServeError> {
        let fresh = |label: &str| -> Result<String, ServeError> {
            Ok(format!("{}{label}-{}", engine::secret::SECRET_MARKER, random_hex()?))
        };
        let maas_api_key = format!("ck{}:tk{}:{}", random_hex()?, random_hex()?, fresh("maas")?);
        Ok(Credentials {
            maas_api_key,
            secrets_token: fresh("vault-token")?,
            hub_credential: fresh("hub")?,
            inventory_token: fresh("inventory")?,
            admin_token: fresh("admin")?,
            redfish_password: fresh("redfish")?,
            provider_token: fresh("provider")?,
        })
    }

    /// Reads the seven credential files of `dir`; each must exist, be mode 0600 and hold one line.
    fn read(dir: &Path) -> Result<Credentials, ServeError> {
        let read = |name: &str| -> Result<String, ServeError> {
            let path = dir.join(name);
            let failed = |message: String| ServeError::Credentials { path: path.clone(), message };
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(&path).map_err(|error| failed(error.to_string()))?.permissions().mode();
                if mode & 0o077 != 0 {
                    return Err(failed(format!("mode {:o}: others can read it; chmod 600 it", mode & 0o777)));
                }
            }
            let text = crate::model::spec::read(&path).map_err(|error| failed(error.message))?;
            let text = text.trim().to_owned();
            if text.is_empty() || text.contains(char::is_whitespace) {
                return Err(failed("expected one credential on one line".into()));
            }
            // Served credentials are redacted by value from every log line (engine::secret): one too short to tell
            // from a word could not be.
            if text.chars().count() < engine::secret::REMEMBERED_LEN_MIN {
                return Err(failed(format!(
                    "a credential of {} characters is too short (at least {})",
                    text.chars().count(),
                    engine::secret::REMEMBERED_LEN_MIN
                )));
            }
            Ok(text)
        };
        let credentials = Credentials {
            maas_api_key: read(CREDENTIAL_FILES[0])?,
            secrets_token: read(CREDENTIAL_FILES[1])?,
            hub_credential: read(CREDENTIAL_FILES[2])?,
            inventory_token: read(CREDENTIAL_FILES[3])?,
            admin_token: read(CREDENTIAL_FILES[4])?,
            redfish_password: read(CREDENTIAL_FILES[5])?,
            provider_token: read(CREDENTIAL_FILES[6])?,
        };
        if credentials.maas_api_key.split(':').count() != 3 {
            return Err(ServeError::Credentials {
                path: dir.join(CREDENTIAL_FILES[0]),
                message: "expected consumer_key:token_key:token_secret".into(),
            });
        }
        Ok(credentials)
    }
}

/// 128 random bits as 32 hex digits, from the operating system (`/dev/urandom`).
fn random_hex() -> Result<String, ServeError> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut file| file.read_exact(&mut bytes))
        .map_err(|error| ServeError::Random(error.to_string()))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Compares two secrets in time independent of where they differ.
fn same_secret(left: &[u8], right: &[u8]) -> bool {
    left.len() == right.len() && left.iter().zip(right).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// Where each service listens, and the credentials a client needs.
#[derive(Debug, Clone)]
pub struct Served {
    pub maas: SocketAddr,
    pub redfish: SocketAddr,
    pub secrets: SocketAddr,
    pub hub: SocketAddr,
    pub dns: SocketAddr,
    pub admin: SocketAddr,
    /// `consumer:token:secret` of the MAAS user `fleetsim drive` acts as.
    pub maas_api_key: String,
    pub secrets_token: String,
    pub hub_credential: String,
    pub credentials: Credentials,
    pub machines: Vec<String>,
    pub speed: u32,
}

/// The running fakes: the models behind the routers.
#[derive(Clone)]
pub struct Fleet {
    pub site: SharedSite,
    pub hub: SharedHub,
    pub inventory: SharedInventory,
    /// The cloud provider of the instance lifecycle: one region, [`SERVED_REGION`].
    pub cloud: fakes::http::cloud::SharedCloud,
    pub clock: Clock,
    agents: Arc<Mutex<Agents>>,
}

/// The served cloud provider's one region, its instance quota and its instance types.
pub const SERVED_REGION: &str = "region-local";
pub const SERVED_REGION_QUOTA: u32 = 64;
pub const SERVED_INSTANCE_TYPES: [&str; 2] = ["type-small", "type-large"];

/// The node agents of deployed machines: enrolled ones with their bearer token and when they last heartbeat.
#[derive(Debug, Default)]
struct Agents {
    enrolled: BTreeMap<String, (String, u64)>,
    /// When the hub's TTL sweeper last ran (virtual ms).
    last_sweep_ms: u64,
}

/// The inventory's view of the agents (a task needs the node's agent up; an uninstall revokes it at the hub).
struct Directory {
    site: SharedSite,
    hub: SharedHub,
    agents: Arc<Mutex<Agents>>,
}

impl AgentDirectory for Directory {
    fn agent_answers(&self, node: &str) -> bool {
        let enrolled = lock(&self.agents).enrolled.contains_key(node);
        enrolled && lock(&self.site).site.machine(node).is_some_and(|m| m.agent_enrolled() && m.is_powered())
    }

    fn uninstalled(&self, node: &str) {
        lock(&self.agents).enrolled.remove(node);
        let mut events = Vec::new();
        lock(&self.hub).hub.revoke_principal(node, &mut events);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Fleet {
    /// Racks `config.machines` in a site seeded with `config.seed`, and a hub and inventory beside it.
    pub fn new(config: &ServeConfig, clock: Clock) -> Result<(Fleet, Credentials), ServeError> {
        let mut site = Site::new(SiteConfig::new(config.seed));
        for name in &config.machines {
            site.add_machine(name);
        }
        // A real site's configuration names the metadata host and the VLANs; the simulator's adapter supplies them.
        site.vault.set_site_value("metadata_host", fakes::maas::METADATA_HOST);
        site.vault.set_site_value("pxe_vlan_vid", &fakes::maas::PXE_VLAN_ID.to_string());
        site.vault.set_site_value("roce_vlan_vid", &fakes::maas::ROCE_VLAN_ID.to_string());
        let mut front = SiteFront::new(site);
        front.wire_epoch_unix_ms = wall_clock_unix_ms();
        // Clients sign with the host's clock; the model's runs --speed times faster.
        front.oauth_clock_unix_ms = Some(wall_clock_unix_ms);
        let credentials = match &config.secrets {
            SecretSource::Seeded => {
                let maas_api_key = front.api_key_for("controller");
                let secrets_token = front.vault_token().expose().to_owned();
                Credentials::seeded(config.seed, maas_api_key, secrets_token)
            }
            SecretSource::Random => Credentials::random()?,
            SecretSource::Files(dir) => Credentials::read(dir)?,
        };
        if config.secrets != SecretSource::Seeded {
            let mut parts = credentials.maas_api_key.splitn(3, ':');
            let (consumer_key, token_key, token_secret) =
                (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            front.api_keys = vec![fakes::http::ApiKey {
                consumer_key: consumer_key.to_owned(),
                token_key: token_key.to_owned(),
                token_secret: fakes::maas::Secret::new(token_secret),
                user: "controller".to_owned(),
            }];
            front.vault_tokens = vec![fakes::maas::Secret::new(&credentials.secrets_token)];
        }
        front.redfish_login = Some(fakes::maas::PowerCredential {
            user: REDFISH_EMULATOR_USER.to_owned(),
            password: fakes::maas::Secret::new(&credentials.redfish_password),
        });
        let site: SharedSite = front.shared();
        let mut hub = Hub::new(HubConfig::default());
        hub.issue_credential(CONTROLLER_PRINCIPAL, &credentials.hub_credential, u64::MAX);
        // The successor tokens the hub mints for credential rotations are as unguessable as the controller's own
        // credential, from which they are seeded: fresh at every start, or the `--seed`'s.
        let token_seed = credentials
            .hub_credential
            .bytes()
            .fold(0x726f_7461_7465, |acc, byte| fakes::maas::vault::splitmix64(acc ^ u64::from(byte)));
        hub.set_token_seed(token_seed);
        let hub: SharedHub = HubFront::new(hub).shared();
        let agents = Arc::new(Mutex::new(Agents::default()));
        let directory = Arc::new(Directory { site: site.clone(), hub: hub.clone(), agents: agents.clone() });
        let inventory = Arc::new(Mutex::new(InventoryFront { inventory: Inventory::new(), agents: directory }));
        let mut cloud = fakes::http::cloud::CloudFront::default();
        cloud.provider.add_region(SERVED_REGION, SERVED_REGION_QUOTA);
        for instance_type in SERVED_INSTANCE_TYPES {
            cloud.provider.add_instance_type(instance_type);
        }
        let cloud = Arc::new(Mutex::new(cloud));
        Ok((Fleet { site, hub, inventory, cloud, clock, agents }, credentials))
    }

    /// Advances the site to now, enrols the agents of freshly deployed machines, and heartbeats the enrolled ones
    /// every [`fakes::agent::HEARTBEAT_INTERVAL_MS`] of virtual time while their machine runs.
    pub fn tick(&self) {
        let now_ms = (self.clock)();
        let events = {
            let mut front = lock(&self.site);
            let mut events = std::mem::take(&mut front.events);
            events.extend(front.site.advance(now_ms));
            events
        };
        // The cloud's guests boot on the same clock; their events are logged, not kept (a served provider has no
        // hub agents behind it yet), so the front's buffer never grows.
        let guests = {
            let mut front = lock(&self.cloud);
            let mut guests = std::mem::take(&mut front.events);
            guests.extend(front.provider.poll(now_ms));
            guests
        };
        for guest in guests {
            tracing::info!(?guest, "cloud guest");
        }
        for event in events {
            match event.kind {
                SiteEventKind::AgentEnrol { machine, token, .. } => self.enrol(&machine, token, now_ms),
                SiteEventKind::StatusWritten { system_id, from, to } => {
                    tracing::info!(%system_id, from = ?from.map(|s| s.label()), to = to.label(), "status");
                }
                _ => {}
            }
        }
        let due: Vec<(String, String)> = lock(&self.agents)
            .enrolled
            .iter()
            .filter(|(_, (_, last_ms))| now_ms >= last_ms + fakes::agent::HEARTBEAT_INTERVAL_MS)
            .map(|(node, (token, _))| (node.clone(), token.clone()))
            .collect();
        let sweep_due = {
            let mut agents = lock(&self.agents);
            let due = now_ms >= agents.last_sweep_ms + fakes::hub::DEFAULT_SWEEP_INTERVAL_MS;
            if due {
                agents.last_sweep_ms = now_ms;
            }
            due
        };
        if sweep_due {
            let mut hub = lock(&self.hub);
            let mut events = Vec::new();
            hub.hub.sweep(now_ms, &mut events);
            hub.events.extend(events);
        }
        // The hub's events (its routers' and the sweeper's) go to the log; nothing else reads them here.
        for event in lock(&self.hub).drain_events() {
            tracing::debug!(?event, "hub");
        }
        // The audit log of refused registrations (never a token).
        for record in std::mem::take(&mut lock(&self.hub).audit) {
            tracing::warn!(agent = %record.agent, at_ms = record.at_ms, reason = %record.reason, "hub registration refused");
        }
        for (node, token) in due {
            let running = lock(&self.site).site.machine(&node).is_some_and(|m| m.agent_enrolled() && m.is_powered());
            if !running {
                continue;
            }
            let mut events = Vec::new();
            let request = HubRequest::Heartbeat { agent: node.clone(), token, revision: None };
            let _ = lock(&self.hub).hub.handle(now_ms, request, &mut events);
            if let Some(entry) = lock(&self.agents).enrolled.get_mut(&node) {
                entry.1 = now_ms;
            }
        }
    }

    /// The agent redeems its bootstrap token at the secrets store and registers at the hub with it.
    fn enrol(&self, machine: &str, token: fakes::maas::Secret, now_ms: u64) {
        let bearer = token.expose().to_owned();
        let redeemed = {
            let mut front = lock(&self.site);
            let mut events = Vec::new();
            let answer = front.site.handle_vault(now_ms, VaultRequest::RedeemToken { value: token }, &mut events);
            front.events.extend(events);
            answer
        };
        match redeemed {
            Ok(VaultResponse::Redeemed { node, .. }) if node == machine => {
                // The agent's later re-registrations over HTTP need this token (or its current credential).
                lock(&self.hub).bootstrap_tokens.insert(machine.to_owned(), fakes::maas::Secret::new(&bearer));
                let mut events = Vec::new();
                let request =
                    HubRequest::Register { agent: machine.to_owned(), kind: AgentKind::Durable, token: bearer.clone() };
                let _ = lock(&self.hub).hub.handle(now_ms, request, &mut events);
                lock(&self.inventory).inventory.enrol(machine, ALLOCATIONS_PER_NODE);
                lock(&self.agents).enrolled.insert(machine.to_owned(), (bearer, now_ms));
                tracing::info!(%machine, "agent enrolled at the hub");
            }
            other => tracing::warn!(%machine, answer = ?other.map(|_| ()), "agent enrolment refused"),
        }
    }
}

/// A fault injected through the admin API (`POST /admin/faults`); see `docs/serve.md`.
#[derive(Debug, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case", deny_unknown_fields)]
pub enum AdminFault {
    /// The next `count` region requests answer 503 with `Retry-After`.
    #[serde(rename = "maas_503")]
    Maas503 {
        count: u32,
        #[serde(default = "default_retry_after")]
        retry_after_s: u32,
    },
    /// The next `count` region requests answer 409 (a serialisation conflict) with `Retry-After: 5`.
    #[serde(rename = "maas_409")]
    Maas409 { count: u32 },
    /// The region answers nothing (`on = false` repairs it).
    MaasUnreachable { on: bool },
    /// The rack resolver answers SERVFAIL to every query (`on = false` repairs it).
    DnsServfail { on: bool },
    /// The machine's BMC answers nothing (`on = false` repairs it).
    BmcUnreachable { machine: String, on: bool },
    /// Every NIC MAC of the machine changes at its next power-on.
    MacDrift { machine: String },
    /// The next `count` disk erasures fail.
    EraseFailure { count: u32 },
    /// MAAS's status monitor stops (commissioning never times out) or runs again.
    StatusMonitor { alive: bool },
    /// The next `count` inventory requests answer 503.
    #[serde(rename = "inventory_503")]
    Inventory503 { count: u32 },
}

fn default_retry_after() -> u32 {
    10
}

impl Fleet {
    /// Applies `fault` to the models.
    pub fn inject(&self, fault: AdminFault) -> Result<(), String> {
        let mut front = lock(&self.site);
        let site = &mut front.site;
        let known = |machine: &str, site: &Site| {
            if site.machine(machine).is_some() { Ok(()) } else { Err(format!("no machine {machine:?}")) }
        };
        match fault {
            AdminFault::Maas503 { count, retry_after_s } => {
                (0..count).for_each(|_| site.region.fail_next_with_503(retry_after_s))
            }
            AdminFault::Maas409 { count } => (0..count).for_each(|_| site.region.fail_next_with_409(5)),
            AdminFault::MaasUnreachable { on } => site.region.set_reachable(!on),
            AdminFault::DnsServfail { on: true } => site.dns.set_fault(DnsFault::ServFailAll),
            AdminFault::DnsServfail { on: false } => site.dns.repair(),
            AdminFault::BmcUnreachable { machine, on } => {
                known(&machine, site)?;
                if on { site.bmc.set_fault(&machine, BmcFault::Unreachable) } else { site.bmc.clear_fault(&machine) }
            }
            AdminFault::MacDrift { machine } => {
                known(&machine, site)?;
                let seed = site.now_ms() ^ 0x6d61_635f_6472_6966;
                site.drift_macs_at_next_power_cycle(&machine, seed);
            }
            AdminFault::EraseFailure { count } => site.region.fail_next_erases(count),
            AdminFault::StatusMonitor { alive } => site.region.set_status_monitor_alive(alive),
            AdminFault::Inventory503 { count } => {
                drop(front);
                lock(&self.inventory).inventory.fail_next(count);
            }
        }
        Ok(())
    }

    /// The admin view: every machine with its MAAS record, and how often each system id entered each status.
    pub fn state(&self) -> serde_json::Value {
        let front = lock(&self.site);
        let site = &front.site;
        let mut entered: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
        for transition in site.region.transitions() {
            *entered
                .entry(transition.system_id.clone())
                .or_default()
                .entry(transition.to.label().to_owned())
                .or_default() += 1;
        }
        let machines: Vec<serde_json::Value> = site
            .machine_names()
            .iter()
            .map(|name| {
                let machine = site.machine(name).expect("named by the site");
                let pxe_mac = machine.hardware().pxe_nic().map(|nic| nic.mac.clone());
                let system_id = pxe_mac.as_deref().and_then(|mac| site.region.system_id_by_mac(mac));
                let status = system_id.as_deref().and_then(|id| site.region.status_of(id)).map(|s| s.label());
                json!({
                    "name": name,
                    "pxe_mac": pxe_mac,
                    "powered": machine.is_powered(),
                    "system_id": system_id,
                    "status": status,
                    "agent_enrolled": lock(&self.agents).enrolled.contains_key(name),
                })
            })
            .collect();
        json!({ "now_ms": site.now_ms(), "machines": machines, "entered": entered })
    }
}

async fn admin_state(State(fleet): State<Fleet>) -> Json<serde_json::Value> {
    Json(fleet.state())
}

/// The faults the admin API knows, for the error that names them.
pub const ADMIN_FAULTS: &str = "maas_503, maas_409, maas_unreachable, dns_servfail, bmc_unreachable, mac_drift, \
                                erase_failure, status_monitor, inventory_503";

async fn admin_fault(State(fleet): State<Fleet>, body: axum::body::Bytes) -> Response {
    let fault: AdminFault = match serde_json::from_slice(&body) {
        Ok(fault) => fault,
        Err(error) => {
            let message = format!("{error}; the faults are {ADMIN_FAULTS} (docs/serve.md)");
            return (StatusCode::BAD_REQUEST, Json(json!({ "error": message }))).into_response();
        }
    };
    match fleet.inject(fault) {
        Ok(()) => Json(json!({})).into_response(),
        Err(message) => (StatusCode::NOT_FOUND, Json(json!({ "error": message }))).into_response(),
    }
}

/// The hardware-sync seed a deployed machine's sshd runs (`fleetsim drive`'s SSH command reaches it here in tests
/// and in `docs/serve.md`'s walk-through, since the fake machines have no sshd).
async fn admin_ssh_seed(State(fleet): State<Fleet>, UrlPath(machine): UrlPath<String>) -> Response {
    let now_ms = (fleet.clock)();
    let mut front = lock(&fleet.site);
    let Some(node) = front.site.machine_mut(&machine) else {
        return (StatusCode::NOT_FOUND, Json(json!({ "error": format!("no machine {machine:?}") }))).into_response();
    };
    match node.seed_hw_sync(now_ms) {
        Ok(()) => Json(json!({})).into_response(),
        Err(fakes::maas::SeedError::NotRunning) => {
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "error": "connection refused" }))).into_response()
        }
        Err(refusal) => (StatusCode::CONFLICT, Json(json!({ "error": refusal.to_string() }))).into_response(),
    }
}

/// The admin API: `GET /admin/state` is a public read (it holds no secret); the routes that change the site take
/// the admin token as `Authorization: Bearer`.
fn admin_router(fleet: Fleet, admin_token: &str) -> Router {
    let changes = Router::new()
        .route("/admin/faults", post(admin_fault))
        .route("/admin/ssh/{machine}/seed-hardware-sync", post(admin_ssh_seed))
        .with_state(fleet.clone());
    Router::new().route("/admin/state", get(admin_state)).with_state(fleet).merge(bearer_only(changes, admin_token))
}

/// `router`, answering 401 `{"error":"unauthorized",...}` to any request without `Authorization: Bearer <token>`.
fn bearer_only(router: Router, token: &str) -> Router {
    let token: Arc<str> = Arc::from(token);
    router.layer(axum::middleware::from_fn(move |request: axum::extract::Request, next: axum::middleware::Next| {
        let token = token.clone();
        async move {
            let presented = request
                .headers()
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "))
                .map(str::trim);
            if presented.is_some_and(|presented| same_secret(presented.as_bytes(), token.as_bytes())) {
                next.run(request).await
            } else {
                let message = "Authorization: Bearer <token> is required (the token fleetsim serve printed)";
                (StatusCode::UNAUTHORIZED, Json(json!({ "error": "unauthorized", "message": message }))).into_response()
            }
        }
    }))
}

/// The host's wall clock, Unix ms: where the served site's time line starts (its datetimes on the wire).
#[expect(clippy::disallowed_methods, reason = "fleetsim serve runs in real time, for people and real clients")]
fn wall_clock_unix_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// The clock of a served site: wall ms since start, times `speed`.
#[expect(clippy::disallowed_methods, reason = "fleetsim serve runs in real time, for people and real clients")]
pub fn wall_clock(speed: u32) -> Clock {
    let start = std::time::Instant::now();
    Arc::new(move || u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX).saturating_mul(u64::from(speed)))
}

/// Why the fakes could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {error}")]
    Bind { addr: SocketAddr, error: std::io::Error },
    #[error("port {0} leaves no room for the six services after it")]
    Port(u16),
    #[error("cannot write {path}: {error}")]
    Write { path: PathBuf, error: std::io::Error },
    #[error("credential file {path}: {message}")]
    Credentials { path: PathBuf, message: String },
    #[error("no random source for the credentials: {0}")]
    Random(String),
    #[error(
        "--bind {0} is not loopback: the site would be served to everyone who can reach it with credentials \
         they could not know to be fresh; pass --credentials DIR (the seven 0600 files --write-site writes: {files})",
        files = CREDENTIAL_FILES.join(", ")
    )]
    OpenBind(IpAddr),
}

fn port_of(config: &ServeConfig, offset: u16) -> Result<u16, ServeError> {
    if config.port == 0 {
        return Ok(0);
    }
    config.port.checked_add(offset).ok_or(ServeError::Port(config.port))
}

async fn listen(config: &ServeConfig, offset: u16) -> Result<tokio::net::TcpListener, ServeError> {
    let addr = SocketAddr::new(config.bind, port_of(config, offset)?);
    tokio::net::TcpListener::bind(addr).await.map_err(|error| ServeError::Bind { addr, error })
}

fn spawn_http(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: crate::live::listen::Limits,
) -> Result<SocketAddr, ServeError> {
    let (addr, _) = crate::live::listen::spawn(listener, router, limits)
        .map_err(|error| ServeError::Bind { addr: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0), error })?;
    Ok(addr)
}

/// The resolver's UDP socket and its TCP listener on the same port, as a real resolver serves DNS (dig +tcp,
/// truncated answers). An ephemeral port is the TCP listener's, then taken for UDP too; when another socket already
/// holds that UDP port (the two protocols' ephemeral ports are drawn apart), another pair is drawn, a few times.
async fn bind_dns(
    addr: SocketAddr,
) -> Result<(tokio::net::UdpSocket, tokio::net::TcpListener, SocketAddr), ServeError> {
    const ATTEMPTS: u32 = 16;
    let failed = |addr, error| ServeError::Bind { addr, error };
    let mut attempt = 1;
    loop {
        let tcp = tokio::net::TcpListener::bind(addr).await.map_err(|error| failed(addr, error))?;
        let bound = tcp.local_addr().map_err(|error| failed(addr, error))?;
        match tokio::net::UdpSocket::bind(bound).await {
            Ok(udp) => return Ok((udp, tcp, bound)),
            Err(error) if addr.port() == 0 && error.kind() == std::io::ErrorKind::AddrInUse && attempt < ATTEMPTS => {
                attempt += 1;
            }
            Err(error) => return Err(failed(bound, error)),
        }
    }
}

/// Binds every service and starts serving on the current tokio runtime (the tasks run until the runtime stops).
pub async fn start(config: &ServeConfig) -> Result<(Served, Fleet), ServeError> {
    port_of(config, 5)?;
    if !config.bind.is_loopback() && !matches!(config.secrets, SecretSource::Files(_)) {
        return Err(ServeError::OpenBind(config.bind));
    }
    let clock = wall_clock(config.speed);
    let (fleet, credentials) = Fleet::new(config, clock.clone())?;
    // Every served credential, and every one minted from here on, is redacted by value from the logs.
    engine::secret::remember_every_secret();
    for value in credentials.values() {
        engine::secret::remember(value);
    }
    if let Some(token_secret) = credentials.maas_api_key.rsplit(':').next() {
        engine::secret::remember(token_secret);
    }
    let site_router = |router: fn(SharedSite, Clock) -> Router| router(fleet.site.clone(), clock.clone());
    let maas = spawn_http(listen(config, 0).await?, site_router(fakes::http::maas::router), config.limits)?;
    let redfish = spawn_http(listen(config, 1).await?, site_router(fakes::http::redfish::router), config.limits)?;
    let secrets = spawn_http(listen(config, 2).await?, site_router(fakes::http::vault::router), config.limits)?;
    let inventory = bearer_only(fakes::http::inventory::router(fleet.inventory.clone()), &credentials.inventory_token);
    let provider =
        bearer_only(fakes::http::cloud::router(fleet.cloud.clone(), clock.clone()), &credentials.provider_token);
    let hub_router = fakes::http::hub::router(fleet.hub.clone(), clock.clone()).merge(inventory).merge(provider);
    let hub = spawn_http(listen(config, 3).await?, hub_router, config.limits)?;
    let (socket, dns_tcp, dns) = bind_dns(SocketAddr::new(config.bind, port_of(config, 4)?)).await?;
    tokio::spawn(fakes::http::dns::serve(socket, fleet.site.clone(), clock.clone()));
    tokio::spawn(fakes::http::dns::serve_tcp(dns_tcp, fleet.site.clone(), clock.clone(), DNS_TCP_CONNECTIONS_MAX));
    let admin =
        spawn_http(listen(config, 5).await?, admin_router(fleet.clone(), &credentials.admin_token), config.limits)?;
    let ticker = fleet.clone();
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(std::time::Duration::from_millis(TICK_MS));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            ticker.tick();
        }
    });
    let served = Served {
        maas,
        redfish,
        secrets,
        hub,
        dns,
        admin,
        maas_api_key: credentials.maas_api_key.clone(),
        secrets_token: credentials.secrets_token.clone(),
        hub_credential: credentials.hub_credential.clone(),
        credentials,
        machines: config.machines.clone(),
        speed: config.speed,
    };
    if let Some(dir) = &config.write_site {
        write_site(dir, &served, &fleet)?;
    }
    Ok((served, fleet))
}

/// Writes `DIR/site.toml` for `fleetsim drive`, and the credential files (and the admin header), each mode 0600
/// whatever a file of that name had before (`crate::live::private`).
pub fn write_site(dir: &Path, served: &Served, fleet: &Fleet) -> Result<(), ServeError> {
    let write = |name: &str, text: &str, private: bool| -> Result<(), ServeError> {
        let path = dir.join(name);
        let failed = |error| ServeError::Write { path: path.clone(), error };
        std::fs::create_dir_all(dir).map_err(failed)?;
        if private {
            return crate::live::private::write_private(&path, text.as_bytes()).map_err(failed);
        }
        std::fs::write(&path, text).map_err(failed)
    };
    let credentials = &served.credentials;
    for (name, value) in CREDENTIAL_FILES.iter().zip(credentials.values()) {
        write(name, value, true)?;
    }
    // curl reads the header from the file (`-H @FILE`), so the admin token is in no command line.
    write("admin-header", &format!("Authorization: Bearer {}\n", credentials.admin_token), true)?;
    let admin_header = dir.join("admin-header");
    let mut site = format!(
        "# Written by `fleetsim serve`: the served fakes of one MAAS site, for `fleetsim drive` (docs/serve.md).\n\
         [maas]\nurl = \"http://{}/MAAS\"\napi_key_file = \"maas-api-key\"\n\
         # The fake's two VLANs are both untagged (vid 0): the site names them by their MAAS ids.\n\
         vlan_number = \"maas_id\"\n\n\
         [secrets]\nurl = \"http://{}\"\ntoken_file = \"secrets-token\"\n\n\
         [hub]\nurl = \"http://{}\"\nprincipal = \"{CONTROLLER_PRINCIPAL}\"\ncredential_file = \"hub-credential\"\n\n\
         [inventory]\nurl = \"http://{}\"\ntoken_file = \"inventory-token\"\n\n\
         [resolver]\naddress = \"{}\"\n\n\
         [ssh]\n# The fake machines have no sshd: the seed goes to the admin API instead of `ssh NODE ...`.\n\
         command = [\"curl\", \"-sf\", \"-H\", \"@{}\", \"-X\", \"POST\", \"http://{}/admin/ssh/{{node}}/seed-hardware-sync\"]\n\n",
        served.maas,
        served.secrets,
        served.hub,
        served.hub,
        served.dns,
        admin_header.display(),
        served.admin
    );
    // The engine's waits are in wall time; the site's are virtual: scale the polls and the stall window to the speed.
    let speed = u64::from(served.speed.max(1));
    site.push_str(&format!(
        "[policy]\n# Scaled to --speed {speed}: MAAS's minutes pass {speed} times faster here.\n\
         call_timeout_ms = 10000\npoll_ms = {}\nstall_window_ms = {}\n\n",
        (15_000 / speed).max(100),
        (1_200_000 / speed).max(10_000)
    ));
    let front = lock(&fleet.site);
    for name in &served.machines {
        let Some(machine) = front.site.machine(name) else { continue };
        let hardware = machine.hardware();
        let pxe_mac = hardware.pxe_nic().map(|nic| nic.mac.clone()).unwrap_or_default();
        let boot_disk = hardware.disks.iter().find(|disk| disk.boss).map(|disk| disk.model.clone()).unwrap_or_default();
        let roce = hardware.nics.iter().filter(|nic| nic.kind == fakes::maas::machine::NicKind::Roce).count();
        site.push_str(&format!(
            "[nodes.{name}]\nhostname = \"{name}\"\npxe_mac = \"{pxe_mac}\"\nbmc_address = \"{name}\"\n\
             boot_disk_model = \"{boot_disk}\"\nroce_nics = {roce}\n\n"
        ));
    }
    drop(front);
    write("site.toml", &site, false)
}

/// The lines `fleetsim serve` prints once every service listens.
pub fn banner(config: &ServeConfig, served: &Served) -> String {
    let mut text = format!(
        "fleetsim serve: seed {}, {} machines ({}), virtual time x{}\n",
        config.seed,
        served.machines.len(),
        served.machines.join(" "),
        config.speed
    );
    text.push_str(&format!("  MAAS          http://{}/MAAS/api/2.0/\n", served.maas));
    text.push_str(&format!("  Redfish       http://{}/redfish/v1/Systems\n", served.redfish));
    text.push_str(&format!("  secrets       http://{}/v1/\n", served.secrets));
    text.push_str(&format!(
        "  hub           http://{}/v1/hub/  (inventory: /v1/inventory/, cloud provider: /v1/regions/{SERVED_REGION}/vms)\n",
        served.hub
    ));
    text.push_str(&format!("  DNS           udp://{} and tcp://{}\n", served.dns, served.dns));
    text.push_str(&format!("  admin         http://{}/admin/state\n", served.admin));
    let credentials = &served.credentials;
    text.push_str(&format!("  MAAS API key  {}\n", credentials.maas_api_key));
    text.push_str(&format!("  secrets token {}\n", credentials.secrets_token));
    text.push_str(&format!(
        "  hub           principal {CONTROLLER_PRINCIPAL}, credential {}\n",
        credentials.hub_credential
    ));
    text.push_str(&format!("  inventory     Bearer {}\n", credentials.inventory_token));
    text.push_str(&format!("  provider      Bearer {}\n", credentials.provider_token));
    text.push_str(&format!("  admin         Bearer {} (POST routes)\n", credentials.admin_token));
    text.push_str(&format!(
        "  Redfish login {REDFISH_EMULATOR_USER}:{} (every system)\n",
        credentials.redfish_password
    ));
    text.push_str(
        match &config.secrets {
            SecretSource::Random => {
                "  credentials   random for this start (--seed N makes them reproducible)\n".to_owned()
            }
            SecretSource::Seeded => format!(
                "  credentials   REPRODUCIBLE: derived from seed {} (--seed); anyone who knows the seed knows them\n",
                config.seed
            ),
            SecretSource::Files(dir) => format!("  credentials   read from {}\n", dir.display()),
        }
        .as_str(),
    );
    if let Some(dir) = &config.write_site {
        text.push_str(&format!("  site file     {}\n", dir.join("site.toml").display()));
    }
    text.push_str("Ctrl-C stops.\n");
    text
}

/// `fleetsim serve`: serves until Ctrl-C. Returns the exit code.
pub fn command(config: &ServeConfig, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    if !config.bind.is_loopback() {
        let _ = writeln!(
            err,
            "warning: serving on {} (not loopback): anyone who can reach it and holds the credentials can use it",
            config.bind
        );
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = writeln!(err, "error: cannot start the runtime: {error}");
            return crate::model::exit::EXIT_OUTPUT_ERROR;
        }
    };
    runtime.block_on(async {
        let served = match start(config).await {
            Ok((served, _fleet)) => served,
            Err(error) => {
                let _ = writeln!(err, "error: {error}");
                return crate::model::exit::EXIT_BAD_INPUT;
            }
        };
        let _ = write!(out, "{}", banner(config, &served));
        let _ = out.flush();
        if let Err(error) = tokio::signal::ctrl_c().await {
            let _ = writeln!(err, "error: cannot wait for Ctrl-C: {error}");
            return crate::model::exit::EXIT_OUTPUT_ERROR;
        }
        let _ = writeln!(out, "stopped");
        crate::model::exit::EXIT_PASS
    })
}

/// The default machine names: `gpu-01` … `gpu-NN`.
pub fn machine_names(count: u32) -> Vec<String> {
    (1..=count).map(|index| format!("gpu-{index:02}")).collect()
}
