//! A wrapper for credentials (API keys, bearer tokens, attestation keys) that never prints its value.
//!
//! `Debug` and `Display` show `[redacted]`, and the type is not `Serialize`, so a secret cannot reach a log line,
//! a trace or a report by accident; [`Secret::expose`] is the one, greppable, way to read it.

use std::fmt;

/// Every secret the project mints starts with this marker, so a leak check is one substring search.
pub const SECRET_MARKER: &str = "fleetsim-secret-";

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
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
}
