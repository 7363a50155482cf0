//! One run of the world to its end: build it, boot it, run its fault plan until the spec's duration, a panic, or the
//! moment it has settled (nothing left can change a verdict), shut it down and say how it ended ([`Ended`]). The fast
//! transport runs it on a paused current-thread runtime of its own ([`simulate`]); the wire transport runs [`drive`]
//! inside a turmoil host. A panic in any host task is captured with its location and ends the run at once.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Once;

use tokio::sync::Notify;

use crate::model::spec::RunSpec;
use crate::observe::trace::{Body, Sink};
use crate::world::{World, panic_text};

/// How often a run asks whether it has settled, in virtual ms.
const SETTLE_CHECK_MS: u64 = 60_000;

/// How a run's world ended.
#[derive(Debug, Default)]
pub struct Ended {
    pub virtual_duration_ms: u64,
    pub trace_digest: String,
    pub trace_events: u64,
    /// The trace's JSON lines, when they were kept.
    pub trace: Vec<String>,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    pub panic: Option<String>,
    /// The run ended before its world could say anything (its observers saw nothing worth judging).
    pub aborted: bool,
}

impl Ended {
    /// A run that ended in a panic before the world could say anything.
    pub fn panicked(message: String) -> Ended {
        Ended { panic: Some(message), aborted: true, ..Ended::default() }
    }
}

thread_local! {
    /// Set while a simulated run executes on this thread: its panics are captured, not printed.
    static IN_RUN: RefCell<Option<Rc<Notify>>> = const { RefCell::new(None) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once per process) a panic hook that, inside a simulated run, records the message and location and
/// wakes the run so it ends at once; outside runs it defers to the previous hook.
fn install_panic_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let notify = IN_RUN.with(|cell| cell.borrow().clone());
            match notify {
                Some(notify) => {
                    let location =
                        info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
                    let message = format!("{}{location}", panic_text(info.payload()));
                    LAST_PANIC.with(|cell| {
                        cell.borrow_mut().get_or_insert(message);
                    });
                    notify.notify_one();
                }
                None => previous(info),
            }
        }));
    });
}

/// A run starts on this thread: its panics are captured and wake `notify`.
pub fn arm(notify: Rc<Notify>) {
    install_panic_hook();
    IN_RUN.with(|cell| *cell.borrow_mut() = Some(notify));
    LAST_PANIC.with(|cell| *cell.borrow_mut() = None);
}

/// The run on this thread is over: the first panic it captured, if any.
pub fn disarm() -> Option<String> {
    IN_RUN.with(|cell| *cell.borrow_mut() = None);
    LAST_PANIC.with(|cell| cell.borrow_mut().take())
}

/// The first panic captured so far in the run on this thread.
pub fn last_panic() -> Option<String> {
    LAST_PANIC.with(|cell| cell.borrow().clone())
}

/// The fast transport: [`drive`] on a paused current-thread runtime of the run's own.
pub fn simulate(
    spec: Rc<RunSpec>,
    seed: u64,
    keep_trace: bool,
    sink: Box<dyn Sink>,
    notify: Rc<Notify>,
    rules: crate::world::EngineRules,
    setup: impl FnOnce(&Rc<World>),
) -> Ended {
    on_the_paused_clock(drive(spec, seed, keep_trace, sink, notify, |world| world.set_rules(rules), setup))
}

/// Runs `future` to its end on the fast transport's scheduler: a current-thread runtime whose clock is paused (idle
/// time jumps to the next timer: a discrete-event simulation) and a `LocalSet` for the world's `!Send` tasks. The
/// heartbeat benchmark's floor runs on it too, so the two are compared on the same machinery.
pub fn on_the_paused_clock<F: std::future::Future>(future: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds");
    let local = tokio::task::LocalSet::new();
    let output = local.block_on(&runtime, future);
    drop(local);
    drop(runtime);
    output
}

/// Builds the world (`prepare` sees it before it boots, `setup` after), boots it, runs its fault plan until the
/// spec's duration (or a panic), and says how it ended. Runs on a paused current-thread runtime: the fast
/// transport's own, or a turmoil host's.
pub async fn drive(
    spec: Rc<RunSpec>,
    seed: u64,
    keep_trace: bool,
    sink: Box<dyn Sink>,
    notify: Rc<Notify>,
    prepare: impl FnOnce(&Rc<World>),
    setup: impl FnOnce(&Rc<World>),
) -> Ended {
    crate::observe::logging::RUN_START.with(|cell| *cell.borrow_mut() = Some(tokio::time::Instant::now()));
    let world = World::new(spec.clone(), seed, keep_trace, sink);
    prepare(&world);
    world.boot_all();
    setup(&world);
    let plan = tokio::task::spawn_local(world.clone().run_fault_plan());
    loop {
        let check_ms = (world.now_ms() + SETTLE_CHECK_MS).min(spec.duration_ms);
        tokio::select! {
            biased;
            _ = notify.notified() => break,
            _ = world.sleep_until_ms(check_ms) => {}
        }
        if world.now_ms() >= spec.duration_ms {
            break;
        }
        if let Some(quiet_since_ms) = world.settled().filter(|_| !spec.run_to_duration) {
            // Nothing left can change a verdict: the oracles judge here (`docs/oracles.md`, "When a run ends early").
            world.record_sim(Body::RunSettled { quiet_since_ms, duration_ms: spec.duration_ms });
            break;
        }
    }
    plan.abort();
    let end_ms = world.now_ms();
    world.shutdown();
    let panic = world.panic_message();
    let (trace_digest, trace_events, trace) = world.end_trace();
    Ended {
        virtual_duration_ms: end_ms,
        trace_digest,
        trace_events,
        trace,
        faults: world.faults(),
        panic,
        aborted: false,
    }
}
