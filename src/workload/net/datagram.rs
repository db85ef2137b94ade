//! UDP datagrams as iperf3 sends them (iperf_udp.c), and as ratelab's own UDP test
//! sends them too: a header of the sender's clock and a count from 1 (32 or 64 bits,
//! `--udp-counters-64bit`), and the receiver's tally as iperf3 keeps it: datagrams
//! lost where the count skips, out of order where it goes back (each taking back one
//! loss), and RFC 3550's running jitter. Pure, so it is tested without a socket.

/// Bytes of the header with 32-bit counts: seconds, microseconds, count.
pub const HEADER_BYTES: usize = 12;

/// Bytes of the header with 64-bit counts.
pub const WIDE_HEADER_BYTES: usize = 16;

/// The smallest datagram iperf3 sends (MIN_UDP_BLOCKSIZE: a header with a 64-bit count).
pub const MIN_DATAGRAM_BYTES: u64 = 16;

/// The largest: 65535 less the IPv4 and UDP headers (MAX_UDP_BLOCKSIZE).
pub const MAX_DATAGRAM_BYTES: u64 = 65_507;

/// What a client sends to open a UDP stream (UDP_CONNECT_MSG as it lies in memory).
pub const CONNECT: [u8; 4] = *b"9876";

/// What clients before iperf 3.12 sent (123456789 as it lies in memory).
pub const LEGACY_CONNECT: [u8; 4] = 123_456_789u32.to_le_bytes();

/// What the server answers (UDP_CONNECT_REPLY).
pub const REPLY: [u8; 4] = *b"6789";

/// The header of one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The sender's clock when it sent the datagram: whole seconds.
    pub sec: u32,
    /// And microseconds.
    pub usec: u32,
    /// Its count, from 1.
    pub count: u64,
}

impl Header {
    /// The header of datagram `count` sent `at` seconds on the sender's clock.
    pub fn at(at: std::time::Duration, count: u64) -> Header {
        Header {
            // iperf3 keeps the low 32 bits of its clock's seconds.
            sec: at.as_secs() as u32,
            usec: at.subsec_micros(),
            count,
        }
    }

    /// Bytes of a header with `wide` (64-bit) counts or not.
    pub fn bytes(wide: bool) -> usize {
        if wide {
            WIDE_HEADER_BYTES
        } else {
            HEADER_BYTES
        }
    }

    /// Writes the header at the front of `datagram` (at least [`Header::bytes`] long);
    /// a 32-bit count keeps the low bits, as iperf3's does.
    pub fn write(&self, datagram: &mut [u8], wide: bool) {
        datagram[0..4].copy_from_slice(&self.sec.to_be_bytes());
        datagram[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if wide {
            datagram[8..16].copy_from_slice(&self.count.to_be_bytes());
        } else {
            datagram[8..12].copy_from_slice(&(self.count as u32).to_be_bytes());
        }
    }

    /// The header at the front of `datagram`; `None` when it is too short to hold one.
    pub fn read(datagram: &[u8], wide: bool) -> Option<Header> {
        let word = |at: usize| u32::from_be_bytes(datagram[at..at + 4].try_into().unwrap());
        if datagram.len() < Header::bytes(wide) {
            return None;
        }
        let count = if wide {
            u64::from_be_bytes(datagram[8..16].try_into().unwrap())
        } else {
            u64::from(word(8))
        };
        Some(Header {
            sec: word(0),
            usec: word(4),
            count,
        })
    }

    /// The sender's clock, in seconds.
    pub fn sent_s(&self) -> f64 {
        f64::from(self.sec) + f64::from(self.usec) * 1e-6
    }
}

/// A receiving stream's tally, kept as iperf3's receiver keeps it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// Bytes of every datagram received.
    pub bytes: u64,
    /// Datagrams received.
    pub datagrams: u64,
    /// The highest count seen: what iperf3 reports as the stream's packets.
    pub highest: u64,
    /// Datagrams the count skipped, less those that came late.
    pub lost: u64,
    /// Datagrams whose count was not above the highest seen.
    pub out_of_order: u64,
    /// RFC 3550's running estimate of the variation of transit time, in seconds.
    pub jitter_s: f64,
    /// The last datagram's transit time (receiver's clock less sender's), in seconds.
    transit_s: Option<f64>,
}

impl Tally {
    /// Counts a datagram of `bytes` that arrived at `arrival_s` on the receiver's clock,
    /// whose header is `header` (`None` when it was too short to hold one: its bytes
    /// count, as in iperf3, and nothing else).
    pub fn take(&mut self, bytes: usize, header: Option<Header>, arrival_s: f64) {
        self.bytes = self.bytes.saturating_add(bytes as u64);
        let Some(header) = header else {
            return;
        };
        self.datagrams += 1;
        if header.count > self.highest {
            self.lost = self.lost.saturating_add(header.count - 1 - self.highest);
            self.highest = header.count;
        } else {
            self.out_of_order += 1;
            self.lost = self.lost.saturating_sub(1);
        }
        // iperf3 takes the transit's magnitude (iperf_time_diff), then its change.
        let transit = (arrival_s - header.sent_s()).abs();
        let change = (transit - self.transit_s.unwrap_or(transit)).abs();
        self.transit_s = Some(transit);
        self.jitter_s += (change - self.jitter_s) / 16.0;
    }

