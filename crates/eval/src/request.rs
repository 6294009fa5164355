//! The digest of one request, and the JSON form of a request (`netacl eval`, the dry-run API).

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr};

use netacl_model::RequestScope;
use serde::{Deserialize, Serialize};

/// The signals of one request, canonicalised once, borrowed from the caller (no allocation).
///
/// Build it with [`Request::new`] and the `with_*` methods (or the `set_*` methods, which take an
/// `Option` for values a lookup may not find). A signal that is never set is *missing*: in a
/// rule's `match` it matches nothing, in a `not_match` its condition holds.
///
/// Canonicalisation done here: an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) becomes the IPv4
/// address; a country code that is not two ASCII letters is dropped (missing); a JA3 fingerprint
/// that is not 32 hex digits matches nothing; trailing dots of a hostname are dropped. Case is
/// folded when the value is compared, on the stack.
///
/// ```
/// use netacl_eval::Request;
/// use netacl_model::RequestScope;
///
/// let request = Request::new(RequestScope::Authentication)
///     .with_client_ip("::ffff:192.0.2.7".parse().unwrap())
///     .with_country("fr")
///     .with_hostname("Login.Example.COM.");
/// assert_eq!(request.client_ip(), Some("192.0.2.7".parse().unwrap()));
/// assert_eq!(request.country(), Some("FR"));
/// assert_eq!(request.hostname(), Some("Login.Example.COM"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Request<'a> {
    scope: RequestScope,
    client_ip: Option<IpAddr>,
    connecting_ip: Option<IpAddr>,
    asn: Option<u32>,
    country: Option<[u8; 2]>,
    subdivision: Option<&'a str>,
    ja3: Option<[u8; 16]>,
    ja3_given: bool,
    ja4: Option<&'a str>,
    user_agent: Option<&'a str>,
    hostname: Option<&'a str>,
    message_signature: Option<&'a str>,
}

/// Maps `::ffff:a.b.c.d` to `a.b.c.d`; every other address is kept.
pub(crate) fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Hex digit values; 0x80 marks a byte that is not a hex digit.
const HEX: [u8; 256] = {
    let mut table = [0x80u8; 256];
    let mut c = 0;
    while c < 10 {
        table[b'0' as usize + c] = c as u8;
        c += 1;
    }
    let mut c = 0;
    while c < 6 {
        table[b'a' as usize + c] = 10 + c as u8;
        table[b'A' as usize + c] = 10 + c as u8;
        c += 1;
    }
    table
};

fn parse_ja3(text: &str) -> Option<[u8; 16]> {
    let hex = text.as_bytes();
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut invalid = 0u8;
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let (high, low) = (HEX[usize::from(pair[0])], HEX[usize::from(pair[1])]);
        invalid |= high | low;
        *byte = (high << 4) | (low & 0x0f);
    }
    (invalid & 0x80 == 0).then_some(out)
}

impl<'a> Request<'a> {
    /// A request of `scope` with no signals.
    pub fn new(scope: RequestScope) -> Self {
        Self {
            scope,
            ..Self::default()
        }
    }

    /// The end user's address (IPv4-mapped IPv6 becomes IPv4).
    pub fn with_client_ip(mut self, ip: IpAddr) -> Self {
        self.set_client_ip(Some(ip));
        self
    }

    /// The address of the peer that opened the connection.
    pub fn with_connecting_ip(mut self, ip: IpAddr) -> Self {
        self.set_connecting_ip(Some(ip));
        self
    }

    /// The client address's autonomous system number.
    pub fn with_asn(mut self, asn: u32) -> Self {
        self.set_asn(Some(asn));
        self
    }

    /// The client address's country, ISO 3166-1 alpha-2 in any case; ignored (missing) when it
    /// is not two ASCII letters.
    pub fn with_country(mut self, code: &'a str) -> Self {
        self.set_country(Some(code));
        self
    }

    /// The client address's subdivision, ISO 3166-2 (`US-NY`), any case.
    pub fn with_subdivision(mut self, code: &'a str) -> Self {
        self.set_subdivision(Some(code));
        self
    }

    /// The JA3 fingerprint (32 hex digits, any case; anything else matches no listed value).
    pub fn with_ja3(mut self, ja3: &'a str) -> Self {
        self.set_ja3(Some(ja3));
        self
    }

    /// The JA4 fingerprint, any case.
    pub fn with_ja4(mut self, ja4: &'a str) -> Self {
        self.set_ja4(Some(ja4));
        self
    }

