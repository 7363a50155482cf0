//! The production adapters: implementations of the ports against real services, kept out of the core so that the
//! decisions and the drivers do no I/O of their own. [`http`] holds the clients of MAAS, the site secrets store, the
//! agent hub, the GPUaaS inventory and the DNS resolver, each over a transport it is handed; [`sqlite`] is the
//! controller's default journal.
//!
//! Architecture Invariant: an adapter imports the ports (and [`crate::secret`]) and nothing else of the engine; no
//! decision, driver or workflow imports an adapter.

pub mod http;
pub mod sqlite;
