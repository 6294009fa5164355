//! The string formats as regular expressions, each accepting exactly the texts its validator
//! accepts: the OpenAPI document states the formats with them (JSON Schema `pattern`), so that a
//! generic client knows what the server takes. The syntax is the common part of ECMA-262 (JSON
//! Schema's dialect), Python's `re` and Rust's `regex`: classes, groups, bounded repetition and
//! `\uXXXX` escapes, no look-around. Where a format excludes a part of a larger set (an IPv6
//! entry inside the IPv4-mapped range, an organization name starting with `org_`), the document
//! pairs the pattern with a `not` pattern, given here too.
//!
//! The tests hold every pattern to its validator on tens of thousands of generated texts each.

/// One IPv6 group: 1 to 4 hex digits, any case.
const HEX_GROUP: &str = "[0-9A-Fa-f]{1,4}";

/// One IPv4 octet in strict decimal: 0 to 255, no leading zero.
const OCTET: &str = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";

/// Characters Rust's `char::is_whitespace` or `char::is_control` reports (the White_Space
/// property and the Cc category), as the inside of a character class.
pub const SPACE_OR_CONTROL_CLASS: &str =
    "\\u0000-\\u0020\\u007F-\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000";

/// Characters Rust's `char::is_control` reports (the Cc category), as the inside of a class.
const CONTROL_CLASS: &str = "\\u0000-\\u001F\\u007F-\\u009F";

/// A network ACL id: `acl_` and 22 base58 characters.
pub const ACL_ID: &str = "^acl_[1-9A-HJ-NP-Za-km-z]{22}$";

/// An ISO 3166-1 alpha-2 country code: two ASCII letters, any case.
pub const COUNTRY_CODE: &str = "^[A-Za-z]{2}$";

/// An ISO 3166-2 subdivision code: two letters, `-`, one to three letters or digits; any case.
pub const SUBDIVISION_CODE: &str = "^[A-Za-z]{2}-[A-Za-z0-9]{1,3}$";

/// A JA3 fingerprint: 32 lowercase hex digits.
pub const JA3: &str = "^[0-9a-f]{32}$";

/// A JA4 fingerprint, any case.
pub const JA4: &str = "^[A-Za-z0-9]{10}_[0-9A-Fa-f]{12}_[0-9A-Fa-f]{12}$";

/// Text without control characters (user-agent patterns, directory ids; their lengths are
/// stated apart).
pub const NO_CONTROL: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$";

/// A hostname without its optional trailing dot: dot-separated labels of 1 to 63 letters,
/// digits, `_` and `-` (not first or last). At most 253 characters (stated apart).
pub const HOSTNAME: &str = "^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\
                            (?:\\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*$";

/// [`HOSTNAME`] with its trailing dot. At most 254 characters (stated apart).
pub const HOSTNAME_WITH_DOT: &str = "^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\
                                     (?:\\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\\.$";

/// An HTML colour: `#` and 3, 4, 6 or 8 hex digits.
pub const HTML_COLOR: &str = "^#(?:[0-9A-Fa-f]{3}|[0-9A-Fa-f]{4}|[0-9A-Fa-f]{6}|[0-9A-Fa-f]{8})$";

/// A timestamp exactly as netacl writes them, `2026-07-30T11:42:25.354Z`: a real calendar day
/// (leap years included), UTC, milliseconds.
pub const TIMESTAMP: &str = "^(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])\
                             |(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))\
                             |(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])\
                             |(?:[02468][048]|[13579][26])00)-02-29)\
                             T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\\.[0-9]{3}Z$";

/// An organization name (1 to 50 characters, stated apart): lowercase letters, digits, `-` and
/// `_`, starting and ending with a letter or digit. Paired with [`ORGANIZATION_NAME_NOT`].
pub const ORGANIZATION_NAME: &str = "^[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?$";

/// What an organization name must not match: the `org_` prefix of organization ids.
pub const ORGANIZATION_NAME_NOT: &str = "^org_";

/// A request path as [`normalize_path`](crate::normalize_path) takes it (the dry run's `path`):
/// up to the first `?` or `#`, every `%` followed by two hex digits and no backslash; the query
/// and fragment may hold anything. What it leaves to state apart is the one refusal no pattern
/// carries: [`scope_of_path`](crate::scope_of_path)'s ambiguous paths (their scope depends on
/// the server reading them).
pub const REQUEST_PATH: &str = "^(?:[^%\\\\?#]|%[0-9A-Fa-f]{2})*(?:[?#][\\s\\S]*)?$";

