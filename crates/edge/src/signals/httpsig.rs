//! RFC 9421 HTTP Message Signatures, HMAC-SHA256 only: the `http_message_signature` signal.
//!
//! A tenant's own proxy signs each request with a network ACL key; the edge verifies the
//! signature and hands the evaluator the id of the key whose signature verified. What makes a
//! signature valid here (the public service's criteria, and netacl's choices where it is
//! silent):
//!
//! - exactly one label in `Signature-Input` and in `Signature` (RFC 8941 dictionaries; several
//!   field lines are joined with `, ` first), the same label in both;
//! - `created`, `expires` and `keyid` present (integers, integers, a string); `alg`, when
//!   present, is `hmac-sha256`; `nonce` and `tag` are allowed and only signed over;
//! - `expires - created` within 0..=3600 s, `created <= now + 60`, `now <= expires + 60`;
//! - the covered components include `@method`, `@authority` and `@path` (the floor), each at
//!   most once; supported: `@method`, `@target-uri`, `@authority`, `@scheme`,
//!   `@request-target`, `@path`, `@query`, `@query-param;name="…"` and header fields without
//!   parameters;
//! - the MAC (HMAC-SHA256 over the signature base of RFC 9421 §2.5 with `keyid`'s material)
//!   equals the `Signature` byte sequence, compared in constant time.
//!
//! Work is bounded before any parsing: the two fields together at most
//! [`MAX_FIELD_BYTES`], at most [`MAX_COMPONENTS`] covered components. Nothing here panics on
//! input; any failure is a [`SignatureError`], which the edge treats as a missing signal (the
//! rules decide), never as an error answer.
//!
//! ```
//! use netacl_edge::httpsig::{verify, SignedRequest, SigningKeys};
//!
//! let keys = SigningKeys::new([("proxy", &[7u8; 32][..])]);
//! let headers = http::HeaderMap::new();
//! let request = SignedRequest {
//!     method: "GET", scheme: "https", authority: "login.example.com",
//!     path: "/authorize", query: None, headers: &headers,
//! };
//! // An unsigned request has no signature to verify.
//! assert!(verify(&keys, &request, 1_700_000_000).is_err());
//! ```
use http::HeaderMap;
use percent_encoding::{percent_decode, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use sfv::{BareItem, Dictionary, InnerList, Item, ListEntry, Parser};

/// Longest `Signature-Input` plus `Signature`, in bytes; longer is refused unparsed.
pub const MAX_FIELD_BYTES: usize = 8 * 1024;
/// Most covered components a signature may list.
pub const MAX_COMPONENTS: usize = 32;
/// Longest lifetime, `expires - created`, in seconds.
pub const MAX_LIFETIME_SECS: i64 = 3600;
/// Clock skew tolerated on `created` and `expires`, in seconds.
pub const SKEW_SECS: i64 = 60;
/// The components every signature must cover (netacl's floor).
pub const REQUIRED_COMPONENTS: [&str; 3] = ["@method", "@authority", "@path"];

/// The network ACL keys a signature may be made with: id → HMAC key (prepared once, when the
/// keys change, not per request). `Debug` shows only the ids.
pub use netacl_secrets::MacKeys as SigningKeys;

/// A request's header fields as the proxy in front holds them: what the signature check reads
/// (the `Signature-Input` and `Signature` fields and the fields a signature covers), and what
/// [`RequestFacts`](crate::RequestFacts) carries. Implemented for hyper's [`HeaderMap`] and for
/// arrays, vectors and slices of `(name, value)` pairs, so that a proxy without a `HeaderMap` (an SPOE message, an
/// Envoy `CheckRequest`) need not build one.
pub trait HeaderLookup {
    /// Calls `value` with every value of the field `name` (given in lowercase; compared without
    /// ASCII case), in the order the field lines were received. No call: the field is absent.
    fn each_value(&self, name: &str, value: &mut dyn FnMut(&[u8]));
}

impl HeaderLookup for HeaderMap {
    fn each_value(&self, name: &str, value: &mut dyn FnMut(&[u8])) {
        for v in self.get_all(name) {
            value(v.as_bytes());
        }
    }
}

impl<N: AsRef<str>, V: AsRef<[u8]>> HeaderLookup for [(N, V)] {
    fn each_value(&self, name: &str, value: &mut dyn FnMut(&[u8])) {
        for (n, v) in self {
            if n.as_ref().eq_ignore_ascii_case(name) {
                value(v.as_ref());
            }
        }
    }
}

impl<N: AsRef<str>, V: AsRef<[u8]>, const K: usize> HeaderLookup for [(N, V); K] {
    fn each_value(&self, name: &str, value: &mut dyn FnMut(&[u8])) {
        self[..].each_value(name, value);
    }
}

impl<N: AsRef<str>, V: AsRef<[u8]>> HeaderLookup for Vec<(N, V)> {
    fn each_value(&self, name: &str, value: &mut dyn FnMut(&[u8])) {
        self[..].each_value(name, value);
    }
}

/// The value of a header field line as text, if it is visible ASCII (or tab): the test of
/// [`http::HeaderValue::to_str`], for values that do not come in a `HeaderValue`.
pub(crate) fn visible_ascii(value: &[u8]) -> Option<&str> {
    if value.iter().all(|&b| b == b'\t' || (32..127).contains(&b)) {
        std::str::from_utf8(value).ok()
    } else {
        None
    }
}

/// The parts of a request a signature may cover, as received.
#[derive(Clone, Copy)]
pub struct SignedRequest<'a> {
    /// The method (`GET`).
    pub method: &'a str,
    /// `http` or `https`.
    pub scheme: &'a str,
    /// The authority (the Host header or the URI's authority).
    pub authority: &'a str,
    /// The path as received (not normalised); empty means `/`.
    pub path: &'a str,
    /// The query without `?`, if the target had one.
    pub query: Option<&'a str>,
    /// The header fields (a hyper [`HeaderMap`], or any [`HeaderLookup`]).
    pub headers: &'a dyn HeaderLookup,
}

