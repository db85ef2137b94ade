//! Physical data-rate limits of storage links, after line encoding.
//!
//! Pure conversions from the strings sysfs shows (`8.0 GT/s PCIe`, `6.0 Gbps`,
//! `5000`) to payload bytes per second, kept apart from the sysfs walk so that
//! every figure can be checked by a test without the hardware.

/// A line code: how many bits on the wire carry how many bits of data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// 8b/10b: PCIe 1.x and 2.x, SATA, USB 3.0 at 5 Gbit/s.
    B8b10b,
    /// 128b/130b: PCIe 3.0 to 5.0 (and an upper bound for PCIe 6.0).
    B128b130b,
    /// 128b/132b: USB 3.1 and 3.2 at 10 and 20 Gbit/s.
    B128b132b,
}

impl Encoding {
    /// The fraction of line bits that carry data.
    pub fn efficiency(self) -> f64 {
        match self {
            Self::B8b10b => 8.0 / 10.0,
            Self::B128b130b => 128.0 / 130.0,
            Self::B128b132b => 128.0 / 132.0,
        }
    }

    /// Its usual name (`8b/10b`).
    pub fn name(self) -> &'static str {
        match self {
            Self::B8b10b => "8b/10b",
            Self::B128b130b => "128b/130b",
            Self::B128b132b => "128b/132b",
        }
    }
}

/// A link's maximum data rate and how it was derived, in words.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkRate {
    /// Payload bytes per second the link can carry at most.
    pub bytes_per_sec: f64,
    /// How that figure was obtained (`SATA link 6.0 Gbps (600 MB/s after 8b/10b)`).
    pub detail: String,
}

/// Parses a PCIe `current_link_speed` (`8.0 GT/s PCIe`, `2.5 GT/s`) into GT/s.
pub fn parse_pcie_gts(text: &str) -> Option<f64> {
    let mut words = text.split_whitespace();
    let gts: f64 = words.next()?.parse().ok()?;
    (words.next()? == "GT/s" && gts > 0.0).then_some(gts)
}

/// Parses a PCIe `current_link_width` (`4`) into lanes; a width of 0 is a link down.
pub fn parse_pcie_width(text: &str) -> Option<u32> {
    let lanes: u32 = text.trim().trim_start_matches('x').parse().ok()?;
    (lanes > 0).then_some(lanes)
}

/// The line code of a PCIe generation given its transfer rate in GT/s.
pub fn pcie_encoding(gts: f64) -> Option<Encoding> {
    let is = |rate: f64| (gts - rate).abs() < 0.01;
    if is(2.5) || is(5.0) {
        Some(Encoding::B8b10b)
    } else if is(8.0) || is(16.0) || is(32.0) {
        Some(Encoding::B128b130b)
    } else if is(64.0) {
        // PCIe 6.0 sends FLITs (1b/1b, about 242 of 256 bytes carry data);
        // 128b/130b keeps the figure an upper bound, which is what a limit must be.
        Some(Encoding::B128b130b)
    } else {
        None
    }
}

/// Payload bytes per second of a PCIe link of `lanes` lanes at `gts` GT/s.
pub fn pcie_bytes_per_sec(gts: f64, lanes: u32) -> Option<f64> {
    let encoding = pcie_encoding(gts)?;
    Some(gts * 1e9 * f64::from(lanes) * encoding.efficiency() / 8.0)
}

/// The limit of a PCIe link from its sysfs speed and width strings.
pub fn pcie_link(speed: &str, width: &str) -> Option<LinkRate> {
    let gts = parse_pcie_gts(speed)?;
    let lanes = parse_pcie_width(width)?;
    let bytes_per_sec = pcie_bytes_per_sec(gts, lanes)?;
    let encoding = pcie_encoding(gts)?;
    Some(LinkRate {
        bytes_per_sec,
        detail: format!(
            "PCIe {gts:.1} GT/s x{lanes} ({} after {})",
            rate_words(bytes_per_sec),
            encoding.name()
        ),
    })
}

