//! The pre-typed MAC controller's cohort journal, as that controller wrote it (`seeds/003`: the serial controller the
//! RCCA's replacement plan retires): the lines a scenario leaves in the controller's journal before the new
//! controller first reads it. The fake only writes lines; what they mean is the engine's to decode
//! (`engine::rollout::journal::decode_old`), and this writer shares none of its code, so a misunderstanding of the
//! format on either side shows.
//!
//! The format (`docs/journal.md`, "Old journals"): `mac-cohort v1 <rollout> <verb> <key>=<value> …`, one space
//! between tokens — `plan revision= generation= routes= cohorts=<n,n>/<n,n>`, then `arm` and `done` (`node= phase=
//! op=`), `fail` (`node= phase= reason=<text>`), `cohort` (`index= verdict=`) and `final` (`outcome=`). Its phases
//! are `hold`, `stop`, `install`, `identity`, `start`, `verify`, `unhold`.

use serde::{Deserialize, Serialize};

/// What every line begins with.
pub const PREFIX: &str = "mac-cohort v1";

/// A rollout the old controller planned: its id, what it deployed, under which route bundle, in which cohorts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CohortPlan {
    pub rollout: String,
    pub revision: String,
    pub generation: u64,
    pub routes: String,
    pub cohorts: Vec<Vec<String>>,
}

/// The shapes an old journal is found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OldJournal {
    /// The old controller froze its plan and armed its first cohort's holds, then died: every line decodes.
    Armed,
    /// [`OldJournal::Armed`], then a line arming the first node's `drain` phase, which the format never had.
    UnknownPhase,
    /// [`OldJournal::Armed`], then a second plan for the same rollout with its cohorts in reverse order: which plan
    /// the old controller was following is not known.
    ConflictingPlans,
}

impl OldJournal {
    pub const ALL: [OldJournal; 3] = [OldJournal::Armed, OldJournal::UnknownPhase, OldJournal::ConflictingPlans];

    /// The journal lines of this shape for `plan`, in the order the old controller wrote them.
    pub fn lines(self, plan: &CohortPlan) -> Vec<String> {
        let rollout = &plan.rollout;
        let mut lines = vec![plan_line(plan, &plan.cohorts)];
        let first_cohort = plan.cohorts.first().map(Vec::as_slice).unwrap_or_default();
        for node in first_cohort {
            lines.push(format!("{PREFIX} {rollout} arm node={node} phase=hold op={rollout}:{node}:hold"));
        }
        match self {
            OldJournal::Armed => {}
            OldJournal::UnknownPhase => {
                if let Some(node) = first_cohort.first() {
                    lines.push(format!("{PREFIX} {rollout} arm node={node} phase=drain op={rollout}:{node}:drain"));
                }
            }
            OldJournal::ConflictingPlans => {
                let reversed: Vec<Vec<String>> = plan.cohorts.iter().rev().cloned().collect();
                lines.push(plan_line(plan, &reversed));
            }
        }
        lines
    }
}

fn plan_line(plan: &CohortPlan, cohorts: &[Vec<String>]) -> String {
    let CohortPlan { rollout, revision, generation, routes, .. } = plan;
    let cohorts: Vec<String> = cohorts.iter().map(|cohort| cohort.join(",")).collect();
    format!(
        "{PREFIX} {rollout} plan revision={revision} generation={generation} routes={routes} cohorts={}",
        cohorts.join("/")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> CohortPlan {
        CohortPlan {
            rollout: "rollout-2944aebb".into(),
            revision: "2944aebb".into(),
            generation: 2,
            routes: "sha256:routes-1".into(),
            cohorts: vec![vec!["node-01".into(), "node-02".into()], vec!["node-03".into()]],
        }
    }

    #[test]
    fn each_shape_is_the_armed_journal_and_what_it_adds() {
        let armed = OldJournal::Armed.lines(&plan());
        assert_eq!(
            armed,
            [
                "mac-cohort v1 rollout-2944aebb plan revision=2944aebb generation=2 routes=sha256:routes-1 cohorts=node-01,node-02/node-03",
                "mac-cohort v1 rollout-2944aebb arm node=node-01 phase=hold op=rollout-2944aebb:node-01:hold",
                "mac-cohort v1 rollout-2944aebb arm node=node-02 phase=hold op=rollout-2944aebb:node-02:hold",
            ]
        );
        let unknown = OldJournal::UnknownPhase.lines(&plan());
        assert_eq!((&unknown[..3], unknown.len()), (&armed[..], 4));
        assert!(unknown[3].contains(" arm node=node-01 phase=drain "), "{}", unknown[3]);
        let conflicting = OldJournal::ConflictingPlans.lines(&plan());
        assert_eq!((&conflicting[..3], conflicting.len()), (&armed[..], 4));
        assert!(
            conflicting[3].ends_with(
                " plan revision=2944aebb generation=2 routes=sha256:routes-1 cohorts=node-03/node-01,node-02"
            )
        );
        assert!(OldJournal::ALL.iter().flat_map(|shape| shape.lines(&plan())).all(|line| !line.contains('\n')));
    }
}
