//! The read-only identity-coherence preflight of the 2026-09-21 RCCA (P0: "Add an all-node identity-coherence
//! preflight"): before the hub epoch opens or any service stops, classify every selected node's revision marker,
//! environment class, installed source, generation barrier and signed manifest, name the exact contradictory surfaces,
//! and decide per node: coherent, repairable under the deployment fence, or quarantined with a typed repair plan.
//!
//! Postel-like tolerance without weaker security (RCCA): a missing redundant marker is repairable only when signed,
//! generation-bound evidence independently proves its exact value, and a node in a known historical form
//! ([`crate::rollout::decode`]) that is otherwise coherent is canonicalized under the fence; everything ambiguous,
//! unowned, writable, symlinked, multiply linked, unbounded, unsigned or conflicting fails closed.

use crate::ports::NodeObservation;
use crate::ports::events::FormDefect;
pub use crate::rollout::decode::classify_env;
use crate::rollout::decode::{self, DecodedEnv, EnvState};
use crate::rollout::identity::InstalledIdentity;
pub use crate::rollout::identity::{
    Canonicalization, Contradiction, EnvClass, Expectation, INSTALLED_KEYS, MAC_ENV, MANIFEST, MARKER, Manifest,
    RECEIPT, RECOVERY_KEYS, Repair, SignatureVerifier, Verdict, recovery_env_writes,
};

/// The one canonical installed environment the controller emits (the startup hold cleared: the service's start
/// releases its own dispatch hold).
pub fn render_env(identity: &InstalledIdentity<'_>) -> String {
    let InstalledIdentity { node, hub_url, revision, generation, attestation_key } = identity;
    decode::render_canonical_env(&decode::InstalledEnv {
        worker_id: (*node).to_owned(),
        hub_url: (*hub_url).to_owned(),
        revision: (*revision).to_owned(),
        generation: *generation,
        startup_clear_hold: "1".to_owned(),
        attestation_key: crate::secret::Secret::new(*attestation_key),
    })
}

/// Classifies one node from a read-only observation, decoded by [`decode::decode`] whichever known forms its files
/// are in.
pub fn classify(observation: &NodeObservation, expectation: &Expectation, verifier: &dyn SignatureVerifier) -> Verdict {
    // Unsafe and unbounded files fail closed before anything is read from them.
    let decoded = match decode::decode(observation, expectation, verifier) {
        Ok(decoded) => decoded,
        Err(surfaces) => return quarantine(surfaces),
    };
    let mut surfaces = Vec::new();
    let marker = observation.marker.as_ref().map(|facts| facts.content.trim().to_owned());
    let Some((revision, generation)) = observation.installed.clone() else {
        surfaces.push(Contradiction::NothingInstalled);
        return quarantine(surfaces);
    };
    let installed_label = format!("{revision}@{generation}");

    match &decoded.statement {
        Err(contradiction) => surfaces.push(contradiction.clone()),
        Ok(manifest) if (manifest.revision.as_str(), manifest.generation) != (revision.as_str(), generation) => {
            surfaces.push(Contradiction::ManifestDisagrees {
                manifest: format!("{}@{}", manifest.revision, manifest.generation),
                installed: installed_label.clone(),
            });
        }
        Ok(_) => {}
    }
    // The receipt's defects, beside the manifest they stand in for or contradict.
    let env_defect = match &decoded.env {
        EnvState::Defective(defect) => Some(*defect),
        EnvState::Absent | EnvState::Decoded(_) => None,
    };
    surfaces.extend(
        decoded
            .defects
            .iter()
            .filter(|defect| Some(**defect) != env_defect && **defect != FormDefect::NoIdentityToCanonicalize)
            .map(|defect| Contradiction::Historical(*defect)),
    );
    if observation.barrier_generation != generation {
        surfaces
            .push(Contradiction::BarrierDisagrees { barrier: observation.barrier_generation, installed: generation });
    }
    if let Some(marker) = &marker {
        if *marker != revision {
            surfaces.push(Contradiction::MarkerDisagrees { marker: marker.clone(), installed: revision.clone() });
        }
    }
    let mut repair = None;
    match &decoded.env {
        EnvState::Decoded(DecodedEnv { class, .. }) => match class {
            EnvClass::FullInstalled { revision: env_revision, generation: env_generation } => {
                if (env_revision.as_str(), *env_generation) != (revision.as_str(), generation) {
                    surfaces.push(Contradiction::EnvDisagrees {
                        env: format!("{env_revision}@{env_generation}"),
                        installed: installed_label.clone(),
                    });
                }
                if marker.is_none() {
                    // worker-50: repairable only if every other surface, including a signed manifest, agrees.
                    surfaces.push(Contradiction::MarkerAbsentWithFullEnv);
                    repair = Some(Repair::WriteMarker { revision: revision.clone(), generation });
                }
            }
            EnvClass::RecoveryOnly => {
                // A retained partial successor: coherent only when the marker is absent (the recovery path owns it).
                if marker.is_some() {
                    surfaces.push(Contradiction::EnvDisagrees {
                        env: "recovery-only".into(),
                        installed: installed_label.clone(),
                    });
                }
            }
            EnvClass::Absent => repair = Some(Repair::RecreateRecoveryEnvHoldFirst),
            EnvClass::ExtraKeys { extra } => surfaces.push(Contradiction::ExtraRecoveryKeys { keys: extra.clone() }),
            EnvClass::Malformed { reason } => surfaces.push(Contradiction::EnvMalformed { reason: reason.clone() }),
        },
        EnvState::Absent => repair = Some(Repair::RecreateRecoveryEnvHoldFirst),
        EnvState::Defective(defect) => surfaces.push(Contradiction::Historical(*defect)),
    }
    if decoded.defects.contains(&FormDefect::NoIdentityToCanonicalize) {
        surfaces.push(Contradiction::Historical(FormDefect::NoIdentityToCanonicalize));
    }

    // The marker's absence is the one surface a repair may cover; anything else quarantines.
    let marker_missing = surfaces.contains(&Contradiction::MarkerAbsentWithFullEnv);
    if surfaces.iter().any(|surface| *surface != Contradiction::MarkerAbsentWithFullEnv) {
        return quarantine(surfaces);
    }
    if !decoded.forms.is_empty() {
        let canonicalization = Canonicalization {
            revision: revision.clone(),
            generation,
            forms: decoded.forms,
            write_manifest: observation.manifest.is_none(),
            write_marker: marker_missing,
        };
        return Verdict::Repairable { revision, generation, repair: Repair::Canonicalize(canonicalization) };
    }
    match repair {
        None => Verdict::Coherent { revision, generation },
        Some(repair) => Verdict::Repairable { revision, generation, repair },
    }
}

