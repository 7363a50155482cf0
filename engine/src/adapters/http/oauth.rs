//! MAAS's API authentication: the API key (`consumer_key:token_key:token_secret`) and the OAuth 1.0 PLAINTEXT
//! `Authorization` header built from it (`reference/maas-api-notes.md` §3).
//!
//! The signature of PLAINTEXT is `consumer_secret & token_secret`; MAAS hardwires the consumer secret to the empty
//! string, so the signature is `&<token_secret>`. Two spellings of the header are in use and MAAS's server parser
//! (`parse_auth_params`: split on `,`, then on the first `=`, strip quotes) reads both:
//! - [`HeaderStyle::Unquoted`], MAAS's own (curtin's `build_auth_header`): `oauth_signature=&<ts>`, values bare;
//! - [`HeaderStyle::Quoted`], canonical/gomaasclient's: `realm="MAAS API"`, each value quoted and percent-escaped
//!   (`oauth_signature="%26<ts>"`).
//!
//! The nonce is deterministic (a seed and a per-client counter, hex) so a simulated run replays byte for byte; the
//! timestamp is the caller's clock. API Boundary: nothing here prints the token secret: [`ApiKey`]'s `Debug` redacts
//! it and [`ApiKeyError`] never quotes the key.

use std::cell::Cell;
use std::fmt;

use crate::secret::Secret;

/// A parsed MAAS API key.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    consumer_key: String,
    token_key: String,
    token_secret: Secret,
}

/// Why an API key was refused. The text names the shape expected, never the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ApiKeyError {
    #[error("a maas api key is consumer_key:token_key:token_secret (3 parts separated by ':'), this one has {parts}")]
    WrongPartCount { parts: usize },
    #[error("the {part} of the maas api key is empty")]
    EmptyPart { part: &'static str },
}

impl ApiKey {
    /// Parses `consumer_key:token_key:token_secret`: exactly 3 parts, none empty (as `convert_string_to_tuple`,
    /// gomaasapi and gomaasclient want).
    pub fn parse(key: &Secret) -> Result<ApiKey, ApiKeyError> {
        let parts: Vec<&str> = key.expose().trim().split(':').collect();
        let [consumer_key, token_key, token_secret] = parts.as_slice() else {
            return Err(ApiKeyError::WrongPartCount { parts: parts.len() });
        };
        for (part, value) in [("consumer key", consumer_key), ("token key", token_key), ("token secret", token_secret)]
        {
            if value.is_empty() {
                return Err(ApiKeyError::EmptyPart { part });
            }
        }
        Ok(ApiKey {
            consumer_key: (*consumer_key).to_owned(),
            token_key: (*token_key).to_owned(),
            token_secret: Secret::new(*token_secret),
        })
    }

    pub fn consumer_key(&self) -> &str {
        &self.consumer_key
    }

    pub fn token_key(&self) -> &str {
        &self.token_key
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKey")
            .field("consumer_key", &self.consumer_key)
            .field("token_key", &self.token_key)
            .field("token_secret", &self.token_secret)
            .finish()
    }
}

/// How the `Authorization` header is spelled (both are OAuth 1.0 PLAINTEXT; MAAS reads both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum HeaderStyle {
    /// canonical/gomaasclient's `setOAuthHeader`: `realm="MAAS API"`, values quoted and percent-escaped, so the
    /// signature reads `"%26<token_secret>"`. Keys in a fixed order (Go's map order is random).
    #[default]
    Quoted,
    /// MAAS's own (curtin's `build_auth_header`): bare values, `oauth_signature=&<token_secret>`.
    Unquoted,
}

/// The `Authorization` header value for one request.
pub fn authorization_header(key: &ApiKey, style: HeaderStyle, nonce: &str, timestamp_s: u64) -> String {
    let signature = format!("&{}", key.token_secret.expose());
    match style {
        HeaderStyle::Unquoted => format!(
            "OAuth oauth_version=1.0, oauth_signature_method=PLAINTEXT, oauth_consumer_key={}, oauth_token={}, \
             oauth_signature={signature}, oauth_nonce={nonce}, oauth_timestamp={timestamp_s}",
            key.consumer_key, key.token_key,
        ),
        HeaderStyle::Quoted => {
            let timestamp = timestamp_s.to_string();
            let fields = [
                ("oauth_consumer_key", key.consumer_key.as_str()),
                ("oauth_token", key.token_key.as_str()),
                ("oauth_signature_method", "PLAINTEXT"),
                ("oauth_signature", signature.as_str()),
                ("oauth_timestamp", timestamp.as_str()),
                ("oauth_nonce", nonce),
                ("oauth_version", "1.0"),
            ];
            let mut header = String::from("OAuth realm=\"MAAS API\"");
            for (name, value) in fields {
                header.push_str(&format!(", {name}=\"{}\"", percent_escape(value)));
            }
            header
        }
    }
}

