//! iperf3's authentication (iperf_auth.c, 3.12 to 3.22): the client encrypts
//! `user: U\npwd:  P\nts:   SECONDS` with the server's RSA public key and sends it in
//! base64 as the parameters' `authtoken`; the server decrypts it with its private key,
//! finds the user in its authorized-users file (`user,sha256("{user}password")` lines,
//! `#` comments) and takes the token only if its time is within the skew threshold of
//! its own clock. iperf3 pads with OAEP (SHA-1) since 3.17 and PKCS#1 v1.5 before, or
//! with --use-pkcs1-padding. The parsers are pure, so they are fuzzed without keys on
//! disk; a password is never part of an error.

use std::path::Path;

use base64::Engine as _;
use rsa::pkcs1::DecodeRsaPrivateKey as _;
use rsa::pkcs1::DecodeRsaPublicKey as _;
use rsa::pkcs8::DecodePrivateKey as _;
use rsa::pkcs8::DecodePublicKey as _;
use rsa::{Oaep, Pkcs1v15Encrypt, PrivateKey, PublicKey};
use sha2::Digest as _;

/// The skew iperf3's server allows between a token's time and its clock, in seconds.
pub const DEFAULT_SKEW_SECONDS: u64 = 10;

/// How a token is padded before RSA encryption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// RSA-OAEP with SHA-1, as iperf 3.17 and later pad.
    Oaep,
    /// PKCS#1 v1.5, as iperf 3.12 to 3.16 pad (and later servers with
    /// --use-pkcs1-padding).
    Pkcs1,
}

/// Why a token, a key or a users file was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The token is not base64.
    #[error("the token is not base64")]
    NotBase64,
    /// The token does not decrypt with the server's key and padding.
    #[error("the token does not decrypt with this server's key ({0})")]
    Decrypt(String),
    /// The decrypted text is not `user: U\npwd:  P\nts:   SECONDS`.
    #[error("the token does not hold a user, a password and a time")]
    Malformed,
    /// The user is not in the file, or the password is not theirs.
    #[error("user {0:?} with this password is not in the authorized users")]
    Unknown(String),
    /// The token's time is too far from this clock.
    #[error("user {user:?}: the token is {skew_s} s from this clock, over the {limit_s} s allowed")]
    Skew {
        /// The user.
        user: String,
        /// Seconds between the token and the clock.
        skew_s: u64,
        /// Seconds allowed.
        limit_s: u64,
    },
    /// The token was taken before: a login is good once.
    #[error("user {0:?}: the token was used before (a login is good once)")]
    Replayed(String),
    /// A user or password with white space cannot be sent (iperf3 reads them with
    /// sscanf's %s).
    #[error("a username or password with white space cannot be sent to iperf3")]
    Whitespace,
    /// The text to encrypt is too long for the key.
    #[error("the credentials do not fit the server's RSA key: {0}")]
    Encrypt(String),
    /// A key file could not be read or is not an RSA key in PEM.
    #[error("{path}: {reason}")]
    Key {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// What a token says.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user.
    pub user: String,
    /// The password.
    pub password: String,
    /// When the client made the token, seconds since the epoch.
    pub time_s: i64,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"***")
            .field("time_s", &self.time_s)
            .finish()
    }
}

impl Credentials {
    /// The text a token encrypts, as iperf3 writes it (auth_text_format).
    pub fn plaintext(&self) -> Result<String, AuthError> {
        let blank = |s: &str| s.is_empty() || s.chars().any(char::is_whitespace);
        if blank(&self.user) || blank(&self.password) {
            return Err(AuthError::Whitespace);
        }
        Ok(format!(
            "user: {}\npwd:  {}\nts:   {}",
            self.user, self.password, self.time_s
        ))
    }

