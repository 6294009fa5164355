//! RFC 9421 verification against the RFC's own vectors (`../shared/reference-data/httpsig/`)
//! and against signatures made here over requests the edge sees: every way a signature can
//! fail is a [`SignatureError`], never a panic.
use aws_lc_rs::hmac;
use base64::Engine;
use http::{HeaderMap, HeaderValue};
use netacl_edge::httpsig::{signature_base, verify, SignatureError, SignedRequest, SigningKeys};
use serde_json::Value;
use sfv::{Dictionary, ListEntry, Parser};

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/reference-data/httpsig/rfc9421-vectors.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).expect("vectors are JSON")
}

fn b64(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("base64")
}

fn headers_of(request: &Value) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for pair in request["headers"].as_array().expect("headers") {
        let name = pair[0].as_str().expect("name").to_ascii_lowercase();
        let value = pair[1].as_str().expect("value");
        headers.append(
            http::header::HeaderName::from_bytes(name.as_bytes()).expect("name"),
            HeaderValue::from_str(value).expect("value"),
        );
    }
    headers
}

/// The covered components and parameters of a `Signature-Input` member value.
fn inner_list(member_value: &str) -> sfv::InnerList {
    let dictionary: Dictionary = Parser::new(&format!("x={member_value}"))
        .parse_dictionary()
        .expect("dictionary");
    match dictionary.into_iter().next().expect("member").1 {
        ListEntry::InnerList(list) => list,
        ListEntry::Item(_) => panic!("not an inner list"),
    }
}

#[test]
fn rfc_9421_b_2_5_base_and_mac_verify_yet_the_policy_refuses_it() {
    let v = vectors();
    let example = &v["hmac_examples"][0];
    let request = &example["request"];
    let target = request["target"].as_str().expect("target");
    let (path, query) = target.split_once('?').expect("query");
    let headers = {
        let mut h = headers_of(request);
        h.insert(
            "signature-input",
            HeaderValue::from_str(example["signature_input_header"].as_str().expect("si"))
                .expect("value"),
        );
        h.insert(
            "signature",
            HeaderValue::from_str(example["signature_header"].as_str().expect("sig"))
                .expect("value"),
        );
        h
    };
    let signed = SignedRequest {
        method: request["method"].as_str().expect("method"),
        scheme: "https",
        authority: request["authority"].as_str().expect("authority"),
        path,
        query: Some(query),
        headers: &headers,
    };
    let covered = inner_list(example["signature_params"].as_str().expect("params"));
    let base = signature_base(&signed, &covered).expect("base");
    assert_eq!(base, example["signature_base"].as_str().expect("base"));
    let secret = b64(v["keys"]["test-shared-secret"].as_str().expect("secret"));
    let mac = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &secret), base.as_bytes());
    assert_eq!(
        base64::engine::general_purpose::STANDARD.encode(mac.as_ref()),
        example["signature_b64"].as_str().expect("mac")
    );
    // It has no `expires`: it does not satisfy the policy, at its own creation time too.
    let keys = SigningKeys::new([("test-shared-secret", &secret[..])]);
    let created = example["signature_params_parsed"]["created"]
        .as_i64()
        .expect("created");
    assert_eq!(
        verify(&keys, &signed, created),
        Err(SignatureError::MissingParameter("expires"))
    );
}

