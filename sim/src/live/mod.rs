//! The fakes and the engine on real sockets and the wall clock: `fleetsim serve` and `fleetsim drive`.

pub mod drive;
pub mod listen;
pub mod private;
pub mod serve;
