//! TLS client fingerprints: JA3 and JA4 from the ClientHello a client sends.
//!
//! The pipeline: bytes from the socket → [`ClientHelloReader`] (incremental, size-capped) or
//! [`ClientHello::parse`] (whole records) → [`ClientHello`] → [`ja3`] / [`ja4`].
//! [`read_client_hello`] does the socket part for a proxy: it reads the ClientHello from a
//! stream, under a byte cap and a time cap, and hands back the bytes it consumed so that they
//! can be replayed to the TLS library through [`Rewind`].
//!
//! ```
//! use netacl_edge::fingerprint::{ja3, ja4, ClientHello};
//!
//! // A TLS 1.2 ClientHello: one cipher suite (0x002f), SNI "example.com", ALPN "h2".
//! let record = hex::decode(concat!(
//!     "160301004c", "01000048", "0303", "00000000000000000000000000000000",
//!     "00000000000000000000000000000000", "00", "0002002f", "0100",
//!     "001d", "00000010000e00000b6578616d706c652e636f6d", "00100005000302", "6832",
//! )).unwrap();
//! let hello = ClientHello::parse(&record).unwrap();
//! assert_eq!(hello.server_name(), Some("example.com"));
//! assert_eq!(ja3(&hello).string, "771,47,0-16,,");
//! assert_eq!(&ja4(&hello)[..10], "t12d0102h2");
//! ```
//!
//! # Untrusted input
//!
//! The parser reads every field through bounds-checked accessors and never indexes past the
//! input; it allocates only after a length has been checked against a cap (records ≤ 16 KiB,
//! the handshake message ≤ [`MAX_HANDSHAKE_LEN`]). No input makes it panic (property-tested).

mod hello;
mod reader;

pub use hello::{is_grease, ClientHello, Extension, MAX_HANDSHAKE_LEN, MAX_RECORD_LEN};
pub use reader::{
    read_client_hello, ClientHelloReader, Progress, ReadHelloError, ReadHelloFailure, Rewind,
    DEFAULT_MAX_HELLO_BYTES,
};

use std::fmt::Write as _;

use md5::{Digest as _, Md5};
use sha2::Sha256;

use hello::ext;

/// Why bytes are not a ClientHello.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The input ended before the ClientHello did.
    #[error("the input ends before the ClientHello is complete")]
    Incomplete,
    /// A record is not a handshake record (content type 22).
    #[error("not a TLS handshake record (content type {content_type})")]
    NotHandshake {
        /// The content type found.
        content_type: u8,
    },
    /// An SSL 2.0-compatible hello, which carries no extensions to fingerprint.
    #[error("SSL 2.0-style ClientHello is not supported")]
    Sslv2Unsupported,
    /// A record header's protocol version does not have major version 3 (SSL 3.0 to TLS 1.3).
    #[error("unsupported record version {version:#06x}")]
    UnsupportedRecordVersion {
        /// The version found.
        version: u16,
    },
    /// A record is longer than TLS allows.
    #[error("TLS record of {len} bytes exceeds the limit of {max}")]
    RecordTooLong {
        /// The declared length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The first handshake message is not a ClientHello.
    #[error("handshake message type {handshake_type} is not a ClientHello")]
    NotClientHello {
        /// The handshake type found.
        handshake_type: u8,
    },
    /// The ClientHello is longer than the cap.
    #[error("ClientHello of {len} bytes exceeds the limit of {max}")]
    HandshakeTooLong {
        /// The declared length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// More bytes arrived than the reader's cap without a complete ClientHello.
    #[error("no complete ClientHello within {max} bytes")]
    TooManyBytes {
        /// The cap.
        max: usize,
    },
    /// A field's length or content is inconsistent.
    #[error("malformed ClientHello: {field}")]
    Malformed {
        /// The field that is wrong.
        field: &'static str,
    },
    /// The server_name extension carries a name that is not printable ASCII.
    #[error("malformed ClientHello: server name is not a printable ASCII host name")]
    InvalidServerName,
    /// [`ClientHelloReader::push`] was called after the reader finished.
    #[error("the ClientHello reader has already finished")]
    ReaderFinished,
}

/// A JA3 fingerprint: the comma-separated string and its MD5.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ja3 {
    /// `SSLVersion,Ciphers,Extensions,EllipticCurves,EllipticCurvePointFormats`, values in
    /// decimal joined by `-`, GREASE removed.
    pub string: String,
    /// The MD5 of `string`, 32 lowercase hex digits: the value rules match on.
    pub hash: String,
}