    /// The share of the datagrams sent up to the highest count that were lost.
    pub fn lost_share(&self) -> f64 {
        if self.highest == 0 {
            0.0
        } else {
            self.lost as f64 / self.highest as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn headers_are_iperf3s_bytes() {
        let header = Header {
            sec: 0x0102_0304,
            usec: 999_999,
            count: 0x1_0000_0007,
        };
        let mut narrow = [0u8; 12];
        header.write(&mut narrow, false);
        assert_eq!(
            narrow,
            [1, 2, 3, 4, 0, 0x0f, 0x42, 0x3f, 0, 0, 0, 7],
            "network order, count's low 32 bits"
        );
        let mut wide = [0u8; 16];
        header.write(&mut wide, true);
        assert_eq!(&wide[8..], &[0, 0, 0, 1, 0, 0, 0, 7]);
        assert_eq!(Header::read(&wide, true), Some(header));
        assert_eq!(Header::read(&narrow, false).unwrap().count, 7);
        assert_eq!(Header::read(&narrow[..11], false), None);
        assert_eq!(
            Header::read(&narrow, true),
            None,
            "12 bytes hold no wide header"
        );
        // The messages as they lie in a little-endian iperf3's memory.
        assert_eq!(u32::from_le_bytes(CONNECT), 0x3637_3839);
        assert_eq!(u32::from_le_bytes(REPLY), 0x3938_3736);
    }

    fn arrive(tally: &mut Tally, count: u64, sent_s: f64, arrival_s: f64) {
        let header = Header::at(std::time::Duration::from_secs_f64(sent_s), count);
        tally.take(100, Some(header), arrival_s);
    }

    #[test]
    fn a_gap_is_lost_until_its_datagrams_come_late() {
        let mut tally = Tally::default();
        for count in [1, 2, 5, 6] {
            arrive(&mut tally, count, 1.0, 1.0);
        }
        assert_eq!((tally.lost, tally.highest, tally.out_of_order), (2, 6, 0));
        arrive(&mut tally, 3, 1.0, 1.0);
        assert_eq!((tally.lost, tally.highest, tally.out_of_order), (1, 6, 1));
        assert_eq!((tally.datagrams, tally.bytes), (5, 500));
        assert!((tally.lost_share() - 1.0 / 6.0).abs() < 1e-12);
        // A datagram too short for a header counts its bytes only.
        tally.take(7, None, 2.0);
        assert_eq!((tally.datagrams, tally.bytes), (5, 507));
    }

    #[test]
    fn jitter_is_rfc_3550s_running_estimate() {
        let mut tally = Tally::default();
        // Sent every 10 ms; transit 1 ms, then 3 ms, then 1 ms.
        arrive(&mut tally, 1, 10.000, 10.001);
        assert_eq!(
            tally.jitter_s, 0.0,
            "the first datagram sets the transit only"
        );
        arrive(&mut tally, 2, 10.010, 10.013);
        let after_two = 0.002 / 16.0;
        assert!(
            (tally.jitter_s - after_two).abs() < 1e-9,
            "{}",
            tally.jitter_s
        );
        arrive(&mut tally, 3, 10.020, 10.021);
        let after_three = after_two + (0.002 - after_two) / 16.0;
        assert!(
            (tally.jitter_s - after_three).abs() < 1e-9,
            "{}",
            tally.jitter_s
        );
    }

    proptest! {
        /// Whatever order the datagrams of 1..=n come in, with some never coming, the
        /// tally counts every one that came and never more lost than never came.
        #[test]
        fn a_tally_of_any_order_counts_what_came(
            order in Just((1u64..=200).collect::<Vec<_>>()).prop_shuffle(),
            dropped in proptest::collection::vec(any::<bool>(), 200),
        ) {
            let mut tally = Tally::default();
            let came: Vec<u64> = order
                .iter()
                .copied()
                .filter(|&c| !dropped[(c - 1) as usize])
                .collect();
            for &count in &came {
                arrive(&mut tally, count, 0.0, 0.0);
            }
            prop_assert_eq!(tally.datagrams, came.len() as u64);
            let highest = came.iter().copied().max().unwrap_or(0);
            prop_assert_eq!(tally.highest, highest);
            let never = highest - came.len() as u64;
            prop_assert!(tally.lost >= never && tally.lost <= never + tally.out_of_order);
            // In order, the loss is exactly what never came below the highest.
            let mut sorted = Tally::default();
            let mut in_order = came.clone();
            in_order.sort_unstable();
            for &count in &in_order {
                arrive(&mut sorted, count, 0.0, 0.0);
            }
            prop_assert_eq!(sorted.lost, never);
            prop_assert_eq!(sorted.out_of_order, 0);
        }
    }
}
