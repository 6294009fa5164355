//! Query strings: only declared parameters, each at most once, with typed values.
use std::collections::HashMap;

use crate::http::error::ApiError;

/// The parameters of a query string, checked against the names an endpoint declares.
pub(crate) struct Query<'a> {
    values: HashMap<&'a str, String>,
}

impl<'a> Query<'a> {
    /// Parses `raw` (without `?`); unknown or repeated parameters are a 400
    /// `invalid_query_string`.
    pub(crate) fn parse(raw: Option<&str>, allowed: &[&'a str]) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw.unwrap_or(""))
            .map_err(|err| ApiError::invalid_query(format!("Invalid query string: {err}"), None))?;
        let mut values = HashMap::new();
        for (name, value) in pairs {
            let Some(known) = allowed.iter().find(|a| **a == name) else {
                return Err(ApiError::invalid_query(
                    format!("Additional properties not allowed: {name}"),
                    None,
                ));
            };
            if values.insert(*known, value).is_some() {
                return Err(ApiError::invalid_query(
                    "Parameter given more than once",
                    Some(known),
                ));
            }
        }
        Ok(Self { values })
    }

    /// An integer parameter in `min..=max`.
    pub(crate) fn integer(&self, name: &str, min: u64, max: u64) -> Result<Option<u64>, ApiError> {
        let Some(text) = self.values.get(name) else {
            return Ok(None);
        };
        let value: u64 = text.parse().map_err(|_| {
            ApiError::invalid_query(
                format!("Expected type integer but found type string ({text:?})"),
                Some(name),
            )
        })?;
        if value < min {
            return Err(ApiError::invalid_query(
                format!("Value {value} is less than minimum {min}"),
                Some(name),
            ));
        }
        if value > max {
            return Err(ApiError::invalid_query(
                format!("Value {value} is greater than maximum {max}"),
                Some(name),
            ));
        }
        Ok(Some(value))
    }

    /// A string parameter, as given (percent-decoded).
    pub(crate) fn string(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// A boolean parameter (`true` / `false`).
    pub(crate) fn boolean(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.values.get(name).map(String::as_str) {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(other) => Err(ApiError::invalid_query(
                format!("Expected type boolean but found type string ({other:?})"),
                Some(name),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_parameters_parse() {
        let q = Query::parse(
            Some("page=2&per_page=10&include_totals=true"),
            &["page", "per_page", "include_totals"],
        )
        .expect("query");
        assert_eq!(q.integer("page", 0, u64::MAX).expect("page"), Some(2));
        assert_eq!(q.integer("per_page", 0, 100).expect("per_page"), Some(10));
        assert_eq!(q.boolean("include_totals").expect("totals"), Some(true));
        assert_eq!(q.boolean("absent").expect("absent"), None);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let allowed = ["page", "per_page", "include_totals"];
        for (raw, name, check) in [
            ("page=-1", "page", 0),
            ("page=x", "page", 0),
            ("per_page=101", "per_page", 1),
            ("include_totals=yes", "include_totals", 2),
        ] {
            let q = Query::parse(Some(raw), &allowed).expect("parse");
            let err = match check {
                0 => q.integer(name, 0, u64::MAX).expect_err(raw),
                1 => q.integer(name, 0, 100).expect_err(raw),
                _ => q.boolean(name).expect_err(raw),
            };
            assert_eq!(err.error_code(), Some("invalid_query_string"));
            assert!(err.message().contains(name), "{}", err.message());
        }
        for raw in ["fields=id", "page=1&page=2"] {
            let err = Query::parse(Some(raw), &allowed).err().expect(raw);
            assert_eq!(err.error_code(), Some("invalid_query_string"));
        }
    }
}
