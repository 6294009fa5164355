#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

mod bodies;
mod evaluator;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use md5::{Digest as _, Md5};
use netacl_edge::fingerprint::{ja3, ja4, ClientHello, ClientHelloReader, Progress};
use netacl_edge::geo::{GeoEnricher, GeoNeeds};
use netacl_edge::TrustedProxies;
use netacl_edge::{forwarded_client, normalize_path, scope_of_path, ForwardedHeader};
use netacl_eval::RequestInputRef;
use netacl_model::{RequestScope, MAX_NESTING_DEPTH};
use netacl_server::{form_body_to_json, FormResource};
use serde_json::Value;

pub use bodies::bodies;
pub use evaluator::evaluator;

/// A fuzz target: its name (the file `fuzz/fuzz_targets/NAME.rs` and the folders
/// `fuzz/corpus/NAME/`, `fuzz/regressions/NAME/`) and its body.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, in the order `.ci/run` runs them.
pub const TARGETS: [Target; 11] = [
    ("client_hello", client_hello),
    ("request_line", request_line),
    ("bodies", bodies),
    ("evaluator", evaluator),
    ("forwarded", forwarded),
    ("paths", paths),
    ("maxmind", maxmind),
    ("form_body", form_body),
    ("forward_auth_facts", forward_auth_facts),
    ("spoe_frames", spoe_frames),
    ("check_request", check_request),
];

/// The ClientHello reader and JA3/JA4: the bytes are what a client sends on a TLS connection.
///
/// Never panics; [`ClientHello::parse`] on the whole input and a [`ClientHelloReader`] fed the
/// same bytes in segments (of as many bytes as the first byte says; 0: all at once) agree; when a ClientHello is read,
/// its JA3 string and hash and its JA4 are well-formed, and a network ACL naming them is valid
/// and blocks a request carrying them (what the edge computes, rules can match).
pub fn client_hello(data: &[u8]) {
    let Some((&cut, bytes)) = data.split_first() else {
        return;
    };
    let whole = ClientHello::parse(bytes);
    let mut reader = ClientHelloReader::new();
    // Segments of `cut` bytes; 0: the whole input at once.
    let step = if cut == 0 {
        bytes.len().max(1)
    } else {
        usize::from(cut)
    };
    let mut read = None;
    for segment in bytes.chunks(step) {
        match reader.push(segment) {
            Progress::NeedMore => continue,
            Progress::Done(hello) => {
                read = Some(Ok(hello));
                break;
            }
            Progress::Failed(error) => {
                read = Some(Err(error));
                break;
            }
            _ => unreachable!("Progress has three variants today"),
        }
    }
    if let Some(Ok(hello)) = &read {
        // The reader stops at the end of the ClientHello; a whole-record parse of exactly
        // what it consumed must find the same message.
        check_fingerprints(hello);
    }
    if let Ok(hello) = &whole {
        check_fingerprints(hello);
        if let Some(Ok(from_reader)) = &read {
            assert_eq!(
                ja3(from_reader),
                ja3(hello),
                "reader and parse disagree on JA3"
            );
            assert_eq!(
                ja4(from_reader),
                ja4(hello),
                "reader and parse disagree on JA4"
            );
        }
    }
}

