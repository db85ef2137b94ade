//! What the kernel says about a TCP data socket (TCP_INFO, MSS, path MTU) and the
//! options a test sets on it. TCP_INFO is read with the kernel's own layout, since the
//! C library's struct stops short of the delivery rate.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

pub use crate::platform::tcp_info::TcpStats;
use crate::platform::tcp_info::{KernelTcpInfo, filled, stats_of};

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

/// Data bytes a connection's peer has acknowledged: what its socket delivered (the
/// kernel's count less the SYN's one); `None` on kernels before 4.1, which do not count
/// them.
pub fn bytes_delivered(socket: &TcpStream) -> Option<u64> {
    let (info, length) = kernel_tcp_info(socket)?;
    filled!(length, bytes_acked, u64).then(|| info.bytes_acked.saturating_sub(1))
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

/// Data bytes that have arrived on a connection, read or not (TCP_INFO's
/// `tcpi_bytes_received`); `None` on kernels before 4.1.
pub fn bytes_arrived(socket: &TcpStream) -> Option<u64> {
    let (info, length) = kernel_tcp_info(socket)?;
    filled!(length, bytes_received, u64).then_some(info.bytes_received)
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
pub fn set_window<S: std::os::fd::AsFd>(socket: &S, bytes: u64) -> std::io::Result<()> {
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    rustix::net::sockopt::set_socket_send_buffer_size(socket, bytes)?;
    rustix::net::sockopt::set_socket_recv_buffer_size(socket, bytes)?;
    Ok(())
}

/// The most a stream's socket buffers may hold between its two ends: a send and a
/// receive buffer at this machine's largest, twice (the peer's are not known here), and
/// never under 64 MiB.
pub fn held_between() -> u64 {
    let here = super::host::BufferLimits::here();
    let largest = [
        here.tcp_rmem_max,
        here.tcp_wmem_max,
        here.rmem_max,
        here.wmem_max,
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(0);
    largest.saturating_mul(4).max(64 << 20)
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
        // What the receiver took in is what the sender delivered, the SYN's count left
        // out of both.
        assert_eq!(bytes_arrived(&receiver), bytes_delivered(&sender));
        // The receiver sent no data: it was never busy.
        assert_eq!(tcp_stats(&receiver).unwrap().busy_us, Some(0));
    }
}
