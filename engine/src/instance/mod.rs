//! The Node and NodeInstance lifecycle of the provisioning runbook (`seeds/004_c1eb714c76320200.txt`): the
//! synchronous decisions — the nine-state machine ([`state`]), the rows as a fold over journal records
//! ([`inventory`]), idempotent provisioning and the boot ([`provision`]), the one choke point with its ops hold
//! ([`control`]), pools ([`pool`]), cordon, uncordon and drain ([`cordon`]), approval gating ([`approval`]),
//! stuck-state signals ([`stuck`]) and the cloud sync ([`sync`]).
//!
//! Every decision is a `&self` method on [`inventory::Inventory`] returning the records it would write or a typed
//! refusal that writes nothing; the caller journals the records (subject [`inventory::SUBJECT`]) and applies them,
//! so a restarted controller that replays the journal reads exactly the rows the dead one decided.

pub mod approval;
pub mod control;
pub mod cordon;
pub mod driver;
pub mod inventory;
pub mod metal;
pub mod operator;
pub mod pool;
pub mod provision;
pub mod state;
pub mod stuck;
pub mod sync;
pub mod terms;

#[cfg(test)]
mod tests;