impl std::fmt::Debug for SignedRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedRequest")
            .field("method", &self.method)
            .field("scheme", &self.scheme)
            .field("authority", &self.authority)
            .field("path", &self.path)
            .field("query", &self.query)
            .finish_non_exhaustive()
    }
}

/// Why a request's signature does not count. Never shown to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// No `Signature-Input` or no `Signature` field.
    #[error("the request is not signed")]
    Unsigned,
    /// The fields are longer than [`MAX_FIELD_BYTES`].
    #[error("signature fields too long")]
    TooLong,
    /// A field is not a valid RFC 8941 dictionary of the expected shape.
    #[error("malformed signature field: {0}")]
    Malformed(&'static str),
    /// More than one label (or none) in a field, or the labels differ.
    #[error("exactly one signature label is allowed")]
    Labels,
    /// `created`, `expires` or `keyid` is missing.
    #[error("missing signature parameter {0}")]
    MissingParameter(&'static str),
    /// `alg` names another algorithm.
    #[error("unsupported algorithm")]
    Algorithm,
    /// The lifetime is negative or longer than an hour.
    #[error("signature lifetime out of range")]
    Lifetime,
    /// `created` is in the future beyond the skew.
    #[error("signature created in the future")]
    NotYetValid,
    /// `expires` is in the past beyond the skew.
    #[error("signature expired")]
    Expired,
    /// The covered components miss one of [`REQUIRED_COMPONENTS`].
    #[error("signature does not cover {0}")]
    NotCovered(&'static str),
    /// A covered component is unsupported, repeated, or absent from the request.
    #[error("covered component cannot be built: {0}")]
    Component(&'static str),
    /// `keyid` names no key.
    #[error("unknown key")]
    UnknownKey,
    /// The MAC does not match.
    #[error("signature mismatch")]
    Mismatch,
}

/// Verifies the request's signature at `now` (UNIX seconds): the id of the key whose
/// signature verified.
pub fn verify<'k>(
    keys: &'k SigningKeys,
    request: &SignedRequest<'_>,
    now: i64,
) -> Result<&'k str, SignatureError> {
    let input = joined_field(request.headers, "signature-input")?;
    let signature = joined_field(request.headers, "signature")?;
    if input.len() + signature.len() > MAX_FIELD_BYTES {
        return Err(SignatureError::TooLong);
    }
    let (label, covered) = single_member(&input)?;
    let (signature_label, signature_item) = single_member(&signature)?;
    if label != signature_label {
        return Err(SignatureError::Labels);
    }
    let ListEntry::InnerList(covered) = covered else {
        return Err(SignatureError::Malformed(
            "Signature-Input member is not an inner list",
        ));
    };
    let ListEntry::Item(Item {
        bare_item: BareItem::ByteSequence(mac),
        ..
    }) = signature_item
    else {
        return Err(SignatureError::Malformed(
            "Signature member is not a byte sequence",
        ));
    };
    let params = check_parameters(&covered, now)?;
    if !keys.contains(&params.keyid) {
        return Err(SignatureError::UnknownKey);
    }
    let base = signature_base(request, &covered)?;
    keys.verify(&params.keyid, base.as_bytes(), &mac)
        .map_err(|err| match err {
            netacl_secrets::MacError::UnknownKey => SignatureError::UnknownKey,
            _ => SignatureError::Mismatch,
        })
}

/// The signature parameters that decide validity.
struct Parameters {
    keyid: String,
}

fn check_parameters(covered: &InnerList, now: i64) -> Result<Parameters, SignatureError> {
    let param = |name: &str| {
        covered
            .params
            .iter()
            .find(|(k, _)| k.as_str() == name)
            .map(|(_, v)| v)
    };
    let integer = |name: &'static str| -> Result<i64, SignatureError> {
        match param(name) {
            None => Err(SignatureError::MissingParameter(name)),
            Some(BareItem::Integer(i)) => Ok(i64::from(*i)),
            Some(_) => Err(SignatureError::Malformed(
                "created/expires must be integers",
            )),
        }
    };
    let created = integer("created")?;
    let expires = integer("expires")?;
    let keyid = match param("keyid") {
        None => return Err(SignatureError::MissingParameter("keyid")),
        Some(BareItem::String(s)) => s.as_str().to_owned(),
        Some(_) => return Err(SignatureError::Malformed("keyid must be a string")),
    };
    match param("alg") {
        None => {}
        Some(BareItem::String(s)) if s.as_str() == "hmac-sha256" => {}
        Some(_) => return Err(SignatureError::Algorithm),
    }
    let lifetime = expires
        .checked_sub(created)
        .ok_or(SignatureError::Lifetime)?;
    if !(0..=MAX_LIFETIME_SECS).contains(&lifetime) {
        return Err(SignatureError::Lifetime);
    }
    if created > now.saturating_add(SKEW_SECS) {
        return Err(SignatureError::NotYetValid);
    }
    if now > expires.saturating_add(SKEW_SECS) {
        return Err(SignatureError::Expired);
    }
    for required in REQUIRED_COMPONENTS {
        let present = covered.items.iter().any(|item| {
            item.params.is_empty()
                && matches!(&item.bare_item, BareItem::String(s) if s.as_str() == required)
        });
        if !present {
            return Err(SignatureError::NotCovered(required));
        }
    }
    Ok(Parameters { keyid })
}