/// Computes the JA3 fingerprint (Salesforce's definition) of a ClientHello.
///
/// The version is the ClientHello's `legacy_version`; ciphers, extensions and elliptic curves
/// (supported_groups) keep the client's order without GREASE values; point formats are kept as
/// sent. An absent extension gives an empty field.
pub fn ja3(hello: &ClientHello) -> Ja3 {
    let extensions: Vec<u16> = hello.extensions().iter().map(Extension::kind).collect();
    ja3_from_parts(
        hello.legacy_version(),
        hello.cipher_suites(),
        &extensions,
        hello.supported_groups(),
        hello.ec_point_formats(),
    )
}

/// The JA3 fingerprint of a ClientHello given as its parts, for a proxy that hands them over
/// already parsed (HAProxy's `ssl_fc_protocol_hello_id`, `ssl_fc_cipherlist_bin`,
/// `ssl_fc_extlist_bin`, `ssl_fc_eclist_bin` and `ssl_fc_ecformats_bin`): the same string and
/// hash as [`ja3`] of the ClientHello they came from. GREASE values are dropped here whether
/// or not the proxy dropped them.
pub fn ja3_from_parts(
    version: u16,
    ciphers: &[u16],
    extensions: &[u16],
    groups: &[u16],
    point_formats: &[u8],
) -> Ja3 {
    let mut string = String::with_capacity(256);
    let _ = write!(string, "{version},");
    join_decimal(&mut string, ciphers.iter().copied());
    string.push(',');
    join_decimal(&mut string, extensions.iter().copied());
    string.push(',');
    join_decimal(&mut string, groups.iter().copied());
    string.push(',');
    join_decimal(&mut string, point_formats.iter().map(|&f| u16::from(f)));
    let hash = hex::encode(Md5::digest(string.as_bytes()));
    Ja3 { string, hash }
}

fn join_decimal(out: &mut String, values: impl Iterator<Item = u16>) {
    let mut first = true;
    for value in values.filter(|v| !is_grease(*v)) {
        if !first {
            out.push('-');
        }
        first = false;
        let _ = write!(out, "{value}");
    }
}

/// Computes the JA4 fingerprint (FoxIO's JA4 specification, TLS over TCP) of a ClientHello,
/// e.g. `t13d1516h2_8daaf6152771_e5627efa2ab1`.
///
/// - `t`, then the version: the highest non-GREASE value of supported_versions when the
///   extension is present, else `legacy_version` (`13`, `12`, `11`, `10`, `s3`, `s2`, `d1`,
///   `d2`, `d3`, otherwise `00`);
/// - `d` when the server_name extension is present, else `i`;
/// - the number of cipher suites and of extensions (SNI and ALPN included), GREASE excluded,
///   two digits, capped at 99;
/// - the first and last characters of the first ALPN value (`00` when there is none or it is
///   empty); when either of those bytes is not an ASCII letter or digit, the first and last hex
///   digits of the value instead;
/// - `_`, the first 12 hex digits of the SHA-256 of the sorted cipher suites (4-digit lowercase
///   hex, comma-joined), or `000000000000` when there are none;
/// - `_`, the first 12 hex digits of the SHA-256 of the sorted extensions without SNI and ALPN,
///   then `_` and the signature algorithms in the client's order (the `_` part only when there
///   are signature algorithms), or `000000000000` when the sorted extension list is empty.
pub fn ja4(hello: &ClientHello) -> String {
    let mut out = String::with_capacity(36);
    out.push('t');
    out.push_str(version_code(hello.highest_version()));
    out.push(if hello.has_extension(ext::SERVER_NAME) {
        'd'
    } else {
        'i'
    });
    let ciphers: Vec<u16> = hello
        .cipher_suites()
        .iter()
        .copied()
        .filter(|v| !is_grease(*v))
        .collect();
    let extensions: Vec<u16> = hello
        .extensions()
        .iter()
        .map(Extension::kind)
        .filter(|v| !is_grease(*v))
        .collect();
    let _ = write!(
        out,
        "{:02}{:02}",
        ciphers.len().min(99),
        extensions.len().min(99)
    );
    push_alpn(&mut out, hello);

    out.push('_');
    let mut sorted_ciphers = ciphers;
    sorted_ciphers.sort_unstable();
    push_truncated_sha256(
        &mut out,
        &hex_list(&sorted_ciphers),
        sorted_ciphers.is_empty(),
    );

    out.push('_');
    let mut sorted_extensions: Vec<u16> = extensions
        .into_iter()
        .filter(|&e| e != ext::SERVER_NAME && e != ext::ALPN)
        .collect();
    sorted_extensions.sort_unstable();
    let mut input = hex_list(&sorted_extensions);
    let signature_algorithms: Vec<u16> = hello
        .signature_algorithms()
        .iter()
        .copied()
        .filter(|v| !is_grease(*v))
        .collect();
    if !signature_algorithms.is_empty() {
        input.push('_');
        input.push_str(&hex_list(&signature_algorithms));
    }
    push_truncated_sha256(&mut out, &input, sorted_extensions.is_empty());
    out
}

