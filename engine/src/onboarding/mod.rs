//! The onboarding workflow of the recovery matrix (`seeds/000_85d03426b210b2a0.txt`, section 4): a new machine taken
//! from the operator's inventory through MAAS to an enrolled node agent. [`stall`] tells a slow stage from a silent
//! one ("slow is not silent", `seeds/001_5e13b5e5e5d7ab8b.txt`), [`legacy`] is the shell-era behaviour of that
//! incident, kept for replay, and [`driver`] runs the stages against the ports. The decision after a failed stage is
//! the workflow core's ([`crate::workflow::decide`]), shared with decommission.

pub mod driver;
pub mod legacy;
pub mod record;
pub mod stall;
