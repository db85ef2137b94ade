//! Scaling for display: stored figures are bytes and seconds; people read decimal
//! MB/s and GB/s (as fio and the field do) and binary sizes (KiB, MiB, GiB: as they
//! type them), one unit system on every screen.

/// A rate in words: `412 MB/s`, `2.30 GB/s`, `850 kB/s`.
pub fn format_rate(bytes_per_sec: f64) -> String {
    let (value, unit) = decimal(bytes_per_sec);
    format!("{} {unit}B/s", three_digits(value))
}

/// A rate as a bare number of decimal MB/s for table cells: `412.3`.
pub fn mb_per_sec(bytes_per_sec: f64) -> String {
    format!("{:.1}", bytes_per_sec / 1e6)
}

/// A network rate in bits, as iperf3 prints it: `9.41 Gbit/s`, `850 Mbit/s`.
pub fn format_bits_rate(bytes_per_sec: f64) -> String {
    let (value, unit) = decimal(bytes_per_sec * 8.0);
    format!("{} {unit}bit/s", three_digits(value))
}

/// A network rate as a bare number of Gbit/s for table cells: `9.41`.
pub fn gbit_per_sec(bytes_per_sec: f64) -> String {
    format!("{:.2}", bytes_per_sec * 8.0 / 1e9)
}

/// A rate in loops per second for people: `1.234 G`, `456.000 M`.
pub fn format_loops(loops_per_sec: f64) -> String {
    let (value, unit) = match loops_per_sec {
        r if r >= 1e9 => (r / 1e9, "G"),
        r if r >= 1e6 => (r / 1e6, "M"),
        r if r >= 1e3 => (r / 1e3, "k"),
        r => (r, ""),
    };
    format!("{value:.3} {unit}").trim_end().to_string()
}

/// IOPS for a table cell: `41.2k`, `980`.
pub fn format_iops(iops: f64) -> String {
    match iops {
        r if r >= 1e6 => format!("{:.2}M", r / 1e6),
        r if r >= 1e4 => format!("{:.1}k", r / 1e3),
        r => format!("{r:.0}"),
    }
}

/// IOPS in words: `41.2k IOPS`.
pub fn format_iops_words(iops: f64) -> String {
    format!("{} IOPS", format_iops(iops))
}

/// A latency in nanoseconds for people: `850 ns`, `85.2 µs`, `1.23 ms`, `2.10 s`.
pub fn format_latency(ns: f64) -> String {
    let three = |value: f64| match value {
        v if v >= 100.0 => format!("{v:.0}"),
        v if v >= 10.0 => format!("{v:.1}"),
        v => format!("{v:.2}"),
    };
    match ns {
        n if n >= 1e9 => format!("{} s", three(n / 1e9)),
        n if n >= 1e6 => format!("{} ms", three(n / 1e6)),
        n if n >= 1e3 => format!("{} µs", three(n / 1e3)),
        n => format!("{n:.0} ns"),
    }
}

/// Loops per second to three figures, for a line of words: `243 M`, `1.17 G`.
pub fn format_loops_short(loops_per_sec: f64) -> String {
    let (value, unit) = decimal(loops_per_sec);
    format!("{} {unit}", three_digits(value))
        .trim_end()
        .to_string()
}

/// A byte count in binary units to three figures, as sizes are shown everywhere:
/// `2.00 GiB`, `134 MiB`, `999 B`.
pub fn format_bytes(bytes: u64) -> String {
    // A value that would print as 1024 of a unit is shown as 1.00 of the next.
    match binary(bytes, 1023.5) {
        (_, "B") => format!("{bytes} B"),
        (value, unit) => format!("{} {unit}", three_digits(value)),
    }
}

/// A file size as people type it: `10 KiB`, `256 MiB`, `1.18 GiB`, `999 B`.
pub fn format_size(bytes: u64) -> String {
    let (value, unit) = binary(bytes, 1024.0);
    if value.fract() == 0.0 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.2} {unit}")
    }
}

/// `bytes` in the largest binary unit it reaches `carry` of: `(1.5, "MiB")`.
fn binary(bytes: u64, carry: f64) -> (f64, &'static str) {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    let mut value = bytes as f64;
    while value >= carry && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    (value, UNITS[unit])
}

