//! Which address is the client's: the TCP peer, or what a trusted reverse proxy in front of the
//! edge says it was.
//!
//! The rules are on [`ClientAddrResolver`].
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::ControlFlow;

use http::header::{HeaderMap, HeaderName, HeaderValue};

/// The `Forwarded` header (RFC 7239).
static FORWARDED: HeaderName = HeaderName::from_static("forwarded");
/// The `X-Forwarded-For` header.
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

pub use netacl_model::{TrustedProxies, TrustedProxyError};

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

/// Which forwarding header a trusted proxy writes (see [`ClientAddrResolver`] for why only one
/// is read).
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
/// # Rules
///
/// - The **connecting address** is always the TCP peer.
/// - The **client address** is the peer, unless the peer lies inside one of the configured
///   trusted-proxy CIDRs. Only then is the forwarding header read (a header from anyone else is
///   ignored: any client can write one).
/// - The header is walked **right to left** (the rightmost entry was written by the proxy closest
///   to the edge, and each trusted proxy appends the address of whoever connected to it). Entries
///   inside the trusted CIDRs are skipped; the first entry outside them is the client address.
///   When every entry is trusted, the leftmost one is the client address (a client inside the
///   trusted networks); with no header at all, the peer.
/// - A hop that is **not a usable address** (malformed, not ASCII, `unknown`, an obfuscated
///   `_identifier`, a `Forwarded` element without `for=`) is never skipped like a trusted hop and
///   never replaced by one: the walk ends there and the client address is **unknown** (absent: a
///   rule's `match` on it does not match, its `not_match` holds, no geo or ASN). The walk only
///   reaches such a hop when every hop to its right was a trusted proxy, so the hop is what the
///   last trusted proxy was told, or said, about its client: answering with that proxy's own
///   address would let a client behind it pose as the proxy.
/// - The header is read as **bytes** and split before anything is decoded, so that what a client
///   writes (non-ASCII bytes, an unbalanced quote, stray escapes) damages at most its own part,
///   never the entries the proxies append to its right:
///   - `X-Forwarded-For` is split on `,`;
///   - `Forwarded` is split into elements **from the right**: a quoted-string is matched from its
///     closing quote back to its opening one (a quote preceded by an odd run of backslashes is
///     escaped), so an unterminated quote on the client's side cannot reach across the proxies'
///     elements. A well-formed header splits exactly as a left-to-right parse splits it.
/// - **Several header lines** of the same name are one list, in the order they arrived (the last
///   line is the nearest proxy's); each line is split on its own, so a broken line cannot run into
///   the next.
/// - **Empty list elements** (`a,,b`, a trailing comma, an empty line) are not hops and are
///   skipped, as RFC 9110 §5.6.1 asks of every list header.
/// - An entry is one of: an IPv4 address (canonical dotted decimal), an IPv6 address, either
///   with a port (`192.0.2.1:8080`, `[2001:db8::1]:443`), or a bracketed IPv6 address
///   (`[2001:db8::1]`); in `Forwarded`, an obfuscated port (`"192.0.2.1:_p1"`) too. Surrounding
///   spaces and tabs are ignored. Anything else is not a usable address.
/// - `Forwarded` elements follow RFC 7239: `;`-separated `name=value` pairs (names compared
///   without case, `for` at most once; a pair with no `=` makes the element malformed), values a
///   token or a quoted-string whose backslash escapes are undone before the address is read
///   (`for="\[2001:db8::1\]"` is `[2001:db8::1]`). An unquoted value may also carry `:`, `[`
///   and `]` (`for=2001:db8::1`, which a proxy configured as `for=$remote_addr` writes). An
///   IPv6 address without brackets is read whole, in both headers: it cannot carry a port.
/// - Addresses are canonicalised: an IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is the IPv4
///   address, both when matched against the trusted CIDRs and as the result.
///
/// [`forwarded_client`](crate::forwarded_client) is the walk itself, over raw header lines: what the resolver runs per
/// request, and what a fuzzer can call.
///
/// # Which header
///
/// Exactly one header is read, chosen by [`ForwardedHeader`]; the default is
/// `X-Forwarded-For`. **When both `X-Forwarded-For` and `Forwarded` are present, the configured
/// one wins and the other is ignored entirely.** A trusted proxy only vouches for the header it
/// writes: a proxy that appends to `X-Forwarded-For` passes a client's forged `Forwarded` through
/// untouched (and the other way round), so falling back from one to the other, or preferring
/// whichever is present, would let a client choose its own address.
///
/// # Example
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
/// assert_eq!(resolver.client_ip(peer, &headers), Some("203.0.113.9".parse().unwrap()));
///
/// // From anyone else: the header is ignored.
/// let peer: IpAddr = "198.51.100.4".parse().unwrap();
/// assert_eq!(resolver.client_ip(peer, &headers), Some(peer));
///
/// // A hop that is not an address where the client's should be: unknown, not the proxy's.
/// headers.insert("x-forwarded-for", "unknown, 10.1.1.1".parse().unwrap());
/// assert_eq!(resolver.client_ip("10.0.0.2".parse().unwrap(), &headers), None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ClientAddrResolver {
    trusted: TrustedProxies,
    header: ForwardedHeader,
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

    /// The header read from trusted peers.
    pub fn header(&self) -> ForwardedHeader {
        self.header
    }

    /// Whether the peer's forwarding header would be read.
    pub fn trusts(&self, peer: IpAddr) -> bool {
        !self.trusted.is_empty() && self.trusted.contains(peer)
    }

    /// The client address of a request that arrived from `peer` (canonicalised); `None` when a
    /// trusted proxy's header leaves it unknown (see the type's docs).
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> Option<IpAddr> {
        let name = match self.header {
            ForwardedHeader::XForwardedFor => &X_FORWARDED_FOR,
            ForwardedHeader::Forwarded => &FORWARDED,
        };
        forwarded_client(
            self.header,
            &self.trusted,
            peer,
            headers.get_all(name).iter().map(HeaderValue::as_bytes),
        )
    }
}

