//! "Slow is not silent" (`seeds/001_5e13b5e5e5d7ab8b.txt`, the MAAS commissioning failure of 2026-07-20): a stage
//! that waits on MAAS is slow while events or status changes keep arriving, and stalled once it has been silent for
//! the stall window, or as soon as there is positive evidence that waiting cannot help. A stall is classified into the
//! failure class [`crate::workflow::decide`] acts on, with the evidence that justifies it.
//!
//! The seed: "A slow-but-progressing commission still emits a trickle of script-result events, just late; the symptom
//! is ZERO events for 30 minutes = the node never phoned home = a hang/stall, not slow progress. A longer clock does
//! not fix a hang."

use crate::matrix::FailureClass;

/// The default stall window: five minutes with neither an event nor a status change.
pub const STALL_WINDOW_MS: u64 = 5 * 60_000;

/// A machine MAAS enlisted during the stage: an unknown MAC whose BMC address is this node's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMachine {
    pub system_id: String,
    pub mac: String,
    pub bmc_address: String,
}

/// The answer of a resolver probe of the metadata host (the name cloud-init's `cloud-config-url` points at), asked
/// of the resolver the node is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolverProbe {
    NotProbed,
    Answered,
    ServFail { host: String },
}

/// What the driver knows about a waiting stage. All times are on the engine's monotonic clock (the arrival time of
/// an event, not MAAS's timestamp), so a skewed MAAS clock can neither fake nor hide a silence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressEvidence {
    pub now_ms: u64,
    pub stage_started_ms: u64,
    pub last_event_ms: Option<u64>,
    /// The text of the last MAAS event for this machine ("Loading ephemeral", a script result, ...).
    pub last_event: Option<String>,
    pub last_status_change_ms: Option<u64>,
    pub unknown_machine: Option<UnknownMachine>,
    pub metadata_resolver: ResolverProbe,
    /// A region workflow service that is not running (`temporal-worker dead`), when the driver read one.
    pub region_workflow: Option<crate::ports::site::RegionService>,
}

impl ProgressEvidence {
    /// A stage that started at `stage_started_ms` and has seen nothing yet.
    pub fn started_at(stage_started_ms: u64) -> ProgressEvidence {
        ProgressEvidence {
            now_ms: stage_started_ms,
            stage_started_ms,
            last_event_ms: None,
            last_event: None,
            last_status_change_ms: None,
            unknown_machine: None,
            metadata_resolver: ResolverProbe::NotProbed,
            region_workflow: None,
        }
    }

    /// Milliseconds since the last sign of progress (the stage's start counts as one).
    pub fn quiet_for_ms(&self) -> u64 {
        let last_progress_ms = [Some(self.stage_started_ms), self.last_event_ms, self.last_status_change_ms]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(self.stage_started_ms);
        self.now_ms.saturating_sub(last_progress_ms)
    }
}

/// Why a stall was classified as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evidence {
    /// Neither an event nor a status change for longer than the window.
    Silent { quiet_for_ms: u64, stall_window_ms: u64 },
    /// The last thing MAAS said about the machine, for the operator.
    LastEvent { text: String },
    /// The node booted as a machine MAAS does not know (its MACs changed): seed 001's first fault.
    MacDrift(UnknownMachine),
    /// The metadata host does not resolve through the node's resolver: seed 001's second fault.
    ResolverServFail { host: String },
    /// The region's workflow engine does not run: the commands MAAS accepted are never carried out.
    RegionWorkflow(crate::ports::site::RegionService),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StallVerdict {
    /// Progress within the window, however slow: keep waiting.
    Slow {
        quiet_for_ms: u64,
    },
    Stalled {
        class: FailureClass,
        evidence: Vec<Evidence>,
    },
}

/// Tells slow from silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallClassifier {
    pub stall_window_ms: u64,
}

impl Default for StallClassifier {
    fn default() -> Self {
        StallClassifier { stall_window_ms: STALL_WINDOW_MS }
    }
}

impl StallClassifier {
    pub fn new(stall_window_ms: u64) -> StallClassifier {
        StallClassifier { stall_window_ms }
    }

