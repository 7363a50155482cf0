//! The rollout's durable journal records and their replay (RCCA: "The typed cohort journal preserved exact recovery
//! authority across controller death"; P1 "Decouple WAL ordering from remote serialization": arm a batch of intents,
//! run the remote operations concurrently, record completions).
//!
//! Records are one line each, `rollout <json>`, in the controller's [`crate::ports::Journal`] next to other
//! subsystems' records. A new controller replays them and adopts the latest non-terminal rollout at its exact
//! revision: completed steps are never run again; a step with an intent and no completion is re-checked against the
//! node before anything is redone.
//!
//! Old journals (RCCA replacement plan: "Old deployment journals ... should be migrated once into the new typed forms
//! or explicitly quarantined; the new controller should not retain dual execution paths"): lines the pre-typed MAC
//! controller wrote (`mac-cohort v1 …`, [`decode_old`]) are never executed as they are. A replay that meets old lines
//! not yet settled answers the one record that settles them ([`Replayed::settle`]): a [`Record::Migrated`] holding
//! the typed records they decode to (so a replay folds those, and never migrates the lines again), or, when they
//! cannot be decoded unambiguously, a [`Record::JournalQuarantined`] that sets them aside and refuses every rollout
//! while it stands. Either is one append, so a controller that dies while settling leaves the lines unsettled, never
//! half-migrated. The format and the mapping: `docs/journal.md`, "Old journals".

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::ports::events::{OldJournalDefect, OldJournalFormat, RolloutEnd};
use crate::ports::{Journal, JournalError};
use crate::rollout::account::Exclusions;
use crate::rollout::lane::{LaneVerdict, NodeMachine, NodeState, NodeStep};

fn is_empty(exclusions: &Exclusions) -> bool {
    *exclusions == Exclusions::default()
}

fn is_false(value: &bool) -> bool {
    !*value
}

const PREFIX: &str = "rollout ";

/// Every line of the pre-typed MAC controller's cohort journal starts with this.
pub const OLD_PREFIX: &str = "mac-cohort ";

/// One old journal line, with its 1-based line number in the journal: what a migration or a quarantine names, so that
/// a replay knows which lines it settled (and a line changed since is noticed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OldLine {
    pub line: u64,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case", deny_unknown_fields)]
pub enum Record {
    /// The plan is frozen before any mutation: revision, generation, the signed route bundle's digest, the lanes.
    PlanFrozen {
        rollout: String,
        revision: String,
        generation: u64,
        route_digest: String,
        lanes: Vec<Vec<String>>,
        quarantined: Vec<String>,
        /// The quarantines' surfaces and the nodes someone else held, for the account. Absent from journals written
        /// before the account (their quarantines are accounted with no surfaces, and their held nodes not at all).
        #[serde(default, skip_serializing_if = "is_empty")]
        excluded: Exclusions,
        /// Each lane node's prior generation, as the preflight found it installed: what a rollback of its lane
        /// restores. Absent from journals written before reverse recovery (their lanes cannot be rolled back).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        prior: BTreeMap<String, (String, u64)>,
    },
    /// The deployment lock's fence this rollout holds: a controller adopting the journal supersedes exactly it.
    LockTaken {
        rollout: String,
        fence: u64,
    },
    EpochOpened {
        rollout: String,
        epoch: u64,
    },
    /// Armed before the remote operation runs (the legacy controller: one node at a time).
    Intent {
        rollout: String,
        route_digest: String,
        node: String,
        step: NodeStep,
        operation_id: String,
    },
    /// A batch of intents armed in one durable append before the lane's operations for `step` run concurrently
    /// (RCCA P1 "Durably arm a batch of per-node intents").
    Intents {
        rollout: String,
        route_digest: String,
        lane: usize,
        step: NodeStep,
        /// `(node, operation id)` in lane order.
        operations: Vec<(String, String)>,
        /// A step of the lane's reverse recovery (every reverse step looks at the node before it acts, so none is
        /// ever in doubt).
        #[serde(default, skip_serializing_if = "is_false")]
        revert: bool,
    },
    /// Recorded after the remote operation was acknowledged (or found already done).
    Completed {
        rollout: String,
        route_digest: String,
        node: String,
        step: NodeStep,
        operation_id: String,
        #[serde(default, skip_serializing_if = "is_false")]
        revert: bool,
    },
    NodeFailed {
        rollout: String,
        node: String,
        step: NodeStep,
        reason: String,
        #[serde(default, skip_serializing_if = "is_false")]
        revert: bool,
    },
    /// The lane could not reach its successor: it is rolled back, every node it took down back to its prior
    /// generation. `reason` names what stopped it.
    LaneReverting {
        rollout: String,
        route_digest: String,
        lane: usize,
        reason: String,
        /// The lane's nodes that could not reach the successor (a rollback resumed from the journal names them).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failed: Vec<String>,
    },
    LaneCommitted {
        rollout: String,
        route_digest: String,
        lane: usize,
        verdict: LaneVerdict,
    },
    /// The rollout reached a terminal state; nothing is adopted after this.
    Terminal {
        rollout: String,
        outcome: RolloutEnd,
    },
    /// Old journal lines migrated, once, into `records` (folded here by a replay as if appended one by one). `rollout`
    /// and `route_digest` are the last migrated plan's.
    Migrated {
        rollout: String,
        format: OldJournalFormat,
        route_digest: String,
        lines: Vec<OldLine>,
        records: Vec<Record>,
    },
    /// Old journal lines set aside: `line` could not be decoded unambiguously (`defect`, `detail`). Every rollout is
    /// refused while this stands. `rollout` is the one the offending line names (empty when it names none).
    JournalQuarantined {
        rollout: String,
        format: OldJournalFormat,
        line: u64,
        defect: OldJournalDefect,
        detail: String,
        lines: Vec<OldLine>,
    },
}

impl Record {
    pub fn rollout(&self) -> &str {
        match self {
            Record::PlanFrozen { rollout, .. }
            | Record::LockTaken { rollout, .. }
            | Record::EpochOpened { rollout, .. }
            | Record::Intent { rollout, .. }
            | Record::Intents { rollout, .. }
            | Record::Completed { rollout, .. }
            | Record::NodeFailed { rollout, .. }
            | Record::LaneCommitted { rollout, .. }
            | Record::LaneReverting { rollout, .. }
            | Record::Terminal { rollout, .. }
            | Record::Migrated { rollout, .. }
            | Record::JournalQuarantined { rollout, .. } => rollout,
        }
    }

