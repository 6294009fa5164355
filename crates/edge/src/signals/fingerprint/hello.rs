//! The ClientHello itself: record reassembly and bounds-checked parsing.
//!
//! Everything here reads through [`Cursor`], whose every read is checked against the remaining
//! input and returns `None` instead of indexing out of range, so no input can make the parser
//! panic. Sizes are capped before anything is allocated.

use std::fmt;

use super::ParseError;

/// TLS record content type of a handshake record.
const CONTENT_TYPE_HANDSHAKE: u8 = 22;
/// Handshake message type of a ClientHello.
const HANDSHAKE_CLIENT_HELLO: u8 = 1;
/// Length of a TLS record header: type, version, length.
pub(crate) const RECORD_HEADER_LEN: usize = 5;
/// Length of a handshake message header: type, 24-bit length.
const HANDSHAKE_HEADER_LEN: usize = 4;
/// The largest record fragment TLS allows in plaintext (RFC 8446 §5.1: 2^14).
pub const MAX_RECORD_LEN: usize = 1 << 14;
/// The largest ClientHello handshake message body accepted: 64 KiB. Real ones are below 2 KiB,
/// a few KiB with post-quantum key shares.
pub const MAX_HANDSHAKE_LEN: usize = 64 * 1024;

/// Extension type numbers the parser decodes.
pub(crate) mod ext {
    pub const SERVER_NAME: u16 = 0x0000;
    pub const SUPPORTED_GROUPS: u16 = 0x000a;
    pub const EC_POINT_FORMATS: u16 = 0x000b;
    pub const SIGNATURE_ALGORITHMS: u16 = 0x000d;
    pub const ALPN: u16 = 0x0010;
    pub const SUPPORTED_VERSIONS: u16 = 0x002b;
}

/// Whether `value` is one of the sixteen GREASE values of RFC 8701 (`0x0a0a`, `0x1a1a`, ...,
/// `0xfafa`), which clients insert at random to keep servers tolerant and fingerprints ignore.
pub fn is_grease(value: u16) -> bool {
    let [high, low] = value.to_be_bytes();
    high == low && low & 0x0f == 0x0a
}

/// One extension of a ClientHello, in the order the client sent it.
#[derive(Clone, PartialEq, Eq)]
pub struct Extension {
    kind: u16,
    data: Vec<u8>,
}

impl Extension {
    /// The extension type (`0x0000` server_name, `0x0010` ALPN, ...), GREASE included.
    pub fn kind(&self) -> u16 {
        self.kind
    }

    /// The extension's body as sent.
    pub fn data(&self) -> &[u8] {
        &self.data
    }
}

impl fmt::Debug for Extension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Extension({:#06x}, {} bytes)",
            self.kind,
            self.data.len()
        )
    }
}

/// A parsed TLS ClientHello (TLS 1.0 to 1.3): what fingerprints and policy read from the first
/// flight of a TLS client.
///
/// Lists keep the client's order and keep GREASE values; the fingerprint functions drop GREASE
/// where their definitions say so. Build one with [`ClientHello::parse`] from the bytes the
/// client sent, or incrementally with [`ClientHelloReader`](super::ClientHelloReader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    record_version: u16,
    legacy_version: u16,
    cipher_suites: Vec<u16>,
    compression_methods: Vec<u8>,
    extensions: Vec<Extension>,
    server_name: Option<String>,
    alpn_protocols: Vec<Vec<u8>>,
    supported_groups: Vec<u16>,
    ec_point_formats: Vec<u8>,
    signature_algorithms: Vec<u16>,
    supported_versions: Vec<u16>,
}

impl ClientHello {
    /// Parses a ClientHello from the bytes of one or more TLS records as the client sent them
    /// (each record: 5-byte header, then a fragment of the handshake message). The message may
    /// be split across several records; bytes after the end of the ClientHello are ignored.
    ///
    /// # Errors
    ///
    /// A [`ParseError`] when the input is not a TLS handshake record carrying a ClientHello,
    /// ends before the ClientHello does ([`ParseError::Incomplete`]), exceeds a size cap, or
    /// is malformed. Never panics.
    pub fn parse(record_bytes: &[u8]) -> Result<ClientHello, ParseError> {
        let mut assembler = RecordAssembler::default();
        match assembler.advance(record_bytes)? {
            Some((body, record_version)) => parse_body(body, record_version),
            None => Err(ParseError::Incomplete),
        }
    }

    /// The version in the header of the first record (`0x0301` from most clients); fingerprints
    /// ignore it.
    pub fn record_version(&self) -> u16 {
        self.record_version
    }

