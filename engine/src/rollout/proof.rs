//! A target's proof before its lane is released (RCCA exit criteria: "every target proves source revision,
//! deployment generation, service health, and attestation identity before its lane is released", not a heartbeat
//! alone). The driver waits for a heartbeat naming the revision, then observes the node and asks [`gaps`] what the
//! node itself does not prove.

use crate::ports::NodeReport;

/// What `report` fails to prove of a target that should run `revision` at `generation` with `attestation_key` in
/// its environment: the installed source and its generation, the service running, the environment's attestation key.
/// Empty when all four hold. Each gap names what was found, never a key's value.
pub fn gaps(report: &NodeReport, revision: &str, generation: u64, attestation_key: Option<&str>) -> Vec<String> {
    let mut gaps = Vec::new();
    match &report.identity.installed {
        Some((installed, at)) if installed == revision && *at == generation => {}
        Some((installed, at)) => gaps.push(format!("installed {installed}@{at}, not {revision}@{generation}")),
        None => gaps.push("no installed source".to_owned()),
    }
    if !report.service_running {
        gaps.push("its service is not running".to_owned());
    }
    if let Some(key) = attestation_key
        && report.identity.env_value("MAC_ATTESTATION_KEY") != Some(key)
    {
        gaps.push("its environment's attestation key is not the secrets store's".to_owned());
    }
    gaps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::{FileFacts, FileKind, NodeObservation};

    fn report(installed: Option<(&str, u64)>, running: bool, key: &str) -> NodeReport {
        let env = FileFacts {
            kind: FileKind::Regular,
            mode: 0o600,
            owner: "mac".into(),
            nlink: 1,
            content: format!("MAC_STARTUP_CLEAR_HOLD=1\nMAC_ATTESTATION_KEY={key}\n"),
        };
        NodeReport {
            identity: NodeObservation {
                node: "w1".into(),
                env: Some(env),
                marker: None,
                manifest: None,
                receipt: None,
                installed: installed.map(|(revision, generation)| (revision.to_owned(), generation)),
                barrier_generation: 0,
            },
            service_running: running,
            staged: Vec::new(),
            credential: None,
        }
    }

    #[test]
    fn a_target_is_proved_only_by_its_revision_generation_running_service_and_attestation_key() {
        let proved = report(Some(("2944aebb", 5)), true, "key-w1");
        assert!(gaps(&proved, "2944aebb", 5, Some("key-w1")).is_empty());
        // Without a key to check (a node the secrets store has none for), the other three still must hold.
        assert!(gaps(&proved, "2944aebb", 5, None).is_empty());
        let cases = [
            (report(Some(("2944aebb", 4)), true, "key-w1"), "installed 2944aebb@4, not 2944aebb@5"),
            (report(Some(("7f3bbd12", 5)), true, "key-w1"), "installed 7f3bbd12@5, not 2944aebb@5"),
            (report(None, true, "key-w1"), "no installed source"),
            (report(Some(("2944aebb", 5)), false, "key-w1"), "its service is not running"),
            (report(Some(("2944aebb", 5)), true, "key-other"), "attestation key is not the secrets store's"),
        ];
        for (report, gap) in cases {
            let found = gaps(&report, "2944aebb", 5, Some("key-w1"));
            assert_eq!(found.len(), 1, "{found:?}");
            assert!(found[0].contains(gap), "{found:?}");
            assert!(!found[0].contains("key-w1") && !found[0].contains("key-other"), "no key is named");
        }
    }
}
