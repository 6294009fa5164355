//! JSON text from outside, parsed with its nesting bounded.
//!
//! A value nested thousands of levels deep costs a stack frame per level wherever it is walked
//! recursively, dropping it included: one small body could overflow a thread's stack and abort
//! the process. Bodies and files are therefore refused above [`MAX_NESTING_DEPTH`] levels of
//! arrays and objects, before anything is built, by a linear scan of the text. No body netacl
//! takes comes near it (a network ACL is 4 levels deep, a directory import 5).
use serde_json::Value;

/// The deepest nesting of arrays and objects accepted in a body or file: 32 levels. `{}` and
/// `[]` are one level; `{"rule": {"match": {"asns": [1]}}}` is four.
pub const MAX_NESTING_DEPTH: usize = 32;

/// Why JSON text was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JsonTextError {
    /// Arrays and objects nest deeper than `limit` levels.
    #[error("Nested deeper than the limit of {limit} levels of arrays and objects")]
    TooDeep {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// Not JSON (serde_json's message, with line and column).
    #[error("{0}")]
    Syntax(#[from] serde_json::Error),
}

/// Whether arrays and objects in `text` nest deeper than `limit` levels. Brackets inside
/// strings are text. For valid JSON this is exact; for anything else it is a bound the parser's
/// own error then supersedes.
pub fn nests_deeper_than(text: &[u8], limit: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in text {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Parses JSON text whose arrays and objects nest at most `max_depth` levels (the depth is
/// checked first, on the text).
///
/// ```
/// use netacl_model::{parse_json, JsonTextError, MAX_NESTING_DEPTH};
///
/// assert!(parse_json(br#"{"rule": {"match": {"asns": [1]}}}"#, MAX_NESTING_DEPTH).is_ok());
/// let deep = format!("{}{}", "[".repeat(50_000), "]".repeat(50_000));
/// let err = parse_json(deep.as_bytes(), MAX_NESTING_DEPTH).unwrap_err();
/// assert!(matches!(err, JsonTextError::TooDeep { limit: 32 }));
/// assert_eq!(
///     err.to_string(),
///     "Nested deeper than the limit of 32 levels of arrays and objects"
/// );
/// ```
pub fn parse_json(text: &[u8], max_depth: usize) -> Result<Value, JsonTextError> {
    if nests_deeper_than(text, max_depth) {
        return Err(JsonTextError::TooDeep { limit: max_depth });
    }
    Ok(serde_json::from_slice(text)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_of(text: &str) -> usize {
        (0..100)
            .find(|&limit| !nests_deeper_than(text.as_bytes(), limit))
            .expect("shallower than 100")
    }

    #[test]
    fn depth_counts_arrays_and_objects_outside_strings() {
        assert_eq!(depth_of("1"), 0);
        assert_eq!(depth_of("\"[[[\""), 0);
        assert_eq!(depth_of("{}"), 1);
        assert_eq!(depth_of("[[], {}]"), 2);
        assert_eq!(depth_of(r#"{"rule": {"match": {"asns": [1]}}}"#), 4);
        assert_eq!(depth_of(r#"{"a": "\"[{", "b": [{"c": "\\"}]}"#), 3);
        assert_eq!(depth_of(r#"[{"\\\"": ["]]]]"]}]"#), 3);
    }

    #[test]
    fn parse_refuses_too_deep_and_malformed_text() {
        let ok = format!("{}{}", "[".repeat(32), "]".repeat(32));
        assert!(parse_json(ok.as_bytes(), 32).is_ok());
        let deep = format!("{}{}", "[".repeat(33), "]".repeat(33));
        assert!(matches!(
            parse_json(deep.as_bytes(), 32),
            Err(JsonTextError::TooDeep { limit: 32 })
        ));
        assert!(matches!(
            parse_json(b"{\"a\": }", 32),
            Err(JsonTextError::Syntax(_))
        ));
    }
}
