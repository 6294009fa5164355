//! Certificates chosen by SNI for the edge's TLS listener (many tenants, each with its own
//! certificate).
//!
//! A directory holds one pair per host name: `HOST.crt` (the chain, leaf first) and `HOST.key`
//! (`acme.example.com.crt` + `acme.example.com.key`); the file name is the SNI it is served for
//! (compared without ASCII case). An optional default pair (`--tls-cert`/`--tls-key`) is served
//! to clients that send no SNI or an SNI with no pair of its own; without a default, such a
//! handshake fails (no certificate is offered).
//!
//! The directory is read again every reload interval: a new pair is added, a removed one
//! dropped, a replaced one reloaded (by length, modification time and inode, as for the single
//! certificate); a pair that does not load is logged and refused, and the one in service (if
//! any) stays.
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use netacl_tls::{ServerCertificate, TlsError, TlsFiles, SERVER_ALPN};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::task::JoinHandle;

use crate::tenants::{tenant_host, HostMap};

/// The certificates of the TLS listener by SNI (see the module docs).
pub struct SniCertificates {
    dir: PathBuf,
    default: Option<Arc<ServerCertificate>>,
    by_host: ArcSwap<HostMap<Arc<ServerCertificate>>>,
    scanning: Mutex<()>,
}

impl std::fmt::Debug for SniCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SniCertificates")
            .field("dir", &self.dir)
            .field("hosts", &self.by_host.load().len())
            .field("default", &self.default.is_some())
            .finish_non_exhaustive()
    }
}

/// The pairs in `dir`: host name → files, for every `HOST.crt` that has a `HOST.key`.
fn pairs_in(dir: &Path) -> Result<Vec<(String, TlsFiles)>, TlsError> {
    let read = |source| TlsError::Read {
        path: dir.to_owned(),
        source,
    };
    let mut pairs = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let entry = entry.map_err(read)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(host) = name.strip_suffix(".crt") else {
            continue;
        };
        let Some(host) = tenant_host(host) else {
            continue;
        };
        let key = dir.join(format!("{host}.key"));
        if !key.exists() {
            tracing::warn!(cert = %entry.path().display(), "certificate without its .key beside it: not served");
            continue;
        }
        pairs.push((
            host.to_ascii_lowercase(),
            TlsFiles {
                cert: entry.path(),
                key,
            },
        ));
    }
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(pairs)
}

impl SniCertificates {
    /// Loads every pair of `dir` and the `default` pair. At start a pair that does not load is
    /// an error naming its file (as for `--tls-cert`).
    ///
    /// # Errors
    ///
    /// A [`TlsError`] naming the directory or the file at fault.
    pub fn load(dir: &Path, default: Option<TlsFiles>) -> Result<Arc<Self>, TlsError> {
        let default = default.map(ServerCertificate::load).transpose()?;
        let pairs = pairs_in(dir)?;
        let mut by_host = HostMap::with_capacity(pairs.len());
        for (host, files) in pairs {
            by_host.insert(&host, ServerCertificate::load(files)?);
        }
        Ok(Arc::new(Self {
            dir: dir.to_owned(),
            default,
            by_host: ArcSwap::from_pointee(by_host),
            scanning: Mutex::new(()),
        }))
    }

    /// Whether `host` (any case) has a pair of its own.
    pub fn has_own_certificate(&self, host: &str) -> bool {
        self.by_host.load().get(host).is_some()
    }

    /// The host names with a pair of their own, sorted.
    pub fn hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = self
            .by_host
            .load()
            .iter()
            .map(|(h, _)| h.to_owned())
            .collect();
        hosts.sort();
        hosts
    }

    /// The certificate `host`'s clients get (its own, else the default), as the SHA-256 of its
    /// leaf.
    pub fn fingerprint_for(&self, host: &str) -> Option<String> {
        match self.by_host.load().get(host) {
            Some(c) => Some(c.fingerprint()),
            None => self.default.as_ref().map(|d| d.fingerprint()),
        }
    }

    /// Reads the directory again: new pairs added, removed ones dropped, changed ones reloaded
    /// (a pair that does not load is logged and refused; the one in service stays).
    pub fn rescan(&self) {
        let _one = self.scanning.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(default) = &self.default {
            reload_if_changed(default);
        }
        let pairs = match pairs_in(&self.dir) {
            Ok(pairs) => pairs,
            Err(err) => {
                tracing::error!(error = %err, "certificate directory not read; the certificates in service stay");
                return;
            }
        };
        let current = self.by_host.load_full();
        let mut next = HostMap::with_capacity(pairs.len());
        let mut changed = pairs.len() != current.len();
        for (host, files) in pairs {
            match current.get(&host) {
                Some(served) if *served.files() == files => {
                    reload_if_changed(served);
                    next.insert(&host, served.clone());
                }
                _ => {
                    changed = true;
                    match ServerCertificate::load(files) {
                        Ok(loaded) => {
                            tracing::info!(host = %host, fingerprint = %loaded.fingerprint(), "TLS certificate added");
                            next.insert(&host, loaded);
                        }
                        Err(err) => {
                            tracing::error!(host = %host, error = %err, "new TLS certificate refused")
                        }
                    }
                }
            }
        }
        if changed {
            self.by_host.store(Arc::new(next));
        }
    }

    /// Rescans every `interval` until aborted.
    pub fn watch(self: &Arc<Self>, interval: Duration) -> JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let scanning = this.clone();
                let _ = tokio::task::spawn_blocking(move || scanning.rescan()).await;
            }
        })
    }

    /// A tokio-rustls acceptor choosing the certificate by SNI (HTTP/2 and HTTP/1.1 by ALPN,
    /// TLS 1.2 and 1.3).
    ///
    /// # Errors
    ///
    /// [`TlsError::Config`] if the provider refuses the protocol versions (it does not).
    pub fn acceptor(self: &Arc<Self>) -> Result<tokio_rustls::TlsAcceptor, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = SERVER_ALPN.iter().map(|p| p.to_vec()).collect();
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}

fn reload_if_changed(served: &ServerCertificate) {
    if !served.changed_on_disk() {
        return;
    }
    match served.reload() {
        Ok(()) => tracing::info!(
            cert = %served.files().cert.display(),
            fingerprint = %served.fingerprint(),
            "TLS certificate reloaded"
        ),
        Err(err) => tracing::error!(
            error = %err,
            fingerprint = %served.fingerprint(),
            "new TLS certificate refused; the previous one stays in service"
        ),
    }
}

impl ResolvesServerCert for SniCertificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let own = hello
            .server_name()
            .and_then(|name| self.by_host.load().get(name).map(|c| c.current()));
        own.or_else(|| self.default.as_ref().map(|d| d.current()))
    }
}