    /// The ClientHello's `legacy_version` (`0x0303` from TLS 1.2 and 1.3 clients).
    pub fn legacy_version(&self) -> u16 {
        self.legacy_version
    }

    /// The cipher suites, in the client's order, GREASE included.
    pub fn cipher_suites(&self) -> &[u16] {
        &self.cipher_suites
    }

    /// The compression methods offered.
    pub fn compression_methods(&self) -> &[u8] {
        &self.compression_methods
    }

    /// All extensions in the client's order, GREASE included.
    pub fn extensions(&self) -> &[Extension] {
        &self.extensions
    }

    /// Whether the client sent an extension of type `kind`.
    pub fn has_extension(&self, kind: u16) -> bool {
        self.extensions.iter().any(|e| e.kind == kind)
    }

    /// The host name of the server_name extension (the first `host_name` entry), if any.
    pub fn server_name(&self) -> Option<&str> {
        self.server_name.as_deref()
    }

    /// The ALPN protocol names, in the client's order (`h2`, `http/1.1`, ...), as raw bytes.
    pub fn alpn_protocols(&self) -> &[Vec<u8>] {
        &self.alpn_protocols
    }

    /// The supported_groups (formerly elliptic_curves) extension's list, GREASE included.
    pub fn supported_groups(&self) -> &[u16] {
        &self.supported_groups
    }

    /// The ec_point_formats extension's list.
    pub fn ec_point_formats(&self) -> &[u8] {
        &self.ec_point_formats
    }

    /// The signature_algorithms extension's list, in the client's order.
    pub fn signature_algorithms(&self) -> &[u16] {
        &self.signature_algorithms
    }

    /// The supported_versions extension's list (TLS 1.3 clients), GREASE included.
    pub fn supported_versions(&self) -> &[u16] {
        &self.supported_versions
    }

    /// The highest TLS version the client offers: the largest non-GREASE value of
    /// supported_versions when that extension is present, else `legacy_version`.
    pub fn highest_version(&self) -> u16 {
        if self.has_extension(ext::SUPPORTED_VERSIONS) {
            self.supported_versions
                .iter()
                .copied()
                .filter(|v| !is_grease(*v))
                .max()
                .unwrap_or(self.legacy_version)
        } else {
            self.legacy_version
        }
    }
}

/// Reassembles one handshake message from TLS records fed in pieces.
///
/// `advance` is given the whole input seen so far (a growing buffer) and keeps its position, so
/// each byte is examined once.
#[derive(Debug, Default)]
pub(crate) struct RecordAssembler {
    /// Offset in the input of the next record header.
    next_record: usize,
    /// The handshake bytes gathered so far (record fragments concatenated).
    handshake: Vec<u8>,
    /// Version of the first record's header.
    record_version: u16,
}

impl RecordAssembler {
    /// Consumes the complete records in `input[self.next_record..]`. Returns the handshake
    /// message body (and the first record's version) once it is complete, `None` when more
    /// input is needed.
    pub(crate) fn advance<'a>(
        &'a mut self,
        input: &[u8],
    ) -> Result<Option<(&'a [u8], u16)>, ParseError> {
        loop {
            if let Some(len) = self.message_len()? {
                if self.handshake.len() >= HANDSHAKE_HEADER_LEN + len {
                    let end = HANDSHAKE_HEADER_LEN + len;
                    let version = self.record_version;
                    return Ok(self
                        .handshake
                        .get(HANDSHAKE_HEADER_LEN..end)
                        .map(|body| (body, version)));
                }
            }
            let rest = input.get(self.next_record..).unwrap_or_default();
            let Some(header) = rest.get(..RECORD_HEADER_LEN) else {
                if self.next_record == 0 {
                    // Reject non-TLS input as soon as its first bytes show it.
                    check_record_start(rest)?;
                }
                return Ok(None);
            };
            let (content_type, version, len) = (
                header[0],
                u16::from_be_bytes([header[1], header[2]]),
                usize::from(u16::from_be_bytes([header[3], header[4]])),
            );
            check_record_start(header)?;
            if content_type != CONTENT_TYPE_HANDSHAKE {
                return Err(ParseError::NotHandshake { content_type });
            }
            if len > MAX_RECORD_LEN {
                return Err(ParseError::RecordTooLong {
                    len,
                    max: MAX_RECORD_LEN,
                });
            }
            let Some(fragment) = rest.get(RECORD_HEADER_LEN..RECORD_HEADER_LEN + len) else {
                return Ok(None);
            };
            if self.next_record == 0 {
                self.record_version = version;
            }
            self.handshake.extend_from_slice(fragment);
            self.next_record += RECORD_HEADER_LEN + len;
        }
    }

    /// The handshake message's declared body length, once its header has arrived.
    fn message_len(&self) -> Result<Option<usize>, ParseError> {
        let Some(header) = self.handshake.get(..HANDSHAKE_HEADER_LEN) else {
            if let Some(&kind) = self.handshake.first() {
                if kind != HANDSHAKE_CLIENT_HELLO {
                    return Err(ParseError::NotClientHello {
                        handshake_type: kind,
                    });
                }
            }
            return Ok(None);
        };
        if header[0] != HANDSHAKE_CLIENT_HELLO {
            return Err(ParseError::NotClientHello {
                handshake_type: header[0],
            });
        }
        let len =
            usize::from(header[1]) << 16 | usize::from(header[2]) << 8 | usize::from(header[3]);
        if len > MAX_HANDSHAKE_LEN {
            return Err(ParseError::HandshakeTooLong {
                len,
                max: MAX_HANDSHAKE_LEN,
            });
        }
        Ok(Some(len))
    }
}