/// The forwarding-header walk ([`ClientAddrResolver`] has the rules): the client address of a request
/// that arrived from `peer` carrying `lines`, the values of its `header` lines in the order
/// they arrived, as raw bytes.
///
/// `Some(peer)` (canonicalised) when the peer is not inside `trusted`; `None` when the walk
/// ends on a hop that is not a usable address. Never allocates, never panics, whatever the
/// bytes.
///
/// ```
/// use std::net::IpAddr;
/// use netacl_edge::{forwarded_client, ForwardedHeader, TrustedProxies};
///
/// let trusted = TrustedProxies::parse(["127.0.0.0/8"]).unwrap();
/// let peer: IpAddr = "127.0.0.1".parse().unwrap();
/// let client = |header, line: &[u8]| forwarded_client(header, &trusted, peer, [line]);
///
/// // What the client wrote cannot hide what the proxy appended.
/// let xff = ForwardedHeader::XForwardedFor;
/// assert_eq!(client(xff, b"caf\xc3\xa9, 203.0.113.5"), Some("203.0.113.5".parse().unwrap()));
/// let fwd = ForwardedHeader::Forwarded;
/// assert_eq!(client(fwd, br#"for=", for=203.0.113.5"#), Some("203.0.113.5".parse().unwrap()));
/// ```
pub fn forwarded_client<'a, I>(
    header: ForwardedHeader,
    trusted: &TrustedProxies,
    peer: IpAddr,
    lines: I,
) -> Option<IpAddr>
where
    I: IntoIterator<Item = &'a [u8]>,
    I::IntoIter: DoubleEndedIterator,
{
    let peer = canonical_ip(peer);
    if trusted.is_empty() || !trusted.contains(peer) {
        return Some(peer);
    }
    let mut walk = Walk {
        trusted,
        leftmost_trusted: peer,
    };
    for line in lines.into_iter().rev() {
        let step = match header {
            ForwardedHeader::XForwardedFor => line
                .rsplit(|&b| b == b',')
                .map(|entry| xff_hop(trim_ows(entry)))
                .try_for_each(|hop| walk.step(hop)),
            ForwardedHeader::Forwarded => ForwardedElementsRev::new(line)
                .map(|element| element.map_or(Hop::Unusable, forwarded_hop))
                .try_for_each(|hop| walk.step(hop)),
        };
        if let ControlFlow::Break(client) = step {
            return client;
        }
    }
    Some(walk.leftmost_trusted)
}

