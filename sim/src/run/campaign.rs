//! Running a campaign: its runs over threads, in index order whatever the thread count, and its report. What a
//! campaign is (its file, its fault mix, the fault plan of each run) is [`crate::model::campaign`].

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use reports::CampaignReport;

use crate::model::campaign::Campaign;
use crate::run::runner::{self, RunIdentity, RunOutput};

/// How run `index` is named in its record: its source, index and the command that replays it.
pub fn identity(campaign: &Campaign, index: u64, seed_overridden: bool) -> RunIdentity {
    let seed = if seed_overridden { format!(" --seed {}", campaign.seed) } else { String::new() };
    RunIdentity {
        source: campaign.source.clone(),
        run_index: Some(index),
        repro: format!("fleetsim campaign {}{seed} --run {index}", campaign.source),
    }
}

/// Runs the given indices over `jobs` threads; `on_done` is called after each run. Results come back in index
/// order, identical whatever `jobs` is.
pub fn execute(
    campaign: &Campaign,
    indices: &[u64],
    jobs: usize,
    seed_overridden: bool,
    keep_traces: bool,
    on_done: &(dyn Fn(&RunOutput) + Sync),
) -> Vec<RunOutput> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<RunOutput>>> = Mutex::new(vec![None; indices.len()]);
    let jobs = jobs.clamp(1, indices.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let slot = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&index) = indices.get(slot) else { break };
                    let spec = campaign.run_spec(index);
                    let output = runner::run(
                        &spec,
                        campaign.run_seed(index),
                        &identity(campaign, index, seed_overridden),
                        keep_traces,
                    );
                    on_done(&output);
                    results.lock().expect("no worker panics while holding the lock")[slot] = Some(output);
                }
            });
        }
    });
    results.into_inner().expect("workers are done").into_iter().map(|r| r.expect("every slot ran")).collect()
}

/// The recovery matrix's listed pairs of the workflows the campaign's runs take part in, as its report's summary
/// lists them.
pub fn matrix_listed(campaign: &Campaign) -> Vec<String> {
    let mut listed = Vec::new();
    if campaign.base.onboarding.is_some() {
        listed = crate::model::pairs::matrix_listed_pairs();
    }
    if campaign.decommission.is_some() {
        listed.extend(crate::model::pairs::workflow_listed_pairs(engine::matrix::Workflow::Decommission));
    }
    listed
}

/// The campaign's report of `runs`: the summary over them and the campaign's identity.
pub fn report(campaign: &Campaign, runs: Vec<reports::RunRecord>) -> CampaignReport {
    let mut summary = reports::summarize(&runs, &campaign.oracles.sometimes, crate::model::digest::sha256_hex);
    summary.matrix_listed = matrix_listed(campaign);
    CampaignReport {
        schema_version: reports::SCHEMA_VERSION,
        tool_version: runner::TOOL_VERSION.to_owned(),
        commit: runner::commit().to_owned(),
        config_hash: campaign.config_hash(),
        campaign: campaign.source.clone(),
        description: campaign.description.clone(),
        seed: campaign.seed,
        shard: None,
        summary,
        runs,
    }
}
