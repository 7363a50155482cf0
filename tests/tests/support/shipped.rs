//! The campaigns the project ships, loaded by file name from `campaigns/`: `#[path = "support/shipped.rs"] mod
//! shipped;`.

use std::path::Path;

use sim::model::campaign::{Campaign, load_campaign};

/// `campaigns/<name>`, parsed; panics (the test's failure) when it does not load.
pub fn campaign(name: &str) -> Campaign {
    load_campaign(&Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("campaigns").join(name)).unwrap()
}