/// Network ACL key material (`value` of a key create body): standard base64 of 32 to 64
/// bytes, `=` padding optional (a one-byte end takes zero to two), the unused bits of the last
/// character zero (what
/// [`NetworkAclKeySpec`](crate::NetworkAclKeySpec) decodes): 10 groups of four and two bytes,
/// 11 to 20 groups and up to two bytes, or 21 groups and up to one byte.
pub const NETWORK_ACL_KEY_VALUE: &str = "^(?:[A-Za-z0-9+/]{40}[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=?\
    |[A-Za-z0-9+/]{44}(?:[A-Za-z0-9+/]{4}){0,9}\
    (?:[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=?|[A-Za-z0-9+/][AQgw]={0,2})?\
    |[A-Za-z0-9+/]{84}(?:[A-Za-z0-9+/][AQgw]={0,2})?)$";

/// A connection id: `con_` and 16 ASCII letters or digits.
pub const CONNECTION_ID: &str = "^con_[A-Za-z0-9]{16}$";

/// A connection name (1 to 128 characters, stated apart): ASCII letters, digits and `-`,
/// starting and ending with a letter or digit.
pub const CONNECTION_NAME: &str = "^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?$";

/// A connection strategy (1 to 64 characters, stated apart): lowercase letters, digits, `-`.
pub const STRATEGY: &str = "^[a-z0-9-]+$";

/// The strict dotted-decimal IPv4 address, unanchored.
fn ipv4_address() -> String {
    format!("{OCTET}(?:\\.{OCTET}){{3}}")
}

/// Every text form of an IPv6 address Rust's `Ipv6Addr` parser takes, unanchored: eight groups,
/// or six and a dotted IPv4 address, or either with one `::` standing for at least one zero
/// group.
fn ipv6_address() -> String {
    let h = HEX_GROUP;
    let v4 = ipv4_address();
    let mut forms = vec![format!("(?:{h}:){{7}}{h}"), format!("(?:{h}:){{6}}{v4}")];
    for left in 0..=7usize {
        // `::` stands for at least one group: the right side holds at most 7 - left.
        let room = 7 - left;
        let left_text = match left {
            0 => String::new(),
            1 => h.to_owned(),
            n => format!("(?:{h}:){{{}}}{h}", n - 1),
        };
        let mut right = Vec::new();
        if room >= 1 {
            right.push(format!("(?:{h}:){{0,{}}}{h}", room - 1));
        }
        if room >= 2 {
            right.push(format!("(?:{h}:){{0,{}}}{v4}", room - 2));
        }
        let right_text = if right.is_empty() {
            String::new()
        } else {
            format!("(?:{})?", right.join("|"))
        };
        forms.push(format!("{left_text}::{right_text}"));
    }
    forms.join("|")
}

/// An IPv4 address or CIDR (`/0` to `/32`, no leading zero).
pub fn ipv4_cidr() -> String {
    format!("^{}(?:/(?:3[0-2]|[12]?[0-9]))?$", ipv4_address())
}

/// An IPv6 address or CIDR (`/0` to `/128`, no leading zero). Paired with
/// [`ipv6_cidr_ipv4_mapped`].
pub fn ipv6_cidr() -> String {
    format!(
        "^(?:{})(?:/(?:12[0-8]|1[01][0-9]|[1-9]?[0-9]))?$",
        ipv6_address()
    )
}

