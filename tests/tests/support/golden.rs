//! The golden trace digests (`tests/golden/digests.tsv`): what every scenario and conformance case must still digest
//! to. `#[path = "support/golden.rs"] mod golden;`. Rewritten only on purpose, by `scripts/golden-digests.sh`, with
//! the reason in the commit message.

use std::collections::BTreeMap;
use std::path::Path;

/// `file → (seed, trace digest)`, keyed by the path relative to the repository root.
pub fn digests() -> BTreeMap<String, (u64, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/digests.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    text.lines()
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), 3, "{}: not `file<TAB>seed<TAB>digest`: {line:?}", path.display());
            let seed = fields[1].parse().unwrap_or_else(|_| panic!("{}: bad seed in {line:?}", path.display()));
            (fields[0].to_owned(), (seed, fields[2].to_owned()))
        })
        .collect()
}

/// Fails unless `file` (relative to the repository root), run with `seed` (its own when `None` is given), digests to
/// its golden digest.
pub fn assert_golden(file: &str, seed: Option<u64>, trace_digest: &str) {
    let golden = digests();
    let Some((golden_seed, golden_digest)) = golden.get(file) else {
        panic!("{file}: not in tests/golden/digests.tsv (run scripts/golden-digests.sh and say why in the commit)")
    };
    assert_eq!(
        (seed.unwrap_or(*golden_seed), trace_digest),
        (*golden_seed, golden_digest.as_str()),
        "{file}: the trace digest moved from tests/golden/digests.tsv; a behaviour-preserving change must not move \
         it, a behaviour change reruns scripts/golden-digests.sh and says why in its commit"
    );
}