    /// The User-Agent header, compared exactly.
    pub fn with_user_agent(mut self, ua: &'a str) -> Self {
        self.set_user_agent(Some(ua));
        self
    }

    /// The TLS SNI (or the Host header without TLS), any case, trailing dots ignored.
    pub fn with_hostname(mut self, host: &'a str) -> Self {
        self.set_hostname(Some(host));
        self
    }

    /// Sets the request scope.
    pub fn set_scope(&mut self, scope: RequestScope) {
        self.scope = scope;
    }

    /// Sets or clears the client address.
    pub fn set_client_ip(&mut self, ip: Option<IpAddr>) {
        self.client_ip = ip.map(canonical_ip);
    }

    /// Sets or clears the connecting address.
    pub fn set_connecting_ip(&mut self, ip: Option<IpAddr>) {
        self.connecting_ip = ip.map(canonical_ip);
    }

    /// Sets or clears the ASN.
    pub fn set_asn(&mut self, asn: Option<u32>) {
        self.asn = asn;
    }

    /// Sets or clears the country (dropped when not two ASCII letters).
    pub fn set_country(&mut self, code: Option<&'a str>) {
        self.country = code.and_then(|c| match c.as_bytes() {
            [a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => {
                Some([a.to_ascii_uppercase(), b.to_ascii_uppercase()])
            }
            _ => None,
        });
    }

    /// Sets or clears the country from a code already checked (two ASCII letters, uppercase).
    pub(crate) fn set_country_code(&mut self, code: Option<[u8; 2]>) {
        self.country = code;
    }

    /// Sets or clears the subdivision.
    pub fn set_subdivision(&mut self, code: Option<&'a str>) {
        self.subdivision = code;
    }

    /// Sets or clears the JA3 fingerprint.
    pub fn set_ja3(&mut self, ja3: Option<&'a str>) {
        self.ja3_given = ja3.is_some();
        self.ja3 = ja3.and_then(parse_ja3);
    }

    /// Sets or clears the JA4 fingerprint.
    pub fn set_ja4(&mut self, ja4: Option<&'a str>) {
        self.ja4 = ja4;
    }

    /// Sets or clears the User-Agent.
    pub fn set_user_agent(&mut self, ua: Option<&'a str>) {
        self.user_agent = ua;
    }

    /// The id of the network ACL key whose RFC 9421 signature over the request verified (the
    /// edge sets it only after checking the signature; `netacl eval` and the dry run take it as
    /// given).
    pub fn with_message_signature(mut self, key_id: &'a str) -> Self {
        self.message_signature = Some(key_id);
        self
    }

    /// Sets or clears the verified signing key's id.
    pub fn set_message_signature(&mut self, key_id: Option<&'a str>) {
        self.message_signature = key_id;
    }

    /// The id of the key whose signature verified, if any.
    pub fn message_signature(&self) -> Option<&'a str> {
        self.message_signature
    }

    /// Sets or clears the hostname (trailing dots dropped).
    pub fn set_hostname(&mut self, host: Option<&'a str>) {
        self.hostname = host.map(|h| h.trim_end_matches('.'));
    }

    /// The request scope.
    pub fn scope(&self) -> RequestScope {
        self.scope
    }

    /// The canonical client address.
    pub fn client_ip(&self) -> Option<IpAddr> {
        self.client_ip
    }

    /// The canonical connecting address.
    pub fn connecting_ip(&self) -> Option<IpAddr> {
        self.connecting_ip
    }

    /// The ASN.
    pub fn asn(&self) -> Option<u32> {
        self.asn
    }

    /// The country, uppercase (`None` when missing or malformed).
    pub fn country(&self) -> Option<&str> {
        self.country
            .as_ref()
            .and_then(|c| std::str::from_utf8(c).ok())
    }

    pub(crate) fn country_code(&self) -> Option<[u8; 2]> {
        self.country
    }

    /// The subdivision as given.
    pub fn subdivision(&self) -> Option<&'a str> {
        self.subdivision
    }

    /// The JA3 fingerprint's 16 bytes (`None` when missing or malformed).
    pub fn ja3(&self) -> Option<[u8; 16]> {
        self.ja3
    }

    /// Whether a JA3 value was given (even a malformed one).
    pub fn has_ja3(&self) -> bool {
        self.ja3_given
    }

    /// The JA4 fingerprint as given.
    pub fn ja4(&self) -> Option<&'a str> {
        self.ja4
    }

    /// The User-Agent as given.
    pub fn user_agent(&self) -> Option<&'a str> {
        self.user_agent
    }

    /// The hostname without trailing dots (case as given).
    pub fn hostname(&self) -> Option<&'a str> {
        self.hostname
    }
}