    /// The record's `record` tag, as its journal line carries it.
    pub fn kind(&self) -> &'static str {
        match self {
            Record::PlanFrozen { .. } => "plan_frozen",
            Record::LockTaken { .. } => "lock_taken",
            Record::EpochOpened { .. } => "epoch_opened",
            Record::Intent { .. } => "intent",
            Record::Intents { .. } => "intents",
            Record::Completed { .. } => "completed",
            Record::NodeFailed { .. } => "node_failed",
            Record::LaneReverting { .. } => "lane_reverting",
            Record::LaneCommitted { .. } => "lane_committed",
            Record::Terminal { .. } => "terminal",
            Record::Migrated { .. } => "migrated",
            Record::JournalQuarantined { .. } => "journal_quarantined",
        }
    }

    /// The operation the record arms or completes, if it names one.
    pub fn operation_id(&self) -> Option<&str> {
        match self {
            Record::Intent { operation_id, .. } | Record::Completed { operation_id, .. } => Some(operation_id),
            _ => None,
        }
    }

    /// The route bundle the record was written under, if it names one.
    pub fn route_digest(&self) -> Option<&str> {
        match self {
            Record::PlanFrozen { route_digest, .. }
            | Record::Intent { route_digest, .. }
            | Record::Intents { route_digest, .. }
            | Record::Completed { route_digest, .. }
            | Record::LaneReverting { route_digest, .. }
            | Record::LaneCommitted { route_digest, .. }
            | Record::Migrated { route_digest, .. } => Some(route_digest),
            _ => None,
        }
    }

    /// The journal line.
    pub fn encode(&self) -> String {
        format!("{PREFIX}{}", serde_json::to_string(self).expect("journal records serialise"))
    }

    /// `None` for another subsystem's line; an error for a rollout line that does not decode.
    pub fn decode(line: &str) -> Option<Result<Record, JournalError>> {
        let json = line.strip_prefix(PREFIX)?;
        Some(serde_json::from_str(json).map_err(|error| JournalError::Corrupt(format!("rollout record: {error}"))))
    }
}

/// A rollout rebuilt from its journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    pub rollout: String,
    pub revision: String,
    pub generation: u64,
    pub route_digest: String,
    pub lanes: Vec<Vec<String>>,
    pub epoch: Option<u64>,
    /// The deployment lock's fence the journal's controller held, if it recorded one.
    pub fence: Option<u64>,
    pub nodes: BTreeMap<String, NodeMachine>,
    /// Steps whose intent was armed but whose completion was never recorded: the controller died between the two.
    /// Each must be re-checked against the node (did it happen?) before it is done or redone.
    pub in_doubt: Vec<(String, NodeStep)>,
    pub committed_lanes: BTreeMap<usize, LaneVerdict>,
    /// The selected nodes outside the lanes, as the plan recorded them.
    pub excluded: Exclusions,
    /// Whether the plan was frozen after every capsule was staged (a typed plan), or not (a plan migrated from an old
    /// journal: the old controller fetched after its stops, so an adopting controller stages first).
    pub staged: bool,
    /// Each lane node's prior generation, as the plan recorded it (what a rollback restores).
    pub prior: BTreeMap<String, (String, u64)>,
    /// Lanes whose rollback was journaled and not yet committed, with the nodes that could not reach the successor:
    /// an adopting controller finishes these rollbacks (it does not begin them again).
    pub reverting: BTreeMap<usize, Vec<String>>,
}

/// A standing quarantine of old journal lines, as its record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandingQuarantine {
    pub line: u64,
    pub defect: OldJournalDefect,
    pub detail: String,
}

/// What a replay found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// The latest rollout that is not terminal, if any.
    pub adopted: Option<Adopted>,
    /// Old lines neither migrated nor quarantined yet: the one record that settles them, to append (and replay
    /// again) before anything is adopted or started.
    pub settle: Option<Record>,
    /// Old lines set aside: no rollout is adopted or started while this stands.
    pub quarantine: Option<StandingQuarantine>,
}

/// The typed records folded so far.
#[derive(Default)]
struct Fold {
    current: Option<Adopted>,
    /// Every rollout a typed record (or a migrated one) named.
    rollouts: BTreeSet<String>,
    /// Folding a migration's records.
    migrated: bool,
}

