//! Parsers for flag values: sizes, lists of sizes and rates, with messages that quote
//! the bad text and say what would be accepted.

/// What a size suffix may be, for error messages.
const SIZE_SUFFIXES: &str =
    "use K, M, G, T or KiB, MiB, GiB, TiB for powers of 1024, KB, MB, GB, TB for powers of 1000";

/// Parses a size: `4096`, `10K` / `10KiB` (10 × 1024), `10KB` (10 × 1000), `1.5G`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, suffix) = trimmed.split_at(split);
    if number.is_empty() {
        return Err(format!(
            "invalid size \"{text}\": it must start with a number"
        ));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid size \"{text}\": \"{number}\" is not a number"))?;
    let multiplier: f64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024f64.powi(2),
        "g" | "gib" => 1024f64.powi(3),
        "t" | "tib" => 1024f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => {
            return Err(format!(
                "invalid size \"{text}\": unknown suffix {} ({SIZE_SUFFIXES})",
                suffix.trim()
            ));
        }
    };
    let bytes = value * multiplier;
    if bytes.fract() != 0.0 {
        return Err(format!(
            "invalid size \"{text}\": not a whole number of bytes"
        ));
    }
    if bytes > u64::MAX as f64 / 2.0 {
        return Err(format!("invalid size \"{text}\": too large"));
    }
    Ok(bytes as u64)
}

/// A list of sizes given as one flag value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeList(pub Vec<u64>);

/// Parses a comma-separated list of sizes: `10K,1M,1G`.
pub fn parse_size_list(text: &str) -> Result<SizeList, String> {
    if text.trim().is_empty() {
        return Err("the list is empty: give sizes such as 10K,1M,1G".into());
    }
    text.split(',')
        .map(parse_size)
        .collect::<Result<_, _>>()
        .map(SizeList)
}

/// Counts given as a range or a list (`--threads`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountList(pub Vec<usize>);

/// Parses a range of counts: `1..8` (inclusive) or `1,2,4,8`.
pub fn parse_count_list(text: &str) -> Result<CountList, String> {
    let bad = || format!("invalid range \"{text}\" (such as 1..8 or 1,2,4,8)");
    let number = |t: &str| t.trim().parse::<usize>().map_err(|_| bad());
    let counts: Vec<usize> = match text.split_once("..") {
        Some((from, to)) => {
            let (from, to) = (number(from)?, number(to.trim_start_matches('='))?);
            if from > to || to - from > 100_000 {
                return Err(bad());
            }
            (from..=to).collect()
        }
        None => text.split(',').map(number).collect::<Result<_, _>>()?,
    };
    if counts.is_empty() {
        return Err(bad());
    }
    Ok(CountList(counts))
}

/// Parses a data rate in bytes or bits per second: `600MB/s`, `550M`, `10Gbit/s`.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    let body = trimmed
        .strip_suffix("/s")
        .or_else(|| trimmed.strip_suffix("ps"))
        .unwrap_or(trimmed);
    // As the field writes them: bits with a lowercase b or "bit" (Gb, Gbit, Gbps),
    // bytes with a capital B or a bare size (GB, GiB, G).
    let bits = body
        .strip_suffix("bit")
        .or_else(|| body.strip_suffix("Bit"))
        .or_else(|| body.strip_suffix('b'));
    let bytes = match bits {
        Some(number) => parse_size(&format!("{number}B")).map(|b| b as f64 / 8.0),
        None => parse_size(body).map(|b| b as f64),
    }
    .map_err(|e| format!("invalid rate \"{text}\" (such as 600MB/s or 10Gbit/s): {e}"))?;
    if bytes <= 0.0 {
        return Err(format!("invalid rate \"{text}\": it must be above zero"));
    }
    Ok(bytes)
}

/// Longest time any flag takes: longer is a typo, and would overflow clocks.
const LONGEST: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// Parses a time as [`parse_time`] does, or a bare number of seconds as iperf3 takes it (`-t 10`).
pub fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds >= 0.0 => {
            parse_time(&format!("{}ms", (seconds * 1000.0).round() as u64))
                .map_err(|_| format!("invalid time \"{text}\": over 30 days"))
        }
        Ok(_) => Err(format!("invalid time \"{text}\": give seconds above zero")),
        Err(_) => parse_time(text),
    }
}

/// Parses a time: `100ms`, `10s`, `2m`, `1h 30m`, up to 30 days.
pub fn parse_time(text: &str) -> Result<std::time::Duration, String> {
    let time = humantime::parse_duration(text.trim())
        .map_err(|e| format!("invalid time \"{text}\" (such as 100ms, 10s or 2m): {e}"))?;
    if time > LONGEST {
        return Err(format!("time \"{text}\" is too long (30 days at most)"));
    }
    Ok(time)
}

