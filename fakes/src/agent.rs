//! The node agent: the service on every node that heartbeats the hub every 30 s while it runs
//! (`seeds/004_c1eb714c76320200.txt`, Phase 4 — Run).
//!
//! The model decides; the simulator's node host task sleeps and sends. The service's running/stopped state belongs to
//! the node's worker model (`crate::worker`), which survives a node crash: a stopped service stays stopped after the
//! node restarts.

use serde::{Deserialize, Serialize};

/// The heartbeat period of the node agent.
pub const HEARTBEAT_INTERVAL_MS: u64 = 30_000;
/// How long the agent waits for the hub before it counts a heartbeat as failed.
pub const HEARTBEAT_TIMEOUT_MS: u64 = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceState {
    Running,
    /// Stopped by an operator or a deployment (quiescence): no heartbeats until started again.
    Stopped,
}

/// What the agent wants to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentAction {
    SendHeartbeat,
    Idle,
}

/// Outcome of one heartbeat attempt, as the agent sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    Accepted,
    /// The hub answered that it does not know this agent (tombstoned): the agent keeps trying, but it cannot
    /// re-enrol on its own — that needs a fresh bootstrap token (a later issue).
    Refused,
    /// Timeout, refused connection or reset: the hub did not answer.
    Unreachable,
}

/// The state of one node agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub id: String,
    pub service: ServiceState,
    pub consecutive_failures: u64,
    pub sent: u64,
    pub accepted: u64,
}

impl Agent {
    pub fn new(id: impl Into<String>) -> Agent {
        Agent { id: id.into(), service: ServiceState::Running, consecutive_failures: 0, sent: 0, accepted: 0 }
    }

    /// Called on every heartbeat tick.
    pub fn poll_tick(&mut self) -> AgentAction {
        match self.service {
            ServiceState::Running => {
                self.sent += 1;
                AgentAction::SendHeartbeat
            }
            ServiceState::Stopped => AgentAction::Idle,
        }
    }

    pub fn handle_heartbeat_outcome(&mut self, outcome: HeartbeatOutcome) {
        match outcome {
            HeartbeatOutcome::Accepted => {
                self.accepted += 1;
                self.consecutive_failures = 0;
            }
            HeartbeatOutcome::Refused | HeartbeatOutcome::Unreachable => self.consecutive_failures += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_agent_sends_nothing_and_failures_reset_on_success() {
        let mut agent = Agent::new("node-01");
        assert_eq!(agent.poll_tick(), AgentAction::SendHeartbeat);
        agent.handle_heartbeat_outcome(HeartbeatOutcome::Unreachable);
        agent.handle_heartbeat_outcome(HeartbeatOutcome::Refused);
        assert_eq!(agent.consecutive_failures, 2);
        agent.handle_heartbeat_outcome(HeartbeatOutcome::Accepted);
        assert_eq!(agent.consecutive_failures, 0);
        agent.service = ServiceState::Stopped;
        assert_eq!(agent.poll_tick(), AgentAction::Idle);
        assert_eq!(agent.sent, 1);
    }
}
