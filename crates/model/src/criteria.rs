use ipnet::{Ipv4Net, Ipv6Net};

use crate::{ManagedListName, NetworkAclKeyId};

/// The request signals a criteria object can name. `ipv4_cidrs` and `ipv6_cidrs` are one signal
/// (the client address), as are the two connecting lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Signal {
    /// The end user's address (`ipv4_cidrs`, `ipv6_cidrs`).
    ClientIp,
    /// The address of the peer that opened the connection (`connecting_ipv4_cidrs`, `connecting_ipv6_cidrs`).
    ConnectingIp,
    /// The client address's autonomous system (`asns`).
    Asn,
    /// The client address's country (`geo_country_codes`).
    Country,
    /// The client address's subdivision (`geo_subdivision_codes`).
    Subdivision,
    /// TLS JA3 fingerprint (`ja3_fingerprints`).
    Ja3,
    /// TLS JA4 fingerprint (`ja4_fingerprints`).
    Ja4,
    /// The User-Agent header (`user_agents`).
    UserAgent,
    /// TLS SNI, or the Host header without TLS (`hostnames`).
    Hostname,
    /// Membership of the client address, JA3 or JA4 in one of the named managed lists
    /// (`auth0_managed`).
    Managed,
    /// The id of the network ACL key whose RFC 9421 signature over the request verified
    /// (`http_message_signature`).
    MessageSignature,
}

impl Signal {
    /// Every signal.
    pub const ALL: [Signal; 11] = [
        Signal::ClientIp,
        Signal::ConnectingIp,
        Signal::Asn,
        Signal::Country,
        Signal::Subdivision,
        Signal::Ja3,
        Signal::Ja4,
        Signal::UserAgent,
        Signal::Hostname,
        Signal::Managed,
        Signal::MessageSignature,
    ];
}

/// A CIDR list entry: the text as accepted, and the network it means (host bits cleared).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CidrEntry<N> {
    pub(crate) text: String,
    pub(crate) net: N,
}

impl<N: Copy> CidrEntry<N> {
    /// The entry exactly as it was accepted (`10.1.2.3/8`, `192.0.2.1`).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The network it means (`10.0.0.0/8`, `192.0.2.1/32`).
    pub fn net(&self) -> N {
        self.net
    }
}

/// An autonomous system number.
pub type AsnEntry = u32;

/// An ISO 3166-1 alpha-2 country code, as accepted (any case).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CountryCode {
    pub(crate) text: String,
}

impl CountryCode {
    /// The code as accepted.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The canonical form: two uppercase ASCII letters.
    pub fn canonical(&self) -> [u8; 2] {
        let b = self.text.as_bytes();
        [b[0].to_ascii_uppercase(), b[1].to_ascii_uppercase()]
    }
}

/// An ISO 3166-2 subdivision code (`US-NY`), as accepted (any case).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubdivisionCode {
    pub(crate) text: String,
}

impl SubdivisionCode {
    /// The code as accepted.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The canonical form: uppercase (`US-NY`).
    pub fn canonical(&self) -> String {
        self.text.to_ascii_uppercase()
    }
}

/// A JA3 fingerprint: 32 lowercase hex digits (the MD5 of the JA3 string).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FingerprintJa3 {
    pub(crate) text: String,
}

impl FingerprintJa3 {
    /// The fingerprint as accepted.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The 16 bytes the hex digits spell.
    pub fn bytes(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        let hex = self.text.as_bytes();
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = (hex_value(hex[2 * i]) << 4) | hex_value(hex[2 * i + 1]);
        }
        out
    }
}

pub(crate) fn hex_value(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => 0,
    }
}

/// A JA4 fingerprint (`t13d1516h2_8daaf6152771_b186095e22b6`), as accepted (any case).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FingerprintJa4 {
    pub(crate) text: String,
}

impl FingerprintJa4 {
    /// The fingerprint as accepted.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The canonical form: lowercase.
    pub fn canonical(&self) -> String {
        self.text.to_ascii_lowercase()
    }
}

