//! `fleetsim run`: one scenario, its record printed and, with `--out`, written with its trace.

use std::io::Write;
use std::path::Path;

use reports::RunRecord;
use reports::render::human_ms;

use crate::model::exit::{EXIT_FAIL, EXIT_PASS};
use crate::model::spec::{self};
use crate::run::runner::{self, RunIdentity, RunOutput};

use super::*;

pub(super) fn run_scenario(
    path: &Path,
    seed: Option<u64>,
    dir: Option<&Path>,
    format: Format,
    transport: runner::Transport,
    out: &mut dyn Write,
) -> Result<i32, CliError> {
    let scenario = spec::load_scenario(path)?;
    let seed = seed.unwrap_or(scenario.seed);
    let transport_arg = match transport {
        runner::Transport::Fast => String::new(),
        runner::Transport::Wire => format!(" --transport {}", transport.as_str()),
    };
    let identity = RunIdentity {
        source: path.display().to_string(),
        run_index: None,
        repro: format!("fleetsim run {} --seed {seed}{transport_arg}", path.display()),
    };
    let output = runner::run_on(&scenario.run, seed, &identity, dir.is_some(), transport);
    finish_run(&output, dir, format, out)
}

pub(super) fn finish_run(
    output: &RunOutput,
    dir: Option<&Path>,
    format: Format,
    out: &mut dyn Write,
) -> Result<i32, CliError> {
    if let Some(dir) = dir {
        write_run(dir, output)?;
    }
    match format {
        Format::Text => console(out, &render_run(&output.record))?,
        Format::Json => {
            let json = serde_json::to_string_pretty(&output.record).expect("run records serialise");
            console(out, &format!("{json}\n"))?;
        }
    }
    Ok(if output.record.verdict.passed() { EXIT_PASS } else { EXIT_FAIL })
}

pub(super) fn write_run(dir: &Path, output: &RunOutput) -> Result<(), CliError> {
    std::fs::create_dir_all(dir).map_err(output_error(dir))?;
    let run_path = dir.join("run.json");
    reports::write_json_atomic(&run_path, &output.record).map_err(output_error(&run_path))?;
    let trace_path = dir.join("trace.jsonl");
    if output.trace.len() as u64 != output.record.trace_events {
        let max = crate::observe::trace::TRACE_BYTES_MAX;
        let error = std::io::Error::other(format!(
            "the trace of {} events is more than the {max} bytes a run keeps in memory, so it is not written (run.json is; its trace digest covers every event)",
            output.record.trace_events
        ));
        return Err(CliError::Output { path: trace_path, error });
    }
    let mut trace = output.trace.join("\n");
    trace.push('\n');
    reports::write_atomic(&trace_path, trace.as_bytes()).map_err(output_error(&trace_path))
}

/// The human summary of one run.
/// The most not-upgraded nodes of one rollout a run's text names.
const NODES_SHOWN_MAX: usize = 12;

pub fn render_run(record: &RunRecord) -> String {
    let mut text = String::new();
    let run = record.run_index.map(|i| format!(" run {i}")).unwrap_or_default();
    text.push_str(&format!("{}{run}  seed {}\n", record.source, record.seed));
    text.push_str(&format!("  verdict       {}\n", record.verdict.label()));
    // A run that ended before its duration without a panic had settled: say so, or the short time reads as a hang.
    let duration_ms = record.config.get("duration_ms").and_then(serde_json::Value::as_u64);
    let panicked = record.verdict == reports::Verdict::fail(reports::FailureKind::Panic);
    let settled = match duration_ms {
        Some(duration_ms) if record.virtual_duration_ms < duration_ms && !panicked => {
            format!(" of {}: settled, nothing left could change a verdict", human_ms(duration_ms))
        }
        _ => String::new(),
    };
    text.push_str(&format!(
        "  virtual time  {} ({} ms){settled}\n",
        human_ms(record.virtual_duration_ms),
        record.virtual_duration_ms
    ));
    let faults: Vec<String> = record.faults.iter().map(|(kind, count)| format!("{kind} x{count}")).collect();
    text.push_str(&format!(
        "  faults        {}\n",
        if faults.is_empty() { "none".to_owned() } else { faults.join(", ") }
    ));
    let reached: Vec<String> = record.reached.iter().map(|r| format!("{} (t={} ms)", r.oracle, r.t_ms)).collect();
    text.push_str(&format!(
        "  reached       {}\n",
        if reached.is_empty() { "nothing".to_owned() } else { reached.join(", ") }
    ));
    for account in &record.rollouts {
        let counts: Vec<String> = reports::NODE_OUTCOMES
            .iter()
            .filter(|outcome| account.count(outcome) > 0)
            .map(|outcome| format!("{} {outcome}", account.count(outcome)))
            .collect();
        text.push_str(&format!("  rollout       {} {}: {}\n", account.rollout, account.outcome, counts.join(", ")));
        // The nodes not upgraded, by name, with why (and a quarantine's repair), at most a screenful.
        let others: Vec<&reports::NodeRecord> =
            account.nodes.iter().filter(|node| node.outcome != "upgraded").collect();
        for node in others.iter().take(NODES_SHOWN_MAX) {
            let repair = if node.repair.is_empty() { String::new() } else { format!(" — repair: {}", node.repair) };
            text.push_str(&format!("    {} {}: {}{repair}\n", node.node, node.outcome, node.detail));
            if !node.replay.is_empty() {
                text.push_str(&format!("      failed on {}; replay: {}\n", node.failed_endpoint, node.replay));
            }
        }
        if others.len() > NODES_SHOWN_MAX {
            text.push_str(&format!("    … and {} more in run.json\n", others.len() - NODES_SHOWN_MAX));
        }
    }
    if record.violations.is_empty() {
        text.push_str("  violations    none\n");
    } else {
        text.push_str("  violations\n");
        for violation in &record.violations {
            let expected = if violation.expected { " (expected)" } else { "" };
            text.push_str(&format!(
                "    {} at t={} ms{expected}: {}\n",
                violation.oracle, violation.t_ms, violation.evidence
            ));
        }
    }
    for name in &record.unmet {
        text.push_str(&format!("  unmet         {}\n", reports::unmet_sentence(name)));
    }
    if let Some(panic) = &record.panic {
        text.push_str(&format!("  panic         {panic}\n"));
    }
    text.push_str(&format!("  trace digest  {} ({} events)\n", record.trace_digest, record.trace_events));
    text.push_str(&format!("  reproduce     {}\n", record.repro));
    text
}
