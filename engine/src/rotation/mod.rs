//! Agent-credential rotation, a per-node state machine of its own (RCCA replacement plan: "Delete credential rotation
//! from software deployment. Deployment validates the current credential. Rotation becomes a separate per-node state
//! machine with old/new overlap until the successor heartbeat is proved").
//!
//! A rotation walks issue → install → prove → revoke: the hub issues a successor beside the predecessor (both valid:
//! the overlap), the successor is written atomically into the node's credential file (which the agent reads on every
//! heartbeat), a heartbeat authenticated by the successor is seen accepted at the hub, and only then is the predecessor
//! revoked. Every step is journaled as an intent and a completion with a stable operation id, so a controller that
//! dies anywhere is adopted by the next one without minting a second successor, installing twice or revoking before
//! the proof. [`machine`] decides, [`journal`] replays, [`driver`] awaits the ports.
//!
//! The rollout never touches the credential file: deployment validates the current credential (its prove step needs
//! a heartbeat the hub accepted), it never rotates one.

pub mod driver;
pub mod journal;
pub mod machine;

/// The agent's credential file on a node: one line, the bearer token the agent presents on every heartbeat. Written
/// only by a rotation's install step (mode 0600, atomically), never by a deployment.
pub const CREDENTIAL_FILE: &str = "~/.mac/agent-credential";

/// The mode of the credential file: owner read/write only.
pub const CREDENTIAL_MODE: u32 = 0o600;
