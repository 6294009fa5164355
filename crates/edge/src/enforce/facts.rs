//! The facts of one request, gathered once, in a form that knows no proxy: what
//! [`Enforcer::decide_facts`](crate::Enforcer::decide_facts) decides from.
//!
//! The edge's own proxy and the tower layer build them from a hyper request
//! ([`Enforcer::request_facts`](crate::Enforcer::request_facts)); a proxy that hands netacl
//! something else (an SPOE message, an Envoy `CheckRequest`, a forward-auth request) fills the
//! same value from what it has, borrowing its strings: nothing is copied, nothing allocated.
//!
//! ```
//! use netacl_edge::{RequestAddrs, RequestFacts, RequestHost, TlsFacts};
//!
//! // Headers as a proxy holds them: any `HeaderLookup` (here an array of pairs).
//! let headers = [("user-agent", "curl/8.5.0")];
//! let facts = RequestFacts::new("/authorize", &headers)
//!     .with_addrs(RequestAddrs {
//!         connecting: "10.0.0.7".parse().unwrap(),
//!         client: Some("192.0.2.1".parse().unwrap()),
//!     })
//!     .with_host(RequestHost::new(Some("login.example.com"), None))
//!     .with_method("GET")
//!     .with_user_agent(Some("curl/8.5.0"))
//!     .with_tls(TlsFacts::new(Some("login.example.com"), "", ""));
//! assert_eq!(facts.hostname(), Some("login.example.com"));
//! ```
use http::HeaderMap;

use crate::enforce::client_addr::RequestAddrs;
use crate::enforce::connection::TlsInfo;
use crate::signals::httpsig::HeaderLookup;

/// The TLS facts of the connection a request came on (borrowed: see [`TlsInfo`] for the owned
/// form the edge's own TLS listener keeps per connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsFacts<'a> {
    /// The server name the client asked for (SNI), lowercased, without a trailing dot.
    pub sni: Option<&'a str>,
    /// The JA3 hash (32 lowercase hex digits; empty: unknown).
    pub ja3: &'a str,
    /// The JA4 fingerprint, lowercase (empty: unknown).
    pub ja4: &'a str,
}

impl<'a> TlsFacts<'a> {
    /// Facts given directly, already in their normal form (SNI lowercased without a trailing
    /// dot, fingerprints lowercase, as [`TlsInfo::new`] makes them).
    pub fn new(sni: Option<&'a str>, ja3: &'a str, ja4: &'a str) -> Self {
        Self { sni, ja3, ja4 }
    }
}

impl<'a> From<&'a TlsInfo> for TlsFacts<'a> {
    fn from(tls: &'a TlsInfo) -> Self {
        Self {
            sni: tls.sni.as_deref(),
            ja3: &tls.ja3,
            ja4: &tls.ja4,
        }
    }
}

/// The host a request names, as the edge distinguishes its sources: the TLS SNI (in
/// [`TlsFacts`]), the `Host` header and the request target's authority.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestHost<'a> {
    /// The first `Host` header field, if it is visible ASCII.
    pub header: Option<&'a str>,
    /// The request target's authority (HTTP/2 `:authority`, or an absolute-form target's).
    pub authority: Option<&'a str>,
    /// More than one `Host` field, or one that is not visible ASCII: which tenant the request
    /// names is the reader's guess (an upstream may take another one than the edge), so a
    /// multi-tenant edge refuses it as misdirected. A single-tenant edge reads `header`.
    pub unclear: bool,
}

impl<'a> RequestHost<'a> {
    /// One `Host` value (or none) and the target's authority (or none).
    pub fn new(header: Option<&'a str>, authority: Option<&'a str>) -> Self {
        Self {
            header,
            authority,
            unclear: false,
        }
    }

    /// The same host, marked unclear (see [`RequestHost::unclear`]).
    pub fn with_unclear(mut self, unclear: bool) -> Self {
        self.unclear = unclear;
        self
    }

    /// The host of a hyper request: its `Host` fields and the target's `authority`.
    pub fn from_headers(headers: &'a HeaderMap, authority: Option<&'a str>) -> Self {
        let mut given = headers.get_all(http::header::HOST).iter();
        let first = given.next();
        Self {
            header: first.and_then(|v| v.to_str().ok()),
            authority,
            unclear: first.is_some_and(|v| v.to_str().is_err()) || given.next().is_some(),
        }
    }