/// Parses a sampling interval: a time from 1 ms to 1 hour.
pub fn parse_interval(text: &str) -> Result<std::time::Duration, String> {
    let interval = parse_time(text)?;
    if interval < std::time::Duration::from_millis(1)
        || interval > std::time::Duration::from_secs(3600)
    {
        return Err(format!("interval \"{text}\" is out of range (1ms to 1h)"));
    }
    Ok(interval)
}

/// A host with an optional port, as `--peer` takes it: `host`, `host:5301`,
/// `192.0.2.1:5301`, `::1`, `[::1]` or `[::1]:5301`.
pub fn parse_host_port(text: &str) -> Result<(String, Option<u16>), String> {
    let bad = |why: &str| {
        format!("invalid host \"{text}\": {why} (such as host, host:5301 or [::1]:5301)")
    };
    let port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| bad("the port is not a number from 1 to 65535"))
    };
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(|| bad("no closing ]"))?;
        return match after {
            "" => Ok((host.to_string(), None)),
            _ => match after.strip_prefix(':') {
                Some(p) => Ok((host.to_string(), Some(port(p)?))),
                None => Err(bad("text after ]")),
            },
        };
    }
    match text.matches(':').count() {
        0 if !text.is_empty() => Ok((text.to_string(), None)),
        0 => Err(bad("it is empty")),
        // One colon: host and port; more: a bare IPv6 address.
        1 => {
            let (host, p) = text.split_once(':').expect("one colon");
            if host.is_empty() {
                return Err(bad("no host before the port"));
            }
            Ok((host.to_string(), Some(port(p)?)))
        }
        _ => Ok((text.to_string(), None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_take_an_optional_port_and_ipv6_in_brackets() {
        let ok = |t: &str| parse_host_port(t).unwrap();
        assert_eq!(ok("peer"), ("peer".into(), None));
        assert_eq!(ok("10.0.0.2:5399"), ("10.0.0.2".into(), Some(5399)));
        assert_eq!(ok("::1"), ("::1".into(), None));
        assert_eq!(ok("[::1]"), ("::1".into(), None));
        assert_eq!(ok("[fe80::1]:5301"), ("fe80::1".into(), Some(5301)));
        for bad in [
            "",
            "host:",
            "host:0",
            "host:99999",
            ":5301",
            "[::1",
            "[::1]x",
        ] {
            assert!(parse_host_port(bad).is_err(), "{bad:?}");
        }
    }
    use proptest::prelude::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("10K"), Ok(10240));
        assert_eq!(parse_size("10KiB"), Ok(10240));
        assert_eq!(parse_size("10KB"), Ok(10000));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1.5M"), Ok(1_572_864));
        assert_eq!(parse_size("5MB"), Ok(5_000_000));
        assert_eq!(parse_size("3m"), Ok(3 << 20));
    }

    #[test]
    fn bad_sizes_quote_the_text() {
        let err = parse_size("10Q").unwrap_err();
        assert!(
            err.contains("\"10Q\"") && err.contains("unknown suffix Q"),
            "{err}"
        );
        assert!(
            parse_size("K")
                .unwrap_err()
                .contains("must start with a number")
        );
        assert!(parse_size("1.2.3K").is_err());
        assert!(parse_size("0.3").unwrap_err().contains("whole number"));
        let err = parse_size_list("10K,10Q").unwrap_err();
        assert!(err.contains("\"10Q\""), "{err}");
    }

    #[test]
    fn times() {
        assert_eq!(
            parse_time("100ms"),
            Ok(std::time::Duration::from_millis(100))
        );
        assert_eq!(parse_time("2m"), Ok(std::time::Duration::from_secs(120)));
        assert!(parse_time("soon").unwrap_err().contains("\"soon\""));
        assert!(
            parse_time("500000000000y")
                .unwrap_err()
                .contains("too long")
        );
        assert!(parse_interval("1us").unwrap_err().contains("out of range"));
        assert_eq!(
            parse_interval("10ms"),
            Ok(std::time::Duration::from_millis(10))
        );
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("600MB/s"), Ok(600e6));
        assert_eq!(parse_rate("10Gbit/s"), Ok(1.25e9));
        assert_eq!(parse_rate("10Gbps"), Ok(1.25e9));
        assert_eq!(parse_rate("600Mb/s"), Ok(75e6));
        assert_eq!(parse_rate("600MBps"), Ok(600e6));
        assert_eq!(parse_rate("1.5GB/s"), Ok(1.5e9));
        assert_eq!(parse_rate("200M"), Ok(209_715_200.0));
        assert!(parse_rate("fast").unwrap_err().contains("\"fast\""));
    }

    proptest! {
        #[test]
        fn whole_units_round_trip(n in 0u64..100_000, unit in 0usize..4) {
            let (suffix, multiplier) = [("K", 1u64 << 10), ("M", 1 << 20), ("KB", 1000), ("MB", 1_000_000)][unit];
            prop_assert_eq!(parse_size(&format!("{n}{suffix}")), Ok(n * multiplier));
        }

        #[test]
        fn never_panics(text in "\\PC{0,12}") {
            let _ = parse_size(&text);
            let _ = parse_rate(&text);
        }
    }
}
