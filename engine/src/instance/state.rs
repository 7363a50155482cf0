//! The NodeInstance state machine of the provisioning runbook (`seeds/004_c1eb714c76320200.txt`, "Lifecycle
//! diagram"): exactly its nine states and the events that move an instance between them, as one table.
//!
//! There is no `draining` state (draining is a pool state, [`super::pool::PoolState::Draining`]) and no `failed`
//! state (the terminal failure is `error`). `terminate` fires from every non-terminal state, the shape the runbook
//! gives after audit finding F4-02; nothing leaves `terminated`. An event the table does not allow is a typed
//! [`IllegalTransition`], never a panic.

use serde::{Deserialize, Serialize};

/// The nine states of a NodeInstance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceState {
    /// The row exists; the provision task has not reached the provider.
    Pending,
    /// The provider is creating the VM, and the agent's boot window (enrol, module pull, mount) runs inside it.
    Provisioning,
    /// A stopped instance is being started.
    Starting,
    /// The first `phase=ready` heartbeat after a boot, a start or a reboot arrived.
    Running,
    /// A stop (or a drain's stop half) was dispatched to the provider.
    Stopping,
    /// Stopped: the row and the disk are kept; `start` brings it back.
    Stopped,
    /// A reboot was dispatched; the next `phase=ready` heartbeat makes it running again.
    Rebooting,
    /// Destroyed at the provider (or marked so). Terminal: no event leaves it.
    Terminated,
    /// The terminal failure: a provider or boot failure drove `mark_errored`. Only `terminate` leaves it.
    Error,
}

impl InstanceState {
    pub const ALL: [InstanceState; 9] = [
        InstanceState::Pending,
        InstanceState::Provisioning,
        InstanceState::Starting,
        InstanceState::Running,
        InstanceState::Stopping,
        InstanceState::Stopped,
        InstanceState::Rebooting,
        InstanceState::Terminated,
        InstanceState::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InstanceState::Pending => "pending",
            InstanceState::Provisioning => "provisioning",
            InstanceState::Starting => "starting",
            InstanceState::Running => "running",
            InstanceState::Stopping => "stopping",
            InstanceState::Stopped => "stopped",
            InstanceState::Rebooting => "rebooting",
            InstanceState::Terminated => "terminated",
            InstanceState::Error => "error",
        }
    }

    /// Where an instance rests: nothing is in flight at the provider. The eventually-oracle's bound is about
    /// reaching one of these.
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            InstanceState::Running | InstanceState::Stopped | InstanceState::Terminated | InstanceState::Error
        )
    }
}

impl std::fmt::Display for InstanceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The events of the instance state machine.
///
/// The runbook names mark_provisioning, mark_running, mark_errored, start, stop, reboot and terminate; `mark_stopped`
/// is the completion of a stop (the provider reports the VM down), which the runbook's "running → stopping →
/// stopped" walk needs and does not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceEvent {
    MarkProvisioning,
    /// The first `phase=ready` heartbeat after a boot, start or reboot.
    MarkRunning,
    MarkErrored,
    MarkStopped,
    Start,
    Stop,
    Reboot,
    Terminate,
}

impl InstanceEvent {
    pub const ALL: [InstanceEvent; 8] = [
        InstanceEvent::MarkProvisioning,
        InstanceEvent::MarkRunning,
        InstanceEvent::MarkErrored,
        InstanceEvent::MarkStopped,
        InstanceEvent::Start,
        InstanceEvent::Stop,
        InstanceEvent::Reboot,
        InstanceEvent::Terminate,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InstanceEvent::MarkProvisioning => "mark_provisioning",
            InstanceEvent::MarkRunning => "mark_running",
            InstanceEvent::MarkErrored => "mark_errored",
            InstanceEvent::MarkStopped => "mark_stopped",
            InstanceEvent::Start => "start",
            InstanceEvent::Stop => "stop",
            InstanceEvent::Reboot => "reboot",
            InstanceEvent::Terminate => "terminate",
        }
    }
}

/// An event the table does not allow from the instance's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{} is not allowed from {}", event.as_str(), from.as_str())]
pub struct IllegalTransition {
    pub from: InstanceState,
    pub event: InstanceEvent,
}

