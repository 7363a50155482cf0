//! The behaviour of one directed link of the simulated network, as a scenario's `[network]` sets it and a
//! `link_loss` or `link_latency` step changes it.

use serde::{Deserialize, Serialize};

/// Behaviour of one directed link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkConfig {
    pub latency_min_ms: u64,
    pub latency_max_ms: u64,
    pub request_loss_per_mille: u32,
    pub response_loss_per_mille: u32,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig { latency_min_ms: 1, latency_max_ms: 20, request_loss_per_mille: 0, response_loss_per_mille: 0 }
    }
}