/// Why a [`RequestInput`] could not become a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// Both `scope` and `path` were given; give one (the scope follows from the path).
    #[error("give either \"scope\" or \"path\", not both")]
    ScopeAndPath,
    /// `scope` is not one of `management`, `authentication`, `dynamic_client_registration`.
    #[error(
        "unknown scope {0:?} (expected management, authentication or dynamic_client_registration)"
    )]
    UnknownScope(String),
    /// `client_ip` is not an IPv4 or IPv6 address.
    #[error("client_ip {0:?} is not an IP address")]
    InvalidClientIp(String),
    /// `connecting_ip` is not an IPv4 or IPv6 address.
    #[error("connecting_ip {0:?} is not an IP address")]
    InvalidConnectingIp(String),
    /// `path` is refused, as the edge refuses it (a `400` there): a malformed percent-escape, a
    /// backslash, or a path servers would route to different scopes.
    #[error("path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why it is refused.
        reason: netacl_model::PathError,
    },
}

/// A request as JSON: the keys of `netacl eval` and of the server's dry-run endpoint. Every key
/// is optional; unknown keys are refused.
///
/// The scope comes from `scope` (`management`, `authentication`,
/// `dynamic_client_registration`) or from `path`, exactly as the edge derives it (see
/// [`scope_of_path`](netacl_model::scope_of_path): normalised first, a path the edge refuses is
/// an error here); giving both is an error, giving neither means `authentication`.
///
/// ```
/// use netacl_eval::RequestInput;
/// use netacl_model::RequestScope;
///
/// let input: RequestInput = serde_json::from_str(
///     r#"{"path": "/api/v2/users", "client_ip": "192.0.2.1", "country": "US"}"#,
/// ).unwrap();
/// let request = input.to_request().unwrap();
/// assert_eq!(request.scope(), RequestScope::Management);
/// ```
///
/// A request is a JSON object: serde's positional form of a struct (a JSON array,
/// `["management", null, "198.51.100.7"]`) is refused ("expected a JSON object").
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct RequestInput {
    /// The request scope by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The request path (its scope is derived from it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The end user's address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_ip: Option<String>,
    /// The connecting peer's address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connecting_ip: Option<String>,
    /// The client's ASN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asn: Option<u32>,
    /// The client's country.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// The client's subdivision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subdivision: Option<String>,
    /// JA3 fingerprint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ja3: Option<String>,
    /// JA4 fingerprint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ja4: Option<String>,
    /// User-Agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// SNI or Host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// The id of the network ACL key whose signature verified (absent: no valid signature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_message_signature: Option<String>,
}

/// [`RequestInput`] borrowing its strings from the JSON text where it can (no allocation for
/// strings without escapes): what `netacl eval` parses each line into. A JSON object only, like
/// [`RequestInput`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct RequestInputRef<'a> {
    /// The request scope by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<Cow<'a, str>>,
    /// The request path (its scope is derived from it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<Cow<'a, str>>,
    /// The end user's address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_ip: Option<Cow<'a, str>>,
    /// The connecting peer's address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connecting_ip: Option<Cow<'a, str>>,
    /// The client's ASN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asn: Option<u32>,
    /// The client's country.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country: Option<Cow<'a, str>>,
    /// The client's subdivision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subdivision: Option<Cow<'a, str>>,
    /// JA3 fingerprint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ja3: Option<Cow<'a, str>>,
    /// JA4 fingerprint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ja4: Option<Cow<'a, str>>,
    /// User-Agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<Cow<'a, str>>,
    /// SNI or Host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<Cow<'a, str>>,
    /// The id of the network ACL key whose signature verified (absent: no valid signature).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_message_signature: Option<Cow<'a, str>>,
}

