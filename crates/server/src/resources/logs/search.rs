//! The `q` of `GET /api/v2/logs`: a small subset of the Lucene query syntax the public API
//! takes, enough for the fields netacl keeps.
//!
//! ```text
//! query  = term *( 1*SP "AND" 1*SP term )        (spaces around the query are ignored)
//! term   = ("type" / "client_id") ":" value
//!        / "date" ":" range
//! value  = 1*( any character but space, '"', ':', '(', ')', '[', ']', '{', '}' )
//!        / DQUOTE *( any character but DQUOTE and '\' / '\' any character ) DQUOTE
//! range  = ("[" / "{") bound 1*SP "TO" 1*SP bound ("]" / "}")     ([ ] inclusive, { } exclusive)
//! bound  = "*" / YYYY-MM-DD / YYYY-MM-DDTHH:MM:SSZ / YYYY-MM-DDTHH:MM:SS.mmmZ
//! ```
//!
//! Values compare exactly (case included). A date without a time is a whole UTC day: as a lower
//! bound its first millisecond, as an upper bound its last. Terms on the same field must all
//! hold (two different `type`s match nothing; two ranges intersect). A malformed query is an
//! error naming the character position (from 1) and what was expected there.
use netacl_model::Timestamp;
use netacl_store::LogFilter;

/// What a parsed `q` selects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Search {
    /// The conditions, for the store.
    pub(crate) filter: LogFilter,
    /// The terms contradict each other: nothing matches.
    pub(crate) matches_nothing: bool,
}

/// A malformed `q`: where and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SearchError {
    /// The character position (from 1).
    pub(crate) position: usize,
    /// What was expected, and what was found.
    pub(crate) problem: String,
}

impl std::fmt::Display for SearchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at character {}: {}", self.position, self.problem)
    }
}

/// The longest `q` accepted, in characters.
pub(crate) const MAX_QUERY_LEN: usize = 1024;

const DAY_MS: i64 = 86_400_000;

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn error(&self, expected: &str) -> SearchError {
        let found = match self.peek() {
            None => "the end of the query".to_owned(),
            Some(c) => format!("{c:?}"),
        };
        SearchError {
            position: self.pos + 1,
            problem: format!("expected {expected}, found {found}"),
        }
    }

    fn spaces(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn keyword(&mut self, word: &str) -> bool {
        let end = self.pos + word.chars().count();
        if end <= self.chars.len() && self.chars[self.pos..end].iter().copied().eq(word.chars()) {
            self.pos = end;
            true
        } else {
            false
        }
    }

    fn field(&mut self) -> Result<&'static str, SearchError> {
        for name in ["type", "client_id", "date"] {
            let start = self.pos;
            if self.keyword(name) && self.peek() == Some(':') {
                self.pos += 1;
                return Ok(name);
            }
            self.pos = start;
        }
        Err(self.error("a field (type:, client_id: or date:)"))
    }

    fn value(&mut self) -> Result<String, SearchError> {
        if self.peek() == Some('"') {
            self.pos += 1;
            let mut value = String::new();
            loop {
                match self.peek() {
                    None => return Err(self.error("a closing '\"'")),
                    Some('"') => {
                        self.pos += 1;
                        break;
                    }
                    Some('\\') => {
                        self.pos += 1;
                        let Some(c) = self.peek() else {
                            return Err(self.error("a character after '\\'"));
                        };
                        value.push(c);
                        self.pos += 1;
                    }
                    Some(c) => {
                        value.push(c);
                        self.pos += 1;
                    }
                }
            }
            if value.is_empty() {
                return Err(SearchError {
                    position: self.pos - 1,
                    problem: "expected a value, found \"\"".into(),
                });
            }
            return Ok(value);
        }
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| !c.is_whitespace() && !"\":()[]{}".contains(c))
        {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.error("a value"));
        }
        Ok(self.chars[start..self.pos].iter().collect())
    }

    /// A bound: `*` (`None`), or a date (start of its day or the instant) and whether it was
    /// a whole day.
    fn bound(&mut self) -> Result<Option<(i64, bool)>, SearchError> {
        if self.peek() == Some('*') {
            self.pos += 1;
            return Ok(None);
        }
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || "-:.".contains(c))
        {
            self.pos += 1;
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        let parsed = match text.len() {
            10 => Timestamp::parse(&format!("{text}T00:00:00.000Z")).map(|t| (t, true)),
            20 if text.ends_with('Z') => {
                Timestamp::parse(&format!("{}.000Z", &text[..19])).map(|t| (t, false))
            }
            24 => Timestamp::parse(&text).map(|t| (t, false)),
            _ => None,
        };
        match parsed {
            Some((t, day)) => Ok(Some((t.unix_millis(), day))),
            None => {
                self.pos = start;
                Err(self.error(
                    "'*' or a date (YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or YYYY-MM-DDTHH:MM:SS.mmmZ)",
                ))
            }
        }
    }

    fn range(&mut self) -> Result<(Option<i64>, Option<i64>), SearchError> {
        let low_inclusive = match self.peek() {
            Some('[') => true,
            Some('{') => false,
            _ => return Err(self.error("'[' or '{' opening a date range")),
        };
        self.pos += 1;
        let low = self.bound()?;
        if self.spaces() == 0 || !self.keyword("TO") {
            return Err(self.error("' TO '"));
        }
        if self.spaces() == 0 {
            return Err(self.error("a space after TO"));
        }
        let high = self.bound()?;
        let high_inclusive = match self.peek() {
            Some(']') => true,
            Some('}') => false,
            _ => return Err(self.error("']' or '}' closing the date range")),
        };
        self.pos += 1;
        let from = low.map(|(ms, day)| match (low_inclusive, day) {
            (true, _) => ms,
            (false, true) => ms.saturating_add(DAY_MS),
            (false, false) => ms.saturating_add(1),
        });
        let to = high.map(|(ms, day)| match (high_inclusive, day) {
            (true, true) => ms.saturating_add(DAY_MS - 1),
            (true, false) => ms,
            (false, _) => ms.saturating_sub(1),
        });
        Ok((from, to))
    }
}