/// One hop of the walk.
enum Hop {
    /// An empty list element: not a hop at all.
    Empty,
    /// An address (not yet canonicalised).
    Addr(IpAddr),
    /// Malformed, undecodable, `unknown`, obfuscated, or a `Forwarded` element without `for`.
    Unusable,
}

struct Walk<'t> {
    trusted: &'t TrustedProxies,
    leftmost_trusted: IpAddr,
}

impl Walk<'_> {
    /// Applies one hop; `Break(client)` ends the walk.
    fn step(&mut self, hop: Hop) -> ControlFlow<Option<IpAddr>> {
        match hop {
            Hop::Empty => ControlFlow::Continue(()),
            Hop::Unusable => ControlFlow::Break(None),
            Hop::Addr(ip) => {
                let ip = canonical_ip(ip);
                if self.trusted.contains(ip) {
                    self.leftmost_trusted = ip;
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(Some(ip))
                }
            }
        }
    }
}

/// Optional whitespace (spaces and tabs) removed from both ends.
fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn xff_hop(entry: &[u8]) -> Hop {
    if entry.is_empty() {
        return Hop::Empty;
    }
    parse_node(entry, false).map_or(Hop::Unusable, Hop::Addr)
}

/// Parses an address with an optional port: `1.2.3.4`, `1.2.3.4:80`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:443`; with `obfuscated_port`, also RFC 7239's `:_name` port.
fn parse_node(node: &[u8], obfuscated_port: bool) -> Option<IpAddr> {
    let text = std::str::from_utf8(node).ok().filter(|t| t.is_ascii())?;
    let port_ok = |port: &str| is_port(port) || (obfuscated_port && is_obfuscated(port));
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || port_ok(after.strip_prefix(':')?)) {
            return None;
        }
        return inside.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    // `a.b.c.d:port` (an IPv6 address with a port must be bracketed).
    let (host, port) = text.rsplit_once(':')?;
    if !port_ok(port) {
        return None;
    }
    host.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

fn is_port(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 5
        && s.bytes().all(|b| b.is_ascii_digit())
        && s.parse::<u16>().is_ok()
}

/// RFC 7239 `obfnode` / `obfport`: `_` followed by letters, digits, `.`, `_` or `-`.
fn is_obfuscated(s: &str) -> bool {
    s.strip_prefix('_').is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    })
}

/// The elements of one `Forwarded` line, from the right: `Ok(element)`, or one `Err(())` for
/// everything left of an unterminated quoted-string (then the iterator ends).
struct ForwardedElementsRev<'a> {
    /// What is left to split: `line[..end]`.
    line: &'a [u8],
    done: bool,
}

impl<'a> ForwardedElementsRev<'a> {
    fn new(line: &'a [u8]) -> Self {
        Self { line, done: false }
    }
}

impl<'a> Iterator for ForwardedElementsRev<'a> {
    type Item = Result<&'a [u8], ()>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let line = self.line;
        let mut i = line.len();
        while i > 0 {
            i -= 1;
            match line[i] {
                b',' => {
                    self.line = &line[..i];
                    return Some(Ok(&line[i + 1..]));
                }
                b'"' => match opening_quote(&line[..i]) {
                    Some(open) => i = open,
                    None => {
                        self.done = true;
                        return Some(Err(()));
                    }
                },
                _ => {}
            }
        }
        self.done = true;
        Some(Ok(line))
    }
}

/// The index of the quote that opens a quoted-string whose closing quote follows `before`: the
/// last `"` in `before` not preceded by an odd run of backslashes.
fn opening_quote(before: &[u8]) -> Option<usize> {
    let mut j = before.len();
    while j > 0 {
        j -= 1;
        if before[j] == b'"' {
            let backslashes = before[..j]
                .iter()
                .rev()
                .take_while(|&&b| b == b'\\')
                .count();
            if backslashes % 2 == 0 {
                return Some(j);
            }
        }
    }
    None
}

/// The longest `for` value read (after undoing escapes); real ones are under 60 bytes.
const MAX_NODE: usize = 128;