fn check_fingerprints(hello: &ClientHello) {
    let ja3 = ja3(hello);
    let fields: Vec<&str> = ja3.string.split(',').collect();
    assert_eq!(fields.len(), 5, "JA3 string {:?}", ja3.string);
    assert!(
        !fields[0].is_empty() && fields[0].bytes().all(|b| b.is_ascii_digit()),
        "JA3 version {:?}",
        ja3.string
    );
    for field in &fields[1..] {
        if !field.is_empty() {
            assert!(
                field
                    .split('-')
                    .all(|v| v.parse::<u16>().is_ok_and(|n| n.to_string() == *v)),
                "JA3 field {field:?} of {:?}",
                ja3.string
            );
        }
    }
    let md5: String = Md5::digest(ja3.string.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(ja3.hash, md5, "JA3 hash of {:?}", ja3.string);

    let ja4 = ja4(hello);
    let b = ja4.as_bytes();
    let lower_hex = |s: &[u8]| s.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    assert_eq!(b.len(), 36, "JA4 {ja4:?}");
    assert_eq!(b[0], b't', "JA4 {ja4:?}");
    assert!(
        ["13", "12", "11", "10", "s3", "s2", "d1", "d2", "d3", "00"].contains(&&ja4[1..3]),
        "JA4 version {ja4:?}"
    );
    assert!(matches!(b[3], b'd' | b'i'), "JA4 SNI flag {ja4:?}");
    assert!(b[4..8].iter().all(u8::is_ascii_digit), "JA4 counts {ja4:?}");
    assert!(
        b[8..10].iter().all(u8::is_ascii_alphanumeric),
        "JA4 ALPN {ja4:?}"
    );
    assert!(b[10] == b'_' && b[23] == b'_', "JA4 separators {ja4:?}");
    assert!(
        lower_hex(&b[11..23]) && lower_hex(&b[24..36]),
        "JA4 hashes {ja4:?}"
    );

    // A rule naming both fingerprints validates and blocks a request that carries them.
    let body = serde_json::json!({
        "description": "fuzz", "active": true,
        "rule": {"action": {"block": true}, "scope": "tenant",
                 "match": {"ja3_fingerprints": [ja3.hash], "ja4_fingerprints": [ja4]}}
    });
    let limits = netacl_model::Limits::default();
    let spec = netacl_model::NetworkAclSpec::from_json(&body, &limits)
        .unwrap_or_else(|e| panic!("the edge's fingerprints are refused in a rule: {e}"));
    let records = Value::Array(vec![evaluator::record_json(&spec.to_json(), 1)]);
    let rules = netacl_model::RuleSet::from_json(&records, 1, &limits).expect("a stored record");
    let policy = netacl_eval::CompiledPolicy::compile(&rules).expect("compiles");
    let request = netacl_eval::Request::new(RequestScope::Authentication)
        .with_ja3(&ja3.hash)
        .with_ja4(&ja4);
    let outcome = policy.outcome(&policy.evaluate(&request));
    assert_eq!(
        outcome.action,
        netacl_eval::Verdict::Block,
        "a rule naming the fingerprints does not match them: {} {ja4}",
        ja3.hash
    );
}

/// The request-line reader of `netacl eval` ([`RequestInputRef::from_json_line`], a scanner
/// for the usual flat line in front of serde_json) against serde_json itself: the same value,
/// or both errors with the same message. A line read is turned into a request without panic.
pub fn request_line(data: &[u8]) {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let fast = RequestInputRef::from_json_line(line);
    let reference = serde_json::from_str::<RequestInputRef<'_>>(line);
    match (&fast, &reference) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "scanner and serde_json disagree on {line:?}"),
        (Err(a), Err(b)) => assert_eq!(
            a.to_string(),
            b.to_string(),
            "different errors for {line:?}"
        ),
        _ => panic!("scanner {fast:?} but serde_json {reference:?} for {line:?}"),
    }
    if let Ok(input) = fast {
        let _ = input.to_request();
    }
}

/// The trusted proxies of [`forwarded`]: IPv4 and IPv6 networks, loopback included.
const TRUSTED: [&str; 4] = ["10.0.0.0/8", "127.0.0.0/8", "2001:db8::/32", "::1/128"];

