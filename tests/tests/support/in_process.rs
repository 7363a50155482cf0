//! The `fleetsim` command line run in process, for the CLI tests: `#[path = "support/in_process.rs"] mod in_process;`.

/// Runs `fleetsim ARGS…` through `sim::cli::main_with`: the exit code, stdout and stderr.
pub fn fleetsim(args: &[&str]) -> (i32, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let argv = std::iter::once("fleetsim").chain(args.iter().copied()).map(Into::into);
    let code = sim::cli::main_with(argv, &mut out, &mut err);
    (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}
