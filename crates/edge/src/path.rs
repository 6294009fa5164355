//! Path normalisation before a request's scope is derived.
//!
//! [`RequestScope::from_path`](netacl_model::RequestScope::from_path) compares path prefixes,
//! so the path must be in one canonical spelling first, or `//api/v2/users`, `/%61pi/v2/users`
//! and `/x/../api/v2/users` would dodge a `management` rule while the upstream still routes
//! them to the management API. [`normalize_path`]:
//!
//! 1. drops the query and fragment;
//! 2. percent-decodes the *unreserved* characters (`A-Z a-z 0-9 - . _ ~`, RFC 3986 §2.3), whose
//!    encoded and plain forms are equivalent; other escapes are kept (hex digits uppercased) — in
//!    particular `%2F` stays an escaped slash, not a separator, as most upstreams treat it;
//! 3. collapses runs of `/`;
//! 4. resolves `.` and `..` segments (RFC 3986 §5.2.4); `..` never climbs above the root.
//!
//! The result always starts with `/`. Allocation happens only when the path changes.
use std::borrow::Cow;

/// The canonical spelling of a request path (see the module docs).
///
/// ```
/// use netacl_edge::normalize_path;
/// assert_eq!(normalize_path("//api/v2/users"), "/api/v2/users");
/// assert_eq!(normalize_path("/%61pi/v2"), "/api/v2");
/// assert_eq!(normalize_path("/x/../api/./v2/"), "/api/v2/");
/// assert_eq!(normalize_path("/a%2fb?q=1"), "/a%2Fb");
/// ```
pub fn normalize_path(path: &str) -> Cow<'_, str> {
    let path = match path.find(['?', '#']) {
        Some(end) => &path[..end],
        None => path,
    };
    if is_normal(path) {
        return Cow::Borrowed(path);
    }
    let decoded = decode_unreserved(path);
    Cow::Owned(remove_dot_segments(&decoded))
}

/// Whether the path is already canonical (the common case: no allocation).
fn is_normal(path: &str) -> bool {
    if !path.starts_with('/') {
        return false;
    }
    let bytes = path.as_bytes();
    if bytes.contains(&b'%') {
        return false;
    }
    // No empty segment (`//`; a trailing `/` is fine) and no `.` / `..` segment.
    let mut segments = path[1..].split('/').peekable();
    while let Some(seg) = segments.next() {
        let last = segments.peek().is_none();
        if (seg.is_empty() && !last) || seg == "." || seg == ".." {
            return false;
        }
    }
    true
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn decode_unreserved(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len() + 1);
    if !path.starts_with('/') {
        out.push('/');
    }
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex_val(bytes[i + 1]), hex_val(bytes[i + 2])) {
                let v = h * 16 + l;
                if is_unreserved(v) {
                    out.push(v as char);
                } else {
                    out.push('%');
                    out.push(bytes[i + 1].to_ascii_uppercase() as char);
                    out.push(bytes[i + 2].to_ascii_uppercase() as char);
                }
                i += 3;
                continue;
            }
        }
        // Copy one (possibly multi-byte) character.
        let ch_len = path[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&path[i..i + ch_len]);
        i += ch_len;
    }
    out
}

fn remove_dot_segments(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    let trailing_slash = path.ends_with('/')
        || path.ends_with("/.")
        || path.ends_with("/..")
        || path == "."
        || path == "..";
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    let mut out = String::with_capacity(path.len());
    for seg in &segments {
        out.push('/');
        out.push_str(seg);
    }
    if out.is_empty() || (trailing_slash && !segments.is_empty()) {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::normalize_path;
    use netacl_model::RequestScope;

    #[test]
    fn canonical_paths_are_borrowed() {
        for p in ["/", "/api/v2/users", "/authorize", "/a/b/"] {
            assert!(
                matches!(normalize_path(p), std::borrow::Cow::Borrowed(_)),
                "{p}"
            );
            assert_eq!(normalize_path(p), p);
        }
    }

    #[test]
    fn normalises() {
        for (input, want) in [
            ("", "/"),
            ("//", "/"),
            ("//api//v2///users", "/api/v2/users"),
            ("/%61pi/v2", "/api/v2"),
            ("/%41PI/v2", "/API/v2"),
            ("/api/%7e%2D%5f%2e", "/api/~-_."),
            ("/%2e%2e/api/v2", "/api/v2"),
            ("/a/b/../../api/v2/x", "/api/v2/x"),
            ("/../../..", "/"),
            ("/api/v2/.", "/api/v2/"),
            ("/api/v2/x/..", "/api/v2/"),
            ("/a%2fb", "/a%2Fb"),
            ("/a%zz", "/a%zz"),
            ("/a%4", "/a%4"),
            ("/a%", "/a%"),
            ("/caf%C3%A9", "/caf%C3%A9"),
            ("/café//x", "/café/x"),
            ("api/v2", "/api/v2"),
            ("/oidc/register?x=1", "/oidc/register"),
            ("/x#frag", "/x"),
        ] {
            assert_eq!(normalize_path(input), want, "{input}");
        }
    }

    #[test]
    fn dodges_do_not_change_the_scope() {
        for p in [
            "//api/v2/users",
            "/%61pi/v2/users",
            "/api/./v2/users",
            "/x/../api/v2/users",
            "/%2E%2E/api/v2",
            "/scim//v2",
            "/%73cim/v2",
        ] {
            assert_eq!(
                RequestScope::from_path(&normalize_path(p)),
                RequestScope::Management,
                "{p}"
            );
        }
        assert_eq!(
            RequestScope::from_path(&normalize_path("//oidc//register")),
            RequestScope::DynamicClientRegistration
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Never panics; the result is canonical and normalising again changes nothing.
        #[test]
        fn normalised_paths_are_canonical(path in "[/a-z.%0-9A-F?#~_-]{0,40}") {
            let once = normalize_path(&path).into_owned();
            proptest::prop_assert!(once.starts_with('/'));
            proptest::prop_assert!(!once.contains("//"));
            proptest::prop_assert!(!once.split('/').any(|seg| seg == "." || seg == ".."));
            proptest::prop_assert_eq!(normalize_path(&once), once.as_str());
        }
    }
}