/// The field reader of [`RequestInputRef`] (and so of [`RequestInput`]): serde's derive, kept
/// private and reached only through [`ObjectOnly`], because the derived reader also takes a
/// sequence (serde's positional form of a struct: `["management", null, "198.51.100.7"]`).
#[derive(Deserialize)]
#[serde(remote = "RequestInputRef", deny_unknown_fields)]
struct RequestInputFields<'a> {
    #[serde(default, borrow, deserialize_with = "borrow_str")]
    scope: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrow_str")]
    path: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrow_str")]
    client_ip: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrow_str")]
    connecting_ip: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "asn_number")]
    asn: Option<u32>,
    #[serde(default, borrow, deserialize_with = "borrow_str")]
    country: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrow_str")]
    subdivision: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrow_str")]
    ja3: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrow_str")]
    ja4: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrow_str")]
    user_agent: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrow_str")]
    hostname: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrow_str")]
    http_message_signature: Option<Cow<'a, str>>,
}

/// Reads [`RequestInputRef`] from a map (a JSON object) only: `expected a JSON object` for
/// anything else.
struct ObjectOnly;

impl<'de> serde::de::Visitor<'de> for ObjectOnly {
    type Value = RequestInputRef<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        RequestInputFields::deserialize(serde::de::value::MapAccessDeserializer::new(map))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RequestInputRef<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectOnly)
    }
}

impl<'de> Deserialize<'de> for RequestInput {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let input = deserializer.deserialize_map(ObjectOnly)?;
        let owned = |text: Option<Cow<'_, str>>| text.map(Cow::into_owned);
        Ok(RequestInput {
            scope: owned(input.scope),
            path: owned(input.path),
            client_ip: owned(input.client_ip),
            connecting_ip: owned(input.connecting_ip),
            asn: input.asn,
            country: owned(input.country),
            subdivision: owned(input.subdivision),
            ja3: owned(input.ja3),
            ja4: owned(input.ja4),
            user_agent: owned(input.user_agent),
            hostname: owned(input.hostname),
            http_message_signature: owned(input.http_message_signature),
        })
    }
}

/// An ASN: a JSON integer in 0..=4294967295, or `null`. A number with a zero fraction
/// (`64500.0`) is that integer, as JSON Schema's `integer` has it.
fn asn_number<'de, D>(deserializer: D) -> Result<Option<u32>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::de::{Error, Unexpected};
    match Option::<serde_json::Number>::deserialize(deserializer)? {
        None => Ok(None),
        Some(number) => {
            let integral = number.as_u64().or_else(|| {
                number
                    .as_f64()
                    .filter(|f| f.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(f))
                    .map(|f| f as u64)
            });
            match integral.and_then(|n| u32::try_from(n).ok()) {
                Some(asn) => Ok(Some(asn)),
                None => Err(D::Error::invalid_value(
                    Unexpected::Other(&number.to_string()),
                    &"an integer in 0..=4294967295",
                )),
            }
        }
    }
}

/// Deserialises an optional string borrowing from the input when it holds no escape (serde's
/// own `Cow` support always copies inside an `Option`).
fn borrow_str<'de: 'a, 'a, D>(deserializer: D) -> Result<Option<Cow<'a, str>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = Option<Cow<'de, str>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string or null")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(self)
        }
        fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(v)))
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_owned())))
        }
        fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v)))
        }
    }
    deserializer.deserialize_option(Visitor)
}

struct Fields<'s> {
    scope: Option<&'s str>,
    path: Option<&'s str>,
    client_ip: Option<&'s str>,
    connecting_ip: Option<&'s str>,
    asn: Option<u32>,
    country: Option<&'s str>,
    subdivision: Option<&'s str>,
    ja3: Option<&'s str>,
    ja4: Option<&'s str>,
    user_agent: Option<&'s str>,
    hostname: Option<&'s str>,
    message_signature: Option<&'s str>,
}

fn parse_ip(text: &str) -> Option<IpAddr> {
    // Accept the bracketed IPv6 form too (`[::1]`), as it appears in logs.
    let text = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    text.parse::<IpAddr>().ok()
}

