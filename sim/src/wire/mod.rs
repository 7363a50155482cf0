//! The wire: the engine's real adapters speaking real protocols, over hyper and tokio sockets (`fleetsim drive`,
//! `fleetsim serve`) or over turmoil's simulated TCP and UDP (the wire transport, `fleetsim run --transport wire`).

pub mod turmoil;
pub mod world;