    /// The verdict on a waiting stage, in this order:
    ///
    /// 1. An unknown machine with this node's BMC address is `state_ambiguity`, at once, silent or not. Seed 001:
    ///    "all 9 node NIC MACs regenerated ..., so MAAS treated every post-apply boot as an unknown node (the
    ///    'silence' was an unrecognized machine, booting fine)". Two MAAS machines now claim one BMC: that is
    ///    "observed MAAS/node state conflicts with workflow expectation" (seed 000, section 3), and no wait resolves
    ///    it; section 7 sends it to a person ("move to state_ambiguity / failed_manual_intervention when ownership is
    ///    unclear"). It is not `pxe_discovery_failure`: discovery matched this node long before, at
    ///    `create_or_find_in_maas`; what changed is the node, under a workflow that owns it.
    /// 2. Progress within the window is slow, not stalled.
    /// 3. A silence with a resolver probe that answered SERVFAIL is `site_capability_missing`. Seed 001: "the MAAS 3.7
    ///    rack-only agent resolver SERVFAILs all queries on an internet-isolated rack, so cloud-init's maas-internal
    ///    cloud-config-url never resolved (nodes booted to a login prompt, never fetched scripts)". Seed 000 defines
    ///    `site_capability_missing` as "required site policy/capability absent": name resolution of the metadata host
    ///    is a capability of the site's rack, and it was absent for every node ("all queries"), deterministically,
    ///    until a person repaired it. It is not `upstream_transient` ("MAAS/Vault/network transient"): retrying it is
    ///    the "seven consecutive timeouts" of the incident.
    /// 4. A silence with no other evidence is `upstream_transient`: the machine is still in its MAAS state (no
    ///    "Failed" status, which would be `hardware_mismatch` per section 6's "depending on MAAS status"), and the
    ///    row retries it, bounded, with the silence as evidence.
    pub fn classify(&self, progress: &ProgressEvidence) -> StallVerdict {
        let quiet_for_ms = progress.quiet_for_ms();
        let silent = quiet_for_ms > self.stall_window_ms;
        let mut evidence = Vec::new();
        if let Some(machine) = &progress.unknown_machine {
            evidence.push(Evidence::MacDrift(machine.clone()));
        }
        if silent {
            if let ResolverProbe::ServFail { host } = &progress.metadata_resolver {
                evidence.push(Evidence::ResolverServFail { host: host.clone() });
            }
            if let Some(service) = &progress.region_workflow {
                evidence.push(Evidence::RegionWorkflow(service.clone()));
            }
            evidence.push(Evidence::Silent { quiet_for_ms, stall_window_ms: self.stall_window_ms });
        }
        if evidence.is_empty() {
            return StallVerdict::Slow { quiet_for_ms };
        }
        if let Some(text) = &progress.last_event {
            evidence.push(Evidence::LastEvent { text: text.clone() });
        }
        let class = if progress.unknown_machine.is_some() {
            FailureClass::StateAmbiguity
        } else if matches!(progress.metadata_resolver, ResolverProbe::ServFail { .. }) {
            FailureClass::SiteCapabilityMissing
        } else {
            FailureClass::UpstreamTransient
        };
        StallVerdict::Stalled { class, evidence }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::{NodeState, OnboardingStage, Stage, WorkflowState};
    use crate::workflow::{DecideContext, Decision, Observed, decide};

    fn machine() -> UnknownMachine {
        UnknownMachine {
            system_id: "new-7x3k".into(),
            mac: "52:54:00:aa:bb:cc".into(),
            bmc_address: "10.10.1.17".into(),
        }
    }

    fn servfail() -> ResolverProbe {
        ResolverProbe::ServFail { host: "maas-internal".into() }
    }

    fn at(now_ms: u64, last_event_ms: Option<u64>) -> ProgressEvidence {
        ProgressEvidence {
            now_ms,
            last_event_ms,
            last_event: last_event_ms.map(|_| "Loading ephemeral".to_owned()),
            ..ProgressEvidence::started_at(0)
        }
    }

    #[test]
    fn a_trickle_of_events_is_slow_however_late() {
        let classifier = StallClassifier::default();
        let progress = at(29 * 60_000, Some(25 * 60_000));
        assert_eq!(classifier.classify(&progress), StallVerdict::Slow { quiet_for_ms: 4 * 60_000 });
    }

    #[test]
    fn exactly_the_window_is_slow_and_one_ms_more_is_stalled() {
        let classifier = StallClassifier::default();
        assert_eq!(
            classifier.classify(&at(STALL_WINDOW_MS, None)),
            StallVerdict::Slow { quiet_for_ms: STALL_WINDOW_MS }
        );
        assert_eq!(
            classifier.classify(&at(STALL_WINDOW_MS + 1, None)),
            StallVerdict::Stalled {
                class: FailureClass::UpstreamTransient,
                evidence: vec![Evidence::Silent {
                    quiet_for_ms: STALL_WINDOW_MS + 1,
                    stall_window_ms: STALL_WINDOW_MS
                }],
            }
        );
    }

    #[test]
    fn a_status_change_is_progress_too() {
        let classifier = StallClassifier::default();
        let progress = ProgressEvidence { last_status_change_ms: Some(8 * 60_000), ..at(10 * 60_000, Some(60_000)) };
        assert_eq!(classifier.classify(&progress), StallVerdict::Slow { quiet_for_ms: 2 * 60_000 });
    }

    #[test]
    fn silence_after_the_last_event_names_it_as_evidence() {
        let classifier = StallClassifier::new(60_000);
        let verdict = classifier.classify(&at(200_000, Some(100_000)));
        assert_eq!(
            verdict,
            StallVerdict::Stalled {
                class: FailureClass::UpstreamTransient,
                evidence: vec![
                    Evidence::Silent { quiet_for_ms: 100_000, stall_window_ms: 60_000 },
                    Evidence::LastEvent { text: "Loading ephemeral".into() },
                ],
            }
        );
    }

    #[test]
    fn mac_drift_is_state_ambiguity_at_once() {
        let classifier = StallClassifier::default();
        let progress = ProgressEvidence { unknown_machine: Some(machine()), ..at(60_000, Some(30_000)) };
        assert_eq!(
            classifier.classify(&progress),
            StallVerdict::Stalled {
                class: FailureClass::StateAmbiguity,
                evidence: vec![Evidence::MacDrift(machine()), Evidence::LastEvent { text: "Loading ephemeral".into() }],
            }
        );
    }

    #[test]
    fn a_resolver_servfail_classifies_a_silence_as_a_missing_site_capability() {
        let classifier = StallClassifier::default();
        let silent = ProgressEvidence { metadata_resolver: servfail(), ..at(6 * 60_000, None) };
        let StallVerdict::Stalled { class, evidence } = classifier.classify(&silent) else {
            panic!("six silent minutes are a stall");
        };
        assert_eq!(class, FailureClass::SiteCapabilityMissing);
        assert_eq!(evidence[0], Evidence::ResolverServFail { host: "maas-internal".into() });
        let progressing = ProgressEvidence { metadata_resolver: servfail(), ..at(6 * 60_000, Some(5 * 60_000)) };
        assert!(
            matches!(classifier.classify(&progressing), StallVerdict::Slow { .. }),
            "a SERVFAIL alone does not stop a stage that is still progressing"
        );
    }

    #[test]
    fn the_2026_07_20_incident_is_ambiguity_first_with_both_faults_in_evidence() {
        let classifier = StallClassifier::default();
        let incident = ProgressEvidence {
            unknown_machine: Some(machine()),
            metadata_resolver: servfail(),
            ..at(6 * 60_000, Some(30_000))
        };
        let StallVerdict::Stalled { class, evidence } = classifier.classify(&incident) else {
            panic!("the incident is a stall");
        };
        assert_eq!(class, FailureClass::StateAmbiguity);
        assert!(evidence.contains(&Evidence::MacDrift(machine())));
        assert!(evidence.contains(&Evidence::ResolverServFail { host: "maas-internal".into() }));
    }

    /// An onboarding node's context with `observed`.
    fn ctx(observed: Observed) -> DecideContext {
        DecideContext { observed, ..DecideContext::new(NodeState::Enrolling) }
    }

    /// The 2026-07-20 incident end to end: the stall classifier's class for each fault, decided at the stage that waits
    /// for Ready (where the commission timeout fires), goes to a person instead of a blind retry.
    #[test]
    fn the_incident_s_stalls_go_to_a_person_without_a_retry() {
        let stage = Stage::Onboarding(OnboardingStage::WaitForReady);
        let silent = ProgressEvidence { now_ms: 6 * 60_000, ..ProgressEvidence::started_at(0) };
        let servfail = ProgressEvidence {
            metadata_resolver: ResolverProbe::ServFail { host: "maas-internal".into() },
            ..silent.clone()
        };
        let StallVerdict::Stalled { class, .. } = StallClassifier::default().classify(&servfail) else {
            panic!("a stall")
        };
        let decision = decide(stage, class, 1, &ctx(Observed::AsExpected));
        assert_eq!(decision.workflow_state(), WorkflowState::FailedManualIntervention, "{decision:?}");
        let drift = ProgressEvidence {
            unknown_machine: Some(UnknownMachine {
                system_id: "new".into(),
                mac: "52:54:00:00:00:09".into(),
                bmc_address: "10.10.1.9".into(),
            }),
            ..silent.clone()
        };
        let StallVerdict::Stalled { class, .. } = StallClassifier::default().classify(&drift) else {
            panic!("a stall")
        };
        assert_eq!(decide(stage, class, 1, &ctx(Observed::Stale)), Decision::RefreshObservedState);
        let decision = decide(stage, class, 1, &ctx(Observed::Conflicting));
        assert_eq!(decision.workflow_state(), WorkflowState::FailedManualIntervention, "{decision:?}");
        let StallVerdict::Stalled { class, .. } = StallClassifier::default().classify(&silent) else {
            panic!("a stall")
        };
        assert!(decide(stage, class, 1, &ctx(Observed::AsExpected)).is_retry(), "a bare silence is retried, bounded");
    }
}