/// The field's lines joined with `, ` (RFC 9110 §5.3).
fn joined_field(headers: &dyn HeaderLookup, name: &str) -> Result<String, SignatureError> {
    let mut out = String::new();
    let mut failed = None;
    headers.each_value(name, &mut |value| {
        if failed.is_some() {
            return;
        }
        let Some(text) = visible_ascii(value) else {
            failed = Some(SignatureError::Malformed("field is not visible ASCII"));
            return;
        };
        if !out.is_empty() {
            out.push_str(", ");
        }
        if out.len() + text.len() > MAX_FIELD_BYTES {
            failed = Some(SignatureError::TooLong);
            return;
        }
        out.push_str(text);
    });
    if let Some(error) = failed {
        return Err(error);
    }
    if out.is_empty() {
        return Err(SignatureError::Unsigned);
    }
    Ok(out)
}

/// The only member of a dictionary field (a repeated label is two labels, not one).
fn single_member(text: &str) -> Result<(String, ListEntry), SignatureError> {
    let labels = count_labels(text);
    let dictionary: Dictionary = Parser::new(text)
        .parse_dictionary()
        .map_err(|_| SignatureError::Malformed("not an RFC 8941 dictionary"))?;
    if dictionary.len() != 1 || labels != 1 {
        return Err(SignatureError::Labels);
    }
    let (key, entry) = dictionary
        .into_iter()
        .next()
        .ok_or(SignatureError::Labels)?;
    Ok((key.as_str().to_owned(), entry))
}

