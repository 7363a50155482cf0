//! The work a run may do, bounded for every input that passes `fleetsim check` (`docs/formats.md`, "Bounds on a
//! run's work"). Each integer of a file has its own bound (`spec::check_bounds`), but their product and their sum
//! did not: a campaign whose every fault count was within bounds grew one run's plan to gigabytes, and a scenario
//! within every bound ran for half an hour. So a run's work is bounded as a whole, twice:
//!
//! - at `check`: its **entity-hours** — the fleet's nodes, the site's machines and the instances, times the run's
//!   length in hours — are at most [`ENTITY_HOURS_MAX`], its **faults** (every step, counting each step's `count`,
//!   and for a campaign the most its fault mix can draw) at most [`FAULTS_PER_RUN_MAX`], and the periods a loop runs
//!   on (the hub's sweep, the onboarding poll) at least [`PERIOD_MS_MIN`];
//! - while it runs: its trace may hold at most [`event_budget`] events, a linear function of those two measures
//!   calibrated on every shipped file with a wide margin, and never more than [`EVENTS_MAX`]. A run past its budget
//!   ends at once with the verdict `panic` naming the budget: an accepted file that reaches it is a bug of this
//!   model, which the fuzz test (`tests/tests/spec_fuzz.rs`) hunts for.

use crate::model::faults::Step;
use crate::model::spec::RunSpec;

/// The most entity-hours a run may do: 10,000 agents for two hours, or 833 nodes for a day (the heaviest shipped
/// benchmark, `scripts/bench-table.sh`'s 10,000 agents for two virtual hours, is exactly at it).
pub const ENTITY_HOURS_MAX: u64 = 20_000;
/// The most faults a run may hold: its steps, each counted once plus its `count` (a burst of SSH timeouts counts its
/// timeouts). The shipped campaigns draw at most 73 a run.
pub const FAULTS_PER_RUN_MAX: u64 = 1_000;
/// The shortest period a loop of the run may have, in ms (`hub.sweep_interval_ms`, `onboarding.poll_ms`): a
/// millisecond sweep of 10,000 agents for a day is 10^12 steps of work and no event to count them by.
pub const PERIOD_MS_MIN: u64 = 1_000;

/// Events any run may record whatever it does.
pub const EVENTS_BASE: u64 = 200_000;
/// Events an entity may add each hour: the shipped scenarios and campaigns record at most 196 (a one-machine
/// decommission), the heartbeat campaigns about 120; ten times the most.
pub const EVENTS_PER_ENTITY_HOUR: u64 = 2_000;
/// Events a fault may add (its reactions: retries, stops, repairs).
pub const EVENTS_PER_FAULT: u64 = 2_000;
/// The most events any run may record: the budget of a run at both bounds.
pub const EVENTS_MAX: u64 =
    EVENTS_BASE + EVENTS_PER_ENTITY_HOUR * ENTITY_HOURS_MAX + EVENTS_PER_FAULT * FAULTS_PER_RUN_MAX;

/// The run's entities: the fleet's nodes, the site's machines and the instances (plain nodes and every pool at its
/// most).
pub fn entities(spec: &RunSpec) -> u64 {
    let machines = spec.onboarding.as_ref().map_or(0, |onboarding| onboarding.machines.len() as u64);
    let instances = spec.instances.as_ref().map_or(0, |instances| {
        u64::from(instances.plain) + instances.pools.iter().map(|pool| u64::from(pool.max)).sum::<u64>()
    });
    u64::from(spec.fleet.nodes) + machines + instances
}

/// Entities times the run's length, in hours, rounded up.
pub fn entity_hours(spec: &RunSpec) -> u64 {
    let entity_ms = u128::from(entities(spec)) * u128::from(spec.duration_ms);
    u64::try_from(entity_ms.div_ceil(3_600_000)).unwrap_or(u64::MAX)
}

