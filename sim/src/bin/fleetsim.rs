//! The `fleetsim` binary: see `fleetsim --help` and `docs/ARCHITECTURE.md`.

/// mimalloc: a run allocates and frees small objects at a high rate (trace lines, requests, timers, tasks); with
/// glibc's allocator that was about 12 % of a campaign's CPU. Allocation never reaches a decision, so digests are
/// the same (docs/performance.md has the figures).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    sim::observe::logging::init();
    let code = sim::cli::main_with(std::env::args_os(), &mut std::io::stdout(), &mut std::io::stderr());
    std::process::exit(code);
}
