//! The deterministic simulator: virtual time, the simulated network and hosts, the world the real engine runs in,
//! the fault vocabulary, the oracles, the runner and the `fleetsim` command line.
//!
//! Architecture Invariant: a run is a pure function of its resolved [`spec::RunSpec`] and its seed. Nothing in this
//! crate reads the wall clock (outside the CLI's campaign timer), iterates a hash container, or draws from an
//! unseeded generator; `clippy.toml` makes each of those a lint error.

pub mod campaign;
pub mod cli;
pub mod conformance;
pub mod decommission;
pub mod disk;
pub mod drive;
pub mod experiment;
pub mod faults;
pub mod gate;
pub mod journal;
pub mod logging;
pub mod net;
pub mod operator;
pub mod oracles;
pub mod runner;
pub mod seed;
pub mod serve;
pub mod shard;
pub mod shrink;
pub mod site;
pub mod spec;
pub mod trace;
pub mod wire;
pub mod world;