/// Parses a SATA `sata_spd` (`6.0 Gbps`) into Gbit/s; `<unknown>` gives `None`.
pub fn parse_sata_gbps(text: &str) -> Option<f64> {
    let mut words = text.split_whitespace();
    let gbps: f64 = words.next()?.parse().ok()?;
    (words.next()? == "Gbps" && gbps > 0.0).then_some(gbps)
}

/// Payload bytes per second of a SATA link at `gbps` Gbit/s (all generations use 8b/10b).
pub fn sata_bytes_per_sec(gbps: f64) -> f64 {
    gbps * 1e9 * Encoding::B8b10b.efficiency() / 8.0
}

/// The limit of a SATA link from its sysfs `sata_spd` string.
pub fn sata_link(sata_spd: &str) -> Option<LinkRate> {
    let gbps = parse_sata_gbps(sata_spd)?;
    let bytes_per_sec = sata_bytes_per_sec(gbps);
    Some(LinkRate {
        bytes_per_sec,
        detail: format!(
            "SATA link {gbps:.1} Gbps ({} after 8b/10b)",
            rate_words(bytes_per_sec)
        ),
    })
}

/// Parses a USB device's `speed` (`480`, `1.5`, `5000`) into Mbit/s.
pub fn parse_usb_mbps(text: &str) -> Option<f64> {
    let mbps: f64 = text.trim().parse().ok()?;
    (mbps > 0.0).then_some(mbps)
}

/// The line code of a USB signalling rate in Mbit/s; `None` for USB 1 and 2,
/// which send NRZI with bit stuffing rather than a block code.
pub fn usb_encoding(mbps: f64) -> Option<Encoding> {
    if mbps == 5000.0 {
        Some(Encoding::B8b10b)
    } else if mbps == 10000.0 || mbps == 20000.0 {
        Some(Encoding::B128b132b)
    } else {
        None
    }
}

/// The limit of a USB link from a device's sysfs `speed` string.
pub fn usb_link(speed: &str) -> Option<LinkRate> {
    let mbps = parse_usb_mbps(speed)?;
    let shown = trim_number(mbps);
    if [1.5, 12.0, 480.0].contains(&mbps) {
        let bytes_per_sec = mbps * 1e6 / 8.0;
        return Some(LinkRate {
            bytes_per_sec,
            detail: format!(
                "USB {shown} Mbit/s signalling rate ({} before protocol overhead)",
                rate_words(bytes_per_sec)
            ),
        });
    }
    let encoding = usb_encoding(mbps)?;
    let bytes_per_sec = mbps * 1e6 * encoding.efficiency() / 8.0;
    Some(LinkRate {
        bytes_per_sec,
        detail: format!(
            "USB {shown} Mbit/s ({} after {})",
            rate_words(bytes_per_sec),
            encoding.name()
        ),
    })
}

/// A rate in decimal units with three significant digits, for the words of a
/// step's detail only; reports scale stored bytes per second themselves.
pub(crate) fn rate_words(bytes_per_sec: f64) -> String {
    let (value, unit) = if bytes_per_sec >= 1e9 {
        (bytes_per_sec / 1e9, "GB/s")
    } else if bytes_per_sec >= 1e6 {
        (bytes_per_sec / 1e6, "MB/s")
    } else {
        (bytes_per_sec / 1e3, "kB/s")
    };
    let decimals = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{} {unit}", trim_number_to(value, decimals))
}

fn trim_number(value: f64) -> String {
    trim_number_to(value, 3)
}