/// A user-agent pattern: compared exactly, except that `*` matches any run of characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserAgentPattern {
    pub(crate) text: String,
}

impl UserAgentPattern {
    /// The pattern as accepted.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the pattern holds a `*` wildcard.
    pub fn has_wildcard(&self) -> bool {
        self.text.contains('*')
    }

    /// The literal pieces between the wildcards (`a*b*` → `["a", "b", ""]`).
    pub fn literals(&self) -> impl Iterator<Item = &str> {
        self.text.split('*')
    }

    /// Whether `user_agent` matches the pattern, in time linear in both lengths: the literal
    /// pieces between wildcards are found left to right, leftmost first, which is exact for
    /// patterns whose only wildcard is `*`.
    pub fn matches(&self, user_agent: &str) -> bool {
        glob_matches(&self.text, user_agent)
    }
}

/// `*`-only glob matching without backtracking: the first piece must be a prefix, the last a
/// suffix, and the pieces between are found leftmost-first in order.
pub(crate) fn glob_matches(pattern: &str, text: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let mut middle: Vec<&str> = pieces.collect();
    let Some(last) = middle.pop() else {
        // No wildcard at all: the whole text must equal the pattern.
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// A hostname (`login.example.com`), as accepted (any case, optional trailing dot).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hostname {
    pub(crate) text: String,
}

impl Hostname {
    /// The hostname as accepted.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The canonical form: lowercase, without a trailing dot.
    pub fn canonical(&self) -> String {
        self.text.trim_end_matches('.').to_ascii_lowercase()
    }
}

/// A criteria object (`rule.match` or `rule.not_match`): each member, when present, is a
/// non-empty list of unique entries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Criteria {
    pub(crate) ipv4_cidrs: Option<Vec<CidrEntry<Ipv4Net>>>,
    pub(crate) ipv6_cidrs: Option<Vec<CidrEntry<Ipv6Net>>>,
    pub(crate) connecting_ipv4_cidrs: Option<Vec<CidrEntry<Ipv4Net>>>,
    pub(crate) connecting_ipv6_cidrs: Option<Vec<CidrEntry<Ipv6Net>>>,
    pub(crate) asns: Option<Vec<AsnEntry>>,
    pub(crate) geo_country_codes: Option<Vec<CountryCode>>,
    pub(crate) geo_subdivision_codes: Option<Vec<SubdivisionCode>>,
    pub(crate) ja3_fingerprints: Option<Vec<FingerprintJa3>>,
    pub(crate) ja4_fingerprints: Option<Vec<FingerprintJa4>>,
    pub(crate) user_agents: Option<Vec<UserAgentPattern>>,
    pub(crate) hostnames: Option<Vec<Hostname>>,
    pub(crate) auth0_managed: Option<Vec<ManagedListName>>,
    pub(crate) http_message_signature: Option<Vec<NetworkAclKeyId>>,
}

impl Criteria {
    /// `ipv4_cidrs`.
    pub fn ipv4_cidrs(&self) -> Option<&[CidrEntry<Ipv4Net>]> {
        self.ipv4_cidrs.as_deref()
    }
    /// `ipv6_cidrs`.
    pub fn ipv6_cidrs(&self) -> Option<&[CidrEntry<Ipv6Net>]> {
        self.ipv6_cidrs.as_deref()
    }
    /// `connecting_ipv4_cidrs`.
    pub fn connecting_ipv4_cidrs(&self) -> Option<&[CidrEntry<Ipv4Net>]> {
        self.connecting_ipv4_cidrs.as_deref()
    }
    /// `connecting_ipv6_cidrs`.
    pub fn connecting_ipv6_cidrs(&self) -> Option<&[CidrEntry<Ipv6Net>]> {
        self.connecting_ipv6_cidrs.as_deref()
    }
    /// `asns`.
    pub fn asns(&self) -> Option<&[AsnEntry]> {
        self.asns.as_deref()
    }
    /// `geo_country_codes`.
    pub fn geo_country_codes(&self) -> Option<&[CountryCode]> {
        self.geo_country_codes.as_deref()
    }
    /// `geo_subdivision_codes`.
    pub fn geo_subdivision_codes(&self) -> Option<&[SubdivisionCode]> {
        self.geo_subdivision_codes.as_deref()
    }
    /// `ja3_fingerprints`.
    pub fn ja3_fingerprints(&self) -> Option<&[FingerprintJa3]> {
        self.ja3_fingerprints.as_deref()
    }
    /// `ja4_fingerprints`.
    pub fn ja4_fingerprints(&self) -> Option<&[FingerprintJa4]> {
        self.ja4_fingerprints.as_deref()
    }
    /// `user_agents`.
    pub fn user_agents(&self) -> Option<&[UserAgentPattern]> {
        self.user_agents.as_deref()
    }
    /// `hostnames`.
    pub fn hostnames(&self) -> Option<&[Hostname]> {
        self.hostnames.as_deref()
    }

