#![doc = include_str!("../README.md")]
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