    /// Reads the text a token decrypts to, as iperf3's sscanf does: three labelled
    /// words, any white space between them.
    pub fn parse(text: &[u8]) -> Result<Credentials, AuthError> {
        let text = std::str::from_utf8(text).map_err(|_| AuthError::Malformed)?;
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["user:", user, "pwd:", password, "ts:", time] => Ok(Credentials {
                user: (*user).to_string(),
                password: (*password).to_string(),
                time_s: time.parse().map_err(|_| AuthError::Malformed)?,
            }),
            _ => Err(AuthError::Malformed),
        }
    }
}

/// The hash an authorized-users file holds for a user's password: SHA-256 of
/// `{user}password`, in lowercase hex.
pub fn password_hash(user: &str, password: &str) -> String {
    let digest = sha2::Sha256::digest(format!("{{{user}}}{password}").as_bytes());
    crate::workload::net::key_hex(&digest)
}

/// An authorized-users file: `user,hash` per line; empty lines, lines without a comma
/// and lines starting with `#` are skipped, as iperf3 skips them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizedUsers {
    entries: Vec<(String, String)>,
}

impl AuthorizedUsers {
    /// Reads the file's text.
    pub fn parse(text: &str) -> AuthorizedUsers {
        let entries = text
            .lines()
            .map(|line| line.trim_end_matches('\r'))
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| {
                let mut fields = line.split(',');
                let user = fields.next()?;
                let hash = fields.next()?;
                Some((user.to_string(), hash.to_string()))
            })
            .collect();
        AuthorizedUsers { entries }
    }

    /// Reads the file at `path`.
    pub fn read(path: &Path) -> Result<AuthorizedUsers, AuthError> {
        let text = std::fs::read_to_string(path).map_err(|e| AuthError::Key {
            path: path.display().to_string(),
            reason: format!("cannot read the authorized users: {e}"),
        })?;
        Ok(AuthorizedUsers::parse(&text))
    }

    /// How many users it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `user` with `password` is one of them.
    pub fn admits(&self, user: &str, password: &str) -> bool {
        let hash = password_hash(user, password);
        self.entries.iter().any(|(u, h)| u == user && *h == hash)
    }
}

/// The server's side: its private key, its users and how far a token's time may be
/// from its clock.
pub struct Authority {
    key: PrivateKey,
    padding: Padding,
    users: AuthorizedUsers,
    skew_s: u64,
    /// Tokens taken, by their digest, with the time each names: a token is taken once,
    /// and forgotten when its time is past the skew.
    taken: std::sync::Mutex<std::collections::HashMap<[u8; 32], i64>>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("padding", &self.padding)
            .field("users", &self.users.len())
            .field("skew_s", &self.skew_s)
            .finish()
    }
}

impl Authority {
    /// An authority of `key`, taking tokens padded with `padding` from `users`.
    pub fn new(
        key: PrivateKey,
        padding: Padding,
        users: AuthorizedUsers,
        skew_s: u64,
    ) -> Authority {
        Authority {
            key,
            padding,
            users,
            skew_s,
            taken: Default::default(),
        }
    }

    /// The padding it takes.
    pub fn padding(&self) -> Padding {
        self.padding
    }

    /// How many users may log in.
    pub fn users(&self) -> usize {
        self.users.len()
    }

    /// The user a token proves, at `now_s` on this clock; or why it proves none.
    pub fn check(&self, token: &str, now_s: i64) -> Result<String, AuthError> {
        let sealed = base64::engine::general_purpose::STANDARD
            .decode(token.trim())
            .map_err(|_| AuthError::NotBase64)?;
        let text = match self.padding {
            Padding::Oaep => self.key.decrypt(Oaep::<sha1::Sha1>::new(), &sealed),
            Padding::Pkcs1 => self.key.decrypt(Pkcs1v15Encrypt, &sealed),
        }
        .map_err(|e| AuthError::Decrypt(e.to_string()))?;
        let credentials = Credentials::parse(&text)?;
        if !self.users.admits(&credentials.user, &credentials.password) {
            return Err(AuthError::Unknown(credentials.user));
        }
        let skew_s = now_s.abs_diff(credentials.time_s);
        if skew_s > self.skew_s {
            return Err(AuthError::Skew {
                user: credentials.user,
                skew_s,
                limit_s: self.skew_s,
            });
        }
        // Sealing is random, so two logins never share a token: one seen before is a
        // recording played back.
        let digest: [u8; 32] = sha2::Sha256::digest(&sealed).into();
        let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        taken.retain(|_, time_s| now_s.abs_diff(*time_s) <= self.skew_s);
        if taken.insert(digest, credentials.time_s).is_some() {
            return Err(AuthError::Replayed(credentials.user));
        }
        Ok(credentials.user)
    }
}

