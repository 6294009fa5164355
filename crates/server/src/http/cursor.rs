//! Paging cursors, bound to the tenant and the list that issued them.
//!
//! Every cursor the service hands out (`next`, taken back as `from`) is the base64url (no
//! padding) of a position followed by a 128-bit tag: HMAC-SHA256, under a key derived from the
//! secrets key-encryption key ([`Kek::tag`]), of the tenant id, the list family and the
//! position. A cursor of another tenant, of another list family, altered, or not handed out by
//! a service holding the same key-encryption key is refused with 400 `invalid_query_string`
//! (the message does not say which check failed). Nodes sharing a database share the key
//! (they must, to open the stored secrets), so a cursor issued by one node pages on another.
//!
//! Positions: the group-members and user-sessions lists use the 8-byte big-endian insertion
//! sequence number of the last record served (the list continues strictly after it, so records
//! added between two pages appear at the end and nothing is served twice or skipped); the
//! checkpoint lists ([`crate::http::paging`]) use their own positions (a creation time and id, a
//! client id, a connection id).
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use netacl_secrets::Kek;
use subtle::ConstantTimeEq;

use crate::http::error::ApiError;
use crate::AppState;

/// Bytes of the tag kept in a cursor.
const TAG_LEN: usize = 16;

/// The purpose label of cursor tags.
const PURPOSE: &str = "netacl paging cursor v1";

/// The longest cursor accepted, in characters.
const MAX_CURSOR_LEN: usize = 512;

/// The lists that page by cursor (a cursor of one is refused by the others).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// `GET /groups/{id}/members`.
    GroupMembers,
    /// `GET /users/{user_id}/sessions`.
    UserSessions,
    /// `GET /organizations` by checkpoint.
    Organizations,
    /// `GET /connections` by checkpoint.
    Connections,
    /// `GET /client-grants` by checkpoint.
    ClientGrants,
}

impl Family {
    fn label(self) -> &'static [u8] {
        match self {
            Family::GroupMembers => b"group_members",
            Family::UserSessions => b"user_sessions",
            Family::Organizations => b"organizations",
            Family::Connections => b"connections",
            Family::ClientGrants => b"client_grants",
        }
    }
}

/// Seals and opens one tenant's cursors.
pub(crate) struct Cursors<'a> {
    kek: &'a Kek,
    tenant: &'a str,
}

impl AppState {
    /// The cursors of this state's tenant.
    pub(crate) fn cursors(&self) -> Cursors<'_> {
        let tenant = &self.inner.tenant;
        Cursors {
            kek: tenant.kek(),
            tenant: tenant.id.as_str(),
        }
    }
}

impl<'a> Cursors<'a> {
    /// Cursors of `tenant` under `kek`.
    #[cfg(test)]
    pub(crate) fn new(kek: &'a Kek, tenant: &'a str) -> Self {
        Self { kek, tenant }
    }

