//! Paging cursors of the group-members and user-sessions lists: the base64url (no padding) of
//! the 8-byte big-endian insertion sequence number of the last record of the previous page.
//! Opaque to clients; the list continues strictly after that record, so records added between
//! two pages appear at the end and nothing is served twice or skipped.
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use crate::error::ApiError;

/// The cursor of the position after `seq`.
pub(crate) fn encode(seq: u64) -> String {
    URL_SAFE_NO_PAD.encode(seq.to_be_bytes())
}

/// The position a `from` cursor names; 400 `invalid_query_string` for anything this server did
/// not hand out (wrong alphabet, padding, length).
pub(crate) fn decode(cursor: &str) -> Result<u64, ApiError> {
    let invalid = || {
        ApiError::invalid_query(
            "Invalid cursor: pass the `next` value of the previous page",
            Some("from"),
        )
    };
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
    let array: [u8; 8] = bytes.try_into().map_err(|_| invalid())?;
    Ok(u64::from_be_bytes(array))
}

/// The cursors [`decode`] takes, as a regular expression: 11 base64url characters spelling 8
/// bytes (the last carries 4 bits and two zero bits).
pub(crate) const CURSOR_PATTERN: &str = "^[A-Za-z0-9_-]{10}[AEIMQUYcgkosw048]$";

/// `take`: 1..=100, default 50.
pub(crate) const DEFAULT_TAKE: u64 = 50;
/// The largest `take`.
pub(crate) const MAX_TAKE: u64 = 100;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_foreign_ones_are_refused() {
        for seq in [0, 1, 255, 1 << 40, u64::MAX] {
            assert_eq!(decode(&encode(seq)).expect("round trip"), seq);
        }
        assert_eq!(encode(1), "AAAAAAAAAAE");
        for bad in [
            "",
            "AAAAAAAAAAE=",
            "AAAAAAAAAA",
            "AAAAAAAAAAAAAA",
            "AAAA+AAAAAE",
            "not a cursor",
        ] {
            let err = decode(bad).expect_err(bad);
            assert_eq!(err.error_code(), Some("invalid_query_string"), "{bad}");
        }
    }

    /// The document's pattern takes exactly the cursors `decode` takes.
    #[test]
    fn the_cursor_pattern_is_the_decoder() {
        let pattern = regex::Regex::new(CURSOR_PATTERN).expect("pattern");
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=.";
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut accepted = 0;
        for round in 0..200_000u64 {
            let len = [10, 11, 11, 11, 12, 0, 1][(next() % 7) as usize];
            let text: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize] as char)
                .collect();
            let text = if round % 3 == 0 { encode(next()) } else { text };
            let decoded = decode(&text).is_ok();
            accepted += usize::from(decoded);
            assert_eq!(pattern.is_match(&text), decoded, "{text}");
        }
        assert!(accepted > 60_000, "{accepted}");
    }
}
