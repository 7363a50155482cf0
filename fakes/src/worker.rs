//! The fake ovswarm worker node: the few files under `~/.mac` that carry its installed identity, its installed
//! source and venv, its generation barrier, its `ovswarm-agent` service and its staged capsules — plus the drift shapes
//! the 2026-09-21 deployment found on real workers (`seeds/003_65d56b75d2c60639.txt`).
//!
//! The model reports; it never classifies. [`Worker::observe`] returns what a read-only SSH preflight would see, raw,
//! and deciding whether that is a coherent installed node, a retained partial successor or a node to quarantine is the
//! engine's job. A fake that classified would hide exactly the misunderstanding the simulator is there to catch.
//!
//! Known deviations from a real worker: the filesystem is a flat map of the paths the deployment touches (no parent
//! directories, no `/tmp`), a symlink's target need not exist, and the manifest signature is a recognisable string
//! rather than a cryptographic signature (see [`Manifest`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The `ovswarm-agent` unit is the node agent's service: one state, shared with [`crate::agent`].
pub use crate::agent::ServiceState;

/// The worker's environment file: recovery-only or full installed identity, `KEY=VALUE` lines.
pub const MAC_ENV: &str = "~/.mac/mac.env";
/// The revision marker, the old controller's only discriminator between installed and partial successor.
pub const MARKER: &str = "~/.mac/deployed-source-revision";
/// The signed, generation-bound deployment manifest.
pub const MANIFEST: &str = "~/.mac/deployment-manifest";
/// A versioned deployment receipt: what installers before the signed manifest's three-line form left in its place
/// (historical only; see [`Drift::ReceiptV1`]).
pub const RECEIPT: &str = "~/.mac/deployment-receipt";
/// The runtime configuration the installer generates; it names the frozen route bundle.
pub const RUNTIME_CONFIG: &str = "~/.mac/runtime.conf";
/// The agent's credential file: the bearer token the node agent presents, read afresh on every heartbeat, so that a
/// rotation's atomic install of its successor switches the agent over at its next heartbeat. No deployment writes it.
pub const AGENT_CREDENTIAL: &str = "~/.mac/agent-credential";
/// The only owner a deployment-written file may have.
pub const CANONICAL_OWNER: &str = "ovswarm";
/// Owner read/write only: the mode every deployment-written file gets.
pub const CANONICAL_MODE: u32 = 0o600;
/// The systemd unit of the worker service the deployment quiesces.
pub const SERVICE_UNIT: &str = "ovswarm-agent";
/// The hub address workers are configured with: the hub of the incident (`10.57.228.137`); its port is not in the
/// RCCA, so none is invented.
pub const DEFAULT_HUB_URL: &str = "http://10.57.228.137";

pub const ATTESTATION_KEY_VAR: &str = "MAC_ATTESTATION_KEY";
pub const STARTUP_CLEAR_HOLD_VAR: &str = "MAC_STARTUP_CLEAR_HOLD";
pub const WORKER_ID_VAR: &str = "MAC_WORKER_ID";
pub const HUB_URL_VAR: &str = "MAC_HUB_URL";
pub const DEPLOYED_REVISION_VAR: &str = "MAC_DEPLOYED_REVISION";
pub const GENERATION_VAR: &str = "MAC_GENERATION";

/// The exact key set of a recovery-only environment (RCCA, deploy/fleet-node-install.sh:7342-7414).
pub const RECOVERY_ENV_KEYS: [&str; 2] = [ATTESTATION_KEY_VAR, STARTUP_CLEAR_HOLD_VAR];
/// The exact key set of a full installed identity, in canonical (sorted) order.
pub const FULL_ENV_KEYS: [&str; 6] =
    [ATTESTATION_KEY_VAR, DEPLOYED_REVISION_VAR, GENERATION_VAR, HUB_URL_VAR, STARTUP_CLEAR_HOLD_VAR, WORKER_ID_VAR];

/// The revision a stale marker names (the [`Drift::StaleMarker`] shape).
pub const STALE_REVISION: &str = "0000000";
/// The revision a concurrent artifact change installs underneath a worker's manifest.
pub const CONCURRENT_REVISION: &str = "c0ffee0";
/// The route bundle a historical v2 receipt names when the worker has no runtime configuration naming one.
pub const HISTORICAL_ROUTE_DIGEST: &str = "sha256:historical-routes";
/// The ovswarm installer's names for the full installed identity's keys (before MAC), canonical name first.
pub const OVSWARM_ENV_NAMES: [(&str, &str); 6] = [
    (ATTESTATION_KEY_VAR, "OVSWARM_ATTESTATION_KEY"),
    (STARTUP_CLEAR_HOLD_VAR, "OVSWARM_CLEAR_HOLD_ON_START"),
    (WORKER_ID_VAR, "OVSWARM_WORKER"),
    (HUB_URL_VAR, "OVSWARM_HUB"),
    (DEPLOYED_REVISION_VAR, "OVSWARM_SOURCE_REVISION"),
    (GENERATION_VAR, "OVSWARM_GENERATION"),
];
/// Where the [`Drift::SymlinkEnv`] shape points `mac.env`.
pub const SYMLINK_ENV_TARGET: &str = "/tmp/mac.env";

/// What kind of directory entry a path is, as `lstat` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum FileKind {
    Regular,
    Symlink { target: String },
    Directory,
}

/// One path on the worker. `kind`, `mode`, `owner` and `nlink` are what `lstat` says about the path itself; `content`
/// is what reading the path returns (through a symlink, the target's text). `content` may carry the attestation key,
/// so `Debug` shows only its length.
#[derive(Clone, PartialEq, Eq)]
pub struct FileEntry {
    pub kind: FileKind,
    pub mode: u32,
    pub owner: String,
    pub nlink: u32,
    pub content: String,
}

