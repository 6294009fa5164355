//! The string formats of criteria entries and other fields: each parser takes the text as
//! written and returns the domain value, or the z-schema-style format error.
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

use crate::criteria::{
    CidrEntry, CountryCode, FingerprintJa3, FingerprintJa4, Hostname, SubdivisionCode,
    UserAgentPattern,
};
use crate::schema::{format_error, Reason};

/// `addr` or `addr/len`, with `len` plain decimal digits (no sign, no leading zero) up to `max`.
fn split_prefix(text: &str, max: u8) -> Option<(&str, Option<u8>)> {
    match text.split_once('/') {
        None => Some((text, None)),
        Some((addr, len)) => {
            let plain = !len.is_empty()
                && len.len() <= 3
                && len.bytes().all(|c| c.is_ascii_digit())
                && (len == "0" || !len.starts_with('0'));
            if !plain {
                return None;
            }
            let len: u8 = len.parse().ok()?;
            (len <= max).then_some((addr, Some(len)))
        }
    }
}

/// An IPv4 address (strict dotted decimal) or CIDR (`/0`..`/32`); host bits are allowed and
/// cleared in the network.
pub(crate) fn ipv4_cidr(text: &str) -> Result<CidrEntry<Ipv4Net>, Reason> {
    let parsed = split_prefix(text, 32).and_then(|(addr, len)| {
        let addr: Ipv4Addr = addr.parse().ok()?;
        Ipv4Net::new(addr, len.unwrap_or(32)).ok()
    });
    match parsed {
        Some(net) => Ok(CidrEntry {
            text: text.to_owned(),
            net: net.trunc(),
        }),
        None => Err(format_error("ipv4-cidr", text)),
    }
}

/// Whether `net` lies entirely inside `::ffff:0:0/96`, where IPv4-mapped addresses live.
fn is_ipv4_mapped(net: &Ipv6Net) -> bool {
    let segments = net.network().segments();
    net.prefix_len() >= 96 && segments[..5] == [0; 5] && segments[5] == 0xffff
}

/// An IPv6 address or CIDR (`/0`..`/128`); host bits are allowed and cleared in the network.
///
/// An entry lying entirely inside `::ffff:0:0/96` is refused: request addresses of that form are
/// canonicalised to IPv4 before matching, so the entry could never match; the message names
/// the IPv4 equivalent and the list (`ipv4_list`) to put it in.
pub(crate) fn ipv6_cidr(text: &str, ipv4_list: &str) -> Result<CidrEntry<Ipv6Net>, Reason> {
    let parsed = split_prefix(text, 128).and_then(|(addr, len)| {
        let addr: Ipv6Addr = addr.parse().ok()?;
        Ipv6Net::new(addr, len.unwrap_or(128)).ok()
    });
    let Some(net) = parsed.map(|net| net.trunc()) else {
        return Err(format_error("ipv6-cidr", text));
    };
    if is_ipv4_mapped(&net) {
        let v4 = net.addr().to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED);
        let len = net.prefix_len() - 96;
        let suggestion = if len == 32 {
            v4.to_string()
        } else {
            format!("{v4}/{len}")
        };
        return Err(format!(
            "IPv4-mapped address {text} can never match (such request addresses are matched as \
             IPv4): list it as {suggestion} in {ipv4_list}"
        ));
    }
    Ok(CidrEntry {
        text: text.to_owned(),
        net,
    })
}

/// An ISO 3166-1 alpha-2 code: two ASCII letters, any case.
pub(crate) fn country_code(text: &str) -> Result<CountryCode, Reason> {
    if text.len() == 2 && text.bytes().all(|c| c.is_ascii_alphabetic()) {
        Ok(CountryCode {
            text: text.to_owned(),
        })
    } else {
        Err(format_error("country-code", text))
    }
}

/// An ISO 3166-2 code: two ASCII letters, `-`, one to three ASCII letters or digits; any case.
pub(crate) fn subdivision_code(text: &str) -> Result<SubdivisionCode, Reason> {
    let ok = match text.split_once('-') {
        Some((country, sub)) => {
            country.len() == 2
                && country.bytes().all(|c| c.is_ascii_alphabetic())
                && (1..=3).contains(&sub.len())
                && sub.bytes().all(|c| c.is_ascii_alphanumeric())
        }
        None => false,
    };
    if ok {
        Ok(SubdivisionCode {
            text: text.to_owned(),
        })
    } else {
        Err(format_error("subdivision-code", text))
    }
}