impl Fold {
    fn apply(&mut self, record: Record) -> Result<(), JournalError> {
        self.rollouts.insert(record.rollout().to_owned());
        if let Record::Terminal { rollout, .. } = &record
            && self.current.as_ref().is_none_or(|adopted| adopted.rollout != *rollout)
        {
            // A rollout refused before its plan: terminal, with nothing of it to adopt.
            return Ok(());
        }
        if let Record::PlanFrozen { rollout, revision, generation, route_digest, lanes, quarantined, excluded, prior } =
            record
        {
            let mut nodes: BTreeMap<String, NodeMachine> =
                lanes.iter().flatten().map(|node| (node.clone(), NodeMachine::new(node.clone()))).collect();
            for node in &quarantined {
                nodes.insert(node.clone(), NodeMachine::quarantined(node.clone()));
            }
            self.current = Some(Adopted {
                rollout,
                revision,
                generation,
                route_digest,
                lanes,
                epoch: None,
                fence: None,
                nodes,
                in_doubt: Vec::new(),
                committed_lanes: BTreeMap::new(),
                excluded,
                staged: !self.migrated,
                prior,
                reverting: BTreeMap::new(),
            });
            return Ok(());
        }
        let Some(adopted) = self.current.as_mut().filter(|adopted| adopted.rollout == record.rollout()) else {
            return Err(JournalError::Corrupt(format!("record for rollout {} before its plan", record.rollout())));
        };
        match record {
            Record::PlanFrozen { .. } => unreachable!("handled above"),
            Record::Migrated { .. } | Record::JournalQuarantined { .. } => {
                return Err(JournalError::Corrupt("a migrated record settles old lines itself".into()));
            }
            Record::EpochOpened { epoch, .. } => adopted.epoch = Some(epoch),
            Record::LockTaken { fence, .. } => adopted.fence = Some(fence),
            Record::Intent { node, step, .. } => {
                if !adopted.in_doubt.contains(&(node.clone(), step)) {
                    adopted.in_doubt.push((node, step));
                }
            }
            Record::Intents { revert: true, .. } => {}
            Record::Intents { step, operations, .. } => {
                for (node, _) in operations {
                    if !adopted.in_doubt.contains(&(node.clone(), step)) {
                        adopted.in_doubt.push((node, step));
                    }
                }
            }
            Record::Completed { node, step, revert: true, .. } => {
                if let Some(machine) = adopted.nodes.get_mut(&node) {
                    machine.handle_revert_done(step);
                }
            }
            Record::Completed { node, step, .. } => {
                adopted.in_doubt.retain(|entry| *entry != (node.clone(), step));
                if let Some(machine) = adopted.nodes.get_mut(&node) {
                    machine.handle_done(step);
                }
            }
            Record::NodeFailed { node, step, reason, revert: true, .. } => {
                if let Some(machine) = adopted.nodes.get_mut(&node) {
                    machine.handle_revert_failed(step, reason);
                }
            }
            Record::NodeFailed { node, step, reason, .. } => {
                adopted.in_doubt.retain(|entry| *entry != (node.clone(), step));
                if let Some(machine) = adopted.nodes.get_mut(&node) {
                    machine.handle_failed(step, reason);
                }
            }
            Record::LaneReverting { lane, reason, failed, .. } => {
                adopted.reverting.insert(lane, failed);
                // The lane's forward steps in doubt are settled by the rollback: it looks at each node first.
                let nodes = adopted.lanes.get(lane).cloned().unwrap_or_default();
                adopted.in_doubt.retain(|(node, _)| !nodes.contains(node));
                for node in &nodes {
                    if let Some(machine) = adopted.nodes.get_mut(node) {
                        machine.begin_revert(&reason);
                    }
                }
                adopted.committed_lanes.remove(&lane);
            }
            Record::LaneCommitted { lane, verdict, .. } => {
                adopted.reverting.remove(&lane);
                adopted.committed_lanes.insert(lane, verdict);
            }
            Record::Terminal { .. } => self.current = None,
        }
        Ok(())
    }
}

/// Replays journal lines (in append order): the latest rollout that is not terminal, the record that settles old
/// lines not settled yet, and a standing quarantine of old lines. A rollout line that does not decode, a record out of
/// place, or a settlement that names other old lines than the journal holds before it is `Corrupt`.
pub fn replay<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<Replayed, JournalError> {
    let mut fold = Fold::default();
    // Old lines not settled yet, and the first typed rollout record after the first of them.
    let mut old: Vec<OldLine> = Vec::new();
    let mut typed_after_old = None;
    let mut quarantine = None;
    for (index, line) in lines.into_iter().enumerate() {
        let number = index as u64 + 1;
        if line.starts_with(OLD_PREFIX) {
            old.push(OldLine { line: number, text: line.to_owned() });
            continue;
        }
        let Some(record) = Record::decode(line) else { continue };
        let settled = |named: &[OldLine], old: &[OldLine]| {
            if named == old {
                Ok(())
            } else {
                Err(JournalError::Corrupt(format!(
                    "line {number}: the record settles other old lines than the journal holds before it"
                )))
            }
        };
        match record? {
            Record::Migrated { lines, records, .. } => {
                settled(&lines, &old)?;
                (old, typed_after_old) = (Vec::new(), None);
                fold.migrated = true;
                for record in records {
                    fold.apply(record)?;
                }
                fold.migrated = false;
            }
            Record::JournalQuarantined { lines, line, defect, detail, .. } => {
                settled(&lines, &old)?;
                (old, typed_after_old) = (Vec::new(), None);
                quarantine = Some(StandingQuarantine { line, defect, detail });
            }
            record => {
                if !old.is_empty() && typed_after_old.is_none() {
                    typed_after_old = Some(number);
                }
                fold.apply(record)?;
            }
        }
    }
    let settle = (!old.is_empty()).then(|| settle(old, typed_after_old, &fold.rollouts));
    Ok(Replayed { adopted: fold.current, settle, quarantine })
}

/// Reads the journal and, when old lines are not settled yet, appends the one record that settles them (their
/// migration or their quarantine) and reads again: what a controller does before it adopts or starts anything, so
/// that whatever backend holds the journal, old lines are settled once. Answers the replay and the record appended,
/// if one was.
pub async fn settle_and_replay(journal: &impl Journal) -> Result<(Replayed, Option<Record>), JournalError> {
    let replay_all = async || {
        let lines = journal.replay().await?;
        replay(lines.iter().map(String::as_str))
    };
    let mut replayed = replay_all().await?;
    let Some(record) = replayed.settle.take() else { return Ok((replayed, None)) };
    journal.append(&record.encode()).await?;
    let replayed = replay_all().await?;
    if replayed.settle.is_some() {
        return Err(JournalError::Corrupt("the journal did not keep the settlement of its old lines".into()));
    }
    Ok((replayed, Some(record)))
}

/// The record that settles old lines: their migration, or their quarantine when they do not decode unambiguously
/// or typed records already follow them.
fn settle(old: Vec<OldLine>, typed_after_old: Option<u64>, taken: &BTreeSet<String>) -> Record {
    let format = OldJournalFormat::MacCohortV1;
    let decoded = decode_old(&old, taken).and_then(|records| match typed_after_old {
        None => Ok(records),
        Some(typed) => Err(OldDefect {
            line: old[0].line,
            defect: OldJournalDefect::TypedRecordsInterleaved,
            detail: format!(
                "line {}: a typed rollout record at line {typed} follows old lines never migrated",
                old[0].line
            ),
            rollout: old_rollout(&old[0].text).to_owned(),
        }),
    });
    match decoded {
        Ok(records) => {
            let (rollout, route_digest) = records
                .iter()
                .rev()
                .find_map(|record| match record {
                    Record::PlanFrozen { rollout, route_digest, .. } => Some((rollout.clone(), route_digest.clone())),
                    _ => None,
                })
                .expect("decoded old lines begin with a plan");
            Record::Migrated { rollout, format, route_digest, lines: old, records }
        }
        Err(OldDefect { line, defect, detail, rollout }) => {
            Record::JournalQuarantined { rollout, format, line, defect, detail, lines: old }
        }
    }
}