/// The forwarding-header walk ([`forwarded_client`], what the edge runs per request) over
/// arbitrary header lines (the input split at `\n`; the first byte picks the header and the
/// peer).
///
/// Never panics; from an untrusted peer the answer is the peer. (From a trusted one it may be
/// a trusted address: when every hop is trusted, the leftmost is the client; the fuzzer's first
/// finding, `regressions/forwarded/all-hops-trusted`, was this wrong property of ours.) And
/// whatever the client wrote, the entry a trusted proxy appends, in the
/// same line or a line of its own, decides: `203.0.113.5` here.
pub fn forwarded(data: &[u8]) {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let trusted = TrustedProxies::parse(TRUSTED).expect("valid networks");
    let header = if control & 1 == 0 {
        ForwardedHeader::XForwardedFor
    } else {
        ForwardedHeader::Forwarded
    };
    let peer: IpAddr = match (control >> 1) % 4 {
        0 => Ipv4Addr::new(10, 0, 0, 2).into(),
        1 => "2001:db8::2".parse().expect("address"),
        2 => "::ffff:127.0.0.1".parse().expect("address"),
        _ => Ipv4Addr::new(198, 51, 100, 4).into(),
    };
    let lines: Vec<&[u8]> = rest.split(|&b| b == b'\n').collect();
    let answer = forwarded_client(header, &trusted, peer, lines.iter().copied());
    let peer_trusted = (control >> 1) % 4 != 3;
    if !peer_trusted {
        assert_eq!(answer, Some(peer), "an untrusted peer's headers were read");
        return;
    }
    // The proxy's own entry after whatever the client sent.
    let client = Ipv4Addr::new(203, 0, 113, 5);
    let entry: &[u8] = if header == ForwardedHeader::Forwarded {
        b"for=203.0.113.5"
    } else {
        b"203.0.113.5"
    };
    let mut appended = lines.clone();
    let last = appended.pop().unwrap_or_default();
    let mut same_line = last.to_vec();
    same_line.extend_from_slice(b", ");
    same_line.extend_from_slice(entry);
    appended.push(&same_line);
    let answer = forwarded_client(header, &trusted, peer, appended.iter().copied());
    assert_eq!(
        answer,
        Some(client.into()),
        "the proxy's entry appended to {last:?} does not decide"
    );
    let mut own_line = lines.clone();
    own_line.push(entry);
    let answer = forwarded_client(header, &trusted, peer, own_line.iter().copied());
    assert_eq!(
        answer,
        Some(client.into()),
        "the proxy's line after {lines:?} does not decide"
    );
}

/// Path normalisation and scopes ([`normalize_path`], [`scope_of_path`], what the edge, `netacl
/// eval` and the dry run use): never panic; normalising twice equals normalising once; a path
/// refused by normalisation has no scope; the scope of a path equals the scope of its normal
/// form.
pub fn paths(data: &[u8]) {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    let scope = scope_of_path(path);
    let Ok(once) = normalize_path(path) else {
        assert!(
            scope.is_err(),
            "{path:?} is refused by normalisation but has a scope"
        );
        return;
    };
    let twice = normalize_path(&once);
    assert_eq!(
        twice.as_deref(),
        Ok(&*once),
        "normalising {path:?} twice differs from once"
    );
    if let Ok(scope) = scope {
        assert_eq!(
            scope_of_path(&once),
            Ok(scope),
            "{path:?} and its normal form {once:?} differ in scope"
        );
        assert_eq!(RequestScope::from_path(&once), scope);
    }
}

/// Addresses looked up in a database under test: IPv4, IPv6, mapped, and one from the input.
fn probe_addresses(data: &[u8]) -> [IpAddr; 5] {
    let mut tail = [0u8; 16];
    let n = data.len().min(16);
    tail[..n].copy_from_slice(&data[data.len() - n..]);
    [
        Ipv4Addr::new(198, 51, 100, 7).into(),
        Ipv4Addr::new(1, 2, 3, 4).into(),
        "2001:db8::1".parse().expect("address"),
        Ipv4Addr::new(203, 0, 113, 9).to_ipv6_mapped().into(),
        Ipv6Addr::from(tail).into(),
    ]
}