impl FileEntry {
    /// A file as the deployment writes it: regular, 0600, owned by `ovswarm`, one link.
    pub fn canonical(content: impl Into<String>) -> FileEntry {
        FileEntry {
            kind: FileKind::Regular,
            mode: CANONICAL_MODE,
            owner: CANONICAL_OWNER.to_owned(),
            nlink: 1,
            content: content.into(),
        }
    }

    /// What `lstat` plus a read of this path return.
    pub fn stat(&self) -> FileStat {
        FileStat {
            kind: self.kind.clone(),
            mode: self.mode,
            owner: self.owner.clone(),
            nlink: self.nlink,
            content: self.content.clone(),
        }
    }
}

impl std::fmt::Debug for FileEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_file(f, "FileEntry", &self.kind, self.mode, &self.owner, self.nlink, &self.content)
    }
}

/// A file as a read-only preflight saw it. Same redaction as [`FileEntry`]: the engine reads `content`, a log line
/// never does.
#[derive(Clone, PartialEq, Eq)]
pub struct FileStat {
    pub kind: FileKind,
    pub mode: u32,
    pub owner: String,
    pub nlink: u32,
    pub content: String,
}

impl std::fmt::Debug for FileStat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_file(f, "FileStat", &self.kind, self.mode, &self.owner, self.nlink, &self.content)
    }
}

fn debug_file(
    f: &mut std::fmt::Formatter<'_>,
    name: &str,
    kind: &FileKind,
    mode: u32,
    owner: &str,
    nlink: u32,
    content: &str,
) -> std::fmt::Result {
    f.debug_struct(name)
        .field("kind", kind)
        .field("mode", &format_args!("{mode:#o}"))
        .field("owner", &owner)
        .field("nlink", &nlink)
        .field("content", &format_args!("[redacted; {} bytes]", content.len()))
        .finish()
}

/// The worker's attestation key. Never part of an event, an error or a `Debug` line.
#[derive(Clone, PartialEq, Eq)]
struct AttestationKey(String);

impl std::fmt::Debug for AttestationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// The installed source and venv.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    pub revision: String,
    pub generation: u64,
}

/// The signed deployment manifest: `revision=<r>\ngeneration=<g>\nsignature=<sig>\n`.
///
/// Known deviation: a real manifest carries a signature over its body by the deployment key. The simulator stands in
/// `sig-<revision>-<generation>` for it: [`Manifest::is_signed`] is true exactly when the signature names the
/// manifest's own revision and generation, so a manifest signed for one generation and relabelled with another is
/// unsigned, and one signed for the wrong generation is still validly signed (which is what
/// [`Drift::WrongGenerationManifest`] needs). Forgery is not modelled: nothing in the simulator tries to forge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub revision: String,
    pub generation: u64,
    pub signature: String,
}

impl Manifest {
    /// A manifest validly signed for `revision` at `generation`.
    pub fn signed(revision: &str, generation: u64) -> Manifest {
        Manifest { revision: revision.to_owned(), generation, signature: signature_for(revision, generation) }
    }

    /// Parses the exact three-line form (a final newline is optional). Anything else is `None`: the manifest is
    /// evidence for a trust decision, so it has one schema and no tolerance.
    pub fn parse(content: &str) -> Option<Manifest> {
        let body = content.strip_suffix('\n').unwrap_or(content);
        let mut lines = body.split('\n');
        let revision = lines.next()?.strip_prefix("revision=")?;
        let generation = lines.next()?.strip_prefix("generation=")?;
        let signature = lines.next()?.strip_prefix("signature=")?;
        if lines.next().is_some() || revision.is_empty() || signature.is_empty() {
            return None;
        }
        // `u64::from_str` accepts a leading `+`; the schema does not.
        if generation.is_empty() || !generation.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(Manifest {
            revision: revision.to_owned(),
            generation: generation.parse().ok()?,
            signature: signature.to_owned(),
        })
    }

    /// Whether the signature is the valid one for this manifest's revision and generation.
    pub fn is_signed(&self) -> bool {
        self.signature == signature_for(&self.revision, self.generation)
    }

    /// The canonical rendering, as the deployment writes it.
    pub fn render(&self) -> String {
        format!("revision={}\ngeneration={}\nsignature={}\n", self.revision, self.generation, self.signature)
    }
}

/// The simulator's stand-in signature for `revision` at `generation` (see [`Manifest`]).
pub fn signature_for(revision: &str, generation: u64) -> String {
    format!("sig-{revision}-{generation}")
}

/// The one revision-marker format: the revision and a newline.
pub fn render_marker(revision: &str) -> String {
    format!("{revision}\n")
}

/// Why an environment file does not parse. Neither variant carries a value: a line of `mac.env` may hold the
/// attestation key, so errors name line numbers and key names only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvError {
    /// `line` (1-based) is not `KEY=VALUE` with an upper-case shell name and a plain, non-empty value.
    MalformedLine {
        line: u64,
    },
    DuplicateKey {
        key: String,
    },
}

impl std::fmt::Display for EnvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnvError::MalformedLine { line } => write!(f, "malformed env line {line}: expected KEY=VALUE"),
            EnvError::DuplicateKey { key } => write!(f, "duplicate env key {key}"),
        }
    }
}

impl std::error::Error for EnvError {}

