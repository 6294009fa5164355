//! TLS for the commands: the admin API over HTTPS (`netacl serve --tls-cert --tls-key`), the
//! rule that keeps plain HTTP on loopback unless an insecure flag says otherwise, and the
//! trust flags of the edge's clients (`--rules-ca`, `--upstream-ca`). Certificates are loaded
//! and reloaded by `netacl-tls`, the same code the edge's own TLS listener uses.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use netacl_edge::{EdgeConfig, RemoteRules};
use netacl_listener::{ConnectionGate, RequestBody};
use netacl_tls::{ClientTrust, ServerCertificate, TlsFiles};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::args::duration::parse_duration;

/// Time a client has to complete the TLS handshake with the admin API.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// TLS flags of `netacl serve` (flattened into its arguments).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeTlsArgs {
    /// Serve the admin API over HTTPS on --listen with this certificate chain (PEM, leaf
    /// first); needs --tls-key. Reloaded when the file is replaced.
    #[arg(long, env = "NETACL_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "NETACL_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// With --tls-cert: also serve the admin API over plain HTTP on this address (loopback
    /// only, unless --allow-insecure-http).
    #[arg(long, env = "NETACL_LISTEN_HTTP", requires = "tls_cert")]
    listen_http: Option<String>,
    /// Allow plain HTTP on an address that is not loopback (client secrets and bearer tokens
    /// then cross the network in clear: only behind a TLS-terminating proxy on a trusted
    /// network).
    #[arg(long, env = "NETACL_ALLOW_INSECURE_HTTP")]
    allow_insecure_http: bool,
    /// How often the certificate and key files are checked for replacement (also the
    /// in-process edge's, --edge-tls-cert).
    #[arg(long, env = "NETACL_TLS_RELOAD_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    tls_reload_interval: Duration,
}

/// How the admin API is served: its listeners, ready to serve.
pub struct AdminTransport {
    certificate: Option<Arc<ServerCertificate>>,
    plain: Option<TcpListener>,
    reload_interval: Duration,
}

/// Refuses plain HTTP on an address that is not loopback unless allowed.
fn check_plain_http(addr: SocketAddr, allowed: bool, flag: &str) -> anyhow::Result<()> {
    if addr.ip().to_canonical().is_loopback() {
        return Ok(());
    }
    if !allowed {
        bail!(
            "refusing to serve the admin API over plain HTTP on {addr} ({flag}), which is not a \
             loopback address: client secrets and bearer tokens would cross the network in clear. \
             Give --tls-cert and --tls-key to serve HTTPS, or --allow-insecure-http if a \
             TLS-terminating proxy on a trusted network is in front"
        );
    }
    tracing::warn!(
        %addr,
        "the admin API is served over plain HTTP on a non-loopback address \
         (--allow-insecure-http): client secrets and tokens cross the network in clear"
    );
    Ok(())
}

impl ServeTlsArgs {
    /// Loads the certificate (an error names the file at fault) and binds `--listen-http`;
    /// refuses plain HTTP off loopback unless allowed. `main` is the address `--listen`
    /// bound.
    pub async fn transport(&self, main: SocketAddr) -> anyhow::Result<AdminTransport> {
        let certificate = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                let files = TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                };
                Some(ServerCertificate::load(files).context("cannot use --tls-cert/--tls-key")?)
            }
            _ => None,
        };
        if certificate.is_none() {
            check_plain_http(main, self.allow_insecure_http, "--listen")?;
        }
        let plain = match &self.listen_http {
            Some(addr) => {
                let listener = TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen on {addr} (--listen-http)"))?;
                let local = listener.local_addr().context("no local address")?;
                check_plain_http(local, self.allow_insecure_http, "--listen-http")?;
                Some(listener)
            }
            None => None,
        };
        Ok(AdminTransport {
            certificate,
            plain,
            reload_interval: self.tls_reload_interval,
        })
    }

    /// The certificate files' reload interval, for the in-process edge.
    pub fn reload_interval(&self) -> Duration {
        self.tls_reload_interval
    }
}