/// A step's weight among the run's faults: one, plus every `count` it carries.
pub fn step_weight(step: &Step) -> u64 {
    fn counts(value: &serde_json::Value) -> u64 {
        match value {
            serde_json::Value::Object(object) => object
                .iter()
                .map(|(key, value)| match (key.as_str(), value.as_u64()) {
                    ("count", Some(count)) => count,
                    _ => counts(value),
                })
                .fold(0, u64::saturating_add),
            serde_json::Value::Array(items) => items.iter().map(counts).fold(0, u64::saturating_add),
            _ => 0,
        }
    }
    1u64.saturating_add(counts(&serde_json::to_value(step).expect("steps serialise")))
}

/// The run's faults: every step (timed, stage-, phase- and rollout-triggered) by its [`step_weight`].
pub fn faults(spec: &RunSpec) -> u64 {
    let steps = spec
        .steps
        .iter()
        .map(|timed| &timed.step)
        .chain(spec.stage_steps.iter().map(|staged| &staged.step))
        .chain(spec.phase_steps.iter().map(|phased| &phased.step))
        .chain(spec.rollout_steps.iter().map(|triggered| &triggered.step));
    steps.map(step_weight).fold(0, u64::saturating_add)
}

/// The most events the run may record (at most [`EVENTS_MAX`]).
pub fn event_budget(spec: &RunSpec) -> u64 {
    EVENTS_BASE
        .saturating_add(EVENTS_PER_ENTITY_HOUR.saturating_mul(entity_hours(spec)))
        .saturating_add(EVENTS_PER_FAULT.saturating_mul(faults(spec)))
        .min(EVENTS_MAX)
}

/// Why a run of this size is refused, if it is: `(key, reason)` for the parser to place.
pub fn check_entity_hours(spec: &RunSpec) -> Result<(), String> {
    let hours = entity_hours(spec);
    if hours > ENTITY_HOURS_MAX {
        return Err(format!(
            "{} entities (nodes, machines, instances) for {} ms is {hours} entity-hours of virtual work, more than the {ENTITY_HOURS_MAX} a run may do (docs/formats.md, \"Bounds on a run's work\"): fewer nodes or a shorter run",
            entities(spec),
            spec.duration_ms
        ));
    }
    Ok(())
}

/// Why a run with these faults is refused, if it is.
pub fn check_faults(faults: u64) -> Result<(), String> {
    if faults > FAULTS_PER_RUN_MAX {
        return Err(format!(
            "the steps add up to {faults} faults (each step once plus its count), more than the {FAULTS_PER_RUN_MAX} a run may hold (docs/formats.md, \"Bounds on a run's work\")"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_weighs_one_plus_its_counts_and_the_budget_grows_with_the_work_to_a_ceiling() {
        assert_eq!(step_weight(&Step::RouteSwap), 1);
        assert_eq!(step_weight(&Step::SshTimeout { target: "node-01".into(), count: 7 }), 8);
        let text = "schema_version = 1\ndescription = \"d\"\nseed = 3\nduration_ms_max = 7_200_000\n[fleet]\nnodes = 3\n\
                    [[step]]\nat_ms = 5\nkind = \"ssh_timeout\"\ntarget = \"node-01\"\ncount = 4\n";
        let spec = crate::model::spec::parse_scenario("s.toml", text).unwrap().run;
        assert_eq!((entities(&spec), entity_hours(&spec), faults(&spec)), (3, 6, 5));
        assert_eq!(event_budget(&spec), EVENTS_BASE + 6 * EVENTS_PER_ENTITY_HOUR + 5 * EVENTS_PER_FAULT);
        let huge = RunSpec { duration_ms: u64::MAX, ..spec.clone() };
        assert_eq!(event_budget(&huge), EVENTS_MAX, "never past the ceiling");
        assert!(check_entity_hours(&huge).is_err() && check_entity_hours(&spec).is_ok());
        assert!(check_faults(FAULTS_PER_RUN_MAX).is_ok() && check_faults(FAULTS_PER_RUN_MAX + 1).is_err());
    }
}