    fn tag(&self, family: Family, position: &[u8]) -> [u8; TAG_LEN] {
        // Length-prefixed fields: no two (tenant, family, position) give the same message.
        let label = family.label();
        let mut message = Vec::with_capacity(16 + self.tenant.len() + label.len() + position.len());
        for field in [self.tenant.as_bytes(), label, position] {
            message.extend_from_slice(&(field.len() as u64).to_be_bytes());
            message.extend_from_slice(field);
        }
        let full = self.kek.tag(PURPOSE, &message);
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&full[..TAG_LEN]);
        tag
    }

    /// The cursor of `position` in `family`.
    pub(crate) fn seal(&self, family: Family, position: &[u8]) -> String {
        let mut bytes = Vec::with_capacity(position.len() + TAG_LEN);
        bytes.extend_from_slice(position);
        bytes.extend_from_slice(&self.tag(family, position));
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The position a cursor of `family` names; `invalid()` for anything this tenant's
    /// `family` did not hand out.
    pub(crate) fn open(
        &self,
        family: Family,
        text: &str,
        invalid: fn() -> ApiError,
    ) -> Result<Vec<u8>, ApiError> {
        if text.is_empty() || text.len() > MAX_CURSOR_LEN {
            return Err(invalid());
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
        let Some(split) = bytes.len().checked_sub(TAG_LEN) else {
            return Err(invalid());
        };
        let (position, tag) = bytes.split_at(split);
        if !bool::from(self.tag(family, position).ct_eq(tag)) {
            return Err(invalid());
        }
        Ok(position.to_vec())
    }

    /// The cursor after insertion sequence number `seq` (members, sessions).
    pub(crate) fn encode_seq(&self, family: Family, seq: u64) -> String {
        self.seal(family, &seq.to_be_bytes())
    }

    /// The sequence number a members or sessions cursor names.
    pub(crate) fn decode_seq(&self, family: Family, text: &str) -> Result<u64, ApiError> {
        let position = self.open(family, text, invalid_cursor)?;
        let array: [u8; 8] = position.try_into().map_err(|_| invalid_cursor())?;
        Ok(u64::from_be_bytes(array))
    }
}

/// 400 for a members or sessions `from` this tenant's list did not hand out.
fn invalid_cursor() -> ApiError {
    ApiError::invalid_query(
        "Invalid cursor: pass the `next` value of the previous page",
        Some("from"),
    )
}

/// The cursors of the members and sessions lists, as a regular expression: 32 base64url
/// characters spelling 24 bytes (the position and the tag).
pub(crate) const CURSOR_PATTERN: &str = "^[A-Za-z0-9_-]{32}$";

/// `take`: 1..=100, default 50.
pub(crate) const DEFAULT_TAKE: u64 = 50;
/// The largest `take`.
pub(crate) const MAX_TAKE: u64 = 100;

#[cfg(test)]
mod tests {
    use super::*;

    fn kek() -> Kek {
        Kek::from_bytes(&[7u8; 32]).expect("kek")
    }

    #[test]
    fn cursors_round_trip_and_foreign_ones_are_refused() {
        let kek = kek();
        let acme = Cursors::new(&kek, "acme");
        for seq in [0, 1, 255, 1 << 40, u64::MAX] {
            let text = acme.encode_seq(Family::GroupMembers, seq);
            assert_eq!(
                acme.decode_seq(Family::GroupMembers, &text)
                    .expect("round trip"),
                seq
            );
        }
        let text = acme.encode_seq(Family::GroupMembers, 1);
        // Another tenant, another list, another key-encryption key: refused.
        let other_kek = Kek::from_bytes(&[8u8; 32]).expect("kek");
        for (cursors, family) in [
            (Cursors::new(&kek, "beta"), Family::GroupMembers),
            (Cursors::new(&kek, "acme"), Family::UserSessions),
            (Cursors::new(&other_kek, "acme"), Family::GroupMembers),
        ] {
            let err = cursors.decode_seq(family, &text).expect_err("foreign");
            assert_eq!(err.error_code(), Some("invalid_query_string"));
        }
        // Every single-character change is refused.
        let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        for i in 0..text.len() {
            for c in alphabet.chars() {
                let mut altered = text.clone();
                altered.replace_range(i..=i, &c.to_string());
                if altered != text {
                    assert!(
                        acme.decode_seq(Family::GroupMembers, &altered).is_err(),
                        "{altered}"
                    );
                }
            }
        }
        for bad in [
            "",
            "AAAAAAAAAAE",
            "AAAAAAAAAAE=",
            "not a cursor",
            &"A".repeat(600),
        ] {
            let err = acme.decode_seq(Family::GroupMembers, bad).expect_err(bad);
            assert_eq!(err.error_code(), Some("invalid_query_string"), "{bad}");
        }
    }

    /// Every cursor handed out matches the document's pattern.
    #[test]
    fn the_cursor_pattern_describes_the_cursors() {
        let kek = kek();
        let cursors = Cursors::new(&kek, "default");
        let pattern = regex::Regex::new(CURSOR_PATTERN).expect("pattern");
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..10_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let text = cursors.encode_seq(Family::UserSessions, state);
            assert!(pattern.is_match(&text), "{text}");
        }
    }
}