#[test]
fn rfc_9421_derived_components() {
    let v = vectors();
    let mut checked = 0;
    for example in v["derived_component_examples"]
        .as_array()
        .expect("examples")
    {
        let request = &example["request"];
        let target = request["target"].as_str().expect("target");
        if !target.starts_with('/') {
            continue; // absolute, authority and asterisk forms: the edge sees origin form
        }
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (target, None),
        };
        let headers = headers_of(request);
        let signed = SignedRequest {
            method: request["method"].as_str().expect("method"),
            scheme: request["scheme"].as_str().unwrap_or("http"),
            authority: request["authority"].as_str().expect("authority"),
            path,
            query,
            headers: &headers,
        };
        let component = example["component"].as_str().expect("component");
        let identifier = match component.split_once(';') {
            Some((name, params)) => format!("\"{name}\";{params}"),
            None => format!("\"{component}\""),
        };
        let covered = inner_list(&format!("({identifier})"));
        let base = signature_base(&signed, &covered).expect("base");
        let first = base.split('\n').next().expect("line");
        assert_eq!(
            first,
            example["signature_base_line"].as_str().expect("line"),
            "{}",
            example["source"]
        );
        checked += 1;
    }
    assert!(checked >= 15, "checked {checked}");
    // An absent query is `?`; an absent query parameter is an error.
    let headers = HeaderMap::new();
    let bare = SignedRequest {
        method: "GET",
        scheme: "https",
        authority: "example.com",
        path: "",
        query: None,
        headers: &headers,
    };
    let base = signature_base(&bare, &inner_list("(\"@query\" \"@path\")")).expect("base");
    assert!(base.starts_with("\"@query\": ?\n\"@path\": /\n"), "{base}");
    assert!(signature_base(&bare, &inner_list("(\"@query-param\";name=\"a\")")).is_err());
}

const NOW: i64 = 1_764_000_000;
const KEY: [u8; 32] = [0x42; 32];

/// A request `GET https://login.example.com/authorize?client_id=abc` signed with `key` over
/// `components` with `params` (`;created=...;expires=...;keyid="..."`), under one label.
fn signed_headers(key: &[u8], components: &str, params: &str, extra_label: bool) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("host", HeaderValue::from_static("login.example.com"));
    let member = format!("({components}){params}");
    let request = SignedRequest {
        method: "GET",
        scheme: "https",
        authority: "login.example.com",
        path: "/authorize",
        query: Some("client_id=abc"),
        headers: &headers,
    };
    let base = signature_base(&request, &inner_list(&member)).expect("base");
    let mac = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), base.as_bytes());
    let mac = base64::engine::general_purpose::STANDARD.encode(mac.as_ref());
    let (input, signature) = if extra_label {
        (
            format!("proxy={member}, other={member}"),
            format!("proxy=:{mac}:, other=:{mac}:"),
        )
    } else {
        (format!("proxy={member}"), format!("proxy=:{mac}:"))
    };
    headers.insert("signature-input", HeaderValue::from_str(&input).expect("v"));
    headers.insert("signature", HeaderValue::from_str(&signature).expect("v"));
    headers
}

fn check(headers: &HeaderMap, path: &str, query: &str) -> Result<String, SignatureError> {
    let keys = SigningKeys::new([("nak_proxy", &KEY[..])]);
    let request = SignedRequest {
        method: "GET",
        scheme: "https",
        authority: "login.example.com",
        path,
        query: Some(query),
        headers,
    };
    verify(&keys, &request, NOW).map(str::to_owned)
}

const FLOOR: &str = "\"@method\" \"@authority\" \"@path\" \"@query\"";

fn params(created: i64, expires: Option<i64>, keyid: &str) -> String {
    match expires {
        Some(e) => format!(";created={created};expires={e};keyid=\"{keyid}\""),
        None => format!(";created={created};keyid=\"{keyid}\""),
    }
}

