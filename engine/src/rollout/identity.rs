//! The vocabulary of a worker's identity, which the decoder, the preflight and the rollout's rules share: where the
//! identity lives on a worker and what its files may hold, the signed manifest and its trust root, what the engine
//! expects of every file, the classes and contradictions the preflight names, the repairs it plans, its verdict per
//! node, and the one identity a node has after its install. Types and constants only, and the few renderings that
//! need nothing else; the decoding is [`crate::rollout::decode`]'s, the judgement [`crate::rollout::preflight`]'s.

use std::collections::BTreeMap;

use crate::ports::events::{FormDefect, HistoricalForm};

/// The largest identity file the decoder reads: a larger one is unbounded and fails closed unread. The canonical
/// files are a few hundred bytes.
pub const FILE_BYTES_MAX: usize = 4_096;

/// Where the identity lives on a worker.
pub const MAC_ENV: &str = "~/.mac/mac.env";
pub const MARKER: &str = "~/.mac/deployed-source-revision";
pub const MANIFEST: &str = "~/.mac/deployment-manifest";
/// Where installers before the signed manifest left their versioned deployment receipt (historical only: nothing
/// writes one now, and a canonicalization removes it).
pub const RECEIPT: &str = "~/.mac/deployment-receipt";

/// The keys of the recovery-only environment, exactly.
pub const RECOVERY_KEYS: [&str; 2] = ["MAC_ATTESTATION_KEY", "MAC_STARTUP_CLEAR_HOLD"];
/// The keys of a full installed identity.
pub const INSTALLED_KEYS: [&str; 6] = [
    "MAC_ATTESTATION_KEY",
    "MAC_STARTUP_CLEAR_HOLD",
    "MAC_WORKER_ID",
    "MAC_HUB_URL",
    "MAC_DEPLOYED_REVISION",
    "MAC_GENERATION",
];

/// A deployment manifest: a signed statement of the revision and generation a node runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub revision: String,
    pub generation: u64,
    pub signature: String,
}

impl Manifest {
    /// Parses `revision=…`, `generation=…`, `signature=…` lines; anything else is not a manifest.
    pub fn parse(text: &str) -> Option<Manifest> {
        let mut fields = BTreeMap::new();
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            let (key, value) = line.split_once('=')?;
            if fields.insert(key.trim(), value.trim()).is_some() {
                return None;
            }
        }
        if fields.len() != 3 {
            return None;
        }
        Some(Manifest {
            revision: fields.get("revision")?.to_string(),
            generation: fields.get("generation")?.parse().ok()?,
            signature: fields.get("signature")?.to_string(),
        })
    }

    /// The one rendering of a manifest: its three lines in order.
    pub fn render(&self) -> String {
        format!("revision={}\ngeneration={}\nsignature={}\n", self.revision, self.generation, self.signature)
    }
}

/// The trust root: checks a manifest's signature. Production verifies against the deployment signing key; the
/// simulator supplies its own scheme. The engine never guesses.
pub trait SignatureVerifier {
    fn verify(&self, manifest: &Manifest) -> bool;
}

/// What the engine expects of every node before this rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    /// The owner every identity file must have (owner-only files).
    pub owner: String,
    /// The mode every identity file must have.
    pub mode: u32,
}

impl Default for Expectation {
    fn default() -> Self {
        Expectation { owner: "ovswarm".into(), mode: 0o600 }
    }
}

/// The environment file's class, decoded without trusting it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvClass {
    Absent,
    /// Exactly the two recovery keys.
    RecoveryOnly,
    /// The full installed identity, naming a revision and generation.
    FullInstalled {
        revision: String,
        generation: u64,
    },
    /// The recovery keys plus others that do not make a full identity: forbidden.
    ExtraKeys {
        extra: Vec<String>,
    },
    Malformed {
        reason: String,
    },
}

/// One contradictory or unsafe surface, named exactly (the RCCA: "Error evidence does not name the exact
/// contradictory identity surfaces" was an open defect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contradiction {
    UnsafeFile {
        path: &'static str,
        reason: String,
    },
    /// Larger than [`FILE_BYTES_MAX`]: not read at all.
    Unbounded {
        path: &'static str,
        bytes: u64,
    },
    /// A historical artifact the decoder does not recognize (ambiguous, of an unknown version, unsigned, conflicting).
    Historical(FormDefect),
    EnvMalformed {
        reason: String,
    },
    ExtraRecoveryKeys {
        keys: Vec<String>,
    },
    /// worker-50's shape: no marker, but a full installed environment.
    MarkerAbsentWithFullEnv,
    MarkerDisagrees {
        marker: String,
        installed: String,
    },
    EnvDisagrees {
        env: String,
        installed: String,
    },
    ManifestMissing,
    ManifestUnreadable,
    ManifestUnsigned,
    ManifestDisagrees {
        manifest: String,
        installed: String,
    },
    BarrierDisagrees {
        barrier: u64,
        installed: u64,
    },
    NothingInstalled,
    /// The read-only observation itself failed (after bounded retries): nothing is known, so nothing is trusted.
    Unreachable {
        error: String,
    },
}