/// The hop a `Forwarded` element names.
fn forwarded_hop(element: &[u8]) -> Hop {
    let element = trim_ows(element);
    if element.is_empty() {
        return Hop::Empty;
    }
    let mut node = [0u8; MAX_NODE];
    let mut node_len = None;
    let mut rest = element;
    loop {
        // One pair: `name=value`, then `;` or the end.
        let pair_end = match pair_end(rest) {
            Some(end) => end,
            None => return Hop::Unusable,
        };
        let pair = trim_ows(&rest[..pair_end]);
        if !pair.is_empty() {
            let Some(eq) = pair.iter().position(|&b| b == b'=') else {
                return Hop::Unusable;
            };
            let (name, value) = (&pair[..eq], &pair[eq + 1..]);
            if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
                return Hop::Unusable;
            }
            let is_for = name.eq_ignore_ascii_case(b"for");
            if is_for && node_len.is_some() {
                return Hop::Unusable; // `for` twice
            }
            match read_value(value, if is_for { Some(&mut node) } else { None }) {
                Some(len) if is_for => node_len = Some(len),
                Some(_) => {}
                None => return Hop::Unusable,
            }
        }
        if pair_end == rest.len() {
            break;
        }
        rest = &rest[pair_end + 1..];
    }
    let Some(len) = node_len else {
        return Hop::Unusable; // no `for`
    };
    let node = &node[..len];
    if node.eq_ignore_ascii_case(b"unknown") {
        return Hop::Unusable;
    }
    parse_node(node, true).map_or(Hop::Unusable, Hop::Addr)
}

