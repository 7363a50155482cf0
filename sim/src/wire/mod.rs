//! The wire: the engine's real adapters (`engine::adapters::http`) carried over real protocols. HTTP on hyper
//! ([`http`]), over real TCP for `fleetsim drive` and over turmoil's simulated TCP for the wire transport; DNS over
//! UDP ([`udp`]).
//! The wire transport of `fleetsim run --transport wire`: the runner ([`world`]), the site's services on their
//! turmoil host ([`site`]) and the turmoil glue ([`turmoil`]).

pub mod http;
pub mod site;
pub mod turmoil;
pub mod udp;
pub mod world;