/// The IPv6 entries lying inside `::ffff:0:0/96` (refused: such request addresses are matched as
/// IPv4): an address whose first five groups are zero and sixth is `ffff`, in any of its text
/// forms, with no prefix or one of at least 96.
pub fn ipv6_cidr_ipv4_mapped() -> String {
    const ZERO: &str = "0{1,4}";
    const FFFF: &str = "[Ff]{4}";
    let v4 = ipv4_address();
    // (text, may stand for zero).
    let hex_tail: Vec<(&str, bool)> = vec![
        (ZERO, true),
        (ZERO, true),
        (ZERO, true),
        (ZERO, true),
        (ZERO, true),
        (FFFF, false),
        (HEX_GROUP, true),
        (HEX_GROUP, true),
    ];
    let mut v4_tail: Vec<(&str, bool)> = hex_tail[..6].to_vec();
    v4_tail.push((&v4, false));
    let mut forms = Vec::new();
    for units in [&hex_tail, &v4_tail] {
        let join = |part: &[(&str, bool)]| {
            part.iter()
                .map(|(text, _)| *text)
                .collect::<Vec<_>>()
                .join(":")
        };
        forms.push(join(units));
        for start in 0..units.len() {
            for end in start + 1..=units.len() {
                if units[start..end].iter().all(|(_, zero)| *zero) {
                    forms.push(format!(
                        "{}::{}",
                        join(&units[..start]),
                        join(&units[end..])
                    ));
                }
            }
        }
    }
    format!(
        "^(?:{})(?:/(?:9[6-9]|1[01][0-9]|12[0-8]))?$",
        forms.join("|")
    )
}

/// A request address (`client_ip`, `connecting_ip`): IPv4, IPv6, or IPv6 in brackets.
pub fn ip_address() -> String {
    let v6 = ipv6_address();
    format!("^(?:{}|{v6}|\\[(?:{v6})\\])$", ipv4_address())
}

/// An absolute URI (a redirect target): a scheme, `:`, and a non-empty rest without whitespace
/// or control characters. At most 2000 characters (stated apart).
pub fn absolute_uri() -> String {
    format!("^[A-Za-z][A-Za-z0-9+.-]*:[^{SPACE_OR_CONTROL_CLASS}]+$")
}

/// A strict `https` URI (logos, favicons, fonts): `https://` in any case, an authority whose host
/// (after any `user@`) is not empty and does not start with `:`, then an optional path, query or
/// fragment; no whitespace or control characters. At most 2000 characters (stated apart).
pub fn https_uri() -> String {
    let w = SPACE_OR_CONTROL_CLASS;
    format!("^[Hh][Tt][Tt][Pp][Ss]://(?:[^/?#{w}]*@)?[^/?#@:{w}][^/?#@{w}]*(?:[/?#][^{w}]*)?$")
}

/// An e-mail address as the directory takes it (3 to 254 characters, stated apart): one `@`
/// with text on both sides, no whitespace or control characters.
pub fn email() -> String {
    let w = SPACE_OR_CONTROL_CLASS;
    format!("^[^@{w}]+@[^@{w}]+$")
}

