//! The read-only decoder of a worker's identity files (RCCA, "Postel-like tolerance without weaker security": "liberal
//! in the safe historical forms it can recognize, and conservative in the one state it emits"). It reads the
//! canonical `mac.env` and signed deployment manifest, and a closed set of historical forms earlier installers left on
//! workers — two `mac.env` layouts and two versions of the deployment receipt — and normalizes each into one typed
//! identity. It never sources shell, never guesses a value and never infers a revision from anything but signed,
//! generation-bound evidence: an unsafe or unbounded file fails closed before it is read, and a historical artifact
//! that is ambiguous, conflicting, unsigned or of an unknown version is a typed [`FormDefect`] the preflight
//! quarantines. Canonicalizing a recognized historical form is a repair behind the deployment fence
//! ([`Canonicalization`], [`canonical_forms`]); nothing here writes.
//!
//! Where each layout and version comes from and what it maps to: `docs/engine.md`, "Historical identity forms".

use std::collections::BTreeMap;

pub use crate::ports::events::{CanonicalFile, FormDefect, HistoricalForm};
use crate::ports::{FileFacts, FileKind, NodeObservation};
pub use crate::rollout::identity::{Canonicalization, FILE_BYTES_MAX};
use crate::rollout::identity::{
    Contradiction, EnvClass, Expectation, INSTALLED_KEYS, MAC_ENV, MANIFEST, MARKER, Manifest, RECEIPT, RECOVERY_KEYS,
    Repair, SignatureVerifier, Verdict,
};
use crate::secret::Secret;

/// The prefix every line of the pre-7f3bbd12 `mac.env` layout carries.
const EXPORT_PREFIX: &str = "export ";

/// The ovswarm installer's names (before MAC), each with the canonical name it maps to.
pub const OVSWARM_NAMES: [(&str, &str); 6] = [
    ("OVSWARM_ATTESTATION_KEY", "MAC_ATTESTATION_KEY"),
    ("OVSWARM_CLEAR_HOLD_ON_START", "MAC_STARTUP_CLEAR_HOLD"),
    ("OVSWARM_WORKER", "MAC_WORKER_ID"),
    ("OVSWARM_HUB", "MAC_HUB_URL"),
    ("OVSWARM_SOURCE_REVISION", "MAC_DEPLOYED_REVISION"),
    ("OVSWARM_GENERATION", "MAC_GENERATION"),
];

/// The layout `mac.env` was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EnvLayout {
    /// `KEY=VALUE` lines under the `MAC_` names: the one layout the controller writes (7f3bbd12 and later).
    Canonical,
    /// Installers before 7f3bbd12: every line `export MAC_…=…`, because the old unit file sourced it. Strict lines
    /// only; the decoder strips the prefix and never sources anything.
    ExportPrefixed,
    /// The ovswarm installer before MAC: `KEY=VALUE` lines under the [`OVSWARM_NAMES`].
    OvswarmNames,
}

impl EnvLayout {
    /// The historical form this layout is, if it is not the canonical one.
    pub fn form(self) -> Option<HistoricalForm> {
        match self {
            EnvLayout::Canonical => None,
            EnvLayout::ExportPrefixed => Some(HistoricalForm::ExportPrefixedEnv),
            EnvLayout::OvswarmNames => Some(HistoricalForm::OvswarmNamesEnv),
        }
    }
}

/// The explicitly versioned deployment receipts installers wrote at `~/.mac/deployment-receipt` before the signed
/// manifest's three-line form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReceiptVersion {
    /// `schema_version=1`, `deployed_revision=`, `deployment_generation=`, `signature=`.
    V1,
    /// `schema_version=2`, `revision=`, `generation=`, `route_digest=`, `signature=`.
    V2,
}

impl ReceiptVersion {
    pub fn form(self) -> HistoricalForm {
        match self {
            ReceiptVersion::V1 => HistoricalForm::ReceiptV1,
            ReceiptVersion::V2 => HistoricalForm::ReceiptV2,
        }
    }

    /// The fields after `schema_version`, in their one order.
    fn fields(self) -> &'static [&'static str] {
        match self {
            ReceiptVersion::V1 => &["deployed_revision", "deployment_generation", "signature"],
            ReceiptVersion::V2 => &["revision", "generation", "route_digest", "signature"],
        }
    }
}

impl std::fmt::Display for FormDefect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormDefect::MixedEnvLayout => {
                write!(f, "{MAC_ENV} mixes layouts (exported and plain lines, or MAC_ and OVSWARM_ names)")
            }
            FormDefect::UnknownEnvLayout => write!(f, "{MAC_ENV} is in no known layout (exported OVSWARM_ names)"),
            FormDefect::HistoricalEnvNotExact => {
                write!(f, "{MAC_ENV} in a historical layout is not exactly a full installed identity")
            }
            FormDefect::UnknownReceiptVersion => write!(f, "{RECEIPT} has no known schema_version"),
            FormDefect::MalformedReceipt => write!(f, "{RECEIPT} is not exactly its schema version's lines"),
            FormDefect::ReceiptUnsigned => write!(f, "{RECEIPT} signature does not verify"),
            FormDefect::ReceiptDisagrees => write!(f, "{RECEIPT} disagrees with {MANIFEST}"),
            FormDefect::NoIdentityToCanonicalize => {
                write!(f, "{RECEIPT} is historical but {MAC_ENV} holds no full installed identity to canonicalize")
            }
        }
    }
}

