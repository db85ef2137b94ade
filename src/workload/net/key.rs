//! The pre-shared key of `--key-file`, proven by challenge and response: each end sends
//! a fresh nonce, and each proves the key with an HMAC-SHA256 over both nonces, so the
//! key never crosses the wire and a recorded proof is worthless for another session.

use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Shortest key accepted, in bytes.
const MIN_KEY_BYTES: usize = 16;
/// Variety a key must have more of, in bits: its length times the entropy of its bytes'
/// spread. Sixteen random hex digits had 34 or more in 200,000 draws (51 at the
/// median), sixteen random base64 characters 44 or more; "abcd" four times has 32,
/// one letter sixteen times 0.
const MIN_KEY_BITS: f64 = 32.0;
/// How to make a good key, for the messages.
const MAKE_ONE: &str = "head -c 32 /dev/urandom | base64 >";

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
        "the key file {path} (--key-file) holds {bytes} bytes; a key needs at least {MIN_KEY_BYTES} (for example: {MAKE_ONE} {path})"
    )]
    Short {
        /// The path at fault.
        path: PathBuf,
        /// Its length, trailing white space left out.
        bytes: usize,
    },
    /// Others than its owner may read it, as ssh refuses a private key.
    #[error(
        "the key file {path} (--key-file) may be read by others (mode {mode:04o}): a key must be its owner's alone; run chmod 600 {path}"
    )]
    Exposed {
        /// The path at fault.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Its bytes repeat too much to be a secret.
    #[error(
        "the key file {path} (--key-file) holds a key with too little variety to be secret (about {bits:.0} bits; more than {MIN_KEY_BITS} needed): make one with {MAKE_ONE} {path}"
    )]
    Weak {
        /// The path at fault.
        path: PathBuf,
        /// Its estimated entropy.
        bits: f64,
    },
}

impl Key {
    /// Reads the key in `path`; trailing white space (an editor's newline) is not part of
    /// it. A file others may read is refused, as is a key that repeats itself; a pipe
    /// (`/dev/stdin` from ssh) has no mode to check.
    pub fn read(path: &Path) -> Result<Key, KeyError> {
        use std::os::unix::fs::PermissionsExt as _;
        let unreadable = |source| KeyError::Read {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(unreadable)?;
        let mode = meta.permissions().mode() & 0o7777;
        if meta.is_file() && mode & 0o077 != 0 {
            return Err(KeyError::Exposed {
                path: path.to_path_buf(),
                mode,
            });
        }
        let bytes = std::fs::read(path).map_err(unreadable)?;
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
        let bits = variety_bits(&bytes[..end]);
        if bits <= MIN_KEY_BITS {
            return Err(KeyError::Weak {
                path: path.to_path_buf(),
                bits,
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

/// An estimate of the bits of secret in `key`: its length times the Shannon entropy of
/// its bytes' spread (a key of one repeated byte has none, one of random bytes close to
/// eight a byte).
fn variety_bits(key: &[u8]) -> f64 {
    let mut counts = [0usize; 256];
    for &b in key {
        counts[usize::from(b)] += 1;
    }
    let n = key.len() as f64;
    let per_byte: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum();
    // One byte repeated gives -0.0 (a sum of -1 × log2 1), which prints as "-0".
    (per_byte * n).abs()
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
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let write = |text: &str, mode: u32| {
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let error = |text: &str, mode: u32| {
            write(text, mode);
            Key::read(&path).unwrap_err().to_string()
        };
        assert!(error("short\n", 0o600).contains("holds 5 bytes"));
        write("0123456789abcdef0123\n\n", 0o600);
        assert_eq!(Key::read(&path).unwrap().0.len(), 20);
        for mode in [0o644, 0o640, 0o604] {
            let said = error("0123456789abcdef0123\n", mode);
            assert!(
                said.contains(&format!("(mode {mode:04o})")) && said.contains("chmod 600"),
                "{said}"
            );
        }
        for weak in ["aaaaaaaaaaaaaaaa", "abcdabcdabcdabcd", &"11".repeat(32)] {
            let said = error(weak, 0o600);
            assert!(said.contains("too little variety"), "{weak}: {said}");
            assert!(!said.contains("-0 bits"), "{said}");
        }
        write(&hex(&rand::random::<[u8; 8]>()), 0o600);
        assert!(Key::read(&path).is_ok());
        write("c2VjcmV0IGtleSBvZiB0aGUgdGVzdCBzZXJ2ZXIgMTIz", 0o600);
        assert!(Key::read(&path).is_ok());
        assert!(
            Key::read(&dir.path().join("missing"))
                .unwrap_err()
                .to_string()
                .contains("cannot read the key file")
        );
    }
}
