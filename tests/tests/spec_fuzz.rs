//! The scenario, campaign and gate-policy parsers return an error, never a panic, on arbitrary bytes and on arbitrary mutations of
//! the real files.

use std::path::Path;

use proptest::prelude::*;

fn shipped_files() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut texts = Vec::new();
    for dir in ["scenarios", "campaigns"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            texts.push(std::fs::read_to_string(entry.unwrap().path()).unwrap());
        }
    }
    texts
}

fn parse_both(text: &str) {
    let _ = sim::model::spec::parse_scenario("fuzz.toml", text);
    let _ = sim::model::campaign::parse_campaign("fuzz.toml", text);
    let _ = sim::run::gate::parse_policy("fuzz.toml", text);
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete { at: usize, len: usize },
    Insert { at: usize, text: String },
    Replace { at: usize, byte: u8 },
    SwapLines { a: usize, b: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (
            any::<usize>(),
            prop_oneof![
                Just("=".to_owned()),
                Just("\"".to_owned()),
                Just("[[step]]\n".to_owned()),
                Just("-1".to_owned()),
                Just("99999999999999999999".to_owned()),
                Just("kind = \"crash\"\n".to_owned()),
                Just("\n".to_owned()),
                Just("{".to_owned()),
                Just("target = \"node-00\"\n".to_owned()),
                "[a-z_ =0-9\\[\\]\"{}.,\n]{0,12}",
            ]
        )
            .prop_map(|(at, text)| Mutation::Insert { at, text }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Replace { at, byte }),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
    ]
}

fn apply(text: &str, mutations: &[Mutation]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for mutation in mutations {
        let len = bytes.len().max(1);
        match mutation {
            Mutation::Delete { at, len: n } => {
                let at = at % len;
                let end = (at + n).min(bytes.len());
                if at < end {
                    bytes.drain(at..end);
                }
            }
            Mutation::Insert { at, text } => {
                let at = at % (bytes.len() + 1);
                bytes.splice(at..at, text.bytes());
            }
            Mutation::Replace { at, byte } => {
                if !bytes.is_empty() {
                    let at = at % bytes.len();
                    bytes[at] = *byte;
                }
            }
            Mutation::SwapLines { a, b } => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let mut lines: Vec<&str> = text.lines().collect();
                if !lines.is_empty() {
                    let (a, b) = (a % lines.len(), b % lines.len());
                    lines.swap(a, b);
                }
                bytes = lines.join("\n").into_bytes();
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        parse_both(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn mutated_shipped_files_never_panic(file in 0usize..64, mutations in proptest::collection::vec(mutation(), 1..6)) {
        let files = shipped_files();
        let text = apply(&files[file % files.len()], &mutations);
        parse_both(&text);
    }
}
