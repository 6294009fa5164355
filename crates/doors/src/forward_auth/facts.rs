//! The facts of the request a proxy asks about, read from what it sends to a forward-auth
//! server: [`read_facts`].
use std::net::SocketAddr;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::uri::{Authority, PathAndQuery};
use http::{Method, Uri};
use netacl_edge::{ConnectionInfo, TlsInfo};

use crate::door::reported_scheme;

/// `X-Forwarded-Method` (Caddy, Traefik; the shipped nginx template sets it too).
pub static X_FORWARDED_METHOD: HeaderName = HeaderName::from_static("x-forwarded-method");
/// `X-Original-Method` (nginx configurations written for other auth servers).
pub static X_ORIGINAL_METHOD: HeaderName = HeaderName::from_static("x-original-method");
/// `X-Forwarded-Uri` (Caddy, Traefik; the shipped nginx template sets it too).
pub static X_FORWARDED_URI: HeaderName = HeaderName::from_static("x-forwarded-uri");
/// `X-Original-URI` (the usual nginx `auth_request` configuration).
pub static X_ORIGINAL_URI: HeaderName = HeaderName::from_static("x-original-uri");
/// `X-Forwarded-Host`.
pub static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
/// `X-Forwarded-Proto` (Caddy, Traefik, the shipped nginx template): the scheme the client
/// used, read from a trusted proxy only.
pub static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
/// `X-Netacl-Redirect-Status: 401`: answer a redirect with 401 and `Location` instead of 302
/// (nginx's `auth_request` passes only 2xx, 401 and 403; see the book's nginx chapter).
pub static X_NETACL_REDIRECT_STATUS: HeaderName =
    HeaderName::from_static("x-netacl-redirect-status");

/// The longest JA4 fingerprint header value read (a JA4 is 36 characters; the raw forms are
/// longer but are not what rules hold).
pub const MAX_JA4: usize = 128;

/// Which headers carry the TLS fingerprints the proxy computed (none by default: a
/// forward-auth server sees no ClientHello). Read only from a trusted proxy.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct FactsOptions {
    /// The header holding the client's JA3 hash (`--forward-auth-ja3-header`).
    pub ja3_header: Option<HeaderName>,
    /// The header holding the client's JA4 fingerprint (`--forward-auth-ja4-header`).
    pub ja4_header: Option<HeaderName>,
}

/// How a redirect decision is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RedirectStatus {
    /// `302 Found` with `Location` (Caddy, Traefik, Envoy: any status reaches the client).
    #[default]
    Found,
    /// `401 Unauthorized` with `Location`, asked for with `X-Netacl-Redirect-Status: 401`
    /// (nginx: its configuration turns it into the 302).
    Unauthorized,
}

/// The facts of the request the proxy asks about.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ForwardAuthFacts {
    /// The client's method: `X-Forwarded-Method`, else `X-Original-Method`, else this
    /// request's.
    pub method: Method,
    /// The client's path and query: `X-Forwarded-Uri`, else `X-Original-URI`, else this
    /// request's (origin-form; an absolute-form URI keeps only its path and query).
    pub uri: Uri,
    /// The host the client asked for: `X-Forwarded-Host`, else `Host` (else, over HTTP/2, this
    /// request's authority); `None` when none was sent.
    pub host: Option<HeaderValue>,
    /// The JA3 and JA4 from the configured headers (a trusted proxy's only; one may be empty
    /// when only the other was sent).
    pub tls: Option<(String, String)>,
    /// The scheme the client used, from a trusted proxy's `X-Forwarded-Proto` (`http` or
    /// `https`; another value is not taken); `None`: the TLS facts decide.
    pub scheme: Option<&'static str>,
    /// How a redirect is answered.
    pub redirect: RedirectStatus,
}

