//! The wire transport's runner: the same [`World`] as the fast transport, run inside a turmoil simulation, with the
//! MAAS site's services on their own turmoil host ([`crate::wire::site`]), reached over simulated TCP and UDP by the
//! engine's real adapters.
//!
//! The world runs in the turmoil client host [`CONTROLLER_HOST`]. Inside one turmoil host time is tokio's paused
//! clock, advanced tick by tick; within a tick the runtime auto-advances from timer to timer, so the world's own
//! timers fire at their exact virtual times whatever the tick is. Only messages between turmoil hosts are quantised
//! to the tick.
//!
//! Determinism (reference/turmoil-notes.md §4): the builder always gets the run's seed ([`turmoil::Builder::rng_seed`])
//! and a fixed epoch ([`WIRE_EPOCH_S`]); every `select!` is `biased;`; hyper-util's pool runs on the tokio timer.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::model::spec::RunSpec;
use crate::observe::trace::Sink;
use crate::wire::site::{FrontSlot, MAAS_HOST};
use crate::world::World;
use crate::world::run::{Ended, drive};

/// The turmoil host the world (and so the controller) runs in.
pub const CONTROLLER_HOST: &str = "controller";
/// The turmoil epoch: 2026-01-01T00:00:00Z, the fake MAAS's own epoch (its `created` and `last_sync` datetimes).
pub const WIRE_EPOCH_S: u64 = 1_767_225_600;
/// The coarsest tick: a cross-host round trip costs about 1.3 ticks (turmoil-notes §5).
pub const TICK_MS_MAX: u64 = 100;
/// Simulated time turmoil may run past the spec's duration before it calls the run stuck.
const DURATION_MARGIN_MS: u64 = 60_000;
/// Listener backlog and per-stream buffer, at least this (turmoil panics the whole sim when a backlog overflows).
const TCP_CAPACITY_MIN: usize = 64;

/// The tick of a run: a tenth of the engine's call timeout (the shortest timeout a cross-host call has), at most
/// [`TICK_MS_MAX`], at least 1 ms.
pub fn tick_ms(spec: &RunSpec) -> u64 {
    (spec.engine.call_timeout_ms / 10).clamp(1, TICK_MS_MAX)
}

/// The turmoil builder of one run: seeded, a fixed epoch, the run's tick, and room for every node to connect at once.
pub fn builder(spec: &RunSpec, seed: u64) -> turmoil::Builder {
    let nodes = spec.fleet.nodes as usize + spec.onboarding.as_ref().map_or(0, |o| o.machines.len());
    let capacity = (nodes * 2).max(TCP_CAPACITY_MIN);
    let mut builder = turmoil::Builder::new();
    builder
        .rng_seed(seed)
        .epoch(std::time::UNIX_EPOCH + Duration::from_secs(WIRE_EPOCH_S))
        .tick_duration(Duration::from_millis(tick_ms(spec)))
        .simulation_duration(Duration::from_millis(spec.duration_ms.saturating_add(DURATION_MARGIN_MS)))
        .tcp_capacity(capacity)
        .udp_capacity(capacity);
    builder
}

