//! Request paths: their normal form, and the request scope a path falls into.
//!
//! The rules are on [`normalize_path`] (the normal form, and what is refused) and
//! [`scope_of_path`] (the scope, and what is ambiguous).
use std::borrow::Cow;

use crate::RequestScope;

/// Why a request path is refused (see [`normalize_path`] and [`scope_of_path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// A `%` not followed by two hex digits.
    #[error("malformed percent-escape at byte {offset} of the path")]
    MalformedEscape {
        /// Where the `%` is, in bytes from the start of the path.
        offset: usize,
    },
    /// A raw backslash, which WHATWG reads as `/` and other servers as data.
    #[error(
        "backslash at byte {offset} of the path (WHATWG reads it as '/', other servers do not)"
    )]
    Backslash {
        /// Where the `\` is, in bytes from the start of the path.
        offset: usize,
    },
    /// Servers would route the path to different scopes (through `//` and dot segments, an
    /// encoded `/` or `\`, or `;` parameters).
    #[error("ambiguous path: servers that merge '//', decode '%2F' or strip ';' parameters would route it to another scope")]
    Ambiguous,
}

/// The normal form of a request path: borrowed when `path` (up to its query) is already
/// normal.
///
/// The scope of a request decides which rules apply to it, so a path must get the scope of what
/// the upstream will serve for it, however it is spelt. This gives the path's
/// **normal form**, RFC 3986's reading of it (which the WHATWG URL parser, and the servers and
/// frameworks built on either, share):
///
/// 1. the query and fragment are dropped; a path not starting with `/` is read as if it did;
/// 2. percent-escapes of unreserved characters (`A-Z a-z 0-9 - . _ ~`) are decoded (RFC 3986
///    §6.2.2.2; `%2E` is a dot), every other escape is kept with its hex digits in upper case
///    (§6.2.2.1), and every byte that may not appear in a path (`"`, `{`, `|`, non-ASCII, ...) is
///    percent-encoded, so that its raw and encoded spellings have one normal form; `%2F` stays
///    data inside a segment;
/// 3. dot segments are removed by RFC 3986 §5.2.4 (`..` never climbs above the root); empty
///    segments are kept (`/api/v2//../users` is `/api/v2/users`).
///
/// Normalising is idempotent (the normal form is its own normal form), and a request path that
/// is already normal (the common case) is returned as it is, without allocating.
///
/// **Refused** ([`PathError`], a `400` at the edge): a `%` not followed by two hex digits (not a
/// URI, and servers disagree about what it means: nginx refuses it, others pass it on as a
/// literal `%`), and a raw backslash (`\`): WHATWG reads it as `/` (`/api\v2\users` is
/// `/api/v2/users` to a browser or to Node.js), other servers as an ordinary character. No
/// browser sends one (it sends `/`), so refusing costs real clients nothing and leaves nothing to
/// guess.
///
/// # Examples
///
/// ```
/// use netacl_model::normalize_path;
///
/// assert_eq!(normalize_path("/api/v2/users?page=1").unwrap(), "/api/v2/users");
/// assert_eq!(normalize_path("/%61pi/v2/./users").unwrap(), "/api/v2/users");
/// assert_eq!(normalize_path("/api/v2//../users").unwrap(), "/api/v2/users");
/// assert_eq!(normalize_path("/a%2fb/caf\u{e9}").unwrap(), "/a%2Fb/caf%C3%A9");
/// assert!(normalize_path("/%%361pi/v2/users").is_err());
/// assert!(normalize_path("/api\\v2\\users").is_err());
/// ```
pub fn normalize_path(path: &str) -> Result<Cow<'_, str>, PathError> {
    let path = path_only(path);
    if is_plain(path) {
        return Ok(Cow::Borrowed(path));
    }
    normalize_with(path, Reading::RFC3986).map(Cow::Owned)
}

