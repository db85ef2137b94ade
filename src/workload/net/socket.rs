//! What the kernel says about a TCP data socket (TCP_INFO, MSS, path MTU) and the
//! options a test sets on it. TCP_INFO is read with the kernel's own layout, since the
//! C library's struct stops short of the delivery rate.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use serde::{Deserialize, Serialize};

/// The kernel's `struct tcp_info` (include/uapi/linux/tcp.h) up to
/// `tcpi_total_rto_time` (Linux 6.7); older kernels fill less, and the length they
/// return says how much.
#[repr(C)]
#[derive(Default)]
struct KernelTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    delivery_flags: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
    rcv_wnd: u32,
    rehash: u32,
    total_rto: u16,
    total_rto_recoveries: u16,
    total_rto_time: u32,
}

/// Whether a TCP_INFO of `length` bytes holds the field that ends at `end`.
macro_rules! filled {
    ($length:expr, $field:ident, $type:ty) => {
        $length >= std::mem::offset_of!(KernelTcpInfo, $field) + std::mem::size_of::<$type>()
    };
}

/// A TCP connection's state as the kernel reports it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TcpStats {
    /// Segments retransmitted since the connection opened.
    pub retransmits: u64,
    /// Congestion window in bytes (segments times the sending MSS).
    pub cwnd_bytes: u64,
    /// Smoothed round-trip time, microseconds.
    pub rtt_us: u64,
    /// Its mean deviation, microseconds.
    pub rttvar_us: u64,
    /// The kernel's latest delivery rate estimate, bytes per second; null on old kernels.
    pub delivery_rate_bytes_per_sec: Option<u64>,
    /// Path MTU the connection uses.
    pub pmtu_bytes: u64,
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

/// TCP_INFO of `socket` and the bytes the kernel filled; `None` where it will not say.
fn kernel_tcp_info(socket: &TcpStream) -> Option<(KernelTcpInfo, usize)> {
    let mut info = KernelTcpInfo::default();
    let mut length = std::mem::size_of::<KernelTcpInfo>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `length` bytes into the struct and says how many.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut length,
        )
    };
    (rc == 0).then_some((info, length as usize))
}

/// Bytes a connection has put on the wire once each (sent, less what it sent again);
/// `None` on kernels before 4.19, which do not count them.
pub fn bytes_on_wire(socket: &TcpStream) -> Option<u64> {
    let (info, length) = kernel_tcp_info(socket)?;
    filled!(length, bytes_retrans, u64).then(|| info.bytes_sent.saturating_sub(info.bytes_retrans))
}

/// TCP_INFO of `socket`, with its buffers and queues; `None` where the kernel will not
/// say.
pub fn tcp_stats(socket: &TcpStream) -> Option<TcpStats> {
    let (info, length) = kernel_tcp_info(socket)?;
    let size = |s: rustix::io::Result<usize>| s.ok().map(|b| b as u64);
    Some(TcpStats {
        send_buffer_bytes: size(rustix::net::sockopt::socket_send_buffer_size(socket)),
        receive_buffer_bytes: size(rustix::net::sockopt::socket_recv_buffer_size(socket)),
        send_queue_bytes: unacknowledged_bytes(socket),
        receive_queue_bytes: queued(socket, libc::FIONREAD),
        ..stats_of(&info, length)
    })
}

/// How many times in a row `socket`'s retransmission timer has fired without an
/// acknowledgement between (TCP_INFO's `tcpi_retransmits`). Zero-window probes, sent
/// while a receiver reads nothing, back the timer off too but are not counted here.
pub fn timeouts_in_a_row(socket: &TcpStream) -> Option<u8> {
    kernel_tcp_info(socket).map(|(info, _)| info.retransmits)
}

/// Makes closing `socket` end it with a reset, whatever it still holds to send: a reset
/// is one small segment, which arrives where the bytes queued before a FIN would not.
pub fn reset_on_close(socket: &TcpStream) {
    let _ = rustix::net::sockopt::set_socket_linger(socket, Some(Duration::ZERO));
}

/// Bytes written to `socket` that its peer has not yet acknowledged (SIOCOUTQ).
pub fn unacknowledged_bytes(socket: &TcpStream) -> Option<u64> {
    queued(socket, libc::TIOCOUTQ)
}

/// The bytes an ioctl that counts a queue (SIOCOUTQ, SIOCINQ) says `socket` holds.
fn queued(socket: &TcpStream, request: libc::Ioctl) -> Option<u64> {
    let mut bytes: libc::c_int = 0;
    // SAFETY: both requests write one int through the valid pointer they are given.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), request, &mut bytes) };
    (rc == 0).then(|| u64::try_from(bytes).unwrap_or(0))
}