/// A full installed identity as `mac.env` names it, whichever layout it was in. `Debug` redacts the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledEnv {
    pub worker_id: String,
    pub hub_url: String,
    pub revision: String,
    pub generation: u64,
    /// `MAC_STARTUP_CLEAR_HOLD` as the file has it: a canonicalization keeps it.
    pub startup_clear_hold: String,
    pub attestation_key: Secret,
}

/// `mac.env` decoded: its layout, its class, and the identity it names when it names a full one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedEnv {
    pub layout: EnvLayout,
    pub class: EnvClass,
    pub installed: Option<InstalledEnv>,
}

/// The state of `mac.env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvState {
    Absent,
    Decoded(DecodedEnv),
    /// A historical layout the decoder does not recognize (also in [`DecodedIdentity::defects`]).
    Defective(FormDefect),
}

/// A historical receipt, decoded: its version and its signed statement of revision and generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub version: ReceiptVersion,
    pub statement: Manifest,
    /// What a v2 receipt adds: the route bundle the installer's runtime configuration named.
    pub route_digest: Option<String>,
}

/// One node's identity files in one typed state, whichever known forms they were found in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedIdentity {
    pub env: EnvState,
    /// The signed statement of the revision and generation: the manifest's, else a historical receipt's.
    pub statement: Result<Manifest, Contradiction>,
    /// The receipt's version, when a receipt was found and read (a canonicalization removes it).
    pub receipt: Option<ReceiptVersion>,
    /// The historical forms recognized: the env's layout first, then the receipt.
    pub forms: Vec<HistoricalForm>,
    /// The historical artifacts not recognized, in the same order.
    pub defects: Vec<FormDefect>,
}

impl CanonicalFile {
    pub fn path(self) -> &'static str {
        match self {
            CanonicalFile::Manifest => MANIFEST,
            CanonicalFile::Env => MAC_ENV,
            CanonicalFile::Marker => MARKER,
            CanonicalFile::Receipt => RECEIPT,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CanonicalFile::Manifest => "manifest",
            CanonicalFile::Env => "env",
            CanonicalFile::Marker => "marker",
            CanonicalFile::Receipt => "receipt",
        }
    }
}

/// One step of a canonicalization: an atomic owner-only write, or the removal of the historical receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanonicalWrite {
    Write { file: CanonicalFile, content: Secret },
    Remove { file: CanonicalFile },
}

impl CanonicalWrite {
    pub fn file(&self) -> CanonicalFile {
        match self {
            CanonicalWrite::Write { file, .. } | CanonicalWrite::Remove { file } => *file,
        }
    }
}

/// What a canonicalization writes, rendered from what the node's files say now, and the attestation key its
/// environment carries (which the secrets store must hold too: a canonicalization never changes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalForms {
    pub writes: Vec<CanonicalWrite>,
    pub attestation_key: Option<Secret>,
}

/// Why the file is unsafe to read at all, if it is.
fn unsafe_reason(facts: &FileFacts, expectation: &Expectation) -> Option<String> {
    match facts.kind {
        FileKind::Symlink => return Some("a symlink".into()),
        FileKind::Directory => return Some("a directory".into()),
        FileKind::Regular => {}
    }
    if facts.nlink != 1 {
        return Some(format!("{} hard links", facts.nlink));
    }
    if facts.owner != expectation.owner {
        return Some(format!("owned by {}, not {}", facts.owner, expectation.owner));
    }
    if facts.mode != expectation.mode {
        return Some(format!("mode {:o}, not {:o}", facts.mode, expectation.mode));
    }
    None
}

