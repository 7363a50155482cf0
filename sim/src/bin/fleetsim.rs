//! The `fleetsim` binary: see `fleetsim --help` and `docs/ARCHITECTURE.md`.

fn main() {
    sim::observe::logging::init();
    let code = sim::cli::main_with(std::env::args_os(), &mut std::io::stdout(), &mut std::io::stderr());
    std::process::exit(code);
}
