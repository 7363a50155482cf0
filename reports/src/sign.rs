//! Report signatures: Ed25519 over a report file's exact bytes, so a gate can trust a report without replaying it
//! where it trusts the key (`docs/trust.md`, "Signed reports": what a signature proves and what it does not).
//!
//! Three one-line text forms, each tagged so that one cannot be taken for another:
//! - a signing key, `fleetsim-secret-ed25519-<64 hex>` (the 32-byte seed; it carries the credential marker, so every
//!   redaction and leak check finds it), kept in a file only its owner may read;
//! - a public key, `fleetsim-ed25519-public <64 hex>`;
//! - a signature, `fleetsim-ed25519-signature <key id> <128 hex>`, the key id being the first 16 hex digits of
//!   SHA-256 over the public key.
//!
//! The signed message is a domain tag and the bytes: `fleetsim report signature v1\n` followed by the file, so a
//! signature over a report is no signature over anything else. Nothing here reads a file or a random source.

use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

const SECRET_TAG: &str = "fleetsim-secret-ed25519-";
const PUBLIC_TAG: &str = "fleetsim-ed25519-public ";
const SIGNATURE_TAG: &str = "fleetsim-ed25519-signature ";
const DOMAIN: &[u8] = b"fleetsim report signature v1\n";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || !text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; N];
    for (index, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * index..2 * index + 2], 16).ok()?;
    }
    Some(out)
}

/// A signing key's text from 32 random bytes (the caller draws them from the operating system).
pub fn secret_key_text(seed: [u8; 32]) -> String {
    format!("{SECRET_TAG}{}\n", hex(&seed))
}

fn signing_key(text: &str) -> Result<SigningKey, String> {
    let seed = text
        .trim()
        .strip_prefix(SECRET_TAG)
        .and_then(unhex::<32>)
        .ok_or_else(|| "not a fleetsim signing key (fleetsim-secret-ed25519-<64 hex digits>)".to_owned())?;
    Ok(SigningKey::from_bytes(&seed))
}

/// The public key's text of a signing key's text.
pub fn public_key_text(secret: &str) -> Result<String, String> {
    Ok(format!("{PUBLIC_TAG}{}\n", hex(signing_key(secret)?.verifying_key().as_bytes())))
}

fn verifying_key(text: &str) -> Result<VerifyingKey, String> {
    let bytes = text
        .trim()
        .strip_prefix(PUBLIC_TAG)
        .and_then(unhex::<32>)
        .ok_or_else(|| "not a fleetsim public key (fleetsim-ed25519-public <64 hex digits>)".to_owned())?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| "not a point of the curve: not a public key".to_owned())
}

/// The key's id: the first 16 hex digits of SHA-256 over the public key.
fn key_id(key: &VerifyingKey) -> String {
    hex(&Sha256::digest(key.as_bytes())[..8])
}

fn message(report: &[u8]) -> Vec<u8> {
    let mut message = DOMAIN.to_vec();
    message.extend_from_slice(report);
    message
}

/// The signature's text for `report`'s bytes under the signing key `secret`.
pub fn sign(secret: &str, report: &[u8]) -> Result<String, String> {
    let key = signing_key(secret)?;
    let signature = key.sign(&message(report));
    Ok(format!("{SIGNATURE_TAG}{} {}\n", key_id(&key.verifying_key()), hex(&signature.to_bytes())))
}

/// Checks that `signature` is the holder of `public`'s key's signature over exactly `report`'s bytes; the key's id.
pub fn verify(public: &str, signature: &str, report: &[u8]) -> Result<String, String> {
    let key = verifying_key(public)?;
    let id = key_id(&key);
    let (signed_by, bytes) = signature
        .trim()
        .strip_prefix(SIGNATURE_TAG)
        .and_then(|rest| rest.split_once(' '))
        .and_then(|(signed_by, bytes)| Some((signed_by, unhex::<64>(bytes)?)))
        .ok_or_else(|| "not a fleetsim signature (fleetsim-ed25519-signature <key id> <128 hex digits>)".to_owned())?;
    if signed_by != id {
        return Err(format!("signed by key {signed_by}, not by the trusted key {id}"));
    }
    key.verify_strict(&message(report), &ed25519_dalek::Signature::from_bytes(&bytes)).map_err(|_| {
        format!("the signature by key {id} is not over these bytes: the report was changed after it was signed")
    })?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_holds_for_exactly_the_signed_bytes_and_the_signing_key() {
        let secret = secret_key_text([7; 32]);
        assert!(secret.starts_with("fleetsim-secret-ed25519-"), "the marker finds it: {secret}");
        let public = public_key_text(&secret).unwrap();
        let report = b"{\"schema_version\": 1}\n";
        let signature = sign(&secret, report).unwrap();
        let id = verify(&public, &signature, report).unwrap();
        assert!(signature.contains(&id), "{signature}");
        assert!(
            verify(&public, &signature, b"{\"schema_version\": 1} \n").unwrap_err().contains("not over these bytes")
        );
        let other = public_key_text(&secret_key_text([8; 32])).unwrap();
        assert!(verify(&other, &signature, report).unwrap_err().starts_with("signed by key "), "another key");
        let forged_by_other = sign(&secret_key_text([8; 32]), report).unwrap();
        assert!(verify(&public, &forged_by_other, report).is_err());
        assert!(verify(&public, "garbage", report).unwrap_err().starts_with("not a fleetsim signature"));
        assert!(verify(&secret, &signature, report).unwrap_err().starts_with("not a fleetsim public key"));
        assert!(sign(&public, report).unwrap_err().starts_with("not a fleetsim signing key"));
    }
}