/// How a client logs in to an iperf3 server: the user and password (never printed),
/// the server's public key and the padding it takes.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    /// The user.
    pub user: String,
    password: String,
    /// The server's RSA public key (PEM).
    pub public_key: std::path::PathBuf,
    /// How the credentials are padded.
    pub padding: Padding,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("user", &self.user)
            .field("public_key", &self.public_key)
            .field("padding", &self.padding)
            .finish_non_exhaustive()
    }
}

impl Login {
    /// A login as `user` with `password`, sealed with the key at `public_key`.
    pub fn new(
        user: String,
        password: String,
        public_key: std::path::PathBuf,
        padding: Padding,
    ) -> Login {
        Login {
            user,
            password,
            public_key,
            padding,
        }
    }

    /// The token to send now.
    pub fn token(&self) -> Result<String, AuthError> {
        let key = read_public_key(&self.public_key)?;
        let credentials = Credentials {
            user: self.user.clone(),
            password: self.password.clone(),
            time_s: now_s(),
        };
        token(&key, self.padding, &credentials)
    }
}

/// The client's token for `credentials`, sealed with the server's public `key`.
pub fn token(
    key: &PublicKey,
    padding: Padding,
    credentials: &Credentials,
) -> Result<String, AuthError> {
    let text = credentials.plaintext()?;
    let mut rng = rand::rng();
    let sealed = match padding {
        Padding::Oaep => key.encrypt(&mut rng, Oaep::<sha1::Sha1>::new(), text.as_bytes()),
        Padding::Pkcs1 => key.encrypt(&mut rng, Pkcs1v15Encrypt, text.as_bytes()),
    }
    .map_err(|e| AuthError::Encrypt(e.to_string()))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(sealed))
}

/// Reads an RSA public key in PEM (`PUBLIC KEY`, as `openssl rsa -pubout` writes, or
/// `RSA PUBLIC KEY`).
pub fn read_public_key(path: &Path) -> Result<PublicKey, AuthError> {
    let text = read_pem(path)?;
    PublicKey::from_public_key_pem(&text)
        .or_else(|_| PublicKey::from_pkcs1_pem(&text))
        .map_err(|e| key_error(path, "an RSA public key in PEM", &e.to_string()))
}

/// Reads an RSA private key in PEM (`PRIVATE KEY`, as `openssl genrsa` writes, or `RSA
/// PRIVATE KEY`), unencrypted as iperf3 takes it.
pub fn read_private_key(path: &Path) -> Result<PrivateKey, AuthError> {
    let text = read_pem(path)?;
    PrivateKey::from_pkcs8_pem(&text)
        .or_else(|_| PrivateKey::from_pkcs1_pem(&text))
        .map_err(|e| {
            key_error(
                path,
                "an unencrypted RSA private key in PEM",
                &e.to_string(),
            )
        })
}

fn read_pem(path: &Path) -> Result<String, AuthError> {
    std::fs::read_to_string(path).map_err(|e| AuthError::Key {
        path: path.display().to_string(),
        reason: format!("cannot read the key: {e}"),
    })
}

fn key_error(path: &Path, wanted: &str, why: &str) -> AuthError {
    AuthError::Key {
        path: path.display().to_string(),
        reason: format!("not {wanted} ({why})"),
    }
}

