//! `fleetsim drive`: the engine for real. The engine's controller service (`engine::controller`, the loop the
//! simulator runs on its controller host) runs on the real adapters of a MAAS site named by a site file
//! (`engine::adapters::http` over hyper and real sockets), with the SQLite journal
//! ([`engine::adapters::sqlite::SqliteJournal`]) and an audit log beside it; the command hands it onboarding,
//! decommission or recovery-action requests and prints each node's line as its work ends.
//!
//! A killed `drive` loses nothing: every workflow resumes from the journal when the same command runs again (a
//! completed workflow is not run twice, an unfinished one reruns with status-aware adoption, so no machine is
//! commissioned or deployed twice). Credentials are read from files that must be private (mode 0600): the command
//! refuses a file others can read, as ssh does with a private key.
//!
//! The site file (`docs/serve.md` shows one; `fleetsim serve --write-site DIR` writes one for its fakes):
//! `[maas] url, api_key_file`, `[secrets] url, token_file`, `[hub] url, principal, credential_file`,
//! `[inventory] url, token_file` (optional), `[resolver] address`, `[ssh] command` (an argv; `{node}` and `{operation}` are replaced),
//! optional `[state] journal, audit_log` and `[policy]`, and one `[nodes.NAME]` table per node.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use engine::adapters::sqlite::SqliteJournal;
use engine::controller::config::{ControllerConfig, RolloutSettings, RotationSettings, SiteSettings};
use engine::controller::host::{Absent, Host, Task, WorkerWork};
use engine::controller::machine::SiteJournal;
use engine::controller::request::{Desk, Event, Page, RecoveryOrder, Request};
use engine::controller::service::{Rules, Service};
use engine::decommission::driver::DecommissionOutcome;
use engine::matrix::{RecoveryAction, Workflow, WorkflowState};
use engine::onboarding::driver::{NodeSpec, OnboardOutcome};
use engine::operator::workflow_status;
use engine::ports::{Endpoint, Journal, Signal, Signals, SshError, SshRequest, SshResponse, TransportError};
use engine::recovery::{ActorRole, AuditRecord};
use engine::secret::Secret;
use engine::workflow::SitePolicy;
use serde::Deserialize;

use crate::model::spec::{Source, SpecError};

