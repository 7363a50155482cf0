//! The engine as a service: what a production process wraps around `engine::controller` — the transports its
//! adapters speak over (HTTP with TLS, DNS over UDP), its configuration, its operator API, its metrics and its
//! crash safety. It depends on the engine and on no part of the simulator: the simulator runs the same controller
//! on its own world, and `fleetsim drive` runs it on these transports.
//!
//! Architecture Invariant: this crate names neither `sim`, `fakes` nor `reports` (`tests/tests/architecture.rs`).
