//! The wire: the engine's real adapters (`engine::http`) carried over real protocols. HTTP on hyper ([`http`]),
//! over real TCP for `fleetsim drive` and over turmoil's simulated TCP for the wire transport; DNS over UDP ([`udp`]).

pub mod http;
pub mod udp;
