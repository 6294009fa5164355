#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

mod file;
mod mac;
mod seal;
pub mod transit;

use std::fmt;
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

pub use mac::{MacError, MacKeys};
pub use seal::{is_sealed, SealedSecret, SecretContext};

/// The name of the key file generated inside the data directory when `--secrets-key-file` is
/// not given.
pub const DEFAULT_KEY_FILE_NAME: &str = "secrets.key";

/// Length of a key-encryption key in bytes (AES-256).
pub const KEK_LEN: usize = 32;

/// A key-encryption key: seals and opens the secrets the stores keep.
///
/// Its bytes are zeroed when it is dropped and never shown by `Debug`; only its [`KekId`] is.
pub struct Kek {
    id: KekId,
    // AES-256-GCM with a random nonce per seal; AWS-LC clears the key schedule when dropped.
    cipher: aws_lc_rs::aead::RandomizedNonceKey,
    // HMAC-SHA256 under HMAC(key, "netacl-secrets tag-key v1"): authenticates values the
    // service hands out and takes back (paging cursors), never secrets.
    tag_key: aws_lc_rs::hmac::Key,
}

/// A key-encryption key's public identifier: 16 hex digits derived from the key by SHA-256
/// (domain-separated). Carried by every sealed value so that the key that sealed it is known.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KekId([u8; 8]);

impl KekId {
    /// Parses the 16 hex digits of a sealed value's prefix.
    pub fn parse(text: &str) -> Option<KekId> {
        let mut out = [0u8; 8];
        if text.len() != 16 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        hex::decode_to_slice(text, &mut out).ok()?;
        Some(KekId(out))
    }
}

impl fmt::Display for KekId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for KekId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KekId({self})")
    }
}