/// The scope of a request for `path` (the request target's path, as received; a query is
/// ignored): the scope of its normal form, or an error when the path is refused or ambiguous
/// (see below). Allocates only for a path that is not already normal.
///
/// The scope is that of the normal form ([`RequestScope::from_path`]: segments compared
/// without case, empty segments skipped), checked against the readings of servers that route
/// differently from RFC 3986, so that no spelling gets one scope at the edge and another
/// upstream:
///
/// - servers that merge `//` before removing dot segments (nginx, Apache, Spring);
/// - servers that decode `%2F` and `%5C` into separators before routing (nginx's locations, Go's
///   `URL.Path`, IIS);
/// - servers that strip `;parameters` from segments (Java servlet containers: `/api;x/v2`).
///
/// When any of these readings (alone or combined) gives another scope than the normal form's, the
/// path is **ambiguous** and refused: `/api/v2//../users` (nginx serves `/api/users`),
/// `/api%2Fv2%2Fusers` (nginx serves `/api/v2/users`), `/api;x/v2/users`. The same readings are
/// checked on the path's normal form too, as a normalising proxy in front of such a server
/// would pass it on: `/x%2Fy/../api/v2%2Fusers` reads as `/x/api/v2/users` when decoded first,
/// but its normal form `/api/v2%2Fusers` decodes to `/api/v2/users`, so it is ambiguous. A
/// path whose readings all agree keeps its scope (`/api/v2/users/auth0%7Cx%2Fy` is
/// `management` however it is read), and so does its normal form.
///
/// # Examples
///
/// ```
/// use netacl_model::{scope_of_path, PathError, RequestScope};
///
/// assert_eq!(scope_of_path("/api/v2/users"), Ok(RequestScope::Management));
/// assert_eq!(scope_of_path("//api/v2/users"), Ok(RequestScope::Management));
/// assert_eq!(scope_of_path("/%61pi/v2/users"), Ok(RequestScope::Management));
/// assert_eq!(scope_of_path("/x/../oidc/register"), Ok(RequestScope::DynamicClientRegistration));
/// assert_eq!(scope_of_path("/authorize?x=/api/v2"), Ok(RequestScope::Authentication));
/// assert_eq!(scope_of_path("/api/v2//../users"), Err(PathError::Ambiguous));
/// assert_eq!(scope_of_path("/x%2Fy/../api/v2%2Fusers"), Err(PathError::Ambiguous));
/// ```
pub fn scope_of_path(path: &str) -> Result<RequestScope, PathError> {
    let path = path_only(path);
    if is_plain(path) {
        // No escape, no `;`, no dot segment: every reading is the path itself, give or take
        // empty segments, which the scope skips.
        return Ok(RequestScope::from_path(path));
    }
    let normal = normalize_with(path, Reading::RFC3986)?;
    let scope = RequestScope::from_path(&normal);
    // The path as received, and its normal form as a normalising proxy in front of the
    // upstream would pass it on: both must read alike for every server.
    if !readings_agree(path, scope)? || !readings_agree(&normal, scope)? {
        return Err(PathError::Ambiguous);
    }
    Ok(scope)
}

