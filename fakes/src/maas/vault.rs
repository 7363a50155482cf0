//! The fake secrets store (Vault-like) of one site: site configuration, BMC power credentials (a per-node override,
//! then the site default), node-agent bootstrap tokens with an expiry, and a transient-error knob.
//!
//! Every secret value the fakes mint starts with [`SECRET_PREFIX`], so a trace oracle can find a leak by searching
//! for that string; [`Secret`]'s `Debug` never shows the value. Sources: `seeds/000_85d03426b210b2a0.txt` stages
//! `load_site_config` ("DB/Vault/API probe", transient failures retryable) and `resolve_power_credentials`
//! ("override/default lookup"; no source left is a manual-intervention boundary).
//!
//! Deviation from real Vault: no paths, leases, policies or auth methods; one flat store per site, and a transient
//! error is a whole-request 503 with no partial effect.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What every secret value in the simulated world starts with.
pub const SECRET_PREFIX: &str = "fleetsim-secret-";

/// A secret value. `Debug` prints `[redacted]`; the value is read with [`Secret::expose`] at the one place that needs
/// it (a credential check, a token handed to an agent).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value. Values minted by the fakes start with [`SECRET_PREFIX`]; a value from outside (a test, an
    /// engine rendering) is kept as it is.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// A deterministic secret `fleetsim-secret-<label>-<16 hex digits>` from a seed.
    pub fn mint(label: &str, seed: u64) -> Secret {
        Secret(format!("{SECRET_PREFIX}{label}-{:016x}", splitmix64(seed)))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// One step of SplitMix64: the fakes' only source of pseudo-randomness, always fed a seed from outside.
pub fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A BMC login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerCredential {
    pub user: String,
    pub password: Secret,
}

/// Where a resolved power credential came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialSource {
    NodeOverride,
    SiteDefault,
}

/// A bootstrap token as issued: the value goes to the cloud-init rendering, the id to the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenGrant {
    pub token_id: String,
    pub node: String,
    pub value: Secret,
    pub expires_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct TokenRow {
    node: String,
    value: Secret,
    expires_ms: u64,
}

/// A request to the store. No variant carries a secret in its fields except [`VaultRequest::PutPowerCredential`] and
/// [`VaultRequest::RedeemToken`], whose `Debug` redacts it through [`Secret`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VaultRequest {
    ReadSiteConfig,
    /// The credential for `node`: its override if there is one, else the site default.
    ResolvePowerCredential {
        node: String,
    },
    PutPowerCredential {
        node: Option<String>,
        credential: PowerCredential,
    },
    IssueBootstrapToken {
        node: String,
        ttl_ms: u64,
    },
    /// What the hub asks when an agent enrols: is this token valid now, and for which node.
    RedeemToken {
        value: Secret,
    },
    /// Decommission's `cleanup_secrets`: delete the node's power-credential override and revoke its unredeemed
    /// bootstrap tokens. Idempotent: a second delete finds nothing and succeeds.
    DeleteNodeSecrets {
        node: String,
    },
    /// Vault's `sys/capabilities-self`: what the caller's token may do on the node-secrets path.
    NodeSecretsCapabilities,
    /// Revokes `node`'s unredeemed bootstrap tokens and nothing else (onboarding's "delete partial node row": a
    /// token minted whose answer never reached the controller). Idempotent: answers how many went, 0 the second time.
    RevokeBootstrapTokens {
        node: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VaultResponse {
    SiteConfig(BTreeMap<String, String>),
    PowerCredential {
        credential: PowerCredential,
        source: CredentialSource,
    },
    Stored,
    Token(TokenGrant),
    Redeemed {
        node: String,
        token_id: String,
    },
    /// How many secrets a delete removed (0 when there were none left).
    Deleted {
        count: u32,
    },
    /// Vault's capability names (`read`, `list`, `delete`, ...), sorted.
    Capabilities(Vec<String>),
    /// How many unredeemed bootstrap tokens a revoke removed (0 when there were none).
    Revoked {
        count: u32,
    },
}

/// Errors; the HTTP status each maps to is in the comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VaultError {
    /// 503, transient: the engine may retry.
    Unavailable,
    /// 404: no override and no site default (a manual-intervention boundary in the recovery matrix).
    NoPowerCredential { node: String },
    /// 403: the site is disabled in its configuration.
    SiteDisabled,
    /// 403: the token's expiry has passed.
    TokenExpired { token_id: String },
    /// 403: no such token (or one already redeemed).
    UnknownToken,
    /// 501: the site has no bootstrap-token policy (its token role was removed): no token can be issued.
    NoTokenPolicy,
    /// 403 (Vault's "permission denied"): the controller's policy does not grant `delete` on node secrets.
    DeleteDenied { node: String },
    /// No answer: the store carried the request out and its answer was lost (the `token_answer_lost` fault). Never
    /// rendered: the HTTP front end sends nothing and the caller's own timeout fires, as the fast transport's hang.
    AnswerLost,
}

