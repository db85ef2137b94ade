//! TCP_INFO as the kernel lays it out (include/uapi/linux/tcp.h), read through
//! getsockopt on a socket of one's own or through sock_diag for any socket, and what
//! it says, each field only where the kernel's length holds it.

use serde::{Deserialize, Serialize};

/// The kernel's `struct tcp_info` (include/uapi/linux/tcp.h) up to
/// `tcpi_total_rto_time` (Linux 6.7); older kernels fill less, and the length they
/// return says how much.
#[repr(C)]
#[derive(Debug, Clone, Default)]
pub(crate) struct KernelTcpInfo {
    pub(crate) state: u8,
    pub(crate) ca_state: u8,
    pub(crate) retransmits: u8,
    pub(crate) probes: u8,
    pub(crate) backoff: u8,
    pub(crate) options: u8,
    pub(crate) wscale: u8,
    pub(crate) delivery_flags: u8,
    pub(crate) rto: u32,
    pub(crate) ato: u32,
    pub(crate) snd_mss: u32,
    pub(crate) rcv_mss: u32,
    pub(crate) unacked: u32,
    pub(crate) sacked: u32,
    pub(crate) lost: u32,
    pub(crate) retrans: u32,
    pub(crate) fackets: u32,
    pub(crate) last_data_sent: u32,
    pub(crate) last_ack_sent: u32,
    pub(crate) last_data_recv: u32,
    pub(crate) last_ack_recv: u32,
    pub(crate) pmtu: u32,
    pub(crate) rcv_ssthresh: u32,
    pub(crate) rtt: u32,
    pub(crate) rttvar: u32,
    pub(crate) snd_ssthresh: u32,
    pub(crate) snd_cwnd: u32,
    pub(crate) advmss: u32,
    pub(crate) reordering: u32,
    pub(crate) rcv_rtt: u32,
    pub(crate) rcv_space: u32,
    pub(crate) total_retrans: u32,
    pub(crate) pacing_rate: u64,
    pub(crate) max_pacing_rate: u64,
    pub(crate) bytes_acked: u64,
    pub(crate) bytes_received: u64,
    pub(crate) segs_out: u32,
    pub(crate) segs_in: u32,
    pub(crate) notsent_bytes: u32,
    pub(crate) min_rtt: u32,
    pub(crate) data_segs_in: u32,
    pub(crate) data_segs_out: u32,
    pub(crate) delivery_rate: u64,
    pub(crate) busy_time: u64,
    pub(crate) rwnd_limited: u64,
    pub(crate) sndbuf_limited: u64,
    pub(crate) delivered: u32,
    pub(crate) delivered_ce: u32,
    pub(crate) bytes_sent: u64,
    pub(crate) bytes_retrans: u64,
    pub(crate) dsack_dups: u32,
    pub(crate) reord_seen: u32,
    pub(crate) rcv_ooopack: u32,
    pub(crate) snd_wnd: u32,
    pub(crate) rcv_wnd: u32,
    pub(crate) rehash: u32,
    pub(crate) total_rto: u16,
    pub(crate) total_rto_recoveries: u16,
    pub(crate) total_rto_time: u32,
}

/// Whether a TCP_INFO of `length` bytes holds the field that ends at `end`.
macro_rules! filled {
    ($length:expr, $field:ident, $type:ty) => {
        $length
            >= std::mem::offset_of!($crate::platform::tcp_info::KernelTcpInfo, $field)
                + std::mem::size_of::<$type>()
    };
}
pub(crate) use filled;

/// A TCP connection's state as the kernel reports it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TcpStats {
    /// Segments retransmitted since the connection opened.
    pub(crate) retransmits: u64,
    /// Congestion window in bytes (segments times the sending MSS).
    pub(crate) cwnd_bytes: u64,
    /// Smoothed round-trip time, microseconds.
    pub(crate) rtt_us: u64,
    /// Its mean deviation, microseconds.
    pub(crate) rttvar_us: u64,
    /// The kernel's latest delivery rate estimate, bytes per second; null on old kernels.
    pub delivery_rate_bytes_per_sec: Option<u64>,
    /// Path MTU the connection uses.
    pub(crate) pmtu_bytes: u64,
    /// Microseconds the connection had data to send (Linux 4.10 on): its sender's busy
    /// time, within which the two below.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_us: Option<u64>,
    /// Microseconds of the busy time the peer's receive window held the sender back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rwnd_limited_us: Option<u64>,
    /// Microseconds of the busy time the sender's own send buffer held it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf_limited_us: Option<u64>,
    /// The least round-trip time seen, microseconds (Linux 4.6 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rtt_us: Option<u64>,
    /// The peer's receive window as last advertised, scaled, bytes (Linux 5.19 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snd_wnd_bytes: Option<u64>,
    /// This end's receive window as last advertised, bytes (Linux 6.2 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcv_wnd_bytes: Option<u64>,
    /// Bytes the peer acknowledged (Linux 4.1 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_acked: Option<u64>,
    /// Bytes sent again (Linux 4.19 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_retrans: Option<u64>,
    /// Duplicate segments the peer reported with D-SACK: retransmissions that were not
    /// needed (Linux 4.19 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dsack_dups: Option<u64>,
    /// Times the connection saw segments reordered (Linux 4.19 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reord_seen: Option<u64>,
    /// Bytes written but not yet sent (Linux 4.6 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notsent_bytes: Option<u64>,
    /// Retransmission timeouts, the SYN's included (Linux 6.7 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_rto: Option<u64>,
    /// The slow-start threshold, segments (0x7fffffff, the kernel's infinity, while
    /// the sender has never left slow start); null from an end that did not send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snd_ssthresh: Option<u64>,
    /// Bytes sent, retransmissions included (Linux 4.19 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_sent: Option<u64>,
    /// Segments sent that carried data, retransmissions included (Linux 4.6 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_segs_out: Option<u64>,
    /// Whether window scaling was agreed; null from an end that did not send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_scaling: Option<bool>,
    /// The window scale this end's peer applies to the windows it advertises; null
    /// where window scaling was not agreed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_wscale: Option<u64>,
    /// The socket's send buffer (SO_SNDBUF: what the kernel allows it, overhead in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_buffer_bytes: Option<u64>,
    /// The socket's receive buffer (SO_RCVBUF, likewise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_buffer_bytes: Option<u64>,
    /// Bytes written and not yet acknowledged (SIOCOUTQ): in flight or waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_queue_bytes: Option<u64>,
    /// Bytes arrived and not yet read (SIOCINQ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_queue_bytes: Option<u64>,
}