fn quarantine(surfaces: Vec<Contradiction>) -> Verdict {
    Verdict::Quarantined { repair: Repair::OperatorInspect { surfaces: surfaces.clone() }, surfaces }
}

/// What the preflight's and the selection's tests share: the test trust root and a canonical file.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{Manifest, SignatureVerifier};
    use crate::ports::{FileFacts, FileKind};

    /// The test trust root: a signature is valid when it is `sig-<revision>-<generation>`.
    pub(crate) struct TestVerifier;

    impl SignatureVerifier for TestVerifier {
        fn verify(&self, manifest: &Manifest) -> bool {
            manifest.signature == format!("sig-{}-{}", manifest.revision, manifest.generation)
        }
    }

    /// A regular file of the canonical mode, owner and link count, holding `content`.
    pub(crate) fn file(content: &str) -> FileFacts {
        FileFacts { kind: FileKind::Regular, mode: 0o600, owner: "ovswarm".into(), nlink: 1, content: content.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{TestVerifier, file};
    use super::*;
    use crate::ports::FileKind;

    fn full_env(revision: &str, generation: u64) -> String {
        format!(
            "MAC_ATTESTATION_KEY=k\nMAC_STARTUP_CLEAR_HOLD=1\nMAC_WORKER_ID=w\nMAC_HUB_URL=https://hub\nMAC_DEPLOYED_REVISION={revision}\nMAC_GENERATION={generation}\n"
        )
    }

    fn coherent() -> NodeObservation {
        NodeObservation {
            node: "worker-07".into(),
            env: Some(file(&full_env("7f3bbd12", 4))),
            marker: Some(file("7f3bbd12\n")),
            manifest: Some(file("revision=7f3bbd12\ngeneration=4\nsignature=sig-7f3bbd12-4\n")),
            receipt: None,
            installed: Some(("7f3bbd12".into(), 4)),
            barrier_generation: 4,
        }
    }

    fn check(observation: &NodeObservation) -> Verdict {
        classify(observation, &Expectation::default(), &TestVerifier)
    }

    fn surfaces(verdict: Verdict) -> Vec<Contradiction> {
        match verdict {
            Verdict::Quarantined { surfaces, .. } => surfaces,
            other => panic!("expected quarantine, got {other:?}"),
        }
    }

    #[test]
    fn a_coherent_installed_node_passes() {
        assert_eq!(check(&coherent()), Verdict::Coherent { revision: "7f3bbd12".into(), generation: 4 });
    }

    #[test]
    fn worker_50_with_agreeing_signed_evidence_is_repaired_with_the_exact_marker() {
        let mut node = coherent();
        node.marker = None;
        let verdict = check(&node);
        assert_eq!(
            verdict,
            Verdict::Repairable {
                revision: "7f3bbd12".into(),
                generation: 4,
                repair: Repair::WriteMarker { revision: "7f3bbd12".into(), generation: 4 }
            }
        );
    }

    #[test]
    fn worker_50_without_signed_evidence_is_quarantined_naming_both_surfaces() {
        let mut node = coherent();
        node.marker = None;
        node.manifest = Some(file("revision=7f3bbd12\ngeneration=4\nsignature=none\n"));
        assert_eq!(surfaces(check(&node)), [Contradiction::ManifestUnsigned, Contradiction::MarkerAbsentWithFullEnv]);
    }

    #[test]
    fn negative_repairs_fail_closed() {
        type Drift = Box<dyn Fn(&mut NodeObservation)>;
        let cases: Vec<(&str, Drift, Contradiction)> = vec![
            (
                "stale revision",
                Box::new(|n| n.marker = Some(file("0000000"))),
                Contradiction::MarkerDisagrees { marker: "0000000".into(), installed: "7f3bbd12".into() },
            ),
            (
                "wrong generation",
                Box::new(|n| n.manifest = Some(file("revision=7f3bbd12\ngeneration=5\nsignature=sig-7f3bbd12-5"))),
                Contradiction::ManifestDisagrees { manifest: "7f3bbd12@5".into(), installed: "7f3bbd12@4".into() },
            ),
            (
                "unsafe mode",
                Box::new(|n| n.env.as_mut().unwrap().mode = 0o644),
                Contradiction::UnsafeFile { path: MAC_ENV, reason: "mode 644, not 600".into() },
            ),
            (
                "wrong owner",
                Box::new(|n| n.marker.as_mut().unwrap().owner = "root".into()),
                Contradiction::UnsafeFile { path: MARKER, reason: "owned by root, not ovswarm".into() },
            ),
            (
                "symlink",
                Box::new(|n| n.env.as_mut().unwrap().kind = FileKind::Symlink),
                Contradiction::UnsafeFile { path: MAC_ENV, reason: "a symlink".into() },
            ),
            (
                "hard link",
                Box::new(|n| n.manifest.as_mut().unwrap().nlink = 2),
                Contradiction::UnsafeFile { path: MANIFEST, reason: "2 hard links".into() },
            ),
            (
                "extra recovery keys",
                Box::new(|n| {
                    n.marker = None;
                    n.env = Some(file("MAC_ATTESTATION_KEY=k\nMAC_STARTUP_CLEAR_HOLD=0\nMAC_DEBUG=1\n"));
                }),
                Contradiction::ExtraRecoveryKeys { keys: vec!["MAC_DEBUG".into()] },
            ),
        ];
        for (name, drift, expected) in cases {
            let mut node = coherent();
            drift(&mut node);
            let found = surfaces(check(&node));
            // Each contradiction is named once: a historical defect the env's own decoding reported is not repeated.
            assert_eq!(found.iter().filter(|surface| **surface == expected).count(), 1, "{name}: {found:?}");
        }
    }

    #[test]
    fn a_coherent_historical_form_is_canonicalized_and_anything_else_about_it_quarantines() {
        use crate::rollout::decode::{FormDefect, HistoricalForm};
        let exported: String = full_env("7f3bbd12", 4).lines().map(|line| format!("export {line}\n")).collect();
        let v1 = "schema_version=1\ndeployed_revision=7f3bbd12\ndeployment_generation=4\nsignature=sig-7f3bbd12-4\n";
        let canonicalize = |forms: Vec<HistoricalForm>, write_manifest, write_marker| Verdict::Repairable {
            revision: "7f3bbd12".into(),
            generation: 4,
            repair: Repair::Canonicalize(Canonicalization {
                revision: "7f3bbd12".into(),
                generation: 4,
                forms,
                write_manifest,
                write_marker,
            }),
        };
        type Shape = Box<dyn Fn(&mut NodeObservation)>;
        let exported_env: Shape = {
            let exported = exported.clone();
            Box::new(move |n| n.env = Some(file(&exported)))
        };
        let positive: Vec<(&str, Shape, Verdict)> = vec![
            ("exported env", exported_env, canonicalize(vec![HistoricalForm::ExportPrefixedEnv], false, false)),
            (
                "receipt for the manifest, worker-50's marker",
                Box::new(move |n| {
                    n.manifest = None;
                    n.marker = None;
                    n.receipt = Some(file(v1));
                }),
                canonicalize(vec![HistoricalForm::ReceiptV1], true, true),
            ),
        ];
        for (name, shape, verdict) in positive {
            let mut node = coherent();
            shape(&mut node);
            assert_eq!(check(&node), verdict, "{name}");
        }
        let negative: Vec<(&str, Shape, Contradiction)> = vec![
            (
                "half exported",
                Box::new(|n| n.env = Some(file("export MAC_ATTESTATION_KEY=k\nMAC_STARTUP_CLEAR_HOLD=1\n"))),
                Contradiction::Historical(FormDefect::MixedEnvLayout),
            ),
            (
                "a historical env of another revision",
                Box::new(move |n| n.env = Some(file(&exported.replace("=7f3bbd12", "=0000000")))),
                Contradiction::EnvDisagrees { env: "0000000@4".into(), installed: "7f3bbd12@4".into() },
            ),
            (
                "an unsigned receipt for the manifest",
                Box::new(move |n| {
                    n.manifest = None;
                    n.receipt = Some(file(&v1.replace("sig-7f3bbd12-4", "none")));
                }),
                Contradiction::Historical(FormDefect::ReceiptUnsigned),
            ),
            (
                "a receipt of an unknown version beside the manifest",
                Box::new(|n| n.receipt = Some(file("schema_version=3\n"))),
                Contradiction::Historical(FormDefect::UnknownReceiptVersion),
            ),
            (
                "a receipt on a retained partial successor",
                Box::new(move |n| {
                    n.env = Some(file("MAC_ATTESTATION_KEY=k\nMAC_STARTUP_CLEAR_HOLD=0\n"));
                    n.marker = None;
                    n.receipt = Some(file(v1));
                }),
                Contradiction::Historical(FormDefect::NoIdentityToCanonicalize),
            ),
        ];
        for (name, shape, expected) in negative {
            let mut node = coherent();
            shape(&mut node);
            let found = surfaces(check(&node));
            // Named once: a defect the env's own decoding reported, or the missing identity, is not repeated.
            assert_eq!(found.iter().filter(|surface| **surface == expected).count(), 1, "{name}: {found:?}");
        }
    }

    #[test]
    fn an_absent_env_is_recreated_hold_first() {
        let mut node = coherent();
        node.env = None;
        match check(&node) {
            Verdict::Repairable { repair: Repair::RecreateRecoveryEnvHoldFirst, .. } => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_recovery_env_is_written_hold_first_and_ends_recovery_only() {
        let writes = recovery_env_writes("k");
        assert_eq!(writes, ["MAC_STARTUP_CLEAR_HOLD=0\n", "MAC_ATTESTATION_KEY=k\nMAC_STARTUP_CLEAR_HOLD=0\n"]);
        assert_eq!(classify_env(&writes[1]), EnvClass::RecoveryOnly);
    }

    #[test]
    fn the_rendered_env_is_the_full_installed_identity_it_names() {
        let identity = crate::rollout::rules::InstalledIdentity {
            node: "worker-07",
            hub_url: "https://hub",
            revision: "7f3bbd12",
            generation: 4,
            attestation_key: "k",
        };
        let env = render_env(&identity);
        assert_eq!(env, full_env("7f3bbd12", 4).replace("MAC_WORKER_ID=w", "MAC_WORKER_ID=worker-07"));
        assert_eq!(classify_env(&env), EnvClass::FullInstalled { revision: "7f3bbd12".into(), generation: 4 });
    }

    #[test]
    fn env_decoding_rejects_duplicates_and_garbage() {
        assert!(matches!(classify_env("A=1\nA=2"), EnvClass::Malformed { .. }));
        assert!(matches!(classify_env("no equals sign"), EnvClass::Malformed { .. }));
        assert_eq!(classify_env("MAC_ATTESTATION_KEY=k\nMAC_STARTUP_CLEAR_HOLD=0\n"), EnvClass::RecoveryOnly);
        assert_eq!(
            classify_env(&full_env("abc", 9)),
            EnvClass::FullInstalled { revision: "abc".into(), generation: 9 }
        );
        // Found by cargo-mutants (docs/testing.md): a blank key and a key with a space are each malformed, and the
        // installed set with one key more is not the installed set.
        let recovery = "MAC_ATTESTATION_KEY=k\nMAC_STARTUP_CLEAR_HOLD=0\n";
        for bad in ["=1", "MAC KEY=1"] {
            let env = format!("{recovery}{bad}\n");
            assert!(matches!(classify_env(&env), EnvClass::Malformed { .. }), "{bad}: {:?}", classify_env(&env));
        }
        let more = format!("{}\nMAC_EXTRA=1\n", full_env("abc", 9).trim_end());
        assert!(!matches!(classify_env(&more), EnvClass::FullInstalled { .. }), "{:?}", classify_env(&more));
    }

    #[test]
    fn contradictions_name_their_surfaces_in_words() {
        let unreachable = Contradiction::Unreachable { error: "ssh: timed out".into() };
        assert_eq!(unreachable.to_string(), "unreachable in preflight: ssh: timed out");
        let text = Contradiction::MarkerAbsentWithFullEnv.to_string();
        assert_eq!(
            text,
            "~/.mac/deployed-source-revision is absent but ~/.mac/mac.env carries a full installed identity"
        );
    }
}