impl AdminTransport {
    /// `https` or `http`: what `--listen` serves.
    pub fn scheme(&self) -> &'static str {
        if self.certificate.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// The extra plain-HTTP listener's address, if any.
    pub fn plain_addr(&self) -> Option<SocketAddr> {
        self.plain.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The base URL a client uses to reach `--listen` (`main`): over HTTPS the tenant domain,
    /// which the certificate names.
    pub fn base_url(&self, main: SocketAddr, tenant_domain: &str) -> String {
        match self.certificate {
            Some(_) => format!("https://{tenant_domain}"),
            None => format!("http://{main}"),
        }
    }

    /// Serves `router` on `main` (HTTPS with the certificate, or plain HTTP) and on the plain
    /// listener, every connection admitted and served by `gate` (its caps and timeouts), until
    /// the gate closes; reloads the certificate when its files are replaced.
    ///
    /// Every request carries the peer as `ConnectInfo<SocketAddr>` (what the rate limits and
    /// logs read), and over TLS the [`netacl_server::TlsTransport`] mark (the watch sends sealed
    /// key material over TLS only), as the router always received them.
    pub async fn serve(
        self,
        main: TcpListener,
        router: axum::Router,
        gate: ConnectionGate,
    ) -> std::io::Result<()> {
        let plain = async {
            if let Some(listener) = self.plain {
                serve_plain(listener, gate.clone(), router.clone()).await;
            }
            Ok::<_, std::io::Error>(())
        };
        let main = async {
            match &self.certificate {
                Some(certificate) => {
                    let acceptor = certificate
                        .acceptor()
                        .map_err(|e| std::io::Error::other(e.to_string()))?;
                    let watcher = certificate.watch(self.reload_interval);
                    serve_tls(main, gate.clone(), router.clone(), acceptor).await;
                    watcher.abort();
                }
                None => serve_plain(main, gate.clone(), router.clone()).await,
            }
            Ok::<_, std::io::Error>(())
        };
        tokio::try_join!(main, plain).map(|_| ())
    }
}

/// The router as the service of one connection from `peer`: each request gets
/// `ConnectInfo(peer)`, and `TlsTransport` when the connection is TLS.
fn connection_service(
    router: axum::Router,
    peer: SocketAddr,
    tls: bool,
) -> impl hyper::service::Service<
    http::Request<RequestBody>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = impl Send + 'static,
> + Send
       + 'static {
    hyper::service::service_fn(move |mut request: http::Request<RequestBody>| {
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        if tls {
            request.extensions_mut().insert(netacl_server::TlsTransport);
        }
        tower::ServiceExt::oneshot(router.clone(), request)
    })
}

/// Plain HTTP: every admitted connection served at once.
async fn serve_plain(listener: TcpListener, gate: ConnectionGate, router: axum::Router) {
    while let Some((stream, peer, admitted)) = gate.accept(&listener).await {
        tokio::spawn(admitted.serve(stream, connection_service(router.clone(), peer, false)));
    }
}

