//! The request an SPOE message describes: its arguments read by name, checked, and turned into
//! what the edge decides with.
use std::net::{IpAddr, SocketAddr};

use http::{Method, Uri};
use netacl_edge::fingerprint::ja3_from_parts;
use netacl_edge::{ConnectionInfo, HeaderLookup, RequestFacts, TlsFacts, TlsInfo};
use spop::frame::Message;
use spop::TypedData;

use crate::door::{resolved_client_facts, valid_header_value};

/// The name of the message the agent decides on (`spoe-message netacl-request` in the shipped
/// SPOE file). Other messages in a NOTIFY are acknowledged with no action.
pub const MESSAGE_NAME: &str = "netacl-request";

/// Why a message cannot be decided: HAProxy's configuration does not send what the agent needs,
/// or sends it with the wrong type. The agent answers with a DISCONNECT carrying the reason
/// (status "invalid frame received"), never with an allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// A required argument is absent.
    #[error("message {MESSAGE_NAME} has no argument `{0}`")]
    Missing(&'static str),
    /// An argument has a type the agent does not read for it.
    #[error("argument `{name}` of message {MESSAGE_NAME}: expected {expected}")]
    WrongType {
        /// The argument.
        name: &'static str,
        /// What the agent reads for it.
        expected: &'static str,
    },
    /// The method, path or host is not what an HTTP request can carry.
    #[error("argument `{name}` of message {MESSAGE_NAME}: {reason}")]
    Invalid {
        /// The argument.
        name: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// One request as the edge's decision takes it, borrowing from the message (nothing is copied
/// but the request target, parsed once, and the TLS facts): the client as the connection's
/// peer (HAProxy's `src`, already the client: HAProxy resolved its own trusted hops, and no
/// forwarding header is passed on to be believed), the method, the path with its query, and
/// the header values the rules read (host, user agent, and an RFC 9421 signature's fields when
/// HAProxy sends them).
#[derive(Debug)]
pub struct SpoeRequest<'m> {
    /// The client, with the TLS facts when HAProxy terminated TLS.
    pub conn: ConnectionInfo,
    /// The request method.
    pub method: Method,
    /// The path and query.
    pub uri: Uri,
    /// The `Host` header, when HAProxy sends a non-empty one.
    pub host: Option<&'m str>,
    /// The `User-Agent` header (`ua`).
    pub user_agent: Option<&'m str>,
    /// The `Signature` header (`signature`).
    pub signature: Option<&'m str>,
    /// The `Signature-Input` header (`signature_input`).
    pub signature_input: Option<&'m str>,
    /// The scheme from HAProxy's `ssl_fc` (`ssl`: true is `https`, false `http`); absent: the
    /// TLS facts decide.
    pub scheme: Option<&'static str>,
}

/// The message's header values as the edge's header lookup, for an RFC 9421 signature's
/// components: `host`, `user-agent`, `signature` and `signature-input` (a signature covering
/// another field does not verify through HAProxy, whose message does not carry it).
impl HeaderLookup for SpoeRequest<'_> {
    fn each_value(&self, name: &str, value: &mut dyn FnMut(&[u8])) {
        let field = match name {
            "host" => self.host,
            "user-agent" => self.user_agent,
            "signature" => self.signature,
            "signature-input" => self.signature_input,
            _ => None,
        };
        if let Some(v) = field {
            value(v.as_bytes());
        }
    }
}