fn is_lower_hex(c: u8) -> bool {
    c.is_ascii_digit() || (b'a'..=b'f').contains(&c)
}

/// A JA3 fingerprint: exactly 32 lowercase hex digits.
pub(crate) fn ja3(text: &str) -> Result<FingerprintJa3, Reason> {
    if text.len() == 32 && text.bytes().all(is_lower_hex) {
        Ok(FingerprintJa3 {
            text: text.to_owned(),
        })
    } else {
        Err(format_error("ja3", text))
    }
}

/// A JA4 fingerprint: `^[a-z0-9]{10}_[0-9a-f]{12}_[0-9a-f]{12}$`, any case.
pub(crate) fn ja4(text: &str) -> Result<FingerprintJa4, Reason> {
    let hex = |part: &str| part.len() == 12 && part.bytes().all(|c| c.is_ascii_hexdigit());
    let mut parts = text.split('_');
    let ok = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(a), Some(b), Some(c), None) => {
            a.len() == 10 && a.bytes().all(|c| c.is_ascii_alphanumeric()) && hex(b) && hex(c)
        }
        _ => false,
    };
    if ok {
        Ok(FingerprintJa4 {
            text: text.to_owned(),
        })
    } else {
        Err(format_error("ja4", text))
    }
}

/// A user-agent pattern: no control characters (the length is checked by the caller).
pub(crate) fn user_agent(text: &str) -> Result<UserAgentPattern, Reason> {
    if text.chars().any(char::is_control) {
        Err(format_error("user-agent", text))
    } else {
        Ok(UserAgentPattern {
            text: text.to_owned(),
        })
    }
}

/// A DNS hostname: dot-separated labels of 1..63 letters, digits, hyphens (not first or last)
/// and underscores; at most 253 characters without the optional single trailing dot; any case;
/// no wildcards.
pub(crate) fn hostname(text: &str) -> Result<Hostname, Reason> {
    let name = text.strip_suffix('.').unwrap_or(text);
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if !name.is_empty() && name.len() <= 253 && name.split('.').all(label_ok) {
        Ok(Hostname {
            text: text.to_owned(),
        })
    } else {
        Err(format_error("hostname", text))
    }
}