/// Parses `KEY=VALUE` lines strictly. Keys are `[A-Z_][A-Z0-9_]*`; values are non-empty printable ASCII without
/// whitespace, quotes, `$`, backslash or backtick, so that no value means something different to a shell that sources
/// the file. No blank lines, no comments, no `export`; the final newline is optional. Duplicate keys are an error
/// rather than last-wins: the incident's hold writer had to reduce duplicates, and a reader that silently picked one
/// would hide them.
pub fn parse_env(content: &str) -> Result<BTreeMap<String, String>, EnvError> {
    let mut vars = BTreeMap::new();
    let body = content.strip_suffix('\n').unwrap_or(content);
    if body.is_empty() {
        return Ok(vars);
    }
    for (index, line) in body.split('\n').enumerate() {
        let malformed = || EnvError::MalformedLine { line: index as u64 + 1 };
        let (key, value) = line.split_once('=').ok_or_else(malformed)?;
        if !is_env_key(key) || !is_env_value(value) {
            return Err(malformed());
        }
        if vars.insert(key.to_owned(), value.to_owned()).is_some() {
            return Err(EnvError::DuplicateKey { key: key.to_owned() });
        }
    }
    Ok(vars)
}

fn is_env_key(key: &str) -> bool {
    let mut bytes = key.bytes();
    bytes.next().is_some_and(|first| first.is_ascii_uppercase() || first == b'_')
        && bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

fn is_env_value(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_graphic() && !b"\"'`$\\".contains(&b))
}

/// The one canonical rendering of an environment: one `KEY=VALUE` line per key in key order, each ending in a newline.
/// It does not validate: a map [`parse_env`] would refuse renders to text [`parse_env`] refuses.
pub fn render_env(vars: &BTreeMap<String, String>) -> String {
    vars.iter().map(|(key, value)| format!("{key}={value}\n")).collect()
}

/// The full installed identity. The startup hold is cleared (`1`) on an installed worker: its service start releases
/// its own dispatch hold. Only recovery must disable that (see [`recovery_env`]).
pub fn full_env(
    worker_id: &str,
    hub_url: &str,
    revision: &str,
    generation: u64,
    attestation_key: &str,
) -> BTreeMap<String, String> {
    [
        (ATTESTATION_KEY_VAR, attestation_key.to_owned()),
        (DEPLOYED_REVISION_VAR, revision.to_owned()),
        (GENERATION_VAR, generation.to_string()),
        (HUB_URL_VAR, hub_url.to_owned()),
        (STARTUP_CLEAR_HOLD_VAR, "1".to_owned()),
        (WORKER_ID_VAR, worker_id.to_owned()),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value))
    .collect()
}

/// The recovery-only environment: exactly the attestation key and `MAC_STARTUP_CLEAR_HOLD=0` ("recovery hold precedes
/// recovery identity").
pub fn recovery_env(attestation_key: &str) -> BTreeMap<String, String> {
    [(ATTESTATION_KEY_VAR, attestation_key), (STARTUP_CLEAR_HOLD_VAR, "0")]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect()
}

/// A versioned deployment receipt, rendered as the installer of its version wrote it: version 1 carries the revision,
/// generation and signature under its own names; version 2 renames them and adds the route bundle; any other version
/// (which no installer wrote) is rendered with version 2's fields.
pub fn render_receipt(schema_version: u32, manifest: &Manifest, route_digest: &str) -> String {
    let Manifest { revision, generation, signature } = manifest;
    match schema_version {
        1 => format!(
            "schema_version=1\ndeployed_revision={revision}\ndeployment_generation={generation}\nsignature={signature}\n"
        ),
        version => format!(
            "schema_version={version}\nrevision={revision}\ngeneration={generation}\nroute_digest={route_digest}\nsignature={signature}\n"
        ),
    }
}

/// A drift shape a worker can be found in. Each changes exactly what its comment says and nothing else; a drift that
/// names a file the worker lacks leaves the worker as it is, except where the comment says the file is written.
/// [`Drift::INCIDENT`] are the shapes the 2026-09-21 deployment met; [`Drift::HISTORICAL`] are the identity forms
/// earlier installers left, recognized and not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Drift {
    /// Worker-50: the revision marker is removed, the full installed `mac.env` is kept.
    MarkerAbsentFullEnv,
    /// The early-cohort worker: `mac.env` is removed.
    EnvAbsent,
    /// A retained partial successor: `mac.env` is rewritten (in place, metadata kept) to exactly the two recovery
    /// keys, and the marker is removed.
    RecoveryOnlyEnv,
    /// [`Drift::RecoveryOnlyEnv`] plus `MAC_WORKER_ID`, one installed key too many for the recovery-only form and
    /// five too few for the full form.
    ExtraRecoveryKeys,
    /// `mac.env` becomes group- and world-readable (0644).
    UnsafeMode,
    /// `mac.env` is owned by `root`.
    WrongOwner,
    /// `mac.env` becomes a symlink to `/tmp/mac.env` (lstat mode 0777); reading it still returns the same text,
    /// because the target holds it.
    SymlinkEnv,
    /// `mac.env` has a second hard link (nlink 2).
    HardLinkedEnv,
    /// The marker names [`STALE_REVISION`]; written if it was absent.
    StaleMarker,
    /// The manifest's generation is one past the manifest's (or, without a parseable manifest, the installed)
    /// generation, validly signed for that wrong generation. Written if it was absent.
    WrongGenerationManifest,
    /// The manifest keeps its revision and generation but its signature is `none`. Written if it was absent.
    UnsignedManifest,
    /// A concurrent artifact change: the installed source and venv were replaced by [`CONCURRENT_REVISION`] (same
    /// generation) underneath the signed manifest, and the marker is removed — so the marker looks repairable while
    /// the evidence a repair would rest on no longer agrees with what is installed. Nothing if nothing is installed.
    ConcurrentArtifactChange,
    /// The pre-7f3bbd12 layout: every line of `mac.env` gets an `export ` prefix (its text otherwise unchanged).
    ExportPrefixedEnv,
    /// The ovswarm installer's layout: `mac.env`'s keys are renamed by [`OVSWARM_ENV_NAMES`] (values unchanged;
    /// nothing if the env does not parse).
    OvswarmNamesEnv,
    /// A version 1 receipt in place of the manifest: the manifest's signed statement (or, without a parseable
    /// manifest, the installed revision and generation, validly signed) is written to [`RECEIPT`] and the manifest is
    /// removed. Nothing if neither exists.
    ReceiptV1,
    /// A version 2 receipt beside the manifest, agreeing with it: the same signed statement, and the route bundle the
    /// runtime configuration names (else [`HISTORICAL_ROUTE_DIGEST`]). Nothing without a statement.
    ReceiptV2,
    /// Half-exported: every other line of `mac.env` (the first, third, ...) gets an `export ` prefix.
    MixedEnvLayout,
    /// A receipt of `schema_version=3` (which no installer wrote) beside the manifest, otherwise [`Drift::ReceiptV2`].
    ReceiptUnknownVersion,
    /// A version 2 receipt beside the manifest, validly signed for the next generation: it contradicts the manifest.
    ReceiptOtherGeneration,
}

