//! The real `fleetsim` process: exit codes and streams as a shell or CI sees them.

use std::process::Command;

fn fleetsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fleetsim"))
}

#[test]
fn the_binary_exits_2_on_bad_input_without_a_stack_trace() {
    let output = fleetsim().args(["run", "does-not-exist.toml"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "error: does-not-exist.toml: no such file\n");
    assert!(output.stdout.is_empty());
}

#[test]
fn the_binary_runs_a_scenario_and_exits_0() {
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/agent-partitioned-from-hub-is-reported-silent-and-recovers.toml"
    );
    let output = fleetsim().args(["run", scenario]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("verdict       pass"));
}
