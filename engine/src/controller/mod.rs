//! The controller: what a control plane does around the drivers — take requests, admit work under a concurrency
//! limit, run again what stopped `failed_retryable`, adopt the journal at boot and resume what was in flight, run the
//! periodic loops (the instance-status sensor, the instance lifecycle's passes, replenisher and cloud sync), tell when
//! the onboarding rests, and perform the operators' recovery actions and runbook verbs.
//!
//! [`machine`] decides, with no I/O; [`service`] is the one async loop that drives it over the ports a [`host`]
//! gives it, and spawns the drivers. The simulator runs this service on its controller host, a production process
//! on its real adapters: the same code either way.

pub mod config;
pub mod host;
pub mod machine;
pub mod metal;
pub mod request;
pub mod service;
pub mod wake;