impl Drift {
    /// The shapes of the 2026-09-21 deployment (the campaigns' `marker_drift` draws one of these).
    pub const INCIDENT: [Drift; 12] = [
        Drift::MarkerAbsentFullEnv,
        Drift::EnvAbsent,
        Drift::RecoveryOnlyEnv,
        Drift::ExtraRecoveryKeys,
        Drift::UnsafeMode,
        Drift::WrongOwner,
        Drift::SymlinkEnv,
        Drift::HardLinkedEnv,
        Drift::StaleMarker,
        Drift::WrongGenerationManifest,
        Drift::UnsignedManifest,
        Drift::ConcurrentArtifactChange,
    ];

    /// The historical identity forms: the four an installer once wrote, then three it never did.
    pub const HISTORICAL: [Drift; 7] = [
        Drift::ExportPrefixedEnv,
        Drift::OvswarmNamesEnv,
        Drift::ReceiptV1,
        Drift::ReceiptV2,
        Drift::MixedEnvLayout,
        Drift::ReceiptUnknownVersion,
        Drift::ReceiptOtherGeneration,
    ];

    /// Every shape.
    pub fn all() -> impl Iterator<Item = Drift> {
        Drift::INCIDENT.into_iter().chain(Drift::HISTORICAL)
    }
}

/// What a read-only SSH preflight sees on one worker: every identity surface, raw and unclassified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub worker_id: String,
    pub mac_env: Option<FileStat>,
    pub marker: Option<FileStat>,
    pub manifest: Option<FileStat>,
    pub receipt: Option<FileStat>,
    pub installed: Option<Installed>,
    pub barrier_generation: u64,
    pub service: ServiceState,
    pub staged: BTreeSet<String>,
    /// The agent's credential file ([`AGENT_CREDENTIAL`]); its content is a bearer token (redacted in `Debug`).
    pub credential: Option<FileStat>,
}

/// The state of one worker node. The filesystem and everything else are public so that the simulator and tests can
/// build any shape; only the attestation key is private, so that it cannot leak through a careless `{:?}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worker {
    pub id: String,
    /// Path → entry, for the paths the deployment touches.
    pub files: BTreeMap<String, FileEntry>,
    /// The installed source and venv.
    pub installed: Option<Installed>,
    /// The install the last installer run replaced, kept on disk beside the new one (as an A/B installer keeps its
    /// previous release) for a rollback to put back; `None` when there is none.
    pub previous: Option<Installed>,
    /// The generation the worker's install barrier was last passed at.
    pub barrier_generation: u64,
    /// The `ovswarm-agent` unit.
    pub service: ServiceState,
    /// Digests of the capsules staged locally for the next install.
    pub staged: BTreeSet<String>,
    attestation_key: AttestationKey,
}

impl Worker {
    /// A coherent installed worker: full `mac.env`, marker naming `revision`, manifest signed for `revision` at
    /// `generation`, source and venv installed, barrier at `generation`, service running; every file canonical.
    pub fn installed(
        id: impl Into<String>,
        revision: &str,
        generation: u64,
        attestation_key: impl Into<String>,
    ) -> Worker {
        let id = id.into();
        let attestation_key = attestation_key.into();
        let env = full_env(&id, DEFAULT_HUB_URL, revision, generation, &attestation_key);
        let files = [
            (MAC_ENV, render_env(&env)),
            (MARKER, render_marker(revision)),
            (MANIFEST, Manifest::signed(revision, generation).render()),
        ]
        .into_iter()
        .map(|(path, content)| (path.to_owned(), FileEntry::canonical(content)))
        .collect();
        Worker {
            id,
            files,
            installed: Some(Installed { revision: revision.to_owned(), generation }),
            previous: None,
            barrier_generation: generation,
            service: ServiceState::Running,
            staged: BTreeSet::new(),
            attestation_key: AttestationKey(attestation_key),
        }
    }

    /// A host with nothing deployed: no files, nothing installed, barrier 0, service stopped. The hub host's endpoint
    /// and a freshly commissioned node start here.
    pub fn bare(id: impl Into<String>, attestation_key: impl Into<String>) -> Worker {
        Worker {
            id: id.into(),
            files: BTreeMap::new(),
            installed: None,
            previous: None,
            barrier_generation: 0,
            service: ServiceState::Stopped,
            staged: BTreeSet::new(),
            attestation_key: AttestationKey(attestation_key.into()),
        }
    }