impl fmt::Debug for Kek {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kek")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Kek {
    /// A key from its 32 bytes.
    pub fn from_bytes(bytes: &[u8; KEK_LEN]) -> Result<Kek, SecretsError> {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        hasher.update(b"netacl-secrets kek-id v1\0");
        hasher.update(bytes);
        let digest = hasher.finalize();
        let mut id = [0u8; 8];
        id.copy_from_slice(&digest[..8]);
        let cipher = aws_lc_rs::aead::RandomizedNonceKey::new(&aws_lc_rs::aead::AES_256_GCM, bytes)
            .map_err(|_| SecretsError::Crypto)?;
        let derive = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, bytes);
        let derived = aws_lc_rs::hmac::sign(&derive, b"netacl-secrets tag-key v1");
        let tag_key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, derived.as_ref());
        Ok(Kek {
            id: KekId(id),
            cipher,
            tag_key,
        })
    }

    /// A new random key (AWS-LC's generator). Not written anywhere: see [`Kek::generate_file`].
    pub fn generate() -> Result<Kek, SecretsError> {
        let bytes = random_key()?;
        Kek::from_bytes(&bytes)
    }

    /// An HMAC-SHA256 tag of `message` for `purpose` (a fixed label naming what the tag is
    /// for, without NUL), under a key derived from this one: the same on every node that holds
    /// the key. For values the service hands out and must recognise as its own (paging
    /// cursors), so that a client can neither forge them nor carry them across contexts.
    pub fn tag(&self, purpose: &str, message: &[u8]) -> [u8; 32] {
        let mut context = aws_lc_rs::hmac::Context::with_key(&self.tag_key);
        context.update(purpose.as_bytes());
        context.update(&[0]);
        context.update(message);
        let mut out = [0u8; 32];
        out.copy_from_slice(context.sign().as_ref());
        out
    }

    /// The key's identifier.
    pub fn id(&self) -> KekId {
        self.id
    }

    /// Loads a key file (the format of [`Kek::generate_file`]).
    ///
    /// Refused: a missing or unreadable file, anything but a regular file, a file that group or
    /// others may read or write (Unix; `chmod 600` it), a file not in the key-file format.
    pub fn load(path: &Path) -> Result<Kek, SecretsError> {
        let bytes = file::read_key_file(path)?;
        Kek::from_bytes(&bytes)
    }

    /// Writes a new random key to `path` (mode 0600) and returns it. The file appears whole or
    /// not at all (written beside it, synced, then linked into place); an existing file is never
    /// overwritten ([`SecretsError::Exists`]).
    pub fn generate_file(path: &Path) -> Result<Kek, SecretsError> {
        let bytes = random_key()?;
        file::create_key_file(path, &bytes)?;
        Kek::from_bytes(&bytes)
    }

    /// Loads `path` if it exists, else generates it as [`Kek::generate_file`] does. When two
    /// processes race to generate it, both end with the key of the one that linked first.
    pub fn load_or_generate(path: &Path) -> Result<Kek, SecretsError> {
        match std::fs::symlink_metadata(path) {
            Ok(_) => Kek::load(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match Kek::generate_file(path) {
                Err(SecretsError::Exists { .. }) => Kek::load(path),
                other => other,
            },
            Err(source) => Err(SecretsError::Io {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// The rules of `netacl serve --secrets-key-file`:
    /// - a key file given: it is loaded (it must exist; a typo must not start a fresh key);
    /// - none given, a data directory: `<data-dir>/secrets.key`, generated on first start;
    /// - neither (a server on `--database-url`): [`SecretsError::KeyFileRequired`], since the
    ///   key-encryption key must not live in the database it protects.
    pub fn resolve(key_file: Option<&Path>, data_dir: Option<&Path>) -> Result<Kek, SecretsError> {
        match (key_file, data_dir) {
            (Some(path), _) => Kek::load(path),
            (None, Some(dir)) => Kek::load_or_generate(&dir.join(DEFAULT_KEY_FILE_NAME)),
            (None, None) => Err(SecretsError::KeyFileRequired),
        }
    }
}

fn random_key() -> Result<Zeroizing<[u8; KEK_LEN]>, SecretsError> {
    let mut bytes = Zeroizing::new([0u8; KEK_LEN]);
    aws_lc_rs::rand::fill(&mut bytes[..]).map_err(|_| SecretsError::Crypto)?;
    Ok(bytes)
}

/// An opened secret. Zeroed when dropped; `Debug` shows only that it is redacted.
pub struct SecretBytes(Zeroizing<Vec<u8>>);

impl SecretBytes {
    /// Wraps bytes as a secret.
    pub fn new(bytes: Vec<u8>) -> SecretBytes {
        SecretBytes(Zeroizing::new(bytes))
    }

    /// The secret's bytes: the one door out, named so that uses are easy to find.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    /// The secret as UTF-8 text (a PEM), or `None` if it is not UTF-8.
    pub fn expose_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }
}

impl fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretBytes([redacted])")
    }
}

/// What went wrong loading a key-encryption key or sealing/opening a secret. Messages never
/// quote a key file, a sealed value or a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretsError {
    /// The key file could not be read, created or inspected.
    #[error("secrets key file {path}: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The key file is not a regular file.
    #[error("secrets key file {path}: not a regular file")]
    NotAFile {
        /// The key file.
        path: PathBuf,
    },
    /// Group or others may read or write the key file.
    #[error(
        "secrets key file {path}: permissions {mode:04o} are too open (group or others may access it); chmod 600 it"
    )]
    TooOpen {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The key file's contents are not a key in the expected format.
    #[error(
        "secrets key file {path}: not a netacl key-encryption key (expected one line: `netacl-kek-v1:` and 43 base64url characters for 32 bytes)"
    )]
    Format {
        /// The key file.
        path: PathBuf,
    },
    /// Generating a key file where one already exists.
    #[error("secrets key file {path}: already exists; it is never overwritten")]
    Exists {
        /// The key file.
        path: PathBuf,
    },
    /// No key file and no data directory to generate one in.
    #[error(
        "--secrets-key-file is required with --database-url (the key-encryption key must not be kept in the database it protects)"
    )]
    KeyFileRequired,
    /// A stored value is not a sealed value of a known version.
    #[error("a stored secret is not a sealed value of a known format")]
    Malformed,
    /// A value was sealed by another key-encryption key than the one loaded.
    #[error(
        "a stored secret was sealed with key-encryption key {sealed_with}, but the loaded key is {loaded} (wrong --secrets-key-file?)"
    )]
    WrongKek {
        /// The id in the sealed value.
        sealed_with: KekId,
        /// The loaded key's id.
        loaded: KekId,
    },
    /// Authentication failed: the value was altered, or belongs to another record.
    #[error("a stored secret does not open: altered, or moved from another record")]
    Open,
    /// The cryptographic library failed (random source, key setup).
    #[error("the cryptographic library failed")]
    Crypto,
}
