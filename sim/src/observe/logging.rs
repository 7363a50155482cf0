//! Logs for people, through `tracing` (`RUST_LOG` chooses the level, default `error`: simulated faults make the engine
//! warn constantly), stamped with the virtual time of
//! the run executing on the thread. Logs are separate from the trace: they are never digested.

use std::fmt;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

thread_local! {
    /// Virtual-time origin of the run executing on this thread, for log timestamps (the runner sets and clears it).
    pub(crate) static RUN_START: std::cell::RefCell<Option<tokio::time::Instant>> = const { std::cell::RefCell::new(None) };
}

/// Prints `t=+<virtual ms>ms` inside a simulated run and `t=-` outside one.
struct VirtualTime;

impl FormatTime for VirtualTime {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        let start = RUN_START.with(|cell| *cell.borrow());
        match start {
            Some(start) => write!(w, "t=+{}ms", tokio::time::Instant::now().duration_since(start).as_millis()),
            None => write!(w, "t=-"),
        }
    }
}

/// Installs the log subscriber on stderr. Safe to call more than once.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("error"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_timer(VirtualTime)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}
