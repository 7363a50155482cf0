//! `fleetsim drive`: the engine for real. Onboarding and decommission workflows (and the operator recovery actions)
//! run against a MAAS site named by a site file, through the engine's real adapters (`engine::adapters::http`) over
//! hyper and real sockets, with the SQLite journal ([`engine::adapters::sqlite::SqliteJournal`]) and an audit log
//! beside it.
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

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use engine::adapters::sqlite::SqliteJournal;
use engine::decommission::driver::{DecommissionOutcome, DecommissionPorts, DecommissionRequest};
use engine::matrix::{RecoveryAction, Workflow, WorkflowState};
use engine::onboarding::driver::{NodeSpec, OnboardOutcome, OnboardPorts, OnboardRequest, OnboardingPolicy};
use engine::operator::{
    NextStep, apply_operator_action, observe_decommission_checkpoint, observe_onboarding_checkpoint, settle_after_run,
    workflow_status,
};
use engine::ports::{Endpoint, Journal, Signal, Signals, SshError, SshRequest, SshResponse, TransportError};
use engine::recovery::{ActorRole, AuditRecord, OperatorRequest};
use engine::secret::Secret;
use engine::workflow::{RetryPolicy, SitePolicy};
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
    let text = std::fs::read_to_string(path).map_err(|e| error(format!("{field}: cannot read: {e}")))?;
    let value = text.lines().next().unwrap_or_default().trim();
    if value.is_empty() {
        return Err(error(format!("{field}: the file is empty")));
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

/// The real adapters of one site, on hyper over TCP (and UDP for DNS).
pub struct Adapters {
    pub clock: WallClock,
    pub maas: Maas,
    pub resolver: Dns,
    pub secrets: SiteSecretsClient,
    pub hub: HubClient,
    pub fleet: FleetClient,
    pub ssh: CommandSsh,
    pub signals: PrintedSignals,
}

type Maas = engine::adapters::http::maas::MaasClient<Tcp, WallClock>;
type Dns = engine::adapters::http::dns::DnsClient<crate::wire::udp::UdpTransport>;
type SiteSecretsClient = engine::adapters::http::secrets::SecretsClient<Tcp>;
type HubClient = engine::adapters::http::hub::HubClient<Tcp>;
type FleetClient = engine::adapters::http::fleet::FleetClient<Tcp>;

impl Adapters {
    /// The onboarding workflow's ports: these adapters and `journal`.
    pub fn onboard_ports<'a>(
        &'a self,
        journal: &'a SqliteJournal,
    ) -> OnboardPorts<'a, WallClock, Maas, Dns, SiteSecretsClient, HubClient, CommandSsh, SqliteJournal, PrintedSignals>
    {
        OnboardPorts {
            clock: &self.clock,
            maas: &self.maas,
            resolver: &self.resolver,
            secrets: &self.secrets,
            hub: &self.hub,
            ssh: &self.ssh,
            journal,
            signals: &self.signals,
            rules: &engine::onboarding::driver::Matrix,
        }
    }

    /// The decommission workflow's ports: these adapters and `journal` (the hub only read: what references the node's
    /// agent, before the workflow's first mutation).
    pub fn decommission_ports<'a>(
        &'a self,
        journal: &'a SqliteJournal,
    ) -> DecommissionPorts<'a, WallClock, Maas, SiteSecretsClient, FleetClient, HubClient, SqliteJournal, PrintedSignals>
    {
        DecommissionPorts {
            clock: &self.clock,
            maas: &self.maas,
            secrets: &self.secrets,
            fleet: &self.fleet,
            hub: &self.hub,
            journal,
            signals: &self.signals,
        }
    }
}

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

    pub fn onboard_request(&self, name: &str, node: &NodeSection) -> OnboardRequest {
        OnboardRequest {
            workflow: crate::model::ids::onboarding_workflow_id(name),
            node: NodeSpec {
                name: name.to_owned(),
                hostname: node.hostname.clone(),
                pxe_mac: node.pxe_mac.to_ascii_lowercase(),
                bmc_address: node.bmc_address.clone(),
                boot_disk_model: node.boot_disk_model.clone(),
                roce_nics: node.roce_nics,
            },
            policy: OnboardingPolicy::Current,
            stall_window_ms: self.file.policy.stall_window_ms,
            poll_ms: self.file.policy.poll_ms,
            retry: RetryPolicy::default(),
            site_policy: self.site_policy(),
            bootstrap_token_ttl_ms: self.file.policy.bootstrap_token_ttl_ms,
        }
    }

    pub fn decommission_request(&self, name: &str, node: &NodeSection) -> DecommissionRequest {
        DecommissionRequest {
            workflow: crate::model::ids::decommission_workflow_id(name),
            node: name.to_owned(),
            hostname: node.hostname.clone(),
            poll_ms: self.file.policy.poll_ms,
            retry: RetryPolicy::default(),
            site_policy: self.site_policy(),
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

/// What an audit record holds instead of a text that was refused for carrying a credential.
pub const WITHHELD_TEXT: &str = "[withheld: it carried a credential, which is why the request was refused]";

/// The record as it may be written: when the request was refused because one of its texts carried a credential,
/// that text is withheld (the refusal says which field it was), so the audit keeps the refusal and not the secret.
pub fn withhold_refused_secret(record: &AuditRecord) -> AuditRecord {
    use engine::matrix::AuditField;
    use engine::recovery::{AuditOutcome, Refusal};
    let mut record = record.clone();
    if let AuditOutcome::Refused { refusal: Refusal::CarriesSecret { field }, .. } = record.outcome {
        let text = match field {
            AuditField::ActorIdAndRole => &mut record.actor_id,
            AuditField::Reason => &mut record.reason,
            AuditField::CorrelationId => &mut record.correlation_id,
            AuditField::WorkflowIdAndRunId => &mut record.workflow_id,
            AuditField::PriorWorkflowStateAndStage | AuditField::RequestedAction | AuditField::ExpectedNextState => {
                return record;
            }
        };
        *text = WITHHELD_TEXT.to_owned();
    }
    record
}

/// The SQLite journal as `drive` writes it: an audit line of a request refused for the credential it carried is
/// appended with that text withheld ([`withhold_refused_secret`]); every other line as it is.
pub struct WithholdingJournal<'a>(pub &'a SqliteJournal);

impl Journal for WithholdingJournal<'_> {
    async fn append(&self, record: &str) -> Result<(), engine::ports::JournalError> {
        match AuditRecord::decode(record) {
            Some(Ok(audit)) => self.0.append(&withhold_refused_secret(&audit).encode()).await,
            _ => self.0.append(record).await,
        }
    }

    async fn replay(&self) -> Result<Vec<String>, engine::ports::JournalError> {
        self.0.replay().await
    }
}

