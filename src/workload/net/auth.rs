//! The pre-shared key of `--key-file`, proven by challenge and response: each end sends
//! a fresh nonce, and each proves the key with an HMAC-SHA256 over both nonces, so the
//! key never crosses the wire and a recorded proof is worthless for another session.

use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Shortest key accepted, in bytes.
const MIN_KEY_BYTES: usize = 16;

/// A key read from a key file.
#[derive(Clone)]
pub struct Key(Vec<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

/// Why a key file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// It cannot be read.
    #[error("cannot read the key file {path}: {source}")]
    Read {
        /// The path at fault.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// It is too short to be a key.
    #[error(
        "the key file {path} (--key-file) holds {bytes} bytes; a key needs at least {MIN_KEY_BYTES} (for example: head -c 32 /dev/urandom | base64 > {path})"
    )]
    Short {
        /// The path at fault.
        path: PathBuf,
        /// Its length, trailing white space left out.
        bytes: usize,
    },
}

impl Key {
    /// Reads the key in `path`; trailing white space (an editor's newline) is not part of it.
    pub fn read(path: &Path) -> Result<Key, KeyError> {
        let bytes = std::fs::read(path).map_err(|source| KeyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let end = bytes
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(0, |i| i + 1);
        if end < MIN_KEY_BYTES {
            return Err(KeyError::Short {
                path: path.to_path_buf(),
                bytes: end,
            });
        }
        Ok(Key(bytes[..end].to_vec()))
    }

    /// The proof of `role` ("client" or "server") for this pair of nonces, in hex.
    pub fn proof(&self, role: &str, client_nonce: &str, server_nonce: &str) -> String {
        hex(&self
            .mac(role, client_nonce, server_nonce)
            .finalize()
            .into_bytes())
    }

    /// Whether `proof` is the proof of `role` for these nonces, compared in constant time.
    pub fn verify(&self, role: &str, client_nonce: &str, server_nonce: &str, proof: &str) -> bool {
        let Some(bytes) = unhex(proof) else {
            return false;
        };
        self.mac(role, client_nonce, server_nonce)
            .verify_slice(&bytes)
            .is_ok()
    }

    fn mac(&self, role: &str, client_nonce: &str, server_nonce: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        // The role keeps a server's proof from being replayed as a client's.
        for part in ["ratelab-net-1", role, client_nonce, server_nonce] {
            mac.update(&(part.len() as u32).to_be_bytes());
            mac.update(part.as_bytes());
        }
        mac
    }
}

/// 32 fresh random bytes in hex.
pub fn nonce() -> String {
    hex(&rand::random::<[u8; 32]>())
}

/// Bytes in lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || text.len() > 128 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str) -> Key {
        Key(text.as_bytes().to_vec())
    }

    #[test]
    fn proofs_check_key_role_and_nonces() {
        let (a, b) = (nonce(), nonce());
        let good = key("a shared key of some length");
        let proof = good.proof("client", &a, &b);
        assert!(good.verify("client", &a, &b, &proof));
        assert!(!good.verify("server", &a, &b, &proof));
        assert!(!good.verify("client", &b, &a, &proof));
        assert!(!key("another key of some length").verify("client", &a, &b, &proof));
        assert!(!good.verify("client", &a, &b, "zz"));
        assert!(!good.verify("client", &a, &b, ""));
    }

    #[test]
    fn key_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "short\n").unwrap();
        let error = Key::read(&path).unwrap_err().to_string();
        assert!(error.contains("holds 5 bytes"), "{error}");
        std::fs::write(&path, "0123456789abcdef0123\n\n").unwrap();
        assert_eq!(Key::read(&path).unwrap().0.len(), 20);
        assert!(
            Key::read(&dir.path().join("missing"))
                .unwrap_err()
                .to_string()
                .contains("cannot read the key file")
        );
    }
}