impl<'s> Fields<'s> {
    fn to_request(&self) -> Result<Request<'s>, RequestError> {
        let scope = match (self.scope, self.path) {
            (Some(_), Some(_)) => return Err(RequestError::ScopeAndPath),
            (Some(name), None) => RequestScope::parse(name)
                .ok_or_else(|| RequestError::UnknownScope(name.to_owned()))?,
            (None, Some(path)) => {
                netacl_model::scope_of_path(path).map_err(|reason| RequestError::InvalidPath {
                    path: path.to_owned(),
                    reason,
                })?
            }
            (None, None) => RequestScope::Authentication,
        };
        let mut request = Request::new(scope);
        if let Some(text) = self.client_ip {
            let ip =
                parse_ip(text).ok_or_else(|| RequestError::InvalidClientIp(text.to_owned()))?;
            request.set_client_ip(Some(ip));
        }
        if let Some(text) = self.connecting_ip {
            let ip =
                parse_ip(text).ok_or_else(|| RequestError::InvalidConnectingIp(text.to_owned()))?;
            request.set_connecting_ip(Some(ip));
        }
        request.set_asn(self.asn);
        request.set_country(self.country);
        request.set_subdivision(self.subdivision);
        request.set_ja3(self.ja3);
        request.set_ja4(self.ja4);
        request.set_user_agent(self.user_agent);
        request.set_hostname(self.hostname);
        request.set_message_signature(self.message_signature);
        Ok(request)
    }
}

impl RequestInput {
    /// The request these keys describe.
    pub fn to_request(&self) -> Result<Request<'_>, RequestError> {
        Fields {
            scope: self.scope.as_deref(),
            path: self.path.as_deref(),
            client_ip: self.client_ip.as_deref(),
            connecting_ip: self.connecting_ip.as_deref(),
            asn: self.asn,
            country: self.country.as_deref(),
            subdivision: self.subdivision.as_deref(),
            ja3: self.ja3.as_deref(),
            ja4: self.ja4.as_deref(),
            user_agent: self.user_agent.as_deref(),
            hostname: self.hostname.as_deref(),
            message_signature: self.http_message_signature.as_deref(),
        }
        .to_request()
    }
}

/// The position of the first byte of `bytes` that ends a plain JSON string: a quote, a
/// backslash or a control character. Eight bytes at a time: a word's matches are found with
/// the classic zero-byte test, whose lowest set bit is always exact.
#[inline]
fn special_byte(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let mut chunks = bytes.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let found = zero_byte(x ^ (ONES * u64::from(b'"')))
            | zero_byte(x ^ (ONES * u64::from(b'\\')))
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGHS);
        if found != 0 {
            return Some(offset + found.trailing_zeros() as usize / 8);
        }
        offset += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|at| offset + at)
}

impl<'a> RequestInputRef<'a> {
    /// Parses one request line (a JSON object) exactly as `serde_json::from_str` would.
    ///
    /// Lines of the usual shape (known keys once each, values that are `null`, strings without
    /// escapes or control characters, and plain non-negative integers) are read by a scanner
    /// made for this flat object, several times faster than the generic deserializer; any other
    /// line, valid or not, goes to `serde_json`, so the result and the error messages are the
    /// same either way.
    pub fn from_json_line(line: &'a str) -> Result<Self, serde_json::Error> {
        match Self::scan(line.as_bytes(), line) {
            Some(input) => Ok(input),
            None => serde_json::from_str(line),
        }
    }