/// The arguments of the shipped `spoe-message netacl-request`, with the type HAProxy sends each
/// in: `src` (IPv4/IPv6), `method`, `host` and `path` (strings; `path` from HAProxy's `pathq`,
/// with the query), optional `ua`, `signature`, `signature_input`, `ssl` (a boolean, HAProxy's
/// `ssl_fc`), and the TLS facts (`sni`,
/// `hello_version` from `ssl_fc_protocol_hello_id`, and the binary lists `ciphers`,
/// `extensions`, `groups` (`ssl_fc_cipherlist_bin(1)`, `ssl_fc_extlist_bin(1)`,
/// `ssl_fc_eclist_bin(1)`: 16-bit values, big-endian) and `point_formats`
/// (`ssl_fc_ecformats_bin`: one byte each)).
impl<'m> SpoeRequest<'m> {
    /// Reads the message. A TLS fact that HAProxy sends empty (the connection was not TLS,
    /// or `tune.ssl.capture-buffer-size` is 0) leaves the TLS signals missing. The host, user
    /// agent and signature fields must be valid header values (no control character but tab).
    pub fn from_message(message: &'m Message) -> Result<Self, MessageError> {
        let src = match message.get("src") {
            Some(TypedData::IPv4(ip)) => IpAddr::V4(*ip),
            Some(TypedData::IPv6(ip)) => IpAddr::V6(*ip),
            Some(_) => {
                return Err(MessageError::WrongType {
                    name: "src",
                    expected: "an IPv4 or IPv6 address",
                })
            }
            None => return Err(MessageError::Missing("src")),
        };
        let method = required_str(message, "method")?;
        let method = Method::from_bytes(method.as_bytes()).map_err(|_| MessageError::Invalid {
            name: "method",
            reason: "not an HTTP method token",
        })?;
        let path = required_str(message, "path")?;
        if !path.starts_with('/') {
            return Err(MessageError::Invalid {
                name: "path",
                reason: "not an origin-form path (it must start with /)",
            });
        }
        let uri = Uri::try_from(path).map_err(|_| MessageError::Invalid {
            name: "path",
            reason: "not a valid request target",
        })?;
        let host = header_value("host", required_str(message, "host")?)?;
        let mut conn = ConnectionInfo::new(SocketAddr::new(src, 0));
        if let Some(tls) = tls_info(message)? {
            conn = conn.with_tls(tls);
        }
        Ok(Self {
            conn,
            method,
            uri,
            host: Some(host).filter(|h| !h.is_empty()),
            user_agent: optional_header(message, "ua")?,
            signature: optional_header(message, "signature")?,
            signature_input: optional_header(message, "signature_input")?,
            scheme: match message.get("ssl") {
                None | Some(TypedData::Null) => None,
                Some(TypedData::Bool(true)) => Some("https"),
                Some(TypedData::Bool(false)) => Some("http"),
                Some(_) => {
                    return Err(MessageError::WrongType {
                        name: "ssl",
                        expected: "a boolean",
                    })
                }
            },
        })
    }

    /// The facts the edge decides with: the client as given (no forwarding walk: the message
    /// carries no forwarding header), the host and user agent as the edge reads those headers
    /// (a host that is not visible ASCII is unclear, a user agent that is not is absent), the
    /// method, path and query, and the TLS facts.
    pub fn request_facts(&self) -> RequestFacts<'_> {
        let mut facts = resolved_client_facts(
            self.conn.peer.ip(),
            &self.method,
            &self.uri,
            self.host,
            self.user_agent,
            self,
        )
        .with_scheme(self.scheme);
        if let Some(tls) = self.conn.tls.as_deref() {
            facts = facts.with_tls(TlsFacts::from(tls));
        }
        facts
    }
}

