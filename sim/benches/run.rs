//! Criterion benchmarks of the fast transport: one 50-agent, two-hour scenario, the same at 1,000 and 5,000 agents
//! (cost should grow with events, not with host pairs), and the bare discrete-event floor the heartbeat exchange is
//! compared with. `docs/performance.md` records the medians; `scripts/bench-table.sh` turns them into the ratio.

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
    let mut five_thousand = thousand.clone();
    five_thousand.fleet.nodes = 5_000;
    group.bench_function("5000_agents_2h", |b| {
        b.iter(|| run(&five_thousand, scenario.seed, &identity(), false).record.trace_events)
    });
    group.finish();
}

/// The floor a heartbeat exchange is measured against: `agents` tasks on the same paused current-thread runtime and
/// `LocalSet` a run uses (`on_the_paused_clock`), each beating every 30 s for two virtual hours; a beat is the exchange's bare bones — the
/// request's latency, the hub's bookkeeping (a counter per agent), the response's latency — with no network model,
/// no trace, no oracle, no task per call. What a run costs per heartbeat over this is the simulator's overhead.
fn floor(agents: usize) -> u64 {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::Duration;
    sim::world::run::on_the_paused_clock(async move {
        let hub = Rc::new(RefCell::new(vec![0u64; agents]));
        let end = tokio::time::Instant::now() + Duration::from_secs(2 * 3600);
        for agent in 0..agents {
            let hub = hub.clone();
            tokio::task::spawn_local(async move {
                // Spread as the fleet's agents are: each starts at its own offset in the period.
                tokio::time::sleep(Duration::from_millis((agent as u64 * 7_919) % 30_000)).await;
                loop {
                    tokio::time::sleep(Duration::from_millis(7)).await;
                    hub.borrow_mut()[agent] += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    tokio::time::sleep(Duration::from_millis(30_000 - 12)).await;
                }
            });
        }
        tokio::time::sleep_until(end).await;
        hub.borrow().iter().sum()
    })
}

fn discrete_event_floor(c: &mut Criterion) {
    let mut group = c.benchmark_group("heartbeat_floor");
    group.sample_size(10);
    for agents in [50, 1_000, 5_000] {
        group.bench_function(format!("{agents}_agents_2h"), |b| b.iter(|| floor(agents)));
    }
    group.finish();
}

criterion_group!(benches, fifty_agents_two_hours, discrete_event_floor);
criterion_main!(benches);
