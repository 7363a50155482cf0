//! The deterministic simulator: virtual time, the simulated network and hosts, the world the real engine runs in,
//! the fault vocabulary, the oracles, the runner and the `fleetsim` command line.
//!
//! Its folders are floors, bottom first; each names only the floors below it (`tests/tests/floors.rs` checks it):
//! - [`model`]: what a run is — scenario and campaign specs, the fault-step catalogue, seeds, ids, exit codes;
//! - [`observe`]: what a run shows — trace events, the sinks they fan out to (digest, oracles, collectors);
//! - [`world`]: the simulated world of one run — hosts, network, disk, the fakes and the engine's adapters;
//! - [`wire`]: the turmoil transport, plugged into the world through its `Transport` trait;
//! - [`run`]: runs, campaigns, conformance, shrinking, shards, experiments and the gate;
//! - [`live`]: `serve` and `drive`, the fakes and the engine on real sockets (the only wall-clock users);
//! - [`cli`]: the `fleetsim` command line.
//!
//! Architecture Invariant: a run is a pure function of its resolved [`model::spec::RunSpec`] and its seed. Nothing
//! below [`live`] reads the wall clock (outside the CLI's campaign timer), iterates a hash container, or draws from
//! an unseeded generator; `clippy.toml` makes each of those a lint error.

pub mod cli;
pub mod live;
pub mod model;
pub mod observe;
pub mod run;
pub mod wire;
pub mod world;
