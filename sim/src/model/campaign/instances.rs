//! The instance lifecycle's part of a campaign's fault plan (campaigns with `[instances]`): the provider's faults,
//! lost create answers, a region whose sync stops, controller deaths at the instance controller's named points,
//! and the operators' and consumers' requests a fleet of instances sees — cordons, drains, holds, terminates,
//! claims and releases, approvals and denials — drawn after every other kind, so they change no older plan.

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

use super::{FaultMix, Rate};
use crate::model::faults::{DeathPoint, DeathSubsystem, InstanceOp, ProviderFaultKind, Step, TimedStep};
use crate::model::spec::RangeMs;
use crate::model::spec::instances::InstancesSpec;

/// The instance lifecycle's knobs of the fault mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InstanceKnob {
    ProviderFault,
    ProviderAnswerLost,
    ProviderSyncStops,
    InstanceControllerDeath,
    InstanceOperations,
}

impl InstanceKnob {
    /// The knob's `[faults]` key (a field of [`FaultMix`]).
    pub(super) fn name(self) -> &'static str {
        match self {
            InstanceKnob::ProviderFault => "provider_fault",
            InstanceKnob::ProviderAnswerLost => "provider_answer_lost",
            InstanceKnob::ProviderSyncStops => "provider_sync_stops",
            InstanceKnob::InstanceControllerDeath => "instance_controller_death",
            InstanceKnob::InstanceOperations => "instance_operations",
        }
    }
}

impl FaultMix {
    /// The instance lifecycle's kinds, with whether each is configured.
    pub(super) fn instance_kinds(&self) -> [(InstanceKnob, Option<Rate>); 5] {
        [
            (InstanceKnob::ProviderFault, self.provider_fault),
            (InstanceKnob::ProviderAnswerLost, self.provider_answer_lost),
            (InstanceKnob::ProviderSyncStops, self.provider_sync_stops),
            (InstanceKnob::InstanceControllerDeath, self.instance_controller_death),
            (InstanceKnob::InstanceOperations, self.instance_operations),
        ]
    }
}

/// The requests an operator or a consumer makes, drawn evenly.
const OPS: [InstanceOp; 13] = [
    InstanceOp::Cordon,
    InstanceOp::Uncordon,
    InstanceOp::Drain,
    InstanceOp::Terminate,
    InstanceOp::PlaceHold,
    InstanceOp::LiftHold,
    InstanceOp::Stop,
    InstanceOp::Start,
    InstanceOp::Reboot,
    InstanceOp::Acquire,
    InstanceOp::Release,
    InstanceOp::Approve,
    InstanceOp::Deny,
];

/// Draws the instance lifecycle's steps between `window_start_ms` and `window_end_ms`.
pub(super) fn draw(
    instances: &InstancesSpec,
    faults: &FaultMix,
    (window_start_ms, window_end_ms): (u64, u64),
    rng: &mut ChaCha8Rng,
    steps: &mut Vec<TimedStep>,
) {
    let plain = instances.plain_names();
    for (knob, rate) in faults.instance_kinds() {
        let Some(rate) = rate else { continue };
        if rng.random_range(0..1000) >= rate.per_mille {
            continue;
        }
        for _ in 0..rng.random_range(1..=rate.count_max) {
            let at_ms = rng.random_range(window_start_ms..window_end_ms);
            match knob {
                InstanceKnob::ProviderFault => {
                    let fault = *[
                        ProviderFaultKind::QuotaRefusal,
                        ProviderFaultKind::HangCreate,
                        ProviderFaultKind::BootFailure,
                        ProviderFaultKind::ModulePullFailure,
                        ProviderFaultKind::TeardownStuck,
                    ]
                    .choose(rng)
                    .expect("faults exist");
                    // A quota refusal spoils a pass's creates for long enough to be stuck pending.
                    let count = if fault == ProviderFaultKind::QuotaRefusal {
                        rng.random_range(8..=20)
                    } else {
                        rng.random_range(1..=3)
                    };
                    steps.push(TimedStep { at_ms, step: Step::ProviderFault { fault, count } });
                }
                InstanceKnob::ProviderAnswerLost => {
                    let count = rng.random_range(1..=2);
                    steps.push(TimedStep { at_ms, step: Step::ProviderAnswerLost { count } });
                }
                InstanceKnob::ProviderSyncStops => {
                    let duration = rate.duration_ms.unwrap_or(RangeMs { min: 3_600_000, max: 14_400_000 });
                    let heal = (at_ms + rng.random_range(duration.min..=duration.max)).min(window_end_ms);
                    steps.push(TimedStep { at_ms, step: Step::ProviderSyncStops { stopped: true } });
                    steps.push(TimedStep { at_ms: heal, step: Step::ProviderSyncStops { stopped: false } });
                }
                InstanceKnob::InstanceControllerDeath => {
                    let point =
                        *[DeathPoint::AfterIntent, DeathPoint::AfterRemoteMutation, DeathPoint::BeforeCompletion]
                            .choose(rng)
                            .expect("points exist");
                    let duration = rate.duration_ms.unwrap_or(RangeMs { min: 60_000, max: 900_000 });
                    let restart_after_ms = Some(rng.random_range(duration.min..=duration.max));
                    let subsystem = DeathSubsystem::Instances;
                    steps.push(TimedStep { at_ms, step: Step::ControllerDeath { point, subsystem, restart_after_ms } });
                }
                InstanceKnob::InstanceOperations => {
                    let op = *OPS.choose(rng).expect("ops exist");
                    let target = match op {
                        InstanceOp::Approve | InstanceOp::Deny => format!("d-{:05}", rng.random_range(1..=6)),
                        InstanceOp::Acquire => match instances.pools.choose(rng) {
                            Some(pool) => pool.name.clone(),
                            None => continue,
                        },
                        _ => target(instances, &plain, rng),
                    };
                    let reason = match op {
                        InstanceOp::Cordon | InstanceOp::PlaceHold => format!("campaign: on-call {}", op.as_str()),
                        _ => String::new(),
                    };
                    let force = op == InstanceOp::Stop && rng.random_bool(0.25);
                    let step = Step::InstanceOperator {
                        target,
                        op,
                        reason,
                        actor: crate::model::faults::DEFAULT_OPERATOR_ACTOR.to_owned(),
                        force,
                        operation_id: None,
                    };
                    steps.push(TimedStep { at_ms, step });
                }
            }
        }
    }
}

/// A plain node, or a pool's k-th live member.
fn target(instances: &InstancesSpec, plain: &[String], rng: &mut ChaCha8Rng) -> String {
    let pooled = !instances.pools.is_empty() && (plain.is_empty() || rng.random_bool(0.5));
    if pooled {
        let pool = instances.pools.choose(rng).expect("a pool");
        format!("{}[{}]", pool.name, rng.random_range(1..=pool.target))
    } else {
        plain.choose(rng).expect("a plain node").clone()
    }
}
