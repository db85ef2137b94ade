//! Which iperf3 tests this server takes. Every key an iperf3 client sends (3.12 to
//! 3.22) is read: what can be done here becomes the test's request and its streams'
//! options, honoured on this end's sockets and loops; what cannot is refused before
//! the test with iperf3's own error code, so the client prints its own words. Nothing a
//! client asks for is accepted and then ignored. Pure: the sockets come later.

use crate::workload::net::datagram::{MAX_DATAGRAM_BYTES, MIN_DATAGRAM_BYTES};
use crate::workload::net::iperf3::errors::code;
use crate::workload::net::iperf3::wire::Params;
use crate::workload::net::options::StreamOptions;
use crate::workload::net::protocol::{Direction, Limits, TestRequest, Udp};
use crate::workload::net::server::{MAX_BLOCK_BYTES, check, memory};

/// Largest MSS iperf3 3.21 and later take (MAX_MSS).
const MAX_MSS: i64 = 32 * 1024 - 1;
/// Largest burst iperf3 takes (MAX_BURST).
const MAX_BURST: i64 = 1000;
/// Largest window a test may ask for.
const MAX_WINDOW_BYTES: i64 = 1 << 30;
/// Longest congestion control name the kernel takes (TCP_CA_NAME_MAX less its NUL).
const MAX_CONGESTION_NAME: usize = 15;

/// A test this server takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    /// What the streams do.
    pub request: TestRequest,
    /// What they are asked beyond it.
    pub options: StreamOptions,
    /// The MSS for the data connections.
    pub mss: Option<u32>,
}

/// A test refused: why, and the code the client hears.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    /// What the log says.
    pub reason: String,
    /// iperf3's code for it.
    pub code: i32,
}

fn refuse<T>(code: i32, reason: impl Into<String>) -> Result<T, Refused> {
    Err(Refused {
        reason: reason.into(),
        code,
    })
}

/// The test `params` ask for within `limits`, or why not; `ipv6` says whether the test
/// runs over IPv6 (a flow label exists only there).
pub fn admit(params: &Params, limits: &Limits, ipv6: bool) -> Result<Admitted, Refused> {
    refuse_unserved(params)?;
    let direction = params.direction();
    let streams = match u32::try_from(params.parallel) {
        Ok(n) if (1..=limits.max_streams).contains(&n) => n,
        _ => {
            return refuse(
                code::STREAMS,
                format!(
                    "{} streams asked for; this server allows 1 to {}",
                    params.parallel, limits.max_streams
                ),
            );
        }
    };
    let udp = params.udp.is_some().then(|| Udp {
        wide_counts: params.udp_counters_64bit.is_some_and(|on| on != 0),
    });
    if udp.is_some() {
        refuse_tcp_only(params)?;
    }
    let block_bytes = block_bytes(params.len, udp.is_some())?;
    let window_bytes = match params.window {
        None | Some(0) => None,
        Some(w) if (1..=MAX_WINDOW_BYTES).contains(&w) => Some(w as u64),
        Some(w) => {
            return refuse(
                code::BUFFER,
                format!("a window of {w} bytes asked for; this server allows up to 1 GiB"),
            );
        }
    };
    let mss = match params.mss {
        None | Some(0) => None,
        Some(m) if (1..=MAX_MSS).contains(&m) => Some(m as u32),
        Some(m) => {
            return refuse(
                code::MSS,
                format!("an MSS of {m} bytes asked for; iperf3 allows up to {MAX_MSS}"),
            );
        }
    };
    let (duration_ms, bytes) = bound(params, limits, streams, direction)?;
    let request = TestRequest {
        streams,
        direction,
        duration_ms,
        // iperf3 bounds bytes over every stream: each sending stream takes its share.
        bytes_per_stream: bytes.map(|b| b.div_ceil(u64::from(streams))),
        block_bytes,
        window_bytes,
        interval_ms: 1000,
        udp,
    };
    // iperf3's nearest words for a test whose blocks take too much: "block size too large".
    memory(&request, limits).map_err(|reason| Refused {
        reason,
        code: code::BLOCK,
    })?;
    check(&request, limits).map_err(|reason| Refused {
        reason,
        code: code::RECEIVE_PARAMS,
    })?;
    let options = options(params, direction, ipv6)?;
    Ok(Admitted {
        request,
        options,
        mss,
    })
}

