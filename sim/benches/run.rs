//! Criterion benchmarks of the fast transport: one 50-agent, two-hour scenario, and a 1,000-node run (cost should
//! grow with events, not with host pairs). `docs/performance.md` records the medians.

use std::path::Path;

/// The allocator the `fleetsim` binary runs on, so the benchmark measures what ships.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{Criterion, criterion_group, criterion_main};
use sim::model::spec::load_scenario;
use sim::run::runner::{RunIdentity, run};

fn scenario_path(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios").join(name)
}

fn identity() -> RunIdentity {
    RunIdentity { source: "bench".into(), run_index: None, repro: String::new() }
}

fn fifty_agents_two_hours(c: &mut Criterion) {
    let scenario = load_scenario(&scenario_path("fifty-agents-heartbeat-for-two-hours-through-faults.toml")).unwrap();
    let mut group = c.benchmark_group("fast_transport");
    group.sample_size(20);
    group.bench_function("50_agents_2h", |b| {
        b.iter(|| {
            let output = run(&scenario.run, scenario.seed, &identity(), false);
            assert!(output.record.verdict.passed());
            output.record.trace_events
        })
    });
    let mut thousand = scenario.run.clone();
    thousand.fleet.nodes = 1_000;
    thousand.fleet.durable.clear();
    thousand.steps.retain(|timed| {
        !matches!(&timed.step, sim::model::faults::Step::Partition { .. } | sim::model::faults::Step::Repair { .. })
    });
    group.sample_size(10);
    group.bench_function("1000_agents_2h", |b| {
        b.iter(|| run(&thousand, scenario.seed, &identity(), false).record.trace_events)
    });
    group.finish();
}

criterion_group!(benches, fifty_agents_two_hours);
criterion_main!(benches);