/// The TLS signals: the SNI and the JA3 of the ClientHello's parts. JA4 is left empty: it
/// needs the offered ALPN list and the signature algorithms, which HAProxy 2.6 does not expose.
fn tls_info(message: &Message) -> Result<Option<TlsInfo>, MessageError> {
    let sni = optional_str(message, "sni")?.filter(|s| !s.is_empty());
    let version = match message.get("hello_version") {
        None | Some(TypedData::Null) => None,
        Some(TypedData::Int32(v)) => u16::try_from(*v).ok(),
        Some(TypedData::UInt32(v)) => u16::try_from(*v).ok(),
        Some(TypedData::Int64(v)) => u16::try_from(*v).ok(),
        Some(TypedData::UInt64(v)) => u16::try_from(*v).ok(),
        Some(_) => {
            return Err(MessageError::WrongType {
                name: "hello_version",
                expected: "an integer",
            })
        }
    };
    let ciphers = optional_bin(message, "ciphers")?;
    let Some(version) = version.filter(|v| *v != 0) else {
        // Not TLS (HAProxy sends nothing for a plain connection), or no capture.
        return Ok(sni.map(|s| TlsInfo::new(Some(s), "", "")));
    };
    let Some(ciphers) = ciphers.filter(|c| !c.is_empty()) else {
        return Ok(sni.map(|s| TlsInfo::new(Some(s), "", "")));
    };
    let ciphers = be_u16_list("ciphers", ciphers)?;
    let extensions = be_u16_list(
        "extensions",
        optional_bin(message, "extensions")?.unwrap_or(&[]),
    )?;
    let groups = be_u16_list("groups", optional_bin(message, "groups")?.unwrap_or(&[]))?;
    let formats = optional_bin(message, "point_formats")?.unwrap_or(&[]);
    let ja3 = ja3_from_parts(version, &ciphers, &extensions, &groups, formats);
    Ok(Some(TlsInfo::new(sni, &ja3.hash, "")))
}

fn required_str<'m>(message: &'m Message, name: &'static str) -> Result<&'m str, MessageError> {
    optional_str(message, name)?.ok_or(MessageError::Missing(name))
}

fn optional_str<'m>(
    message: &'m Message,
    name: &'static str,
) -> Result<Option<&'m str>, MessageError> {
    match message.get(name) {
        None | Some(TypedData::Null) => Ok(None),
        Some(TypedData::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(MessageError::WrongType {
            name,
            expected: "a string",
        }),
    }
}

fn optional_bin<'m>(
    message: &'m Message,
    name: &'static str,
) -> Result<Option<&'m [u8]>, MessageError> {
    match message.get(name) {
        None | Some(TypedData::Null) => Ok(None),
        Some(TypedData::Binary(b)) => Ok(Some(b.as_slice())),
        // HAProxy sends an empty fetch result as an empty string.
        Some(TypedData::String(s)) if s.is_empty() => Ok(None),
        Some(_) => Err(MessageError::WrongType {
            name,
            expected: "binary",
        }),
    }
}

fn be_u16_list(name: &'static str, bytes: &[u8]) -> Result<Vec<u16>, MessageError> {
    if !bytes.len().is_multiple_of(2) {
        return Err(MessageError::Invalid {
            name,
            reason: "a list of 16-bit values has an odd length",
        });
    }
    Ok(bytes
        .chunks_exact(2)
        .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
        .collect())
}

/// `value` when it can be sent as a header value, else the error naming the argument.
fn header_value<'m>(name: &'static str, value: &'m str) -> Result<&'m str, MessageError> {
    if valid_header_value(value) {
        Ok(value)
    } else {
        Err(MessageError::Invalid {
            name,
            reason: "not a valid header value",
        })
    }
}

