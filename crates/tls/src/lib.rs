//! netacl-tls: the TLS material of every netacl link, in one place, so that the admin API
//! (`netacl serve --tls-cert`), the edge's listener (`netacl edge --listen-tls`) and the edge's
//! clients (the rule source of `--rules-url https://`, the upstream of `--upstream https://`)
//! load and trust certificates the same way. rustls only (ring), no OpenSSL.
//!
//! - [`ServerCertificate`]: a certificate chain and its private key read from PEM files,
//!   checked to belong together, served to every handshake, and reloaded when either file is
//!   replaced ([`ServerCertificate::watch`]; replace the files by rename, as certificate tools
//!   do). A new pair that does not load (unreadable, not PEM, a key that is not the
//!   certificate's) is refused and logged; the pair in service stays.
//! - [`ClientTrust`] and [`client_config`]: whom a client trusts — the system's root
//!   certificates, or only the CA certificates of one PEM file (a private PKI).
//! - [`load_certificates`], [`load_private_key`]: the PEM readers behind both
//!   (`rustls::pki_types::pem::PemObject`).
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use netacl_tls::{ServerCertificate, TlsFiles};
//!
//! let dir = tempfile::tempdir()?;
//! let key = rcgen::KeyPair::generate()?;
//! let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])?.self_signed(&key)?;
//! let files = TlsFiles { cert: dir.path().join("cert.pem"), key: dir.path().join("key.pem") };
//! std::fs::write(&files.cert, cert.pem())?;
//! std::fs::write(&files.key, key.serialize_pem())?;
//!
//! let served = ServerCertificate::load(files.clone())?;
//! let config = served.server_config()?;
//! assert_eq!(config.alpn_protocols, [b"h2".to_vec(), b"http/1.1".to_vec()]);
//!
//! // A key that is not the certificate's is refused, and the pair in service stays.
//! std::fs::write(&files.key, rcgen::KeyPair::generate()?.serialize_pem())?;
//! let before = served.fingerprint();
//! assert!(matches!(served.reload(), Err(netacl_tls::TlsError::KeyMismatch { .. })));
//! assert_eq!(served.fingerprint(), before);
//! # Ok(())
//! # }
//! ```
//!
//! Error messages name the file and what is wrong with it; they never quote the contents of a
//! key file.
//!
//! With the feature `test-ca`, the module `test_ca` issues certificates from a throw-away CA for the
//! tests of the crates that use this one.
#![deny(missing_docs)]

mod client;
mod pem;
mod server;
#[cfg(any(test, feature = "test-ca"))]
pub mod test_ca;

use std::path::PathBuf;

pub use client::{client_config, ClientTrust};
pub use pem::{load_certificates, load_private_key};
pub use server::{ServerCertificate, TlsFiles};

/// ALPN protocols a netacl HTTPS listener offers, preferred first.
pub const SERVER_ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Why TLS material could not be loaded or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid PEM (the reason never quotes the file).
    #[error("{path}: not a valid PEM file: {reason}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The file holds no `CERTIFICATE` section.
    #[error("{path}: no certificate in the file")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The file holds no private key (PKCS#8, PKCS#1 or SEC1).
    #[error("{path}: no private key in the file (PKCS#8, PKCS#1 or SEC1 PEM expected)")]
    NoPrivateKey {
        /// The file.
        path: PathBuf,
    },
    /// The private key's algorithm is not supported.
    #[error("{path}: unsupported private key: {reason}")]
    UnsupportedKey {
        /// The key file.
        path: PathBuf,
        /// What rustls said.
        reason: String,
    },
    /// The private key does not belong to the certificate (their public keys differ).
    #[error("{key}: the private key does not belong to the certificate in {cert}")]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// The leaf certificate cannot be parsed.
    #[error("{path}: invalid certificate: {reason}")]
    InvalidCertificate {
        /// The certificate file.
        path: PathBuf,
        /// What rustls said.
        reason: String,
    },
    /// No usable root certificate was found in the system's store.
    #[error("no system root certificates could be loaded ({0}); give a CA file instead")]
    NoSystemRoots(String),
    /// The TLS configuration could not be built.
    #[error("TLS configuration: {0}")]
    Config(String),
}