/// HTTPS: each admitted connection's handshake runs in its own task (bounded by
/// [`HANDSHAKE_TIMEOUT`]), so a slow client never holds up the others; a failed handshake is
/// logged at `DEBUG` and forgotten.
async fn serve_tls(
    listener: TcpListener,
    gate: ConnectionGate,
    router: axum::Router,
    acceptor: TlsAcceptor,
) {
    while let Some((stream, peer, admitted)) = gate.accept(&listener).await {
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
            match admitted.handshake(handshake).await {
                // Evicted or shutting down before the handshake completed.
                None => {}
                Some(Ok(Ok(tls))) => {
                    admitted
                        .serve(tls, connection_service(router, peer, true))
                        .await
                }
                Some(Ok(Err(err))) => {
                    tracing::debug!(%peer, error = %err, "TLS handshake failed");
                }
                Some(Err(_)) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

/// TLS flags of `netacl edge` (flattened into its arguments).
#[derive(clap::Args, Debug, Clone)]
pub struct EdgeTlsArgs {
    /// Trust only the CA certificates of this PEM file for an https:// --upstream (default:
    /// the system's roots).
    #[arg(long, env = "NETACL_EDGE_UPSTREAM_CA")]
    upstream_ca: Option<PathBuf>,
    /// Trust only the CA certificates of this PEM file for an https:// --rules-url (default:
    /// the system's roots).
    #[arg(long, env = "NETACL_EDGE_RULES_CA", requires = "rules_url")]
    rules_ca: Option<PathBuf>,
    /// Allow --rules-url http:// to an address that is not loopback: the client secret and
    /// tokens then cross the network in clear.
    #[arg(
        long,
        env = "NETACL_EDGE_ALLOW_INSECURE_RULES_URL",
        requires = "rules_url"
    )]
    allow_insecure_rules_url: bool,
    /// How often the --tls-cert and --tls-key files are checked for replacement.
    #[arg(long, env = "NETACL_EDGE_TLS_RELOAD_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    tls_reload_interval: Duration,
}

fn trust(ca: &Option<PathBuf>) -> ClientTrust {
    ca.clone()
        .map_or(ClientTrust::SystemRoots, ClientTrust::CaFile)
}

impl EdgeTlsArgs {
    /// Sets the upstream's trust and the certificate reload interval.
    pub fn apply(&self, config: &mut EdgeConfig) {
        config.upstream_trust = trust(&self.upstream_ca);
        config.tls_reload_interval = self.tls_reload_interval;
    }

    /// Whom an https:// --platform-url must chain to (`--rules-ca`, else the system's roots).
    pub fn platform_trust(&self) -> netacl_edge::ClientTrust {
        trust(&self.rules_ca)
    }

    /// Sets the rule source's trust and whether plain HTTP off loopback is allowed.
    pub fn apply_remote(&self, remote: &mut RemoteRules) {
        remote.trust = trust(&self.rules_ca);
        remote.allow_insecure_http = self.allow_insecure_rules_url;
    }
}

/// TLS flags of the in-process edge of `netacl serve` (flattened into `--edge-*`).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeEdgeTlsArgs {
    /// Trust only the CA certificates of this PEM file for an https:// --edge-upstream
    /// (default: the system's roots).
    #[arg(long = "edge-upstream-ca", env = "NETACL_EDGE_UPSTREAM_CA")]
    edge_upstream_ca: Option<PathBuf>,
}

impl ServeEdgeTlsArgs {
    /// Sets the upstream's trust.
    pub fn apply(&self, config: &mut EdgeConfig) {
        config.upstream_trust = trust(&self.edge_upstream_ca);
    }
}

#[cfg(test)]
mod tests {
    use super::check_plain_http;

    #[test]
    fn plain_http_stays_on_loopback_unless_allowed() {
        for ok in ["127.0.0.1:8080", "[::1]:8080", "[::ffff:127.0.0.1]:80"] {
            assert!(check_plain_http(ok.parse().unwrap(), false, "--listen").is_ok());
        }
        let err = check_plain_http("0.0.0.0:8080".parse().unwrap(), false, "--listen")
            .unwrap_err()
            .to_string();
        assert!(err.contains("0.0.0.0:8080 (--listen)"), "{err}");
        assert!(err.contains("--tls-cert"), "{err}");
        assert!(err.contains("--allow-insecure-http"), "{err}");
        assert!(check_plain_http("[::]:8080".parse().unwrap(), false, "--listen").is_err());
        assert!(check_plain_http("10.0.0.1:80".parse().unwrap(), true, "--listen").is_ok());
    }
}
