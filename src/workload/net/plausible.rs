//! What a peer's figures may claim. A peer's report is stored beside this end's, so a
//! figure no link could give (bytes past any wire's rate, more retransmissions than
//! segments, CPU past any machine, times out of range) makes the run incomplete with
//! the reason, rather than standing as measured.

use super::iperf3::wire::Results;
use super::report::SideReport;

/// Longest a test's figures may span, in seconds (a week; servers bound tests far lower).
const MAX_SECONDS: f64 = 7.0 * 86_400.0;
/// Fastest a stream may move, in bytes per second: 16 Tbit/s, past any link or loopback.
const MAX_BYTES_PER_SEC: f64 = 2e12;
/// Most CPUs one end may have.
const MAX_CPUS: f64 = 16_384.0;
/// The smallest segment TCP sends by default (RFC 879's 536 bytes).
const MIN_SEGMENT: u64 = 536;

/// Most retransmissions a stream that moved `bytes` in `seconds` can have made: each of
/// its smallest segments twice over, and ten a second besides (timeouts back off from
/// 200 ms, so a stalled stream makes fewer).
fn retransmits_at_most(bytes: u64, seconds: f64) -> u64 {
    (bytes / MIN_SEGMENT)
        .saturating_mul(2)
        .saturating_add((seconds.max(1.0) * 10.0) as u64)
}

/// Whether `seconds` is a time a test can take.
fn a_time(seconds: f64) -> bool {
    seconds.is_finite() && (0.0..=MAX_SECONDS).contains(&seconds)
}

/// Most bytes a stream can move in `seconds`.
fn bytes_at_most(seconds: f64) -> u64 {
    (MAX_BYTES_PER_SEC * seconds.max(1.0)) as u64
}

/// Why a ratelab peer's report cannot be, if it cannot.
pub fn report(remote: &SideReport) -> Option<String> {
    if !a_time(remote.wall_seconds) {
        return Some(format!("its test took {} s", remote.wall_seconds));
    }
    if !(remote.cpu_seconds.is_finite()
        && (0.0..=remote.wall_seconds.max(1.0) * MAX_CPUS).contains(&remote.cpu_seconds))
    {
        return Some(format!(
            "it used {} s of CPU in {:.1} s",
            remote.cpu_seconds, remote.wall_seconds
        ));
    }
    for stream in &remote.streams {
        let n = stream.stream;
        if !a_time(stream.seconds) {
            return Some(format!("stream {n} took {} s", stream.seconds));
        }
        if stream.bytes > bytes_at_most(stream.seconds) {
            return Some(format!(
                "stream {n} moved {} bytes in {:.1} s, past any link",
                stream.bytes, stream.seconds
            ));
        }
        let retransmits = stream.tcp.map_or(0, |t| t.retransmits);
        if retransmits > retransmits_at_most(stream.bytes, stream.seconds) {
            return Some(format!(
                "stream {n} retransmitted {retransmits} segments of {} bytes",
                stream.bytes
            ));
        }
    }
    None
}

/// Why an iperf3 peer's results cannot be, if they cannot.
pub fn results(theirs: &Results) -> Option<String> {
    let cpu = theirs.cpu_util_total;
    if !(cpu.is_finite() && (0.0..=100.0 * MAX_CPUS).contains(&cpu)) {
        return Some(format!("its CPU use was {cpu}%"));
    }
    for stream in &theirs.streams {
        let id = stream.id;
        let seconds = stream.end_time - stream.start_time;
        if !(a_time(stream.start_time) && a_time(stream.end_time) && a_time(seconds)) {
            return Some(format!(
                "stream id {id} ran from {} s to {} s",
                stream.start_time, stream.end_time
            ));
        }
        let Ok(bytes) = u64::try_from(stream.bytes) else {
            return Some(format!("stream id {id} moved {} bytes", stream.bytes));
        };
        if bytes > bytes_at_most(seconds) {
            return Some(format!(
                "stream id {id} moved {bytes} bytes in {seconds:.1} s, past any link"
            ));
        }
        // iperf3 sends -1 where it does not count them.
        let retransmits = u64::try_from(stream.retransmits).unwrap_or(0);
        if retransmits > retransmits_at_most(bytes, seconds) {
            return Some(format!(
                "stream id {id} retransmitted {retransmits} segments of {bytes} bytes"
            ));
        }
        if let Some(why) = datagrams(stream.packets, stream.errors, stream.jitter, bytes) {
            return Some(format!("stream id {id} {why}"));
        }
    }
    None
}

/// Why a stream's UDP figures cannot be: a negative count, more lost than counted,
/// more datagrams than its bytes hold (one byte each at the least, where bytes were
/// counted), or a jitter that is no time.
fn datagrams(packets: i64, errors: i64, jitter_s: f64, bytes: u64) -> Option<String> {
    if packets < 0 || errors < 0 || errors > packets {
        return Some(format!("counted {errors} lost of {packets} datagrams"));
    }
    if bytes > 0 && packets as u64 > bytes {
        return Some(format!("counted {packets} datagrams in {bytes} bytes"));
    }
    if !a_time(jitter_s) {
        return Some(format!("had a jitter of {jitter_s} s"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::net::iperf3::wire::StreamResult;

    fn results(bytes: i64, retransmits: i64, cpu: f64) -> Results {
        Results {
            cpu_util_total: cpu,
            cpu_util_user: 0.0,
            cpu_util_system: 0.0,
            sender_has_retransmits: 1,
            congestion_used: None,
            streams: vec![StreamResult {
                id: 1,
                bytes,
                retransmits,
                jitter: 0.0,
                errors: 0,
                packets: 0,
                omitted_errors: None,
                omitted_packets: None,
                start_time: 0.0,
                end_time: 3.0,
            }],
            server_output_text: None,
        }
    }

    #[test]
    fn udp_figures_that_cannot_be_are_named() {
        assert_eq!(datagrams(1000, 10, 0.0002, 1_460_000), None);
        assert_eq!(datagrams(0, 0, 0.0, 0), None);
        assert!(
            datagrams(10, 11, 0.0, 14_600)
                .unwrap()
                .contains("11 lost of 10")
        );
        assert!(datagrams(-1, 0, 0.0, 0).is_some());
        assert!(
            datagrams(5000, 0, 0.0, 100)
                .unwrap()
                .contains("5000 datagrams in 100")
        );
        assert!(
            datagrams(10, 0, f64::NAN, 14_600)
                .unwrap()
                .contains("jitter")
        );
        assert!(datagrams(10, 0, -0.5, 14_600).is_some());
    }

    #[test]
    fn claims_no_link_or_machine_could_give_are_named() {
        assert_eq!(super::results(&results(3_500_000_000, 1200, 95.0)), None);
        assert_eq!(super::results(&results(0, -1, 0.0)), None);
        let said = |r: Results| super::results(&r).unwrap();
        assert!(said(results(3_500_000_000, 1_000_000_000, 9.0)).contains("retransmitted"));
        assert!(said(results(i64::MAX, 0, 9.0)).contains("past any link"));
        assert!(said(results(-5, 0, 9.0)).contains("moved -5 bytes"));
        assert!(said(results(1, 0, 1e300)).contains("CPU use"));
        let mut late = results(1, 0, 1.0);
        late.streams[0].end_time = f64::MAX;
        assert!(said(late).contains("ran from"));
    }
}
