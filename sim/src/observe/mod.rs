//! What a run shows: the trace (typed events, their JSON lines and digest), the sinks the trace fans out to (the oracles and the report's collectors) and the virtual-time log format.

pub mod collect;
pub mod landing;
pub mod logging;
pub mod observers;
pub mod oracles;
pub mod trace;