impl std::fmt::Display for Contradiction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Contradiction::UnsafeFile { path, reason } => write!(f, "{path} is unsafe: {reason}"),
            Contradiction::Unbounded { path, bytes } => {
                write!(f, "{path} is unbounded: {bytes} bytes, more than {}", FILE_BYTES_MAX)
            }
            Contradiction::Historical(defect) => write!(f, "{defect}"),
            Contradiction::EnvMalformed { reason } => write!(f, "{MAC_ENV} is malformed: {reason}"),
            Contradiction::ExtraRecoveryKeys { keys } => {
                write!(f, "{MAC_ENV} recovery-only form has extra keys {}", keys.join(", "))
            }
            Contradiction::MarkerAbsentWithFullEnv => {
                write!(f, "{MARKER} is absent but {MAC_ENV} carries a full installed identity")
            }
            Contradiction::MarkerDisagrees { marker, installed } => {
                write!(f, "{MARKER} says {marker}, installed source is {installed}")
            }
            Contradiction::EnvDisagrees { env, installed } => {
                write!(f, "{MAC_ENV} says {env}, installed source is {installed}")
            }
            Contradiction::ManifestMissing => write!(f, "{MANIFEST} is absent"),
            Contradiction::ManifestUnreadable => write!(f, "{MANIFEST} is not a manifest"),
            Contradiction::ManifestUnsigned => write!(f, "{MANIFEST} signature does not verify"),
            Contradiction::ManifestDisagrees { manifest, installed } => {
                write!(f, "{MANIFEST} names {manifest}, installed source is {installed}")
            }
            Contradiction::BarrierDisagrees { barrier, installed } => {
                write!(f, "generation barrier is {barrier}, installed generation is {installed}")
            }
            Contradiction::NothingInstalled => write!(f, "no installed source or venv"),
            Contradiction::Unreachable { error } => write!(f, "unreachable in preflight: {error}"),
        }
    }
}

/// A typed repair, executed only under the deployment fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// Write the canonical marker: signed, generation-bound evidence agrees on exactly this revision and generation.
    WriteMarker { revision: String, generation: u64 },
    /// Recreate the recovery-only environment, with `MAC_STARTUP_CLEAR_HOLD=0` durably written before the
    /// attestation key (the RCCA's "recovery hold precedes recovery identity").
    RecreateRecoveryEnvHoldFirst,
    /// Rewrite a recognized historical form in the canonical forms (manifest, `mac.env`, marker; the receipt
    /// removed), every identity value kept: the decoder found nothing else wrong.
    Canonicalize(Canonicalization),
    /// Nothing automatic is safe: an operator inspects these surfaces.
    OperatorInspect { surfaces: Vec<Contradiction> },
}

/// The preflight's decision for one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Coherent {
        revision: String,
        generation: u64,
    },
    /// Coherent once the repair is applied under the fence.
    Repairable {
        revision: String,
        generation: u64,
        repair: Repair,
    },
    /// `deployment_quarantined`: dispatch-held, excluded from the lanes, with a repair plan.
    Quarantined {
        surfaces: Vec<Contradiction>,
        repair: Repair,
    },
}

/// The recovery-only environment's writes, in order (the RCCA's "recovery hold precedes recovery identity"):
/// `MAC_STARTUP_CLEAR_HOLD=0` alone, durable before the attestation key is written beside it.
pub fn recovery_env_writes(attestation_key: &str) -> Vec<String> {
    vec![
        "MAC_STARTUP_CLEAR_HOLD=0\n".to_owned(),
        format!("MAC_ATTESTATION_KEY={attestation_key}\nMAC_STARTUP_CLEAR_HOLD=0\n"),
    ]
}

/// The typed repair of a node in a recognized, coherent historical form: rewrite the canonical forms under the
/// deployment fence, never changing an identity value. Carries no secret (it is reported as it is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonicalization {
    pub revision: String,
    pub generation: u64,
    /// The historical forms found (each rewritten or removed).
    pub forms: Vec<HistoricalForm>,
    /// The manifest is absent: it is written from the receipt's signed statement, in its one rendering.
    pub write_manifest: bool,
    /// The marker is absent: the exact marker is written, as the marker repair would.
    pub write_marker: bool,
}

/// What the installed environment names: one node's identity after its install.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstalledIdentity<'a> {
    pub node: &'a str,
    pub hub_url: &'a str,
    pub revision: &'a str,
    pub generation: u64,
    pub attestation_key: &'a str,
}
