//! The onboarding workflow of the recovery matrix (`seeds/000_85d03426b210b2a0.txt`, section 4): a new machine taken
//! from the operator's inventory through MAAS to an enrolled node agent.
//!
//! - [`stages`]: the order a run walks the stages, where a retry re-enters, the bounds of the waits.
//! - [`record`]: the workflow's journal records and what they say about its history.
//! - [`judge`]: each stage's judgement of what the ports answered (done, adopted, or failed with which class and
//!   evidence), [`stall`] the stall classifier ("slow is not silent", `seeds/001_5e13b5e5e5d7ab8b.txt`) and
//!   [`legacy`] the shell-era behaviour of that incident, kept for replay. All three are pure.
//! - [`rules`]: the driver's decisions behind one seam ([`rules::Matrix`] in production), so a test can put a
//!   historical defect in place of one.
//! - [`driver`]: the stages run against the ports, applying what the pure code says.
//!
//! The decision after a failed stage is the workflow core's ([`crate::workflow::decide`]), shared with
//! decommission.

pub mod driver;
pub mod judge;
pub mod legacy;
pub mod record;
pub mod rules;
pub mod stages;
pub mod stall;
