//! What a run is: the scenario and campaign specs, the fault-step catalogue, the seed tree. The bottom floor: it names no other floor.

pub mod campaign;
pub mod digest;
pub mod exit;
pub mod faults;
pub mod ids;
pub mod link;
pub mod oracles;
pub mod pairs;
pub mod seed;
pub mod spec;
pub mod work;
