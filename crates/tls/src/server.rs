//! The certificate a listener serves, reloaded when its files are replaced.
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;

use crate::pem::{load_certificates, load_private_key};
use crate::{TlsError, SERVER_ALPN};

/// A certificate chain and its private key, PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain (leaf first).
    pub cert: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The certificate and key a TLS listener serves: loaded from [`TlsFiles`], checked to belong
/// together, and swapped atomically when [`reload`](Self::reload) (or the task of
/// [`watch`](Self::watch)) loads a new pair. Handshakes in progress keep the pair they began
/// with; the next one gets the new pair. Implements rustls's [`ResolvesServerCert`], so one
/// value serves every connection of a [`rustls::ServerConfig`].
pub struct ServerCertificate {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<CertifiedKey>,
    /// The files' stamps as they were when they were last read (whether or not that pair
    /// loaded): the watcher reads them again only when they differ.
    read_at: std::sync::Mutex<PairStamp>,
}

impl std::fmt::Debug for ServerCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("ServerCertificate")
            .field("files", &self.files)
            .field("fingerprint", &self.fingerprint())
            .finish_non_exhaustive()
    }
}

fn load_pair(files: &TlsFiles, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let certs = load_certificates(&files.cert)?;
    let key = load_private_key(&files.key)?;
    CertifiedKey::from_der(certs, key, provider).map_err(|err| match err {
        rustls::Error::InconsistentKeys(_) => TlsError::KeyMismatch {
            cert: files.cert.clone(),
            key: files.key.clone(),
        },
        rustls::Error::General(reason) => TlsError::UnsupportedKey {
            path: files.key.clone(),
            reason,
        },
        other => TlsError::InvalidCertificate {
            path: files.cert.clone(),
            reason: other.to_string(),
        },
    })
}

/// SHA-256 of the leaf certificate, hex: what the logs name a certificate by.
fn leaf_fingerprint(key: &CertifiedKey) -> String {
    key.cert
        .first()
        .map(|leaf| hex::encode(Sha256::digest(leaf.as_ref())))
        .unwrap_or_default()
}

impl ServerCertificate {
    /// Loads the pair (the ring crypto provider).
    ///
    /// # Errors
    ///
    /// A [`TlsError`] naming the file at fault: unreadable, not PEM, no certificate or key, a
    /// key that is not the certificate's ([`TlsError::KeyMismatch`]).
    pub fn load(files: TlsFiles) -> Result<Arc<Self>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let stamp = PairStamp::of(&files);
        let pair = load_pair(&files, &provider)?;
        Ok(Arc::new(Self {
            files,
            provider,
            current: ArcSwap::from_pointee(pair),
            read_at: std::sync::Mutex::new(stamp),
        }))
    }

    /// The files this certificate is read from.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// The pair in service.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.load_full()
    }

    /// SHA-256 of the leaf certificate in service, lowercase hex.
    pub fn fingerprint(&self) -> String {
        leaf_fingerprint(&self.current.load())
    }

    /// Reads the files again and puts the new pair in service. On any error the pair in
    /// service stays.
    ///
    /// # Errors
    ///
    /// As [`load`](Self::load).
    pub fn reload(&self) -> Result<(), TlsError> {
        self.set_read_at(PairStamp::of(&self.files));
        let pair = load_pair(&self.files, &self.provider)?;
        self.current.store(Arc::new(pair));
        Ok(())
    }

    /// Whether either file differs (length, modification time, inode) from when it was last
    /// read: what [`watch`](Self::watch) checks before reloading. For callers that watch many
    /// certificates from one task.
    pub fn changed_on_disk(&self) -> bool {
        self.changed_since_read()
    }

    /// A rustls server configuration serving this certificate, offering HTTP/2 and HTTP/1.1 by
    /// ALPN ([`SERVER_ALPN`]), TLS 1.2 and 1.3.
    ///
    /// # Errors
    ///
    /// [`TlsError::Config`] if the provider refuses the protocol versions (it does not).
    pub fn server_config(self: &Arc<Self>) -> Result<rustls::ServerConfig, TlsError> {
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = SERVER_ALPN.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }

    /// Polls both files every `interval` (length, modification time, inode: a replacement by
    /// rename changes the inode) and [reloads](Self::reload) when either changed. A pair that
    /// fails to load is logged (`ERROR`) once and the old pair stays in service until the files
    /// change again. The task runs until aborted.
    pub fn watch(self: &Arc<Self>, interval: Duration) -> JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                if !this.changed_since_read() {
                    continue;
                }
                let reloading = this.clone();
                let reloaded = tokio::task::spawn_blocking(move || reloading.reload()).await;
                match reloaded {
                    Ok(Ok(())) => tracing::info!(
                        cert = %this.files.cert.display(),
                        fingerprint = %this.fingerprint(),
                        "TLS certificate reloaded"
                    ),
                    Ok(Err(err)) => tracing::error!(
                        error = %err,
                        fingerprint = %this.fingerprint(),
                        "new TLS certificate refused; the previous one stays in service"
                    ),
                    Err(err) => tracing::error!(error = %err, "TLS certificate reload failed"),
                }
            }
        })
    }

    /// A tokio-rustls acceptor for [`server_config`](Self::server_config).
    ///
    /// # Errors
    ///
    /// As [`server_config`](Self::server_config).
    pub fn acceptor(self: &Arc<Self>) -> Result<tokio_rustls::TlsAcceptor, TlsError> {
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(
            self.server_config()?,
        )))
    }
}

