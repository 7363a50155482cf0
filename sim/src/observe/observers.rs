//! The run's observers, built by the runner and handed to the world as its trace's sink: one event stream, fanned
//! out to every observer in a fixed order (as nextest's reporter feeds its sinks).

use crate::model::faults::Step;
use crate::model::spec::{CONTROLLER, HUB, RunSpec};
use crate::observe::collect::Collectors;
use crate::observe::oracles::{OracleContext, OracleSet};
use crate::observe::trace::{Event, Sink};

/// Every observer of one run: the oracles, which judge it, and the collectors, which gather the report's series.
pub struct Observers {
    pub oracles: OracleSet,
    pub collectors: Collectors,
}

impl Observers {
    /// The observers of a run of `spec`: every oracle of the catalogue, and the collectors.
    pub fn for_run(spec: &RunSpec) -> Observers {
        Observers { oracles: OracleSet::all(&oracle_context(spec)), collectors: Collectors::default() }
    }
}

impl Sink for Observers {
    fn on_event(&mut self, event: &Event, line: &str) {
        let Observers { oracles, collectors } = self;
        oracles.on_event(event, line);
        collectors.on_event(event, line);
    }
}

/// What the oracles need to know of a run of `spec`.
pub fn oracle_context(spec: &RunSpec) -> OracleContext {
    OracleContext {
        controller: CONTROLLER.to_owned(),
        hub: HUB.to_owned(),
        agent_ttl_ms: spec.hub.agent_ttl_ms,
        sweep_interval_ms: spec.hub.sweep_interval_ms,
        call_timeout_ms: spec.engine.call_timeout_ms,
        latency_max_ms: spec.latency_max_ms(),
        nodes: spec.fleet.nodes,
        lane_size: spec.fleet.lane_size,
        availability_floor: spec.fleet.availability_floor,
        workflows: spec
            .onboarding
            .as_ref()
            .map(|onboarding| {
                onboarding.machines.iter().map(|m| crate::model::ids::onboarding_workflow_id(m)).collect()
            })
            .unwrap_or_default(),
        decommissions: spec
            .all_steps()
            .filter_map(|step| {
                let Step::Decommission { target } = step else { return None };
                Some(crate::model::ids::decommission_workflow_id(target))
            })
            .collect::<std::collections::BTreeSet<String>>()
            .into_iter()
            .collect(),
        site_policy: spec.onboarding.as_ref().map(|onboarding| onboarding.site_policy()).unwrap_or_default(),
    }
}