/// How many top-level members a dictionary text has: commas outside strings, inner lists and
/// byte sequences, plus one (the parser keeps only the last of repeated labels).
fn count_labels(text: &str) -> usize {
    let (mut members, mut depth, mut in_string, mut in_bytes, mut escaped) =
        (1, 0u32, false, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b':' => in_bytes = !in_bytes,
            b'(' if !in_bytes => depth += 1,
            b')' if !in_bytes => depth = depth.saturating_sub(1),
            b',' if depth == 0 && !in_bytes => members += 1,
            _ => {}
        }
    }
    members
}

/// The characters kept by `@query-param` (RFC 9421 §2.2.8: the
/// application/x-www-form-urlencoded percent-encode set, spaces as `%20`).
const QUERY_PARAM: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'*')
    .remove(b'-')
    .remove(b'.')
    .remove(b'_');

/// The signature base of RFC 9421 §2.5 for `covered` (its items and parameters) over
/// `request`: one line per component, then the `@signature-params` line, joined by LF with no
/// LF at the end.
pub fn signature_base(
    request: &SignedRequest<'_>,
    covered: &InnerList,
) -> Result<String, SignatureError> {
    if covered.items.len() > MAX_COMPONENTS {
        return Err(SignatureError::Component("too many components"));
    }
    let mut base = String::with_capacity(256);
    let mut seen: Vec<String> = Vec::with_capacity(covered.items.len());
    for item in &covered.items {
        let BareItem::String(name) = &item.bare_item else {
            return Err(SignatureError::Component("component name is not a string"));
        };
        let name = name.as_str();
        let identifier = serialize_item(item)?;
        if seen.contains(&identifier) {
            return Err(SignatureError::Component("repeated component"));
        }
        let value = component_value(request, name, item)?;
        if value.bytes().any(|b| b == b'\n' || b == b'\r') {
            return Err(SignatureError::Component("line break in a component value"));
        }
        base.push_str(&identifier);
        base.push_str(": ");
        base.push_str(&value);
        base.push('\n');
        seen.push(identifier);
    }
    base.push_str("\"@signature-params\": ");
    let mut list = sfv::ListSerializer::new();
    list.members([&ListEntry::InnerList(covered.clone())]);
    let params = list
        .finish()
        .ok_or(SignatureError::Malformed("empty signature parameters"))?;
    base.push_str(&params);
    Ok(base)
}

fn serialize_item(item: &Item) -> Result<String, SignatureError> {
    let mut list = sfv::ListSerializer::new();
    list.members([&ListEntry::Item(item.clone())]);
    list.finish()
        .ok_or(SignatureError::Component("component cannot be serialised"))
}