    pub fn file(&self, path: &str) -> Option<&FileEntry> {
        self.files.get(path)
    }

    /// Whether `candidate` is this worker's attestation key: how the simulator checks an attestation without the key
    /// ever leaving the worker.
    pub fn attestation_key_matches(&self, candidate: &str) -> bool {
        self.attestation_key.0 == candidate
    }

    /// The recovery-only `mac.env` text for this worker's key. Handed to the simulator's recovery steps as a whole
    /// file so that the key itself never has to be exposed.
    pub fn recovery_env_content(&self) -> String {
        render_env(&recovery_env(&self.attestation_key.0))
    }

    /// Puts the worker into a drift shape.
    pub fn apply_drift(&mut self, drift: Drift) {
        match drift {
            Drift::MarkerAbsentFullEnv => {
                self.files.remove(MARKER);
            }
            Drift::EnvAbsent => {
                self.files.remove(MAC_ENV);
            }
            Drift::RecoveryOnlyEnv | Drift::ExtraRecoveryKeys => {
                let mut env = recovery_env(&self.attestation_key.0);
                if drift == Drift::ExtraRecoveryKeys {
                    env.insert(WORKER_ID_VAR.to_owned(), self.id.clone());
                }
                self.rewrite(MAC_ENV, render_env(&env));
                self.files.remove(MARKER);
            }
            Drift::UnsafeMode => self.edit(MAC_ENV, |entry| entry.mode = 0o644),
            Drift::WrongOwner => self.edit(MAC_ENV, |entry| entry.owner = "root".to_owned()),
            Drift::SymlinkEnv => self.edit(MAC_ENV, |entry| {
                entry.kind = FileKind::Symlink { target: SYMLINK_ENV_TARGET.to_owned() };
                // lstat reports 0777 for every symlink on Linux; the permissions that matter are the target's.
                entry.mode = 0o777;
            }),
            Drift::HardLinkedEnv => self.edit(MAC_ENV, |entry| entry.nlink = 2),
            Drift::StaleMarker => self.rewrite(MARKER, render_marker(STALE_REVISION)),
            Drift::ConcurrentArtifactChange => {
                if let Some(installed) = &mut self.installed {
                    installed.revision = CONCURRENT_REVISION.to_owned();
                    self.files.remove(MARKER);
                }
            }
            Drift::WrongGenerationManifest | Drift::UnsignedManifest => {
                let Some((revision, generation)) = self.manifest_identity() else {
                    return;
                };
                let manifest = if drift == Drift::WrongGenerationManifest {
                    Manifest::signed(&revision, generation + 1)
                } else {
                    Manifest { revision, generation, signature: "none".to_owned() }
                };
                self.rewrite(MANIFEST, manifest.render());
            }
            Drift::ExportPrefixedEnv | Drift::MixedEnvLayout => {
                let Some(env) = self.files.get(MAC_ENV) else { return };
                let every = if drift == Drift::ExportPrefixedEnv { 1 } else { 2 };
                let content = env
                    .content
                    .lines()
                    .enumerate()
                    .map(
                        |(index, line)| {
                            if index % every == 0 { format!("export {line}\n") } else { format!("{line}\n") }
                        },
                    )
                    .collect();
                self.rewrite(MAC_ENV, content);
            }
            Drift::OvswarmNamesEnv => {
                let Some(Ok(vars)) = self.files.get(MAC_ENV).map(|env| parse_env(&env.content)) else { return };
                let renamed = vars
                    .into_iter()
                    .map(|(key, value)| {
                        let old = OVSWARM_ENV_NAMES.iter().find(|(canonical, _)| *canonical == key);
                        (old.map_or(key, |(_, old)| (*old).to_owned()), value)
                    })
                    .collect();
                self.rewrite(MAC_ENV, render_env(&renamed));
            }
            Drift::ReceiptV1 => {
                let Some(statement) = self.signed_statement() else { return };
                self.rewrite(RECEIPT, render_receipt(1, &statement, HISTORICAL_ROUTE_DIGEST));
                self.files.remove(MANIFEST);
            }
            Drift::ReceiptV2 | Drift::ReceiptUnknownVersion | Drift::ReceiptOtherGeneration => {
                let Some(mut statement) = self.signed_statement() else { return };
                if drift == Drift::ReceiptOtherGeneration {
                    statement = Manifest::signed(&statement.revision, statement.generation + 1);
                }
                let routes = self.files.get(RUNTIME_CONFIG).and_then(|entry| {
                    entry.content.lines().find_map(|line| line.strip_prefix("route_bundle=")).map(str::to_owned)
                });
                let version = if drift == Drift::ReceiptUnknownVersion { 3 } else { 2 };
                let routes = routes.as_deref().unwrap_or(HISTORICAL_ROUTE_DIGEST);
                self.rewrite(RECEIPT, render_receipt(version, &statement, routes));
            }
        }
    }

    /// The signed statement a receipt drift carries: the manifest as it is, else the installed revision and
    /// generation, validly signed.
    fn signed_statement(&self) -> Option<Manifest> {
        match self.files.get(MANIFEST).and_then(|entry| Manifest::parse(&entry.content)) {
            Some(manifest) => Some(manifest),
            None => {
                self.installed.as_ref().map(|installed| Manifest::signed(&installed.revision, installed.generation))
            }
        }
    }