/// The kernel's slow-start threshold before the first loss (TCP_INFINITE_SSTHRESH).
pub const INFINITE_SSTHRESH: u64 = 0x7fff_ffff;

/// TCP_INFO's `tcpi_options` bit saying window scaling was agreed.
const OPTION_WSCALE: u8 = 4;

/// What a TCP_INFO of `length` bytes says, each field only where the kernel filled it.
fn stats_of(info: &KernelTcpInfo, length: usize) -> TcpStats {
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

/// The MSS the connection sends with (TCP_MAXSEG: payload bytes per segment, options such
/// as timestamps taken off).
pub fn mss_bytes(socket: &TcpStream) -> Option<u64> {
    socket2::SockRef::from(socket)
        .tcp_mss()
        .ok()
        .filter(|&mss| mss > 0)
        .map(u64::from)
}

/// Opens a TCP connection to `address` within `timeout`, with the window and MSS asked
/// for set before the handshake, as they must be to take effect.
pub fn connect(
    address: &SocketAddr,
    timeout: Duration,
    window_bytes: Option<u64>,
    mss: Option<u32>,
) -> std::io::Result<TcpStream> {
    let socket = Socket::new(
        Domain::for_address(*address),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    if let Some(bytes) = window_bytes {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        socket.set_send_buffer_size(bytes)?;
        socket.set_recv_buffer_size(bytes)?;
    }
    if let Some(mss) = mss {
        socket.set_tcp_mss(mss)?;
    }
    socket.connect_timeout(&(*address).into(), timeout)?;
    let stream: TcpStream = socket.into();
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// The path MTU of a connected socket (IP_MTU or IPV6_MTU).
pub fn path_mtu_bytes(socket: &TcpStream) -> Option<u64> {
    let v4 = socket.peer_addr().ok()?.is_ipv4();
    let mtu = if v4 {
        rustix::net::sockopt::ip_mtu(socket)
    } else {
        rustix::net::sockopt::ipv6_mtu(socket)
    };
    mtu.ok().map(u64::from)
}

/// Sets SO_SNDBUF and SO_RCVBUF (the kernel doubles what it is given, as socket(7) says).
pub fn set_window(socket: &TcpStream, bytes: u64) -> std::io::Result<()> {
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    rustix::net::sockopt::set_socket_send_buffer_size(socket, bytes)?;
    rustix::net::sockopt::set_socket_recv_buffer_size(socket, bytes)?;
    Ok(())
}

/// The most bytes TCP may buffer for a reader in this network namespace
/// (net.ipv4.tcp_rmem's maximum); `None` where it cannot be read.
pub fn receive_buffer_max() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem")
        .ok()?
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// Sets SO_RCVLOWAT: a reader blocked on `socket` is woken once `bytes` are queued, the
/// stream ends or its read timeout passes, instead of at every segment that arrives.
/// TCP caps it at half the largest receive buffer and grows the buffer to hold it
/// (tcp_set_rcvlowat in net/ipv4/tcp.c); the autotuning grows both from there.
pub fn set_receive_low_water(socket: &TcpStream, bytes: usize) -> std::io::Result<()> {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: the kernel reads one c_int from a valid pointer of the length given.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&raw const bytes).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_sender_whose_receiver_stops_reading_is_held_by_its_window() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let mut sender = connect(&address, Duration::from_secs(5), None, None).unwrap();
        let (mut receiver, _) = listener.accept().unwrap();
        let before = tcp_stats(&sender).unwrap();
        let writer = std::thread::spawn(move || {
            let block = vec![7u8; 1 << 20];
            for _ in 0..32 {
                sender.write_all(&block).unwrap();
            }
            sender
        });
        // The receiver's buffer fills within milliseconds; then the window is shut.
        std::thread::sleep(Duration::from_millis(300));
        let mut buf = vec![0u8; 1 << 20];
        let mut read = 0;
        while read < 32 << 20 {
            read += receiver.read(&mut buf).unwrap();
        }
        let sender = writer.join().unwrap();
        let after = tcp_stats(&sender).unwrap();
        let grew = |f: fn(&TcpStats) -> Option<u64>| f(&after).unwrap() - f(&before).unwrap();
        let (busy, rwnd) = (grew(|t| t.busy_us), grew(|t| t.rwnd_limited_us));
        assert!(
            rwnd >= 200_000,
            "rwnd-limited {rwnd} us of busy {busy}: {after:?}"
        );
        assert!(rwnd <= busy, "{after:?}");
        assert_eq!(
            after.bytes_acked.unwrap() - before.bytes_acked.unwrap(),
            32 << 20
        );
        // The receiver sent no data: it was never busy.
        assert_eq!(tcp_stats(&receiver).unwrap().busy_us, Some(0));
    }

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
}