fn component_value(
    request: &SignedRequest<'_>,
    name: &str,
    item: &Item,
) -> Result<String, SignatureError> {
    let param_name = || {
        if item.params.len() != 1 {
            return Err(SignatureError::Component("@query-param takes exactly name"));
        }
        match item.params.iter().next() {
            Some((k, BareItem::String(v))) if k.as_str() == "name" => Ok(v.as_str()),
            _ => Err(SignatureError::Component("@query-param takes exactly name")),
        }
    };
    if name != "@query-param" && !item.params.is_empty() {
        return Err(SignatureError::Component(
            "component parameters are not supported",
        ));
    }
    let path = if request.path.is_empty() {
        "/"
    } else {
        request.path
    };
    let target = || match request.query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    Ok(match name {
        "@method" => request.method.to_owned(),
        "@authority" => request.authority.to_ascii_lowercase(),
        "@scheme" => request.scheme.to_ascii_lowercase(),
        "@path" => path.to_owned(),
        "@query" => format!("?{}", request.query.unwrap_or("")),
        "@request-target" => target(),
        "@target-uri" => format!(
            "{}://{}{}",
            request.scheme.to_ascii_lowercase(),
            request.authority.to_ascii_lowercase(),
            target()
        ),
        "@query-param" => query_param(request.query.unwrap_or(""), param_name()?)?,
        derived if derived.starts_with('@') => {
            return Err(SignatureError::Component("unsupported derived component"))
        }
        header => {
            if header.bytes().any(|b| b.is_ascii_uppercase()) {
                return Err(SignatureError::Component("field names must be lowercase"));
            }
            let mut out = String::new();
            let mut lines = 0usize;
            let mut failed = false;
            request.headers.each_value(header, &mut |value| {
                if failed {
                    return;
                }
                let Some(text) = visible_ascii(value) else {
                    failed = true;
                    return;
                };
                if lines > 0 {
                    out.push_str(", ");
                }
                lines += 1;
                out.push_str(text.trim_matches([' ', '\t']));
            });
            if lines == 0 && !failed {
                return Err(SignatureError::Component("covered field is absent"));
            }
            if failed {
                return Err(SignatureError::Component("field is not visible ASCII"));
            }
            out
        }
    })
}

/// The value of the query parameter whose encoded name is `wanted`, re-encoded; an error when
/// it is absent or occurs more than once (RFC 9421 §2.2.8).
fn query_param(query: &str, wanted: &str) -> Result<String, SignatureError> {
    let mut found = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if form_encode(name) == wanted {
            if found.is_some() {
                return Err(SignatureError::Component("repeated query parameter"));
            }
            found = Some(form_encode(value));
        }
    }
    found.ok_or(SignatureError::Component("query parameter is absent"))
}

/// Form-decodes (`+` is a space, then percent-decoding) and re-encodes with [`QUERY_PARAM`].
fn form_encode(raw: &str) -> String {
    let spaced = raw.replace('+', " ");
    let decoded = percent_decode(spaced.as_bytes()).decode_utf8_lossy();
    utf8_percent_encode(&decoded, QUERY_PARAM).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_counted_outside_strings_and_lists() {
        assert_eq!(count_labels("a=(\"x\" \"y\");keyid=\"a,b\""), 1);
        assert_eq!(count_labels("a=:YWJj:, b=:ZGVm:"), 2);
        assert_eq!(count_labels("a=1, a=2"), 2);
        assert_eq!(count_labels("a=\"\\\",\""), 1);
    }

    #[test]
    fn query_params_are_form_decoded_and_re_encoded() {
        let q = "var=this%20is%20a%20big%0Amultiline%20value&bar=with+plus+whitespace&fa%C3%A7ade%22%3A%20=something";
        assert_eq!(query_param(q, "bar").unwrap(), "with%20plus%20whitespace");
        assert_eq!(query_param(q, "fa%C3%A7ade%22%3A%20").unwrap(), "something");
        assert!(query_param("a=1&a=2", "a").is_err());
        assert!(query_param("a=1", "b").is_err());
    }
}