/// Bytes per write and read, or per datagram in a UDP test, within iperf3's bounds
/// and this server's.
fn block_bytes(len: i64, udp: bool) -> Result<u64, Refused> {
    match u64::try_from(len) {
        Ok(n) if udp && !(MIN_DATAGRAM_BYTES..=MAX_DATAGRAM_BYTES).contains(&n) => refuse(
            code::UDP_BLOCK,
            format!(
                "a datagram of {n} bytes asked for; iperf3 allows {MIN_DATAGRAM_BYTES} to \
                 {MAX_DATAGRAM_BYTES}"
            ),
        ),
        Ok(n) if (1..=MAX_BLOCK_BYTES).contains(&n) => Ok(n),
        _ => refuse(
            code::BLOCK,
            format!("a block of {len} bytes asked for; this server allows 1 to {MAX_BLOCK_BYTES}"),
        ),
    }
}

/// What this server does not serve: SCTP, MPTCP, -O, -A, and keys it does not know
/// that ask for something.
fn refuse_unserved(params: &Params) -> Result<(), Refused> {
    let unimplemented =
        |what: &str| refuse(code::UNIMPLEMENTED, format!("{what} is not served here"));
    if params.sctp.is_some() {
        return refuse(
            code::NO_SCTP,
            "an SCTP test (iperf3 --sctp) is not served here",
        );
    }
    if params.mptcp.is_some_and(|on| on) {
        return unimplemented("multipath TCP (iperf3 -m)");
    }
    if !(0..=600).contains(&params.omit) {
        return refuse(
            code::OMIT,
            format!("--omit {} is out of range", params.omit),
        );
    }
    if params.omit != 0 {
        return unimplemented("omitting the first seconds (iperf3 -O)");
    }
    if params.server_affinity.is_some() {
        return unimplemented("the server's CPU affinity (iperf3 -A n,m)");
    }
    if let Some((key, value)) = params.other.iter().find(|(_, v)| asks_something(v)) {
        return unimplemented(&format!(
            "the parameter {key} = {value}, unknown to this server,"
        ));
    }
    Ok(())
}

/// Refuses, in a UDP test, what only TCP has: an MSS, a congestion control, Nagle's
/// algorithm off, and sendfile (iperf3's UDP sender writes each datagram).
fn refuse_tcp_only(params: &Params) -> Result<(), Refused> {
    let asked = [
        (params.mss.is_some_and(|m| m != 0), "an MSS (iperf3 -M)"),
        (
            params.congestion.as_deref().is_some_and(|c| !c.is_empty()),
            "a congestion control (iperf3 -C)",
        ),
        (
            params.nodelay.is_some_and(|on| on),
            "TCP_NODELAY (iperf3 -N)",
        ),
        (
            params.zerocopy.is_some_and(|on| on != 0),
            "sendfile (iperf3 -Z)",
        ),
    ];
    match asked.iter().find(|(on, _)| *on) {
        Some((_, what)) => refuse(
            code::UNIMPLEMENTED,
            format!("{what} in a UDP test is not served here"),
        ),
        None => Ok(()),
    }
}

