//! Deterministic models of the services the lifecycle engine drives. Each is a plain synchronous state machine
//! (time passed in, events returned) plus its request handler; the simulator puts them on hosts and a network.
//! `maas` holds the MAAS site: region, BMC, DHCP, DNS, secrets store and machines.
//!
//! Architecture Invariant: this crate does not depend on `engine`. A fake that borrowed the engine's types could not
//! catch the engine's misunderstanding of the service; the simulator translates between the two.

pub mod agent;
pub mod artifacts;
pub mod cloud;
pub mod cohort_journal;
pub mod http;
pub mod hub;
pub mod inventory;
pub mod maas;
pub mod ssh;
pub mod worker;