/// Why a forward-auth request was refused (400) before any decision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FactsError {
    /// A header that must appear at most once appeared more than once.
    #[error("more than one {0} header")]
    Repeated(&'static str),
    /// The method header is not an HTTP method.
    #[error("{0} is not an HTTP method")]
    Method(&'static str),
    /// The URI header is not a request target (origin-form `/path?query`, or absolute-form).
    #[error("{0} is not a request target")]
    Uri(&'static str),
    /// The host header is not a host (`name[:port]`, `[v6]:port`).
    #[error("{0} is not a host")]
    Host(&'static str),
    /// A fingerprint header is not a JA3 hash (32 hexadecimal digits) or a JA4 fingerprint.
    #[error("the {0} header is not a fingerprint")]
    Fingerprint(&'static str),
    /// `X-Netacl-Redirect-Status` is neither `302` nor `401`.
    #[error("x-netacl-redirect-status must be 302 or 401")]
    RedirectStatus,
}

/// The one value of `name`, `None` when absent; more than one line is an error.
fn single<'h>(
    headers: &'h HeaderMap,
    name: &HeaderName,
    label: &'static str,
) -> Result<Option<&'h HeaderValue>, FactsError> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(FactsError::Repeated(label));
    }
    Ok(first)
}

/// The first of `names` present, with its label; each of them must appear at most once.
fn first_of<'h>(
    headers: &'h HeaderMap,
    names: [(&HeaderName, &'static str); 2],
) -> Result<Option<(&'h HeaderValue, &'static str)>, FactsError> {
    let mut found = None;
    for (name, label) in names {
        if let Some(value) = single(headers, name, label)? {
            found = found.or(Some((value, label)));
        }
    }
    Ok(found)
}

/// Reads the facts of the request the proxy asks about from the request it sent: `method`,
/// `uri` and `headers` are the forward-auth request's own; `trusted` says whether its peer is a
/// trusted proxy (`ClientAddrResolver::trusts`), the only kind whose fingerprint headers are
/// read. The client address is not read here: the enforcer walks the forwarding header of the
/// [`decision_headers`](ForwardAuthFacts::decision_headers) over `--trusted-proxy` as the edge
/// does.
///
/// Never panics, whatever the bytes.
///
/// # Errors
///
/// A [`FactsError`] when a fact is malformed or given twice: the request gets 400, never an
/// allow.
pub fn read_facts(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    options: &FactsOptions,
    trusted: bool,
) -> Result<ForwardAuthFacts, FactsError> {
    let own_uri = uri;
    let method = match first_of(
        headers,
        [
            (&X_FORWARDED_METHOD, "x-forwarded-method"),
            (&X_ORIGINAL_METHOD, "x-original-method"),
        ],
    )? {
        Some((value, label)) => {
            Method::from_bytes(value.as_bytes()).map_err(|_| FactsError::Method(label))?
        }
        None => method.clone(),
    };
    let uri = match first_of(
        headers,
        [
            (&X_FORWARDED_URI, "x-forwarded-uri"),
            (&X_ORIGINAL_URI, "x-original-uri"),
        ],
    )? {
        Some((value, label)) => target(value.as_bytes()).ok_or(FactsError::Uri(label))?,
        None => match uri.path_and_query() {
            Some(own) => {
                target(own.as_str().as_bytes()).ok_or(FactsError::Uri("request target"))?
            }
            None => Uri::from_static("/"),
        },
    };
    let forwarded_host = single(headers, &X_FORWARDED_HOST, "x-forwarded-host")?;
    let host_header = single(headers, &http::header::HOST, "host")?;
    let host = match (forwarded_host, host_header) {
        (Some(value), _) => Some(checked_host(value, "x-forwarded-host")?),
        (None, Some(value)) => Some(checked_host(value, "host")?),
        // HTTP/2 carries the host in the `:authority`.
        (None, None) => own_uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
            .map(|v| checked_host(&v, "host"))
            .transpose()?,
    };
    let tls = if trusted {
        fingerprints(headers, options)?
    } else {
        None
    };
    let scheme = match single(headers, &X_FORWARDED_PROTO, "x-forwarded-proto")? {
        Some(value) if trusted => reported_scheme(value.as_bytes()),
        _ => None,
    };
    let redirect = match single(
        headers,
        &X_NETACL_REDIRECT_STATUS,
        "x-netacl-redirect-status",
    )? {
        None => RedirectStatus::Found,
        Some(v) if v.as_bytes() == b"302" => RedirectStatus::Found,
        Some(v) if v.as_bytes() == b"401" => RedirectStatus::Unauthorized,
        Some(_) => return Err(FactsError::RedirectStatus),
    };
    Ok(ForwardAuthFacts {
        method,
        uri,
        host,
        tls,
        scheme,
        redirect,
    })
}

/// A request target: origin-form (`/path?query`) as it is, absolute-form (`http://host/path`)
/// reduced to its path and query; anything else (`*`, authority-form, bytes no URI holds) is
/// `None`.
fn target(bytes: &[u8]) -> Option<Uri> {
    if bytes.first() == Some(&b'/') {
        let path = PathAndQuery::try_from(bytes).ok()?;
        return Some(Uri::from(path));
    }
    let uri = Uri::try_from(bytes).ok()?;
    match (uri.scheme_str(), uri.authority(), uri.path_and_query()) {
        // An absolute URI's path may be empty (`http://host?q`, `http://host#f`); its target is
        // then `/` (RFC 9112, 3.2.1), and the fragment is no part of it. `PathAndQuery::path`
        // gives `/` for the empty path, so the target is rebuilt from the path and the query.
        (Some("http" | "https"), Some(_), Some(path)) => {
            let origin = match path.query() {
                Some(query) => format!("{}?{query}", path.path()),
                None => path.path().to_owned(),
            };
            PathAndQuery::try_from(origin).ok().map(Uri::from)
        }
        (Some("http" | "https"), Some(_), None) => Some(Uri::from_static("/")),
        _ => None,
    }
}

/// `value` if it is one host (`name`, `name:port`, `[v6]`, `[v6]:port`): no user info, no
/// list, no path.
fn checked_host(value: &HeaderValue, label: &'static str) -> Result<HeaderValue, FactsError> {
    let bytes = value.as_bytes();
    let ok = !bytes.is_empty()
        && !bytes
            .iter()
            .any(|b| matches!(b, b'@' | b',' | b'/' | b' ' | b'\t'))
        && Authority::try_from(bytes).is_ok();
    if ok {
        Ok(value.clone())
    } else {
        Err(FactsError::Host(label))
    }
}

/// The host part of a checked host value, without port or brackets, for the SNI the
/// fingerprints travel with.
fn host_name(value: &HeaderValue) -> Option<&str> {
    let text = value.to_str().ok()?;
    if let Some(rest) = text.strip_prefix('[') {
        return rest.split_once(']').map(|(h, _)| h);
    }
    Some(text.rsplit_once(':').map_or(text, |(h, _)| h))
}

fn is_ja3(value: &[u8]) -> bool {
    value.len() == 32 && value.iter().all(u8::is_ascii_hexdigit)
}

fn is_ja4(value: &[u8]) -> bool {
    (1..=MAX_JA4).contains(&value.len())
        && value
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// The JA3 and JA4 the proxy put in the configured headers: `Ok(None)` when neither is
/// configured or present.
fn fingerprints(
    headers: &HeaderMap,
    options: &FactsOptions,
) -> Result<Option<(String, String)>, FactsError> {
    let read = |name: &Option<HeaderName>,
                label: &'static str,
                valid: fn(&[u8]) -> bool|
     -> Result<Option<String>, FactsError> {
        let Some(name) = name else { return Ok(None) };
        match single(headers, name, label)? {
            None => Ok(None),
            Some(v) if valid(v.as_bytes()) => Ok(v.to_str().ok().map(str::to_owned)),
            Some(_) => Err(FactsError::Fingerprint(label)),
        }
    };
    let ja3 = read(&options.ja3_header, "ja3", is_ja3)?;
    let ja4 = read(&options.ja4_header, "ja4", is_ja4)?;
    Ok(match (ja3, ja4) {
        (None, None) => None,
        (ja3, ja4) => Some((ja3.unwrap_or_default(), ja4.unwrap_or_default())),
    })
}

impl ForwardAuthFacts {
    /// The headers the enforcer decides with: the forward-auth request's own (user agent,
    /// signatures and the forwarding header as the proxy sent them) with exactly one `Host`,
    /// the [`host`](Self::host) asked about (none when none was sent).
    pub fn decision_headers(&self, mut headers: HeaderMap) -> HeaderMap {
        headers.remove(http::header::HOST);
        if let Some(host) = &self.host {
            headers.insert(http::header::HOST, host.clone());
        }
        headers
    }

    /// The connection the enforcer decides with: the proxy as the peer (its forwarding header
    /// is walked over `--trusted-proxy`), carrying the fingerprints the proxy sent, with the
    /// host asked about as their server name.
    pub fn connection(&self, peer: SocketAddr) -> ConnectionInfo {
        let info = ConnectionInfo::new(peer);
        match &self.tls {
            Some((ja3, ja4)) => {
                let sni = self.host.as_ref().and_then(host_name);
                info.with_tls(TlsInfo::new(sni, ja3, ja4))
            }
            None => info,
        }
    }
}