/// Decodes one node's identity files. `Err` names every unsafe or unbounded file: those fail closed before anything
/// is read from any of them.
pub fn decode(
    observation: &NodeObservation,
    expectation: &Expectation,
    verifier: &dyn SignatureVerifier,
) -> Result<DecodedIdentity, Vec<Contradiction>> {
    let files = [
        (MAC_ENV, &observation.env),
        (MARKER, &observation.marker),
        (MANIFEST, &observation.manifest),
        (RECEIPT, &observation.receipt),
    ];
    let mut surfaces = Vec::new();
    for (path, facts) in files {
        let Some(facts) = facts else { continue };
        if let Some(reason) = unsafe_reason(facts, expectation) {
            surfaces.push(Contradiction::UnsafeFile { path, reason });
        } else if facts.content.len() > FILE_BYTES_MAX {
            surfaces.push(Contradiction::Unbounded { path, bytes: facts.content.len() as u64 });
        }
    }
    if !surfaces.is_empty() {
        return Err(surfaces);
    }

    let mut forms = Vec::new();
    let mut defects = Vec::new();
    let env = match &observation.env {
        None => EnvState::Absent,
        Some(facts) => match decode_env(&facts.content) {
            Ok(env) => {
                forms.extend(env.layout.form());
                EnvState::Decoded(env)
            }
            Err(defect) => {
                defects.push(defect);
                EnvState::Defective(defect)
            }
        },
    };
    let manifest = match &observation.manifest {
        None => Err(Contradiction::ManifestMissing),
        Some(facts) => match Manifest::parse(&facts.content) {
            None => Err(Contradiction::ManifestUnreadable),
            Some(manifest) if !verifier.verify(&manifest) => Err(Contradiction::ManifestUnsigned),
            Some(manifest) => Ok(manifest),
        },
    };
    let mut receipt_version = None;
    let statement = match (&observation.receipt, manifest) {
        (None, manifest) => manifest,
        (Some(facts), manifest) => {
            let receipt = decode_receipt(&facts.content).and_then(|receipt| {
                if verifier.verify(&receipt.statement) { Ok(receipt) } else { Err(FormDefect::ReceiptUnsigned) }
            });
            match (receipt, manifest) {
                (Err(defect), manifest) => {
                    defects.push(defect);
                    manifest
                }
                // No manifest: the receipt's signed statement stands in for it.
                (Ok(receipt), Err(Contradiction::ManifestMissing)) => {
                    forms.push(receipt.version.form());
                    receipt_version = Some(receipt.version);
                    Ok(receipt.statement)
                }
                (Ok(receipt), Ok(manifest)) => {
                    let agree = (receipt.statement.revision.as_str(), receipt.statement.generation)
                        == (manifest.revision.as_str(), manifest.generation);
                    if agree {
                        forms.push(receipt.version.form());
                        receipt_version = Some(receipt.version);
                    } else {
                        defects.push(FormDefect::ReceiptDisagrees);
                    }
                    Ok(manifest)
                }
                // A manifest that is there and unreadable or unsigned stays the contradiction it is.
                (Ok(_), Err(contradiction)) => Err(contradiction),
            }
        }
    };
    let full = matches!(&env, EnvState::Decoded(DecodedEnv { class: EnvClass::FullInstalled { .. }, .. }));
    if receipt_version.is_some() && !full {
        defects.push(FormDefect::NoIdentityToCanonicalize);
    }
    Ok(DecodedIdentity { env, statement, receipt: receipt_version, forms, defects })
}

/// Decodes `mac.env` in any known layout. The canonical layout is classified as it always was (recovery-only, full,
/// extra keys, malformed); a historical layout must be exactly a full installed identity in strict lines, or it is a
/// [`FormDefect`].
pub fn decode_env(content: &str) -> Result<DecodedEnv, FormDefect> {
    let lines: Vec<&str> = content.lines().filter(|line| !line.trim().is_empty()).collect();
    let exported = lines.iter().filter(|line| line.starts_with(EXPORT_PREFIX)).count();
    fn key_of<'a>(line: &&'a str) -> &'a str {
        let line = line.strip_prefix(EXPORT_PREFIX).unwrap_or(line);
        line.split_once('=').map_or("", |(key, _)| key.trim())
    }
    let mac = lines.iter().map(key_of).any(|key| key.starts_with("MAC_"));
    let ovswarm = lines.iter().map(key_of).any(|key| key.starts_with("OVSWARM_"));
    if (mac && ovswarm) || (exported != 0 && exported != lines.len()) {
        return Err(FormDefect::MixedEnvLayout);
    }
    match (exported == 0, ovswarm) {
        (true, false) => {
            let class = classify_env(content);
            let installed = match &class {
                EnvClass::FullInstalled { .. } => canonical_vars(content).ok().and_then(|vars| installed_env(&vars)),
                _ => None,
            };
            Ok(DecodedEnv { layout: EnvLayout::Canonical, class, installed })
        }
        (true, true) => decode_historical(content, EnvLayout::OvswarmNames),
        (false, false) => decode_historical(content, EnvLayout::ExportPrefixed),
        (false, true) => Err(FormDefect::UnknownEnvLayout),
    }
}

/// The canonical layout's `KEY=VALUE` lines as the preflight has always read them: blank lines skipped, keys and
/// values trimmed, a key assigned twice malformed. `Err` is the reason.
pub(crate) fn canonical_vars(content: &str) -> Result<BTreeMap<String, String>, String> {
    let mut keys = BTreeMap::new();
    for (number, line) in content.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("line {} is not KEY=VALUE", number + 1));
        };
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(format!("line {} has no valid key", number + 1));
        }
        if keys.insert(key.to_owned(), value.trim().to_owned()).is_some() {
            return Err(format!("{key} is assigned twice"));
        }
    }
    Ok(keys)
}

/// The class of a canonical key set.
pub(crate) fn class_of(keys: &BTreeMap<String, String>) -> EnvClass {
    let has = |key: &str| keys.contains_key(key);
    if keys.len() == RECOVERY_KEYS.len() && RECOVERY_KEYS.iter().all(|k| has(k)) {
        return EnvClass::RecoveryOnly;
    }
    if keys.len() == INSTALLED_KEYS.len() && INSTALLED_KEYS.iter().all(|k| has(k)) {
        return match keys["MAC_GENERATION"].parse() {
            Ok(generation) => EnvClass::FullInstalled { revision: keys["MAC_DEPLOYED_REVISION"].clone(), generation },
            Err(_) => EnvClass::Malformed { reason: "MAC_GENERATION is not a number".into() },
        };
    }
    if RECOVERY_KEYS.iter().all(|k| has(k)) {
        let extra = keys.keys().filter(|k| !RECOVERY_KEYS.contains(&k.as_str())).cloned().collect();
        return EnvClass::ExtraKeys { extra };
    }
    EnvClass::Malformed { reason: "neither the recovery-only nor the full installed key set".into() }
}