/// Where the pair starting `s` ends: the first `;` outside a quoted-string, or the end; `None`
/// when a quoted-string is not terminated.
fn pair_end(s: &[u8]) -> Option<usize> {
    let mut quoted = false;
    let mut i = 0;
    while i < s.len() {
        match (quoted, s[i]) {
            (true, b'\\') => i += 1,
            (_, b'"') => quoted = !quoted,
            (false, b';') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    (!quoted).then_some(s.len())
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Checks a pair's value (a token, lenient with `:`, `[` and `]`, or a quoted-string) and, when
/// `out` is given, writes its text there with escapes undone. `None` when malformed or longer
/// than `out`.
fn read_value(value: &[u8], out: Option<&mut [u8; MAX_NODE]>) -> Option<usize> {
    let mut sink = Sink { out, len: 0 };
    match value {
        [b'"', inner @ .., b'"'] => {
            let mut bytes = inner.iter();
            while let Some(&b) = bytes.next() {
                let b = match b {
                    b'\\' => *bytes.next()?,
                    b'"' => return None,
                    b => b,
                };
                // qdtext / quoted-pair: HTAB, SP, visible ASCII, obs-text.
                if b != b'\t' && (b < 0x20 || b == 0x7f) {
                    return None;
                }
                sink.push(b)?;
            }
        }
        [] => return None,
        token => {
            for &b in token {
                if !(is_tchar(b) || matches!(b, b':' | b'[' | b']')) {
                    return None;
                }
                sink.push(b)?;
            }
        }
    }
    Some(sink.len)
}

struct Sink<'o> {
    out: Option<&'o mut [u8; MAX_NODE]>,
    len: usize,
}

impl Sink<'_> {
    fn push(&mut self, b: u8) -> Option<()> {
        if let Some(out) = self.out.as_deref_mut() {
            *out.get_mut(self.len)? = b;
        }
        self.len += 1;
        Some(())
    }
}

/// The client and connecting address of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestAddrs {
    /// The TCP peer (canonicalised).
    pub connecting: IpAddr,
    /// The end user, as far as trusted proxies tell (canonicalised); `None` when their header
    /// leaves it unknown.
    pub client: Option<IpAddr>,
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
    use proptest::prelude::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn some(s: &str) -> Option<IpAddr> {
        Some(ip(s))
    }

    fn headers(name: &str, values: &[&[u8]]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(v).unwrap(),
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

    /// The client address from trusted peer 10.0.0.1 behind 10.0.0.0/8, one header line (any
    /// bytes, even those a `HeaderValue` refuses).
    fn xff_client(line: &[u8]) -> Option<IpAddr> {
        let trusted = TrustedProxies::parse(["10.0.0.0/8"]).unwrap();
        forwarded_client(
            ForwardedHeader::XForwardedFor,
            &trusted,
            ip("10.0.0.1"),
            [line],
        )
    }

    fn fwd_client(line: &[u8]) -> Option<IpAddr> {
        let trusted = TrustedProxies::parse(["10.0.0.0/8"]).unwrap();
        forwarded_client(ForwardedHeader::Forwarded, &trusted, ip("10.0.0.1"), [line])
    }

    #[test]
    fn untrusted_peer_is_the_client() {
        let r = xff(&["10.0.0.0/8"]);
        let h = headers("x-forwarded-for", &[b"1.2.3.4"]);
        assert_eq!(r.client_ip(ip("192.0.2.1"), &h), some("192.0.2.1"));
        // No trusted proxies at all.
        assert_eq!(xff(&[]).client_ip(ip("10.0.0.1"), &h), some("10.0.0.1"));
        // Not even a broken header changes that.
        let h = headers("x-forwarded-for", &[b"caf\xc3\xa9"]);
        assert_eq!(r.client_ip(ip("192.0.2.1"), &h), some("192.0.2.1"));
    }

    #[test]
    fn walks_right_to_left_over_trusted_hops() {
        let r = xff(&["10.0.0.0/8", "2001:db8:ffff::/48"]);
        let h = headers(
            "x-forwarded-for",
            &[b"6.6.6.6, 203.0.113.5, 10.9.9.9", b"2001:db8:ffff::1"],
        );
        assert_eq!(r.client_ip(ip("10.0.0.1"), &h), some("203.0.113.5"));
    }

    #[test]
    fn all_trusted_gives_leftmost_and_no_header_the_peer() {
        assert_eq!(xff_client(b"10.1.1.1, 10.2.2.2"), some("10.1.1.1"));
        let r = xff(&["10.0.0.0/8"]);
        assert_eq!(
            r.client_ip(ip("10.0.0.1"), &HeaderMap::new()),
            some("10.0.0.1")
        );
    }

    /// Issue 11: a non-ASCII byte anywhere in the line made the walk stop at the last trusted
    /// hop (the proxy), before the proxy's own entry was read.
    #[test]
    fn bytes_the_client_writes_cannot_hide_the_proxys_entry() {
        assert_eq!(xff_client(b"caf\xc3\xa9, 203.0.113.5"), some("203.0.113.5"));
        assert_eq!(
            xff_client(b"\xff, 203.0.113.5, 10.2.2.2"),
            some("203.0.113.5")
        );
        assert_eq!(
            fwd_client(b"for=caf\xc3\xa9, for=203.0.113.5"),
            some("203.0.113.5")
        );
        // The same on their own lines.
        let r = xff(&["10.0.0.0/8"]);
        let h = headers("x-forwarded-for", &[b"caf\xc3\xa9", b"203.0.113.5"]);
        assert_eq!(r.client_ip(ip("10.0.0.1"), &h), some("203.0.113.5"));
    }

    /// Issue 11: an unbalanced quote in the client's part swallowed the proxy's element.
    #[test]
    fn quotes_the_client_opens_cannot_swallow_the_proxys_element() {
        for line in [
            &br#"for=", for=203.0.113.5"#[..],
            br#"for="\", for=203.0.113.5"#,
            br#"for="[2001:db8::1, for=203.0.113.5"#,
            br#"for=1.2.3.4;by=", for="203.0.113.5:4711""#,
            br#"""""", for="203.0.113.5""#,
            br#"for="a\\\", for=203.0.113.5"#,
        ] {
            assert_eq!(
                fwd_client(line),
                some("203.0.113.5"),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // An unterminated quote on its own line does not run into the next line.
        let r = fwd(&["10.0.0.0/8"]);
        let h = headers("forwarded", &[br#"for="x, "#, b"for=203.0.113.5"]);
        assert_eq!(r.client_ip(ip("10.0.0.1"), &h), some("203.0.113.5"));
    }

    /// A hop that is not an address, reached after trusted hops only, leaves the client unknown:
    /// neither the hop to its left (the client's claim) nor the trusted hop to its right (the
    /// proxy's own address) is used.
    #[test]
    fn an_unusable_hop_leaves_the_client_unknown() {
        for line in [
            &b"1.1.1.1, garbage, 10.3.3.3"[..],
            b"1.1.1.1, unknown",
            b"1.1.1.1, caf\xc3\xa9, 10.3.3.3",
            b"[::1",
            b"1.2.3.4:99999",
            b"01.2.3.4",
            b"\"192.0.2.1\"",
            b"192.0.2.1:_obf",
            b"fe80::1%eth0",
            b"192.0.2.1 192.0.2.2",
        ] {
            assert_eq!(xff_client(line), None, "{}", String::from_utf8_lossy(line));
        }
        for line in [
            &b"for=1.2.3.4, for=_hidden, for=10.5.5.5"[..],
            b"for=1.2.3.4, for=unknown, for=10.5.5.5",
            b"for=1.2.3.4, for=UNKNOWN",
            b"for=1.2.3.4, proto=http, for=10.5.5.5",
            b"for=1.2.3.4, for=10.6.6.6;for=10.7.7.7",
            br#"for=1.2.3.4, for="[2001:db8::1""#,
            b"for=1.2.3.4, for",
            b"for=1.2.3.4, for=",
            b"for=1.2.3.4, for = 10.6.6.6",
            b"for=1.2.3.4, by=10.0.0.9;garbage",
            br#"for=1.2.3.4, for="192.0.2.1\""#,
            br#"for=1.2.3.4, for="caf\xc3\xa9""#,
            b"for=1.2.3.4, for=\"10.1.1.1\x01\"",
        ] {
            assert_eq!(fwd_client(line), None, "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn empty_elements_are_not_hops() {
        assert_eq!(xff_client(b"203.0.113.1,,"), some("203.0.113.1"));
        assert_eq!(
            xff_client(b" , 203.0.113.1 ,\t, 10.4.4.4 , "),
            some("203.0.113.1")
        );
        assert_eq!(xff_client(b""), some("10.0.0.1"));
        assert_eq!(fwd_client(b"for=203.0.113.1, ,"), some("203.0.113.1"));
        let r = xff(&["10.0.0.0/8"]);
        let h = headers("x-forwarded-for", &[b"203.0.113.2", b"", b" "]);
        assert_eq!(r.client_ip(ip("10.0.0.1"), &h), some("203.0.113.2"));
    }

    #[test]
    fn ports_and_brackets() {
        for (v, want) in [
            ("192.0.2.9:8080", "192.0.2.9"),
            ("192.0.2.9:65535", "192.0.2.9"),
            ("[2001:db8::7]:443", "2001:db8::7"),
            ("[2001:db8::7]", "2001:db8::7"),
            ("2001:db8::8", "2001:db8::8"),
            ("::ffff:192.0.2.9", "192.0.2.9"),
        ] {
            assert_eq!(xff_client(v.as_bytes()), some(want), "{v}");
        }
        for v in [
            "192.0.2.9:",
            "192.0.2.9:65536",
            "192.0.2.9:123456",
            "[2001:db8::7]x",
        ] {
            assert_eq!(xff_client(v.as_bytes()), None, "{v}");
        }
        for (v, want) in [
            (r#"for="192.0.2.43:47011""#, "192.0.2.43"),
            (r#"for="[2001:db8:cafe::17]:4711""#, "2001:db8:cafe::17"),
            (r#"for="[2001:db8:cafe::17]:_p-1.x""#, "2001:db8:cafe::17"),
            (r#"for="192.0.2.43:_abc""#, "192.0.2.43"),
            ("for=[2001:db8::9]", "2001:db8::9"),
            ("for=2001:db8::9", "2001:db8::9"),
            ("for=192.0.2.43:80", "192.0.2.43"),
        ] {
            assert_eq!(fwd_client(v.as_bytes()), some(want), "{v}");
        }
        for v in [r#"for="192.0.2.43:_""#, r#"for="192.0.2.43:_a b""#] {
            assert_eq!(fwd_client(v.as_bytes()), None, "{v}");
        }
    }

    #[test]
    fn quoted_strings_have_their_escapes_undone() {
        for (v, want) in [
            (r#"for="\[2001:db8::1\]:443""#, "2001:db8::1"),
            (r#"for="\1\9\2.0.2.1""#, "192.0.2.1"),
            (r#"for="192.0.2.1";by="a\"b,c;d""#, "192.0.2.1"),
            (r#"by="x\\";for=192.0.2.1"#, "192.0.2.1"),
            (r#"proto=https;For=192.0.2.1;host="a,b""#, "192.0.2.1"),
            (r#"for=192.0.2.1;;"#, "192.0.2.1"),
        ] {
            assert_eq!(fwd_client(v.as_bytes()), some(want), "{v}");
        }
        // An escaped quote does not end the string, so `,` inside stays inside.
        assert_eq!(
            fwd_client(br#"for=203.0.113.7;by="x\", for=10.1.1.1""#),
            some("203.0.113.7")
        );
        // A value longer than any address is not one.
        let long = format!(r#"for="[2001:db8::1]:_{}""#, "a".repeat(200));
        assert_eq!(fwd_client(long.as_bytes()), None);
    }

    #[test]
    fn mapped_addresses_are_canonical() {
        let r = xff(&["10.0.0.0/8"]);
        let h = headers("x-forwarded-for", &[b"::ffff:203.0.113.1, ::ffff:10.4.4.4"]);
        // The mapped peer is trusted as 10.0.0.1; the mapped 10.4.4.4 is skipped as trusted.
        assert_eq!(r.client_ip(ip("::ffff:10.0.0.1"), &h), some("203.0.113.1"));
        assert_eq!(canonical_ip(ip("::ffff:1.2.3.4")), ip("1.2.3.4"));
        assert_eq!(canonical_ip(ip("::1")), ip("::1"));
        let mapped = TrustedProxies::parse(["::ffff:10.0.0.0/104"]).unwrap();
        assert!(mapped.contains(ip("10.200.0.1")));
    }

    #[test]
    fn forwarded_header_over_several_lines() {
        let r = fwd(&["10.0.0.0/8"]);
        let h = headers(
            "forwarded",
            &[
                b"for=6.6.6.6;proto=https",
                br#"for="[2001:db8:cafe::17]:4711", For=10.7.7.7;by=10.0.0.9"#,
            ],
        );
        assert_eq!(r.client_ip(ip("10.0.0.1"), &h), some("2001:db8:cafe::17"));
    }

    #[test]
    fn only_the_configured_header_is_read() {
        let mut h = headers("forwarded", &[b"for=198.51.100.1"]);
        h.append("x-forwarded-for", "203.0.113.1".parse().unwrap());
        assert_eq!(
            xff(&["10.0.0.0/8"]).client_ip(ip("10.0.0.1"), &h),
            some("203.0.113.1")
        );
        assert_eq!(
            fwd(&["10.0.0.0/8"]).client_ip(ip("10.0.0.1"), &h),
            some("198.51.100.1")
        );
    }

    #[test]
    fn elements_split_from_the_right() {
        let split = |line: &[u8]| -> Vec<Result<String, ()>> {
            ForwardedElementsRev::new(line)
                .map(|e| e.map(|e| String::from_utf8_lossy(e).into_owned()))
                .collect()
        };
        assert_eq!(
            split(br#"for="a,b";x=1, for=c"#),
            vec![Ok(" for=c".to_owned()), Ok(r#"for="a,b";x=1"#.to_owned())]
        );
        assert_eq!(
            split(br#"for=", for=c"#),
            vec![Ok(" for=c".to_owned()), Err(())]
        );
        assert_eq!(split(b""), vec![Ok(String::new())]);
    }

    #[test]
    fn bad_cidr_is_an_error() {
        assert!(TrustedProxies::parse(["10.0.0.0/33"]).is_err());
        assert!(TrustedProxies::parse(["nope"]).is_err());
        assert!(TrustedProxies::parse(["192.0.2.1"])
            .unwrap()
            .contains(ip("192.0.2.1")));
    }

    /// A well-formed `Forwarded` element: `for` with an address (quoted or not) and other pairs
    /// whose quoted values hold commas, semicolons, quotes and backslashes.
    fn element() -> impl Strategy<Value = String> {
        let value = prop_oneof![
            "[a-z0-9._-]{1,8}",
            r#"[a-z,; "\\]{0,8}"#.prop_map(|s| {
                let escaped: String = s
                    .chars()
                    .flat_map(|c| match c {
                        '"' | '\\' => vec!['\\', c],
                        c => vec![c],
                    })
                    .collect();
                format!("\"{escaped}\"")
            }),
        ];
        let node = prop_oneof![
            Just("192.0.2.1".to_owned()),
            Just("\"[2001:db8::1]:4711\"".to_owned()),
            Just("\"198.51.100.2:80\"".to_owned()),
        ];
        (
            node,
            proptest::collection::vec(("by|host|proto|x", value), 0..3),
        )
            .prop_map(|(node, pairs)| {
                let mut out = format!("for={node}");
                for (name, value) in pairs {
                    out.push(';');
                    out.push_str(&name);
                    out.push('=');
                    out.push_str(&value);
                }
                out
            })
    }

    /// Splits a well-formed line left to right (the reference for the splitter).
    fn split_left_to_right(line: &str) -> Vec<String> {
        let (mut out, mut start, mut quoted, mut escaped) = (Vec::new(), 0, false, false);
        for (i, b) in line.bytes().enumerate() {
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
            } else if b == b',' {
                out.push(line[start..i].to_owned());
                start = i + 1;
            }
        }
        out.push(line[start..].to_owned());
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The property behind issue 11's fix: whatever bytes a client writes, the entry a
        /// trusted proxy appends to the same line decides.
        #[test]
        fn the_proxys_entry_decides_whatever_the_client_wrote(
            client in proptest::collection::vec(any::<u8>(), 0..40),
            v6 in any::<bool>(),
        ) {
            let trusted = TrustedProxies::parse(["127.0.0.0/8"]).unwrap();
            let peer = ip("127.0.0.1");
            let (want, xff_entry, fwd_element) = if v6 {
                ("2001:db8::5", "2001:db8::5", r#"for="[2001:db8::5]:4711""#)
            } else {
                ("203.0.113.5", "203.0.113.5", "for=203.0.113.5")
            };
            let mut line = client.clone();
            line.extend_from_slice(format!(", {xff_entry}").as_bytes());
            let got = forwarded_client(ForwardedHeader::XForwardedFor, &trusted, peer, [&line[..]]);
            prop_assert_eq!(got, some(want));
            let mut line = client;
            line.extend_from_slice(format!(", {fwd_element}").as_bytes());
            let got = forwarded_client(ForwardedHeader::Forwarded, &trusted, peer, [&line[..]]);
            prop_assert_eq!(got, some(want));
        }

        /// Arbitrary bytes never panic, and the answer is the peer, an address of the header,
        /// or unknown.
        #[test]
        fn arbitrary_headers_never_panic(
            lines in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..50), 0..3),
            forwarded in any::<bool>(),
        ) {
            let header = if forwarded { ForwardedHeader::Forwarded } else { ForwardedHeader::XForwardedFor };
            let trusted = TrustedProxies::parse(["10.0.0.0/8"]).unwrap();
            let got = forwarded_client(header, &trusted, ip("10.0.0.1"), lines.iter().map(|l| &l[..]));
            if let Some(got) = got {
                let text = String::from_utf8_lossy(&lines.concat()).to_ascii_lowercase();
                prop_assert!(got == ip("10.0.0.1") || text.contains(&got.to_string())
                    || matches!(got, IpAddr::V6(_)) || text.contains("ffff") || text.contains('\\'));
            }
        }

        /// On well-formed lines the right-to-left splitter finds the elements a left-to-right
        /// parse finds.
        #[test]
        fn right_to_left_split_agrees_on_well_formed_lines(
            elements in proptest::collection::vec(element(), 1..5),
        ) {
            let line = elements.join(", ");
            let mut got: Vec<String> = ForwardedElementsRev::new(line.as_bytes())
                .map(|e| String::from_utf8_lossy(e.expect("well formed")).into_owned())
                .collect();
            got.reverse();
            prop_assert_eq!(got, split_left_to_right(&line));
            for element in &elements {
                prop_assert!(matches!(forwarded_hop(element.as_bytes()), Hop::Addr(_)), "{}", element);
            }
        }
    }
}
