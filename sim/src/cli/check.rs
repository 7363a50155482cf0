//! `fleetsim check`: scenario, campaign and gate-policy files validated without running.

use std::io::Write;
use std::path::PathBuf;

use crate::model::campaign::{self};
use crate::model::exit::EXIT_PASS;
use crate::model::spec::{self};
use crate::run::gate;

use super::*;

pub(super) fn check(files: &[PathBuf], out: &mut dyn Write) -> Result<i32, CliError> {
    for path in files {
        let text = spec::read(path)?;
        let name = path.display().to_string();
        // A gate policy has `kind = "gate_policy"`, a campaign a top-level `runs` key; look at the text when it does
        // not parse, so the error comes from the right parser.
        let header = || text.lines().take_while(|line| !line.trim_start().starts_with('['));
        let (is_policy, is_campaign) = match toml::from_str::<toml::Table>(&text) {
            Ok(table) => {
                (table.get("kind").and_then(toml::Value::as_str) == Some(gate::POLICY_KIND), table.contains_key("runs"))
            }
            Err(_) => (
                header().any(|line| assigns(line, "kind") == Some(&format!("\"{}\"", gate::POLICY_KIND))),
                header().any(|line| assigns(line, "runs").is_some()),
            ),
        };
        if is_policy {
            let policy = gate::parse_policy(&name, &text)?;
            console(out, &format!("ok  {name}: gate policy, {}\n", policy.description))?;
        } else if is_campaign {
            let campaign = campaign::parse_campaign(&name, &text)?;
            console(
                out,
                &format!(
                    "ok  {name}: campaign, {} runs of {} nodes{}\n",
                    campaign.runs,
                    campaign.base.fleet.nodes,
                    beside_the_fleet(&campaign.base)
                ),
            )?;
        } else {
            let scenario = spec::parse_scenario(&name, &text)?;
            console(
                out,
                &format!(
                    "ok  {name}: scenario, {} nodes{}, {} steps\n",
                    scenario.run.fleet.nodes,
                    beside_the_fleet(&scenario.run),
                    scenario.run.steps.len()
                ),
            )?;
        }
    }
    Ok(EXIT_PASS)
}

/// What a run has beside its fleet: the MAAS site's machines, the instance lifecycle's instances.
fn beside_the_fleet(spec: &crate::model::spec::RunSpec) -> String {
    let mut text = String::new();
    if let Some(onboarding) = &spec.onboarding {
        text.push_str(&format!(", {} site machines", onboarding.machines.len()));
    }
    if let Some(instances) = &spec.instances {
        let pooled: u32 = instances.pools.iter().map(|pool| pool.target).sum();
        let pools = instances.pools.len();
        text.push_str(&format!(
            ", {} instances ({} plain, {pooled} in {pools} pools)",
            instances.plain + pooled,
            instances.plain
        ));
    }
    text
}

/// The value a `key = value` line assigns, trimmed, if the line assigns `key`.
pub(super) fn assigns<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.trim_start().strip_prefix(key).and_then(|rest| rest.trim_start().strip_prefix('=')).map(str::trim)
}
