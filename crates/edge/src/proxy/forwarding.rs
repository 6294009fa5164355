//! What the proxy tells the upstream about a request besides the request itself: which headers
//! stop at the edge (hop-by-hop), and the host, client and scheme it forwards. The upstream must
//! see the host the edge judged, and nothing a client wrote that claims another one:
//!
//! - exactly one `Host`: the one the decision read (the first `Host` header, or the HTTP/2
//!   authority without one); a `Connection` header naming `Host`, `Content-Length` or one of the
//!   forwarding headers below does not remove it (those fields are meant for every recipient,
//!   RFC 9110 §7.6.1);
//! - `X-Forwarded-Host` is that host. A peer that is not a trusted proxy cannot set it (its
//!   value is dropped) nor a `host=` parameter of `Forwarded` (removed from its elements); a
//!   trusted proxy's `X-Forwarded-Host` and `Forwarded` are passed on as they are;
//! - the peer is appended to `X-Forwarded-For`, `X-Forwarded-Proto` is the scheme the client
//!   used, and when the edge reads `Forwarded` from its trusted proxies
//!   ([`ForwardedHeader::Forwarded`]) it appends its own element too
//!   (`for=PEER;host="HOST";proto=SCHEME`), so a proxy behind it reads the same header.
use std::net::{IpAddr, SocketAddr};

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::enforce::client_addr::{canonical_ip, ForwardedHeader, TrustedProxies};

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static FORWARDED: HeaderName = HeaderName::from_static("forwarded");

/// Hop-by-hop headers (RFC 9110 §7.6.1) are not forwarded.
static HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

/// Fields meant for every recipient, which a `Connection` header naming them does not make
/// hop-by-hop: the host the edge judged, the body's length, and the forwarding headers.
static END_TO_END: [&HeaderName; 6] = [
    &header::HOST,
    &header::CONTENT_LENGTH,
    &X_FORWARDED_FOR,
    &X_FORWARDED_HOST,
    &X_FORWARDED_PROTO,
    &FORWARDED,
];

/// Drops the hop-by-hop headers, those a `Connection` header names (but not the fields of
/// [`END_TO_END`]) and `Upgrade`.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .filter(|name| !END_TO_END.contains(&name))
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
    headers.remove(header::UPGRADE);
}

/// The host the edge judged a request by: its first `Host` header when that is visible ASCII
/// (what the decision reads), else the HTTP/2 (or absolute-form) authority, else the first
/// `Host` as it is.
pub fn judged_host(
    headers: &HeaderMap,
    authority: Option<&http::uri::Authority>,
) -> Option<HeaderValue> {
    let first = headers.get(header::HOST);
    if let Some(value) = first.filter(|v| v.to_str().is_ok()) {
        return Some(value.clone());
    }
    authority
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        .or_else(|| first.cloned())
}

/// How a proxy writes the forwarding headers for its upstream: the one `Host` it judged,
/// `X-Forwarded-Host`, `X-Forwarded-For`, `X-Forwarded-Proto` and, with
/// [`ForwardedHeader::Forwarded`], an element of `Forwarded` (a client's own `X-Forwarded-Host`
/// and `Forwarded` `host=` dropped unless it is a trusted proxy). `netacl edge` and
/// `netacl-pingora` tell their upstreams the same.
#[derive(Debug, Clone, Default)]
pub struct Forwarding {
    trusted: TrustedProxies,
    header: ForwardedHeader,
}

impl Forwarding {
    /// Believing the forwarding headers of peers inside `trusted`, which write `header`.
    pub fn new(trusted: TrustedProxies, header: ForwardedHeader) -> Self {
        Self { trusted, header }
    }

    /// Sets the request's `Host` to `host` (the [`judged_host`]) and its forwarding headers,
    /// after the hop-by-hop headers are dropped.
    pub fn apply(
        &self,
        headers: &mut HeaderMap,
        host: Option<HeaderValue>,
        peer: Option<SocketAddr>,
        tls: bool,
    ) {
        let trusted_peer =
            peer.is_some_and(|p| !self.trusted.is_empty() && self.trusted.contains(p.ip()));
        match &host {
            Some(host) => {
                headers.insert(header::HOST, host.clone());
            }
            None => {
                headers.remove(header::HOST);
            }
        }
        if !trusted_peer {
            headers.remove(&X_FORWARDED_HOST);
            strip_forwarded_hosts(headers);
        }
        if !headers.contains_key(&X_FORWARDED_HOST) {
            if let Some(host) = &host {
                headers.insert(X_FORWARDED_HOST.clone(), host.clone());
            }
        }
        if let Some(peer) = peer {
            append_forwarded_for(headers, peer.ip());
        }
        let proto = if tls { "https" } else { "http" };
        headers.insert(X_FORWARDED_PROTO.clone(), HeaderValue::from_static(proto));
        if let (ForwardedHeader::Forwarded, Some(peer)) = (self.header, peer) {
            let element = forwarded_element(peer.ip(), host.as_ref(), proto);
            if let Ok(value) = HeaderValue::from_bytes(&element) {
                headers.append(FORWARDED.clone(), value);
            }
        }
    }
}