/// Whether every departure from RFC 3986 that applies to `path` (see [`scope_of_path`]) gives
/// it `scope`.
fn readings_agree(path: &str, scope: RequestScope) -> Result<bool, PathError> {
    let decode = contains_encoded_separator(path);
    let merge = decode || path.contains("//");
    let params = path.contains(';');
    for bits in 1..8u8 {
        let reading = Reading {
            merge_slashes: bits & 1 != 0,
            decode_separators: bits & 2 != 0,
            strip_params: bits & 4 != 0,
        };
        if (reading.merge_slashes && !merge)
            || (reading.decode_separators && !decode)
            || (reading.strip_params && !params)
        {
            continue;
        }
        if RequestScope::from_path(&normalize_with(path, reading)?) != scope {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The path without its query or fragment.
fn path_only(path: &str) -> &str {
    match path.find(['?', '#']) {
        Some(end) => &path[..end],
        None => path,
    }
}

/// RFC 3986 `unreserved`.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// What may stand unencoded in a normal path, besides `/`: `pchar` less `%` (RFC 3986 §3.3).
fn is_path_char(b: u8) -> bool {
    is_unreserved(b)
        || matches!(b, b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+')
        || matches!(b, b',' | b';' | b'=' | b':' | b'@')
}

/// Whether `path` is its own normal form and reads alike for every server: starts with `/`,
/// holds only path characters (no `%`, no `\`, no `;`), no `.` or `..` segment.
fn is_plain(path: &str) -> bool {
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return false;
    }
    if !bytes
        .iter()
        .all(|&b| b == b'/' || (is_path_char(b) && b != b';'))
    {
        return false;
    }
    !path[1..].split('/').any(|seg| seg == "." || seg == "..")
}

fn contains_encoded_separator(path: &str) -> bool {
    path.as_bytes().windows(3).any(|w| {
        w[0] == b'%'
            && ((w[1] == b'2' && w[2].eq_ignore_ascii_case(&b'f'))
                || (w[1] == b'5' && w[2].eq_ignore_ascii_case(&b'c')))
    })
}

/// How a server reads a path: RFC 3986 (all `false`), or with one of the departures the module
/// docs list.
#[derive(Debug, Clone, Copy)]
struct Reading {
    merge_slashes: bool,
    decode_separators: bool,
    strip_params: bool,
}

impl Reading {
    const RFC3986: Reading = Reading {
        merge_slashes: false,
        decode_separators: false,
        strip_params: false,
    };
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The path (no query) read as `reading` reads it: escapes canonicalised, then dot segments
/// removed.
fn normalize_with(path: &str, reading: Reading) -> Result<String, PathError> {
    let canonical = canonical_escapes(path, reading)?;
    Ok(remove_dot_segments(&canonical, reading))
}

/// Step 2 of [`normalize_path`]'s docs (and step 1's leading `/`): unreserved escapes decoded, other
/// escapes in upper case, bytes that may not appear in a path encoded; with
/// `decode_separators`, `%2F` and `%5C` become `/`.
fn canonical_escapes(path: &str, reading: Reading) -> Result<String, PathError> {
    let bytes = path.as_bytes();
    let mut canonical: Vec<u8> = Vec::with_capacity(bytes.len() + 8);
    if bytes.first() != Some(&b'/') {
        canonical.push(b'/');
    }
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'%' => {
                let (Some(hi), Some(lo)) = (
                    bytes.get(i + 1).copied().and_then(hex_val),
                    bytes.get(i + 2).copied().and_then(hex_val),
                ) else {
                    return Err(PathError::MalformedEscape { offset: i });
                };
                let v = hi * 16 + lo;
                if is_unreserved(v) {
                    canonical.push(v);
                } else if reading.decode_separators && matches!(v, b'/' | b'\\') {
                    canonical.push(b'/');
                } else {
                    canonical.extend_from_slice(&[
                        b'%',
                        HEX[usize::from(hi)],
                        HEX[usize::from(lo)],
                    ]);
                }
                i += 3;
                continue;
            }
            b'\\' => return Err(PathError::Backslash { offset: i }),
            b'/' => canonical.push(b'/'),
            b if is_path_char(b) => canonical.push(b),
            b => canonical.extend_from_slice(&[
                b'%',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 15)],
            ]),
        }
        i += 1;
    }
    // Every byte is ASCII now.
    Ok(String::from_utf8(canonical).unwrap_or_default())
}

