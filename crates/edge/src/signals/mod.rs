//! The signals the edge derives from a request besides its line and headers: TLS fingerprints
//! (`fingerprint`: JA3 and JA4 from a ClientHello), country, subdivision and ASN (`geo`, and
//! `enrich`: the intervals compiled from the databases for a policy), and RFC 9421 signatures
//! (`httpsig`).
pub(crate) mod enrich;
pub mod fingerprint;
pub mod geo;
pub mod httpsig;