/// Appends the peer to `X-Forwarded-For` (one combined value).
fn append_forwarded_for(headers: &mut HeaderMap, peer: IpAddr) {
    let ip = canonical_ip(peer).to_string();
    let mut combined = String::new();
    for value in headers.get_all(&X_FORWARDED_FOR) {
        if let Ok(v) = value.to_str() {
            combined.push_str(v);
            combined.push_str(", ");
        }
    }
    combined.push_str(&ip);
    if let Ok(value) = HeaderValue::from_str(&combined) {
        headers.insert(X_FORWARDED_FOR.clone(), value);
    }
}

/// The edge's own `Forwarded` element: `for=PEER;host="HOST";proto=SCHEME` (RFC 7239: an IPv6
/// address bracketed and quoted, the host quoted since it may carry a port).
fn forwarded_element(peer: IpAddr, host: Option<&HeaderValue>, proto: &str) -> Vec<u8> {
    let mut out = match canonical_ip(peer) {
        IpAddr::V4(ip) => format!("for={ip}"),
        IpAddr::V6(ip) => format!("for=\"[{ip}]\""),
    }
    .into_bytes();
    if let Some(host) = host {
        out.extend_from_slice(b";host=\"");
        for &b in host.as_bytes() {
            if b == b'"' || b == b'\\' {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b'"');
    }
    out.extend_from_slice(b";proto=");
    out.extend_from_slice(proto.as_bytes());
    out
}

/// Removes the `host=` parameters from every `Forwarded` line (a line that is not well formed,
/// an unterminated quoted string, is dropped whole; a line left empty too).
fn strip_forwarded_hosts(headers: &mut HeaderMap) {
    if !headers.contains_key(&FORWARDED) {
        return;
    }
    let lines: Vec<Vec<u8>> = headers
        .get_all(&FORWARDED)
        .iter()
        .filter_map(|line| without_host_params(line.as_bytes()))
        .filter(|line| !line.is_empty())
        .collect();
    headers.remove(&FORWARDED);
    for line in lines {
        if let Ok(value) = HeaderValue::from_bytes(&line) {
            headers.append(FORWARDED.clone(), value);
        }
    }
}

/// One `Forwarded` line without its `host=` pairs, its elements joined with `, ` and their
/// pairs with `;` (empty ones left out); `None` when a quoted string is not terminated (where
/// the pairs end is then anyone's guess).
fn without_host_params(line: &[u8]) -> Option<Vec<u8>> {
    let mut elements: Vec<Vec<&[u8]>> = vec![Vec::new()];
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, &b) in line.iter().enumerate() {
        if quoted {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => quoted = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => quoted = true,
            b';' | b',' => {
                if let Some(pairs) = elements.last_mut() {
                    pairs.push(&line[start..i]);
                }
                if b == b',' {
                    elements.push(Vec::new());
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    if quoted {
        return None;
    }
    if let Some(pairs) = elements.last_mut() {
        pairs.push(&line[start..]);
    }
    let mut out = Vec::with_capacity(line.len());
    for pairs in elements {
        let kept: Vec<&[u8]> = pairs
            .into_iter()
            .map(|pair| pair.trim_ascii())
            .filter(|pair| !pair.is_empty() && !is_host_pair(pair))
            .collect();
        if kept.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.extend_from_slice(b", ");
        }
        out.extend_from_slice(&kept.join(&b';'));
    }
    Some(out)
}

/// Whether a `name=value` pair names `host` (any case, white space around the name ignored).
fn is_host_pair(pair: &[u8]) -> bool {
    let name = pair.split(|&b| b == b'=').next().unwrap_or_default();
    name.trim_ascii().eq_ignore_ascii_case(b"host")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value).unwrap(),
            );
        }
        map
    }

    fn values(map: &HeaderMap, name: &str) -> Vec<String> {
        map.get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    }

    #[test]
    fn connection_cannot_drop_end_to_end_fields() {
        let mut map = headers(&[
            (
                "connection",
                b"host, content-length, x-forwarded-for, forwarded, x-foo",
            ),
            ("host", b"acme.test"),
            ("content-length", b"3"),
            ("x-forwarded-for", b"192.0.2.1"),
            ("forwarded", b"for=192.0.2.1"),
            ("x-foo", b"1"),
            ("keep-alive", b"timeout=5"),
            ("upgrade", b"h2c"),
        ]);
        strip_hop_by_hop(&mut map);
        assert_eq!(values(&map, "host"), ["acme.test"]);
        assert_eq!(values(&map, "content-length"), ["3"]);
        assert_eq!(values(&map, "x-forwarded-for"), ["192.0.2.1"]);
        assert_eq!(values(&map, "forwarded"), ["for=192.0.2.1"]);
        for gone in ["x-foo", "connection", "keep-alive", "upgrade"] {
            assert!(!map.contains_key(gone), "{gone}");
        }
    }

    #[test]
    fn the_judged_host_is_the_first_readable_host_or_the_authority() {
        let authority: http::uri::Authority = "b.test:8443".parse().unwrap();
        let map = headers(&[("host", b"a.test"), ("host", b"b.test")]);
        assert_eq!(judged_host(&map, Some(&authority)).unwrap(), "a.test");
        let map = headers(&[("host", b"a.test\xff")]);
        assert_eq!(judged_host(&map, Some(&authority)).unwrap(), "b.test:8443");
        assert_eq!(
            judged_host(&map, None).unwrap().as_bytes(),
            b"a.test\xff".as_slice()
        );
        assert_eq!(judged_host(&HeaderMap::new(), None), None);
    }

    #[test]
    fn an_untrusted_peer_cannot_name_another_host() {
        let forwarding = Forwarding::new(
            TrustedProxies::parse(["10.0.0.0/8"]).unwrap(),
            ForwardedHeader::XForwardedFor,
        );
        let mut map = headers(&[
            ("host", b"acme.test"),
            ("host", b"beta.test"),
            ("x-forwarded-host", b"beta.test"),
            (
                "forwarded",
                b"for=192.0.2.1;host=beta.test;proto=https, HOST = \"beta.test\"",
            ),
            ("forwarded", b"for=\"unterminated;host=beta.test"),
        ]);
        let host = judged_host(&map, None);
        forwarding.apply(
            &mut map,
            host,
            Some("192.0.2.9:4000".parse().unwrap()),
            false,
        );
        assert_eq!(values(&map, "host"), ["acme.test"]);
        assert_eq!(values(&map, "x-forwarded-host"), ["acme.test"]);
        assert_eq!(values(&map, "forwarded"), ["for=192.0.2.1;proto=https"]);
        assert_eq!(values(&map, "x-forwarded-for"), ["192.0.2.9"]);
        assert_eq!(values(&map, "x-forwarded-proto"), ["http"]);
    }

    #[test]
    fn a_trusted_proxys_headers_pass_and_the_edge_appends_its_own_element() {
        let forwarding = Forwarding::new(
            TrustedProxies::parse(["10.0.0.0/8"]).unwrap(),
            ForwardedHeader::Forwarded,
        );
        let mut map = headers(&[
            ("host", b"acme.test"),
            ("x-forwarded-host", b"www.acme.test"),
            ("forwarded", b"for=192.0.2.1;host=www.acme.test"),
        ]);
        let host = judged_host(&map, None);
        forwarding.apply(&mut map, host, Some("10.0.0.2:4000".parse().unwrap()), true);
        assert_eq!(values(&map, "x-forwarded-host"), ["www.acme.test"]);
        assert_eq!(
            values(&map, "forwarded"),
            [
                "for=192.0.2.1;host=www.acme.test",
                "for=10.0.0.2;host=\"acme.test\";proto=https"
            ]
        );
        // Without a trusted proxy's own value, the judged host; an IPv6 peer bracketed.
        let mut map = headers(&[("host", b"acme.test:8080")]);
        let host = judged_host(&map, None);
        forwarding.apply(
            &mut map,
            host,
            Some("[2001:db8::1]:4000".parse().unwrap()),
            false,
        );
        assert_eq!(values(&map, "x-forwarded-host"), ["acme.test:8080"]);
        assert_eq!(
            values(&map, "forwarded"),
            ["for=\"[2001:db8::1]\";host=\"acme.test:8080\";proto=http"]
        );
    }
}