impl std::fmt::Display for VaultError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VaultError::Unavailable => write!(f, "vault is unavailable"),
            VaultError::NoPowerCredential { node } => {
                write!(f, "no power credential for node {node}: no override and no site default")
            }
            VaultError::SiteDisabled => write!(f, "site is disabled"),
            VaultError::NoTokenPolicy => write!(f, "the site has no bootstrap-token policy"),
            VaultError::TokenExpired { token_id } => write!(f, "bootstrap token {token_id} has expired"),
            VaultError::UnknownToken => write!(f, "unknown bootstrap token"),
            VaultError::DeleteDenied { node } => write!(f, "permission denied: delete on the secrets of {node}"),
            VaultError::AnswerLost => write!(f, "the request was carried out and its answer lost"),
        }
    }
}

/// The store of one site.
#[derive(Debug, Clone)]
pub struct Vault {
    seed: u64,
    site_config: BTreeMap<String, String>,
    default_credential: Option<PowerCredential>,
    overrides: BTreeMap<String, PowerCredential>,
    tokens: BTreeMap<String, TokenRow>,
    next_token: u64,
    fail_next: u32,
    /// Whether the site's bootstrap-token role exists.
    token_policy: bool,
    /// Whether the controller's policy grants `delete` on node secrets.
    delete_policy: bool,
    /// Fault: per node, how many more token issuances are carried out with their answers lost.
    lost_token_answers: BTreeMap<String, u32>,
}

impl Vault {
    /// A store with the given site configuration and no credentials; `seed` feeds the token values.
    pub fn new(seed: u64, site_config: BTreeMap<String, String>) -> Vault {
        Vault {
            seed,
            site_config,
            default_credential: None,
            overrides: BTreeMap::new(),
            tokens: BTreeMap::new(),
            next_token: 1,
            fail_next: 0,
            token_policy: true,
            delete_policy: true,
            lost_token_answers: BTreeMap::new(),
        }
    }

    /// Fault: the next `count` bootstrap tokens issued for `node` are minted and stored, and their answers lost
    /// ([`VaultError::AnswerLost`]): the controller never learns the token, which stays valid until revoked or
    /// expired. Used up by `count` issuances.
    pub fn lose_token_answers(&mut self, node: &str, count: u32) {
        *self.lost_token_answers.entry(node.to_owned()).or_insert(0) += count;
    }

    /// The unredeemed bootstrap tokens of `node` (for tests).
    pub fn unredeemed_tokens_of(&self, node: &str) -> usize {
        self.tokens.values().filter(|row| row.node == node).count()
    }

    /// Fault: the controller's policy loses (or regains) `delete` on node secrets: the capability probe no longer
    /// lists it and a delete answers [`VaultError::DeleteDenied`].
    pub fn set_delete_policy(&mut self, present: bool) {
        self.delete_policy = present;
    }

    /// Whether any secret of `node` is still stored (an override or an unredeemed token), for oracles.
    pub fn holds_secrets_of(&self, node: &str) -> bool {
        self.overrides.contains_key(node) || self.tokens.values().any(|row| row.node == node)
    }