/// The identity a full installed key set names (`None` unless it is one with a numeric generation).
fn installed_env(keys: &BTreeMap<String, String>) -> Option<InstalledEnv> {
    if keys.len() != INSTALLED_KEYS.len() || !INSTALLED_KEYS.iter().all(|key| keys.contains_key(*key)) {
        return None;
    }
    Some(InstalledEnv {
        worker_id: keys["MAC_WORKER_ID"].clone(),
        hub_url: keys["MAC_HUB_URL"].clone(),
        revision: keys["MAC_DEPLOYED_REVISION"].clone(),
        generation: keys["MAC_GENERATION"].parse().ok()?,
        startup_clear_hold: keys["MAC_STARTUP_CLEAR_HOLD"].clone(),
        attestation_key: Secret::new(keys["MAC_ATTESTATION_KEY"].clone()),
    })
}

/// A shell name: `[A-Z_][A-Z0-9_]*`.
fn strict_key(key: &str) -> bool {
    let mut bytes = key.bytes();
    bytes.next().is_some_and(|first| first.is_ascii_uppercase() || first == b'_')
        && bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// A value no shell reads otherwise: non-empty printable ASCII without whitespace, quotes, `$`, backslash or
/// backtick.
fn strict_value(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_graphic() && !b"\"'`$\\".contains(&b))
}

/// A historical layout: exactly the full installed identity in strict lines (no blank line, no comment, one final
/// newline at most), its names mapped to the canonical ones.
fn decode_historical(content: &str, layout: EnvLayout) -> Result<DecodedEnv, FormDefect> {
    let not_exact = FormDefect::HistoricalEnvNotExact;
    let body = content.strip_suffix('\n').unwrap_or(content);
    let mut keys = BTreeMap::new();
    for line in body.split('\n') {
        let line = match layout {
            EnvLayout::ExportPrefixed => line.strip_prefix(EXPORT_PREFIX).ok_or(not_exact)?,
            EnvLayout::Canonical | EnvLayout::OvswarmNames => line,
        };
        let (key, value) = line.split_once('=').ok_or(not_exact)?;
        if !strict_key(key) || !strict_value(value) {
            return Err(not_exact);
        }
        let key = match layout {
            EnvLayout::OvswarmNames => {
                OVSWARM_NAMES.iter().find(|(old, _)| *old == key).map(|(_, canonical)| *canonical).ok_or(not_exact)?
            }
            EnvLayout::Canonical | EnvLayout::ExportPrefixed => key,
        };
        if keys.insert(key.to_owned(), value.to_owned()).is_some() {
            return Err(not_exact);
        }
    }
    let generation = &keys.get("MAC_GENERATION").ok_or(not_exact)?;
    let hold = keys.get("MAC_STARTUP_CLEAR_HOLD").ok_or(not_exact)?;
    if !generation.bytes().all(|b| b.is_ascii_digit()) || !["0", "1"].contains(&hold.as_str()) {
        return Err(not_exact);
    }
    let installed = installed_env(&keys).ok_or(not_exact)?;
    let class = EnvClass::FullInstalled { revision: installed.revision.clone(), generation: installed.generation };
    Ok(DecodedEnv { layout, class, installed: Some(installed) })
}

/// Decodes a historical receipt: a known `schema_version` first, then exactly that version's fields in their order,
/// each non-empty printable ASCII without spaces, the generation a number.
pub fn decode_receipt(content: &str) -> Result<Receipt, FormDefect> {
    let body = content.strip_suffix('\n').unwrap_or(content);
    let lines: Vec<&str> = body.split('\n').collect();
    let version = match lines.first().and_then(|line| line.strip_prefix("schema_version=")) {
        Some("1") => ReceiptVersion::V1,
        Some("2") => ReceiptVersion::V2,
        _ => return Err(FormDefect::UnknownReceiptVersion),
    };
    let fields = version.fields();
    if lines.len() != fields.len() + 1 {
        return Err(FormDefect::MalformedReceipt);
    }
    let mut values = BTreeMap::new();
    for (line, field) in lines[1..].iter().zip(fields) {
        let value = line.strip_prefix(field).and_then(|rest| rest.strip_prefix('='));
        match value {
            Some(value) if !value.is_empty() && value.bytes().all(|b| b.is_ascii_graphic()) => {
                values.insert(*field, value.to_owned());
            }
            _ => return Err(FormDefect::MalformedReceipt),
        }
    }
    let (revision, generation) = match version {
        ReceiptVersion::V1 => (&values["deployed_revision"], &values["deployment_generation"]),
        ReceiptVersion::V2 => (&values["revision"], &values["generation"]),
    };
    // `u64::from_str` accepts a leading `+`; no receipt was ever written with one.
    if !generation.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FormDefect::MalformedReceipt);
    }
    let generation = generation.parse().map_err(|_| FormDefect::MalformedReceipt)?;
    Ok(Receipt {
        version,
        statement: Manifest { revision: revision.clone(), generation, signature: values["signature"].clone() },
        route_digest: values.get("route_digest").cloned(),
    })
}