/// TCP_INFO's `tcpi_options` bit saying window scaling was agreed.
const OPTION_WSCALE: u8 = 4;

/// What a TCP_INFO of `length` bytes says, each field only where the kernel filled it.
pub(crate) fn stats_of(info: &KernelTcpInfo, length: usize) -> TcpStats {
    let has = |filled: bool, value: u64| filled.then_some(value);
    TcpStats {
        retransmits: u64::from(info.total_retrans),
        cwnd_bytes: u64::from(info.snd_cwnd) * u64::from(info.snd_mss),
        rtt_us: u64::from(info.rtt),
        rttvar_us: u64::from(info.rttvar),
        delivery_rate_bytes_per_sec: has(filled!(length, delivery_rate, u64), info.delivery_rate),
        pmtu_bytes: u64::from(info.pmtu),
        busy_us: has(filled!(length, busy_time, u64), info.busy_time),
        rwnd_limited_us: has(filled!(length, rwnd_limited, u64), info.rwnd_limited),
        sndbuf_limited_us: has(filled!(length, sndbuf_limited, u64), info.sndbuf_limited),
        min_rtt_us: has(filled!(length, min_rtt, u32), u64::from(info.min_rtt)),
        snd_wnd_bytes: has(filled!(length, snd_wnd, u32), u64::from(info.snd_wnd)),
        rcv_wnd_bytes: has(filled!(length, rcv_wnd, u32), u64::from(info.rcv_wnd)),
        bytes_acked: has(filled!(length, bytes_acked, u64), info.bytes_acked),
        bytes_retrans: has(filled!(length, bytes_retrans, u64), info.bytes_retrans),
        dsack_dups: has(filled!(length, dsack_dups, u32), u64::from(info.dsack_dups)),
        reord_seen: has(filled!(length, reord_seen, u32), u64::from(info.reord_seen)),
        notsent_bytes: has(
            filled!(length, notsent_bytes, u32),
            u64::from(info.notsent_bytes),
        ),
        total_rto: has(filled!(length, total_rto, u16), u64::from(info.total_rto)),
        snd_ssthresh: Some(u64::from(info.snd_ssthresh)),
        window_scaling: Some(info.options & OPTION_WSCALE != 0),
        bytes_sent: has(filled!(length, bytes_sent, u64), info.bytes_sent),
        data_segs_out: has(
            filled!(length, data_segs_out, u32),
            u64::from(info.data_segs_out),
        ),
        send_wscale: (info.options & OPTION_WSCALE != 0).then(|| u64::from(info.wscale & 0x0f)),
        send_buffer_bytes: None,
        receive_buffer_bytes: None,
        send_queue_bytes: None,
        receive_queue_bytes: None,
    }
}

/// The TCP_INFO in `bytes` as the kernel wrote them (any length: a shorter one from an
/// older kernel, a longer one from a newer), and how many of its fields they fill.
pub(crate) fn from_bytes(bytes: &[u8]) -> (KernelTcpInfo, usize) {
    let mut info = KernelTcpInfo::default();
    let length = bytes.len().min(std::mem::size_of::<KernelTcpInfo>());
    // SAFETY: the struct is repr(C) plain integers, any bit pattern is valid, and at
    // most its size is written.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), (&raw mut info).cast::<u8>(), length);
    }
    (info, length)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_tcp_info_leaves_out_what_it_does_not_hold() {
        let info = KernelTcpInfo {
            busy_time: 5,
            delivery_rate: 9,
            snd_wnd: 65535,
            ..KernelTcpInfo::default()
        };
        // A 4.9 kernel's length: up to the delivery rate.
        let old = stats_of(&info, std::mem::offset_of!(KernelTcpInfo, busy_time));
        assert_eq!(old.delivery_rate_bytes_per_sec, Some(9));
        assert_eq!(
            (old.busy_us, old.snd_wnd_bytes, old.bytes_retrans),
            (None, None, None)
        );
        let new = stats_of(&info, std::mem::size_of::<KernelTcpInfo>());
        assert_eq!((new.busy_us, new.snd_wnd_bytes), (Some(5), Some(65535)));
    }

    #[test]
    fn bytes_of_any_length_are_read_as_far_as_they_go() {
        let mut bytes = vec![0u8; 400];
        let at = std::mem::offset_of!(KernelTcpInfo, busy_time);
        bytes[at..at + 8].copy_from_slice(&7u64.to_ne_bytes());
        let (info, length) = from_bytes(&bytes);
        assert_eq!(
            (info.busy_time, length),
            (7, std::mem::size_of::<KernelTcpInfo>())
        );
        let (_, short) = from_bytes(&bytes[..at]);
        assert!(!filled!(short, busy_time, u64));
    }
}