/// Why old lines could not be decoded: the first line that could not, its defect, in words, and the rollout it names
/// (empty when it names none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OldDefect {
    pub line: u64,
    pub defect: OldJournalDefect,
    pub detail: String,
    pub rollout: String,
}

/// The old controller's phase names, each with the step it was.
const OLD_PHASES: [(&str, NodeStep); 7] = [
    ("hold", NodeStep::Hold),
    ("stop", NodeStep::Quiesce),
    ("install", NodeStep::Install),
    ("identity", NodeStep::WriteIdentity),
    ("start", NodeStep::Start),
    ("verify", NodeStep::Prove),
    ("unhold", NodeStep::Release),
];

/// The rollout token of an old line (empty when it has none).
fn old_rollout(text: &str) -> &str {
    text.strip_prefix(OLD_PREFIX).and_then(|body| body.split(' ').nth(1)).unwrap_or_default()
}

/// An id: a rollout, a node, an operation — non-empty, of letters, digits, `.`, `_`, `-` and `:` (and `/` in an
/// operation id).
fn is_name(value: &str, slash: bool) -> bool {
    !value.is_empty()
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-:".contains(&b) || (slash && b == b'/'))
}

/// The `key=value` fields of an old line's rest: exactly `required`, and any of `optional`, once each.
fn old_fields<'a>(rest: &'a str, required: &[&str], optional: &[&str]) -> Result<BTreeMap<&'a str, &'a str>, String> {
    let mut fields = BTreeMap::new();
    for token in rest.split(' ').filter(|_| !rest.is_empty()) {
        let Some((key, value)) = token.split_once('=') else {
            return Err(format!("{token:?} is not key=value"));
        };
        if !required.contains(&key) && !optional.contains(&key) {
            return Err(format!("unknown field {key:?}"));
        }
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("field {key} has no value"));
        }
        if fields.insert(key, value).is_some() {
            return Err(format!("field {key} twice"));
        }
    }
    match required.iter().find(|key| !fields.contains_key(**key)) {
        Some(key) => Err(format!("no field {key}")),
        None => Ok(fields),
    }
}

/// The plan of the old rollout being decoded.
struct OldPlan {
    rollout: String,
    route_digest: String,
    nodes: BTreeSet<String>,
    lanes: usize,
    finished: bool,
}

/// Decodes the pre-typed controller's journal lines (each beginning [`OLD_PREFIX`]) into the typed records they mean,
/// or names the first line that cannot be decoded unambiguously. `taken` are the rollouts typed records already name.
///
/// The grammar (`mac-cohort v1 <rollout> <verb> <field>…`, one space between tokens):
/// `plan revision= generation= routes= cohorts=<n,n>/<n,n>… [quarantined=<n,n>]` → `plan_frozen` (a cohort is a
/// lane); `arm node= phase= op=` → `intent`; `done node= phase= op=` → `completed`; `fail node= phase= reason=<text>`
/// → `node_failed`; `cohort index= verdict=` → `lane_committed`; `final outcome=` → `terminal`. Every record after
/// the plan names the plan's route digest (the old controller had one route per plan and recorded it once).
pub fn decode_old(lines: &[OldLine], taken: &BTreeSet<String>) -> Result<Vec<Record>, OldDefect> {
    let mut records = Vec::new();
    let mut planned: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<OldPlan> = None;
    for OldLine { line, text } in lines {
        let body = text.strip_prefix(OLD_PREFIX).unwrap_or(text);
        let mut head = body.splitn(4, ' ');
        let (version, rollout, verb, rest) = (
            head.next().unwrap_or_default(),
            head.next().unwrap_or_default(),
            head.next().unwrap_or_default(),
            head.next().unwrap_or_default(),
        );
        let fail = |defect, detail: String| OldDefect {
            line: *line,
            defect,
            detail: format!("line {line}: {detail}"),
            rollout: if is_name(rollout, false) { rollout.to_owned() } else { String::new() },
        };
        let bad = |detail: String| fail(OldJournalDefect::BadField, detail);
        if version != "v1" {
            return Err(fail(OldJournalDefect::UnknownVersion, format!("version {version:?}, not v1")));
        }
        if !is_name(rollout, false) {
            return Err(bad(format!("rollout id {rollout:?}")));
        }
        if verb == "plan" {
            let fields =
                old_fields(rest, &["revision", "generation", "routes", "cohorts"], &["quarantined"]).map_err(bad)?;
            if planned.contains(rollout) {
                return Err(fail(OldJournalDefect::ConflictingPlans, format!("a second plan for {rollout}")));
            }
            if taken.contains(rollout) {
                return Err(fail(OldJournalDefect::RolloutIdTaken, format!("{rollout} is a typed rollout's id")));
            }
            let generation = fields["generation"];
            if !generation.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(format!("generation {generation:?}")));
            }
            let generation = generation.parse().map_err(|_| bad(format!("generation {generation:?}")))?;
            let lanes: Vec<Vec<String>> =
                fields["cohorts"].split('/').map(|cohort| cohort.split(',').map(str::to_owned).collect()).collect();
            let quarantined: Vec<String> =
                fields.get("quarantined").map(|q| q.split(',').map(str::to_owned).collect()).unwrap_or_default();
            let mut nodes = BTreeSet::new();
            for node in lanes.iter().flatten().chain(&quarantined) {
                if !is_name(node, false) || !nodes.insert(node.clone()) {
                    return Err(bad(format!("node {node:?} in the plan")));
                }
            }
            let route_digest = fields["routes"].to_owned();
            records.push(Record::PlanFrozen {
                rollout: rollout.to_owned(),
                revision: fields["revision"].to_owned(),
                generation,
                route_digest: route_digest.clone(),
                lanes: lanes.clone(),
                quarantined,
                excluded: Exclusions::default(),
                // The old controller recorded no prior generation: its lanes cannot be rolled back.
                prior: BTreeMap::new(),
            });
            planned.insert(rollout.to_owned());
            current =
                Some(OldPlan { rollout: rollout.to_owned(), route_digest, nodes, lanes: lanes.len(), finished: false });
            continue;
        }
        if !["arm", "done", "fail", "cohort", "final"].contains(&verb) {
            return Err(fail(OldJournalDefect::UnknownVerb, format!("verb {verb:?}")));
        }
        let plan = match &mut current {
            Some(plan) if plan.rollout == rollout => plan,
            _ if planned.contains(rollout) => {
                return Err(fail(OldJournalDefect::NotCurrentRollout, format!("{rollout} after a later plan")));
            }
            _ => return Err(fail(OldJournalDefect::EventBeforePlan, format!("{rollout} has no plan before it"))),
        };
        if plan.finished {
            return Err(fail(OldJournalDefect::AfterFinal, format!("{rollout} after its final line")));
        }
        let (rollout, route_digest) = (plan.rollout.clone(), plan.route_digest.clone());
        let node_step = |fields: &BTreeMap<&str, &str>| {
            let node = fields["node"];
            if !plan.nodes.contains(node) {
                return Err(fail(OldJournalDefect::NodeNotInPlan, format!("node {node:?} is not in the plan")));
            }
            let phase = fields["phase"];
            let Some((_, step)) = OLD_PHASES.iter().find(|(name, _)| *name == phase) else {
                return Err(fail(OldJournalDefect::UnknownPhase, format!("phase {phase:?}")));
            };
            Ok((node.to_owned(), *step))
        };
        let record = match verb {
            "arm" | "done" => {
                let fields = old_fields(rest, &["node", "phase", "op"], &[]).map_err(bad)?;
                let (node, step) = node_step(&fields)?;
                let operation_id = fields["op"];
                if !is_name(operation_id, true) {
                    return Err(bad(format!("operation id {operation_id:?}")));
                }
                let operation_id = operation_id.to_owned();
                if verb == "arm" {
                    Record::Intent { rollout, route_digest, node, step, operation_id }
                } else {
                    Record::Completed { rollout, route_digest, node, step, operation_id, revert: false }
                }
            }
            "fail" => {
                let Some((fields, reason)) = rest.split_once(" reason=") else {
                    return Err(bad("no field reason".into()));
                };
                let fields = old_fields(fields, &["node", "phase"], &[]).map_err(bad)?;
                if reason.trim().is_empty() || reason.chars().any(char::is_control) {
                    return Err(bad("field reason has no value".into()));
                }
                let (node, step) = node_step(&fields)?;
                Record::NodeFailed { rollout, node, step, reason: reason.to_owned(), revert: false }
            }
            "cohort" => {
                let fields = old_fields(rest, &["index", "verdict"], &[]).map_err(bad)?;
                let index = fields["index"];
                let lane = index
                    .parse::<usize>()
                    .ok()
                    .filter(|lane| *lane < plan.lanes && index.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| bad(format!("cohort {index:?} of a plan of {}", plan.lanes)))?;
                let verdict = match fields["verdict"] {
                    "successor" => LaneVerdict::Successor,
                    "prior" => LaneVerdict::Prior,
                    "stuck" => LaneVerdict::Stuck,
                    other => return Err(bad(format!("verdict {other:?}"))),
                };
                Record::LaneCommitted { rollout, route_digest, lane, verdict }
            }
            _ => {
                let fields = old_fields(rest, &["outcome"], &[]).map_err(bad)?;
                let outcome = match fields["outcome"] {
                    "successor" => RolloutEnd::Successor,
                    "partial" => RolloutEnd::Partial,
                    "failed" => RolloutEnd::Failed,
                    other => return Err(bad(format!("outcome {other:?}"))),
                };
                plan.finished = true;
                Record::Terminal { rollout, outcome }
            }
        };
        records.push(record);
    }
    Ok(records)
}