/// The one canonical rendering of a full installed identity (`preflight::render_env`'s key order), keeping the
/// startup hold the identity has.
pub fn render_canonical_env(env: &InstalledEnv) -> String {
    let InstalledEnv { worker_id, hub_url, revision, generation, startup_clear_hold, attestation_key } = env;
    format!(
        "MAC_ATTESTATION_KEY={}\nMAC_STARTUP_CLEAR_HOLD={startup_clear_hold}\nMAC_WORKER_ID={worker_id}\nMAC_HUB_URL={hub_url}\nMAC_DEPLOYED_REVISION={revision}\nMAC_GENERATION={generation}\n",
        attestation_key.expose()
    )
}

/// What canonicalizing `planned` writes on this node now, from a fresh observation under the fence and the verdict
/// on it: the node must still decode to the same revision and generation with the same canonicalization due (or
/// to the canonical state, when nothing is left to write). `Err` says why not; nothing is written then.
pub fn canonical_forms(
    observation: &NodeObservation,
    verdict: &Verdict,
    planned: &Canonicalization,
    verifier: &dyn SignatureVerifier,
) -> Result<CanonicalForms, String> {
    let changed = || "repair refused: the identity changed under the fence".to_owned();
    let fresh = match verdict {
        Verdict::Coherent { revision, generation }
            if (revision.as_str(), *generation) == (planned.revision.as_str(), planned.generation) =>
        {
            return Ok(CanonicalForms { writes: Vec::new(), attestation_key: None });
        }
        Verdict::Repairable { repair: Repair::Canonicalize(fresh), .. }
            if (fresh.revision.as_str(), fresh.generation) == (planned.revision.as_str(), planned.generation) =>
        {
            fresh
        }
        _ => return Err(changed()),
    };
    let decoded = decode(observation, &Expectation::default(), verifier).map_err(|_| changed())?;
    let EnvState::Decoded(DecodedEnv { layout, installed: Some(installed), .. }) = &decoded.env else {
        return Err(changed());
    };
    let statement = decoded.statement.map_err(|_| changed())?;
    let mut writes = Vec::new();
    if fresh.write_manifest {
        writes.push(CanonicalWrite::Write { file: CanonicalFile::Manifest, content: Secret::new(statement.render()) });
    }
    if *layout != EnvLayout::Canonical {
        let content = Secret::new(render_canonical_env(installed));
        writes.push(CanonicalWrite::Write { file: CanonicalFile::Env, content });
    }
    if fresh.write_marker {
        let content = Secret::new(format!("{}\n", fresh.revision));
        writes.push(CanonicalWrite::Write { file: CanonicalFile::Marker, content });
    }
    if decoded.receipt.is_some() {
        writes.push(CanonicalWrite::Remove { file: CanonicalFile::Receipt });
    }
    Ok(CanonicalForms { writes, attestation_key: Some(installed.attestation_key.clone()) })
}