fn version_code(version: u16) -> &'static str {
    match version {
        0x0304 => "13",
        0x0303 => "12",
        0x0302 => "11",
        0x0301 => "10",
        0x0300 => "s3",
        0x0002 => "s2",
        0xfeff => "d1",
        0xfefd => "d2",
        0xfefc => "d3",
        _ => "00",
    }
}

fn push_alpn(out: &mut String, hello: &ClientHello) {
    let first = if hello.has_extension(ext::ALPN) {
        hello.alpn_protocols().first()
    } else {
        None
    };
    let (Some(&head), Some(&tail)) = (first.and_then(|v| v.first()), first.and_then(|v| v.last()))
    else {
        out.push_str("00");
        return;
    };
    if head.is_ascii_alphanumeric() && tail.is_ascii_alphanumeric() {
        out.push(char::from(head));
        out.push(char::from(tail));
    } else {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        out.push(char::from(HEX[usize::from(head >> 4)]));
        out.push(char::from(HEX[usize::from(tail & 0x0f)]));
    }
}

fn hex_list(values: &[u16]) -> String {
    let mut out = String::with_capacity(values.len() * 5);
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{value:04x}");
    }
    out
}

fn push_truncated_sha256(out: &mut String, input: &str, empty: bool) {
    if empty {
        out.push_str("000000000000");
    } else {
        let digest = Sha256::digest(input.as_bytes());
        out.push_str(&hex::encode(&digest[..6]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpn_rule_follows_the_specification_examples() {
        let cases: &[(&[u8], &str)] = &[
            (b"h2", "h2"),
            (b"http/1.1", "h1"),
            (b"h", "hh"),
            (&[0xab], "ab"),
            (&[0xab, 0xcd], "ad"),
            (&[0x30, 0xab], "3b"),
            (&[0x30, 0x31, 0xab, 0xcd], "3d"),
            (&[0x30, 0xab, 0xcd, 0x31], "01"),
        ];
        for (value, expected) in cases {
            let mut alpn = vec![0, 0];
            alpn.push(u8::try_from(value.len()).unwrap());
            alpn.extend_from_slice(value);
            let list_len = u16::try_from(alpn.len() - 2).unwrap().to_be_bytes();
            alpn[..2].copy_from_slice(&list_len);
            let hello = tests_support::hello_with_extensions(&[(0x0010, alpn)]);
            let mut out = String::new();
            push_alpn(&mut out, &hello);
            assert_eq!(&out, expected, "ALPN value {value:02x?}");
        }
    }

    #[test]
    fn specification_example_hashes() {
        let extensions = [
            0x001b, 0x0000, 0x0033, 0x0010, 0x4469, 0x0017, 0x002d, 0x000d, 0x0005, 0x0023, 0x0012,
            0x002b, 0xff01, 0x000b, 0x000a, 0x0015,
        ];
        let mut sorted: Vec<u16> = extensions
            .into_iter()
            .filter(|&e| e != 0 && e != 0x10)
            .collect();
        sorted.sort_unstable();
        let mut out = String::new();
        push_truncated_sha256(&mut out, &hex_list(&sorted), false);
        assert_eq!(out, "6d807ffa2a79");
    }

    #[test]
    fn version_codes() {
        assert_eq!(version_code(0x0304), "13");
        assert_eq!(version_code(0x0300), "s3");
        assert_eq!(version_code(0xfefd), "d2");
        assert_eq!(version_code(0x7f17), "00");
    }

    pub(super) mod tests_support {
        use super::super::ClientHello;

        /// A TLS 1.2 ClientHello with cipher 0x002f and the given extensions.
        pub fn hello_with_extensions(extensions: &[(u16, Vec<u8>)]) -> ClientHello {
            let mut ext_bytes = Vec::new();
            for (kind, data) in extensions {
                ext_bytes.extend_from_slice(&kind.to_be_bytes());
                ext_bytes.extend_from_slice(&u16::try_from(data.len()).unwrap().to_be_bytes());
                ext_bytes.extend_from_slice(data);
            }
            let mut body = vec![0x03, 0x03];
            body.extend_from_slice(&[0; 32]);
            body.extend_from_slice(&[0, 0, 2, 0x00, 0x2f, 1, 0]);
            body.extend_from_slice(&u16::try_from(ext_bytes.len()).unwrap().to_be_bytes());
            body.extend_from_slice(&ext_bytes);
            super::super::hello::parse_body(&body, 0x0301).unwrap()
        }
    }
}
