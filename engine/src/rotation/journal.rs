//! The rotation's durable journal records and their replay. Records are one line each, `rotation <json>`, in the
//! controller's [`crate::ports::Journal`] beside other subsystems' records; their subject is the rotation id. A new
//! controller replays a rotation's records and adopts it: completed steps are never run again, and a step with an
//! intent and no completion is in doubt (looked for before it is redone). Records never carry a credential: the
//! issue's completion names the successor's generation, not its token.

use serde::{Deserialize, Serialize};

use crate::ports::JournalError;
use crate::rotation::machine::{RotationEnd, RotationFailure, RotationMachine, RotationStep};

const PREFIX: &str = "rotation ";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case", deny_unknown_fields)]
pub enum Record {
    /// The rotation begins: the node and the host key the controller holds authority for (an adopting controller
    /// keeps exactly that authority).
    Planned { rotation: String, node: String, host_key: String },
    /// Armed before a step's remote operation runs.
    Intent { rotation: String, node: String, step: RotationStep, operation_id: String },
    /// Recorded after the step's operation was acknowledged (or found done). The issue's names the successor's
    /// generation.
    Completed {
        rotation: String,
        node: String,
        step: RotationStep,
        operation_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        generation: Option<u64>,
    },
    /// The rotation stopped at `step`, the overlap kept (terminal).
    Stopped { rotation: String, node: String, step: RotationStep, failure: RotationFailure },
    /// The rotation aborted at `step`: its successor revoked, never its predecessor (terminal).
    Aborted { rotation: String, node: String, step: RotationStep, failure: RotationFailure },
    /// The successor was proved and the predecessor revoked (terminal).
    Rotated { rotation: String, node: String, generation: u64 },
}

impl Record {
    pub fn rotation(&self) -> &str {
        match self {
            Record::Planned { rotation, .. }
            | Record::Intent { rotation, .. }
            | Record::Completed { rotation, .. }
            | Record::Stopped { rotation, .. }
            | Record::Aborted { rotation, .. }
            | Record::Rotated { rotation, .. } => rotation,
        }
    }

    /// The record's tag (`planned`, `intent`, …), as its line spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            Record::Planned { .. } => "planned",
            Record::Intent { .. } => "intent",
            Record::Completed { .. } => "completed",
            Record::Stopped { .. } => "stopped",
            Record::Aborted { .. } => "aborted",
            Record::Rotated { .. } => "rotated",
        }
    }

    /// The operation id an intent or a completion names.
    pub fn operation_id(&self) -> Option<&str> {
        match self {
            Record::Intent { operation_id, .. } | Record::Completed { operation_id, .. } => Some(operation_id),
            Record::Planned { .. } | Record::Stopped { .. } | Record::Aborted { .. } | Record::Rotated { .. } => None,
        }
    }

    /// The journal line.
    pub fn encode(&self) -> String {
        format!("{PREFIX}{}", serde_json::to_string(self).expect("journal records serialise"))
    }

    /// `None` for another subsystem's line; an error for a rotation line that does not decode.
    pub fn decode(line: &str) -> Option<Result<Record, JournalError>> {
        let json = line.strip_prefix(PREFIX)?;
        Some(serde_json::from_str(json).map_err(|error| JournalError::Corrupt(format!("rotation record: {error}"))))
    }
}

/// One rotation rebuilt from its journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    pub node: String,
    pub host_key: String,
    pub machine: RotationMachine,
    /// The step whose intent was armed and whose completion was never recorded: the controller died between them.
    pub in_doubt: Option<RotationStep>,
    /// A terminal record is journaled (the machine may have ended, by its last completion, without one).
    pub terminal: bool,
}