    /// The revision and generation a manifest drift starts from: the manifest's own, else the installed ones.
    fn manifest_identity(&self) -> Option<(String, u64)> {
        let from_file = self.files.get(MANIFEST).and_then(|entry| Manifest::parse(&entry.content));
        match (from_file, &self.installed) {
            (Some(manifest), _) => Some((manifest.revision, manifest.generation)),
            (None, Some(installed)) => Some((installed.revision.clone(), installed.generation)),
            (None, None) => None,
        }
    }

    fn edit(&mut self, path: &str, change: impl FnOnce(&mut FileEntry)) {
        if let Some(entry) = self.files.get_mut(path) {
            change(entry);
        }
    }

    /// Replaces a file's text in place, keeping its metadata; creates it canonical if absent.
    fn rewrite(&mut self, path: &str, content: String) {
        match self.files.get_mut(path) {
            Some(entry) => entry.content = content,
            None => {
                self.files.insert(path.to_owned(), FileEntry::canonical(content));
            }
        }
    }

    /// What a read-only preflight sees. Reports only; see the module comment.
    pub fn observe(&self) -> Observation {
        let stat = |path: &str| self.files.get(path).map(FileEntry::stat);
        Observation {
            worker_id: self.id.clone(),
            mac_env: stat(MAC_ENV),
            marker: stat(MARKER),
            manifest: stat(MANIFEST),
            receipt: stat(RECEIPT),
            installed: self.installed.clone(),
            barrier_generation: self.barrier_generation,
            service: self.service,
            staged: self.staged.clone(),
            credential: stat(AGENT_CREDENTIAL),
        }
    }

