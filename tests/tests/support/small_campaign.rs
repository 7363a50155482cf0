//! The small rollout campaign the command-line tests run (six nodes in lanes of two, a floor of four, a rollout at
//! two minutes, forty virtual minutes a run): one template, each test naming its description, seed, run count, fault
//! mix and sometimes-properties. `#[path = "support/small_campaign.rs"] mod small_campaign;` (from `sim/tests`:
//! `#[path = "../../tests/tests/support/small_campaign.rs"]`).

/// The campaign file's text.
pub fn small_campaign(description: &str, seed: u64, runs: u64, faults: &[&str], sometimes: &[&str]) -> String {
    let mut text = format!(
        "schema_version = 1\ndescription = \"{description}\"\nseed = {seed}\nruns = {runs}\nduration_ms = 2_400_000\n\
         window_start_ms = 60_000\nrollout = {{ at_ms = 120_000, revision = \"2944aebb\" }}\n\n[fleet]\nnodes = 6\n\
         lane_size = 2\navailability_floor = 4\n\n[faults]\n"
    );
    for fault in faults {
        text.push_str(fault);
        text.push('\n');
    }
    if !sometimes.is_empty() {
        let names: Vec<String> = sometimes.iter().map(|name| format!("\"{name}\"")).collect();
        text.push_str(&format!("\n[oracles]\nsometimes = [{}]\n", names.join(", ")));
    }
    text
}

/// The transient SSH loss every small campaign has.
pub const SSH_TIMEOUTS: &str = "ssh_timeout = { per_mille = 500, count_max = 2, timeouts_max = 2 }";
