//! Which address is the client's: the TCP peer, or what a trusted reverse proxy in front of the
//! edge says it was.
//!
//! # Rules
//!
//! - The **connecting address** is always the TCP peer.
//! - The **client address** is the peer, unless the peer lies inside one of the configured
//!   trusted-proxy CIDRs. Only then is the forwarding header read (a header from anyone else is
//!   ignored: any client can write one).
//! - The header is walked **right to left** (the rightmost entry was written by the proxy closest
//!   to the edge). Entries inside the trusted CIDRs are skipped; the first untrusted entry is the
//!   client address. When every entry is trusted, the leftmost one is the client address.
//! - Several header lines of the same name are one list, concatenated in the order they arrived.
//! - A **malformed** entry (not an address, an empty element, a value that is not ASCII), an
//!   `unknown` or obfuscated (`_hidden`) `Forwarded` identifier, or a `Forwarded` element without
//!   `for=` **stops the walk**: the client address is then the last trusted hop's address (the
//!   peer, or the last trusted entry walked). Nothing to the left of a broken entry can be
//!   vouched for, and the hop that wrote it is the best we know.
//! - Addresses are canonicalised: an IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is the IPv4
//!   address, both when matched against the trusted CIDRs and as the result.
//!
//! # Which header
//!
//! Exactly one header is read, chosen by [`ForwardedHeader`]; the default is
//! `X-Forwarded-For`. **When both `X-Forwarded-For` and `Forwarded` are present, the configured
//! one wins and the other is ignored entirely.** A trusted proxy only vouches for the header it
//! writes: a proxy that appends to `X-Forwarded-For` passes a client's forged `Forwarded` through
//! untouched (and the other way round), so falling back from one to the other, or preferring
//! whichever is present, would let a client choose its own address.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use http::header::{HeaderMap, HeaderName};
use ipnet::{Ipv4Net, Ipv6Net};

/// The `Forwarded` header (RFC 7239).
static FORWARDED: HeaderName = HeaderName::from_static("forwarded");
/// The `X-Forwarded-For` header.
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// An error in the trusted-proxy configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrustedProxyError {
    /// A `--trusted-proxy` value is neither an address nor a CIDR.
    #[error(
        "invalid trusted-proxy CIDR {value:?}: expected an address or a CIDR such as 10.0.0.0/8"
    )]
    InvalidCidr {
        /// The value as given.
        value: String,
    },
}

/// The networks whose forwarding headers are believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    v4: Vec<Ipv4Net>,
    v6: Vec<Ipv6Net>,
}

impl TrustedProxies {
    /// No trusted proxies: the client address is always the peer.
    pub fn none() -> Self {
        Self::default()
    }

    /// Parses CIDRs or bare addresses (`10.0.0.0/8`, `192.0.2.7`, `2001:db8::/32`). An
    /// IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) is taken as the IPv4 network it maps.
    pub fn parse<I, S>(values: I) -> Result<Self, TrustedProxyError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut out = Self::default();
        for value in values {
            let value = value.as_ref().trim();
            let invalid = || TrustedProxyError::InvalidCidr {
                value: value.to_owned(),
            };
            let net: ipnet::IpNet = match value.parse::<ipnet::IpNet>() {
                Ok(net) => net,
                Err(_) => value.parse::<IpAddr>().map_err(|_| invalid())?.into(),
            };
            out.push(net);
        }
        Ok(out)
    }

    /// Adds a network.
    pub fn push(&mut self, net: ipnet::IpNet) {
        match net {
            ipnet::IpNet::V4(n) => self.v4.push(n.trunc()),
            ipnet::IpNet::V6(n) => match mapped_v4_net(n) {
                Some(v4) => self.v4.push(v4),
                None => self.v6.push(n.trunc()),
            },
        }
    }

    /// Whether no network is trusted.
    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// Whether `ip` (canonicalised) lies inside a trusted network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match canonical_ip(ip) {
            IpAddr::V4(a) => self.v4.iter().any(|n| n.contains(&a)),
            IpAddr::V6(a) => self.v6.iter().any(|n| n.contains(&a)),
        }
    }
}

fn mapped_v4_net(net: Ipv6Net) -> Option<Ipv4Net> {
    let v4 = net.network().to_ipv4_mapped()?;
    let prefix = net.prefix_len().checked_sub(96)?;
    Ipv4Net::new(v4, prefix).ok().map(|n| n.trunc())
}

/// The address as the engine compares it: IPv4-mapped IPv6 becomes IPv4; everything else is
/// unchanged.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Which forwarding header a trusted proxy writes (see the module docs for why only one is read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (the default; what most proxies and load
    /// balancers write).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for="[2001:db8::1]:4711"` (RFC 7239).
    Forwarded,
}