/// Classifies an environment file in the canonical layout: `KEY=VALUE` lines, no duplicates, no blank keys (a
/// historical layout is [`decode_env`]'s).
pub fn classify_env(content: &str) -> EnvClass {
    match canonical_vars(content) {
        Ok(keys) => class_of(&keys),
        Err(reason) => EnvClass::Malformed { reason },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::preflight::fixtures::{TestVerifier, file};

    fn identity(hold: &str) -> InstalledEnv {
        InstalledEnv {
            worker_id: "worker-07".into(),
            hub_url: "http://10.57.228.137".into(),
            revision: "7f3bbd12".into(),
            generation: 4,
            startup_clear_hold: hold.into(),
            attestation_key: Secret::new("a2V5=="),
        }
    }

    /// The test's own rendering of each historical layout (the engine never writes one).
    fn render_historical(layout: EnvLayout, env: &InstalledEnv) -> String {
        let canonical = render_canonical_env(env);
        match layout {
            EnvLayout::Canonical => canonical,
            EnvLayout::ExportPrefixed => canonical.lines().map(|line| format!("export {line}\n")).collect(),
            EnvLayout::OvswarmNames => canonical
                .lines()
                .map(|line| {
                    let (key, value) = line.split_once('=').unwrap();
                    let old = OVSWARM_NAMES.iter().find(|(_, new)| *new == key).unwrap().0;
                    format!("{old}={value}\n")
                })
                .collect(),
        }
    }

    fn receipt(version: ReceiptVersion, revision: &str, generation: u64) -> String {
        let signature = format!("sig-{revision}-{generation}");
        match version {
            ReceiptVersion::V1 => format!(
                "schema_version=1\ndeployed_revision={revision}\ndeployment_generation={generation}\nsignature={signature}\n"
            ),
            ReceiptVersion::V2 => format!(
                "schema_version=2\nrevision={revision}\ngeneration={generation}\nroute_digest=sha256:routes\nsignature={signature}\n"
            ),
        }
    }

    fn observation() -> NodeObservation {
        NodeObservation {
            node: "worker-07".into(),
            env: Some(file(&render_canonical_env(&identity("1")))),
            marker: Some(file("7f3bbd12\n")),
            manifest: Some(file("revision=7f3bbd12\ngeneration=4\nsignature=sig-7f3bbd12-4\n")),
            receipt: None,
            installed: Some(("7f3bbd12".into(), 4)),
            barrier_generation: 4,
        }
    }

    fn decoded(observation: &NodeObservation) -> DecodedIdentity {
        decode(observation, &Expectation::default(), &TestVerifier).unwrap()
    }

    #[test]
    fn every_historical_layout_decodes_to_the_canonical_identity() {
        for hold in ["0", "1"] {
            let env = identity(hold);
            let canonical = decode_env(&render_canonical_env(&env)).unwrap();
            for layout in [EnvLayout::Canonical, EnvLayout::ExportPrefixed, EnvLayout::OvswarmNames] {
                let found = decode_env(&render_historical(layout, &env)).unwrap();
                assert_eq!(found.layout, layout);
                assert_eq!((&found.class, &found.installed), (&canonical.class, &canonical.installed), "{layout:?}");
                assert_eq!(found.installed.as_ref(), Some(&env));
            }
        }
    }

    #[test]
    fn ambiguous_and_unknown_env_layouts_are_typed_defects() {
        let env = render_canonical_env(&identity("1"));
        let exported = render_historical(EnvLayout::ExportPrefixed, &identity("1"));
        let ovswarm = render_historical(EnvLayout::OvswarmNames, &identity("1"));
        let half_exported: String = env
            .lines()
            .enumerate()
            .map(|(i, l)| if i % 2 == 0 { format!("export {l}\n") } else { format!("{l}\n") })
            .collect();
        let mixed_names = env.replace("MAC_WORKER_ID=", "OVSWARM_WORKER=");
        let exported_ovswarm: String = ovswarm.lines().map(|l| format!("export {l}\n")).collect();
        let cases: Vec<(&str, String, FormDefect)> = vec![
            ("half exported", half_exported, FormDefect::MixedEnvLayout),
            ("mac and ovswarm names", mixed_names, FormDefect::MixedEnvLayout),
            ("exported ovswarm names", exported_ovswarm, FormDefect::UnknownEnvLayout),
            (
                "historical recovery-only",
                "export MAC_ATTESTATION_KEY=k\nexport MAC_STARTUP_CLEAR_HOLD=0\n".into(),
                FormDefect::HistoricalEnvNotExact,
            ),
            ("an extra key", format!("{exported}export MAC_DEBUG=1\n"), FormDefect::HistoricalEnvNotExact),
            (
                "an unknown ovswarm name",
                ovswarm.replace("OVSWARM_HUB=", "OVSWARM_ROUTE="),
                FormDefect::HistoricalEnvNotExact,
            ),
            ("a shell substitution", exported.replace("worker-07", "$(hostname)"), FormDefect::HistoricalEnvNotExact),
            ("a quoted value", exported.replace("worker-07", "\"worker-07\""), FormDefect::HistoricalEnvNotExact),
            ("a blank line", exported.replacen('\n', "\n\n", 1), FormDefect::HistoricalEnvNotExact),
            (
                "a signed generation",
                ovswarm.replace("OVSWARM_GENERATION=4", "OVSWARM_GENERATION=+4"),
                FormDefect::HistoricalEnvNotExact,
            ),
            (
                "a hold that is no flag",
                exported.replace("CLEAR_HOLD=1", "CLEAR_HOLD=yes"),
                FormDefect::HistoricalEnvNotExact,
            ),
            ("a key assigned twice", format!("{exported}export MAC_GENERATION=4\n"), FormDefect::HistoricalEnvNotExact),
            ("a comment", format!("{ovswarm}# installed by hand\n"), FormDefect::HistoricalEnvNotExact),
        ];
        for (name, content, defect) in cases {
            assert_eq!(decode_env(&content), Err(defect), "{name}");
        }
    }

    #[test]
    fn the_canonical_layout_is_classified_as_it_always_was() {
        let recovery = decode_env("MAC_ATTESTATION_KEY=k\nMAC_STARTUP_CLEAR_HOLD=0\n").unwrap();
        assert_eq!(
            (recovery.layout, recovery.class, recovery.installed),
            (EnvLayout::Canonical, EnvClass::RecoveryOnly, None)
        );
        let garbage = decode_env("no equals sign").unwrap();
        assert!(matches!(garbage.class, EnvClass::Malformed { .. }));
        // The canonical layout stays as tolerant of spaces and blank lines as the preflight always was.
        let spaced = decode_env(" MAC_ATTESTATION_KEY = k \n\nMAC_STARTUP_CLEAR_HOLD=0").unwrap();
        assert_eq!(spaced.class, EnvClass::RecoveryOnly);
    }

    #[test]
    fn receipts_decode_by_their_explicit_version_only() {
        for version in [ReceiptVersion::V1, ReceiptVersion::V2] {
            let found = decode_receipt(&receipt(version, "7f3bbd12", 4)).unwrap();
            assert_eq!(found.version, version);
            assert_eq!(
                found.statement,
                Manifest { revision: "7f3bbd12".into(), generation: 4, signature: "sig-7f3bbd12-4".into() }
            );
            assert_eq!(found.route_digest.is_some(), version == ReceiptVersion::V2);
        }
        let v2 = receipt(ReceiptVersion::V2, "7f3bbd12", 4);
        let cases = [
            (
                "no version",
                "revision=7f3bbd12\ngeneration=4\nsignature=s\n".to_owned(),
                FormDefect::UnknownReceiptVersion,
            ),
            ("version 3", v2.replace("schema_version=2", "schema_version=3"), FormDefect::UnknownReceiptVersion),
            ("version 02", v2.replace("schema_version=2", "schema_version=02"), FormDefect::UnknownReceiptVersion),
            (
                "v1 fields under v2",
                receipt(ReceiptVersion::V1, "a", 1).replace("schema_version=1", "schema_version=2"),
                FormDefect::MalformedReceipt,
            ),
            ("a missing field", v2.replace("route_digest=sha256:routes\n", ""), FormDefect::MalformedReceipt),
            ("an extra line", format!("{v2}extra=1\n"), FormDefect::MalformedReceipt),
            (
                "fields out of order",
                v2.replace("revision=7f3bbd12\ngeneration=4", "generation=4\nrevision=7f3bbd12"),
                FormDefect::MalformedReceipt,
            ),
            ("a signed generation", v2.replace("generation=4", "generation=+4"), FormDefect::MalformedReceipt),
            ("an empty value", v2.replace("revision=7f3bbd12", "revision="), FormDefect::MalformedReceipt),
            ("a space in a value", v2.replace("sha256:routes", "sha256: routes"), FormDefect::MalformedReceipt),
        ];
        for (name, content, defect) in cases {
            assert_eq!(decode_receipt(&content).map(|r| r.version), Err(defect), "{name}");
        }
    }

    #[test]
    fn a_receipt_stands_in_for_an_absent_manifest_and_must_agree_with_a_present_one() {
        let mut node = observation();
        node.manifest = None;
        node.receipt = Some(file(&receipt(ReceiptVersion::V1, "7f3bbd12", 4)));
        let found = decoded(&node);
        assert_eq!(found.statement.as_ref().map(|m| m.generation), Ok(4));
        assert_eq!(
            (found.forms.as_slice(), found.receipt),
            (&[HistoricalForm::ReceiptV1][..], Some(ReceiptVersion::V1))
        );
        assert!(found.defects.is_empty());

        let mut beside = observation();
        beside.receipt = Some(file(&receipt(ReceiptVersion::V2, "7f3bbd12", 4)));
        assert_eq!(decoded(&beside).forms, [HistoricalForm::ReceiptV2], "an agreeing receipt beside the manifest");

        type Shape = Box<dyn Fn(&mut NodeObservation)>;
        let cases: Vec<(&str, Shape, FormDefect)> = vec![
            (
                "another generation",
                Box::new(|n| n.receipt = Some(file(&receipt(ReceiptVersion::V2, "7f3bbd12", 5)))),
                FormDefect::ReceiptDisagrees,
            ),
            (
                "unsigned",
                Box::new(|n| {
                    n.receipt =
                        Some(file(&receipt(ReceiptVersion::V1, "7f3bbd12", 4).replace("sig-7f3bbd12-4", "none")))
                }),
                FormDefect::ReceiptUnsigned,
            ),
            (
                "unknown version",
                Box::new(|n| n.receipt = Some(file("schema_version=9\n"))),
                FormDefect::UnknownReceiptVersion,
            ),
            (
                "no identity to bind",
                Box::new(|n| {
                    n.env = Some(file("MAC_ATTESTATION_KEY=k\nMAC_STARTUP_CLEAR_HOLD=0\n"));
                    n.manifest = None;
                    n.receipt = Some(file(&receipt(ReceiptVersion::V1, "7f3bbd12", 4)));
                }),
                FormDefect::NoIdentityToCanonicalize,
            ),
        ];
        for (name, drift, defect) in cases {
            let mut node = observation();
            drift(&mut node);
            assert!(decoded(&node).defects.contains(&defect), "{name}: {:?}", decoded(&node).defects);
        }
    }

    #[test]
    fn unsafe_and_unbounded_files_fail_closed_unread() {
        let mut node = observation();
        node.receipt = Some(FileFacts { mode: 0o644, ..file(&receipt(ReceiptVersion::V1, "7f3bbd12", 4)) });
        node.env = Some(file(&"MAC_X=1\n".repeat(FILE_BYTES_MAX)));
        let surfaces = decode(&node, &Expectation::default(), &TestVerifier).unwrap_err();
        assert_eq!(
            surfaces,
            [
                Contradiction::Unbounded { path: MAC_ENV, bytes: 8 * FILE_BYTES_MAX as u64 },
                Contradiction::UnsafeFile { path: RECEIPT, reason: "mode 644, not 600".into() },
            ]
        );
    }

    #[test]
    fn canonical_forms_render_exactly_the_canonical_files_from_a_fresh_look() {
        let mut node = observation();
        node.env = Some(file(&render_historical(EnvLayout::OvswarmNames, &identity("1"))));
        node.marker = None;
        node.manifest = None;
        node.receipt = Some(file(&receipt(ReceiptVersion::V2, "7f3bbd12", 4)));
        let verdict = crate::rollout::preflight::classify(&node, &Expectation::default(), &TestVerifier);
        let Verdict::Repairable { repair: Repair::Canonicalize(plan), .. } = &verdict else { panic!("{verdict:?}") };
        assert_eq!((plan.write_manifest, plan.write_marker), (true, true));
        let forms = canonical_forms(&node, &verdict, plan, &TestVerifier).unwrap();
        let files: Vec<CanonicalFile> = forms.writes.iter().map(CanonicalWrite::file).collect();
        assert_eq!(files, [CanonicalFile::Manifest, CanonicalFile::Env, CanonicalFile::Marker, CanonicalFile::Receipt]);
        let written = |file: CanonicalFile| match forms.writes.iter().find(|w| w.file() == file) {
            Some(CanonicalWrite::Write { content, .. }) => content.expose().to_owned(),
            other => panic!("{other:?}"),
        };
        assert_eq!(written(CanonicalFile::Manifest), "revision=7f3bbd12\ngeneration=4\nsignature=sig-7f3bbd12-4\n");
        assert_eq!(written(CanonicalFile::Env), render_canonical_env(&identity("1")));
        assert_eq!(written(CanonicalFile::Marker), "7f3bbd12\n");
        assert_eq!(forms.attestation_key, Some(Secret::new("a2V5==")));

        // Applied, the files are canonical: the node is coherent, and a second look writes nothing.
        let mut after = node.clone();
        after.env = Some(file(&written(CanonicalFile::Env)));
        after.manifest = Some(file(&written(CanonicalFile::Manifest)));
        after.marker = Some(file(&written(CanonicalFile::Marker)));
        after.receipt = None;
        let verdict = crate::rollout::preflight::classify(&after, &Expectation::default(), &TestVerifier);
        assert_eq!(verdict, Verdict::Coherent { revision: "7f3bbd12".into(), generation: 4 });
        assert_eq!(canonical_forms(&after, &verdict, plan, &TestVerifier).unwrap().writes, []);

        // Another generation under the fence: refused, nothing written.
        let mut moved = node.clone();
        moved.installed = Some(("7f3bbd12".into(), 5));
        let verdict = crate::rollout::preflight::classify(&moved, &Expectation::default(), &TestVerifier);
        assert_eq!(
            canonical_forms(&moved, &verdict, plan, &TestVerifier),
            Err("repair refused: the identity changed under the fence".into())
        );
    }

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let env = identity("1");
        let forms = CanonicalForms {
            writes: vec![CanonicalWrite::Write {
                file: CanonicalFile::Env,
                content: Secret::new(render_canonical_env(&env)),
            }],
            attestation_key: Some(env.attestation_key.clone()),
        };
        for text in [format!("{env:?}"), format!("{forms:?}"), format!("{:?}", decode_env(&render_canonical_env(&env)))]
        {
            assert!(!text.contains("a2V5=="), "{text}");
        }
    }

    proptest::proptest! {
        #[test]
        fn the_decoder_never_panics(env in "\\PC{0,300}", receipt in "\\PC{0,200}", manifest in "\\PC{0,120}") {
            let mut node = observation();
            node.env = Some(file(&env));
            node.receipt = Some(file(&receipt));
            node.manifest = Some(file(&manifest));
            let _ = decode(&node, &Expectation::default(), &TestVerifier);
            let _ = crate::rollout::preflight::classify(&node, &Expectation::default(), &TestVerifier);
            let _ = decode_env(&env);
            let _ = decode_receipt(&receipt);
        }

        #[test]
        fn a_receipt_of_either_version_states_exactly_what_the_manifest_does(
            revision in "[0-9a-f]{7,40}",
            generation in proptest::prelude::any::<u64>(),
        ) {
            let mut node = observation();
            node.manifest = Some(file(&format!("revision={revision}\ngeneration={generation}\nsignature=sig-{revision}-{generation}\n")));
            let canonical = decoded(&node);
            for version in [ReceiptVersion::V1, ReceiptVersion::V2] {
                let mut historical = node.clone();
                historical.manifest = None;
                historical.receipt = Some(file(&receipt(version, &revision, generation)));
                let found = decoded(&historical);
                proptest::prop_assert_eq!(&found.statement, &canonical.statement);
                proptest::prop_assert_eq!(&found.env, &canonical.env);
                proptest::prop_assert_eq!(found.forms, vec![version.form()]);
            }
        }

        #[test]
        fn decode_of_render_round_trips_and_every_layout_agrees(
            worker in "worker-[0-9]{1,3}",
            hub in "https?://[a-z0-9.]{1,20}(:[0-9]{1,5})?",
            revision in "[0-9a-f]{7,40}",
            generation in proptest::prelude::any::<u64>(),
            hold in "[01]",
            key in "[A-Za-z0-9+/=]{1,44}",
        ) {
            let env = InstalledEnv {
                worker_id: worker, hub_url: hub, revision, generation, startup_clear_hold: hold,
                attestation_key: Secret::new(key),
            };
            let canonical = decode_env(&render_canonical_env(&env)).unwrap();
            proptest::prop_assert_eq!(canonical.layout, EnvLayout::Canonical);
            proptest::prop_assert_eq!(canonical.installed.as_ref(), Some(&env));
            for layout in [EnvLayout::ExportPrefixed, EnvLayout::OvswarmNames] {
                let historical = decode_env(&render_historical(layout, &env)).unwrap();
                proptest::prop_assert_eq!(historical.layout, layout);
                proptest::prop_assert_eq!(&historical.class, &canonical.class);
                proptest::prop_assert_eq!(&historical.installed, &canonical.installed);
            }
        }
    }
}