    /// The `Host` header, else the authority: the host the request names over HTTP.
    pub fn named(&self) -> Option<&'a str> {
        self.header.or(self.authority)
    }
}

/// Everything the decision reads about one request, gathered once and borrowed from wherever
/// the proxy in front holds it (see the module docs). Build it with [`RequestFacts::new`] and
/// the `with_` steps, or from a hyper request with
/// [`Enforcer::request_facts`](crate::Enforcer::request_facts).
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct RequestFacts<'a> {
    /// The connecting and the client address (the client resolved over the trusted proxies);
    /// `None`: the request came with no connection facts, and is decided with no address.
    pub addrs: Option<RequestAddrs>,
    /// The TLS facts; `None`: plain HTTP.
    pub tls: Option<TlsFacts<'a>>,
    /// The host the request names.
    pub host: RequestHost<'a>,
    /// The method (`GET`); `None`: unknown, and no signature is verified.
    pub method: Option<&'a str>,
    /// The path of the request target, as received (the decision derives its scope).
    pub path: &'a str,
    /// The query of the request target, without `?`.
    pub query: Option<&'a str>,
    /// The first `User-Agent` field, if it is visible ASCII.
    pub user_agent: Option<&'a str>,
    /// The scheme the client used (`http` or `https`), when the proxy in front reports it
    /// (`X-Forwarded-Proto` from a trusted proxy, Envoy's `scheme`, HAProxy's `ssl_fc`);
    /// `None`: `https` with TLS facts, else `http`. Read only to verify an RFC 9421 signature
    /// covering `@scheme` or `@target-uri`.
    pub scheme: Option<&'a str>,
    /// The header fields (read only to verify an RFC 9421 signature, when a live rule names
    /// `http_message_signature`).
    pub headers: &'a dyn HeaderLookup,
}

impl std::fmt::Debug for RequestFacts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestFacts")
            .field("addrs", &self.addrs)
            .field("tls", &self.tls)
            .field("host", &self.host)
            .field("method", &self.method)
            .field("path", &self.path)
            .field("query", &self.query)
            .field("user_agent", &self.user_agent)
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl<'a> RequestFacts<'a> {
    /// A request for `path` with `headers`, and nothing else known yet: no address, no TLS, no
    /// host, no method, no query, no user agent.
    pub fn new(path: &'a str, headers: &'a dyn HeaderLookup) -> Self {
        Self {
            addrs: None,
            tls: None,
            host: RequestHost::default(),
            method: None,
            path,
            query: None,
            user_agent: None,
            scheme: None,
            headers,
        }
    }

    /// With the request's addresses.
    pub fn with_addrs(mut self, addrs: RequestAddrs) -> Self {
        self.addrs = Some(addrs);
        self
    }

    /// With the connection's TLS facts.
    pub fn with_tls(mut self, tls: TlsFacts<'a>) -> Self {
        self.tls = Some(tls);
        self
    }

    /// With the host the request names.
    pub fn with_host(mut self, host: RequestHost<'a>) -> Self {
        self.host = host;
        self
    }

    /// With the method (a signature can then be verified).
    pub fn with_method(mut self, method: &'a str) -> Self {
        self.method = Some(method);
        self
    }

    /// With the target's query (without `?`).
    pub fn with_query(mut self, query: Option<&'a str>) -> Self {
        self.query = query;
        self
    }

    /// With the user agent.
    pub fn with_user_agent(mut self, user_agent: Option<&'a str>) -> Self {
        self.user_agent = user_agent;
        self
    }

    /// With the scheme the client used, as the proxy in front reports it.
    pub fn with_scheme(mut self, scheme: Option<&'a str>) -> Self {
        self.scheme = scheme;
        self
    }

    /// The scheme the client used: the one reported, else `https` with TLS facts, else `http`.
    pub fn scheme(&self) -> &'a str {
        match (self.scheme, self.tls) {
            (Some(scheme), _) => scheme,
            (None, Some(_)) => "https",
            (None, None) => "http",
        }
    }

    /// The client address, if known.
    pub fn client_ip(&self) -> Option<std::net::IpAddr> {
        self.addrs.and_then(|a| a.client)
    }

    /// The host name the `hostnames` signal reads: the SNI under TLS, else the host of the
    /// `Host` header (or the authority) without its port.
    pub fn hostname(&self) -> Option<&'a str> {
        match self.tls.and_then(|t| t.sni) {
            Some(sni) => Some(sni),
            None => self.host.named().and_then(host_without_port),
        }
    }
}

