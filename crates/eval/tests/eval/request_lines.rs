//! `RequestInputRef::from_json_line` (a scanner for the usual flat request line, `serde_json`
//! for everything else) against `serde_json::from_str` on random lines: the same value, or an
//! error from both.

use netacl_eval::RequestInputRef;
use proptest::prelude::*;

const KEYS: [&str; 13] = [
    "scope",
    "path",
    "client_ip",
    "connecting_ip",
    "asn",
    "country",
    "subdivision",
    "ja3",
    "ja4",
    "user_agent",
    "hostname",
    "unknown",
    "user\\u005fagent",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_owned()),
        Just("nul".to_owned()),
        // Plain strings, and strings with escapes, control characters, quotes and non-ASCII.
        "[a-zA-Z0-9./ :;()_-]{0,12}".prop_map(|s| format!("\"{s}\"")),
        prop::sample::select(vec![
            "\"a\\\"b\"",
            "\"tab\\there\"",
            "\"\u{1}\"",
            "\"é ü 漢\"",
            "\"\\u00e9\"",
            "\"unterminated",
            "\"\"",
        ])
        .prop_map(str::to_owned),
        // Numbers: plain, zero, leading zeros, signs, fractions, exponents, out of range.
        prop::sample::select(vec![
            "0",
            "7",
            "64500",
            "4294967295",
            "4294967296",
            "01",
            "-1",
            "1.0",
            "1e3",
            "1E3",
            "99999999999999999999",
            "2 3",
        ])
        .prop_map(str::to_owned),
        Just("{}".to_owned()),
        Just("[1]".to_owned()),
        Just("true".to_owned()),
    ]
}

fn line() -> impl Strategy<Value = String> {
    let ws = prop::sample::select(vec!["", " ", "\t", "\r\n", "  "]);
    (
        prop::collection::vec(
            (prop::sample::select(KEYS.to_vec()), value(), ws.clone()),
            0..8,
        ),
        ws.clone(),
        prop::sample::select(vec!["", "\n", " x", ",", "}"]),
        any::<bool>(),
    )
        .prop_map(|(members, lead, tail, braces)| {
            let body: Vec<String> = members
                .iter()
                .map(|(k, v, w)| format!("{w}\"{k}\"{w}:{w}{v}{w}"))
                .collect();
            if braces {
                format!("{lead}{{{}}}{tail}", body.join(","))
            } else {
                format!("{lead}{}{tail}", body.join(","))
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3_000))]
    #[test]
    fn request_lines_parse_like_serde_json(text in line()) {
        let fast = RequestInputRef::from_json_line(&text);
        let reference = serde_json::from_str::<RequestInputRef<'_>>(&text);
        match (&fast, &reference) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            _ => prop_assert!(false, "{text:?}: {fast:?} vs {reference:?}"),
        }
    }
}
