//! Flink's textual units: durations (`"10 s"`, `"500 ms"`) and memory sizes (`"32kb"`, `"1g"`).
//!
//! Both follow Flink's `TimeUtils` / `MemorySize` grammar so a Flink user's values carry over:
//! an unsigned integer, optional whitespace, an optional case-insensitive unit. A plain number
//! means milliseconds for durations and bytes for memory sizes. Fractions are rejected, as in
//! Flink, so every value is exact and formatting round-trips.

use std::time::Duration;

/// Duration units, largest first: the first label is the one [`format_duration`] prints.
const TIME_UNITS: &[(u128, &[&str])] = &[
    (86_400_000_000_000, &["d", "day", "days"]),
    (3_600_000_000_000, &["h", "hour", "hours"]),
    (60_000_000_000, &["min", "m", "minute", "minutes"]),
    (1_000_000_000, &["s", "sec", "secs", "second", "seconds"]),
    (
        1_000_000,
        &["ms", "milli", "millis", "millisecond", "milliseconds"],
    ),
    (
        1_000,
        &["µs", "us", "micro", "micros", "microsecond", "microseconds"],
    ),
    (1, &["ns", "nano", "nanos", "nanosecond", "nanoseconds"]),
];

/// Memory units, largest first, all binary powers as in Flink; the second label is printed.
const MEMORY_UNITS: &[(u64, &[&str])] = &[
    (1 << 40, &["t", "tb", "tebibytes"]),
    (1 << 30, &["g", "gb", "gibibytes"]),
    (1 << 20, &["m", "mb", "mebibytes"]),
    (1 << 10, &["k", "kb", "kibibytes"]),
    (1, &["b", "bytes"]),
];

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Splits `"10 s"` into `("10", "s")`; the unit is lower-cased and may be empty.
fn split_number_unit<'a>(s: &'a str, what: &str) -> Result<(&'a str, String), String> {
    let s = s.trim();
    let digits_end = s
        .char_indices()
        .find(|(_, c)| !c.is_ascii_digit())
        .map_or(s.len(), |(i, _)| i);
    let (number, unit) = s.split_at(digits_end);
    if number.is_empty() {
        return Err(format!(
            "expected {what}: a whole number optionally followed by a unit"
        ));
    }
    Ok((number, unit.trim().to_lowercase()))
}

/// Parses a Flink duration: `"10 s"`, `"500ms"`, `"1 min"`, `"2h"`; a plain number is milliseconds.
///
/// The error text says what was expected, ready to follow "invalid value ...: ".
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    const WHAT: &str = r#"a duration such as "10 s", "500 ms" or "1 min""#;
    let (number, unit) = split_number_unit(s, WHAT)?;
    let multiplier = if unit.is_empty() {
        1_000_000
    } else {
        TIME_UNITS
            .iter()
            .find(|(_, labels)| labels.contains(&unit.as_str()))
            .map(|(nanos, _)| *nanos)
            .ok_or_else(|| {
                format!(
                    "expected {WHAT}; unknown time unit \"{unit}\" (use ns, us, ms, s, min, h or d)"
                )
            })?
    };
    let too_large = || format!("expected {WHAT}; this one is too large");
    let nanos = number
        .parse::<u128>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(too_large)?;
    let secs = u64::try_from(nanos / NANOS_PER_SEC).map_err(|_| too_large())?;
    // The remainder is below 10^9, so it always fits.
    let subsec = (nanos % NANOS_PER_SEC) as u32;
    Ok(Duration::new(secs, subsec))
}

/// Formats a duration in the largest unit that represents it exactly: `"10 s"`, `"500 ms"`, `"5 min"`.
///
/// The output parses back to the same duration with [`parse_duration`].
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0 ms".to_owned();
    }
    // The last unit (ns) divides everything, so the search always succeeds.
    let (size, labels) = TIME_UNITS
        .iter()
        .find(|(size, _)| nanos.is_multiple_of(*size))
        .unwrap_or(&TIME_UNITS[TIME_UNITS.len() - 1]);
    format!("{} {}", nanos / size, labels[0])
}

