//! Whom a netacl client trusts.
use std::path::PathBuf;
use std::sync::Arc;

use rustls::RootCertStore;

use crate::pem::load_certificates;
use crate::TlsError;

/// The trust anchors of a client connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientTrust {
    /// The operating system's root certificates (on Linux the distribution's bundle;
    /// `SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured).
    #[default]
    SystemRoots,
    /// Only the CA certificates of this PEM file (a private PKI): the system's roots are not
    /// trusted.
    CaFile(PathBuf),
}

fn roots(trust: &ClientTrust) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    match trust {
        ClientTrust::SystemRoots => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let errors: Vec<String> = found.errors.iter().map(|e| e.to_string()).collect();
                let why = if errors.is_empty() {
                    "the store is empty".to_owned()
                } else {
                    errors.join("; ")
                };
                return Err(TlsError::NoSystemRoots(why));
            }
        }
        ClientTrust::CaFile(path) => {
            for cert in load_certificates(path)? {
                roots.add(cert).map_err(|e| TlsError::InvalidCertificate {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
            }
        }
    }
    Ok(roots)
}

/// A rustls client configuration verifying servers against `trust` (certificate chain and
/// host name, webpki rules), offering `alpn` (empty for none), TLS 1.2 and 1.3.
///
/// # Errors
///
/// [`TlsError::NoSystemRoots`] when the system has no usable root, or the errors of
/// [`load_certificates`] for a CA file.
pub fn client_config(
    trust: &ClientTrust,
    alpn: &[&[u8]],
) -> Result<rustls::ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots(trust)?)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_is_the_only_trust() {
        let dir = tempfile::tempdir().unwrap();
        let ca = crate::test_ca::TestCa::new("client");
        let path = dir.path().join("ca.pem");
        ca.write_pem(&path);
        let config = client_config(&ClientTrust::CaFile(path), &[b"h2"]).unwrap();
        assert_eq!(config.alpn_protocols, [b"h2".to_vec()]);

        let missing = ClientTrust::CaFile(dir.path().join("none.pem"));
        assert!(matches!(
            client_config(&missing, &[]),
            Err(TlsError::Read { .. })
        ));
    }
}