impl ForwardedHeader {
    /// Parses `x-forwarded-for` or `forwarded` (case-insensitive).
    pub fn parse(s: &str) -> Option<Self> {
        if s.eq_ignore_ascii_case("x-forwarded-for") || s.eq_ignore_ascii_case("xff") {
            Some(Self::XForwardedFor)
        } else if s.eq_ignore_ascii_case("forwarded") {
            Some(Self::Forwarded)
        } else {
            None
        }
    }
}

/// Works out the client address of a request from its peer and headers.
///
/// ```
/// use std::net::IpAddr;
/// use netacl_edge::{ClientAddrResolver, ForwardedHeader, TrustedProxies};
///
/// let trusted = TrustedProxies::parse(["10.0.0.0/8"]).unwrap();
/// let resolver = ClientAddrResolver::new(trusted, ForwardedHeader::XForwardedFor);
/// let mut headers = http::HeaderMap::new();
/// headers.insert("x-forwarded-for", "203.0.113.9, 10.1.1.1".parse().unwrap());
///
/// // From a trusted proxy: the first untrusted entry, right to left.
/// let peer: IpAddr = "10.0.0.2".parse().unwrap();
/// assert_eq!(resolver.client_ip(peer, &headers), "203.0.113.9".parse::<IpAddr>().unwrap());
///
/// // From anyone else: the header is ignored.
/// let peer: IpAddr = "198.51.100.4".parse().unwrap();
/// assert_eq!(resolver.client_ip(peer, &headers), peer);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ClientAddrResolver {
    trusted: TrustedProxies,
    header: ForwardedHeader,
}

/// The outcome of one step of the walk.
enum Hop {
    /// An address.
    Addr(IpAddr),
    /// Malformed, obfuscated or unknown: stop.
    Stop,
}

impl ClientAddrResolver {
    /// A resolver believing `header` from peers inside `trusted`.
    pub fn new(trusted: TrustedProxies, header: ForwardedHeader) -> Self {
        Self { trusted, header }
    }

    /// The trusted networks.
    pub fn trusted(&self) -> &TrustedProxies {
        &self.trusted
    }

    /// Whether the peer's forwarding header would be read.
    pub fn trusts(&self, peer: IpAddr) -> bool {
        !self.trusted.is_empty() && self.trusted.contains(peer)
    }

    /// The client address of a request that arrived from `peer` (canonicalised).
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = canonical_ip(peer);
        if !self.trusts(peer) {
            return peer;
        }
        match self.header {
            ForwardedHeader::XForwardedFor => self.walk_xff(peer, headers),
            ForwardedHeader::Forwarded => self.walk_forwarded(peer, headers),
        }
    }

    /// Applies one hop; `Some(result)` ends the walk.
    fn step(&self, last_trusted: &mut IpAddr, hop: Hop) -> Option<IpAddr> {
        match hop {
            Hop::Stop => Some(*last_trusted),
            Hop::Addr(ip) => {
                let ip = canonical_ip(ip);
                if self.trusted.contains(ip) {
                    *last_trusted = ip;
                    None
                } else {
                    Some(ip)
                }
            }
        }
    }

    fn walk_xff(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut last_trusted = peer;
        for value in headers.get_all(&X_FORWARDED_FOR).iter().rev() {
            let Ok(text) = value.to_str() else {
                return last_trusted;
            };
            for entry in text.rsplit(',') {
                let hop = parse_node(entry.trim()).map_or(Hop::Stop, Hop::Addr);
                if let Some(ip) = self.step(&mut last_trusted, hop) {
                    return ip;
                }
            }
        }
        last_trusted
    }

    fn walk_forwarded(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut last_trusted = peer;
        for value in headers.get_all(&FORWARDED).iter().rev() {
            let Ok(text) = value.to_str() else {
                return last_trusted;
            };
            let elements = split_outside_quotes(text, b',');
            for element in elements.iter().rev() {
                let hop = forwarded_for(element).map_or(Hop::Stop, Hop::Addr);
                if let Some(ip) = self.step(&mut last_trusted, hop) {
                    return ip;
                }
            }
        }
        last_trusted
    }
}

/// Parses an `X-Forwarded-For` entry or an unquoted/unescaped `Forwarded` node: `1.2.3.4`,
/// `1.2.3.4:80`, `2001:db8::1`, `[2001:db8::1]`, `[2001:db8::1]:443`.
fn parse_node(s: &str) -> Option<IpAddr> {
    if s.is_empty() {
        return None;
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || is_port(after.strip_prefix(':')?)) {
            return None;
        }
        return inside.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    // `a.b.c.d:port` (an IPv6 address with a port must be bracketed).
    let (host, port) = s.rsplit_once(':')?;
    if !is_port(port) {
        return None;
    }
    host.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

fn is_port(s: &str) -> bool {
    !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Splits on `sep` outside double-quoted strings (backslash escapes honoured inside quotes).
fn split_outside_quotes(s: &str, sep: u8) -> Vec<&str> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, &b) in bytes.iter().enumerate() {
        if quoted {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                quoted = false;
            }
        } else if b == b'"' {
            quoted = true;
        } else if b == sep {
            out.push(&s[start..i]);
            start = i + 1;
        }
    }
    out.push(&s[start..]);
    out
}