/// Replays journal lines and returns rotation `rotation` as they leave it, if they name it. Other rotations' and
/// other subsystems' lines are skipped; a record of `rotation` before its plan is corrupt.
pub fn replay<'a>(lines: impl IntoIterator<Item = &'a str>, rotation: &str) -> Result<Option<Adopted>, JournalError> {
    let mut adopted: Option<Adopted> = None;
    for line in lines {
        let Some(record) = Record::decode(line) else { continue };
        let record = record?;
        if record.rotation() != rotation {
            continue;
        }
        if let Record::Planned { node, host_key, .. } = &record {
            adopted.get_or_insert_with(|| Adopted {
                node: node.clone(),
                host_key: host_key.clone(),
                machine: RotationMachine::new(),
                in_doubt: None,
                terminal: false,
            });
            continue;
        }
        let Some(current) = adopted.as_mut() else {
            return Err(JournalError::Corrupt(format!("record for rotation {rotation} before its plan")));
        };
        match record {
            Record::Planned { .. } => unreachable!("handled above"),
            Record::Intent { step, .. } => current.in_doubt = Some(step),
            Record::Completed { step, generation, .. } => {
                if current.in_doubt == Some(step) {
                    current.in_doubt = None;
                }
                current.machine.handle_done(step, generation);
            }
            Record::Stopped { step, failure, .. } => {
                current.in_doubt = None;
                current.terminal = true;
                current.machine.handle_ended(RotationEnd::Stopped { step, failure });
            }
            Record::Aborted { step, failure, .. } => {
                current.in_doubt = None;
                current.terminal = true;
                current.machine.handle_ended(RotationEnd::Aborted { step, failure });
            }
            Record::Rotated { generation, .. } => {
                current.in_doubt = None;
                current.terminal = true;
                current.machine.handle_ended(RotationEnd::Rotated { generation });
            }
        }
    }
    Ok(adopted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rotation::machine::operation_id;

    const ROTATION: &str = "rotation-node-03-1";

    fn planned() -> Record {
        Record::Planned { rotation: ROTATION.into(), node: "node-03".into(), host_key: "hostkey-node-03-1".into() }
    }

    fn intent(step: RotationStep) -> Record {
        Record::Intent {
            rotation: ROTATION.into(),
            node: "node-03".into(),
            step,
            operation_id: operation_id(ROTATION, step),
        }
    }

    fn done(step: RotationStep) -> Record {
        Record::Completed {
            rotation: ROTATION.into(),
            node: "node-03".into(),
            step,
            operation_id: operation_id(ROTATION, step),
            generation: (step == RotationStep::Issue).then_some(2),
        }
    }

    fn lines(records: &[Record]) -> Vec<String> {
        let mut lines: Vec<String> = records.iter().map(Record::encode).collect();
        // Other subsystems' and other rotations' records share the journal.
        let at = lines.len().min(1);
        lines.insert(at, r#"rollout {"record":"terminal","rollout":"r","outcome":"successor"}"#.into());
        let other =
            Record::Planned { rotation: "rotation-node-04-1".into(), node: "node-04".into(), host_key: "k".into() };
        lines.insert(at, other.encode());
        lines
    }

    fn adopt(records: &[Record]) -> Adopted {
        let lines = lines(records);
        replay(lines.iter().map(String::as_str), ROTATION).unwrap().expect("the rotation is in the journal")
    }

    #[test]
    fn a_controller_killed_after_an_intent_finds_that_step_in_doubt() {
        let adopted = adopt(&[planned(), intent(RotationStep::Issue)]);
        assert_eq!(
            (adopted.in_doubt, adopted.machine.poll_step()),
            (Some(RotationStep::Issue), Some(RotationStep::Issue))
        );
        let adopted =
            adopt(&[planned(), intent(RotationStep::Issue), done(RotationStep::Issue), intent(RotationStep::Install)]);
        assert_eq!(adopted.in_doubt, Some(RotationStep::Install));
        assert_eq!((adopted.machine.poll_step(), adopted.machine.generation), (Some(RotationStep::Install), Some(2)));
        assert_eq!(adopted.host_key, "hostkey-node-03-1", "the authority the rotation began with");
        assert!(!adopted.terminal);
    }

    #[test]
    fn completed_steps_are_never_resumed_and_a_last_completion_without_its_terminal_record_is_rotated() {
        let mut records = vec![planned()];
        for step in RotationStep::ALL {
            records.push(intent(step));
            records.push(done(step));
        }
        let adopted = adopt(&records);
        assert_eq!(adopted.machine.end(), Some(&RotationEnd::Rotated { generation: 2 }));
        assert!(!adopted.terminal, "the controller died before the rotated record");
        records.push(Record::Rotated { rotation: ROTATION.into(), node: "node-03".into(), generation: 2 });
        assert!(adopt(&records).terminal);
    }

    #[test]
    fn a_stop_or_an_abort_is_terminal() {
        let failure = RotationFailure::SuccessorNotProved { waited_ms: 120_000 };
        let stopped = Record::Stopped {
            rotation: ROTATION.into(),
            node: "node-03".into(),
            step: RotationStep::Prove,
            failure: failure.clone(),
        };
        let adopted = adopt(&[planned(), intent(RotationStep::Prove), stopped]);
        assert!(adopted.terminal && adopted.in_doubt.is_none());
        assert_eq!(adopted.machine.end(), Some(&RotationEnd::Stopped { step: RotationStep::Prove, failure }));
    }

    #[test]
    fn a_journal_without_the_rotation_adopts_nothing_and_an_orphan_record_is_corrupt() {
        let lines = lines(&[]);
        assert_eq!(replay(lines.iter().map(String::as_str), ROTATION).unwrap(), None);
        let orphan = [done(RotationStep::Issue).encode()];
        assert!(matches!(replay(orphan.iter().map(String::as_str), ROTATION), Err(JournalError::Corrupt(_))));
        let torn = ["rotation {\"record\":\"intent\"".to_owned()];
        assert!(matches!(replay(torn.iter().map(String::as_str), ROTATION), Err(JournalError::Corrupt(_))));
    }

    #[test]
    fn records_are_one_line_of_tagged_json_without_a_credential() {
        let line = done(RotationStep::Issue).encode();
        assert_eq!(
            line,
            r#"rotation {"record":"completed","rotation":"rotation-node-03-1","node":"node-03","step":"issue","operation_id":"rotation-node-03-1/issue","generation":2}"#
        );
        assert_eq!(Record::decode(&line).unwrap().unwrap(), done(RotationStep::Issue));
        assert_eq!(crate::ports::record_subject(&line).as_deref(), Some(ROTATION));
        let stopped = Record::Stopped {
            rotation: ROTATION.into(),
            node: "node-03".into(),
            step: RotationStep::Prove,
            failure: RotationFailure::SuccessorNotProved { waited_ms: 5 },
        };
        assert_eq!(
            stopped.encode(),
            r#"rotation {"record":"stopped","rotation":"rotation-node-03-1","node":"node-03","step":"prove","failure":{"failure":"successor_not_proved","waited_ms":5}}"#
        );
    }
}