/// Creates `path` (mode 0600: the journal and the audit log name nodes, actors and their reasons) unless it exists.
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path)
}

/// Opens the SQLite journal, creating its file 0600 first; SQLite gives its `-wal` and `-shm` files the database
/// file's mode.
pub fn open_journal(path: &Path) -> Result<SqliteJournal, String> {
    create_private(path).map_err(|error| format!("{}: {error}", path.display()))?;
    SqliteJournal::open(path).map_err(|error| error.to_string())
}

/// Appends audit records to the audit log (created 0600), one JSON object a line, each as
/// [`withhold_refused_secret`] leaves it.
pub fn append_audit(path: &Path, records: &[&AuditRecord]) -> std::io::Result<()> {
    let mut file = create_private(path)?;
    for record in records {
        let record = withhold_refused_secret(record);
        writeln!(file, "{}", serde_json::to_string(&record).map_err(std::io::Error::other)?)?;
    }
    file.sync_all()
}

fn completed(state: WorkflowState) -> bool {
    matches!(state, WorkflowState::Completed | WorkflowState::CompletedWithFollowUpRecord)
}

/// Runs `command` against `site` with `adapters`; returns the exit code and prints a line per node.
pub async fn execute(
    site: &Site,
    adapters: &Adapters,
    command: DriveCommand,
    out: &mut dyn Write,
) -> Result<i32, String> {
    let journal = open_journal(&site.journal)?;
    match command {
        DriveCommand::Onboard { nodes } => {
            let nodes = site.nodes(&nodes).map_err(|error| error.to_string())?;
            let lines = journal.replay().await.map_err(|error| error.to_string())?;
            let ports = adapters.onboard_ports(&journal);
            let mut runs = Vec::new();
            let mut all_completed = true;
            for (name, node) in &nodes {
                let request = site.onboard_request(name, node);
                if engine::controller::machine::workflow_completed(&lines, &request.workflow) {
                    let _ = writeln!(out, "{name}: completed (by an earlier run; the journal says so)");
                    continue;
                }
                runs.push((name.clone(), request));
            }
            let outcomes =
                futures_util::future::join_all(runs.iter().map(|(_, request)| ports.run_onboarding(request))).await;
            for ((name, _), outcome) in runs.iter().zip(&outcomes) {
                all_completed &= completed(outcome.workflow_state);
                let _ = writeln!(out, "{}", onboard_line(name, outcome));
            }
            Ok(if all_completed { crate::model::exit::EXIT_PASS } else { crate::model::exit::EXIT_FAIL })
        }
        DriveCommand::Decommission { nodes } => {
            let nodes = site.nodes(&nodes).map_err(|error| error.to_string())?;
            let ports = adapters.decommission_ports(&journal);
            let requests: Vec<(String, DecommissionRequest)> =
                nodes.iter().map(|(name, node)| (name.clone(), site.decommission_request(name, node))).collect();
            let outcomes = futures_util::future::join_all(
                requests.iter().map(|(_, request)| ports.run_decommission_from(request, None)),
            )
            .await;
            let mut all_completed = true;
            for ((name, _), outcome) in requests.iter().zip(&outcomes) {
                all_completed &= completed(outcome.workflow_state);
                let _ = writeln!(out, "{}", decommission_line(name, outcome));
            }
            Ok(if all_completed { crate::model::exit::EXIT_PASS } else { crate::model::exit::EXIT_FAIL })
        }
        DriveCommand::Action { action, workflow, node, actor, role, reason, resolves_freeze } => {
            let (name, spec) = site.nodes(std::slice::from_ref(&node)).map_err(|error| error.to_string())?.remove(0);
            let workflow_id = crate::model::ids::workflow_id(workflow, &name);
            let correlation_id =
                format!("{workflow_id}/{}/{}", action.as_str(), engine::ports::Clock::now_ms(&adapters.clock));
            let request =
                OperatorRequest { actor_id: actor, actor_role: role, action, reason, correlation_id, resolves_freeze };
            let observed = if action == RecoveryAction::AdoptObservedState {
                let lines = journal.replay().await.map_err(|error| error.to_string())?;
                match (workflow, workflow_status(workflow, &workflow_id, lines.iter().map(String::as_str), false)) {
                    (Workflow::Onboarding, Ok(status)) => {
                        observe_onboarding_checkpoint(&adapters.maas, &adapters.hub, &name, &spec.pxe_mac, status.stage)
                            .await
                    }
                    (Workflow::Decommission, Ok(status)) => {
                        observe_decommission_checkpoint(
                            &adapters.maas,
                            &adapters.fleet,
                            &name,
                            &spec.hostname,
                            status.stage,
                        )
                        .await
                    }
                    (_, Err(_)) => false,
                }
            } else {
                false
            };
            let applied = apply_operator_action(
                &WithholdingJournal(&journal),
                &adapters.signals,
                workflow,
                &workflow_id,
                &request,
                observed,
            )
            .await
            .map_err(|error| error.to_string())?;
            let mut audit = vec![&applied.record];
            if let Some(settled) = &applied.settled {
                audit.push(settled);
            }
            append_audit(&site.audit_log, &audit).map_err(|error| format!("{}: {error}", site.audit_log.display()))?;
            let verdict = match &applied.authorized {
                Some(_) => "accepted",
                None => "refused",
            };
            let detail = match &applied.record.outcome {
                engine::recovery::AuditOutcome::Accepted { .. } => {
                    format!("next state {}", applied.record.expected_next_state.as_str())
                }
                engine::recovery::AuditOutcome::Refused { text, .. } => text.clone(),
            };
            let _ = writeln!(out, "{name}: {} {verdict} ({detail})", action.as_str());
            // `cancel` and `restart_clean` compensate the resting stage first (onboarding: a decommission's
            // compensations are its failures' own).
            if let NextStep::Compensate { stage: engine::matrix::Stage::Onboarding(stage), compensation }
            | NextStep::CompensateThenRun { stage: engine::matrix::Stage::Onboarding(stage), compensation } =
                applied.next
            {
                let ports = adapters.onboard_ports(&journal);
                let outcome =
                    ports.compensate_cancelled(&site.onboard_request(&name, &spec), stage, compensation).await;
                let _ = writeln!(out, "{name}: {}'s {} {}", action.as_str(), compensation.as_str(), outcome.as_str());
                if matches!(applied.next, NextStep::Compensate { .. }) {
                    return Ok(crate::model::exit::EXIT_PASS);
                }
            }
            if matches!(applied.next, NextStep::Nothing | NextStep::Compensate { .. }) {
                return Ok(if applied.authorized.is_some() {
                    crate::model::exit::EXIT_PASS
                } else {
                    crate::model::exit::EXIT_FAIL
                });
            }
            let line = match workflow {
                Workflow::Onboarding => {
                    let ports = adapters.onboard_ports(&journal);
                    onboard_line(&name, &ports.run_onboarding(&site.onboard_request(&name, &spec)).await)
                }
                Workflow::Decommission => {
                    let start_at = applied
                        .authorized
                        .as_ref()
                        .filter(|authorized| {
                            matches!(
                                authorized.action,
                                RecoveryAction::Resume
                                    | RecoveryAction::RetryStage
                                    | RecoveryAction::AdoptObservedState
                            )
                        })
                        .and_then(|authorized| match authorized.restart_at {
                            Some(engine::matrix::Stage::Decommission(stage)) => Some(stage),
                            _ => None,
                        });
                    let ports = adapters.decommission_ports(&journal);
                    decommission_line(
                        &name,
                        &ports.run_decommission_from(&site.decommission_request(&name, &spec), start_at).await,
                    )
                }
            };
            let settled =
                settle_after_run(&journal, workflow, &applied.record).await.map_err(|error| error.to_string())?;
            append_audit(&site.audit_log, &[&settled])
                .map_err(|error| format!("{}: {error}", site.audit_log.display()))?;
            let _ = writeln!(out, "{line}");
            Ok(crate::model::exit::EXIT_PASS)
        }
        DriveCommand::Status { nodes } => {
            let nodes = site.nodes(&nodes).map_err(|error| error.to_string())?;
            let lines = journal.replay().await.map_err(|error| error.to_string())?;
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
        maas,
        resolver: engine::adapters::http::dns::DnsClient::new(udp, nonce_seed, timeout_ms),
        secrets: engine::adapters::http::secrets::SecretsClient::new(
            transport(&file.secrets.url, "secrets.url")?,
            site.secrets_token.clone(),
            timeout_ms,
        ),
        hub: {
            let hub = engine::adapters::http::hub::HubClient::new(
                transport(&file.hub.url, "hub.url")?,
                &file.hub.principal,
                timeout_ms,
            );
            engine::ports::Hub::authenticate(&hub, &site.hub_credential)
                .await
                .map_err(|error| format!("hub: cannot authenticate as {}: {error}", file.hub.principal))?;
            hub
        },
        fleet: {
            let fleet = engine::adapters::http::fleet::FleetClient::new(
                transport(&file.inventory.url, "inventory.url")?,
                timeout_ms,
            );
            match &site.inventory_token {
                Some(token) => fleet.with_token(token.clone()),
                None => fleet,
            }
        },
        ssh: CommandSsh { argv: file.ssh.command.clone(), timeout_ms: timeout_ms.max(60_000) },
        signals: PrintedSignals,
    })
}

/// `fleetsim drive ...`: runs `command` on a current-thread runtime (the engine's futures are not `Send`). Returns
/// the exit code.
pub fn command(site: &Site, command: DriveCommand, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = writeln!(err, "error: cannot start the runtime: {error}");
            return crate::model::exit::EXIT_OUTPUT_ERROR;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let adapters = match adapters(site).await {
            Ok(adapters) => adapters,
            Err(error) => {
                let _ = writeln!(err, "error: {}: {error}", site.path.display());
                return crate::model::exit::EXIT_BAD_INPUT;
            }
        };
        match execute(site, &adapters, command, out).await {
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
        let withheld = withhold_refused_secret(&record);
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
        assert_eq!(withhold_refused_secret(&record), record);
    }
}