/// An absolute URI: a scheme (`[a-zA-Z][a-zA-Z0-9+.-]*`), `:`, and a non-empty rest without
/// spaces or control characters.
pub(crate) fn absolute_uri(text: &str) -> Result<&str, Reason> {
    let ok = match text.split_once(':') {
        Some((scheme, rest)) => {
            let mut chars = scheme.bytes();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'.' | b'-'))
                && !rest.is_empty()
                && !rest.chars().any(|c| c.is_whitespace() || c.is_control())
        }
        None => false,
    };
    if ok {
        Ok(text)
    } else {
        Err(format_error("absolute-uri", text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4() {
        let e = ipv4_cidr("10.1.2.3/8").unwrap();
        assert_eq!(e.text(), "10.1.2.3/8");
        assert_eq!(e.net().to_string(), "10.0.0.0/8");
        assert_eq!(
            ipv4_cidr("192.0.2.1").unwrap().net().to_string(),
            "192.0.2.1/32"
        );
        assert_eq!(
            ipv4_cidr("0.0.0.0/0").unwrap().net().to_string(),
            "0.0.0.0/0"
        );
        for bad in [
            "10.0.0.256",
            "10.0.0.0/33",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "10.0.0.0/08",
            "10.0.0.0/8/8",
            "010.0.0.1",
            "10.0.0",
            " 10.0.0.1",
            "::1",
            "",
        ] {
            assert_eq!(
                ipv4_cidr(bad).unwrap_err(),
                format!("Object didn't pass validation for format ipv4-cidr: {bad}")
            );
        }
    }

    #[test]
    fn ipv6() {
        let e = ipv6_cidr("2001:db8::1/32", "ipv4_cidrs").unwrap();
        assert_eq!(e.text(), "2001:db8::1/32");
        assert_eq!(e.net().to_string(), "2001:db8::/32");
        assert_eq!(
            ipv6_cidr("::1", "ipv4_cidrs").unwrap().net().to_string(),
            "::1/128"
        );
        // Containing the mapped range is fine; lying inside it is not.
        assert!(ipv6_cidr("::/0", "ipv4_cidrs").is_ok());
        assert!(ipv6_cidr("::fffe:0:0/95", "ipv4_cidrs").is_ok());
        assert_eq!(
            ipv6_cidr("::ffff:10.0.0.1", "ipv4_cidrs").unwrap_err(),
            "IPv4-mapped address ::ffff:10.0.0.1 can never match (such request addresses are \
             matched as IPv4): list it as 10.0.0.1 in ipv4_cidrs"
        );
        assert_eq!(
            ipv6_cidr("::ffff:a00:0/104", "connecting_ipv4_cidrs").unwrap_err(),
            "IPv4-mapped address ::ffff:a00:0/104 can never match (such request addresses are \
             matched as IPv4): list it as 10.0.0.0/8 in connecting_ipv4_cidrs"
        );
        for bad in [
            "10.0.0.1",
            "2001:db8::/129",
            "2001:db8::g",
            "fe80::1%eth0",
            "",
        ] {
            assert_eq!(
                ipv6_cidr(bad, "ipv4_cidrs").unwrap_err(),
                format!("Object didn't pass validation for format ipv6-cidr: {bad}")
            );
        }
    }

    #[test]
    fn codes_and_fingerprints() {
        assert!(country_code("US").is_ok());
        assert!(country_code("nz").is_ok());
        assert!(country_code("USA").is_err());
        assert!(country_code("U1").is_err());
        assert!(country_code("ÜS").is_err());
        assert!(subdivision_code("US-NY").is_ok());
        assert!(subdivision_code("gb-eng").is_ok());
        assert!(subdivision_code("FR-75C").is_ok());
        assert!(subdivision_code("US-").is_err());
        assert!(subdivision_code("US-ABCD").is_err());
        assert!(subdivision_code("USA-NY").is_err());
        assert!(subdivision_code("US_NY").is_err());
        assert!(ja3("e7d705a3286e19ea42f587b344ee6865").is_ok());
        assert!(ja3("E7D705A3286E19EA42F587B344EE6865").is_err());
        assert!(ja3("e7d705a3286e19ea42f587b344ee686").is_err());
        assert!(ja3("e7d705a3286e19ea42f587b344ee686g").is_err());
        assert!(ja4("t13d1516h2_8daaf6152771_b186095e22b6").is_ok());
        assert!(ja4("T13D1516H2_8DAAF6152771_B186095E22B6").is_ok());
        assert!(ja4("t13d1516h2_8daaf6152771").is_err());
        assert!(ja4("t13d1516h2_8daaf6152771_b186095e22b6_").is_err());
        assert!(ja4("t13d1516h_8daaf6152771_b186095e22b6").is_err());
        assert!(ja4("t13d1516h2_8daaf615277z_b186095e22b6").is_err());
    }

    #[test]
    fn hostnames() {
        for ok in [
            "example.com",
            "Login.Example.COM.",
            "_acme-challenge.example.com",
            "localhost",
            "a-b.c",
        ] {
            assert_eq!(hostname(ok).unwrap().text(), ok);
        }
        let long_label = "a".repeat(64);
        let long_name = ["a".repeat(63).as_str(); 4].join(".");
        for bad in [
            "",
            ".",
            "*.example.com",
            "-a.com",
            "a-.com",
            "a..b",
            "a.b..",
            "exa mple.com",
            "é.com",
            long_label.as_str(),
            long_name.as_str(),
        ] {
            assert!(hostname(bad).is_err(), "{bad}");
        }
        let max = format!(
            "{}.{}",
            ["a".repeat(63).as_str(); 3].join("."),
            "a".repeat(61)
        );
        assert_eq!(max.len(), 253);
        assert!(hostname(&max).is_ok());
        assert!(hostname(&format!("{max}.")).is_ok());
    }

    #[test]
    fn uris_and_user_agents() {
        assert!(absolute_uri("https://example.com/blocked?x=1").is_ok());
        assert!(absolute_uri("urn:isbn:0451450523").is_ok());
        assert!(absolute_uri("/relative").is_err());
        assert!(absolute_uri("https:").is_err());
        assert!(absolute_uri("1http://x").is_err());
        assert!(absolute_uri("https://exa mple.com").is_err());
        assert!(absolute_uri("https://example.com/\n").is_err());
        assert!(user_agent("curl/*").is_ok());
        assert_eq!(
            user_agent("bad\tbot").unwrap_err(),
            "Object didn't pass validation for format user-agent: bad\\u{9}bot"
        );
    }
}