/// The address in a `Forwarded` element's `for=` parameter; `None` when the element has no
/// `for`, the node is `unknown` or obfuscated, or anything is malformed.
fn forwarded_for(element: &str) -> Option<IpAddr> {
    let mut found = None;
    for pair in split_outside_quotes(element, b';') {
        let pair = pair.trim();
        if pair.is_empty() {
            continue;
        }
        let (name, value) = pair.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("for") {
            continue;
        }
        if found.is_some() {
            return None; // a repeated `for` is malformed
        }
        let value = value.trim();
        let node = match value.strip_prefix('"') {
            Some(rest) => {
                let inner = rest.strip_suffix('"')?;
                if inner.contains(['"', '\\']) {
                    return None;
                }
                inner
            }
            None => value,
        };
        found = Some(node);
    }
    let node = found?;
    // Unquoted IPv6 (`for=2001:db8::1`) is not valid RFC 7239, but unambiguous; a bracketed
    // address must have been quoted to carry `[`, `]` or `:`, which split_once above preserved.
    parse_node(node)
}

/// The client and connecting address of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestAddrs {
    /// The TCP peer (canonicalised).
    pub connecting: IpAddr,
    /// The end user, as far as trusted proxies tell (canonicalised).
    pub client: IpAddr,
}

impl ClientAddrResolver {
    /// Both addresses of a request that arrived from `peer`.
    pub fn resolve(&self, peer: SocketAddr, headers: &HeaderMap) -> RequestAddrs {
        RequestAddrs {
            connecting: canonical_ip(peer.ip()),
            client: self.client_ip(peer.ip(), headers),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn headers(name: &str, values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    fn xff(trusted: &[&str]) -> ClientAddrResolver {
        ClientAddrResolver::new(
            TrustedProxies::parse(trusted).unwrap(),
            ForwardedHeader::XForwardedFor,
        )
    }

    fn fwd(trusted: &[&str]) -> ClientAddrResolver {
        ClientAddrResolver::new(
            TrustedProxies::parse(trusted).unwrap(),
            ForwardedHeader::Forwarded,
        )
    }

    #[test]
    fn untrusted_peer_is_the_client() {
        let r = xff(&["10.0.0.0/8"]);
        let h = headers("x-forwarded-for", &["1.2.3.4"]);
        assert_eq!(r.client_ip(ip("192.0.2.1"), &h), ip("192.0.2.1"));
        // No trusted proxies at all.
        assert_eq!(xff(&[]).client_ip(ip("10.0.0.1"), &h), ip("10.0.0.1"));
    }

    #[test]
    fn walks_right_to_left_over_trusted_hops() {
        let r = xff(&["10.0.0.0/8", "2001:db8:ffff::/48"]);
        let h = headers(
            "x-forwarded-for",
            &["6.6.6.6, 203.0.113.5, 10.9.9.9", "2001:db8:ffff::1"],
        );
        assert_eq!(r.client_ip(ip("10.0.0.1"), &h), ip("203.0.113.5"));
    }

    #[test]
    fn all_trusted_gives_leftmost() {
        let r = xff(&["10.0.0.0/8"]);
        let h = headers("x-forwarded-for", &["10.1.1.1, 10.2.2.2"]);
        assert_eq!(r.client_ip(ip("10.0.0.1"), &h), ip("10.1.1.1"));
        // No header: the peer.
        assert_eq!(
            r.client_ip(ip("10.0.0.1"), &HeaderMap::new()),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn malformed_entry_stops_at_last_trusted_hop() {
        let r = xff(&["10.0.0.0/8"]);
        let h = headers("x-forwarded-for", &["1.1.1.1, garbage, 10.3.3.3"]);
        assert_eq!(r.client_ip(ip("10.0.0.1"), &h), ip("10.3.3.3"));
        let h = headers("x-forwarded-for", &["1.1.1.1,,"]);
        assert_eq!(r.client_ip(ip("10.0.0.1"), &h), ip("10.0.0.1"));
        let h = headers("x-forwarded-for", &["[::1"]);
        assert_eq!(r.client_ip(ip("10.0.0.1"), &h), ip("10.0.0.1"));
    }

    #[test]
    fn ports_and_brackets() {
        let r = xff(&["10.0.0.0/8"]);
        for (v, want) in [
            ("192.0.2.9:8080", "192.0.2.9"),
            ("[2001:db8::7]:443", "2001:db8::7"),
            ("[2001:db8::7]", "2001:db8::7"),
            ("2001:db8::8", "2001:db8::8"),
        ] {
            let h = headers("x-forwarded-for", &[v]);
            assert_eq!(r.client_ip(ip("10.0.0.1"), &h), ip(want), "{v}");
        }
        assert!(parse_node("192.0.2.9:").is_none());
        assert!(parse_node("192.0.2.9:123456").is_none());
        assert!(parse_node("[2001:db8::7]x").is_none());
    }

    #[test]
    fn mapped_addresses_are_canonical() {
        let r = xff(&["10.0.0.0/8"]);
        let h = headers("x-forwarded-for", &["::ffff:203.0.113.1, ::ffff:10.4.4.4"]);
        // The mapped peer is trusted as 10.0.0.1; the mapped 10.4.4.4 is skipped as trusted.
        assert_eq!(r.client_ip(ip("::ffff:10.0.0.1"), &h), ip("203.0.113.1"));
        assert_eq!(canonical_ip(ip("::ffff:1.2.3.4")), ip("1.2.3.4"));
        assert_eq!(canonical_ip(ip("::1")), ip("::1"));
        let mapped = TrustedProxies::parse(["::ffff:10.0.0.0/104"]).unwrap();
        assert!(mapped.contains(ip("10.200.0.1")));
    }

    #[test]
    fn forwarded_header() {
        let r = fwd(&["10.0.0.0/8"]);
        let h = headers(
            "forwarded",
            &[
                "for=6.6.6.6;proto=https",
                r#"for="[2001:db8:cafe::17]:4711", For=10.7.7.7;by=10.0.0.9"#,
            ],
        );
        assert_eq!(r.client_ip(ip("10.0.0.1"), &h), ip("2001:db8:cafe::17"));
        let h = headers("forwarded", &[r#"for="192.0.2.43:47011""#]);
        assert_eq!(r.client_ip(ip("10.0.0.1"), &h), ip("192.0.2.43"));
    }

    #[test]
    fn forwarded_obfuscated_unknown_or_missing_for_stops() {
        let r = fwd(&["10.0.0.0/8"]);
        for v in [
            "for=1.2.3.4, for=_hidden, for=10.5.5.5",
            "for=1.2.3.4, for=unknown, for=10.5.5.5",
            "for=1.2.3.4, proto=http, for=10.5.5.5",
            r#"for=1.2.3.4, for="[2001:db8::1", for=10.5.5.5"#,
        ] {
            let h = headers("forwarded", &[v]);
            assert_eq!(r.client_ip(ip("10.0.0.1"), &h), ip("10.5.5.5"), "{v}");
        }
    }

    #[test]
    fn only_the_configured_header_is_read() {
        let mut h = headers("forwarded", &["for=198.51.100.1"]);
        h.append("x-forwarded-for", "203.0.113.1".parse().unwrap());
        assert_eq!(
            xff(&["10.0.0.0/8"]).client_ip(ip("10.0.0.1"), &h),
            ip("203.0.113.1")
        );
        assert_eq!(
            fwd(&["10.0.0.0/8"]).client_ip(ip("10.0.0.1"), &h),
            ip("198.51.100.1")
        );
    }

    #[test]
    fn quoted_commas_do_not_split_elements() {
        let parts = split_outside_quotes(r#"for="a,b";x=1, for=c"#, b',');
        assert_eq!(parts, vec![r#"for="a,b";x=1"#, " for=c"]);
    }

    #[test]
    fn bad_cidr_is_an_error() {
        assert!(TrustedProxies::parse(["10.0.0.0/33"]).is_err());
        assert!(TrustedProxies::parse(["nope"]).is_err());
        assert!(TrustedProxies::parse(["192.0.2.1"])
            .unwrap()
            .contains(ip("192.0.2.1")));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Arbitrary header text never panics, and the answer is the peer, a trusted hop or an
        /// address written in the header.
        #[test]
        fn arbitrary_headers_never_panic(value in "[ -~]{0,60}", forwarded in proptest::bool::ANY) {
            let header = if forwarded { "forwarded" } else { "x-forwarded-for" };
            let r = if forwarded { fwd(&["10.0.0.0/8"]) } else { xff(&["10.0.0.0/8"]) };
            let Ok(v) = http::HeaderValue::from_str(&value) else { return Ok(()) };
            let mut h = HeaderMap::new();
            h.insert(HeaderName::from_static(header), v);
            let got = r.client_ip(ip("10.0.0.1"), &h);
            proptest::prop_assert!(got == ip("10.0.0.1") || value.contains(&got.to_string())
                || matches!(got, IpAddr::V6(_)) || value.to_ascii_lowercase().contains("ffff"));
        }
    }
}