#[test]
fn signatures_made_here_verify_only_when_every_rule_holds() {
    let ok = signed_headers(
        &KEY,
        FLOOR,
        &params(NOW - 10, Some(NOW + 290), "nak_proxy"),
        false,
    );
    assert_eq!(
        check(&ok, "/authorize", "client_id=abc").as_deref(),
        Ok("nak_proxy")
    );
    // Tampered path and query parameter.
    assert_eq!(
        check(&ok, "/authorize2", "client_id=abc"),
        Err(SignatureError::Mismatch)
    );
    assert_eq!(
        check(&ok, "/authorize", "client_id=abd"),
        Err(SignatureError::Mismatch)
    );
    // Time: expired beyond the skew, lifetime over an hour, created in the future.
    let expired = signed_headers(
        &KEY,
        FLOOR,
        &params(NOW - 400, Some(NOW - 61), "nak_proxy"),
        false,
    );
    assert_eq!(
        check(&expired, "/authorize", "client_id=abc"),
        Err(SignatureError::Expired)
    );
    let within_skew = signed_headers(
        &KEY,
        FLOOR,
        &params(NOW - 400, Some(NOW - 59), "nak_proxy"),
        false,
    );
    assert!(check(&within_skew, "/authorize", "client_id=abc").is_ok());
    let long = signed_headers(
        &KEY,
        FLOOR,
        &params(NOW - 10, Some(NOW + 3591), "nak_proxy"),
        false,
    );
    assert_eq!(
        check(&long, "/authorize", "client_id=abc"),
        Err(SignatureError::Lifetime)
    );
    let future = signed_headers(
        &KEY,
        FLOOR,
        &params(NOW + 61, Some(NOW + 120), "nak_proxy"),
        false,
    );
    assert_eq!(
        check(&future, "/authorize", "client_id=abc"),
        Err(SignatureError::NotYetValid)
    );
    // Missing expires, two labels, unknown key id, wrong key.
    let no_expires = signed_headers(&KEY, FLOOR, &params(NOW, None, "nak_proxy"), false);
    assert_eq!(
        check(&no_expires, "/authorize", "client_id=abc"),
        Err(SignatureError::MissingParameter("expires"))
    );
    let two = signed_headers(&KEY, FLOOR, &params(NOW, Some(NOW + 60), "nak_proxy"), true);
    assert_eq!(
        check(&two, "/authorize", "client_id=abc"),
        Err(SignatureError::Labels)
    );
    let unknown = signed_headers(
        &KEY,
        FLOOR,
        &params(NOW, Some(NOW + 60), "nak_other"),
        false,
    );
    assert_eq!(
        check(&unknown, "/authorize", "client_id=abc"),
        Err(SignatureError::UnknownKey)
    );
    let wrong = signed_headers(
        &[1u8; 32],
        FLOOR,
        &params(NOW, Some(NOW + 60), "nak_proxy"),
        false,
    );
    assert_eq!(
        check(&wrong, "/authorize", "client_id=abc"),
        Err(SignatureError::Mismatch)
    );
    // The floor: @method, @authority and @path must be covered.
    let thin = signed_headers(
        &KEY,
        "\"@method\" \"@authority\"",
        &params(NOW, Some(NOW + 60), "nak_proxy"),
        false,
    );
    assert_eq!(
        check(&thin, "/authorize", "client_id=abc"),
        Err(SignatureError::NotCovered("@path"))
    );
    // Unsigned.
    assert_eq!(
        check(&HeaderMap::new(), "/authorize", "client_id=abc"),
        Err(SignatureError::Unsigned)
    );
}

#[test]
fn malformed_and_oversized_fields_are_refused_without_panicking() {
    for (input, signature) in [
        ("proxy=(\"@method\"", "proxy=:AAAA:"),
        ("proxy=1", "proxy=:AAAA:"),
        ("proxy=(\"@method\" \"@authority\" \"@path\");created=1;expires=2;keyid=\"k\"", "proxy=1"),
        ("proxy=(\"@method\" \"@authority\" \"@path\");created=1;expires=2;keyid=\"k\"", "other=:AAAA:"),
        ("", ""),
        ("proxy=(\"@method\" \"@method\" \"@authority\" \"@path\");created=1764000000;expires=1764000001;keyid=\"nak_proxy\"", "proxy=:AAAA:"),
        ("proxy=(\"@unknown\" \"@method\" \"@authority\" \"@path\");created=1764000000;expires=1764000001;keyid=\"nak_proxy\"", "proxy=:AAAA:"),
        ("proxy=(\"@method\" \"@authority\" \"@path\");created=1764000000;expires=1764000001;keyid=\"nak_proxy\";alg=\"rsa-pss-sha512\"", "proxy=:AAAA:"),
    ] {
        let mut headers = HeaderMap::new();
        if let (Ok(i), Ok(s)) = (HeaderValue::from_str(input), HeaderValue::from_str(signature)) {
            headers.insert("signature-input", i);
            headers.insert("signature", s);
        }
        assert!(check(&headers, "/authorize", "client_id=abc").is_err(), "{input}");
    }
    let mut headers = HeaderMap::new();
    let huge = format!("proxy=(\"@method\"{})", " \"x\"".repeat(3000));
    headers.insert("signature-input", HeaderValue::from_str(&huge).expect("v"));
    headers.insert("signature", HeaderValue::from_static("proxy=:AAAA:"));
    assert_eq!(
        check(&headers, "/authorize", ""),
        Err(SignatureError::TooLong)
    );
}