/// Percent-escapes everything outside RFC 3986's unreserved set (`A-Z a-z 0-9 - . _ ~`), as OAuth 1.0 asks
/// (RFC 5849 §3.6). Also used for path segments.
pub fn percent_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Fresh, deterministic nonces: the `n`-th nonce of a seed is 16 hex digits of a SplitMix64 step over
/// `seed + n`, so two clients with different seeds do not collide and a replayed run sends the same bytes.
#[derive(Debug)]
pub struct NonceSource {
    seed: u64,
    counter: Cell<u64>,
}

impl NonceSource {
    pub fn new(seed: u64) -> NonceSource {
        NonceSource { seed, counter: Cell::new(0) }
    }

    pub fn next_nonce(&self) -> String {
        let n = self.counter.get();
        self.counter.set(n.wrapping_add(1));
        format!("{:016x}", splitmix64(self.seed.wrapping_add(n)))
    }
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ApiKey {
        ApiKey::parse(&Secret::new("ck9:tk7:fleetsim-secret-ts5")).expect("a well-formed key")
    }

    #[test]
    fn a_key_has_exactly_three_non_empty_parts_and_errors_never_quote_it() {
        let parsed = key();
        assert_eq!((parsed.consumer_key(), parsed.token_key()), ("ck9", "tk7"));
        for (bad, error) in [
            ("fleetsim-secret-only", ApiKeyError::WrongPartCount { parts: 1 }),
            ("a:fleetsim-secret-b", ApiKeyError::WrongPartCount { parts: 2 }),
            ("a:b:fleetsim-secret-c:d", ApiKeyError::WrongPartCount { parts: 4 }),
            (":b:fleetsim-secret-c", ApiKeyError::EmptyPart { part: "consumer key" }),
            ("a::fleetsim-secret-c", ApiKeyError::EmptyPart { part: "token key" }),
            ("a:fleetsim-secret-b:", ApiKeyError::EmptyPart { part: "token secret" }),
        ] {
            let got = ApiKey::parse(&Secret::new(bad)).expect_err(bad);
            assert_eq!(got, error);
            assert!(!got.to_string().contains("fleetsim-secret"), "{got}");
            assert!(!format!("{got:?}").contains("fleetsim-secret"), "{got:?}");
        }
        assert_eq!(
            ApiKeyError::WrongPartCount { parts: 2 }.to_string(),
            "a maas api key is consumer_key:token_key:token_secret (3 parts separated by ':'), this one has 2"
        );
        assert!(!format!("{parsed:?}").contains("ts5"));
    }

    #[test]
    fn the_quoted_header_is_gomaasclient_s() {
        assert_eq!(
            authorization_header(&key(), HeaderStyle::Quoted, "00ff", 1_767_225_600),
            "OAuth realm=\"MAAS API\", oauth_consumer_key=\"ck9\", oauth_token=\"tk7\", \
             oauth_signature_method=\"PLAINTEXT\", oauth_signature=\"%26fleetsim-secret-ts5\", \
             oauth_timestamp=\"1767225600\", oauth_nonce=\"00ff\", oauth_version=\"1.0\""
        );
    }

    #[test]
    fn the_unquoted_header_is_maas_s_own() {
        assert_eq!(
            authorization_header(&key(), HeaderStyle::Unquoted, "00ff", 42),
            "OAuth oauth_version=1.0, oauth_signature_method=PLAINTEXT, oauth_consumer_key=ck9, oauth_token=tk7, \
             oauth_signature=&fleetsim-secret-ts5, oauth_nonce=00ff, oauth_timestamp=42"
        );
    }

    #[test]
    fn escaping_keeps_the_unreserved_set_only() {
        assert_eq!(percent_escape("aZ09-._~"), "aZ09-._~");
        assert_eq!(percent_escape("&a b/c\"é"), "%26a%20b%2Fc%22%C3%A9");
    }

    #[test]
    fn nonces_are_fresh_per_request_and_replay_per_seed() {
        let (a, b) = (NonceSource::new(7), NonceSource::new(7));
        let first: Vec<String> = (0..3).map(|_| a.next_nonce()).collect();
        let again: Vec<String> = (0..3).map(|_| b.next_nonce()).collect();
        assert_eq!(first, again);
        assert_ne!(first[0], first[1]);
        assert_ne!(first[1], first[2]);
        assert!(first.iter().all(|nonce| nonce.len() == 16 && nonce.chars().all(|c| c.is_ascii_hexdigit())));
        assert_ne!(NonceSource::new(8).next_nonce(), first[0]);
    }
}