/// Runs `spec` with `seed` on the wire transport; the caller catches panics (the runner does).
pub(crate) fn simulate(
    spec: Rc<RunSpec>,
    seed: u64,
    keep_trace: bool,
    sink: Box<dyn Sink>,
    notify: Rc<Notify>,
    rules: crate::world::EngineRules,
    setup: impl FnOnce(&Rc<World>) + 'static,
) -> Ended {
    let mut sim = builder(&spec, seed).build();
    let slot: Rc<RefCell<Option<Ended>>> = Rc::default();
    let out = slot.clone();
    let front: FrontSlot = Rc::default();
    let published = front.clone();
    let site = spec.onboarding.is_some();
    // The client first: in each step it runs before the `maas` host, so the host finds the site at its first poll.
    sim.client(CONTROLLER_HOST, async move {
        let attach = |world: &Rc<World>| {
            world.set_rules(rules);
            crate::wire::site::attach(world, seed, &published);
        };
        let outcome = drive(spec, seed, keep_trace, sink, notify, attach, setup).await;
        *out.borrow_mut() = Some(outcome);
        Ok(())
    });
    if site {
        sim.host(MAAS_HOST, move || crate::wire::site::serve(front.clone()));
    }
    let result = sim.run();
    drop(sim);
    let outcome = slot.borrow_mut().take();
    match (result, outcome) {
        (Ok(()), Some(outcome)) => outcome,
        (Err(error), _) => {
            // A panic in the world's task fails turmoil's run: its message (with its location) is the one the hook
            // captured, else turmoil's own error.
            let captured = crate::world::run::last_panic();
            let message = captured.unwrap_or_else(|| format!("the wire simulation failed: {error}"));
            Ended::panicked(message)
        }
        (Ok(()), None) => Ended::panicked("the wire simulation ended without an outcome".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::runner::{RunIdentity, Transport, run_on};

    fn spec() -> RunSpec {
        let text = "schema_version = 1\ndescription = \"d\"\nseed = 4\nduration_ms_max = 1_800_000\n[fleet]\nnodes = 3\n\
                    [[step]]\nat_ms = 600_000\nkind = \"crash\"\ntarget = \"hub\"\n\
                    [[step]]\nat_ms = 700_000\nkind = \"restart\"\ntarget = \"hub\"\n";
        crate::model::spec::parse_scenario("w.toml", text).unwrap().run
    }

    fn identity() -> RunIdentity {
        RunIdentity { source: "w.toml".into(), run_index: None, repro: "fleetsim run w.toml --transport wire".into() }
    }

    #[test]
    fn the_tick_is_a_tenth_of_the_call_timeout_and_at_most_100_ms() {
        let mut spec = spec();
        assert_eq!(tick_ms(&spec), TICK_MS_MAX, "a 10 s call timeout");
        spec.engine.call_timeout_ms = 500;
        assert_eq!(tick_ms(&spec), 50);
        spec.engine.call_timeout_ms = 5;
        assert_eq!(tick_ms(&spec), 1);
    }

    #[test]
    fn the_same_seed_gives_the_same_digest_on_the_wire_and_another_seed_another() {
        let a = run_on(&spec(), 4, &identity(), false, Transport::Wire).record;
        let b = run_on(&spec(), 4, &identity(), false, Transport::Wire).record;
        let c = run_on(&spec(), 5, &identity(), false, Transport::Wire).record;
        assert!(a.verdict.passed(), "{a:#?}");
        assert!(a.virtual_duration_ms < 1_800_000, "the hub healed, nothing is left: the run settles early");
        assert_eq!(a.trace_digest, b.trace_digest);
        assert_ne!(a.trace_digest, c.trace_digest);
        // Without a site nothing crosses a turmoil host: the world's timers fire at the same virtual times as on the
        // fast transport, so the trace is the same.
        let fast = run_on(&spec(), 4, &identity(), false, Transport::Fast).record;
        assert_eq!(a.trace_digest, fast.trace_digest);
        assert_eq!(a.virtual_duration_ms, fast.virtual_duration_ms, "both transports settle at the same moment");
    }

    #[test]
    fn a_panic_in_the_world_on_the_wire_fails_the_run_with_its_message() {
        let output = crate::run::runner::run_with(
            &spec(),
            4,
            &identity(),
            false,
            Transport::Wire,
            Default::default(),
            |world| {
                let host = world.host_id("node-02");
                world.spawn_on(host, async {
                    tokio::time::sleep(std::time::Duration::from_millis(90_000)).await;
                    panic!("agent invariant broken");
                });
            },
        );
        assert_eq!(output.record.verdict, reports::Verdict::fail(reports::FailureKind::Panic));
        let message = output.record.panic.as_deref().unwrap();
        assert!(message.starts_with("agent invariant broken at "), "{message}");
        assert_eq!(output.record.virtual_duration_ms, 90_000, "the run ends when the panic happens");
    }

    #[test]
    fn a_controller_that_boots_again_gets_new_wire_clients() {
        let text = "schema_version = 1\ndescription = \"d\"\nseed = 4\nduration_ms_max = 900_000\n[fleet]\nnodes = 1\n\
                    [onboarding]\nnodes = 1\n\
                    [[step]]\nat_ms = 100_000\nkind = \"crash\"\ntarget = \"controller\"\n\
                    [[step]]\nat_ms = 200_000\nkind = \"restart\"\ntarget = \"controller\"\n";
        let spec = crate::model::spec::parse_scenario("w.toml", text).unwrap().run;
        let seen: Rc<RefCell<Vec<bool>>> = Rc::default();
        let out = seen.clone();
        let record = crate::run::runner::run_with(
            &spec,
            4,
            &identity(),
            false,
            Transport::Wire,
            Default::default(),
            move |world| {
                let world = world.clone();
                // Not a host task: the controller's crash does not stop it.
                tokio::task::spawn_local(async move {
                    let clients = || world.site().plug().expect("an onboarding world on the wire").clients();
                    let first = clients();
                    world.sleep_until_ms(50_000).await;
                    out.borrow_mut().push(Rc::ptr_eq(&first, &clients()));
                    world.sleep_until_ms(250_000).await;
                    out.borrow_mut().push(Rc::ptr_eq(&first, &clients()));
                });
            },
        )
        .record;
        assert!(record.panic.is_none(), "{record:#?}");
        assert_eq!(*seen.borrow(), vec![true, false], "the same clients until the restart, new ones after");
    }
}
