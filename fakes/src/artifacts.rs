//! The fake content-addressed artifact store that holds a revision's deployment capsules
//! (`seeds/003_65d56b75d2c60639.txt`, "Replacement plan": pre-stage a content-addressed capsule containing source,
//! toolchains, wheels, runtime images, helpers, service definitions and recovery material).
//!
//! The store only answers; the simulator's store host task does the waiting. A fetch that the fault plan made slow
//! is still answered at once here: the simulator asks [`ArtifactStore::fetch_delay_ms`] and sleeps that long before it
//! delivers the answer, so the model needs no clock.
//!
//! Known deviation: digests are names (`sha256:<kind>-<revision>`), not hashes of content. The store never computes
//! or checks a hash; what it models is that a digest names exactly one immutable capsule and that a fetch can fail or
//! be slow, not the integrity check itself.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The six kinds of capsule a revision is deployed from. The RCCA also lists toolchains; here they travel inside the
/// runtime image, because nothing in the model tells the two apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactKind {
    Source,
    Wheels,
    RuntimeImage,
    Helpers,
    ServiceDefinitions,
    RecoveryMaterial,
}

impl ArtifactKind {
    /// Every kind, in the order a capsule set lists them.
    pub const ALL: [ArtifactKind; 6] = [
        ArtifactKind::Source,
        ArtifactKind::Wheels,
        ArtifactKind::RuntimeImage,
        ArtifactKind::Helpers,
        ArtifactKind::ServiceDefinitions,
        ArtifactKind::RecoveryMaterial,
    ];

    /// The kind's name as it appears in a digest and in data files (the same spelling serde uses).
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactKind::Source => "source",
            ArtifactKind::Wheels => "wheels",
            ArtifactKind::RuntimeImage => "runtime_image",
            ArtifactKind::Helpers => "helpers",
            ArtifactKind::ServiceDefinitions => "service_definitions",
            ArtifactKind::RecoveryMaterial => "recovery_material",
        }
    }

    /// A plausible size, fixed per kind so that capsule sets are identical on every run.
    fn size_bytes(self) -> u64 {
        match self {
            ArtifactKind::Source => 48 << 20,
            ArtifactKind::Wheels => 310 << 20,
            ArtifactKind::RuntimeImage => 1_900 << 20,
            ArtifactKind::Helpers => 6 << 20,
            ArtifactKind::ServiceDefinitions => 64 << 10,
            ArtifactKind::RecoveryMaterial => 2 << 20,
        }
    }
}

/// One immutable, content-addressed artifact.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Capsule {
    pub digest: String,
    pub kind: ArtifactKind,
    pub revision: String,
    pub size_bytes: u64,
}

/// The digest the fake gives the capsule of `kind` for `revision`.
pub fn capsule_digest(kind: ArtifactKind, revision: &str) -> String {
    format!("sha256:{}-{revision}", kind.as_str())
}

/// The six capsules a revision is deployed from, one per [`ArtifactKind`] in [`ArtifactKind::ALL`] order. The same
/// revision always gives the same set.
pub fn capsule_set(revision: &str) -> Vec<Capsule> {
    ArtifactKind::ALL
        .into_iter()
        .map(|kind| Capsule {
            digest: capsule_digest(kind, revision),
            kind,
            revision: revision.to_owned(),
            size_bytes: kind.size_bytes(),
        })
        .collect()
}

/// Errors the store answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactError {
    /// 404: never published, or removed by the `missing artifact` fault.
    Missing { digest: String },
}

impl std::fmt::Display for ArtifactError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArtifactError::Missing { digest } => write!(f, "artifact {digest} is missing"),
        }
    }
}

impl std::error::Error for ArtifactError {}

/// The store's state: the published capsules and the faults set on them. Ordered collections throughout.
#[derive(Debug, Clone, Default)]
pub struct ArtifactStore {
    capsules: BTreeMap<String, Capsule>,
    missing: BTreeSet<String>,
    fetch_delay_ms: BTreeMap<String, u64>,
}

impl ArtifactStore {
    pub fn new() -> ArtifactStore {
        ArtifactStore::default()
    }