    /// Fault: the site's bootstrap-token role is removed (or restored): issuing a token answers
    /// [`VaultError::NoTokenPolicy`].
    pub fn set_token_policy(&mut self, present: bool) {
        self.token_policy = present;
    }

    /// Fault: the next `count` requests fail with [`VaultError::Unavailable`] and change nothing. Recoverable: the
    /// requests after them succeed.
    pub fn fail_next(&mut self, count: u32) {
        self.fail_next = count;
    }

    /// Fault: `node`'s power-credential override is deleted (the site default, if any, applies again). True when
    /// there was one.
    pub fn remove_power_credential(&mut self, node: &str) -> bool {
        self.overrides.remove(node).is_some()
    }

    pub fn set_site_value(&mut self, key: &str, value: &str) {
        self.site_config.insert(key.to_owned(), value.to_owned());
    }

    /// The credential for `node` without a request (no fault applies): its override, else the site default.
    pub fn power_credential(&self, node: &str) -> Option<(PowerCredential, CredentialSource)> {
        if let Some(credential) = self.overrides.get(node) {
            return Some((credential.clone(), CredentialSource::NodeOverride));
        }
        self.default_credential.clone().map(|credential| (credential, CredentialSource::SiteDefault))
    }

    pub fn handle(&mut self, now_ms: u64, request: VaultRequest) -> Result<VaultResponse, VaultError> {
        if self.fail_next > 0 {
            self.fail_next -= 1;
            return Err(VaultError::Unavailable);
        }
        match request {
            VaultRequest::ReadSiteConfig => {
                if self.site_config.get("enabled").is_some_and(|value| value == "false") {
                    return Err(VaultError::SiteDisabled);
                }
                Ok(VaultResponse::SiteConfig(self.site_config.clone()))
            }
            VaultRequest::ResolvePowerCredential { node } => match self.power_credential(&node) {
                Some((credential, source)) => Ok(VaultResponse::PowerCredential { credential, source }),
                None => Err(VaultError::NoPowerCredential { node }),
            },
            VaultRequest::PutPowerCredential { node, credential } => {
                match node {
                    Some(node) => {
                        self.overrides.insert(node, credential);
                    }
                    None => self.default_credential = Some(credential),
                }
                Ok(VaultResponse::Stored)
            }
            VaultRequest::IssueBootstrapToken { node, ttl_ms } => {
                // No new node joins a disabled site.
                if self.site_config.get("enabled").is_some_and(|value| value == "false") {
                    return Err(VaultError::SiteDisabled);
                }
                if !self.token_policy {
                    return Err(VaultError::NoTokenPolicy);
                }
                let token_id = format!("bt-{:04}", self.next_token);
                let value = Secret::mint("bootstrap", self.seed ^ self.next_token.wrapping_mul(0x100_0000_01B3));
                self.next_token += 1;
                let expires_ms = now_ms.saturating_add(ttl_ms);
                self.tokens.insert(token_id.clone(), TokenRow { node: node.clone(), value: value.clone(), expires_ms });
                if let Some(lost) = self.lost_token_answers.get_mut(&node).filter(|lost| **lost > 0) {
                    *lost -= 1;
                    return Err(VaultError::AnswerLost);
                }
                Ok(VaultResponse::Token(TokenGrant { token_id, node, value, expires_ms }))
            }
            VaultRequest::RedeemToken { value } => {
                let Some((token_id, row)) = self.tokens.iter().find(|(_, row)| row.value == value) else {
                    return Err(VaultError::UnknownToken);
                };
                let token_id = token_id.clone();
                if now_ms >= row.expires_ms {
                    return Err(VaultError::TokenExpired { token_id });
                }
                let node = row.node.clone();
                // A bootstrap token is single-use: once an agent enrolled with it, it is gone.
                self.tokens.remove(&token_id);
                Ok(VaultResponse::Redeemed { node, token_id })
            }
            VaultRequest::DeleteNodeSecrets { node } => {
                if !self.delete_policy {
                    return Err(VaultError::DeleteDenied { node });
                }
                let mut count = u32::from(self.overrides.remove(&node).is_some());
                let before = self.tokens.len();
                self.tokens.retain(|_, row| row.node != node);
                count += (before - self.tokens.len()) as u32;
                Ok(VaultResponse::Deleted { count })
            }
            VaultRequest::RevokeBootstrapTokens { node } => {
                let before = self.tokens.len();
                self.tokens.retain(|_, row| row.node != node);
                Ok(VaultResponse::Revoked { count: (before - self.tokens.len()) as u32 })
            }
            VaultRequest::NodeSecretsCapabilities => {
                let mut capabilities = vec!["create", "list", "read", "update"];
                if self.delete_policy {
                    capabilities.push("delete");
                }
                capabilities.sort_unstable();
                Ok(VaultResponse::Capabilities(capabilities.into_iter().map(str::to_owned).collect()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vault() -> Vault {
        let mut config = BTreeMap::new();
        config.insert("maas_url".to_owned(), "http://maas-internal:5240/MAAS".to_owned());
        Vault::new(7, config)
    }

    fn credential(user: &str, seed: u64) -> PowerCredential {
        PowerCredential { user: user.to_owned(), password: Secret::mint("bmc", seed) }
    }

    #[test]
    fn deleting_a_node_s_secrets_removes_its_override_and_tokens_once_and_needs_the_delete_policy() {
        let mut vault = vault();
        let put = VaultRequest::PutPowerCredential { node: Some("node-01".into()), credential: credential("root", 2) };
        vault.handle(0, put).expect("stored");
        let issue = VaultRequest::IssueBootstrapToken { node: "node-01".into(), ttl_ms: 60_000 };
        vault.handle(0, issue).expect("issued");
        let delete = || VaultRequest::DeleteNodeSecrets { node: "node-01".into() };
        vault.set_delete_policy(false);
        assert_eq!(vault.handle(0, delete()), Err(VaultError::DeleteDenied { node: "node-01".into() }));
        let Ok(VaultResponse::Capabilities(capabilities)) = vault.handle(0, VaultRequest::NodeSecretsCapabilities)
        else {
            panic!("capabilities answered")
        };
        assert!(!capabilities.contains(&"delete".to_owned()), "{capabilities:?}");
        assert!(vault.holds_secrets_of("node-01"));
        vault.set_delete_policy(true);
        assert_eq!(vault.handle(0, delete()), Ok(VaultResponse::Deleted { count: 2 }));
        assert!(!vault.holds_secrets_of("node-01"));
        assert_eq!(vault.handle(0, delete()), Ok(VaultResponse::Deleted { count: 0 }), "idempotent");
    }

    #[test]
    fn a_node_override_wins_over_the_site_default_and_no_source_is_an_error() {
        let mut vault = vault();
        let resolve = |vault: &mut Vault, node: &str| {
            vault.handle(0, VaultRequest::ResolvePowerCredential { node: node.to_owned() })
        };
        assert_eq!(resolve(&mut vault, "node-01"), Err(VaultError::NoPowerCredential { node: "node-01".into() }));
        let put = VaultRequest::PutPowerCredential { node: None, credential: credential("admin", 1) };
        assert_eq!(vault.handle(0, put), Ok(VaultResponse::Stored));
        let put = VaultRequest::PutPowerCredential { node: Some("node-01".into()), credential: credential("root", 2) };
        assert_eq!(vault.handle(0, put), Ok(VaultResponse::Stored));
        assert_eq!(
            resolve(&mut vault, "node-01"),
            Ok(VaultResponse::PowerCredential {
                credential: credential("root", 2),
                source: CredentialSource::NodeOverride
            })
        );
        assert_eq!(
            resolve(&mut vault, "node-02"),
            Ok(VaultResponse::PowerCredential {
                credential: credential("admin", 1),
                source: CredentialSource::SiteDefault
            })
        );
    }

    #[test]
    fn a_lost_token_answer_still_mints_the_token_and_a_revoke_removes_only_that_node_s_tokens() {
        let mut vault = vault();
        let issue = |node: &str| VaultRequest::IssueBootstrapToken { node: node.into(), ttl_ms: 60_000 };
        vault.lose_token_answers("node-01", 1);
        assert_eq!(vault.handle(0, issue("node-01")), Err(VaultError::AnswerLost));
        assert_eq!(vault.unredeemed_tokens_of("node-01"), 1, "minted although its answer was lost");
        assert!(matches!(vault.handle(0, issue("node-01")), Ok(VaultResponse::Token(_))), "used up by one issuance");
        assert!(matches!(vault.handle(0, issue("node-02")), Ok(VaultResponse::Token(_))));
        let put = VaultRequest::PutPowerCredential { node: Some("node-01".into()), credential: credential("root", 2) };
        vault.handle(0, put).unwrap();
        let revoke = || VaultRequest::RevokeBootstrapTokens { node: "node-01".into() };
        assert_eq!(vault.handle(0, revoke()), Ok(VaultResponse::Revoked { count: 2 }));
        assert_eq!(vault.handle(0, revoke()), Ok(VaultResponse::Revoked { count: 0 }), "idempotent");
        assert_eq!(vault.unredeemed_tokens_of("node-02"), 1, "another node's token is kept");
        assert!(vault.holds_secrets_of("node-01"), "the power-credential override is not the revoke's");
    }

    #[test]
    fn a_bootstrap_token_expires_and_is_single_use() {
        let mut vault = vault();
        let Ok(VaultResponse::Token(grant)) =
            vault.handle(1_000, VaultRequest::IssueBootstrapToken { node: "node-01".into(), ttl_ms: 60_000 })
        else {
            panic!("no token");
        };
        assert!(grant.value.expose().starts_with(SECRET_PREFIX));
        assert_eq!(grant.expires_ms, 61_000);
        let redeem = |value: &Secret| VaultRequest::RedeemToken { value: value.clone() };
        assert_eq!(
            vault.handle(61_000, redeem(&grant.value)),
            Err(VaultError::TokenExpired { token_id: grant.token_id.clone() })
        );
        let Ok(VaultResponse::Token(fresh)) =
            vault.handle(70_000, VaultRequest::IssueBootstrapToken { node: "node-01".into(), ttl_ms: 60_000 })
        else {
            panic!("no token");
        };
        assert_ne!(fresh.value, grant.value);
        assert_eq!(
            vault.handle(70_001, redeem(&fresh.value)),
            Ok(VaultResponse::Redeemed { node: "node-01".into(), token_id: fresh.token_id.clone() })
        );
        assert_eq!(vault.handle(70_002, redeem(&fresh.value)), Err(VaultError::UnknownToken));
    }

    #[test]
    fn transient_errors_fail_exactly_the_next_n_requests_and_secrets_never_print() {
        let mut vault = vault();
        vault.fail_next(2);
        assert_eq!(vault.handle(0, VaultRequest::ReadSiteConfig), Err(VaultError::Unavailable));
        assert_eq!(vault.handle(0, VaultRequest::ReadSiteConfig), Err(VaultError::Unavailable));
        assert!(matches!(vault.handle(0, VaultRequest::ReadSiteConfig), Ok(VaultResponse::SiteConfig(_))));
        let put = VaultRequest::PutPowerCredential { node: None, credential: credential("admin", 3) };
        vault.handle(0, put.clone()).unwrap();
        let grant = vault.handle(0, VaultRequest::IssueBootstrapToken { node: "n".into(), ttl_ms: 1 }).unwrap();
        for text in [format!("{put:?}"), format!("{grant:?}"), format!("{vault:?}")] {
            assert!(!text.contains(SECRET_PREFIX), "{text}");
        }
        vault.set_site_value("enabled", "false");
        assert_eq!(vault.handle(0, VaultRequest::ReadSiteConfig), Err(VaultError::SiteDisabled));
    }
}
