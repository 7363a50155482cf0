//! The journal records of a workflow run and what they say about its history, written once for both workflows:
//! each workflow's record type ([`crate::onboarding::record::OnboardRecord`],
//! [`crate::decommission::record::DecommissionRecord`]) says how it reads as an [`Entry`], and [`History::of`]
//! folds a journal's entries of one workflow into its runs, its furthest stage and how its last run ended.
//!
//! Architecture Invariant: no I/O. Lines come in as arguments; a line of another subsystem is skipped, a line of
//! this workflow kind that does not decode is an error.

use std::collections::BTreeSet;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::matrix::WorkflowState;

/// What one journal record of a workflow says, whatever the workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry<'a, S, C> {
    /// A run of the workflow begins (1 for the first; a resume or a restarted controller starts the next).
    RunStarted {
        workflow: &'a str,
        run: u32,
    },
    /// A stage attempt begins: where a restarted controller knows the workflow had got to.
    Checkpoint {
        workflow: &'a str,
        stage: S,
    },
    Stopped {
        workflow: &'a str,
        workflow_state: WorkflowState,
    },
    /// The workflow is done; `completion` is what it leaves (the machine, the state it completed in).
    Completed {
        workflow: &'a str,
        completion: C,
    },
    /// Recovery work was done (a compensation, a reseed): kept for the audit and a restarted controller's reading,
    /// it moves no checkpoint.
    Work {
        workflow: &'a str,
    },
    /// A request was refused before its run began (a decommission of a worker something references): kept for the
    /// audit, it is no run — it counts neither as a run nor as a failed one, and changes no checkpoint.
    Refused {
        workflow: &'a str,
    },
}

impl<S, C> Entry<'_, S, C> {
    fn workflow(&self) -> &str {
        match self {
            Entry::RunStarted { workflow, .. }
            | Entry::Checkpoint { workflow, .. }
            | Entry::Stopped { workflow, .. }
            | Entry::Completed { workflow, .. }
            | Entry::Work { workflow }
            | Entry::Refused { workflow } => workflow,
        }
    }
}

/// A workflow kind's journal record: one line `<PREFIX><json>`, next to the other subsystems' records.
pub trait WorkflowRecord: Serialize + DeserializeOwned {
    type Stage: Copy + Ord;
    /// What a completed workflow leaves, as its completion record says.
    type Completion: Clone;
    /// The line prefix, with its space (`onboard `).
    const PREFIX: &'static str;
    /// The workflow's name in error text (`onboarding`).
    const KIND: &'static str;

    fn entry(&self) -> Entry<'_, Self::Stage, Self::Completion>;
}

/// The journal line of `record`.
pub fn encode<R: WorkflowRecord>(record: &R) -> String {
    let json = serde_json::to_string(record).unwrap_or_else(|_| panic!("{} records serialise", R::KIND));
    format!("{}{json}", R::PREFIX)
}

/// `None` for another subsystem's line (or a line of this kind that does not decode: the error says so).
pub fn decode<R: WorkflowRecord>(line: &str) -> Option<Result<R, String>> {
    let json = line.strip_prefix(R::PREFIX)?;
    Some(serde_json::from_str(json).map_err(|error| format!("{} record: {error}", R::KIND)))
}

/// What the journal says about one workflow's runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History<R: WorkflowRecord> {
    /// The last run's number (0 before the first).
    pub runs: u32,
    /// Runs that ended `failed_retryable` (section 6: escalate after bounded attempts).
    pub failed_retryable_runs: u32,
    /// What a completed workflow left, from its completion record.
    pub completed: Option<R::Completion>,
    /// The last checkpoint: the stage a dead controller had reached.
    pub last_stage: Option<R::Stage>,
    /// Every stage a run of the workflow checkpointed.
    pub reached: BTreeSet<R::Stage>,
    /// The stage the last run had reached when it ended with neither a stop nor a completion: its controller died
    /// there. Cleared by a run's start, stop and completion.
    pub interrupted_at: Option<R::Stage>,
    /// The last run began and has recorded neither a stop nor a completion (its controller died, perhaps before its
    /// first checkpoint): a restarted controller runs the workflow again.
    pub unfinished: bool,
    /// The state the last run stopped in, when it stopped (cleared by a run's start and a completion).
    pub last_stop: Option<WorkflowState>,
    /// Requests refused before a run began (none is a run).
    pub refusals: u32,
    /// The stages the last run checkpointed, since it started.
    last_run_reached: BTreeSet<R::Stage>,
    /// The last run recorded a stop or a completion, since it started.
    last_run_ended: bool,
}

