//! Runs and what is made of them: one run on a transport, campaigns, the conformance suite, shrinking, shards, experiments and the release gate.

pub mod campaign;
pub mod conformance;
pub mod experiment;
pub mod gate;
pub mod runner;
pub mod shard;
pub mod shrink;