    /// `auth0_managed`: the managed lists named.
    pub fn auth0_managed(&self) -> Option<&[ManagedListName]> {
        self.auth0_managed.as_deref()
    }

    /// `http_message_signature.keys[].id`: the network ACL keys whose signature satisfies it.
    pub fn http_message_signature(&self) -> Option<&[NetworkAclKeyId]> {
        self.http_message_signature.as_deref()
    }

    /// Whether the criteria names `signal` (for the address signals: either list).
    pub fn names(&self, signal: Signal) -> bool {
        match signal {
            Signal::ClientIp => self.ipv4_cidrs.is_some() || self.ipv6_cidrs.is_some(),
            Signal::ConnectingIp => {
                self.connecting_ipv4_cidrs.is_some() || self.connecting_ipv6_cidrs.is_some()
            }
            Signal::Asn => self.asns.is_some(),
            Signal::Country => self.geo_country_codes.is_some(),
            Signal::Subdivision => self.geo_subdivision_codes.is_some(),
            Signal::Ja3 => self.ja3_fingerprints.is_some(),
            Signal::Ja4 => self.ja4_fingerprints.is_some(),
            Signal::UserAgent => self.user_agents.is_some(),
            Signal::Hostname => self.hostnames.is_some(),
            Signal::Managed => self.auth0_managed.is_some(),
            Signal::MessageSignature => self.http_message_signature.is_some(),
        }
    }

    /// The signals the criteria names, in [`Signal::ALL`] order.
    pub fn signals(&self) -> impl Iterator<Item = Signal> + '_ {
        Signal::ALL.into_iter().filter(|s| self.names(*s))
    }

    /// How many entries the criteria holds over all members.
    pub fn entry_count(&self) -> usize {
        fn len<T>(v: &Option<Vec<T>>) -> usize {
            v.as_ref().map_or(0, Vec::len)
        }
        len(&self.ipv4_cidrs)
            + len(&self.ipv6_cidrs)
            + len(&self.connecting_ipv4_cidrs)
            + len(&self.connecting_ipv6_cidrs)
            + len(&self.asns)
            + len(&self.geo_country_codes)
            + len(&self.geo_subdivision_codes)
            + len(&self.ja3_fingerprints)
            + len(&self.ja4_fingerprints)
            + len(&self.user_agents)
            + len(&self.hostnames)
            + len(&self.auth0_managed)
            + len(&self.http_message_signature)
    }
}

#[cfg(test)]
mod tests {
    use super::glob_matches;

    #[test]
    fn globs() {
        assert!(glob_matches("badbot/*", "badbot/1.0"));
        assert!(glob_matches("badbot/*", "badbot/"));
        assert!(!glob_matches("badbot/*", "Badbot/1.0"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("a*b*c", "axxbyyc"));
        assert!(glob_matches("a*b*c", "abc"));
        assert!(!glob_matches("a*b*c", "acb"));
        assert!(glob_matches("*abc", "ababc"));
        assert!(!glob_matches("ab*ba", "aba"));
        assert!(glob_matches("exact", "exact"));
        assert!(!glob_matches("exact", "exact2"));
        assert!(glob_matches("**x", "x"));
    }
}