/// A site file, as `fleetsim drive` reads it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteFile {
    pub maas: MaasSection,
    pub secrets: SecretsSection,
    pub hub: HubSection,
    pub inventory: InventorySection,
    pub resolver: ResolverSection,
    pub ssh: SshSection,
    #[serde(default)]
    pub state: StateSection,
    #[serde(default)]
    pub policy: PolicySection,
    pub nodes: BTreeMap<String, NodeSection>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaasSection {
    /// The region's URL up to `/MAAS` (the client adds `/api/2.0/`).
    pub url: String,
    pub api_key_file: PathBuf,
    /// What the site's VLAN numbers are: the 802.1Q tag (`vid`, the default) or MAAS's VLAN id (`maas_id`, for a
    /// site whose VLANs are all untagged, as the served fakes').
    #[serde(default)]
    pub vlan_number: VlanNumberSetting,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VlanNumberSetting {
    #[default]
    Vid,
    MaasId,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsSection {
    pub url: String,
    pub token_file: PathBuf,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HubSection {
    pub url: String,
    pub principal: String,
    pub credential_file: PathBuf,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventorySection {
    pub url: String,
    /// The inventory's bearer token (mode 0600); `fleetsim serve` requires one. Absent: no `Authorization` sent.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolverSection {
    /// `IP:PORT` of the rack resolver (DNS over UDP).
    pub address: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshSection {
    /// The command that runs the hardware-sync seed on a node: an argv whose `{node}` and `{operation}` are replaced.
    /// Exit 0 is done; 255 (ssh's own failure) is no connection; anything else a refusal, with its stderr.
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSection {
    /// The SQLite journal (relative to the site file).
    #[serde(default = "default_journal")]
    pub journal: PathBuf,
    /// One JSON audit record a line, appended (relative to the site file).
    #[serde(default = "default_audit_log")]
    pub audit_log: PathBuf,
}

impl Default for StateSection {
    fn default() -> Self {
        StateSection { journal: default_journal(), audit_log: default_audit_log() }
    }
}

fn default_journal() -> PathBuf {
    PathBuf::from("fleetsim-journal.sqlite")
}

fn default_audit_log() -> PathBuf {
    PathBuf::from("fleetsim-audit.jsonl")
}

/// The workflows' timing and policy knobs (defaults: the engine's production values).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    #[serde(default = "default_call_timeout_ms")]
    pub call_timeout_ms: u64,
    #[serde(default = "default_poll_ms")]
    pub poll_ms: u64,
    #[serde(default = "default_stall_window_ms")]
    pub stall_window_ms: u64,
    #[serde(default = "default_bootstrap_token_ttl_ms")]
    pub bootstrap_token_ttl_ms: u64,
    /// The most onboarding runs in flight at once.
    #[serde(default = "default_concurrency")]
    pub concurrency: u32,
    #[serde(default)]
    pub no_erase_release_allowed: bool,
    #[serde(default)]
    pub maas_delete_required: bool,
    #[serde(default)]
    pub roce_mandatory: bool,
}

impl Default for PolicySection {
    fn default() -> Self {
        PolicySection {
            call_timeout_ms: default_call_timeout_ms(),
            poll_ms: default_poll_ms(),
            stall_window_ms: default_stall_window_ms(),
            bootstrap_token_ttl_ms: default_bootstrap_token_ttl_ms(),
            concurrency: default_concurrency(),
            no_erase_release_allowed: false,
            maas_delete_required: false,
            roce_mandatory: false,
        }
    }
}

fn default_call_timeout_ms() -> u64 {
    10_000
}
fn default_poll_ms() -> u64 {
    15_000
}
fn default_stall_window_ms() -> u64 {
    20 * 60_000
}
fn default_concurrency() -> u32 {
    SiteSettings::new(Vec::new()).concurrency
}
fn default_bootstrap_token_ttl_ms() -> u64 {
    engine::controller::config::BOOTSTRAP_TOKEN_TTL_MS
}

/// One node as the operator's inventory describes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    pub hostname: String,
    pub pxe_mac: String,
    pub bmc_address: String,
    pub boot_disk_model: String,
    pub roce_nics: u32,
}

/// A site file read and checked: its credentials loaded, its paths resolved against its directory.
#[derive(Debug)]
pub struct Site {
    pub file: SiteFile,
    pub path: PathBuf,
    pub maas_api_key: Secret,
    pub secrets_token: Secret,
    pub hub_credential: Secret,
    pub inventory_token: Option<Secret>,
    pub journal: PathBuf,
    pub audit_log: PathBuf,
}

/// Reads `path`: a malformed file names the file, the line and the field; a credential file that others can read is
/// refused.
pub fn load_site(path: &Path) -> Result<Site, SpecError> {
    let text = crate::model::spec::read(path)?;
    let display = path.display().to_string();
    let source = Source { path: &display, text: &text };
    let file: SiteFile = source.parse()?;
    if file.nodes.is_empty() {
        return Err(source.error_at(None, "nodes: the site file names no node ([nodes.NAME] tables)"));
    }
    if file.ssh.command.is_empty() {
        return Err(source.error_at(None, "ssh.command: must name a program"));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let resolve = |relative: &Path| if relative.is_absolute() { relative.to_owned() } else { dir.join(relative) };
    let maas_api_key = read_credential(&resolve(&file.maas.api_key_file), "maas.api_key_file")?;
    if maas_api_key.expose().split(':').count() != 3 {
        return Err(SpecError {
            path: resolve(&file.maas.api_key_file).display().to_string(),
            position: None,
            message: "maas.api_key_file: a MAAS API key is three parts, consumer_key:token_key:token_secret".into(),
        });
    }
    let secrets_token = read_credential(&resolve(&file.secrets.token_file), "secrets.token_file")?;
    let hub_credential = read_credential(&resolve(&file.hub.credential_file), "hub.credential_file")?;
    let inventory_token = match &file.inventory.token_file {
        Some(token_file) => Some(read_credential(&resolve(token_file), "inventory.token_file")?),
        None => None,
    };
    Ok(Site {
        journal: resolve(&file.state.journal),
        audit_log: resolve(&file.state.audit_log),
        file,
        path: path.to_owned(),
        maas_api_key,
        secrets_token,
        hub_credential,
        inventory_token,
    })
}

/// A credential file: its first line, trimmed. Refused unless only its owner may read it (mode 0600 or stricter).
pub fn read_credential(path: &Path, field: &str) -> Result<Secret, SpecError> {
    let error = |message: String| SpecError { path: path.display().to_string(), position: None, message };
    let metadata = std::fs::metadata(path).map_err(|e| error(format!("{field}: cannot read: {e}")))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(error(format!(
                "{field}: mode {mode:04o} lets others read the credential; run `chmod 600 {}`",
                path.display()
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = metadata;
    // A credential file is an input like any other: a regular file, read with a size cap.
    let text = crate::model::spec::read(path).map_err(|e| error(format!("{field}: {}", e.message)))?;
    let value = text.lines().next().unwrap_or_default().trim();
    if value.is_empty() {
        return Err(error(format!("{field}: the file is empty")));
    }
    // Every credential is redacted by its value wherever it appears (`engine::secret`): one too short to tell from a
    // word could not be.
    if value.chars().count() < engine::secret::REMEMBERED_LEN_MIN {
        return Err(error(format!(
            "{field}: a credential of {} characters is too short (at least {})",
            value.chars().count(),
            engine::secret::REMEMBERED_LEN_MIN
        )));
    }
    Ok(Secret::new(value))
}

/// The engine's clock in production: the host's wall clock, a monotonic clock, and tokio's timer.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    start: std::time::Instant,
}

impl WallClock {
    #[expect(clippy::disallowed_methods, reason = "fleetsim drive runs the engine for real, on the host's clocks")]
    pub fn new() -> WallClock {
        WallClock { start: std::time::Instant::now() }
    }
}

impl Default for WallClock {
    fn default() -> Self {
        WallClock::new()
    }
}

impl engine::ports::Clock for WallClock {
    #[expect(clippy::disallowed_methods, reason = "fleetsim drive runs the engine for real, on the host's clocks")]
    fn now_ms(&self) -> u64 {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    }

    fn monotonic_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    async fn sleep_ms(&self, duration_ms: u64) {
        tokio::time::sleep(std::time::Duration::from_millis(duration_ms)).await;
    }
}

/// The fleet signals a workflow raises: one line each on stderr as they happen, for the person running `drive`
/// (stdout keeps one outcome line per node, for scripts).
#[derive(Debug, Default)]
pub struct PrintedSignals;

impl Signals for PrintedSignals {
    fn emit(&self, signal: Signal) {
        tracing::info!(?signal, "signal");
        eprintln!("{signal:?}");
    }
}

/// The SSH port through the site's `ssh.command`: only the hardware-sync seed is asked of a MAAS machine.
#[derive(Debug)]
pub struct CommandSsh {
    pub argv: Vec<String>,
    pub timeout_ms: u64,
}

impl engine::ports::Ssh for CommandSsh {
    async fn run(&self, endpoint: &Endpoint, request: SshRequest) -> Result<SshResponse, SshError> {
        let SshRequest::SeedHardwareSync { operation_id } = request else {
            return Err(SshError::Refused(format!(
                "{} is a MAAS machine: only the hardware-sync seed runs",
                endpoint.node
            )));
        };
        let argv: Vec<String> = self
            .argv
            .iter()
            .map(|arg| arg.replace("{node}", &endpoint.node).replace("{operation}", &operation_id))
            .collect();
        let mut command = tokio::process::Command::new(&argv[0]);
        command.args(&argv[1..]).stdin(std::process::Stdio::null()).kill_on_drop(true);
        let output = tokio::time::timeout(std::time::Duration::from_millis(self.timeout_ms), command.output())
            .await
            .map_err(|_| SshError::Transport(TransportError::Timeout))?
            .map_err(|error| SshError::Refused(format!("cannot run {}: {error}", argv[0])))?;
        match output.status.code() {
            Some(0) => Ok(SshResponse::Done),
            // ssh's own failure (no route, refused, host key); curl's "could not connect" (7) in the served walk-through.
            Some(255 | 7) => Err(SshError::Transport(TransportError::ConnectionRefused)),
            _ => Err(SshError::Refused(String::from_utf8_lossy(&output.stderr).trim().chars().take(400).collect())),
        }
    }
}

/// What `fleetsim drive` does.
#[derive(Debug, Clone)]
pub enum DriveCommand {
    Onboard {
        nodes: Vec<String>,
    },
    Decommission {
        nodes: Vec<String>,
    },
    /// An operator recovery action on one node's workflow.
    Action {
        action: RecoveryAction,
        workflow: Workflow,
        node: String,
        actor: String,
        role: ActorRole,
        reason: String,
        resolves_freeze: bool,
    },
    /// Every named node's workflows as the journal tells them.
    Status {
        nodes: Vec<String>,
    },
}

/// hyper over real TCP.
type Tcp = crate::wire::http::HyperTransport<hyper_util::client::legacy::connect::HttpConnector>;

/// The real adapters of one site, on hyper over TCP (and UDP for DNS): one client of each service, shared by every
/// workflow the controller runs (one hub session, one MAAS nonce stream).
pub struct Adapters {
    pub clock: WallClock,
    pub maas: Rc<Maas>,
    pub resolver: Rc<Dns>,
    pub secrets: Rc<SiteSecretsClient>,
    pub hub: Rc<HubClient>,
    pub fleet: Rc<FleetClient>,
    pub ssh: Rc<CommandSsh>,
}

type Maas = engine::adapters::http::maas::MaasClient<Tcp, WallClock>;
type Dns = engine::adapters::http::dns::DnsClient<crate::wire::udp::UdpTransport>;
type SiteSecretsClient = engine::adapters::http::secrets::SecretsClient<Tcp>;
type HubClient = engine::adapters::http::hub::HubClient<Tcp>;
type FleetClient = engine::adapters::http::fleet::FleetClient<Tcp>;

impl Site {
    /// The nodes named, in the order given; an unknown one is an error naming the site file's nodes.
    pub fn nodes(&self, names: &[String]) -> Result<Vec<(String, NodeSection)>, SpecError> {
        let names: Vec<String> =
            if names.is_empty() { self.file.nodes.keys().cloned().collect() } else { names.to_vec() };
        names
            .into_iter()
            .map(|name| match self.file.nodes.get(&name) {
                Some(node) => Ok((name, node.clone())),
                None => Err(SpecError {
                    path: self.path.display().to_string(),
                    position: None,
                    message: format!(
                        "--nodes: no node {name:?} in the site file (it names {})",
                        self.file.nodes.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                }),
            })
            .collect()
    }

    fn site_policy(&self) -> SitePolicy {
        SitePolicy {
            roce_mandatory: self.file.policy.roce_mandatory,
            no_erase_release_allowed: self.file.policy.no_erase_release_allowed,
            maas_delete_required: self.file.policy.maas_delete_required,
        }
    }

    /// `name` as the operator's inventory records it.
    pub fn node_spec(&self, name: &str) -> Option<NodeSpec> {
        let node = self.file.nodes.get(name)?;
        Some(NodeSpec {
            name: name.to_owned(),
            hostname: node.hostname.clone(),
            pxe_mac: node.pxe_mac.to_ascii_lowercase(),
            bmc_address: node.bmc_address.clone(),
            boot_disk_model: node.boot_disk_model.clone(),
            roce_nics: node.roce_nics,
        })
    }

    /// The controller's configuration for one `drive` command: the site's workflows under the site file's policy,
    /// taking `machines` up at once (the nodes an `onboard` names; none for the other commands, which ask), with no
    /// rollout, no instance lifecycle and no sensor of its own.
    pub fn controller_config(&self, machines: Vec<String>) -> ControllerConfig {
        let policy = &self.file.policy;
        let site = SiteSettings {
            stall_window_ms: policy.stall_window_ms,
            poll_ms: policy.poll_ms,
            concurrency: policy.concurrency,
            site_policy: self.site_policy(),
            bootstrap_token_ttl_ms: policy.bootstrap_token_ttl_ms,
            ..SiteSettings::new(machines)
        };
        ControllerConfig {
            site: Some(site),
            rollout: RolloutSettings::default(),
            rotation: RotationSettings::default(),
            sensor: None,
            instances: None,
        }
    }
}

fn outcome_line(
    name: &str,
    state: WorkflowState,
    stage: Option<String>,
    class: Option<String>,
    evidence: &[String],
) -> String {
    let mut line = format!("{name}: {}", state.as_str());
    if let Some(stage) = stage {
        line.push_str(&format!(" at {stage}"));
    }
    if let Some(class) = class {
        line.push_str(&format!(" ({class})"));
    }
    if let Some(first) = evidence.first() {
        line.push_str(&format!(": {first}"));
    }
    line
}

fn onboard_line(name: &str, outcome: &OnboardOutcome) -> String {
    outcome_line(
        name,
        outcome.workflow_state,
        outcome.stage.map(|stage| stage.as_str().to_owned()),
        outcome.class.map(|class| class.as_str().to_owned()),
        &outcome.evidence,
    )
}

/// A decommission's line; a refused one names every reference to its worker.
fn decommission_line(name: &str, outcome: &DecommissionOutcome) -> String {
    if !outcome.refused.is_empty() {
        let references: Vec<String> = outcome.refused.iter().map(ToString::to_string).collect();
        let why = format!("refused, nothing changed: {}", references.join("; "));
        let stage = outcome.stage.map(|stage| stage.as_str().to_owned());
        let class = outcome.class.map(|class| class.as_str().to_owned());
        return outcome_line(name, outcome.workflow_state, stage, class, &[why]);
    }
    outcome_line(
        name,
        outcome.workflow_state,
        outcome.stage.map(|stage| stage.as_str().to_owned()),
        outcome.class.map(|class| class.as_str().to_owned()),
        &outcome.evidence,
    )
}

/// What an audit record holds instead of a text that carried a credential.
pub const WITHHELD_TEXT: &str = "[withheld: it carried a credential]";

/// The record as it may be written: every text of it that carries a credential — by the marker, or by the value of
/// any credential this process knows (`engine::secret::carries_secret`) — is withheld whole, whichever field the
/// refusal named (an actor and a reason may both carry one; a request refused for a blank actor may carry one in
/// its reason). The refusal's own text names the field, so the audit keeps the refusal and not the secret.
pub fn withhold_secrets(record: &AuditRecord) -> AuditRecord {
    use engine::recovery::AuditOutcome;
    let mut record = record.clone();
    for text in [&mut record.actor_id, &mut record.reason, &mut record.correlation_id, &mut record.workflow_id] {
        if engine::secret::carries_secret(text) {
            *text = WITHHELD_TEXT.to_owned();
        }
    }
    if let AuditOutcome::Refused { text, .. } = &mut record.outcome {
        *text = engine::secret::redact(text);
    }
    record
}

/// The SQLite journal as `drive` writes it: an audit line with every text that carries a credential withheld
/// ([`withhold_secrets`]); every other line with each credential in it redacted (`engine::secret::redact`).
pub struct WithholdingJournal<'a>(pub &'a SqliteJournal);

impl Journal for WithholdingJournal<'_> {
    async fn append(&self, record: &str) -> Result<(), engine::ports::JournalError> {
        self.0.append(&journal_row(record)).await
    }

    async fn replay(&self) -> Result<Vec<String>, engine::ports::JournalError> {
        self.0.replay().await
    }
}

/// Opens `path` for appending, mode 0600 (the journal and the audit log name nodes, actors and their reasons): created
/// so, or an existing wider file tightened (`crate::live::private`).
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    crate::live::private::open_private_append(path)
}

/// Opens the SQLite journal, its file 0600 first (created or tightened), and its `-wal` and `-shm` files tightened if a
/// wider mode left them; SQLite gives the ones it creates the database file's mode.
pub fn open_journal(path: &Path) -> Result<SqliteJournal, String> {
    create_private(path).map_err(|error| format!("{}: {error}", path.display()))?;
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        crate::live::private::tighten_if_present(Path::new(&side)).map_err(|error| error.to_string())?;
    }
    Ok(SqliteJournal::open(path).map_err(|error| error.to_string())?.rewriting(journal_row))
}

/// A journal row as `drive` stores it, whoever appends it (a workflow, an operator action, its settlement): an audit
/// line as [`withhold_secrets`] leaves it, any other line with each credential redacted.
fn journal_row(record: &str) -> String {
    match AuditRecord::decode(record) {
        Some(Ok(audit)) => withhold_secrets(&audit).encode(),
        _ => engine::secret::redact(record),
    }
}

/// Appends audit records to the audit log (0600), one JSON object a line, each as [`withhold_secrets`] leaves it.
pub fn append_audit(path: &Path, records: &[&AuditRecord]) -> std::io::Result<()> {
    let mut file = create_private(path)?;
    for record in records {
        let record = withhold_secrets(record);
        writeln!(file, "{}", serde_json::to_string(&record).map_err(std::io::Error::other)?)?;
    }
    file.sync_all()
}

fn completed(state: WorkflowState) -> bool {
    matches!(state, WorkflowState::Completed | WorkflowState::CompletedWithFollowUpRecord)
}

/// The journal as `drive` writes it, shared by every workflow: [`WithholdingJournal`]'s rule on an owned handle.
#[derive(Clone)]
pub struct DriveJournal(pub Rc<SqliteJournal>);

impl Journal for DriveJournal {
    async fn append(&self, record: &str) -> Result<(), engine::ports::JournalError> {
        WithholdingJournal(&self.0).append(record).await
    }

    async fn replay(&self) -> Result<Vec<String>, engine::ports::JournalError> {
        self.0.replay().await
    }

    async fn replay_subject(&self, subject: &str) -> Result<Vec<String>, engine::ports::JournalError> {
        self.0.replay_subject(subject).await
    }
}

/// Where `drive` and the controller service meet: the requests the command makes, and the events the service
/// reports back, each with its wake-up.
#[derive(Default)]
struct Exchange {
    inbox: RefCell<VecDeque<Request>>,
    inbox_notify: tokio::sync::Notify,
    events: RefCell<VecDeque<Event>>,
    events_notify: tokio::sync::Notify,
}

impl Exchange {
    fn submit(&self, request: Request) {
        self.inbox.borrow_mut().push_back(request);
        self.inbox_notify.notify_one();
    }

    /// The next event the service reported.
    async fn next_event(&self) -> Event {
        loop {
            if let Some(event) = self.events.borrow_mut().pop_front() {
                return event;
            }
            self.events_notify.notified().await;
        }
    }
}

/// What `drive` gives the engine's controller service: the site's real adapters, the SQLite journal, and the
/// exchange with the command.
struct DriveHost {
    site: Rc<Site>,
    adapters: Rc<Adapters>,
    journal: DriveJournal,
    exchange: Rc<Exchange>,
}

impl Host for DriveHost {
    type Clock = WallClock;
    type Journal = DriveJournal;
    type Signals = PrintedSignals;
    type Hub = Rc<HubClient>;
    type Jitter = Absent;
    type Secrets = Absent;
    type Artifacts = Absent;
    type Verifier = Absent;
    type WorkerSsh = Absent;
    type Maas = Rc<Maas>;
    type Resolver = Rc<Dns>;
    type SiteSecrets = Rc<SiteSecretsClient>;
    type SiteSsh = Rc<CommandSsh>;
    type Fleet = Rc<FleetClient>;
    type Provider = Absent;
    type Platform = Absent;
    type Agents = Absent;

    fn clock(&self) -> WallClock {
        self.adapters.clock
    }
    fn journal(&self) -> DriveJournal {
        self.journal.clone()
    }
    fn signals(&self) -> PrintedSignals {
        PrintedSignals
    }
    fn hub(&self) -> Rc<HubClient> {
        self.adapters.hub.clone()
    }
    fn jitter(&self) -> Absent {
        Absent
    }
    fn secrets(&self) -> Absent {
        Absent
    }
    fn artifacts(&self) -> Absent {
        Absent
    }
    fn verifier(&self) -> Absent {
        Absent
    }
    fn worker_ssh(&self, _work: WorkerWork) -> Absent {
        Absent
    }
    fn maas(&self, _workflow: &str) -> Rc<Maas> {
        self.adapters.maas.clone()
    }
    fn resolver(&self) -> Rc<Dns> {
        self.adapters.resolver.clone()
    }
    fn site_secrets(&self) -> Rc<SiteSecretsClient> {
        self.adapters.secrets.clone()
    }
    fn site_ssh(&self) -> Rc<CommandSsh> {
        self.adapters.ssh.clone()
    }
    fn fleet(&self) -> Rc<FleetClient> {
        self.adapters.fleet.clone()
    }
    fn provider(&self) -> Absent {
        Absent
    }
    fn platform(&self) -> Absent {
        Absent
    }
    fn agents(&self) -> Absent {
        Absent
    }

    fn spawn(&self, task: Task) {
        drop(tokio::task::spawn_local(task));
    }

    fn submit(&self, request: Request) {
        self.exchange.submit(request);
    }
    fn take_request(&self, desk: Desk) -> Option<Request> {
        let mut inbox = self.exchange.inbox.borrow_mut();
        let index = inbox.iter().position(|request| request.desk() == desk)?;
        inbox.remove(index)
    }
    async fn requests_waiting(&self, desk: Desk) {
        // Only the site desk takes requests: `drive` asks for nothing else.
        if desk == Desk::Site {
            self.exchange.inbox_notify.notified().await;
        } else {
            std::future::pending::<()>().await;
        }
    }

    fn page(&self, _page: &Page) -> Vec<Request> {
        Vec::new()
    }
    fn emit(&self, event: Event) {
        self.exchange.events.borrow_mut().push_back(event);
        self.exchange.events_notify.notify_one();
    }

    fn racked(&self, machine: &str) -> Option<NodeSpec> {
        self.site.node_spec(machine)
    }
    fn racked_by_mac(&self, mac: &str) -> Option<String> {
        self.site
            .file
            .nodes
            .iter()
            .find(|(_, node)| node.pxe_mac.eq_ignore_ascii_case(mac))
            .map(|(name, _)| name.clone())
    }
    fn process(&self) -> String {
        format!("fleetsim-drive@pid-{}", std::process::id())
    }
}

/// Runs `command` against `site` with `adapters`: the engine's controller service takes the work as a controller
/// would, and the command prints a line per node as its work ends. Returns the exit code.
pub async fn execute(
    site: &Rc<Site>,
    adapters: Adapters,
    command: DriveCommand,
    out: &mut dyn Write,
) -> Result<i32, String> {
    let journal = Rc::new(open_journal(&site.journal)?);
    let lines = journal.replay().await.map_err(|error| error.to_string())?;
    let exchange = Rc::new(Exchange::default());
    let host = DriveHost {
        site: site.clone(),
        adapters: Rc::new(adapters),
        journal: DriveJournal(journal),
        exchange: exchange.clone(),
    };
    match command {
        DriveCommand::Onboard { nodes } => {
            let names: Vec<String> =
                site.nodes(&nodes).map_err(|error| error.to_string())?.into_iter().map(|(name, _)| name).collect();
            let config = site.controller_config(names.clone());
            let known = SiteJournal::read(&names, &lines);
            let mut waiting = std::collections::BTreeSet::new();
            let mut all_completed = true;
            for name in &names {
                if known.completed(name) {
                    let _ = writeln!(out, "{name}: completed (by an earlier run; the journal says so)");
                } else if known.decommission_began(name) {
                    all_completed = false;
                    let _ = writeln!(out, "{name}: not onboarded: its decommission began (the journal says so)");
                } else {
                    waiting.insert(name.clone());
                }
            }
            Service::start(host, config, Rules::default(), &lines);
            let mut outcomes = BTreeMap::new();
            while outcomes.len() < waiting.len() {
                if let Event::OnboardingEnded { machine, outcome } = exchange.next_event().await {
                    outcomes.insert(machine, outcome);
                }
            }
            for name in names.iter().filter(|name| waiting.contains(*name)) {
                let outcome = &outcomes[name];
                all_completed &= completed(outcome.workflow_state);
                let _ = writeln!(out, "{}", onboard_line(name, outcome));
            }
            Ok(if all_completed { crate::model::exit::EXIT_PASS } else { crate::model::exit::EXIT_FAIL })
        }
        DriveCommand::Decommission { nodes } => {
            let names: Vec<String> =
                site.nodes(&nodes).map_err(|error| error.to_string())?.into_iter().map(|(name, _)| name).collect();
            Service::start(host, site.controller_config(Vec::new()), Rules::default(), &lines);
            for name in &names {
                exchange.submit(Request::Decommission { machine: name.clone() });
            }
            let mut outcomes = BTreeMap::new();
            while outcomes.len() < names.len() {
                if let Event::DecommissionEnded { machine, outcome } = exchange.next_event().await {
                    outcomes.insert(machine, outcome);
                }
            }
            let mut all_completed = true;
            for name in &names {
                let outcome = &outcomes[name];
                all_completed &= completed(outcome.workflow_state);
                let _ = writeln!(out, "{}", decommission_line(name, outcome));
            }
            Ok(if all_completed { crate::model::exit::EXIT_PASS } else { crate::model::exit::EXIT_FAIL })
        }
        DriveCommand::Action { action, workflow, node, actor, role, reason, resolves_freeze } => {
            let (name, _) = site.nodes(std::slice::from_ref(&node)).map_err(|error| error.to_string())?.remove(0);
            Service::start(host, site.controller_config(Vec::new()), Rules::default(), &lines);
            let order = RecoveryOrder { machine: name.clone(), workflow, action, actor, role, reason, resolves_freeze };
            exchange.submit(Request::Recovery(order));
            let mut refused = false;
            loop {
                match exchange.next_event().await {
                    Event::Audit(record) => {
                        append_audit(&site.audit_log, &[&record])
                            .map_err(|error| format!("{}: {error}", site.audit_log.display()))?;
                        if record.actual_next_state.is_none() {
                            let (verdict, detail) = match &record.outcome {
                                engine::recovery::AuditOutcome::Accepted { .. } => {
                                    ("accepted", format!("next state {}", record.expected_next_state.as_str()))
                                }
                                engine::recovery::AuditOutcome::Refused { text, .. } => ("refused", text.clone()),
                            };
                            refused = verdict == "refused";
                            let _ = writeln!(out, "{name}: {} {verdict} ({detail})", action.as_str());
                        }
                    }
                    Event::Compensated { compensation, outcome, .. } => {
                        let _ = writeln!(
                            out,
                            "{name}: {}'s {} {}",
                            action.as_str(),
                            compensation.as_str(),
                            outcome.as_str()
                        );
                    }
                    Event::OnboardingEnded { outcome, .. } => {
                        let _ = writeln!(out, "{}", onboard_line(&name, &outcome));
                    }
                    Event::DecommissionEnded { outcome, .. } => {
                        let _ = writeln!(out, "{}", decommission_line(&name, &outcome));
                    }
                    Event::RecoveryEnded { error: Some(error), .. } => return Err(error),
                    Event::RecoveryEnded { error: None, .. } => break,
                    _ => {}
                }
            }
            Ok(if refused { crate::model::exit::EXIT_FAIL } else { crate::model::exit::EXIT_PASS })
        }
        DriveCommand::Status { nodes } => {
            let nodes = site.nodes(&nodes).map_err(|error| error.to_string())?;
            for (name, _) in nodes {
                for workflow in [Workflow::Onboarding, Workflow::Decommission] {
                    let workflow_id = crate::model::ids::workflow_id(workflow, &name);
                    let started = lines.iter().any(|line| line.contains(&format!("\"{workflow_id}\"")));
                    if !started {
                        continue;
                    }
                    match workflow_status(workflow, &workflow_id, lines.iter().map(String::as_str), false) {
                        Ok(status) => {
                            let _ = writeln!(
                                out,
                                "{workflow_id}: {} at {} (run {}{})",
                                status.state.as_str(),
                                status.stage.as_str(),
                                status.run_id,
                                if status.frozen { ", frozen" } else { "" }
                            );
                        }
                        Err(error) => {
                            let _ = writeln!(out, "{workflow_id}: unreadable journal: {error}");
                        }
                    }
                }
            }
            Ok(crate::model::exit::EXIT_PASS)
        }
    }
}

/// The region's base URL for the transport: the site file names MAAS as users do (`http://host:5240/MAAS`), and the
/// client's paths start at `/MAAS/api/2.0/`.
fn maas_base(url: &str) -> Result<String, String> {
    let trimmed = url.trim_end_matches('/');
    match trimmed.strip_suffix("/MAAS") {
        Some(base) if base.starts_with("http://") => Ok(base.to_owned()),
        _ => Err(format!("maas.url: {url:?} is not a MAAS URL of the form http://HOST:PORT/MAAS")),
    }
}

/// The site's real adapters over TCP and UDP.
pub async fn adapters(site: &Site) -> Result<Adapters, String> {
    use crate::wire::http::HyperTransport;
    let file = &site.file;
    let timeout_ms = file.policy.call_timeout_ms;
    let clock = WallClock::new();
    let transport = |url: &str, field: &str| {
        HyperTransport::tcp(url.trim_end_matches('/')).map_err(|error| format!("{field}: {url:?}: {error}"))
    };
    // A fresh nonce stream per process: the wall clock and the process id, so a restarted `drive` never repeats one.
    let nonce_seed = engine::ports::Clock::now_ms(&clock) ^ (u64::from(std::process::id()) << 40);
    let maas = engine::adapters::http::maas::MaasClient::new(
        transport(&maas_base(&file.maas.url)?, "maas.url")?,
        clock,
        &site.maas_api_key,
        nonce_seed,
        timeout_ms,
    )
    .map_err(|error| format!("{}: {error}", file.maas.api_key_file.display()))?
    .with_vlan_number(match file.maas.vlan_number {
        VlanNumberSetting::Vid => engine::adapters::http::maas::VlanNumber::Vid,
        VlanNumberSetting::MaasId => engine::adapters::http::maas::VlanNumber::MaasId,
    });
    let resolver_addr: std::net::SocketAddr = file
        .resolver
        .address
        .parse()
        .map_err(|error| format!("resolver.address: {:?}: {error}", file.resolver.address))?;
    let udp = crate::wire::udp::UdpTransport::new(resolver_addr);
    Ok(Adapters {
        clock,
        maas: Rc::new(maas),
        resolver: Rc::new(engine::adapters::http::dns::DnsClient::new(udp, nonce_seed, timeout_ms)),
        secrets: Rc::new(engine::adapters::http::secrets::SecretsClient::new(
            transport(&file.secrets.url, "secrets.url")?,
            site.secrets_token.clone(),
            timeout_ms,
        )),
        hub: Rc::new({
            let hub = engine::adapters::http::hub::HubClient::new(
                transport(&file.hub.url, "hub.url")?,
                &file.hub.principal,
                timeout_ms,
            );
            engine::ports::Hub::authenticate(&hub, &site.hub_credential)
                .await
                .map_err(|error| format!("hub: cannot authenticate as {}: {error}", file.hub.principal))?;
            hub
        }),
        fleet: Rc::new({
            let fleet = engine::adapters::http::fleet::FleetClient::new(
                transport(&file.inventory.url, "inventory.url")?,
                timeout_ms,
            );
            match &site.inventory_token {
                Some(token) => fleet.with_token(token.clone()),
                None => fleet,
            }
        }),
        ssh: Rc::new(CommandSsh { argv: file.ssh.command.clone(), timeout_ms: timeout_ms.max(60_000) }),
    })
}

/// `fleetsim drive ...`: runs `command` on a current-thread runtime (the engine's futures are not `Send`). Returns
/// the exit code.
pub fn command(site: Site, command: DriveCommand, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let site = Rc::new(site);
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = writeln!(err, "error: cannot start the runtime: {error}");
            return crate::model::exit::EXIT_OUTPUT_ERROR;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let adapters = match adapters(&site).await {
            Ok(adapters) => adapters,
            Err(error) => {
                let _ = writeln!(err, "error: {}: {error}", site.path.display());
                return crate::model::exit::EXIT_BAD_INPUT;
            }
        };
        match execute(&site, adapters, command, out).await {
            Ok(code) => code,
            Err(error) => {
                let _ = writeln!(err, "error: {error}");
                crate::model::exit::EXIT_BAD_INPUT
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::recovery::{AuditOutcome, Refusal};

    fn refused_record(reason: &str) -> AuditRecord {
        use engine::matrix::{AuditField, OnboardingStage, Stage};
        use engine::recovery::Lifecycle;
        let refusal = Refusal::CarriesSecret { field: AuditField::Reason };
        AuditRecord {
            actor_id: "alice".into(),
            actor_role: ActorRole::Operator,
            workflow_id: "onboard-node-01".into(),
            run_id: 1,
            prior_state: Lifecycle::Workflow(WorkflowState::FailedRetryable),
            prior_stage: Stage::Onboarding(OnboardingStage::CommissionNode),
            requested_action: RecoveryAction::Resume,
            reason: reason.into(),
            expected_next_state: Lifecycle::Workflow(WorkflowState::FailedRetryable),
            correlation_id: "c-1".into(),
            outcome: AuditOutcome::Refused { refusal, text: refusal.to_string() },
            actual_next_state: None,
        }
    }

    #[test]
    fn a_reason_refused_for_its_credential_is_withheld_from_both_audits_created_0600() {
        use std::os::unix::fs::PermissionsExt;
        let record = refused_record("my token fleetsim-secret-xyz");
        assert!(matches!(record.outcome, AuditOutcome::Refused { refusal: Refusal::CarriesSecret { .. }, .. }));
        let withheld = withhold_secrets(&record);
        assert_eq!(withheld.reason, WITHHELD_TEXT);
        assert_eq!(AuditRecord { reason: record.reason.clone(), ..withheld.clone() }, record, "only the reason");

        let dir = tempfile::tempdir().unwrap();
        let (journal_path, audit_path) = (dir.path().join("journal.sqlite"), dir.path().join("audit.jsonl"));
        let journal = open_journal(&journal_path).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let withholding = WithholdingJournal(&journal);
            withholding.append(&record.encode()).await.unwrap();
            withholding.append("stage onboard-node-01 other line").await.unwrap();
            let lines = withholding.replay().await.unwrap();
            assert_eq!(lines.len(), 2);
            assert!(
                lines.iter().all(|line| !line.contains("fleetsim-secret-xyz") && !line.contains("my token")),
                "{lines:?}"
            );
            assert_eq!(lines[1], "stage onboard-node-01 other line", "other lines as they are");
        });
        append_audit(&audit_path, &[&record]).unwrap();
        let audit = std::fs::read_to_string(&audit_path).unwrap();
        assert!(!audit.contains("fleetsim-secret-xyz") && audit.contains("[withheld: "), "{audit}");
        drop(journal);
        for path in [&journal_path, &audit_path] {
            let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
        }
    }

    #[test]
    fn a_request_refused_for_another_reason_keeps_its_reason() {
        let mut record = refused_record("the disk was replaced");
        record.outcome = AuditOutcome::Refused { refusal: Refusal::AlreadyFrozen, text: "frozen".into() };
        assert_eq!(withhold_secrets(&record), record);
    }
}