/// Parses `q` (see the module docs).
pub(crate) fn parse(text: &str) -> Result<Search, SearchError> {
    let count = text.chars().count();
    if count > MAX_QUERY_LEN {
        return Err(SearchError {
            position: MAX_QUERY_LEN + 1,
            problem: format!("expected at most {MAX_QUERY_LEN} characters, found {count}"),
        });
    }
    let mut parser = Parser {
        chars: text.chars().collect(),
        pos: 0,
    };
    let mut search = Search::default();
    parser.spaces();
    loop {
        let field = parser.field()?;
        if field == "date" {
            let (from, to) = parser.range()?;
            let filter = &mut search.filter;
            if let Some(from) = from {
                filter.from_ms = Some(filter.from_ms.map_or(from, |f| f.max(from)));
            }
            if let Some(to) = to {
                filter.to_ms = Some(filter.to_ms.map_or(to, |t| t.min(to)));
            }
        } else {
            let value = parser.value()?;
            let slot = if field == "type" {
                &mut search.filter.event_type
            } else {
                &mut search.filter.client_id
            };
            match slot {
                Some(existing) if *existing != value => search.matches_nothing = true,
                _ => *slot = Some(value),
            }
        }
        let spaces = parser.spaces();
        if parser.peek().is_none() {
            break;
        }
        if spaces == 0 {
            return Err(parser.error("a space, then AND"));
        }
        if !parser.keyword("AND") {
            return Err(parser.error("AND (the only operator)"));
        }
        if parser.spaces() == 0 {
            return Err(parser.error("a space after AND"));
        }
    }
    if let (Some(from), Some(to)) = (search.filter.from_ms, search.filter.to_ms) {
        if from > to {
            search.matches_nothing = true;
        }
    }
    Ok(search)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        Timestamp::parse(text).expect("timestamp").unix_millis()
    }

    #[test]
    fn terms_join_with_and() {
        let s = parse(r#"  type:sapi AND client_id:"a b\"c"  "#).expect("q");
        assert_eq!(s.filter.event_type.as_deref(), Some("sapi"));
        assert_eq!(s.filter.client_id.as_deref(), Some("a b\"c"));
        assert!(!s.matches_nothing);
        let s = parse("date:[2026-01-01 TO 2026-01-02]").expect("days");
        assert_eq!(s.filter.from_ms, Some(ms("2026-01-01T00:00:00.000Z")));
        assert_eq!(s.filter.to_ms, Some(ms("2026-01-02T23:59:59.999Z")));
        let s = parse("date:{2026-01-01T10:00:00Z TO 2026-01-01T11:00:00.500Z}").expect("times");
        assert_eq!(s.filter.from_ms, Some(ms("2026-01-01T10:00:00.001Z")));
        assert_eq!(s.filter.to_ms, Some(ms("2026-01-01T11:00:00.499Z")));
        let s = parse("date:[* TO 2026-01-01} AND date:{2025-12-30 TO *]").expect("open");
        assert_eq!(s.filter.from_ms, Some(ms("2025-12-31T00:00:00.000Z")));
        assert_eq!(s.filter.to_ms, Some(ms("2025-12-31T23:59:59.999Z")));
        assert!(
            parse("type:sapi AND type:fapi")
                .expect("two")
                .matches_nothing
        );
        assert!(
            !parse("type:sapi AND type:sapi")
                .expect("same")
                .matches_nothing
        );
        assert!(
            parse("date:[2026-01-02 TO 2026-01-01]")
                .expect("empty")
                .matches_nothing
        );
    }

    #[test]
    fn malformed_queries_name_the_position_and_the_expectation() {
        for (q, position, expected) in [
            ("", 1, "expected a field"),
            ("user:x", 1, "expected a field"),
            ("type:", 6, "expected a value, found the end"),
            ("type:sapi OR type:fapi", 11, "expected AND"),
            ("type:sapi AND", 14, "expected a space after AND"),
            ("type:sapi AND ", 15, "expected a field"),
            ("type:sapiANDx", 1, ""),
            ("type:\"open", 11, "expected a closing"),
            ("type:\"\"", 6, "expected a value"),
            ("date:2026-01-01", 6, "expected '[' or '{'"),
            ("date:[2026-13-01 TO *]", 7, "expected '*' or a date"),
            ("date:[* TO]", 11, "expected a space after TO"),
            ("date:[* TO ]", 12, "expected '*' or a date"),
            ("date:[*TO *]", 8, "expected ' TO '"),
            ("date:[* TO *", 13, "expected ']' or '}'"),
            ("type:a)", 7, "expected a space, then AND"),
        ] {
            match parse(q) {
                Err(err) if !expected.is_empty() => {
                    assert_eq!(err.position, position, "{q}: {err}");
                    assert!(err.problem.starts_with(expected), "{q}: {err}");
                }
                Err(err) => panic!("{q}: {err}"),
                // A bare value runs to the next space: `sapiANDx` is one value.
                Ok(s) => assert_eq!(s.filter.event_type.as_deref(), Some("sapiANDx"), "{q}"),
            }
        }
        let long = format!("type:{}", "x".repeat(MAX_QUERY_LEN));
        assert!(parse(&long).is_err());
    }
}
