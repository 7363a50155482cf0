//! A wrapper for credentials (API keys, bearer tokens, attestation keys) that never prints its value, and the
//! registry of the credential values a live process knows, so that free text can be redacted by value.
//!
//! `Debug` and `Display` show `[redacted]`, and the type is not `Serialize`, so a secret cannot reach a log line,
//! a trace or a report by accident; [`Secret::expose`] is the one, greppable, way to read it.
//!
//! A person can still paste a credential into free text (an operator's reason, an actor id), and a credential read
//! from a file need not carry [`SECRET_MARKER`]. So a live command (`fleetsim drive`, `fleetsim serve`) calls
//! [`remember_every_secret`]: from then on every value wrapped in a [`Secret`] — loaded from a file, served, or derived
//! (a bootstrap token, a rotated credential) — is remembered, and [`redact`] replaces each remembered value, and
//! every marker-carrying word, wherever it appears in a text about to be written. A simulated run never turns it on:
//! its credentials all carry the marker, and remembering them would only cost memory.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Every secret the project mints starts with this marker, so a leak check is one substring search.
pub const SECRET_MARKER: &str = "fleetsim-secret-";

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        let secret = Secret(value.into());
        if REMEMBERING.load(Ordering::Relaxed) {
            remember(&secret.0);
        }
        secret
    }

    /// The secret's value, for the one place that must send it (an `Authorization` header, a request body).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// What a redacted credential reads as.
pub const REDACTED: &str = "[redacted]";

/// The shortest value the registry remembers: a shorter one (a word, a number) would redact ordinary text. The live
/// commands refuse a credential file shorter than this, so every credential they hold is remembered.
pub const REMEMBERED_LEN_MIN: usize = 8;

static REMEMBERING: AtomicBool = AtomicBool::new(false);
static KNOWN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

fn known() -> std::sync::MutexGuard<'static, BTreeSet<String>> {
    KNOWN.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// From now on, every value wrapped in a [`Secret`] in this process is remembered for [`redact`].
pub fn remember_every_secret() {
    REMEMBERING.store(true, Ordering::SeqCst);
}

/// Remembers `value` (and its JSON-escaped form, as a journal line would hold it) for [`redact`]; a value shorter
/// than [`REMEMBERED_LEN_MIN`] is not remembered.
pub fn remember(value: &str) {
    if value.chars().count() < REMEMBERED_LEN_MIN {
        return;
    }
    let escaped = serde_json::to_string(value).expect("a string serialises");
    let escaped = &escaped[1..escaped.len() - 1];
    let mut known = known();
    if escaped != value {
        known.insert(escaped.to_owned());
    }
    known.insert(value.to_owned());
}

/// Whether `text` holds a credential: a word carrying [`SECRET_MARKER`], or any remembered value.
pub fn carries_secret(text: &str) -> bool {
    text.contains(SECRET_MARKER) || carries_known_secret(text)
}

/// Whether `text` holds a remembered credential value (the marker aside).
pub fn carries_known_secret(text: &str) -> bool {
    known().iter().any(|value| text.contains(value.as_str()))
}

/// `text` with every remembered value replaced by `with` (longest first, so a value holding another goes whole).
fn replace_known(text: &str, with: &str) -> String {
    let known = known();
    let mut values: Vec<&String> = known.iter().filter(|value| text.contains(value.as_str())).collect();
    values.sort_by_key(|value| std::cmp::Reverse(value.len()));
    let mut text = text.to_owned();
    for value in values {
        text = text.replace(value.as_str(), with);
    }
    text
}

/// `text` with every remembered credential and every marker-carrying word (the marker and the credential characters
/// after it) replaced by [`REDACTED`]: what a record, a journal row, a log line or an error may hold.
pub fn redact(text: &str) -> String {
    let text = replace_known(text, REDACTED);
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(SECRET_MARKER) {
        let word = &rest[at + SECRET_MARKER.len()..];
        let end = word
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '+' | '/' | '=')))
            .unwrap_or(word.len());
        out.push_str(&rest[..at]);
        // The marker alone (a refusal naming it, `fleetsim-secret-…`) is no credential.
        out.push_str(if end == 0 { SECRET_MARKER } else { REDACTED });
        rest = &word[end..];
    }
    out.push_str(rest);
    out
}

/// `text` with every remembered credential replaced by the marker, so that the engine's one rule for a request that
/// carries a credential (`recovery::authorize` refuses a text containing [`SECRET_MARKER`]) refuses it too.
pub fn mark_known_secrets(text: &str) -> String {
    replace_known(text, &format!("{SECRET_MARKER}withheld"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_never_shows_the_value() {
        let secret = Secret::new(format!("{SECRET_MARKER}abc123"));
        assert_eq!(format!("{secret}"), "[redacted]");
        assert!(!format!("{secret:?}").contains("abc123"));
        assert!(!format!("{:?}", Some(&secret)).contains("abc123"));
        assert_eq!(secret.expose(), "fleetsim-secret-abc123");
    }

    #[test]
    fn redaction_replaces_marker_words_and_remembered_values_wherever_they_are() {
        assert_eq!(
            redact("token fleetsim-secret-hub-00ff, and \"fleetsim-secret-x\" again"),
            "token [redacted], and \"[redacted]\" again"
        );
        assert_eq!(
            redact("a credential (`fleetsim-secret-…`)"),
            "a credential (`fleetsim-secret-…`)",
            "the bare marker"
        );
        remember("plain-credential-4f2a");
        remember("short");
        remember("with\"quote-credential");
        assert!(carries_secret("a reason with plain-credential-4f2a in it"));
        assert!(!carries_known_secret("short words stay"), "a value shorter than the minimum is not remembered");
        assert_eq!(redact("actor plain-credential-4f2a:x"), "actor [redacted]:x");
        assert_eq!(redact(r#"{"reason":"with\"quote-credential"}"#), r#"{"reason":"[redacted]"}"#, "JSON-escaped");
        assert_eq!(mark_known_secrets("plain-credential-4f2a"), format!("{SECRET_MARKER}withheld"));
        remember_every_secret();
        let derived = Secret::new("derived-token-9c1e77");
        assert_eq!(redact("issued derived-token-9c1e77"), "issued [redacted]", "every Secret once remembering");
        assert_eq!(derived.expose(), "derived-token-9c1e77");
    }
}