/// Printable text: no control characters (as [`NO_CONTROL`]).
pub fn printable() -> String {
    format!("^[^{CONTROL_CLASS}]*$")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats;
    use proptest::prelude::*;
    use regex::Regex;

    /// The pattern compiled, once per test thread.
    fn re(pattern: &str) -> Regex {
        thread_local! {
            static COMPILED: std::cell::RefCell<std::collections::HashMap<String, Regex>> =
                Default::default();
        }
        COMPILED.with(|compiled| {
            compiled
                .borrow_mut()
                .entry(pattern.to_owned())
                .or_insert_with(|| Regex::new(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}")))
                .clone()
        })
    }

    /// The document's IPv6 rule: the pattern, and not the mapped pattern.
    struct Ipv6Rule {
        cidr: Regex,
        mapped: Regex,
    }

    impl Ipv6Rule {
        fn new() -> Self {
            Self {
                cidr: re(&ipv6_cidr()),
                mapped: re(&ipv6_cidr_ipv4_mapped()),
            }
        }
        fn accepts(&self, text: &str) -> bool {
            self.cidr.is_match(text) && !self.mapped.is_match(text)
        }
    }

    /// Text forms of an IPv6 address: its groups written in hex with random padding and case,
    /// one random zero run (or none) compressed, maybe the last two groups as dotted IPv4.
    fn ipv6_text() -> impl Strategy<Value = String> {
        let group = prop_oneof![
            3 => Just(0u16),
            2 => Just(0xffff),
            1 => any::<u16>(),
            1 => 0u16..16,
        ];
        (
            proptest::collection::vec(group, 8),
            any::<u64>(),
            0usize..9,
            0usize..9,
            any::<bool>(),
        )
            .prop_map(|(groups, bits, from, to, dotted)| {
                let mut parts: Vec<String> = groups
                    .iter()
                    .enumerate()
                    .map(|(i, g)| {
                        let pad = ((bits >> (i * 4)) & 3) as usize;
                        let text = format!("{g:x}");
                        let text = format!("{}{text}", "0".repeat(pad.min(4 - text.len())));
                        if bits >> (32 + i) & 1 == 1 {
                            text.to_ascii_uppercase()
                        } else {
                            text
                        }
                    })
                    .collect();
                if dotted {
                    let (a, b) = (groups[6], groups[7]);
                    parts.truncate(6);
                    parts.push(format!("{}.{}.{}.{}", a >> 8, a & 0xff, b >> 8, b & 0xff));
                }
                let (from, to) = (from.min(to), from.max(to).min(parts.len()));
                if from < to {
                    format!("{}::{}", parts[..from].join(":"), parts[to..].join(":"))
                } else {
                    parts.join(":")
                }
            })
    }

    /// Random edits: insert, delete or replace characters from the formats' alphabets.
    fn mutated(text: String, edits: Vec<(usize, u8, u8)>) -> String {
        const ALPHABET: &[u8] = b"0123456789abcdefABCDEFxX:./ []%-_#@?";
        let mut chars: Vec<char> = text.chars().collect();
        for (at, kind, c) in edits {
            let at = if chars.is_empty() {
                0
            } else {
                at % (chars.len() + 1)
            };
            let c = ALPHABET[usize::from(c) % ALPHABET.len()] as char;
            match kind % 3 {
                0 => chars.insert(at, c),
                1 if at < chars.len() => {
                    chars.remove(at);
                }
                _ if at < chars.len() => chars[at] = c,
                _ => chars.push(c),
            }
        }
        chars.into_iter().collect()
    }

    fn edits() -> impl Strategy<Value = Vec<(usize, u8, u8)>> {
        proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..3)
    }

    fn prefix() -> impl Strategy<Value = String> {
        prop_oneof![
            2 => Just(String::new()),
            2 => (0u32..140).prop_map(|p| format!("/{p}")),
            1 => (0u32..140).prop_map(|p| format!("/0{p}")),
            1 => (90u32..130).prop_map(|p| format!("/{p}")),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(10_000))]

        #[test]
        fn ipv6_pattern_is_the_parser(text in ipv6_text(), prefix in prefix(), edits in edits()) {
            let rule = Ipv6Rule::new();
            let text = mutated(format!("{text}{prefix}"), edits);
            let parsed = formats::ipv6_cidr(&text, "ipv4_cidrs").is_ok();
            prop_assert_eq!(rule.accepts(&text), parsed, "{}", text);
        }

        #[test]
        fn ipv4_pattern_is_the_parser(
            octets in proptest::collection::vec(prop_oneof![0u32..256, 250u32..300], 3..6),
            pads in any::<u8>(),
            prefix in prefix(),
            edits in edits(),
        ) {
            let text: Vec<String> = octets
                .iter()
                .enumerate()
                .map(|(i, o)| if pads >> i & 1 == 1 { format!("0{o}") } else { o.to_string() })
                .collect();
            let text = mutated(format!("{}{prefix}", text.join(".")), edits);
            let pattern = re(&ipv4_cidr());
            prop_assert_eq!(
                pattern.is_match(&text),
                formats::ipv4_cidr(&text).is_ok(),
                "{}", text
            );
        }

        #[test]
        fn request_address_pattern_is_the_parser(
            text in prop_oneof![
                ipv6_text(),
                ipv6_text().prop_map(|t| format!("[{t}]")),
                (any::<[u8; 4]>()).prop_map(|o| format!("{}.{}.{}.{}", o[0], o[1], o[2], o[3])),
            ],
            edits in edits(),
        ) {
            let text = mutated(text, edits);
            let trimmed = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(&text);
            let parsed = trimmed.parse::<std::net::IpAddr>().is_ok();
            prop_assert_eq!(re(&ip_address()).is_match(&text), parsed, "{}", text);
        }

        #[test]
        fn hostname_patterns_are_the_parser(
            labels in proptest::collection::vec("[a-zA-Z0-9_-]{0,65}", 1..6),
            long in proptest::collection::vec("[a-z]{60,63}", 3..6),
            dot in any::<bool>(),
            use_long in any::<bool>(),
            edits in edits(),
        ) {
            let name = if use_long { long.join(".") } else { labels.join(".") };
            let text = mutated(format!("{name}{}", if dot { "." } else { "" }), edits);
            let length = text.chars().count();
            let accepted = (length <= 253 && re(HOSTNAME).is_match(&text))
                || (length <= 254 && re(HOSTNAME_WITH_DOT).is_match(&text));
            prop_assert_eq!(accepted, formats::hostname(&text).is_ok(), "{}", text);
        }

        #[test]
        fn timestamp_pattern_is_the_parser(
            year in prop_oneof![0u32..10000, Just(2000u32), Just(1900u32), Just(2024u32), Just(0u32)],
            month in 0u32..14,
            day in 0u32..33,
            hour in 0u32..25,
            minute in 0u32..61,
            second in 0u32..61,
            milli in 0u32..1000,
            edits in edits(),
        ) {
            let text = mutated(
                format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z"),
                edits,
            );
            prop_assert_eq!(
                re(TIMESTAMP).is_match(&text),
                crate::Timestamp::parse(&text).is_some(),
                "{}", text
            );
        }

        #[test]
        fn uri_patterns_are_the_parsers(
            text in prop_oneof![
                "[hH][tT]{2}[pP][sS]?://[a-z@:.é]{0,6}[/?#]?[a-z ]{0,4}",
                "[a-zA-Z0-9+.:-]{0,8}:[a-z/\u{85}\u{a0}\u{2028}\t é]{0,6}",
                "\\PC{0,12}",
            ],
            edits in edits(),
        ) {
            let text = mutated(text, edits);
            let https = crate::branding::check_https_uri(&serde_json::Value::from(text.clone()));
            prop_assert_eq!(
                re(&https_uri()).is_match(&text) && text.chars().count() <= 2000,
                https.is_ok(),
                "{}", text
            );
            prop_assert_eq!(
                re(&absolute_uri()).is_match(&text),
                formats::absolute_uri(&text).is_ok(),
                "{}", text
            );
        }

        #[test]
        fn code_and_fingerprint_patterns_are_the_parsers(
            text in prop_oneof![
                "[a-zA-Z0-9é]{0,3}",
                "[a-zA-Z]{2}-[a-zA-Z0-9_]{0,4}",
                "[0-9a-fA-F]{31,33}",
                "[a-zA-Z0-9]{9,11}_[0-9a-fA-F]{11,13}_[0-9a-fA-Fg]{11,13}",
                "[a-z0-9_-]{0,8}",
                "(org_)?[a-z0-9_-]{0,8}",
                "#[0-9a-fA-Fg]{2,9}",
                "\\PC{0,8}",
                "[\\x00-\\x20\\x7f-\\xa0a-zé ]{0,8}",
            ],
            edits in edits(),
        ) {
            let text = mutated(text, edits);
            prop_assert_eq!(re(COUNTRY_CODE).is_match(&text), formats::country_code(&text).is_ok(), "{}", text);
            prop_assert_eq!(re(SUBDIVISION_CODE).is_match(&text), formats::subdivision_code(&text).is_ok(), "{}", text);
            prop_assert_eq!(re(JA3).is_match(&text), formats::ja3(&text).is_ok(), "{}", text);
            prop_assert_eq!(re(JA4).is_match(&text), formats::ja4(&text).is_ok(), "{}", text);
            prop_assert_eq!(re(NO_CONTROL).is_match(&text), formats::user_agent(&text).is_ok(), "{}", text);
            prop_assert_eq!(re(&printable()).is_match(&text), formats::user_agent(&text).is_ok(), "{}", text);
            let value = serde_json::Value::from(text.clone());
            prop_assert_eq!(
                re(HTML_COLOR).is_match(&text),
                crate::branding::check_color(&value).is_ok(),
                "{}", text
            );
            let short = (1..=50).contains(&text.chars().count());
            prop_assert_eq!(
                short && re(ORGANIZATION_NAME).is_match(&text) && !re(ORGANIZATION_NAME_NOT).is_match(&text),
                crate::organization::check_name(&value).is_ok(),
                "{}", text
            );
            prop_assert_eq!(re(ACL_ID).is_match(&text), crate::AclId::parse(&text).is_some(), "{}", text);
        }

        /// The dry run's `path` pattern is what `normalize_path` takes; of what it lets
        /// through, `scope_of_path` refuses only ambiguous paths (declared apart).
        #[test]
        fn network_acl_key_value_pattern_is_the_decoder(
            bytes in proptest::collection::vec(any::<u8>(), 0..72),
            padded in any::<bool>(),
            edits in edits(),
        ) {
            use base64::Engine as _;
            let encoded = if padded {
                base64::engine::general_purpose::STANDARD.encode(&bytes)
            } else {
                base64::engine::general_purpose::STANDARD_NO_PAD.encode(&bytes)
            };
            for text in [encoded.clone(), mutated(encoded, edits)] {
                let body = serde_json::json!({"name": "k", "alg": "hmac-sha256", "value": text});
                prop_assert_eq!(
                    re(NETWORK_ACL_KEY_VALUE).is_match(&text),
                    crate::NetworkAclKeySpec::from_json(&body).is_ok(),
                    "{:?}", text
                );
            }
        }

        #[test]
        fn request_path_pattern_is_the_normal_form(
            text in prop_oneof![
                "(/|//|%|%2|%2F|%2f|%5c|%zz|%%|%g0|\\\\|\\?|#|\\.|\\.\\.|;x|a|v2|api|\u{e9}|\n){0,10}",
                "[/a-zA-Z0-9%?#\\\\.;\u{e9}\u{0}-\u{1f}\u{7f}-\u{a0}]{0,16}",
                "\\PC{0,16}",
                any::<String>(),
            ],
            edits in edits(),
        ) {
            let text = mutated(text, edits);
            let accepted = re(REQUEST_PATH).is_match(&text);
            prop_assert_eq!(accepted, crate::normalize_path(&text).is_ok(), "{:?}", text);
            match crate::scope_of_path(&text) {
                Ok(_) | Err(crate::PathError::Ambiguous) => prop_assert!(accepted, "{:?}", text),
                Err(_) => prop_assert!(!accepted, "{:?}", text),
            }
        }

        #[test]
        fn directory_patterns_are_the_parsers(
            text in prop_oneof![
                "con_[a-zA-Z0-9é]{15,17}",
                "[a-zA-Z0-9-]{0,8}",
                "[a-z0-9A-Z-]{0,6}",
                "[a-z .\t]{0,3}@?[a-z@.\u{a0}]{0,4}",
                "\\PC{0,8}",
            ],
            edits in edits(),
        ) {
            let text = mutated(text, edits);
            let value = serde_json::Value::from(text.clone());
            let chars = text.chars().count();
            prop_assert_eq!(
                re(CONNECTION_ID).is_match(&text),
                crate::directory::check_connection_id(&value).is_ok(),
                "{}", text
            );
            prop_assert_eq!(
                (1..=128).contains(&chars) && re(CONNECTION_NAME).is_match(&text),
                crate::directory::check_connection_name(&value).is_ok(),
                "{}", text
            );
            prop_assert_eq!(
                (1..=64).contains(&chars) && re(STRATEGY).is_match(&text),
                crate::directory::check_strategy(&value).is_ok(),
                "{}", text
            );
            prop_assert_eq!(
                (3..=254).contains(&chars) && re(&email()).is_match(&text),
                crate::directory::check_email(&value).is_ok(),
                "{}", text
            );
        }
    }

    #[test]
    fn mapped_forms_are_refused_and_their_neighbours_taken() {
        let rule = Ipv6Rule::new();
        for refused in [
            "::ffff:1.2.3.4",
            "::FFFF:102:304",
            "0:0:0:0:0:ffff:102:304",
            "0000:0::ffff:0:0/96",
            "0:0:0:0:0:ffff::",
            "0:0:0:0:0:ffff::5",
            "0:0:0:0:0:ffff:5::",
            "::0:ffff:1.2.3.4/128",
            "::ffff:a00:0/104",
        ] {
            assert!(formats::ipv6_cidr(refused, "x").is_err(), "{refused}");
            assert!(!rule.accepts(refused), "{refused}");
        }
        for accepted in [
            "::ffff:1.2.3.4/95",
            "::ffff",
            "::ffff:1",
            "::ffff:1:2:3",
            "::1.2.3.4",
            "::fffe:0:0/95",
            "::/0",
            "1:2:3:4:5:6:7::",
            "2001:db8::1/32",
        ] {
            assert!(formats::ipv6_cidr(accepted, "x").is_ok(), "{accepted}");
            assert!(rule.accepts(accepted), "{accepted}");
        }
    }
}