/// The host of a `Host` header value: `example.com:8443` → `example.com`,
/// `[2001:db8::1]:443` → `2001:db8::1`.
pub(crate) fn host_without_port(value: &str) -> Option<&str> {
    let value = value.trim();
    if let Some(rest) = value.strip_prefix('[') {
        return rest.split_once(']').map(|(h, _)| h);
    }
    let host = match value.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => value,
    };
    (!host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::httpsig::visible_ascii;
    use http::HeaderValue;

    #[test]
    fn the_scheme_is_the_reported_one_else_the_tls_facts() {
        let headers = http::HeaderMap::new();
        let facts = RequestFacts::new("/", &headers);
        assert_eq!(facts.scheme(), "http");
        let tls = facts.with_tls(TlsFacts::new(None, "", ""));
        assert_eq!(tls.scheme(), "https");
        assert_eq!(tls.with_scheme(Some("http")).scheme(), "http");
        assert_eq!(facts.with_scheme(Some("https")).scheme(), "https");
    }

    #[test]
    fn hosts() {
        assert_eq!(host_without_port("Example.com:8443"), Some("Example.com"));
        assert_eq!(host_without_port("example.com"), Some("example.com"));
        assert_eq!(host_without_port("[2001:db8::1]:443"), Some("2001:db8::1"));
        assert_eq!(host_without_port(":80"), None);
    }

    #[test]
    fn visible_ascii_is_header_value_to_str() {
        for bytes in [
            &b"plain"[..],
            b"tab\there",
            b"",
            b"caf\xc3\xa9",
            b"\x80",
            b"~ !",
        ] {
            let value = HeaderValue::from_bytes(bytes).unwrap();
            assert_eq!(visible_ascii(bytes), value.to_str().ok(), "{bytes:?}");
        }
        // Bytes a HeaderValue refuses (other proxies may hand them): not text either.
        assert_eq!(visible_ascii(b"\x7f"), None);
        assert_eq!(visible_ascii(b"a\x1fb"), None);
    }

    #[test]
    fn slices_and_header_maps_look_up_alike() {
        let mut map = HeaderMap::new();
        map.append("signature", HeaderValue::from_static("a"));
        map.append("x-other", HeaderValue::from_static("b"));
        map.append("signature", HeaderValue::from_static("c"));
        let pairs = [("Signature", "a"), ("x-other", "b"), ("SIGNATURE", "c")];
        for lookup in [&map as &dyn HeaderLookup, &pairs] {
            let mut seen = Vec::new();
            lookup.each_value("signature", &mut |v| seen.push(v.to_vec()));
            assert_eq!(seen, [b"a".to_vec(), b"c".to_vec()]);
            let mut none = 0;
            lookup.each_value("absent", &mut |_| none += 1);
            assert_eq!(none, 0);
        }
    }

    #[test]
    fn an_unclear_host() {
        let mut map = HeaderMap::new();
        assert_eq!(
            RequestHost::from_headers(&map, None),
            RequestHost::default()
        );
        map.append("host", HeaderValue::from_static("a.example"));
        let one = RequestHost::from_headers(&map, Some("b.example"));
        assert_eq!(
            (one.header, one.authority, one.unclear),
            (Some("a.example"), Some("b.example"), false)
        );
        map.append("host", HeaderValue::from_static("b.example"));
        let two = RequestHost::from_headers(&map, None);
        assert_eq!((two.header, two.unclear), (Some("a.example"), true));
        let mut odd = HeaderMap::new();
        odd.append("host", HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap());
        let odd = RequestHost::from_headers(&odd, None);
        assert_eq!((odd.header, odd.unclear), (None, true));
    }
}