/// A duration in seconds for people: `850 µs`, `12.3 ms`, `4.20 s`.
pub fn format_seconds(seconds: f64) -> String {
    if seconds < 1e-3 {
        format!("{:.0} µs", seconds * 1e6)
    } else if seconds < 1.0 {
        format!("{} ms", three_digits(seconds * 1e3))
    } else {
        format!("{} s", three_digits(seconds))
    }
}

/// How much faster something ran, from the ratio of its rates (new over old), as a
/// person says it: `1.85x faster`, `13% slower`, or `as fast` when the two round equal.
/// A ratio below one is never called faster.
pub fn format_speedup(ratio: f64) -> String {
    let faster = format!("{ratio:.2}");
    let slower_percent = ((1.0 - ratio) * 100.0).round();
    if ratio >= 1.0 && faster != "1.00" {
        format!("{faster}x faster")
    } else if ratio < 1.0 && slower_percent >= 1.0 {
        format!("{slower_percent:.0}% slower")
    } else {
        "as fast".to_string()
    }
}

fn decimal(value: f64) -> (f64, &'static str) {
    const UNITS: [&str; 5] = ["", "k", "M", "G", "T"];
    let mut unit = 0;
    let mut value = value;
    // A value that would print as 1000 of a unit is shown as 1.00 of the next.
    while value >= 999.5 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    (value, UNITS[unit])
}

/// Three significant digits, as fio and iperf3 print.
fn three_digits(value: f64) -> String {
    // Thresholds where rounding adds a digit: 99.96 prints as 100, not 100.0.
    if value >= 99.95 {
        format!("{value:.0}")
    } else if value >= 9.995 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_that_rounds_up_takes_the_next_unit() {
        assert_eq!(format_rate(999.99e6), "1.00 GB/s");
        assert_eq!(format_rate(999.4e6), "999 MB/s");
        assert_eq!(format_rate(99.97e6), "100 MB/s");
        assert_eq!(format_rate(9.996e6), "10.0 MB/s");
        assert_eq!(format_bits_rate(124.99e9 / 8.0), "125 Gbit/s");
    }

    #[test]
    fn rates_and_sizes() {
        assert_eq!(format_rate(412.3e6), "412 MB/s");
        assert_eq!(format_rate(2.3e9), "2.30 GB/s");
        assert_eq!(format_bytes(2_150_000_000), "2.00 GiB");
        assert_eq!(format_bytes(134_000_000), "128 MiB");
        assert_eq!(format_bytes(1_048_575), "1.00 MiB");
        assert_eq!(format_bytes(999), "999 B");
        assert_eq!(format_size(10 << 10), "10 KiB");
        assert_eq!(format_size(256 << 20), "256 MiB");
        assert_eq!(format_size(999), "999 B");
        assert_eq!(format_size(1_234_567), "1.18 MiB");
        assert_eq!(mb_per_sec(209_715_200.0), "209.7");
        assert_eq!(format_seconds(0.00085), "850 µs");
        assert_eq!(format_bits_rate(1.17625e9), "9.41 Gbit/s");
        assert_eq!(gbit_per_sec(1.17625e9), "9.41");
    }

    #[test]
    fn speedups_below_one_read_as_slower() {
        assert_eq!(format_speedup(1.85), "1.85x faster");
        assert_eq!(format_speedup(1.07), "1.07x faster");
        assert_eq!(format_speedup(1.001), "as fast");
        assert_eq!(format_speedup(0.998), "as fast");
        assert_eq!(format_speedup(0.87), "13% slower");
        assert_eq!(format_speedup(0.5), "50% slower");
    }

    #[test]
    fn latencies_and_iops_read_as_people_write_them() {
        assert_eq!(format_latency(850.0), "850 ns");
        assert_eq!(format_latency(85_240.0), "85.2 µs");
        assert_eq!(format_latency(1_234_000.0), "1.23 ms");
        assert_eq!(format_latency(2_100_000_000.0), "2.10 s");
        assert_eq!(format_iops(41_234.0), "41.2k");
        assert_eq!(format_iops(980.4), "980");
        assert_eq!(format_iops(1_500_000.0), "1.50M");
    }
}