fn optional_header<'m>(
    message: &'m Message,
    name: &'static str,
) -> Result<Option<&'m str>, MessageError> {
    optional_str(message, name)?
        .map(|v| header_value(name, v))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn message(args: Vec<(&str, TypedData)>) -> Message {
        Message {
            name: MESSAGE_NAME.to_string(),
            args: args.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        }
    }

    fn s(v: &str) -> TypedData {
        TypedData::String(v.to_string())
    }

    fn plain() -> Vec<(&'static str, TypedData)> {
        vec![
            ("src", TypedData::IPv4(Ipv4Addr::new(192, 0, 2, 7))),
            ("method", s("GET")),
            ("host", s("app.example.test")),
            ("path", s("/authorize?x=1")),
            ("ua", s("curl/8")),
        ]
    }

    #[test]
    fn a_plain_request_reads_its_client_path_and_headers() {
        let m = message(plain());
        let r = SpoeRequest::from_message(&m).unwrap();
        assert_eq!(r.conn.peer.ip(), "192.0.2.7".parse::<IpAddr>().unwrap());
        assert!(r.conn.tls.is_none());
        assert_eq!(r.method, Method::GET);
        assert_eq!(r.uri.path(), "/authorize");
        assert_eq!(r.uri.query(), Some("x=1"));
        assert_eq!(r.host, Some("app.example.test"));
        assert_eq!(r.user_agent, Some("curl/8"));
        let facts = r.request_facts();
        let client = Some("192.0.2.7".parse::<IpAddr>().unwrap());
        assert_eq!(facts.client_ip(), client);
        assert_eq!(facts.host.named(), Some("app.example.test"));
        assert_eq!(facts.method, Some("GET"));
        assert_eq!((facts.path, facts.query), ("/authorize", Some("x=1")));
        assert_eq!(facts.user_agent, Some("curl/8"));
        assert!(facts.tls.is_none());
        let mut seen = Vec::new();
        facts
            .headers
            .each_value("user-agent", &mut |v| seen.push(v.to_vec()));
        facts
            .headers
            .each_value("x-forwarded-for", &mut |v| seen.push(v.to_vec()));
        assert_eq!(seen, [b"curl/8".to_vec()]);
    }

    #[test]
    fn headers_are_read_as_the_edge_reads_them() {
        // An IPv4-mapped client is the IPv4 address; a host that is not visible ASCII is
        // unclear; a user agent that is not is absent; an empty host is none.
        let mut args = plain();
        args[0].1 = TypedData::IPv6("::ffff:192.0.2.7".parse().unwrap());
        args[2].1 = s("caf\u{e9}.example.test");
        args[4].1 = s("agent \u{e9}");
        let m = message(args);
        let r = SpoeRequest::from_message(&m).unwrap();
        let facts = r.request_facts();
        assert_eq!(facts.client_ip(), Some("192.0.2.7".parse().unwrap()));
        assert_eq!(facts.host.header, None);
        assert!(facts.host.unclear);
        assert_eq!(facts.user_agent, None);
        let mut args = plain();
        args[2].1 = s("");
        let m = message(args);
        let r = SpoeRequest::from_message(&m).unwrap();
        assert_eq!(r.host, None);
        assert!(!r.request_facts().host.unclear);
        for (i, name) in [(2, "host"), (4, "ua")] {
            let mut args = plain();
            args[i].1 = s("a\r\nb");
            assert_eq!(
                SpoeRequest::from_message(&message(args)).unwrap_err(),
                MessageError::Invalid {
                    name,
                    reason: "not a valid header value"
                }
            );
        }
    }

    #[test]
    fn missing_or_mistyped_arguments_are_errors_not_allows() {
        let mut args = plain();
        args.retain(|(k, _)| *k != "src");
        assert_eq!(
            SpoeRequest::from_message(&message(args)).unwrap_err(),
            MessageError::Missing("src")
        );
        let mut args = plain();
        args[0].1 = s("192.0.2.7");
        assert!(matches!(
            SpoeRequest::from_message(&message(args)).unwrap_err(),
            MessageError::WrongType { name: "src", .. }
        ));
        let mut args = plain();
        args[3].1 = s("authorize");
        assert!(matches!(
            SpoeRequest::from_message(&message(args)).unwrap_err(),
            MessageError::Invalid { name: "path", .. }
        ));
        let mut args = plain();
        args[1].1 = s("GE T");
        assert!(matches!(
            SpoeRequest::from_message(&message(args)).unwrap_err(),
            MessageError::Invalid { name: "method", .. }
        ));
        let mut args = plain();
        args.push(("ciphers", TypedData::Binary(vec![0x13])));
        args.push(("hello_version", TypedData::UInt32(0x0303)));
        assert!(matches!(
            SpoeRequest::from_message(&message(args)).unwrap_err(),
            MessageError::Invalid {
                name: "ciphers",
                ..
            }
        ));
    }

    #[test]
    fn the_ja3_of_haproxys_parts_is_the_ja3_of_the_hello() {
        // Version 771, ciphers 4865-4866, extensions 0-10-11, groups 29-23, formats 0.
        let mut args = plain();
        args.extend([
            ("sni", s("App.Example.Test")),
            ("hello_version", TypedData::Int32(771)),
            ("ciphers", TypedData::Binary(vec![0x13, 0x01, 0x13, 0x02])),
            (
                "extensions",
                TypedData::Binary(vec![0x00, 0x00, 0x00, 0x0a, 0x00, 0x0b]),
            ),
            ("groups", TypedData::Binary(vec![0x00, 0x1d, 0x00, 0x17])),
            ("point_formats", TypedData::Binary(vec![0x00])),
        ]);
        let m = message(args);
        let r = SpoeRequest::from_message(&m).unwrap();
        let tls = r.conn.tls.as_deref().unwrap();
        assert_eq!(tls.sni.as_deref(), Some("app.example.test"));
        let expected = ja3_from_parts(771, &[4865, 4866], &[0, 10, 11], &[29, 23], &[0]);
        assert_eq!(expected.string, "771,4865-4866,0-10-11,29-23,0");
        assert_eq!(tls.ja3, expected.hash);
        assert_eq!(tls.ja4, "");
    }

    /// A block for every request not signed with the tenant's proxy key (RFC 9421): the
    /// message's `signature`, `signature_input`, `host` and `ssl` are what the edge verifies.
    #[test]
    fn a_signature_in_the_message_is_verified_as_the_edge_verifies_it() {
        use crate::signing_fixture::{enforcer, Signed, MATERIAL};
        use netacl_edge::AclVerdict;

        let enforcer = enforcer(&[]);
        let signed = |material: &[u8], authority: &str, scheme: Option<&str>| {
            Signed {
                material,
                method: "GET",
                authority,
                path: "/authorize",
                scheme,
            }
            .fields()
        };
        let verdict = |fields: Option<(String, String)>, ssl: Option<bool>| {
            let mut args = plain();
            if let Some((input, signature)) = fields {
                args.push(("signature", s(&signature)));
                args.push(("signature_input", s(&input)));
            }
            if let Some(ssl) = ssl {
                args.push(("ssl", TypedData::Bool(ssl)));
            }
            let m = message(args);
            let request = SpoeRequest::from_message(&m).unwrap();
            enforcer.decide_facts(&request.request_facts()).verdict
        };
        let host = "app.example.test";
        assert_eq!(
            verdict(Some(signed(&MATERIAL, host, None)), None),
            AclVerdict::None
        );
        assert_eq!(verdict(None, None), AclVerdict::Block);
        assert_eq!(
            verdict(Some(signed(&[8; 32], host, None)), None),
            AclVerdict::Block
        );
        assert_eq!(
            verdict(Some(signed(&MATERIAL, "other.example.test", None)), None),
            AclVerdict::Block,
            "the signature covers the host the message names"
        );
        // `@scheme`: HAProxy's `ssl_fc` says which; without it, no TLS facts is `http`.
        let https = Some(signed(&MATERIAL, host, Some("https")));
        assert_eq!(verdict(https.clone(), Some(true)), AclVerdict::None);
        assert_eq!(verdict(https.clone(), Some(false)), AclVerdict::Block);
        assert_eq!(verdict(https, None), AclVerdict::Block);
        let http = Some(signed(&MATERIAL, host, Some("http")));
        assert_eq!(verdict(http, None), AclVerdict::None);
    }

    #[test]
    fn ssl_must_be_a_boolean() {
        let mut args = plain();
        args.push(("ssl", s("1")));
        assert_eq!(
            SpoeRequest::from_message(&message(args)).unwrap_err(),
            MessageError::WrongType {
                name: "ssl",
                expected: "a boolean"
            }
        );
    }
}