impl<R: WorkflowRecord> Default for History<R> {
    fn default() -> Self {
        History {
            runs: 0,
            failed_retryable_runs: 0,
            completed: None,
            last_stage: None,
            reached: BTreeSet::new(),
            interrupted_at: None,
            unfinished: false,
            last_stop: None,
            refusals: 0,
            last_run_reached: BTreeSet::new(),
            last_run_ended: false,
        }
    }
}

impl<R: WorkflowRecord> History<R> {
    /// The history of `workflow` in the journal's `lines`: other subsystems' lines and other workflows' records are
    /// skipped; a line of this workflow kind that does not decode is an error.
    pub fn of<'a>(workflow: &str, lines: impl IntoIterator<Item = &'a str>) -> Result<History<R>, String> {
        let mut history = History::default();
        for line in lines {
            let Some(record) = decode::<R>(line) else { continue };
            let record = record?;
            let entry = record.entry();
            if entry.workflow() == workflow {
                history.apply(entry);
            }
        }
        Ok(history)
    }

    /// The history of every workflow of this kind in the journal's `lines`, each line decoded once: what
    /// [`History::of`] says of each workflow named (a workflow absent from the map has the default history), for a
    /// reader that asks about many. A line of this kind that does not decode is an error, as it is to `of`.
    pub fn per_workflow<'a>(
        lines: impl IntoIterator<Item = &'a str>,
    ) -> Result<std::collections::BTreeMap<String, History<R>>, String> {
        let mut histories: std::collections::BTreeMap<String, History<R>> = std::collections::BTreeMap::new();
        for line in lines {
            let Some(record) = decode::<R>(line) else { continue };
            let record = record?;
            let entry = record.entry();
            match histories.get_mut(entry.workflow()) {
                Some(history) => history.apply(entry),
                None => {
                    let workflow = entry.workflow().to_owned();
                    histories.entry(workflow).or_default().apply(entry);
                }
            }
        }
        Ok(histories)
    }

    /// Folds one entry of this history's workflow.
    fn apply(&mut self, entry: Entry<R::Stage, R::Completion>) {
        match entry {
            Entry::RunStarted { run, .. } => {
                self.runs = self.runs.max(run);
                self.interrupted_at = None;
                self.unfinished = true;
                self.last_stop = None;
                self.last_run_reached.clear();
                self.last_run_ended = false;
            }
            Entry::Checkpoint { stage, .. } => {
                self.last_stage = Some(stage);
                self.reached.insert(stage);
                self.interrupted_at = Some(stage);
                self.last_run_reached.insert(stage);
            }
            Entry::Stopped { workflow_state, .. } => {
                if workflow_state == WorkflowState::FailedRetryable {
                    self.failed_retryable_runs += 1;
                }
                self.end_run();
                self.last_stop = Some(workflow_state);
            }
            Entry::Completed { completion, .. } => {
                self.completed = Some(completion);
                self.end_run();
                self.last_stop = None;
            }
            Entry::Work { .. } => {}
            Entry::Refused { .. } => self.refusals += 1,
        }
    }

    fn end_run(&mut self) {
        self.interrupted_at = None;
        self.unfinished = false;
        self.last_run_ended = true;
    }

    /// The last run reached `stage` and ended with neither a stop nor a completion: its controller died at or after
    /// it (onboarding: a deploy it sent may be in flight or done).
    pub fn interrupted_after(&self, stage: R::Stage) -> bool {
        self.last_run_reached.contains(&stage) && !self.last_run_ended
    }
}