/// Checks the first bytes of a record (as many as have arrived): a handshake content type and a
/// TLS major version of 3. An SSL 2.0-style hello (high bit set in the first byte) is reported
/// as such.
fn check_record_start(bytes: &[u8]) -> Result<(), ParseError> {
    if let Some(&first) = bytes.first() {
        if first & 0x80 != 0 {
            return Err(ParseError::Sslv2Unsupported);
        }
        if first != CONTENT_TYPE_HANDSHAKE {
            return Err(ParseError::NotHandshake {
                content_type: first,
            });
        }
    }
    if let Some(&major) = bytes.get(1) {
        if major != 3 {
            return Err(ParseError::UnsupportedRecordVersion {
                version: u16::from_be_bytes([major, bytes.get(2).copied().unwrap_or(0)]),
            });
        }
    }
    Ok(())
}

/// A bounds-checked reader over a byte slice. Every method returns `None` when the input is too
/// short; nothing indexes directly.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Cursor { rest: bytes }
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.rest.split_at_checked(n)?;
        self.rest = tail;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        let (&first, tail) = self.rest.split_first()?;
        self.rest = tail;
        Some(first)
    }

    fn u16(&mut self) -> Option<u16> {
        let bytes = self.take(2)?;
        Some(u16::from_be_bytes([*bytes.first()?, *bytes.get(1)?]))
    }

    /// A vector with a one-byte length prefix.
    fn vec_u8(&mut self) -> Option<&'a [u8]> {
        let len = self.u8()?;
        self.take(usize::from(len))
    }

    /// A vector with a two-byte length prefix.
    fn vec_u16(&mut self) -> Option<&'a [u8]> {
        let len = self.u16()?;
        self.take(usize::from(len))
    }
}

/// Reads a list of big-endian u16 values filling `bytes` exactly.
fn u16_list(bytes: &[u8], field: &'static str) -> Result<Vec<u16>, ParseError> {
    if !bytes.len().is_multiple_of(2) {
        return Err(ParseError::Malformed { field });
    }
    Ok(bytes
        .chunks_exact(2)
        .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
        .collect())
}

pub(crate) fn parse_body(body: &[u8], record_version: u16) -> Result<ClientHello, ParseError> {
    let malformed = |field: &'static str| ParseError::Malformed { field };
    let mut cur = Cursor::new(body);
    let legacy_version = cur.u16().ok_or(malformed("legacy_version"))?;
    cur.take(32).ok_or(malformed("random"))?;
    let session_id = cur.vec_u8().ok_or(malformed("legacy_session_id"))?;
    if session_id.len() > 32 {
        return Err(malformed("legacy_session_id"));
    }
    let suites = cur.vec_u16().ok_or(malformed("cipher_suites"))?;
    let cipher_suites = u16_list(suites, "cipher_suites")?;
    let compression_methods = cur
        .vec_u8()
        .ok_or(malformed("legacy_compression_methods"))?
        .to_vec();
    let mut hello = ClientHello {
        record_version,
        legacy_version,
        cipher_suites,
        compression_methods,
        extensions: Vec::new(),
        server_name: None,
        alpn_protocols: Vec::new(),
        supported_groups: Vec::new(),
        ec_point_formats: Vec::new(),
        signature_algorithms: Vec::new(),
        supported_versions: Vec::new(),
    };
    // Extensions are optional before TLS 1.3 (an SSL 3.0 / early TLS hello ends here).
    if cur.is_empty() {
        return Ok(hello);
    }
    let extensions = cur.vec_u16().ok_or(malformed("extensions"))?;
    if !cur.is_empty() {
        return Err(malformed("trailing bytes after extensions"));
    }
    let mut exts = Cursor::new(extensions);
    while !exts.is_empty() {
        let kind = exts.u16().ok_or(malformed("extension type"))?;
        let data = exts.vec_u16().ok_or(malformed("extension length"))?;
        // The first occurrence of a decoded extension wins; duplicates (which RFC 8446 forbids)
        // are kept in the list for fingerprinting.
        if !hello.has_extension(kind) {
            decode_extension(&mut hello, kind, data)?;
        }
        hello.extensions.push(Extension {
            kind,
            data: data.to_vec(),
        });
    }
    Ok(hello)
}