/// Parses a Flink memory size: `"32kb"`, `"64 mb"`, `"1g"`, `"1728m"`; a plain number is bytes.
///
/// Units are binary (1kb = 1024 bytes), as in Flink. The error text says what was expected.
pub fn parse_memory_size(s: &str) -> Result<u64, String> {
    const WHAT: &str = r#"a memory size such as "32kb", "64 mb" or "1g""#;
    let (number, unit) = split_number_unit(s, WHAT)?;
    let multiplier = if unit.is_empty() {
        1
    } else {
        MEMORY_UNITS
            .iter()
            .find(|(_, labels)| labels.contains(&unit.as_str()))
            .map(|(bytes, _)| *bytes)
            .ok_or_else(|| {
                format!("expected {WHAT}; unknown memory unit \"{unit}\" (use b, kb, mb, gb or tb)")
            })?
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| format!("expected {WHAT}; this one is too large"))
}

/// Formats a byte count in the largest unit that represents it exactly: `"32kb"`, `"1728mb"`, `"100b"`.
///
/// The output parses back to the same size with [`parse_memory_size`].
pub fn format_memory_size(bytes: u64) -> String {
    if bytes == 0 {
        return "0b".to_owned();
    }
    let (size, labels) = MEMORY_UNITS
        .iter()
        .find(|(size, _)| bytes.is_multiple_of(*size))
        .unwrap_or(&MEMORY_UNITS[MEMORY_UNITS.len() - 1]);
    // Print "kb"/"mb"/..., but plain "b" rather than "bytes" to keep the compact form.
    let label = if *size == 1 { labels[0] } else { labels[1] };
    format!("{}{label}", bytes / size)
}

/// `metrics.reporter.prom.port`: a port or an inclusive range of ports (`9250-9260`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    /// The first port tried.
    pub first: u16,
    /// The last port tried.
    pub last: u16,
}

impl PortRange {
    /// Parses `9249` or `9250-9260`; the error says what is wrong.
    pub fn parse(raw: &str) -> Result<PortRange, String> {
        let port = |s: &str| {
            s.trim()
                .parse::<u16>()
                .map_err(|_| format!("'{}' is not a port (0 to 65535)", s.trim()))
        };
        let range = match raw.split_once('-') {
            Some((a, b)) => PortRange {
                first: port(a)?,
                last: port(b)?,
            },
            None => {
                let p = port(raw)?;
                PortRange { first: p, last: p }
            }
        };
        if range.first > range.last {
            return Err(format!(
                "the range {}-{} is empty: its first port must not exceed its last",
                range.first, range.last
            ));
        }
        Ok(range)
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn durations_parse_in_every_flink_unit() {
        let ms = Duration::from_millis;
        let cases = [
            ("10 s", Duration::from_secs(10)),
            ("10s", Duration::from_secs(10)),
            ("  10   S ", Duration::from_secs(10)),
            ("500 ms", ms(500)),
            ("500", ms(500)),
            ("1 min", Duration::from_secs(60)),
            ("1m", Duration::from_secs(60)),
            ("3 minutes", Duration::from_secs(180)),
            ("2h", Duration::from_secs(7200)),
            ("1 hours", Duration::from_secs(3600)),
            ("1 d", Duration::from_secs(86_400)),
            ("2 days", Duration::from_secs(172_800)),
            ("7 ns", Duration::from_nanos(7)),
            ("7 nanos", Duration::from_nanos(7)),
            ("3 us", Duration::from_micros(3)),
            ("3 µs", Duration::from_micros(3)),
            ("3 micros", Duration::from_micros(3)),
            ("4 milli", ms(4)),
            ("4 millis", ms(4)),
            ("4 millisecond", ms(4)),
            ("4 milliseconds", ms(4)),
            ("5 sec", Duration::from_secs(5)),
            ("5 secs", Duration::from_secs(5)),
            ("5 second", Duration::from_secs(5)),
            ("5 seconds", Duration::from_secs(5)),
            ("0", Duration::ZERO),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_duration(text), Ok(expected), "{text:?}");
        }
    }

    #[test]
    fn bad_durations_are_rejected_with_a_reason() {
        for bad in [
            "",
            "s",
            "abc",
            "-1 s",
            "1.5 s",
            "10 xs",
            "10 s s",
            "99999999999999999999999 d",
        ] {
            let err = parse_duration(bad).expect_err(bad);
            assert!(err.contains("duration"), "{bad:?}: {err}");
        }
        assert!(parse_duration("10 xs").unwrap_err().contains("\"xs\""));
    }

