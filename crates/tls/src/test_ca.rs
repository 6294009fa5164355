//! A certificate authority for tests (feature `test-ca`): certificates issued on the fly with
//! rcgen, and clients that trust only it. Never for production use.
use std::path::Path;
use std::sync::Arc;

use crate::TlsFiles;

/// A certificate authority made for one test.
pub struct TestCa {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

/// A server certificate issued by a [`TestCa`].
pub struct IssuedCertificate {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM (PKCS#8).
    pub key_pem: String,
    /// The certificate, DER.
    pub der: Vec<u8>,
}

impl IssuedCertificate {
    /// Writes `dir/STEM.crt` and `dir/STEM.key`.
    ///
    /// # Panics
    ///
    /// When the files cannot be written (this is test code).
    pub fn write(&self, dir: &Path, stem: &str) -> TlsFiles {
        let files = TlsFiles {
            cert: dir.join(format!("{stem}.crt")),
            key: dir.join(format!("{stem}.key")),
        };
        std::fs::write(&files.cert, &self.cert_pem).expect("write the certificate");
        std::fs::write(&files.key, &self.key_pem).expect("write the key");
        files
    }
}

impl TestCa {
    /// A new CA (P-256), named `name` in its subject.
    ///
    /// # Panics
    ///
    /// When rcgen fails (this is test code).
    pub fn new(name: &str) -> TestCa {
        let key = rcgen::KeyPair::generate().expect("CA key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("netacl test CA {name}"));
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let cert = params.self_signed(&key).expect("CA certificate");
        TestCa { cert, key }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// Writes the CA certificate to `path`.
    ///
    /// # Panics
    ///
    /// When the file cannot be written (this is test code).
    pub fn write_pem(&self, path: &Path) {
        std::fs::write(path, self.pem()).expect("write the CA certificate");
    }

    /// A server certificate for `names` (DNS names, or IP addresses as IP SANs).
    ///
    /// # Panics
    ///
    /// When rcgen fails (this is test code).
    pub fn issue(&self, names: &[&str]) -> IssuedCertificate {
        let key = rcgen::KeyPair::generate().expect("key");
        let sans: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = rcgen::CertificateParams::new(sans).expect("params");
        if let Some(first) = names.first() {
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, (*first).to_owned());
        }
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("certificate");
        IssuedCertificate {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }

    /// A client configuration trusting only this CA, offering `alpn`.
    ///
    /// # Panics
    ///
    /// Never in practice (the CA certificate is valid).
    pub fn client_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert.der().clone()).expect("root");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }
}