/// Seconds since the epoch on this clock.
pub fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small key, made once: enough to test the padding and the parsing quickly.
    fn key() -> &'static PrivateKey {
        static KEY: std::sync::OnceLock<PrivateKey> = std::sync::OnceLock::new();
        KEY.get_or_init(|| PrivateKey::new(&mut rand::rng(), 1024).unwrap())
    }

    fn mario(time_s: i64) -> Credentials {
        Credentials {
            user: "mario".into(),
            password: "rossi".into(),
            time_s,
        }
    }

    #[test]
    fn the_password_hash_is_iperf3s() {
        // From iperf3's own documentation and a credentials file made with sha256sum.
        assert_eq!(
            password_hash("mario", "rossi"),
            "bf7a49a846d44b454a5d11e7acfaf13d138bbe0b7483aa3e050879700572709b"
        );
    }

    #[test]
    fn a_users_file_skips_comments_and_lines_without_a_comma() {
        let users = AuthorizedUsers::parse(&format!(
            "# users\n\nnocomma\nmario,{}\r\nluigi,xyz\n",
            password_hash("mario", "rossi")
        ));
        assert_eq!(users.len(), 2);
        assert!(users.admits("mario", "rossi"));
        assert!(!users.admits("mario", "verdi"));
        assert!(!users.admits("luigi", "xyz"));
    }

    #[test]
    fn a_token_round_trips_with_either_padding_and_is_checked() {
        let users = AuthorizedUsers::parse(&format!("mario,{}", password_hash("mario", "rossi")));
        let public = key().to_public_key();
        for padding in [Padding::Oaep, Padding::Pkcs1] {
            let authority = Authority::new(key().clone(), padding, users.clone(), 10);
            let now = now_s();
            let good = token(&public, padding, &mario(now)).unwrap();
            assert_eq!(authority.check(&good, now + 9), Ok("mario".into()));
            // Good once: played back, it is refused; a fresh login of the same second is not.
            assert_eq!(
                authority.check(&good, now + 9),
                Err(AuthError::Replayed("mario".into()))
            );
            let again = token(&public, padding, &mario(now)).unwrap();
            assert_eq!(authority.check(&again, now), Ok("mario".into()));
            assert!(matches!(
                authority.check(&good, now + 11),
                Err(AuthError::Skew { skew_s: 11, .. })
            ));
            let wrong = Credentials {
                password: "verdi".into(),
                ..mario(now)
            };
            let refused = authority.check(&token(&public, padding, &wrong).unwrap(), now);
            assert_eq!(refused, Err(AuthError::Unknown("mario".into())));
            // The password never shows in what is said about a token.
            assert!(!refused.unwrap_err().to_string().contains("verdi"));
        }
        let oaep = Authority::new(key().clone(), Padding::Oaep, users, 10);
        let pkcs1 = token(&public, Padding::Pkcs1, &mario(now_s())).unwrap();
        assert!(matches!(
            oaep.check(&pkcs1, now_s()),
            Err(AuthError::Decrypt(_))
        ));
        assert_eq!(oaep.check("not base64!", 0), Err(AuthError::NotBase64));
    }

    #[test]
    fn the_plaintext_is_iperf3s_and_reads_back() {
        let text = mario(1_700_000_000).plaintext().unwrap();
        assert_eq!(text, "user: mario\npwd:  rossi\nts:   1700000000");
        assert_eq!(
            Credentials::parse(text.as_bytes()),
            Ok(mario(1_700_000_000))
        );
        assert_eq!(
            Credentials::parse(b"user: a\npwd: b"),
            Err(AuthError::Malformed)
        );
        assert_eq!(Credentials::parse(b"\xff\xfe"), Err(AuthError::Malformed));
        let spaced = Credentials {
            password: "two words".into(),
            ..mario(0)
        };
        assert_eq!(spaced.plaintext(), Err(AuthError::Whitespace));
    }
}