    /// Publishes a capsule. Publishing a digest again replaces it: the store trusts its publisher, and a digest is a
    /// name here (see the module comment), so there is no content to compare.
    pub fn publish(&mut self, capsule: Capsule) {
        self.capsules.insert(capsule.digest.clone(), capsule);
    }

    /// Fetches a capsule by digest. The delay set by [`ArtifactStore::set_fetch_delay_ms`] is the simulator's to wait.
    pub fn fetch(&self, digest: &str) -> Result<Capsule, ArtifactError> {
        if self.missing.contains(digest) {
            return Err(ArtifactError::Missing { digest: digest.to_owned() });
        }
        self.capsules.get(digest).cloned().ok_or_else(|| ArtifactError::Missing { digest: digest.to_owned() })
    }

    /// Fault `missing artifact`: fetches of `digest` answer [`ArtifactError::Missing`] until
    /// [`ArtifactStore::repair`]. Recoverable: the capsule itself is kept.
    pub fn set_missing(&mut self, digest: impl Into<String>) {
        self.missing.insert(digest.into());
    }

    /// Fault `fetch slow`: each fetch of `digest` takes `delay_ms` before its answer arrives. `0` clears it.
    pub fn set_fetch_delay_ms(&mut self, digest: impl Into<String>, delay_ms: u64) {
        let digest = digest.into();
        if delay_ms == 0 {
            self.fetch_delay_ms.remove(&digest);
        } else {
            self.fetch_delay_ms.insert(digest, delay_ms);
        }
    }

    /// How long a fetch of `digest` takes before its answer arrives; `0` when no delay is set.
    pub fn fetch_delay_ms(&self, digest: &str) -> u64 {
        self.fetch_delay_ms.get(digest).copied().unwrap_or(0)
    }

    /// Clears every fault set on `digest`.
    pub fn repair(&mut self, digest: &str) {
        self.missing.remove(digest);
        self.fetch_delay_ms.remove(digest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capsule_set_has_one_capsule_per_kind_named_by_kind_and_revision() {
        let set = capsule_set("2944aeb");
        let kinds: Vec<_> = set.iter().map(|capsule| capsule.kind).collect();
        assert_eq!(kinds, ArtifactKind::ALL);
        assert_eq!(set[2].digest, "sha256:runtime_image-2944aeb");
        assert!(set.iter().all(|capsule| capsule.revision == "2944aeb" && capsule.size_bytes > 0));
        assert_eq!(set, capsule_set("2944aeb"), "the same revision gives the same set");
        let digests: BTreeSet<_> = set.iter().chain(&capsule_set("1154f2a")).map(|c| c.digest.clone()).collect();
        assert_eq!(digests.len(), 12, "no two capsules of two revisions share a digest");
    }

    #[test]
    fn a_missing_capsule_fails_to_fetch_until_repaired_and_a_slow_one_reports_its_delay() {
        let mut store = ArtifactStore::new();
        for capsule in capsule_set("r1") {
            store.publish(capsule);
        }
        let wheels = capsule_digest(ArtifactKind::Wheels, "r1");
        assert_eq!(store.fetch(&wheels).unwrap().kind, ArtifactKind::Wheels);
        assert_eq!(store.fetch("sha256:source-r2"), Err(ArtifactError::Missing { digest: "sha256:source-r2".into() }));

        store.set_missing(wheels.clone());
        store.set_fetch_delay_ms(wheels.clone(), 45_000);
        assert_eq!(store.fetch(&wheels), Err(ArtifactError::Missing { digest: wheels.clone() }));
        assert_eq!(store.fetch_delay_ms(&wheels), 45_000);
        assert_eq!(store.fetch_delay_ms("sha256:source-r1"), 0);
        assert_eq!(store.fetch(&wheels).unwrap_err().to_string(), "artifact sha256:wheels-r1 is missing");

        store.repair(&wheels);
        assert_eq!(store.fetch(&wheels).unwrap().digest, wheels);
        assert_eq!(store.fetch_delay_ms(&wheels), 0);
    }
}
