//! PEM files → DER values, with `rustls::pki_types::pem::PemObject`.
use std::path::Path;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::TlsError;

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

/// What is wrong with a PEM file, in words that never quote it (`IllegalSectionStart`'s
/// `Display` prints the offending line, which could be a key's).
fn describe(err: &pem::Error) -> String {
    match err {
        pem::Error::MissingSectionEnd { .. } => "a section has no END line".to_owned(),
        pem::Error::IllegalSectionStart { .. } => "malformed BEGIN line".to_owned(),
        pem::Error::Base64Decode(_) => "a section is not valid base64".to_owned(),
        pem::Error::SectionTooLarge => "a section is too large".to_owned(),
        other => other.to_string(),
    }
}

/// The certificates of a PEM file, in file order (a chain: leaf first). Other sections are
/// ignored; a file with no certificate is an error.
///
/// # Errors
///
/// [`TlsError::Read`], [`TlsError::Pem`], [`TlsError::NoCertificate`].
pub fn load_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| TlsError::Pem {
            path: path.to_owned(),
            reason: describe(&err),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// The first private key of a PEM file (PKCS#8, PKCS#1 RSA or SEC1 EC).
///
/// # Errors
///
/// [`TlsError::Read`], [`TlsError::Pem`], [`TlsError::NoPrivateKey`].
pub fn load_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|err| match err {
        pem::Error::NoItemsFound => TlsError::NoPrivateKey {
            path: path.to_owned(),
        },
        other => TlsError::Pem {
            path: path.to_owned(),
            reason: describe(&other),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_are_named_and_never_quoted() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        assert!(matches!(
            load_certificates(&missing),
            Err(TlsError::Read { .. })
        ));

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not pem at all\n").unwrap();
        assert!(matches!(
            load_certificates(&empty),
            Err(TlsError::NoCertificate { .. })
        ));
        assert!(matches!(
            load_private_key(&empty),
            Err(TlsError::NoPrivateKey { .. })
        ));

        // A secret-looking line in a broken section is not repeated in the message.
        let broken = dir.path().join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n",
        )
        .unwrap();
        let message = load_private_key(&broken).unwrap_err().to_string();
        assert!(message.contains("broken.pem"), "{message}");
        assert!(!message.contains("c2VjcmV0"), "{message}");
    }

    #[test]
    fn chains_keep_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let ca = crate::test_ca::TestCa::new("chain");
        let leaf = ca.issue(&["localhost"]);
        let chain = dir.path().join("chain.pem");
        std::fs::write(&chain, format!("{}{}", leaf.cert_pem, ca.pem())).unwrap();
        let certs = load_certificates(&chain).unwrap();
        assert_eq!(certs.len(), 2);
        assert_eq!(certs[0].as_ref(), leaf.der.as_slice());
        assert_ne!(certs[1].as_ref(), leaf.der.as_slice());

        let key = dir.path().join("key.pem");
        std::fs::write(&key, &leaf.key_pem).unwrap();
        assert!(load_private_key(&key).is_ok());
    }
}