fn trim_number_to(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= b * 1e-9
    }

    #[test]
    fn pcie_gen3_x4_is_3_938_gb_per_sec() {
        let link = pcie_link("8.0 GT/s PCIe", "4").unwrap();
        assert!(close(link.bytes_per_sec, 8e9 * 4.0 * 128.0 / 130.0 / 8.0));
        assert!((link.bytes_per_sec - 3.938e9).abs() < 1e6);
        assert_eq!(link.detail, "PCIe 8.0 GT/s x4 (3.94 GB/s after 128b/130b)");
    }

    #[test]
    fn pcie_generations_use_their_encoding() {
        assert!(close(pcie_bytes_per_sec(2.5, 1).unwrap(), 250e6));
        assert!(close(pcie_bytes_per_sec(5.0, 4).unwrap(), 2e9));
        assert!(close(
            pcie_bytes_per_sec(16.0, 4).unwrap(),
            16e9 * 4.0 * 128.0 / 130.0 / 8.0
        ));
        assert_eq!(pcie_encoding(32.0), Some(Encoding::B128b130b));
        assert_eq!(pcie_encoding(64.0), Some(Encoding::B128b130b));
        assert_eq!(pcie_encoding(7.0), None);
    }

    #[test]
    fn pcie_strings_parse_or_say_unknown() {
        assert_eq!(parse_pcie_gts("16.0 GT/s PCIe"), Some(16.0));
        assert_eq!(parse_pcie_gts("2.5 GT/s"), Some(2.5));
        assert_eq!(parse_pcie_gts("Unknown"), None);
        assert_eq!(parse_pcie_gts("Unknown speed"), None);
        assert_eq!(parse_pcie_width("4\n"), Some(4));
        assert_eq!(parse_pcie_width("0"), None);
        assert_eq!(pcie_link("8.0 GT/s PCIe", "0"), None);
    }

    #[test]
    fn sata_6_gbps_is_600_mb_per_sec() {
        let link = sata_link("6.0 Gbps").unwrap();
        assert!(close(link.bytes_per_sec, 600e6));
        assert_eq!(link.detail, "SATA link 6.0 Gbps (600 MB/s after 8b/10b)");
        assert!(close(sata_link("3.0 Gbps").unwrap().bytes_per_sec, 300e6));
        assert_eq!(sata_link("<unknown>"), None);
        assert_eq!(parse_sata_gbps(""), None);
    }

    #[test]
    fn usb_rates_follow_their_encoding() {
        let usb3 = usb_link("5000").unwrap();
        assert!(close(usb3.bytes_per_sec, 500e6));
        assert_eq!(usb3.detail, "USB 5000 Mbit/s (500 MB/s after 8b/10b)");
        let gen2 = usb_link("10000").unwrap();
        assert!(close(gen2.bytes_per_sec, 10e9 * 128.0 / 132.0 / 8.0));
        assert!((gen2.bytes_per_sec - 1.212e9).abs() < 1e6);
        let gen2x2 = usb_link("20000").unwrap();
        assert!(close(gen2x2.bytes_per_sec, 20e9 * 128.0 / 132.0 / 8.0));
    }

    #[test]
    fn usb_2_and_older_give_the_signalling_rate() {
        let usb2 = usb_link("480").unwrap();
        assert!(close(usb2.bytes_per_sec, 60e6));
        assert!(usb2.detail.contains("signalling rate"), "{}", usb2.detail);
        assert!(close(usb_link("1.5").unwrap().bytes_per_sec, 187_500.0));
        assert!(close(usb_link("12").unwrap().bytes_per_sec, 1.5e6));
        assert_eq!(usb_link("unknown"), None);
        assert_eq!(usb_link("40000"), None);
    }

    #[test]
    fn rate_words_keep_three_digits() {
        assert_eq!(rate_words(600e6), "600 MB/s");
        assert_eq!(rate_words(3.938e9), "3.94 GB/s");
        assert_eq!(rate_words(60e6), "60 MB/s");
        assert_eq!(rate_words(1.5e6), "1.5 MB/s");
        assert_eq!(rate_words(187_500.0), "188 kB/s");
    }
}