/// Whether a value of an unknown key asks for anything: off, zero and empty do not.
fn asks_something(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Null | serde_json::Value::Bool(false) => false,
        serde_json::Value::Number(n) => n.as_f64() != Some(0.0),
        serde_json::Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

/// What ends the test: its duration, or its bytes over every stream.
fn bound(
    params: &Params,
    limits: &Limits,
    streams: u32,
    direction: Direction,
) -> Result<(Option<u64>, Option<u64>), Refused> {
    if params.time < 0 || params.num < 0 || params.blockcount < 0 {
        return refuse(
            code::RECEIVE_PARAMS,
            "a negative duration, byte count or block count",
        );
    }
    // Clients before 3.20 cannot print code 37: they hear IEDURATION, whose words are
    // nearest ("test duration too long").
    let too_long = if speaks_max_duration(params.client_version.as_deref()) {
        code::MAX_DURATION
    } else {
        code::DURATION
    };
    let max_s = limits.max_duration_ms / 1000;
    match params.bytes() {
        Some(bytes) => {
            let total = bytes.saturating_mul(u64::from(direction.connections(streams)))
                / u64::from(streams);
            if total > limits.max_bytes {
                return refuse(
                    code::TOTAL,
                    format!(
                        "a test of {} asked for; this server allows up to {}",
                        crate::vocab::units::format_size(total),
                        crate::vocab::units::format_size(limits.max_bytes)
                    ),
                );
            }
            Ok((None, Some(bytes)))
        }
        None if params.time == 0 => refuse(
            too_long,
            format!(
                "a test bounded by neither time nor bytes (iperf3 -t 0); this server allows up to {max_s} s"
            ),
        ),
        // A peer's number: a negative time, or one whose milliseconds do not fit, is
        // as far past the bound as any.
        None => match u64::try_from(params.time)
            .ok()
            .and_then(|s| s.checked_mul(1000))
        {
            Some(ms) if ms <= limits.max_duration_ms => Ok((Some(ms), None)),
            _ => refuse(
                too_long,
                format!(
                    "a test of {} s asked for; this server allows up to {max_s} s",
                    params.time
                ),
            ),
        },
    }
}

/// Whether a client of `version` knows code 37 (iperf 3.20 and later).
fn speaks_max_duration(version: Option<&str>) -> bool {
    let mut parts = version
        .unwrap_or_default()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    (major, minor) >= (3, 20)
}

/// The streams' options: each one honoured where this end sends or receives, or
/// refused when it cannot be.
fn options(params: &Params, direction: Direction, ipv6: bool) -> Result<StreamOptions, Refused> {
    let on = |flag: Option<i64>| flag.is_some_and(|v| v != 0);
    let server_sends = direction != Direction::Forward;
    let tos = match params.tos {
        None => None,
        Some(t) => match u8::try_from(t) {
            Ok(t) => Some(t),
            Err(_) => return refuse(code::BAD_TOS, format!("a TOS of {t}")),
        },
    };
    if let Some(label) = params.flowlabel.filter(|&l| l != 0) {
        if !(1..=0xF_FFFF).contains(&label) {
            return refuse(code::SET_FLOW, format!("a flow label of {label}"));
        }
        // The client labels its own packets; this end cannot label a connection it
        // accepted, so a test in which it sends over IPv6 is refused.
        if server_sends && ipv6 {
            return refuse(
                code::SET_FLOW,
                "an IPv6 flow label (iperf3 -L) on streams this server sends",
            );
        }
    }
    let bitrate_bits_per_sec = match params.bandwidth {
        None | Some(0) => None,
        Some(b) if b > 0 => Some(b as u64),
        Some(b) => return refuse(code::RECEIVE_PARAMS, format!("a bitrate of {b}")),
    };
    let burst_blocks = match params.burst {
        None | Some(0) => None,
        Some(b) if (1..=MAX_BURST).contains(&b) => Some(b as u32),
        Some(b) => return refuse(code::BURST, format!("a burst of {b} blocks")),
    };
    let pacing_bytes_per_sec = match params.fqrate {
        None | Some(0) => None,
        Some(r) if r > 0 => Some((r as u64).div_ceil(8)),
        Some(r) => return refuse(code::SET_PACING, format!("a pacing rate of {r}")),
    };
    let congestion = match params.congestion.as_deref() {
        None | Some("") => None,
        Some(name) if name.len() <= MAX_CONGESTION_NAME && name.is_ascii() => {
            Some(name.to_string())
        }
        Some(name) => {
            return refuse(
                code::SET_CONGESTION,
                format!("congestion control {name:?} is no kernel's name"),
            );
        }
    };
    Ok(StreamOptions {
        congestion,
        pacing_bytes_per_sec,
        bitrate_bits_per_sec,
        burst_blocks,
        tos,
        nodelay: params.nodelay.is_some_and(|on| on),
        dont_fragment: on(params.dont_fragment),
        zerocopy: on(params.zerocopy),
        repeating_payload: on(params.repeating_payload),
        skip_rx_copy: on(params.skip_rx_copy),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_streams: 16,
        max_duration_ms: 120_000,
        max_bytes: 100 << 30,
        max_memory_bytes: 128 << 20,
    };

    fn params(text: &str) -> Params {
        serde_json::from_str(text).unwrap()
    }

    fn refused(text: &str) -> Refused {
        admit(&params(text), &LIMITS, false).unwrap_err()
    }

    #[test]
    fn a_plain_test_of_3_22_is_taken_as_it_asks() {
        let taken = admit(
            &params(
                r#"{"tcp":true,"omit":0,"time":3,"num":0,"blockcount":0,"parallel":2,"bidirectional":true,"len":131072,"pacing_timer":1000,"client_version":"3.22"}"#,
            ),
            &LIMITS,
            false,
        )
        .unwrap();
        assert_eq!(taken.request.direction, Direction::Bidir);
        assert_eq!(taken.request.duration_ms, Some(3000));
        assert!(taken.options.is_plain());
    }

    #[test]
    fn options_are_honoured() {
        let taken = admit(
            &params(
                r#"{"tcp":true,"time":3,"parallel":1,"reverse":true,"len":131072,"congestion":"reno","fqrate":100000000,"TOS":16,"nodelay":true,"zerocopy":1,"repeating_payload":1,"skip_rx_copy":1,"dont_fragment":1,"bandwidth":50000000,"burst":4,"MSS":1200,"window":262144,"title":"x","extra_data":"y","get_server_output":1}"#,
            ),
            &LIMITS,
            false,
        )
        .unwrap();
        let o = &taken.options;
        assert_eq!(o.congestion.as_deref(), Some("reno"));
        assert_eq!(o.pacing_bytes_per_sec, Some(12_500_000));
        assert_eq!((o.tos, o.nodelay, o.zerocopy), (Some(16), true, true));
        assert_eq!(
            (o.bitrate_bits_per_sec, o.burst_blocks),
            (Some(50_000_000), Some(4))
        );
        assert!(o.repeating_payload && o.skip_rx_copy && o.dont_fragment);
        assert_eq!(
            (taken.mss, taken.request.window_bytes),
            (Some(1200), Some(262_144))
        );
    }

    #[test]
    fn a_udp_test_is_admitted_with_its_datagrams_and_tcps_options_refused() {
        // As iperf 3.22 sends it, offloads offered and all.
        let taken = admit(
            &params(
                r#"{"udp":true,"omit":0,"time":3,"num":0,"blockcount":0,"parallel":2,"len":1460,"bandwidth":100000000,"pacing_timer":1000,"gso":0,"gso_dg_size":0,"gso_bf_size":65507,"gro":0,"gro_bf_size":65507,"udp_counters_64bit":1,"client_version":"3.22"}"#,
            ),
            &LIMITS,
            false,
        )
        .unwrap();
        assert_eq!(taken.request.udp, Some(Udp { wide_counts: true }));
        assert_eq!(taken.request.block_bytes, 1460);
        assert_eq!(taken.options.bitrate_bits_per_sec, Some(100_000_000));
        // -b 0 sends no bandwidth: as fast as the socket takes.
        let unpaced = admit(
            &params(r#"{"udp":true,"time":1,"len":1460}"#),
            &LIMITS,
            false,
        )
        .unwrap();
        assert_eq!(unpaced.request.udp, Some(Udp { wide_counts: false }));
        assert_eq!(unpaced.options.bitrate_bits_per_sec, None);
        for (too, bytes) in [
            (r#"{"udp":true,"len":65508}"#, 65508),
            (r#"{"udp":true,"len":15}"#, 15),
        ] {
            let refusal = refused(too);
            assert_eq!(refusal.code, code::UDP_BLOCK, "{bytes}");
            assert!(refusal.reason.contains("16 to 65507"), "{}", refusal.reason);
        }
        for tcp_only in [
            r#"{"udp":true,"MSS":1200}"#,
            r#"{"udp":true,"congestion":"reno"}"#,
            r#"{"udp":true,"nodelay":true}"#,
            r#"{"udp":true,"zerocopy":1}"#,
        ] {
            let refusal = refused(tcp_only);
            assert_eq!(refusal.code, code::UNIMPLEMENTED, "{tcp_only}");
            assert!(
                refusal.reason.contains("in a UDP test"),
                "{}",
                refusal.reason
            );
        }
        assert_eq!(
            refused(r#"{"udp":true,"len":1460,"bandwidth":-1}"#).code,
            code::RECEIVE_PARAMS
        );
    }

    #[test]
    fn what_cannot_be_done_is_refused_with_iperf3s_code() {
        assert_eq!(refused(r#"{"sctp":true}"#).code, code::NO_SCTP);
        assert_eq!(
            refused(r#"{"tcp":true,"omit":2}"#).code,
            code::UNIMPLEMENTED
        );
        assert_eq!(
            refused(r#"{"tcp":true,"server_affinity":1}"#).code,
            code::UNIMPLEMENTED
        );
        assert_eq!(refused(r#"{"tcp":true,"parallel":17}"#).code, code::STREAMS);
        assert_eq!(refused(r#"{"tcp":true,"len":0}"#).code, code::BLOCK);
        assert_eq!(refused(r#"{"tcp":true,"MSS":40000}"#).code, code::MSS);
        assert_eq!(refused(r#"{"tcp":true,"TOS":256}"#).code, code::BAD_TOS);
        assert_eq!(refused(r#"{"tcp":true,"burst":1001}"#).code, code::BURST);
        assert_eq!(
            refused(r#"{"tcp":true,"congestion":"a-very-long-name-x"}"#).code,
            code::SET_CONGESTION
        );
        assert_eq!(
            refused(r#"{"tcp":true,"window":2147483648}"#).code,
            code::BUFFER
        );
        let unknown = refused(r#"{"tcp":true,"new_thing":1}"#);
        assert!(unknown.reason.contains("new_thing"), "{}", unknown.reason);
        // An unknown key that asks for nothing is no reason to refuse.
        assert!(
            admit(
                &params(r#"{"tcp":true,"time":1,"new_thing":0}"#),
                &LIMITS,
                false
            )
            .is_ok()
        );
    }

    #[test]
    fn a_flow_label_is_refused_only_where_this_end_would_send_over_ipv6() {
        let forward = params(r#"{"tcp":true,"time":1,"flowlabel":7}"#);
        assert!(admit(&forward, &LIMITS, true).is_ok());
        let reverse = params(r#"{"tcp":true,"time":1,"reverse":true,"flowlabel":7}"#);
        assert!(admit(&reverse, &LIMITS, false).is_ok());
        assert_eq!(
            admit(&reverse, &LIMITS, true).unwrap_err().code,
            code::SET_FLOW
        );
    }

    #[test]
    fn a_long_or_unbounded_test_hears_the_code_its_client_can_print() {
        for (version, code) in [
            ("3.22", code::MAX_DURATION),
            ("3.20", code::MAX_DURATION),
            ("3.12", code::DURATION),
            ("3.9", code::DURATION),
        ] {
            let long = format!(r#"{{"tcp":true,"time":121,"client_version":"{version}"}}"#);
            assert_eq!(refused(&long).code, code, "{version}");
            let unbounded = format!(r#"{{"tcp":true,"time":0,"client_version":"{version}"}}"#);
            let refusal = refused(&unbounded);
            assert_eq!(refusal.code, code, "{version}");
            assert!(
                refusal.reason.contains("neither time nor bytes"),
                "{}",
                refusal.reason
            );
        }
        assert_eq!(
            refused(r#"{"tcp":true,"time":0,"num":-1}"#).code,
            code::RECEIVE_PARAMS
        );
        let bytes = admit(
            &params(r#"{"tcp":true,"time":0,"num":1000,"parallel":3}"#),
            &LIMITS,
            false,
        )
        .unwrap();
        assert_eq!(
            (bytes.request.duration_ms, bytes.request.bytes_per_stream),
            (None, Some(334))
        );
        assert_eq!(
            refused(r#"{"tcp":true,"time":0,"num":200000000000}"#).code,
            code::TOTAL
        );
        // Times whose milliseconds would wrap are refused as too long.
        for time in ["18446744073709552", "9223372036854775"] {
            let asked = format!(r#"{{"tcp":true,"time":{time},"client_version":"3.22"}}"#);
            let refusal = refused(&asked);
            assert_eq!(
                refusal.code,
                code::MAX_DURATION,
                "{time}: {}",
                refusal.reason
            );
        }
    }
}