/// MaxMind database loading and lookups from arbitrary bytes ([`GeoEnricher::from_bytes`]:
/// the checks every database passes at start and on reload), as a location database and as an
/// ASN database: never panics, never hangs (libFuzzer's `-timeout`), and a database that loads
/// answers lookups.
pub fn maxmind(data: &[u8]) {
    let Ok(geo) = GeoEnricher::from_bytes(Some(data.to_vec()), Some(data.to_vec())) else {
        return;
    };
    for ip in probe_addresses(data) {
        let info = geo.lookup(ip, GeoNeeds::ALL);
        if let Some(country) = info.country_str() {
            assert!(
                country.len() == 2 && country.bytes().all(|b| b.is_ascii_uppercase()),
                "country {country:?}"
            );
        }
        // Twice: the second answer comes from the caches and must equal the first.
        assert_eq!(geo.lookup(ip, GeoNeeds::ALL), info, "cached answer differs");
    }
}

/// The admin server's form-body reader ([`form_body_to_json`], for every resource that takes
/// forms): never panics; a body it accepts nests at most [`MAX_NESTING_DEPTH`] levels; the value
/// then goes through the resource's validator without panic.
pub fn form_body(data: &[u8]) {
    for resource in FormResource::ALL {
        let Ok(value) = form_body_to_json(data, resource) else {
            continue;
        };
        let depth = nesting_depth(&value);
        assert!(
            depth <= MAX_NESTING_DEPTH,
            "{resource:?} form accepted at {depth} levels"
        );
        bodies::validate_all(&value);
    }
}