/// RFC 3986 §5.2.4 on an absolute path (`path` starts with `/`), segment by segment: a `.`
/// segment is dropped, a `..` segment drops the segment before it, and either, when last,
/// leaves a trailing `/`. With `merge_slashes`, empty segments are dropped first (but a trailing
/// `/` stays); with `strip_params`, each segment loses its `;parameters` first.
fn remove_dot_segments(path: &str, reading: Reading) -> String {
    let mut segments: Vec<&str> = Vec::new();
    let mut rest = path[1..].split('/').peekable();
    while let Some(seg) = rest.next() {
        let last = rest.peek().is_none();
        let seg = match (reading.strip_params, seg.find(';')) {
            (true, Some(end)) => &seg[..end],
            _ => seg,
        };
        match seg {
            "." | ".." => {
                if seg == ".." {
                    segments.pop();
                }
                if last {
                    segments.push("");
                }
            }
            "" if reading.merge_slashes && !last => {}
            seg => segments.push(seg),
        }
    }
    let mut out = String::with_capacity(path.len());
    for seg in &segments {
        out.push('/');
        out.push_str(seg);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn normal_paths_are_borrowed() {
        for p in [
            "/",
            "/api/v2/users",
            "/authorize",
            "/a/b/",
            "//a//b",
            "/a:b@c!$&'()*+,=",
        ] {
            assert!(matches!(normalize_path(p), Ok(Cow::Borrowed(_))), "{p}");
            assert_eq!(normalize_path(p).unwrap(), p);
        }
        assert!(matches!(
            normalize_path("/a/b?q=%zz"),
            Ok(Cow::Borrowed("/a/b"))
        ));
    }

    #[test]
    fn normalises() {
        for (input, want) in [
            ("", "/"),
            ("*", "/*"),
            ("//", "//"),
            ("//api//v2///users", "//api//v2///users"),
            ("/%61pi/v2", "/api/v2"),
            ("/%41PI/v2", "/API/v2"),
            ("/api/%7e%2D%5f%2e", "/api/~-_."),
            ("/%2e%2e/api/v2", "/api/v2"),
            ("/%2E./api", "/api"),
            ("/a/b/../../api/v2/x", "/api/v2/x"),
            ("/../../..", "/"),
            ("/.", "/"),
            ("/..", "/"),
            ("/api/v2/.", "/api/v2/"),
            ("/api/v2/x/..", "/api/v2/"),
            ("/api/v2//../users", "/api/v2/users"),
            ("/a/.//b", "/a//b"),
            ("/a//..", "/a/"),
            ("/a/b/..//c", "/a//c"),
            ("/a%2fb", "/a%2Fb"),
            ("/a%2F..%2Fb", "/a%2F..%2Fb"),
            ("/a%3b%3B", "/a%3B%3B"),
            ("/caf%c3%a9", "/caf%C3%A9"),
            ("/caf\u{e9}//x", "/caf%C3%A9//x"),
            ("/a b\"<>^`{|}\u{7f}", "/a%20b%22%3C%3E%5E%60%7B%7C%7D%7F"),
            ("/%00/%20", "/%00/%20"),
            ("api/v2", "/api/v2"),
            ("/oidc/register?x=1", "/oidc/register"),
            ("/x#frag", "/x"),
            ("/..;/api", "/..;/api"),
        ] {
            assert_eq!(normalize_path(input).unwrap(), want, "{input}");
        }
    }

    #[test]
    fn refuses_malformed_escapes_and_backslashes() {
        for (input, err) in [
            (
                "/%%361pi/v2/users",
                PathError::MalformedEscape { offset: 1 },
            ),
            ("/a%zz", PathError::MalformedEscape { offset: 2 }),
            ("/a%4", PathError::MalformedEscape { offset: 2 }),
            ("/a%", PathError::MalformedEscape { offset: 2 }),
            ("/a%\u{e9}9", PathError::MalformedEscape { offset: 2 }),
            ("/api\\v2\\users", PathError::Backslash { offset: 4 }),
            ("\\", PathError::Backslash { offset: 0 }),
        ] {
            assert_eq!(normalize_path(input), Err(err), "{input}");
            assert_eq!(scope_of_path(input), Err(err), "{input}");
        }
        // Only the path counts: the query may hold anything.
        assert!(normalize_path("/a?b=%zz\\").is_ok());
    }

    /// The paths of issue 11: none of them reaches the upstream outside the management scope.
    #[test]
    fn issue_11_paths_do_not_dodge_the_management_scope() {
        // Not idempotent before: `/%%361pi/v2/users` became `/%61pi/v2/users`, then
        // `/api/v2/users`. Now refused, as is any malformed escape.
        assert!(scope_of_path("/%%361pi/v2/users").is_err());
        assert_eq!(
            scope_of_path("/%2561pi/v2/users"),
            Ok(RequestScope::Authentication),
            "an encoded % is data: the upstream serves a path starting `/%61pi`"
        );
        // RFC 3986 and WHATWG serve `/api/v2/users`; servers that merge slashes first serve
        // `/api/users`: refused as ambiguous, never `authentication`.
        assert_eq!(
            normalize_path("/api/v2//../users").unwrap(),
            "/api/v2/users"
        );
        assert_eq!(
            scope_of_path("/api/v2//../users"),
            Err(PathError::Ambiguous)
        );
        // WHATWG reads `\` as `/`: refused.
        assert!(matches!(
            scope_of_path("/api\\v2\\users"),
            Err(PathError::Backslash { .. })
        ));
    }

    #[test]
    fn dodges_do_not_change_the_scope() {
        for p in [
            "/api/v2/users",
            "//api/v2/users",
            "/api//v2/users",
            "/%61pi/v2/users",
            "/API/V2/users",
            "/api/./v2/users",
            "/x/../api/v2/users",
            "/%2E%2E/api/v2",
            "/scim//v2",
            "/%73cim/v2",
            "/Scim",
            "/api/v2/users/auth0%7Cx%2Fy",
            "/api/v2/users/a;b",
            "/api/v2/users/x%2F..",
        ] {
            assert_eq!(scope_of_path(p), Ok(RequestScope::Management), "{p}");
        }
        for p in ["//oidc//register", "/OIDC/register/", "/oidc/x/../register"] {
            assert_eq!(
                scope_of_path(p),
                Ok(RequestScope::DynamicClientRegistration),
                "{p}"
            );
        }
        for p in [
            "/authorize",
            "/api/v2x",
            "/api/v1/users",
            "/oidc/register/x",
            "/a%2Fapi/v2",
        ] {
            assert_eq!(scope_of_path(p), Ok(RequestScope::Authentication), "{p}");
        }
    }

    #[test]
    fn ambiguous_paths_are_refused() {
        for p in [
            // merged slashes: `/api/users`, `/authorize`
            "/api/v2//../users",
            "/api/v2/////../../../../authorize",
            // decoded separators: `/api/v2/users`, `/authorize`
            "/api%2Fv2%2Fusers",
            "/api%5cv2/users",
            "/api/v2/users/x%2F..%2F..%2F..%2Fauthorize",
            "/api%2Fv2%2Fx/..",
            // `;` parameters: `/api/v2/users`, `/authorize`
            "/api;x/v2/users",
            "/api/v2/..;/..;/authorize",
            "/oidc;a/register",
            // every reading of the path agrees, but its normal form decodes to `/api/v2/users`
            // (found by the `paths` fuzz target)
            "/x%2Fy/../api/v2%2Fusers",
            "/a%2Fb/../../api/v2%2Fusers",
        ] {
            assert_eq!(scope_of_path(p), Err(PathError::Ambiguous), "{p}");
        }
    }

    /// RFC 3986 §5.2.4 transcribed step by step (input and output buffers), the reference for
    /// [`remove_dot_segments`].
    fn rfc3986_remove_dot_segments(path: &str) -> String {
        let mut input = path.to_owned();
        let mut output = String::new();
        while !input.is_empty() {
            if let Some(rest) = input.strip_prefix("../") {
                input = rest.to_owned();
            } else if let Some(rest) = input.strip_prefix("./") {
                input = rest.to_owned();
            } else if input.starts_with("/./") {
                input = input[2..].to_owned();
            } else if input == "/." {
                input = "/".to_owned();
            } else if input.starts_with("/../") || input == "/.." {
                input = format!("/{}", &input[if input == "/.." { 3 } else { 4 }..]);
                match output.rfind('/') {
                    Some(at) => output.truncate(at),
                    None => output.clear(),
                }
            } else if input == "." || input == ".." {
                input.clear();
            } else {
                let start = usize::from(input.starts_with('/'));
                let end = input[start..].find('/').map_or(input.len(), |i| i + start);
                output.push_str(&input[..end]);
                input = input[end..].to_owned();
            }
        }
        output
    }

    /// Paths built from the pieces that matter: separators (plain, doubled, encoded), dot
    /// segments (plain, encoded, with parameters), the scope prefixes, escapes and odd bytes.
    fn tricky_path() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("/"),
            Just("//"),
            Just("."),
            Just(".."),
            Just("%2e"),
            Just("%2E%2e"),
            Just("%2F"),
            Just("%5c"),
            Just(";"),
            Just(";x"),
            Just("api"),
            Just("v2"),
            Just("API"),
            Just("scim"),
            Just("oidc"),
            Just("register"),
            Just("%61"),
            Just("%25"),
            Just("%"),
            Just("\\"),
            Just("a"),
            Just("\u{e9}"),
            Just("|"),
            Just("?"),
        ];
        proptest::collection::vec(piece, 0..14).prop_map(|p| p.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Normalising twice equals normalising once; the scope of a path equals the scope of
        /// its normal form; the normal form is RFC 3986's dot-segment removal of the path with
        /// its escapes canonicalised.
        #[test]
        fn normal_form_invariants(path in prop_oneof![tricky_path(), "\\PC{0,30}"]) {
            let Ok(once) = normalize_path(&path) else {
                prop_assert!(scope_of_path(&path).is_err());
                return Ok(());
            };
            let once = once.into_owned();
            prop_assert!(once.starts_with('/'));
            prop_assert!(!once.split('/').any(|seg| seg == "." || seg == ".."));
            prop_assert_eq!(normalize_path(&once).unwrap(), once.as_str());
            if let Ok(scope) = scope_of_path(&path) {
                prop_assert_eq!(scope_of_path(&once), Ok(scope));
                prop_assert_eq!(RequestScope::from_path(&once), scope);
            }
            let canonical = canonical_escapes(path_only(&path), Reading::RFC3986).unwrap();
            let expected = rfc3986_remove_dot_segments(&canonical);
            prop_assert_eq!(&once, &expected);
        }

        /// What a WHATWG parser (the `url` crate: browsers, Node.js, and the frameworks on
        /// them) makes of the path has the same normal form, hence the same scope; the paths
        /// WHATWG reads otherwise (a backslash) or keeps broken (`%zz`) are the refused ones.
        #[test]
        // WHATWG strips spaces and controls from the ends and tabs and newlines from the inside
        // before parsing; a request target holds none of them (HTTP parsers refuse them), so
        // the paths tried have none either.
        fn whatwg_agrees(path in prop_oneof![tricky_path(), "[!-~\u{e9}\u{20ac}]{0,30}"]) {
            let path = format!("/{path}");
            let whatwg = url::Url::parse(&format!("http://h{path}")).unwrap();
            match normalize_path(&path) {
                Ok(normal) => {
                    prop_assert_eq!(normalize_path(whatwg.path()).unwrap(), normal);
                    if let Ok(scope) = scope_of_path(&path) {
                        prop_assert_eq!(scope_of_path(whatwg.path()), Ok(scope));
                    }
                }
                Err(PathError::Backslash { .. }) => {
                    prop_assert!(path_only(&path).contains('\\'));
                }
                Err(err) => {
                    prop_assert!(matches!(err, PathError::MalformedEscape { .. }), "{}", err);
                }
            }
        }
    }
}
