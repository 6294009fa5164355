//! Why an edge's policy inputs could not be loaded or installed: the error of the rule sources
//! (`source`) and of the policy's inputs (`lists`), in a module of its own so that both can name
//! it without importing each other.
use std::path::PathBuf;

use netacl_tls::TlsError;

/// Why rules could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The rule file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The document is not JSON.
    #[error("{origin}: not JSON: {reason}")]
    Json {
        /// File path or URL.
        origin: String,
        /// The parser's message.
        reason: String,
    },
    /// The rules do not validate.
    #[error("{origin}: {source}")]
    Invalid {
        /// File path or URL.
        origin: String,
        /// The validation error, with the property path.
        #[source]
        source: netacl_model::ValidationError,
    },
    /// The rules do not compile.
    #[error("{origin}: {source}")]
    Compile {
        /// File path or URL.
        origin: String,
        /// The compiler's error.
        #[source]
        source: netacl_eval::CompileError,
    },
    /// The rules URL is not `https://HOST[:PORT]` or `http://HOST[:PORT]`.
    #[error("invalid rules URL {0:?}: expected https://HOST[:PORT] (or http:// on loopback)")]
    InvalidUrl(String),
    /// A plain-HTTP rules URL that is not loopback: the client secret would cross the network
    /// in clear.
    #[error(
        "refusing to send the client secret in clear to {0} (plain HTTP to an address that is \
         not loopback): use https://, or allow it explicitly with --allow-insecure-rules-url"
    )]
    InsecureUrl(String),
    /// A plain-HTTP platform URL that is not loopback: the operator token is only ever sent
    /// over `https://` or to a loopback address.
    #[error(
        "refusing to send the operator token in clear to {0} (plain HTTP to an address that is \
         not loopback): use https://"
    )]
    InsecurePlatformUrl(String),
    /// The trust anchors for an `https://` rules URL could not be loaded.
    #[error("rules URL TLS: {0}")]
    Tls(#[source] TlsError),
    /// The admin server could not be reached or answered something unexpected.
    #[error("{0}")]
    Remote(String),
}