/// Levels of arrays and objects in `value` (`{}` is one), without recursion.
pub fn nesting_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((value, depth)) = stack.pop() {
        match value {
            Value::Array(items) => {
                deepest = deepest.max(depth + 1);
                stack.extend(items.iter().map(|v| (v, depth + 1)));
            }
            Value::Object(members) => {
                deepest = deepest.max(depth + 1);
                stack.extend(members.values().map(|v| (v, depth + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// The forward-auth door's reading of a request ([`read_facts`](netacl_doors::forward_auth::read_facts),
/// what `netacl edge --forward-auth-listen` runs per request) over arbitrary header lines: the
/// input's first byte says whether the peer is a trusted proxy (bit 0) and whether JA3 (bit 1)
/// and JA4 (bit 2) headers are configured (`x-ja3`, `x-ja4`); the rest, split at `\n`, is the
/// door request's own target, then `name:value` header lines (those no header holds are
/// skipped).
///
/// Never panics; a fact given twice is refused; what is read is an origin-form target, one
/// host at most (the decision's only `Host`), and fingerprints and the scheme (`http` or
/// `https`) only from a trusted peer.
pub fn forward_auth_facts(data: &[u8]) {
    use netacl_doors::forward_auth::{
        read_facts, FactsOptions, X_FORWARDED_HOST, X_FORWARDED_METHOD, X_FORWARDED_PROTO,
        X_FORWARDED_URI, X_ORIGINAL_METHOD, X_ORIGINAL_URI,
    };
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let trusted = control & 1 == 1;
    let mut options = FactsOptions::default();
    if control & 2 != 0 {
        options.ja3_header = Some(http::HeaderName::from_static("x-ja3"));
    }
    if control & 4 != 0 {
        options.ja4_header = Some(http::HeaderName::from_static("x-ja4"));
    }
    let mut lines = rest.split(|&b| b == b'\n');
    let own = lines
        .next()
        .and_then(|t| http::Uri::try_from(t).ok())
        .unwrap_or_else(|| http::Uri::from_static("/"));
    let mut headers = http::HeaderMap::new();
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name),
            http::HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    let facts = read_facts(&http::Method::GET, &own, &headers, &options, trusted);
    let repeated = [
        &X_FORWARDED_METHOD,
        &X_ORIGINAL_METHOD,
        &X_FORWARDED_URI,
        &X_ORIGINAL_URI,
        &X_FORWARDED_HOST,
        &X_FORWARDED_PROTO,
        &http::header::HOST,
    ]
    .iter()
    .any(|name| headers.get_all(*name).iter().count() > 1);
    let facts = match facts {
        Ok(facts) => facts,
        Err(_) => return,
    };
    assert!(!repeated, "a fact given twice was read: {headers:?}");
    assert!(
        facts.uri.scheme().is_none() && facts.uri.authority().is_none(),
        "not origin-form: {}",
        facts.uri
    );
    assert!(facts.uri.path().starts_with('/'), "{}", facts.uri);
    assert!(
        trusted || facts.tls.is_none(),
        "fingerprints from an untrusted peer"
    );
    assert!(
        trusted || facts.scheme.is_none(),
        "a scheme from an untrusted peer"
    );
    assert!(
        matches!(facts.scheme, None | Some("http" | "https")),
        "{:?}",
        facts.scheme
    );
    let decided = facts.decision_headers(headers);
    let hosts: Vec<_> = decided.get_all(http::header::HOST).iter().collect();
    assert!(hosts.len() <= 1, "{hosts:?}");
    assert_eq!(hosts.first().copied(), facts.host.as_ref());
    let _ = facts.connection("127.0.0.1:1".parse().expect("address"));
}

/// The SPOE agent's reading of what HAProxy sends: the bytes are a connection's stream of SPOP
/// frames, cut into reads of as many bytes as the first byte says (0: all at once).
///
/// Never panics; a frame is returned only whole and within the negotiated size (here 1,024
/// bytes); after a refusal nothing more is read (the agent disconnects); every NOTIFY's
/// `netacl-request` message either gives a request whose client is the message's `src`, or an
/// error (never a request with another client).
pub fn spoe_frames(data: &[u8]) {
    use netacl_doors::spoe::{decode_frame, SpoeRequest, MESSAGE_NAME};
    use spop::{FramePayload, SpopCodec, TypedData};
    let Some((&cut, stream)) = data.split_first() else {
        return;
    };
    let step = if cut == 0 {
        stream.len().max(1)
    } else {
        usize::from(cut)
    };
    let mut codec = SpopCodec::new(1024);
    let mut read = bytes::BytesMut::new();
    for chunk in stream.chunks(step) {
        read.extend_from_slice(chunk);
        loop {
            let before = read.len();
            match decode_frame(&mut read, &mut codec) {
                Err(_) => return,
                Ok(None) => break,
                Ok(Some(frame)) => {
                    let used = before - read.len();
                    assert!(
                        used <= 1024 + 4,
                        "a frame of {used} bytes passed a 1,024-byte limit"
                    );
                    let FramePayload::ListOfMessages(messages) = frame.payload() else {
                        continue;
                    };
                    for message in messages.iter().filter(|m| m.name == MESSAGE_NAME) {
                        if let Ok(request) = SpoeRequest::from_message(message) {
                            let src = match message.get("src") {
                                Some(TypedData::IPv4(ip)) => IpAddr::V4(*ip),
                                Some(TypedData::IPv6(ip)) => IpAddr::V6(*ip),
                                other => panic!("a request from a message whose src is {other:?}"),
                            };
                            assert_eq!(request.conn.peer.ip(), src);
                        }
                    }
                }
            }
        }
    }
}

/// The ext_authz service's reading of Envoy's `CheckRequest`: the bytes are a protobuf message as
/// it arrives in a gRPC frame.
///
/// Never panics; a request that decodes either gives facts whose client is the request's
/// `attributes.source.address` (parsed as an IP address) or is refused (`INVALID_ARGUMENT`).
pub fn check_request(data: &[u8]) {
    use envoy_types::ext_authz::v3::pb::{Address, CheckRequest};
    use netacl_doors::ext_authz::CheckFacts;
    use prost::Message as _;
    let Ok(request) = CheckRequest::decode(data) else {
        return;
    };
    if let Ok(facts) = CheckFacts::from_check(&request) {
        let source = request
            .attributes
            .as_ref()
            .and_then(|a| a.source.as_ref())
            .and_then(|p| p.address.as_ref())
            .and_then(|a| a.address.as_ref());
        let Some(Address::SocketAddress(socket)) = source else {
            panic!("facts from a CheckRequest without a socket address");
        };
        let ip: IpAddr = socket.address.parse().expect("the facts' source parsed");
        assert_eq!(facts.client, ip);
        assert!(facts.uri.path().starts_with('/'));
    }
}
