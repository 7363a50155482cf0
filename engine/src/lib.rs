//! The fleet lifecycle engine: the production code that drives MAAS, BMCs, nodes and the agent hub.
//!
//! Architecture Invariant: the engine depends on none of `sim`, `fakes`, `reports`, turmoil, axum or wiremock. It talks
//! to the world only through the ports in [`ports`] (traits it owns, one per external system, each with its own error
//! enum), and it reads time only through [`ports::Clock`]. Decisions are synchronous state machines (`handle_*` in,
//! signals out); the async drivers only await ports and feed results back.

pub mod adapters;
pub mod controller;
pub mod decommission;
pub mod instance;
pub mod matrix;
pub mod onboarding;
pub mod operator;
pub mod ports;
pub mod recovery;
pub mod rollout;
pub mod rotation;
pub mod secret;
pub mod sensor;
pub mod workflow;