    #[test]
    fn durations_format_in_the_largest_exact_unit() {
        assert_eq!(format_duration(Duration::from_secs(10)), "10 s");
        assert_eq!(format_duration(Duration::from_millis(500)), "500 ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500 ms");
        assert_eq!(format_duration(Duration::from_secs(300)), "5 min");
        assert_eq!(format_duration(Duration::from_secs(3600)), "1 h");
        assert_eq!(format_duration(Duration::from_secs(86_400)), "1 d");
        assert_eq!(format_duration(Duration::from_nanos(1)), "1 ns");
        assert_eq!(format_duration(Duration::from_micros(3)), "3 µs");
        assert_eq!(format_duration(Duration::ZERO), "0 ms");
    }

    #[test]
    fn memory_sizes_parse_in_every_flink_unit() {
        let cases = [
            ("32kb", 32 << 10),
            ("32 k", 32 << 10),
            ("32 KiBiBytes", 32 << 10),
            ("64 mb", 64 << 20),
            ("1728m", 1728 << 20),
            ("2 mebibytes", 2 << 20),
            ("1g", 1 << 30),
            ("1 GB", 1 << 30),
            ("1 gibibytes", 1 << 30),
            ("2t", 2 << 40),
            ("2 tb", 2 << 40),
            ("2 tebibytes", 2 << 40),
            ("100", 100),
            ("100b", 100),
            ("100 bytes", 100),
            ("0", 0),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_memory_size(text), Ok(expected), "{text:?}");
        }
    }

    #[test]
    fn bad_memory_sizes_are_rejected_with_a_reason() {
        for bad in [
            "",
            "mb",
            "1.5 mb",
            "-1",
            "12 parsecs",
            "20000000 tb",
            "1 kb kb",
        ] {
            let err = parse_memory_size(bad).expect_err(bad);
            assert!(err.contains("memory size"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn memory_sizes_format_in_the_largest_exact_unit() {
        assert_eq!(format_memory_size(32 << 10), "32kb");
        assert_eq!(format_memory_size(1728 << 20), "1728mb");
        assert_eq!(format_memory_size(1 << 30), "1gb");
        assert_eq!(format_memory_size(3 << 40), "3tb");
        assert_eq!(format_memory_size(1025), "1025b");
        assert_eq!(format_memory_size(0), "0b");
    }

    proptest! {
        #[test]
        fn duration_format_round_trips(secs in any::<u64>(), nanos in 0u32..1_000_000_000) {
            let d = Duration::new(secs, nanos);
            prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }

        #[test]
        fn whole_unit_durations_round_trip(n in 0u64..1_000_000, unit in 0usize..TIME_UNITS.len()) {
            let (size, labels) = TIME_UNITS[unit];
            let d = parse_duration(&format!("{n} {}", labels[0])).expect("valid duration");
            prop_assert_eq!(d.as_nanos(), u128::from(n) * size);
            prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }

        #[test]
        fn memory_size_format_round_trips(bytes in any::<u64>()) {
            prop_assert_eq!(parse_memory_size(&format_memory_size(bytes)), Ok(bytes));
        }

        #[test]
        fn whole_unit_memory_sizes_round_trip(n in 0u64..1_000_000, unit in 0usize..MEMORY_UNITS.len()) {
            let (size, labels) = MEMORY_UNITS[unit];
            let bytes = parse_memory_size(&format!("{n}{}", labels[1])).expect("valid size");
            prop_assert_eq!(bytes, n * size);
            prop_assert_eq!(parse_memory_size(&format_memory_size(bytes)), Ok(bytes));
        }
    }

    #[test]
    fn parses_ports_and_ranges() {
        assert_eq!(
            PortRange::parse("9249").unwrap(),
            PortRange {
                first: 9249,
                last: 9249
            }
        );
        assert_eq!(
            PortRange::parse(" 9250 - 9260 ").unwrap(),
            PortRange {
                first: 9250,
                last: 9260
            }
        );
        assert!(PortRange::parse("9260-9250").unwrap_err().contains("empty"));
        assert!(PortRange::parse("http").unwrap_err().contains("'http'"));
        assert!(PortRange::parse("70000").is_err());
    }
}