impl Adopted {
    /// Nodes not yet finished, with the step each resumes at.
    pub fn resumable(&self) -> Vec<(&str, NodeStep)> {
        self.nodes.values().filter_map(|machine| Some((machine.node.as_str(), machine.poll_step()?))).collect()
    }

    pub fn is_quarantined(&self, node: &str) -> bool {
        self.nodes.get(node).is_some_and(|machine| machine.state == NodeState::Quarantined)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::lane::operation_id;

    fn plan() -> Record {
        Record::PlanFrozen {
            rollout: "r1".into(),
            revision: "2944aebb".into(),
            generation: 5,
            route_digest: "sha256:routes".into(),
            lanes: vec![vec!["w1".into(), "w2".into()], vec!["w3".into()]],
            quarantined: vec!["w50".into()],
            excluded: Exclusions {
                quarantined: [("w50".to_owned(), vec!["marker absent".to_owned()])].into_iter().collect(),
                held: [("w9".to_owned(), vec!["operator:alice".to_owned()])].into_iter().collect(),
            },
            prior: ["w1", "w2", "w3"].iter().map(|node| ((*node).to_owned(), ("7f3bbd12".to_owned(), 4))).collect(),
        }
    }

    fn intent(node: &str, step: NodeStep) -> Record {
        Record::Intent {
            rollout: "r1".into(),
            route_digest: "sha256:routes".into(),
            node: node.into(),
            step,
            operation_id: operation_id("r1", node, step),
        }
    }

    fn done(node: &str, step: NodeStep) -> Record {
        Record::Completed {
            rollout: "r1".into(),
            route_digest: "sha256:routes".into(),
            node: node.into(),
            step,
            operation_id: operation_id("r1", node, step),
            revert: false,
        }
    }

    fn lines(records: &[Record]) -> Vec<String> {
        let mut lines: Vec<String> = records.iter().map(Record::encode).collect();
        lines.insert(1, "sensor.silent node-03".into()); // another subsystem's record in the same journal
        lines
    }

    #[test]
    fn a_controller_killed_after_intent_adopts_the_step_as_in_doubt() {
        let records =
            [plan(), intent("w1", NodeStep::Hold), done("w1", NodeStep::Hold), intent("w1", NodeStep::Quiesce)];
        let lines = lines(&records);
        let adopted = replay(lines.iter().map(String::as_str)).unwrap().adopted.unwrap();
        assert_eq!(adopted.revision, "2944aebb");
        assert_eq!(adopted.in_doubt, [("w1".to_owned(), NodeStep::Quiesce)]);
        assert_eq!(adopted.resumable(), [("w1", NodeStep::Quiesce), ("w2", NodeStep::Hold), ("w3", NodeStep::Hold)]);
        assert!(adopted.is_quarantined("w50"));
    }

    #[test]
    fn a_batch_of_intents_puts_every_node_of_it_in_doubt_and_the_lock_fence_is_adopted() {
        let batch = Record::Intents {
            rollout: "r1".into(),
            route_digest: "sha256:routes".into(),
            lane: 0,
            step: NodeStep::Quiesce,
            operations: ["w1", "w2"]
                .iter()
                .map(|node| ((*node).to_owned(), operation_id("r1", node, NodeStep::Quiesce)))
                .collect(),
            revert: false,
        };
        let lock = Record::LockTaken { rollout: "r1".into(), fence: 7 };
        let records = [plan(), lock, batch, done("w2", NodeStep::Quiesce)];
        let lines = lines(&records);
        let adopted = replay(lines.iter().map(String::as_str)).unwrap().adopted.unwrap();
        assert_eq!(adopted.fence, Some(7));
        assert_eq!(adopted.in_doubt, [("w1".to_owned(), NodeStep::Quiesce)]);
    }

    fn reverted(node: &str, step: NodeStep) -> Record {
        Record::Completed {
            rollout: "r1".into(),
            route_digest: "sha256:routes".into(),
            node: node.into(),
            step,
            operation_id: crate::rollout::lane::revert_operation_id("r1", node, step),
            revert: true,
        }
    }

    #[test]
    fn a_journaled_rollback_is_adopted_where_it_stood_and_committed_once() {
        let failed = Record::NodeFailed {
            rollout: "r1".into(),
            node: "w2".into(),
            step: NodeStep::Install,
            reason: "ssh timeout".into(),
            revert: false,
        };
        let reverting = Record::LaneReverting {
            rollout: "r1".into(),
            route_digest: "sha256:routes".into(),
            lane: 0,
            reason: "w2 failed at install: ssh timeout".into(),
            failed: vec!["w2".into()],
        };
        let revert_intents = Record::Intents {
            rollout: "r1".into(),
            route_digest: "sha256:routes".into(),
            lane: 0,
            step: NodeStep::Quiesce,
            operations: vec![("w1".into(), "r1/w1/revert/quiesce".into())],
            revert: true,
        };
        let mut records = vec![plan()];
        for step in [NodeStep::Hold, NodeStep::Quiesce, NodeStep::Install] {
            records.push(done("w1", step));
        }
        records.extend([done("w2", NodeStep::Hold), done("w2", NodeStep::Quiesce)]);
        records.extend([intent("w2", NodeStep::Install), failed, reverting, reverted("w1", NodeStep::Hold)]);
        records.extend([reverted("w2", NodeStep::Hold), revert_intents]);
        let journal = lines(&records);
        let adopted = replay(journal.iter().map(String::as_str)).unwrap().adopted.unwrap();
        assert_eq!(adopted.reverting, [(0, vec!["w2".to_owned()])].into_iter().collect());
        assert!(adopted.in_doubt.is_empty(), "a reverse step looks at its node first: never in doubt");
        assert_eq!(adopted.nodes["w1"].poll_revert(), Some(NodeStep::Quiesce));
        assert_eq!(adopted.nodes["w2"].poll_revert(), Some(NodeStep::Quiesce));
        assert_eq!(adopted.nodes["w3"].poll_step(), Some(NodeStep::Hold), "the next lane is untouched");
        assert_eq!(adopted.prior["w1"], ("7f3bbd12".to_owned(), 4));

        let commit = Record::LaneCommitted {
            rollout: "r1".into(),
            route_digest: "sha256:routes".into(),
            lane: 0,
            verdict: LaneVerdict::Prior,
        };
        records.push(commit);
        let journal = lines(&records);
        let adopted = replay(journal.iter().map(String::as_str)).unwrap().adopted.unwrap();
        assert!(adopted.reverting.is_empty(), "a committed rollback is not resumed");
        assert_eq!(adopted.committed_lanes[&0], LaneVerdict::Prior);
    }

    #[test]
    fn a_completed_step_is_never_resumed_and_a_replayed_completion_changes_nothing() {
        let records = [plan(), intent("w2", NodeStep::Hold), done("w2", NodeStep::Hold), done("w2", NodeStep::Hold)];
        let lines = lines(&records);
        let adopted = replay(lines.iter().map(String::as_str)).unwrap().adopted.unwrap();
        assert!(adopted.in_doubt.is_empty());
        assert_eq!(adopted.nodes["w2"].poll_step(), Some(NodeStep::Quiesce));
    }

    #[test]
    fn a_terminal_rollout_is_not_adopted_and_a_later_one_is() {
        let terminal = Record::Terminal { rollout: "r1".into(), outcome: RolloutEnd::Successor };
        let lines = lines(&[plan(), terminal.clone()]);
        assert_eq!(replay(lines.iter().map(String::as_str)).unwrap().adopted, None);
        let lines = lines_with_second_plan(&[plan(), terminal]);
        assert_eq!(replay(lines.iter().map(String::as_str)).unwrap().adopted.unwrap().rollout, "r2");
    }

    fn lines_with_second_plan(records: &[Record]) -> Vec<String> {
        let mut all = lines(records);
        let Record::PlanFrozen { revision, generation, route_digest, lanes, quarantined, excluded, prior, .. } = plan()
        else {
            unreachable!()
        };
        let rollout = "r2".into();
        all.push(
            Record::PlanFrozen { rollout, revision, generation, route_digest, lanes, quarantined, excluded, prior }
                .encode(),
        );
        all
    }

    #[test]
    fn the_plan_keeps_its_exclusions_and_a_journal_from_before_the_account_still_decodes() {
        let lines = lines(&[plan()]);
        let adopted = replay(lines.iter().map(String::as_str)).unwrap().adopted.unwrap();
        assert_eq!(adopted.excluded.quarantined["w50"], ["marker absent"]);
        assert_eq!(adopted.excluded.held["w9"], ["operator:alice"]);
        // Written before the account: no exclusions, and `converged` for a rollout of successor and prior lanes.
        let old = [
            r#"rollout {"record":"plan_frozen","rollout":"r0","revision":"a","generation":1,"route_digest":"d","lanes":[["w1"]],"quarantined":["w2"]}"#,
            r#"rollout {"record":"terminal","rollout":"r0","outcome":"converged"}"#,
        ];
        let Some(Ok(Record::PlanFrozen { excluded, .. })) = Record::decode(old[0]) else { panic!("{old:?}") };
        assert_eq!(excluded, Exclusions::default());
        assert_eq!(
            Record::decode(old[1]).unwrap().unwrap(),
            Record::Terminal { rollout: "r0".into(), outcome: RolloutEnd::Partial }
        );
        assert_eq!(replay(old).unwrap().adopted, None, "a terminal rollout is not adopted");
    }

    #[test]
    fn a_corrupt_rollout_line_is_an_error_not_a_silent_skip() {
        let lines = ["rollout {\"record\":\"intent\"".to_owned()];
        assert!(matches!(replay(lines.iter().map(String::as_str)), Err(JournalError::Corrupt(_))));
        let orphan = [done("w1", NodeStep::Hold).encode()];
        assert!(matches!(replay(orphan.iter().map(String::as_str)), Err(JournalError::Corrupt(_))));
    }

    /// An old journal: a plan of two cohorts and a quarantined node, cohort 0 through to its verdict (w2 failed),
    /// then cohort 1's holds armed, and another subsystem's line among them.
    fn old_journal() -> Vec<String> {
        [
            "mac-cohort v1 cohort-7 plan revision=2944aebb generation=5 routes=sha256:r cohorts=w1,w2/w3 quarantined=w4",
            "mac-cohort v1 cohort-7 arm node=w1 phase=hold op=c7-w1-hold",
            "mac-cohort v1 cohort-7 done node=w1 phase=hold op=c7-w1-hold",
            "sensor.silent node-03",
            "mac-cohort v1 cohort-7 fail node=w2 phase=stop reason=connection to 10.0.0.2 port 22 timed out",
            "mac-cohort v1 cohort-7 cohort index=0 verdict=stuck",
            "mac-cohort v1 cohort-7 arm node=w3 phase=hold op=c7-w3-hold",
        ]
        .map(str::to_owned)
        .into()
    }

    fn replayed(lines: &[String]) -> Replayed {
        replay(lines.iter().map(String::as_str)).unwrap()
    }

    #[test]
    fn old_lines_are_migrated_once_into_the_typed_records_they_mean() {
        let mut journal = old_journal();
        let first = replayed(&journal);
        assert_eq!(first.adopted, None, "old lines are never adopted as they are");
        let Some(Record::Migrated { rollout, format, route_digest, lines, records }) = first.settle.clone() else {
            panic!("{:?}", first.settle)
        };
        assert_eq!(
            (rollout.as_str(), format, route_digest.as_str()),
            ("cohort-7", OldJournalFormat::MacCohortV1, "sha256:r")
        );
        assert_eq!(lines.iter().map(|old| old.line).collect::<Vec<_>>(), [1, 2, 3, 5, 6, 7]);
        let kinds: Vec<String> = records.iter().map(|r| r.encode().split('"').nth(3).unwrap().to_owned()).collect();
        assert_eq!(kinds, ["plan_frozen", "intent", "completed", "node_failed", "lane_committed", "intent"]);
        assert_eq!(
            records[3],
            Record::NodeFailed {
                rollout: "cohort-7".into(),
                node: "w2".into(),
                step: NodeStep::Quiesce,
                reason: "connection to 10.0.0.2 port 22 timed out".into(),
                revert: false,
            }
        );
        // Written, it is one line of the journal; a replay folds its records and settles nothing more.
        journal.push(first.settle.unwrap().encode());
        let second = replayed(&journal);
        assert_eq!((second.settle, second.quarantine), (None, None), "migrated once");
        let adopted = second.adopted.unwrap();
        assert_eq!(
            (adopted.rollout.as_str(), adopted.revision.as_str(), adopted.generation),
            ("cohort-7", "2944aebb", 5)
        );
        assert_eq!(adopted.lanes, [vec!["w1".to_owned(), "w2".to_owned()], vec!["w3".to_owned()]]);
        assert_eq!(adopted.in_doubt, [("w3".to_owned(), NodeStep::Hold)]);
        assert_eq!(adopted.committed_lanes[&0], LaneVerdict::Stuck);
        assert!(adopted.is_quarantined("w4"));
        assert_eq!((adopted.fence, adopted.epoch), (None, None), "the old controller had neither");
        assert!(!adopted.staged, "nor did it stage before its stops");
        // Typed records appended after the migration fold on top of it, and still nothing is migrated again.
        journal.push(
            done("w3", NodeStep::Hold).encode().replace("\"r1\"", "\"cohort-7\"").replace("sha256:routes", "sha256:r"),
        );
        let third = replayed(&journal);
        assert_eq!(third.settle, None);
        assert!(third.adopted.unwrap().in_doubt.is_empty());
    }

    #[test]
    fn old_lines_that_do_not_decode_unambiguously_are_quarantined_naming_the_line() {
        let plan = "mac-cohort v1 c plan revision=a generation=1 routes=d cohorts=w1,w2";
        let arm = "mac-cohort v1 c arm node=w1 phase=hold op=o";
        let cases: Vec<(&str, Vec<String>, u64, OldJournalDefect)> = vec![
            ("an unknown version", vec![plan.replace("v1", "v2")], 1, OldJournalDefect::UnknownVersion),
            ("an unknown verb", vec![plan.into(), arm.replace("arm", "drain")], 2, OldJournalDefect::UnknownVerb),
            ("an unknown phase", vec![plan.into(), arm.replace("hold", "drain")], 2, OldJournalDefect::UnknownPhase),
            ("a missing field", vec![plan.into(), arm.replace(" op=o", "")], 2, OldJournalDefect::BadField),
            ("an unknown field", vec![format!("{plan} region=eu")], 1, OldJournalDefect::BadField),
            ("a field twice", vec![plan.into(), format!("{arm} op=o")], 2, OldJournalDefect::BadField),
            ("two spaces", vec![plan.replace(" routes", "  routes")], 1, OldJournalDefect::BadField),
            ("a signed generation", vec![plan.replace("generation=1", "generation=+1")], 1, OldJournalDefect::BadField),
            ("a node in two cohorts", vec![plan.replace("w1,w2", "w1/w1")], 1, OldJournalDefect::BadField),
            (
                "a cohort out of range",
                vec![plan.into(), "mac-cohort v1 c cohort index=1 verdict=prior".into()],
                2,
                OldJournalDefect::BadField,
            ),
            (
                "an unknown verdict",
                vec![plan.into(), "mac-cohort v1 c cohort index=0 verdict=done".into()],
                2,
                OldJournalDefect::BadField,
            ),
            (
                "a failure without a reason",
                vec![plan.into(), "mac-cohort v1 c fail node=w1 phase=stop".into()],
                2,
                OldJournalDefect::BadField,
            ),
            ("a transition before its plan", vec![arm.into()], 1, OldJournalDefect::EventBeforePlan),
            ("a node not in the plan", vec![plan.into(), arm.replace("w1", "w9")], 2, OldJournalDefect::NodeNotInPlan),
            (
                "two plans",
                vec![plan.into(), arm.into(), plan.replace("w1,w2", "w2,w1")],
                3,
                OldJournalDefect::ConflictingPlans,
            ),
            (
                "an earlier rollout after a later plan",
                vec![plan.into(), plan.replace(" c ", " d "), arm.into()],
                3,
                OldJournalDefect::NotCurrentRollout,
            ),
            (
                "a line after the final one",
                vec![plan.into(), "mac-cohort v1 c final outcome=successor".into(), arm.into()],
                3,
                OldJournalDefect::AfterFinal,
            ),
        ];
        for (name, lines, line, defect) in cases {
            let found = replayed(&lines);
            match found.settle {
                Some(Record::JournalQuarantined { line: at, defect: why, lines: set_aside, detail, .. }) => {
                    assert_eq!((at, why), (line, defect), "{name}: {detail}");
                    assert!(detail.starts_with(&format!("line {line}: ")), "{name}: {detail}");
                    assert_eq!(set_aside.len(), lines.len(), "{name}: every old line is set aside");
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_quarantine_stands_once_written_and_old_lines_beside_typed_ones_are_ambiguous() {
        let mut journal = vec!["mac-cohort v1 c plan revision=a generation=1 routes=d cohorts=w1".to_owned()];
        journal.push("mac-cohort v1 c arm node=w1 phase=drain op=o".to_owned());
        let settle = replayed(&journal).settle.unwrap();
        journal.push(settle.encode());
        let standing = replayed(&journal);
        assert_eq!(standing.settle, None, "quarantined once");
        let quarantine = standing.quarantine.unwrap();
        assert_eq!((quarantine.line, quarantine.defect), (2, OldJournalDefect::UnknownPhase));
        // Typed records after old lines never settled: which came first is unknown.
        let mut interleaved = old_journal();
        interleaved.push(plan().encode());
        let Some(Record::JournalQuarantined { line, defect, detail, .. }) = replayed(&interleaved).settle else {
            panic!()
        };
        assert_eq!((line, defect), (1, OldJournalDefect::TypedRecordsInterleaved));
        assert_eq!(detail, "line 1: a typed rollout record at line 8 follows old lines never migrated");
        // An old rollout whose id a typed rollout already has.
        let mut taken = vec![plan().encode()];
        taken.push("mac-cohort v1 r1 plan revision=a generation=1 routes=d cohorts=w1".to_owned());
        let Some(Record::JournalQuarantined { defect, .. }) = replayed(&taken).settle else { panic!() };
        assert_eq!(defect, OldJournalDefect::RolloutIdTaken);
    }

    #[test]
    fn a_settlement_that_names_other_old_lines_is_corrupt() {
        let mut journal = old_journal();
        let settle = replayed(&journal).settle.unwrap().encode();
        journal[2] = journal[2].replace("c7-w1-hold", "c7-w1-hold-edited");
        journal.push(settle);
        assert!(matches!(replay(journal.iter().map(String::as_str)), Err(JournalError::Corrupt(_))));
    }

    proptest::proptest! {
        #[test]
        fn old_lines_never_panic_the_replay(lines in proptest::collection::vec("mac-cohort [ -~]{0,80}", 0..6)) {
            let _ = replay(lines.iter().map(String::as_str));
        }

        #[test]
        fn any_old_journal_settles_once(lines in proptest::collection::vec(
            proptest::sample::select(vec![
                "mac-cohort v1 c plan revision=a generation=1 routes=d cohorts=w1,w2/w3",
                "mac-cohort v1 c arm node=w1 phase=hold op=o1",
                "mac-cohort v1 c done node=w1 phase=hold op=o1",
                "mac-cohort v1 c arm node=w3 phase=stop op=o2",
                "mac-cohort v1 c cohort index=0 verdict=successor",
                "mac-cohort v1 c final outcome=partial",
                "mac-cohort v1 c arm node=w9 phase=hold op=o3",
                "sensor.silent node-03",
            ]),
            1..8,
        )) {
            let mut journal: Vec<String> = lines.iter().map(|line| (*line).to_owned()).collect();
            let first = replay(journal.iter().map(String::as_str)).unwrap();
            if let Some(settle) = first.settle {
                journal.push(settle.encode());
                let second = replay(journal.iter().map(String::as_str)).unwrap();
                proptest::prop_assert_eq!(second.settle, None);
            }
        }
    }

    #[test]
    fn a_records_kind_is_the_tag_its_line_carries() {
        let records = [plan(), intent("w1", NodeStep::Hold), done("w1", NodeStep::Hold)];
        for record in records {
            let line = record.encode();
            assert!(line.starts_with(&format!("{PREFIX}{{\"record\":\"{}\",", record.kind())), "{line}");
        }
        assert_eq!(done("w1", NodeStep::Hold).operation_id(), Some("r1/w1/hold"));
        assert_eq!(plan().route_digest(), Some("sha256:routes"));
    }

    #[test]
    fn records_are_one_line_of_tagged_json() {
        let line = intent("w1", NodeStep::WriteIdentity).encode();
        assert_eq!(
            line,
            r#"rollout {"record":"intent","rollout":"r1","route_digest":"sha256:routes","node":"w1","step":"write_identity","operation_id":"r1/w1/write_identity"}"#
        );
        assert_eq!(Record::decode(&line).unwrap().unwrap(), intent("w1", NodeStep::WriteIdentity));
    }
}