/// A proxy that holds no `HeaderMap` (an SPOE message, an Envoy `CheckRequest`) hands the
/// fields as pairs: they verify exactly as the same fields in a `HeaderMap`, field lines of one
/// name joined in order, names compared without case, non-ASCII refused alike.
#[test]
fn header_pairs_verify_as_a_header_map_does() {
    let keys = SigningKeys::new([("nak_proxy", &KEY[..])]);
    let covered = format!("{FLOOR} \"x-tenant\"");
    let mut map = signed_headers(
        &KEY,
        FLOOR,
        &params(NOW - 10, Some(NOW + 290), "nak_proxy"),
        false,
    );
    let as_map = |headers: &HeaderMap| {
        let request = SignedRequest {
            method: "GET",
            scheme: "https",
            authority: "login.example.com",
            path: "/authorize",
            query: Some("client_id=abc"),
            headers,
        };
        verify(&keys, &request, NOW).map(str::to_owned)
    };
    assert_eq!(as_map(&map).as_deref(), Ok("nak_proxy"));
    let pairs_of = |map: &HeaderMap| -> Vec<(String, Vec<u8>)> {
        map.iter()
            .map(|(n, v)| (n.as_str().to_ascii_uppercase(), v.as_bytes().to_vec()))
            .collect()
    };
    let as_pairs = |pairs: &Vec<(String, Vec<u8>)>| {
        let request = SignedRequest {
            method: "GET",
            scheme: "https",
            authority: "login.example.com",
            path: "/authorize",
            query: Some("client_id=abc"),
            headers: pairs,
        };
        verify(&keys, &request, NOW).map(str::to_owned)
    };
    assert_eq!(as_pairs(&pairs_of(&map)).as_deref(), Ok("nak_proxy"));
    // Sign again over a field given on two lines: both forms verify.
    map.append("x-tenant", HeaderValue::from_static(" acme "));
    map.append("x-tenant", HeaderValue::from_static("globex"));
    let member = format!(
        "({covered}){}",
        params(NOW - 10, Some(NOW + 290), "nak_proxy")
    );
    let base = signature_base(
        &SignedRequest {
            method: "GET",
            scheme: "https",
            authority: "login.example.com",
            path: "/authorize",
            query: Some("client_id=abc"),
            headers: &map,
        },
        &inner_list(&member),
    )
    .expect("base");
    assert!(base.contains("\"x-tenant\": acme, globex\n"), "{base}");
    let mac = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &KEY), base.as_bytes());
    let mac = base64::engine::general_purpose::STANDARD.encode(mac.as_ref());
    map.insert(
        "signature-input",
        HeaderValue::from_str(&format!("proxy={member}")).expect("v"),
    );
    map.insert(
        "signature",
        HeaderValue::from_str(&format!("proxy=:{mac}:")).expect("v"),
    );
    assert_eq!(as_map(&map).as_deref(), Ok("nak_proxy"));
    assert_eq!(as_pairs(&pairs_of(&map)).as_deref(), Ok("nak_proxy"));
    // A value that is not visible ASCII is refused in both forms.
    map.append(
        "x-tenant",
        HeaderValue::from_bytes(b"caf\xc3\xa9").expect("v"),
    );
    assert_eq!(
        as_map(&map),
        Err(SignatureError::Component("field is not visible ASCII"))
    );
    assert_eq!(as_pairs(&pairs_of(&map)), as_map(&map));
}