impl ServerCertificate {
    fn set_read_at(&self, stamp: PairStamp) {
        *self.read_at.lock().unwrap_or_else(|p| p.into_inner()) = stamp;
    }

    fn changed_since_read(&self) -> bool {
        let now = PairStamp::of(&self.files);
        *self.read_at.lock().unwrap_or_else(|p| p.into_inner()) != now
    }
}

impl ResolvesServerCert for ServerCertificate {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// What the watcher compares: each file's length, modification time and inode.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PairStamp([Option<(u64, Option<SystemTime>, u64)>; 2]);

impl PairStamp {
    fn of(files: &TlsFiles) -> Self {
        fn one(path: &Path) -> Option<(u64, Option<SystemTime>, u64)> {
            let meta = std::fs::metadata(path).ok()?;
            #[cfg(unix)]
            let inode = std::os::unix::fs::MetadataExt::ino(&meta);
            #[cfg(not(unix))]
            let inode = 0;
            Some((meta.len(), meta.modified().ok(), inode))
        }
        Self([one(&files.cert), one(&files.key)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> (TlsFiles, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let files = TlsFiles {
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        (files, hex::encode(Sha256::digest(cert.der().as_ref())))
    }

    #[tokio::test]
    async fn a_pair_replaced_by_rename_is_served_and_a_broken_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (live, first) = write_pair(dir.path(), "live");
        let served = ServerCertificate::load(live.clone()).unwrap();
        assert_eq!(served.fingerprint(), first);
        let watcher = served.watch(Duration::from_millis(20));

        let wait_for = |want: String| {
            let served = served.clone();
            async move {
                for _ in 0..500 {
                    if served.fingerprint() == want {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                false
            }
        };

        // A renewal: both files renamed into place.
        let (next, second) = write_pair(dir.path(), "next");
        std::fs::rename(&next.key, &live.key).unwrap();
        std::fs::rename(&next.cert, &live.cert).unwrap();
        assert!(wait_for(second.clone()).await, "renewed pair not served");

        // A broken pair (a key that is not the certificate's): refused, the old one stays.
        let (other, _) = write_pair(dir.path(), "other");
        std::fs::rename(&other.key, &live.key).unwrap();
        assert!(matches!(served.reload(), Err(TlsError::KeyMismatch { .. })));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(served.fingerprint(), second);

        // Its certificate arrives: the pair is whole again and served.
        let third = hex::encode(Sha256::digest(
            load_certificates(&other.cert).unwrap()[0].as_ref(),
        ));
        std::fs::rename(&other.cert, &live.cert).unwrap();
        assert!(wait_for(third).await, "repaired pair not served");
        watcher.abort();
    }
}