    /// The bearer the agent presents on its next heartbeat: what its credential file holds now, if it has one.
    pub fn agent_bearer(&self) -> Option<&str> {
        self.files.get(AGENT_CREDENTIAL).map(|entry| entry.content.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "attest-5ecret-k3y-w50";

    fn worker() -> Worker {
        Worker::installed("worker-50", "7f3bbd1", 12, KEY)
    }

    fn env_of(observation: &Observation) -> BTreeMap<String, String> {
        parse_env(&observation.mac_env.as_ref().unwrap().content).unwrap()
    }

    fn keys(vars: &BTreeMap<String, String>) -> Vec<&str> {
        vars.keys().map(String::as_str).collect()
    }

    /// Which observed surfaces differ between two observations: `mac_env` when presence differs, `mac_env.mode` when
    /// a field of a present file does, and so on.
    fn changes(before: &Observation, after: &Observation) -> Vec<String> {
        let mut out = Vec::new();
        let files = [
            ("mac_env", &before.mac_env, &after.mac_env),
            ("marker", &before.marker, &after.marker),
            ("manifest", &before.manifest, &after.manifest),
            ("receipt", &before.receipt, &after.receipt),
        ];
        for (label, before, after) in files {
            match (before, after) {
                (Some(b), Some(a)) => {
                    let fields = [
                        ("kind", b.kind != a.kind),
                        ("mode", b.mode != a.mode),
                        ("owner", b.owner != a.owner),
                        ("nlink", b.nlink != a.nlink),
                        ("content", b.content != a.content),
                    ];
                    out.extend(
                        fields.iter().filter(|(_, changed)| *changed).map(|(field, _)| format!("{label}.{field}")),
                    );
                }
                (None, None) => {}
                _ => out.push(label.to_owned()),
            }
        }
        let rest = [
            ("worker_id", before.worker_id != after.worker_id),
            ("installed", before.installed != after.installed),
            ("barrier_generation", before.barrier_generation != after.barrier_generation),
            ("service", before.service != after.service),
            ("staged", before.staged != after.staged),
        ];
        out.extend(rest.iter().filter(|(_, changed)| *changed).map(|(field, _)| (*field).to_owned()));
        out
    }

    #[test]
    fn an_installed_worker_observes_as_coherent_raw_data() {
        let observation = worker().observe();
        for stat in [&observation.mac_env, &observation.marker, &observation.manifest] {
            let stat = stat.as_ref().expect("all three files are present");
            assert_eq!(stat.kind, FileKind::Regular);
            assert_eq!(stat.mode, 0o600);
            assert_eq!(stat.owner, "ovswarm");
            assert_eq!(stat.nlink, 1);
        }
        let env = env_of(&observation);
        assert_eq!(keys(&env), FULL_ENV_KEYS);
        assert_eq!(env[DEPLOYED_REVISION_VAR], "7f3bbd1");
        assert_eq!(env[GENERATION_VAR], "12");
        assert_eq!(env[WORKER_ID_VAR], "worker-50");
        assert_eq!(observation.marker.unwrap().content, "7f3bbd1\n");
        let manifest = Manifest::parse(&observation.manifest.unwrap().content).unwrap();
        assert_eq!((manifest.revision.as_str(), manifest.generation, manifest.is_signed()), ("7f3bbd1", 12, true));
        assert_eq!(observation.installed, Some(Installed { revision: "7f3bbd1".into(), generation: 12 }));
        assert_eq!(observation.barrier_generation, 12);
        assert_eq!(observation.service, ServiceState::Running);
        assert!(observation.staged.is_empty());
    }

    #[test]
    fn each_drift_shape_changes_exactly_what_it_says() {
        let check = |drift: Drift, expected: &[&str]| {
            let before = worker();
            let mut after = before.clone();
            after.apply_drift(drift);
            assert_eq!(changes(&before.observe(), &after.observe()), expected, "{drift:?}");
            after
        };
        check(Drift::MarkerAbsentFullEnv, &["marker"]);
        check(Drift::EnvAbsent, &["mac_env"]);
        let recovery = check(Drift::RecoveryOnlyEnv, &["mac_env.content", "marker"]).observe();
        assert_eq!(keys(&env_of(&recovery)), RECOVERY_ENV_KEYS);
        assert_eq!(env_of(&recovery)[STARTUP_CLEAR_HOLD_VAR], "0");
        assert_eq!(env_of(&recovery)[ATTESTATION_KEY_VAR], KEY);
        let extra = check(Drift::ExtraRecoveryKeys, &["mac_env.content", "marker"]).observe();
        assert_eq!(keys(&env_of(&extra)), [ATTESTATION_KEY_VAR, STARTUP_CLEAR_HOLD_VAR, WORKER_ID_VAR]);
        assert_eq!(check(Drift::UnsafeMode, &["mac_env.mode"]).observe().mac_env.unwrap().mode, 0o644);
        assert_eq!(check(Drift::WrongOwner, &["mac_env.owner"]).observe().mac_env.unwrap().owner, "root");
        let symlink = check(Drift::SymlinkEnv, &["mac_env.kind", "mac_env.mode"]).observe().mac_env.unwrap();
        assert_eq!(symlink.kind, FileKind::Symlink { target: "/tmp/mac.env".into() });
        assert_eq!(check(Drift::HardLinkedEnv, &["mac_env.nlink"]).observe().mac_env.unwrap().nlink, 2);
        assert_eq!(check(Drift::StaleMarker, &["marker.content"]).observe().marker.unwrap().content, "0000000\n");
        let wrong = check(Drift::WrongGenerationManifest, &["manifest.content"]).observe().manifest.unwrap();
        let wrong = Manifest::parse(&wrong.content).unwrap();
        assert_eq!((wrong.revision.as_str(), wrong.generation, wrong.is_signed()), ("7f3bbd1", 13, true));
        let unsigned = check(Drift::UnsignedManifest, &["manifest.content"]).observe().manifest.unwrap();
        let unsigned = Manifest::parse(&unsigned.content).unwrap();
        assert_eq!((unsigned.generation, unsigned.signature.as_str(), unsigned.is_signed()), (12, "none", false));
        let changed = check(Drift::ConcurrentArtifactChange, &["marker", "installed"]).observe();
        assert_eq!(changed.installed.unwrap().revision, CONCURRENT_REVISION);
        assert_eq!(Drift::INCIDENT.len(), 12, "every shape of the incident is checked above");
    }

    #[test]
    fn each_historical_shape_changes_exactly_what_it_says() {
        let check = |drift: Drift, expected: &[&str]| {
            let before = worker();
            let mut after = before.clone();
            after.apply_drift(drift);
            assert_eq!(changes(&before.observe(), &after.observe()), expected, "{drift:?}");
            after.observe()
        };
        let canonical = worker().file(MAC_ENV).unwrap().content.clone();
        let exported = check(Drift::ExportPrefixedEnv, &["mac_env.content"]).mac_env.unwrap().content;
        let expected: String = canonical.lines().map(|line| format!("export {line}\n")).collect();
        assert_eq!(exported, expected, "every line exported, nothing else changed");
        let ovswarm = check(Drift::OvswarmNamesEnv, &["mac_env.content"]).mac_env.unwrap().content;
        let renamed = parse_env(&ovswarm).unwrap();
        let names: BTreeSet<&str> = renamed.keys().map(String::as_str).collect();
        assert_eq!(names, OVSWARM_ENV_NAMES.iter().map(|(_, old)| *old).collect::<BTreeSet<_>>());
        assert_eq!(renamed["OVSWARM_ATTESTATION_KEY"], KEY);
        assert_eq!(renamed["OVSWARM_SOURCE_REVISION"], "7f3bbd1");
        let mixed = check(Drift::MixedEnvLayout, &["mac_env.content"]).mac_env.unwrap().content;
        let prefixed: Vec<bool> = mixed.lines().map(|line| line.starts_with("export ")).collect();
        assert_eq!(prefixed, [true, false, true, false, true, false]);

        let v1 = check(Drift::ReceiptV1, &["manifest", "receipt"]).receipt.unwrap();
        assert_eq!(
            v1.content,
            "schema_version=1\ndeployed_revision=7f3bbd1\ndeployment_generation=12\nsignature=sig-7f3bbd1-12\n"
        );
        assert_eq!((v1.mode, v1.owner.as_str(), v1.nlink), (0o600, "ovswarm", 1), "written as an installer writes");
        let v2 = check(Drift::ReceiptV2, &["receipt"]).receipt.unwrap().content;
        assert_eq!(
            v2,
            "schema_version=2\nrevision=7f3bbd1\ngeneration=12\nroute_digest=sha256:historical-routes\nsignature=sig-7f3bbd1-12\n"
        );
        let unknown = check(Drift::ReceiptUnknownVersion, &["receipt"]).receipt.unwrap().content;
        assert_eq!(unknown, v2.replace("schema_version=2", "schema_version=3"));
        let other = check(Drift::ReceiptOtherGeneration, &["receipt"]).receipt.unwrap().content;
        assert_eq!(other, v2.replace("generation=12", "generation=13").replace("-12", "-13"));

        // A v1 receipt of a worker whose manifest is unreadable carries the installed statement, validly signed.
        let mut unreadable = worker();
        unreadable.files.insert(MANIFEST.into(), FileEntry::canonical("garbage"));
        unreadable.apply_drift(Drift::ReceiptV1);
        assert!(unreadable.file(RECEIPT).unwrap().content.contains("signature=sig-7f3bbd1-12"));
        assert_eq!(Drift::HISTORICAL.len(), 7, "every historical shape is checked above");
        assert_eq!(Drift::all().count(), Drift::INCIDENT.len() + Drift::HISTORICAL.len());
    }

    #[test]
    fn a_historical_drift_of_a_bare_host_changes_nothing() {
        let mut bare = Worker::bare("hub", KEY);
        for drift in Drift::HISTORICAL {
            bare.apply_drift(drift);
        }
        assert_eq!(bare, Worker::bare("hub", KEY), "no env, no manifest and nothing installed");
    }

    #[test]
    fn a_drift_on_a_missing_file_leaves_the_worker_unchanged() {
        let mut bare = Worker::bare("hub", KEY);
        for drift in [Drift::UnsafeMode, Drift::WrongOwner, Drift::SymlinkEnv, Drift::HardLinkedEnv, Drift::EnvAbsent] {
            bare.apply_drift(drift);
        }
        bare.apply_drift(Drift::UnsignedManifest);
        assert_eq!(bare, Worker::bare("hub", KEY), "no manifest and nothing installed: nothing to unsign");
    }

    #[test]
    fn the_attestation_key_never_appears_in_debug_output() {
        let mut worker = worker();
        assert!(worker.file(MAC_ENV).unwrap().content.contains(KEY), "the key is really in the env file");
        assert!(worker.attestation_key_matches(KEY));
        assert!(!worker.attestation_key_matches("attest-other"));
        for shape in [worker.clone(), Worker::bare("hub", KEY)] {
            assert!(!format!("{shape:?}").contains(KEY));
            assert!(!format!("{:?}", shape.observe()).contains(KEY));
        }
        worker.apply_drift(Drift::RecoveryOnlyEnv);
        assert!(worker.recovery_env_content().contains(KEY));
        assert!(!format!("{worker:?}").contains(KEY));
        assert!(format!("{:?}", worker.file(MAC_ENV).unwrap()).contains("mode: 0o600"));
    }

    #[test]
    fn parse_env_rejects_duplicate_keys_and_malformed_lines() {
        let twice = "MAC_STARTUP_CLEAR_HOLD=0\nMAC_ATTESTATION_KEY=k\nMAC_STARTUP_CLEAR_HOLD=0\n";
        assert_eq!(parse_env(twice), Err(EnvError::DuplicateKey { key: "MAC_STARTUP_CLEAR_HOLD".into() }));
        for (content, line) in [
            ("MAC_A=1\n\nMAC_B=2\n", 2),
            ("export MAC_A=1", 1),
            ("MAC_A=1\n# comment", 2),
            ("mac_a=1", 1),
            ("1MAC=1", 1),
            ("MAC_A=", 1),
            ("MAC_A=\"quoted\"", 1),
            ("MAC_A=$(reboot)", 1),
            ("MAC_A=two words", 1),
            ("MAC_A=1\r\n", 1),
            ("MAC_A", 1),
            ("=1", 1),
        ] {
            assert_eq!(parse_env(content), Err(EnvError::MalformedLine { line }), "{content:?}");
        }
        assert_eq!(parse_env(""), Ok(BTreeMap::new()));
        let parsed = parse_env("MAC_ATTESTATION_KEY=a2V5==\nMAC_HUB_URL=http://10.57.228.137:80/x").unwrap();
        assert_eq!(parsed[ATTESTATION_KEY_VAR], "a2V5==", "only the first = splits");
        assert_eq!(EnvError::MalformedLine { line: 3 }.to_string(), "malformed env line 3: expected KEY=VALUE");
    }

    #[test]
    fn a_manifest_parses_only_in_its_exact_form_and_is_signed_only_for_its_own_generation() {
        let manifest = Manifest::signed("2944aeb", 7);
        assert_eq!(manifest.render(), "revision=2944aeb\ngeneration=7\nsignature=sig-2944aeb-7\n");
        assert_eq!(Manifest::parse(&manifest.render()), Some(manifest.clone()));
        assert!(manifest.is_signed());
        let relabelled = Manifest { generation: 8, ..manifest.clone() };
        assert!(!relabelled.is_signed(), "a signature binds the generation");
        for bad in [
            "generation=7\nrevision=2944aeb\nsignature=sig-2944aeb-7",
            "revision=2944aeb\ngeneration=+7\nsignature=sig-2944aeb-7",
            "revision=2944aeb\ngeneration=7\nsignature=sig-2944aeb-7\nextra=1",
            "revision=\ngeneration=7\nsignature=x",
            "revision=2944aeb\ngeneration=7",
        ] {
            assert_eq!(Manifest::parse(bad), None, "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parse_env_round_trips_render_env(
            vars in proptest::collection::btree_map("[A-Z_][A-Z0-9_]{0,15}", "[!#%-&(-\\[\\]-_a-~]{1,24}", 0..8)
        ) {
            proptest::prop_assert_eq!(parse_env(&render_env(&vars)), Ok(vars));
        }

        #[test]
        fn the_full_installed_identity_round_trips(
            id in "worker-[0-9]{1,3}",
            revision in "[0-9a-f]{7,40}",
            generation in proptest::prelude::any::<u64>(),
            key in "[A-Za-z0-9+/=]{1,44}",
        ) {
            let vars = full_env(&id, DEFAULT_HUB_URL, &revision, generation, &key);
            let parsed = parse_env(&render_env(&vars)).unwrap();
            proptest::prop_assert_eq!(keys(&parsed), FULL_ENV_KEYS);
            proptest::prop_assert_eq!(parsed, vars);
        }

        #[test]
        fn parse_env_never_panics(content in "\\PC*") {
            let _ = parse_env(&content);
        }
    }
}
