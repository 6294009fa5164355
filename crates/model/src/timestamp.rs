use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// A UTC instant with millisecond precision, shown as `2026-07-30T11:42:25.354Z`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// Milliseconds since the UNIX epoch.
    pub fn from_unix_millis(millis: i64) -> Self {
        Self(millis)
    }

    /// The current time.
    pub fn now() -> Self {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        Self(millis)
    }

    /// Milliseconds since the UNIX epoch.
    pub fn unix_millis(self) -> i64 {
        self.0
    }

    /// Parses the exact form this type displays (`YYYY-MM-DDTHH:MM:SS.mmmZ`).
    pub fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        if b.len() != 24
            || b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
            || b[19] != b'.'
            || b[23] != b'Z'
        {
            return None;
        }
        // Digits read from the bytes: no slice of the text, so no character boundary to miss.
        let num = |from: usize, to: usize| -> Option<i64> {
            b.get(from..to)?.iter().try_fold(0i64, |n, &c| {
                c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
            })
        };
        let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
        let (hour, minute, second, milli) =
            (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return None;
        }
        let days = days_from_civil(year, month, day);
        Some(Self(
            ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + milli,
        ))
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's days-from-civil and civil-from-days algorithms.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(86_400_000);
        let in_day = self.0.rem_euclid(86_400_000);
        let (year, month, day) = civil_from_days(days);
        let (hour, rest) = (in_day / 3_600_000, in_day % 3_600_000);
        let (minute, rest) = (rest / 60_000, rest % 60_000);
        let (second, milli) = (rest / 1000, rest % 1000);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z"
        )
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Timestamp::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "not a timestamp of the form 2026-07-30T11:42:25.354Z: {s}"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in [
            "2026-07-30T11:42:25.354Z",
            "1970-01-01T00:00:00.000Z",
            "2000-02-29T23:59:59.999Z",
        ] {
            assert_eq!(Timestamp::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(
            Timestamp::parse("1970-01-01T00:00:01.500Z")
                .unwrap()
                .unix_millis(),
            1500
        );
        assert!(Timestamp::parse("2001-02-29T00:00:00.000Z").is_none());
        assert!(Timestamp::parse("2001-02-28T00:00:00Z").is_none());
        // Non-ASCII in the digit places (24 bytes, delimiters in place): refused.
        assert!(Timestamp::parse("2026-07-30T11:42:é.354Z").is_none());
        assert!(Timestamp::parse("é026-07-30T11:42:25.35Z").is_none());
        assert!(Timestamp::parse("2026-07-30T11:42:25.+54Z").is_none());
    }
}
