//! Host names: the domains tenants are served on, and the host a request names.
//!
//! Both are compared in one canonical form: ASCII, lowercased, without a port and without one
//! trailing dot (`ACME.Test.:8443` → `acme.test`). A domain an operator gives may be an IDN in
//! U-labels (`bücher.example`): it is converted to A-labels (`xn--bcher-kva.example`) by UTS #46
//! (the `idna` crate, strict: STD3 characters, DNS lengths). A request's host must already be
//! ASCII (browsers and clients send A-labels); anything else is malformed.

/// Why a host or domain was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// Nothing left once the port and the trailing dot are removed.
    #[error("the host is empty")]
    Empty,
    /// A request's host that is not ASCII.
    #[error("the host is not ASCII")]
    NotAscii,
    /// The port after `:` is not a number from 0 to 65535.
    #[error("the port is not a number from 0 to 65535")]
    BadPort,
    /// A character, label or length a host name cannot have.
    #[error("not a host name: {0}")]
    Malformed(&'static str),
}

/// Longest host name (RFC 1035, without the trailing dot).
const MAX_NAME: usize = 253;
/// Longest label.
const MAX_LABEL: usize = 63;

/// The canonical form of a request's host (`Host` header or `:authority`): ASCII only, the port
/// and one trailing dot removed, lowercased. An IPv6 literal keeps its brackets (`[::1]`).
pub fn request_host(raw: &str) -> Result<String, HostError> {
    if !raw.is_ascii() {
        return Err(HostError::NotAscii);
    }
    let name = strip_port(raw)?;
    if name.starts_with('[') {
        return ipv6_literal(name);
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    check_name(name)?;
    Ok(name.to_ascii_lowercase())
}

/// The canonical form of a domain a tenant is served on, as an operator gives it: the port and
/// one trailing dot removed, U-labels converted to A-labels (UTS #46, strict), lowercased.
pub fn normalize_domain(raw: &str) -> Result<String, HostError> {
    if raw.is_ascii() {
        return request_host(raw);
    }
    let name = strip_port(raw)?;
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    let ascii = idna::domain_to_ascii_strict(name)
        .map_err(|_| HostError::Malformed("not a valid internationalized domain name"))?;
    request_host(&ascii)
}

/// `host` without `:port` (a bracketed IPv6 literal keeps its colons).
fn strip_port(raw: &str) -> Result<&str, HostError> {
    let (name, port) = if raw.starts_with('[') {
        match raw.find(']') {
            Some(end) => {
                let rest = &raw[end + 1..];
                match rest.strip_prefix(':') {
                    Some(port) => (&raw[..=end], Some(port)),
                    None if rest.is_empty() => (raw, None),
                    None => return Err(HostError::Malformed("text after the IPv6 literal")),
                }
            }
            None => return Err(HostError::Malformed("unclosed IPv6 literal")),
        }
    } else {
        match raw.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (raw, None),
        }
    };
    if let Some(port) = port {
        let digits =
            !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit());
        if !digits || port.parse::<u32>().map_or(true, |p| p > 65_535) {
            return Err(HostError::BadPort);
        }
    }
    Ok(name)
}

fn ipv6_literal(name: &str) -> Result<String, HostError> {
    let inner = &name[1..name.len() - 1];
    inner
        .parse::<std::net::Ipv6Addr>()
        .map_err(|_| HostError::Malformed("not an IPv6 address"))?;
    Ok(name.to_ascii_lowercase())
}

fn check_name(name: &str) -> Result<(), HostError> {
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    if name.len() > MAX_NAME {
        return Err(HostError::Malformed("longer than 253 characters"));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(HostError::Malformed("an empty label"));
        }
        if label.len() > MAX_LABEL {
            return Err(HostError::Malformed("a label longer than 63 characters"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(HostError::Malformed(
                "a character other than letters, digits, '-', '_' and '.'",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_hosts_are_canonical() {
        for (raw, want) in [
            ("acme.test", "acme.test"),
            ("ACME.TEST:8443", "acme.test"),
            ("acme.test.", "acme.test"),
            ("Acme.Test.:80", "acme.test"),
            ("localhost:8080", "localhost"),
            ("127.0.0.1:9", "127.0.0.1"),
            ("[::1]:8080", "[::1]"),
            ("[2001:DB8::1]", "[2001:db8::1]"),
            ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ] {
            assert_eq!(request_host(raw).as_deref(), Ok(want), "{raw}");
        }
    }

    #[test]
    fn malformed_request_hosts_are_refused() {
        for raw in [
            "",
            ":80",
            ".",
            "acme..test",
            "acme.test..",
            "acme.test:",
            "acme.test:x",
            "acme.test:65536",
            "acme.test:1:2",
            "a b",
            "acme/test",
            "[::1",
            "[::1]x",
            "[not-v6]",
            "acme@test",
        ] {
            assert!(request_host(raw).is_err(), "{raw:?} accepted");
        }
        assert_eq!(request_host("bücher.example"), Err(HostError::NotAscii));
        assert!(request_host(&format!("{}.test", "a".repeat(64))).is_err());
    }

    #[test]
    fn domains_convert_u_labels_to_a_labels() {
        assert_eq!(
            normalize_domain("Bücher.Example:443").as_deref(),
            Ok("xn--bcher-kva.example")
        );
        assert_eq!(normalize_domain("ACME.test.").as_deref(), Ok("acme.test"));
        assert!(normalize_domain("bü cher.example").is_err());
        assert!(normalize_domain("").is_err());
    }
}
