//! The wire: the engine's real adapters (`engine::http`) carried over real protocols. DNS over UDP ([`udp`]).

pub mod udp;