    /// The flat-object scanner: `None` for anything outside the usual shape.
    fn scan(bytes: &[u8], text: &'a str) -> Option<Self> {
        #[inline]
        fn skip_ws(bytes: &[u8], mut at: usize) -> usize {
            while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(at) {
                at += 1;
            }
            at
        }
        /// A string without escapes or control characters starting at the quote at `at`:
        /// its content's range and the position after the closing quote.
        #[inline]
        fn string(bytes: &[u8], at: usize) -> Option<(usize, usize, usize)> {
            if bytes.get(at) != Some(&b'"') {
                return None;
            }
            let start = at + 1;
            let end = start + special_byte(&bytes[start..])?;
            (bytes[end] == b'"').then_some((start, end, end + 1))
        }
        let mut input = RequestInputRef::default();
        let mut seen = 0u16;
        let mut at = skip_ws(bytes, 0);
        if bytes.get(at) != Some(&b'{') {
            return None;
        }
        at = skip_ws(bytes, at + 1);
        if bytes.get(at) == Some(&b'}') {
            at += 1;
        } else {
            loop {
                let (key_start, key_end, after) = string(bytes, at)?;
                at = skip_ws(bytes, after);
                if bytes.get(at) != Some(&b':') {
                    return None;
                }
                at = skip_ws(bytes, at + 1);
                let key = &bytes[key_start..key_end];
                let (field, bit): (Option<&mut Option<Cow<'a, str>>>, u16) = match key {
                    b"scope" => (Some(&mut input.scope), 1),
                    b"path" => (Some(&mut input.path), 1 << 1),
                    b"client_ip" => (Some(&mut input.client_ip), 1 << 2),
                    b"connecting_ip" => (Some(&mut input.connecting_ip), 1 << 3),
                    b"asn" => (None, 1 << 4),
                    b"country" => (Some(&mut input.country), 1 << 5),
                    b"subdivision" => (Some(&mut input.subdivision), 1 << 6),
                    b"ja3" => (Some(&mut input.ja3), 1 << 7),
                    b"ja4" => (Some(&mut input.ja4), 1 << 8),
                    b"user_agent" => (Some(&mut input.user_agent), 1 << 9),
                    b"hostname" => (Some(&mut input.hostname), 1 << 10),
                    b"http_message_signature" => (Some(&mut input.http_message_signature), 1 << 11),
                    _ => return None,
                };
                if seen & bit != 0 {
                    return None;
                }
                seen |= bit;
                if bytes[at..].starts_with(b"null") {
                    at += 4;
                } else if let Some(field) = field {
                    let (start, end, after) = string(bytes, at)?;
                    *field = Some(Cow::Borrowed(text.get(start..end)?));
                    at = after;
                } else {
                    // `asn`: a JSON integer without sign, fraction or exponent, in range.
                    let digits = bytes[at..]
                        .iter()
                        .take_while(|b| b.is_ascii_digit())
                        .count();
                    if digits == 0 || (digits > 1 && bytes[at] == b'0') {
                        return None;
                    }
                    if let Some(b'.' | b'e' | b'E') = bytes.get(at + digits) {
                        return None;
                    }
                    input.asn = Some(text.get(at..at + digits)?.parse().ok()?);
                    at += digits;
                }
                at = skip_ws(bytes, at);
                match bytes.get(at) {
                    Some(b',') => at = skip_ws(bytes, at + 1),
                    Some(b'}') => {
                        at += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        (skip_ws(bytes, at) == bytes.len()).then_some(input)
    }
}

impl RequestInputRef<'_> {
    /// The request these keys describe.
    pub fn to_request(&self) -> Result<Request<'_>, RequestError> {
        Fields {
            scope: self.scope.as_deref(),
            path: self.path.as_deref(),
            client_ip: self.client_ip.as_deref(),
            connecting_ip: self.connecting_ip.as_deref(),
            asn: self.asn,
            country: self.country.as_deref(),
            subdivision: self.subdivision.as_deref(),
            ja3: self.ja3.as_deref(),
            ja4: self.ja4.as_deref(),
            user_agent: self.user_agent.as_deref(),
            hostname: self.hostname.as_deref(),
            message_signature: self.http_message_signature.as_deref(),
        }
        .to_request()
    }
}

/// An IPv4 address as a number (for the range tables).
#[inline]
pub(crate) fn v4_bits(ip: Ipv4Addr) -> u32 {
    u32::from(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_bytes_are_found_at_every_position() {
        for len in 0..40 {
            for at in 0..len {
                for special in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
                    let mut text = vec![b'a'; len];
                    // Bytes that sit next to the special ones in value: no false hits.
                    for (i, b) in text.iter_mut().enumerate() {
                        *b = [b'a', b' ', b'!', b'#', b'[', b']', 0x7f, 0xff, 0x80][i % 9];
                    }
                    text[at] = special;
                    if at + 1 < len {
                        text[at + 1] = b'"';
                    }
                    assert_eq!(special_byte(&text), Some(at), "{len} {at} {special}");
                }
            }
            let plain: Vec<u8> = (0..len).map(|i| b" !#[]az\x7f\xff"[i % 9]).collect();
            assert_eq!(special_byte(&plain), None, "{len}");
        }
    }

    #[test]
    fn usual_lines_take_the_scanner_and_others_serde_json() {
        fn scanned(text: &str) -> Option<RequestInputRef<'_>> {
            RequestInputRef::scan(text.as_bytes(), text)
        }
        let usual = r#"{"path":"/authorize","client_ip":"192.0.2.7","asn":64500,"country":"FR","user_agent":"Mozilla/5.0 (X11)","hostname":"login.example.com","ja3":null}"#;
        let input = scanned(usual).expect("the scanner reads the usual line");
        assert_eq!(input.asn, Some(64500));
        assert_eq!(input.user_agent.as_deref(), Some("Mozilla/5.0 (X11)"));
        assert_eq!(input.ja3, None);
        assert_eq!(input, serde_json::from_str(usual).unwrap());
        assert!(scanned(" { } \n").is_some());
        for other in [
            r#"{"user_agent":"a\"b"}"#,
            r#"{"asn":01}"#,
            r#"{"asn":-1}"#,
            r#"{"asn":4294967296}"#,
            r#"{"asn":1.5}"#,
            r#"{"asn":"1"}"#,
            r#"{"path":"/a","path":"/b"}"#,
            r#"{"other":1}"#,
            r#"{"path":"/a"} x"#,
            r#"{"path":"/a",}"#,
            "[]",
        ] {
            assert!(scanned(other).is_none(), "{other}");
        }
    }

    #[test]
    fn canonicalises_addresses_countries_and_hostnames() {
        let r = Request::new(RequestScope::Management)
            .with_client_ip("::ffff:10.0.0.1".parse().unwrap())
            .with_connecting_ip("::1".parse().unwrap())
            .with_country("USA")
            .with_hostname("example.com..")
            .with_ja3("0123456789ABCDEF0123456789abcdef");
        assert_eq!(r.client_ip(), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(r.connecting_ip(), Some("::1".parse().unwrap()));
        assert_eq!(r.country(), None);
        assert_eq!(r.hostname(), Some("example.com"));
        assert_eq!(r.ja3().map(|b| b[1]), Some(0x23));
        assert_eq!(parse_ja3("0123456789abcdef0123456789ABCDEG"), None);
        assert_eq!(
            parse_ja3("ffffffffffffffffffffffffffffffff"),
            Some([0xff; 16])
        );
        let bad = Request::new(RequestScope::Management).with_ja3("xyz");
        assert!(bad.has_ja3());
        assert_eq!(bad.ja3(), None);
    }

    #[test]
    fn input_scope_rules() {
        let both = RequestInput {
            scope: Some("management".into()),
            path: Some("/x".into()),
            ..RequestInput::default()
        };
        assert_eq!(both.to_request(), Err(RequestError::ScopeAndPath));
        let neither = RequestInput::default();
        assert_eq!(
            neither.to_request().map(|r| r.scope()),
            Ok(RequestScope::Authentication)
        );
        let unknown = RequestInput {
            scope: Some("tenant".into()),
            ..RequestInput::default()
        };
        assert!(matches!(
            unknown.to_request(),
            Err(RequestError::UnknownScope(_))
        ));
        let path = RequestInput {
            path: Some("/oidc/register".into()),
            ..RequestInput::default()
        };
        assert_eq!(
            path.to_request().map(|r| r.scope()),
            Ok(RequestScope::DynamicClientRegistration)
        );
    }

    /// serde's derived struct reader also takes a sequence, by position: `["management", null,
    /// "198.51.100.7"]` was a management request from 198.51.100.7.
    #[test]
    fn requests_are_json_objects_never_arrays() {
        for text in [
            r#"["management",null,"198.51.100.7"]"#,
            "[null, null]",
            "[]",
            r#""management""#,
            "null",
            "7",
        ] {
            let owned = serde_json::from_str::<RequestInput>(text).expect_err(text);
            assert!(
                owned.to_string().contains("expected a JSON object"),
                "{text}: {owned}"
            );
            let line = RequestInputRef::from_json_line(text).expect_err(text);
            assert_eq!(line.to_string(), owned.to_string(), "{text}");
            let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
            let from_value = RequestInput::deserialize(&value).expect_err(text);
            assert!(
                from_value.to_string().contains("expected a JSON object"),
                "{text}: {from_value}"
            );
        }
        // Objects read as before, through serde_json and from a value alike, and serialise back.
        let text = r#"{"scope":"management","client_ip":"198.51.100.7"}"#;
        let owned: RequestInput = serde_json::from_str(text).expect("object");
        assert_eq!(owned.client_ip.as_deref(), Some("198.51.100.7"));
        assert_eq!(serde_json::to_string(&owned).expect("serialise"), text);
        let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
        assert_eq!(RequestInput::deserialize(&value).expect("object"), owned);
        let borrowed: RequestInputRef<'_> = serde_json::from_str(text).expect("object");
        assert!(matches!(borrowed.client_ip, Some(Cow::Borrowed(_))));
        assert_eq!(serde_json::to_string(&borrowed).expect("serialise"), text);
        // An integral number is an integer (JSON Schema's `integer`); others are refused.
        let asn = |text: &str| serde_json::from_str::<RequestInput>(text).map(|r| r.asn);
        assert_eq!(asn(r#"{"asn": 64500.0}"#).expect("integral"), Some(64500));
        assert_eq!(asn(r#"{"asn": 4294967295}"#).expect("max"), Some(u32::MAX));
        assert_eq!(asn(r#"{"asn": null}"#).expect("null"), None);
        for bad in [
            "64500.5",
            "-1",
            "4294967296",
            "4294967296.0",
            "1e100",
            "\"1\"",
        ] {
            assert!(asn(&format!(r#"{{"asn": {bad}}}"#)).is_err(), "{bad}");
        }
        let err = serde_json::from_str::<RequestInput>(r#"{"scope":"x","scope":"y"}"#)
            .expect_err("duplicate");
        assert!(err.to_string().contains("duplicate field `scope`"), "{err}");
    }

    /// A `path` gets its scope exactly as the edge derives it (`netacl_model::scope_of_path`),
    /// through both readers of request lines; a path the edge refuses is an error.
    #[test]
    fn path_scopes_are_the_edges() {
        for (path, scope) in [
            ("/%61pi/v2/users", RequestScope::Management),
            ("//api/v2/users", RequestScope::Management),
            ("/API/V2/users?x=%zz", RequestScope::Management),
            (
                "/x/../oidc/register",
                RequestScope::DynamicClientRegistration,
            ),
            ("/login/a%2Fb", RequestScope::Authentication),
        ] {
            let line = serde_json::json!({ "path": path }).to_string();
            let scanned = RequestInputRef::from_json_line(&line).unwrap();
            assert_eq!(scanned.to_request().map(|r| r.scope()), Ok(scope), "{path}");
            let input: RequestInput = serde_json::from_str(&line).unwrap();
            assert_eq!(input.to_request().map(|r| r.scope()), Ok(scope), "{path}");
        }
        for (path, reason) in [
            (
                "/%%361pi/v2/users",
                netacl_model::PathError::MalformedEscape { offset: 1 },
            ),
            ("/api/v2//../users", netacl_model::PathError::Ambiguous),
            (
                "/api\\v2\\users",
                netacl_model::PathError::Backslash { offset: 4 },
            ),
        ] {
            let line = serde_json::json!({ "path": path }).to_string();
            let want = Err(RequestError::InvalidPath {
                path: path.to_owned(),
                reason,
            });
            let scanned = RequestInputRef::from_json_line(&line).unwrap();
            assert_eq!(
                scanned.to_request().map(|r| r.scope()),
                want.clone(),
                "{path}"
            );
            let input: RequestInput = serde_json::from_str(&line).unwrap();
            assert_eq!(input.to_request().map(|r| r.scope()), want, "{path}");
        }
    }

    #[test]
    fn input_refuses_bad_addresses_and_unknown_keys() {
        let bad = RequestInput {
            client_ip: Some("10.0.0.256".into()),
            ..RequestInput::default()
        };
        assert!(matches!(
            bad.to_request(),
            Err(RequestError::InvalidClientIp(_))
        ));
        let bad = RequestInput {
            connecting_ip: Some("nope".into()),
            ..RequestInput::default()
        };
        assert!(matches!(
            bad.to_request(),
            Err(RequestError::InvalidConnectingIp(_))
        ));
        assert!(serde_json::from_str::<RequestInput>(r#"{"clientip": "1.2.3.4"}"#).is_err());
        let borrowed: RequestInputRef<'_> =
            serde_json::from_str(r#"{"client_ip": "[2001:db8::1]", "user_agent": "a\"b"}"#)
                .unwrap();
        let r = borrowed.to_request().unwrap();
        assert_eq!(r.client_ip(), Some("2001:db8::1".parse().unwrap()));
        assert_eq!(r.user_agent(), Some("a\"b"));
        assert!(
            matches!(borrowed.client_ip, Some(Cow::Borrowed(_))),
            "no escape: borrowed"
        );
        assert!(
            matches!(borrowed.user_agent, Some(Cow::Owned(_))),
            "escape: copied"
        );
        let nulls: RequestInputRef<'_> =
            serde_json::from_str(r#"{"hostname": null, "ja4": "x"}"#).unwrap();
        assert_eq!(nulls.hostname, None);
        assert!(serde_json::from_str::<RequestInputRef<'_>>(r#"{"hostname": 5}"#).is_err());
    }
}