/// The transition table: where `event` takes an instance in state `from`.
pub fn transition(from: InstanceState, event: InstanceEvent) -> Result<InstanceState, IllegalTransition> {
    use InstanceEvent as E;
    use InstanceState as S;
    let to = match (from, event) {
        (S::Terminated, _) => None,
        (_, E::Terminate) => Some(S::Terminated),
        (S::Pending, E::MarkProvisioning) => Some(S::Provisioning),
        (S::Provisioning | S::Starting | S::Rebooting, E::MarkRunning) => Some(S::Running),
        (S::Pending | S::Provisioning | S::Starting | S::Running | S::Stopping | S::Rebooting, E::MarkErrored) => {
            Some(S::Error)
        }
        (S::Running | S::Starting | S::Rebooting, E::Stop) => Some(S::Stopping),
        (S::Stopping, E::MarkStopped) => Some(S::Stopped),
        (S::Stopped, E::Start) => Some(S::Starting),
        (S::Running, E::Reboot) => Some(S::Rebooting),
        _ => None,
    };
    to.ok_or(IllegalTransition { from, event })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use InstanceEvent as E;
    use InstanceState as S;

    /// The table of the runbook, written out row by row as a second, independent statement of it.
    const ALLOWED: &[(InstanceState, InstanceEvent, InstanceState)] = &[
        (S::Pending, E::MarkProvisioning, S::Provisioning),
        (S::Pending, E::MarkErrored, S::Error),
        (S::Pending, E::Terminate, S::Terminated),
        (S::Provisioning, E::MarkRunning, S::Running),
        (S::Provisioning, E::MarkErrored, S::Error),
        (S::Provisioning, E::Terminate, S::Terminated),
        (S::Starting, E::MarkRunning, S::Running),
        (S::Starting, E::MarkErrored, S::Error),
        (S::Starting, E::Stop, S::Stopping),
        (S::Starting, E::Terminate, S::Terminated),
        (S::Running, E::Stop, S::Stopping),
        (S::Running, E::Reboot, S::Rebooting),
        (S::Running, E::MarkErrored, S::Error),
        (S::Running, E::Terminate, S::Terminated),
        (S::Stopping, E::MarkStopped, S::Stopped),
        (S::Stopping, E::MarkErrored, S::Error),
        (S::Stopping, E::Terminate, S::Terminated),
        (S::Stopped, E::Start, S::Starting),
        (S::Stopped, E::Terminate, S::Terminated),
        (S::Rebooting, E::MarkRunning, S::Running),
        (S::Rebooting, E::MarkErrored, S::Error),
        (S::Rebooting, E::Stop, S::Stopping),
        (S::Rebooting, E::Terminate, S::Terminated),
        (S::Error, E::Terminate, S::Terminated),
    ];

    #[test]
    fn the_table_is_exactly_the_runbook_s() {
        for from in InstanceState::ALL {
            for event in InstanceEvent::ALL {
                let expected = ALLOWED.iter().find(|(f, e, _)| *f == from && *e == event).map(|(_, _, to)| *to);
                assert_eq!(transition(from, event).ok(), expected, "{from} --{}-->", event.as_str());
            }
        }
    }

    #[test]
    fn terminate_fires_from_every_non_terminal_state_and_nothing_leaves_terminated() {
        for from in InstanceState::ALL {
            let terminated = transition(from, E::Terminate);
            if from == S::Terminated {
                assert_eq!(terminated, Err(IllegalTransition { from, event: E::Terminate }));
            } else {
                assert_eq!(terminated, Ok(S::Terminated));
            }
        }
        assert!(InstanceEvent::ALL.iter().all(|event| transition(S::Terminated, *event).is_err()));
    }

    #[test]
    fn an_instance_rests_in_running_stopped_terminated_or_error_and_nowhere_else() {
        let settled: Vec<InstanceState> = InstanceState::ALL.into_iter().filter(|s| s.is_settled()).collect();
        assert_eq!(settled, [S::Running, S::Stopped, S::Terminated, S::Error]);
    }

    #[test]
    fn an_illegal_event_says_what_and_from_where() {
        let error = transition(S::Stopped, E::Reboot).unwrap_err();
        assert_eq!(error.to_string(), "reboot is not allowed from stopped");
    }

    fn event() -> impl Strategy<Value = InstanceEvent> {
        proptest::sample::select(InstanceEvent::ALL.to_vec())
    }

    proptest! {
        /// A random walk: every accepted event is a row of the table, every refused one is not, a refusal leaves
        /// the state alone, and once terminated the instance stays terminated.
        #[test]
        fn random_event_sequences_follow_the_table(events in proptest::collection::vec(event(), 0..64)) {
            let mut state = S::Pending;
            let mut terminated = false;
            for event in events {
                let row = ALLOWED.iter().find(|(f, e, _)| *f == state && *e == event);
                match transition(state, event) {
                    Ok(to) => {
                        prop_assert_eq!(row.map(|(_, _, to)| *to), Some(to));
                        state = to;
                    }
                    Err(error) => {
                        prop_assert!(row.is_none());
                        prop_assert_eq!(error, IllegalTransition { from: state, event });
                    }
                }
                prop_assert!(!terminated || state == S::Terminated);
                terminated |= state == S::Terminated;
            }
        }
    }
}