/// Decodes the extensions the parser knows into `hello`'s typed fields. Each body must fill its
/// extension exactly.
fn decode_extension(hello: &mut ClientHello, kind: u16, data: &[u8]) -> Result<(), ParseError> {
    let mut cur = Cursor::new(data);
    match kind {
        ext::SERVER_NAME => {
            // An empty body is what servers echo; a client's is a list of names.
            if data.is_empty() {
                return Ok(());
            }
            let field = "extension server_name";
            let list = cur.vec_u16().ok_or(ParseError::Malformed { field })?;
            let mut names = Cursor::new(list);
            while !names.is_empty() {
                let name_type = names.u8().ok_or(ParseError::Malformed { field })?;
                let name = names.vec_u16().ok_or(ParseError::Malformed { field })?;
                if name_type == 0 && hello.server_name.is_none() {
                    let name =
                        std::str::from_utf8(name).map_err(|_| ParseError::InvalidServerName)?;
                    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
                        return Err(ParseError::InvalidServerName);
                    }
                    hello.server_name = Some(name.to_owned());
                }
            }
        }
        ext::ALPN => {
            let field = "extension application_layer_protocol_negotiation";
            let list = cur.vec_u16().ok_or(ParseError::Malformed { field })?;
            let mut protocols = Cursor::new(list);
            while !protocols.is_empty() {
                let name = protocols.vec_u8().ok_or(ParseError::Malformed { field })?;
                hello.alpn_protocols.push(name.to_vec());
            }
        }
        ext::SUPPORTED_GROUPS => {
            let field = "extension supported_groups";
            let list = cur.vec_u16().ok_or(ParseError::Malformed { field })?;
            hello.supported_groups = u16_list(list, field)?;
        }
        ext::EC_POINT_FORMATS => {
            let field = "extension ec_point_formats";
            hello.ec_point_formats = cur
                .vec_u8()
                .ok_or(ParseError::Malformed { field })?
                .to_vec();
        }
        ext::SIGNATURE_ALGORITHMS => {
            let field = "extension signature_algorithms";
            let list = cur.vec_u16().ok_or(ParseError::Malformed { field })?;
            hello.signature_algorithms = u16_list(list, field)?;
        }
        ext::SUPPORTED_VERSIONS => {
            let field = "extension supported_versions";
            let list = cur.vec_u8().ok_or(ParseError::Malformed { field })?;
            hello.supported_versions = u16_list(list, field)?;
        }
        _ => return Ok(()),
    }
    if cur.is_empty() {
        Ok(())
    } else {
        Err(ParseError::Malformed {
            field: "extension body longer than its list",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grease_values_are_exactly_the_sixteen() {
        let grease: Vec<u16> = (0..=u16::MAX).filter(|v| is_grease(*v)).collect();
        let expected: Vec<u16> = (0..16u16)
            .map(|i| (i << 12) | 0x0a00 | (i << 4) | 0x0a)
            .collect();
        assert_eq!(grease, expected);
        assert_eq!(grease.first(), Some(&0x0a0a));
        assert_eq!(grease.last(), Some(&0xfafa));
    }

    #[test]
    fn cursor_never_reads_past_the_end() {
        let mut cur = Cursor::new(&[0x00, 0x05, 1, 2]);
        assert_eq!(cur.vec_u16(), None);
        let mut cur = Cursor::new(&[0x02, 1, 2, 3]);
        assert_eq!(cur.vec_u8(), Some(&[1u8, 2][..]));
        assert_eq!(cur.u16(), None);
        assert_eq!(cur.u8(), Some(3));
        assert_eq!(cur.u8(), None);
    }

    #[test]
    fn non_tls_input_fails_on_the_first_byte() {
        assert!(matches!(
            ClientHello::parse(b"G"),
            Err(ParseError::NotHandshake { content_type: b'G' })
        ));
        assert!(matches!(
            ClientHello::parse(&[0x80, 0x2e, 0x01]),
            Err(ParseError::Sslv2Unsupported)
        ));
        assert!(matches!(
            ClientHello::parse(&[]),
            Err(ParseError::Incomplete)
        ));
    }
}
