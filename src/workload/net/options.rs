//! The options a test may ask of its data connections beyond the window and the MSS,
//! as iperf3's clients ask for them (-C, --fq-rate, -S, -N, --dont-fragment, -b, -Z,
//! --repeating-payload, --skip-rx-copy): set on the sockets, or honoured by the
//! measuring loops, at the end ratelab runs. They are stored with the plan, so a run
//! says how it was measured; a plain test stores none.

use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd};

use serde::{Deserialize, Serialize};

/// What a test asks of its data connections.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamOptions {
    /// The TCP congestion control (TCP_CONGESTION), by its kernel name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// Each connection's pacing by the kernel (SO_MAX_PACING_RATE), bytes per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_bytes_per_sec: Option<u64>,
    /// Each sending stream's rate, paced by the sender itself, bits per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate_bits_per_sec: Option<u64>,
    /// Blocks a paced sender may write at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_blocks: Option<u32>,
    /// The IP TOS byte (the traffic class over IPv6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    /// TCP_NODELAY: segments go out without waiting to fill.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nodelay: bool,
    /// Path MTU discovery with the don't-fragment flag always set (IP_PMTUDISC_DO).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dont_fragment: bool,
    /// Senders hand the kernel their block by sendfile from a memory file, not a copy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub zerocopy: bool,
    /// Senders send `0123456789` over and over instead of random bytes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeating_payload: bool,
    /// Receivers have the kernel drop the data (MSG_TRUNC) instead of copying it out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_rx_copy: bool,
}

/// An option the kernel would not set, and why.
#[derive(Debug, thiserror::Error)]
pub enum OptionError {
    /// TCP_CONGESTION failed: the algorithm is not there or not allowed.
    #[error("congestion control {name}: {source}")]
    Congestion {
        /// The algorithm asked for.
        name: String,
        /// What the kernel said.
        source: std::io::Error,
    },
    /// SO_MAX_PACING_RATE failed.
    #[error("pacing rate: {0}")]
    Pacing(std::io::Error),
    /// IP_TOS failed.
    #[error("TOS: {0}")]
    Tos(std::io::Error),
    /// IPV6_TCLASS failed.
    #[error("traffic class: {0}")]
    TrafficClass(std::io::Error),
    /// TCP_NODELAY failed.
    #[error("TCP_NODELAY: {0}")]
    Nodelay(std::io::Error),
    /// IP_MTU_DISCOVER failed.
    #[error("don't fragment: {0}")]
    DontFragment(std::io::Error),
    /// TCP_MAXSEG failed.
    #[error("MSS: {0}")]
    Mss(std::io::Error),
    /// SO_SNDBUF or SO_RCVBUF failed.
    #[error("socket buffers: {0}")]
    Window(std::io::Error),
    /// The kernel set smaller buffers than asked (it caps them at net.core.rmem_max
    /// and wmem_max).
    #[error("socket buffers of {asked} bytes asked for, the kernel set {got}")]
    WindowShort {
        /// Bytes asked for.
        asked: u64,
        /// Bytes the kernel says it holds (it doubles what it is given).
        got: u64,
    },
}

impl StreamOptions {
    /// Whether nothing is asked beyond a plain test.
    pub fn is_plain(&self) -> bool {
        *self == StreamOptions::default()
    }

    /// Sets what these options put on a data socket: congestion control, pacing, TOS,
    /// TCP_NODELAY and the don't-fragment flag.
    pub fn apply<S: AsFd>(&self, socket: &S) -> Result<(), OptionError> {
        let sock = socket2::SockRef::from(socket);
        if let Some(name) = &self.congestion {
            sock.set_tcp_congestion(name.as_bytes())
                .map_err(|source| OptionError::Congestion {
                    name: name.clone(),
                    source,
                })?;
        }
        if let Some(rate) = self.pacing_bytes_per_sec {
            set_int(socket, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, rate)
                .map_err(OptionError::Pacing)?;
        }
        let v6 = sock.local_addr().is_ok_and(|a| a.is_ipv6());
        if let Some(tos) = self.tos {
            if v6 {
                sock.set_tclass_v6(u32::from(tos))
                    .map_err(OptionError::TrafficClass)?;
            } else {
                sock.set_tos_v4(u32::from(tos)).map_err(OptionError::Tos)?;
            }
        }
        if self.nodelay {
            sock.set_tcp_nodelay(true).map_err(OptionError::Nodelay)?;
        }
        if self.dont_fragment {
            let (level, name, value) = if v6 {
                (
                    libc::IPPROTO_IPV6,
                    libc::IPV6_MTU_DISCOVER,
                    libc::IPV6_PMTUDISC_DO,
                )
            } else {
                (
                    libc::IPPROTO_IP,
                    libc::IP_MTU_DISCOVER,
                    libc::IP_PMTUDISC_DO,
                )
            };
            set_int(socket, level, name, value as u64).map_err(OptionError::DontFragment)?;
        }
        Ok(())
    }
}

/// Sets the MSS (TCP_MAXSEG) of a data socket.
pub fn set_mss(socket: &TcpStream, mss: u32) -> Result<(), OptionError> {
    socket2::SockRef::from(socket)
        .set_tcp_mss(mss)
        .map_err(OptionError::Mss)
}

/// Sets SO_SNDBUF and SO_RCVBUF of a data socket and reads them back, as iperf3 does: a
/// kernel that holds less than asked (net.core.rmem_max caps it) is an error, not a
/// smaller window measured in silence.
pub fn set_window<S: AsFd>(socket: &S, bytes: u64) -> Result<(), OptionError> {
    super::socket::set_window(socket, bytes).map_err(OptionError::Window)?;
    let sock = socket2::SockRef::from(socket);
    let got = sock
        .recv_buffer_size()
        .and_then(|r| sock.send_buffer_size().map(|s| r.min(s)))
        .map_err(OptionError::Window)? as u64;
    if got < bytes {
        return Err(OptionError::WindowShort { asked: bytes, got });
    }
    Ok(())
}

/// The congestion control a connection uses.
pub fn congestion_of(socket: &TcpStream) -> Option<String> {
    let name = socket2::SockRef::from(socket).tcp_congestion().ok()?;
    let name = name.split(|&b| b == 0).next().unwrap_or_default();
    (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned())
}

fn set_int<S: AsFd>(
    socket: &S,
    level: libc::c_int,
    name: libc::c_int,
    value: u64,
) -> std::io::Result<()> {
    // SO_MAX_PACING_RATE takes 64 bits since Linux 4.20 and 32 before; the rest an int.
    let wide = name == libc::SO_MAX_PACING_RATE && level == libc::SOL_SOCKET;
    let rc = if wide {
        // SAFETY: the kernel reads the u64 the valid pointer gives, of the length given.
        unsafe {
            libc::setsockopt(
                socket.as_fd().as_raw_fd(),
                level,
                name,
                (&raw const value).cast(),
                std::mem::size_of::<u64>() as libc::socklen_t,
            )
        }
    } else {
        let value = libc::c_int::try_from(value).unwrap_or(libc::c_int::MAX);
        // SAFETY: as above, for an int.
        unsafe {
            libc::setsockopt(
                socket.as_fd().as_raw_fd(),
                level,
                name,
                (&raw const value).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The payload of a sender that sends `0123456789` over and over (iperf3's
/// --repeating-payload).
pub fn fill_repeating(block: &mut [u8]) {
    for (byte, digit) in block.iter_mut().zip(b"0123456789".iter().cycle()) {
        *byte = *digit;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    #[test]
    fn options_are_set_on_the_socket_and_read_back() {
        let (client, _server) = pair();
        let options = StreamOptions {
            congestion: Some("reno".into()),
            pacing_bytes_per_sec: Some(12_500_000),
            tos: Some(0x10),
            nodelay: true,
            dont_fragment: true,
            ..StreamOptions::default()
        };
        options.apply(&client).unwrap();
        assert_eq!(congestion_of(&client).as_deref(), Some("reno"));
        assert_eq!(socket2::SockRef::from(&client).tos_v4().unwrap(), 0x10);
        assert!(client.nodelay().unwrap());
        let unknown = StreamOptions {
            congestion: Some("no-such-algorithm".into()),
            ..StreamOptions::default()
        };
        assert!(matches!(
            unknown.apply(&client),
            Err(OptionError::Congestion { .. })
        ));
        assert_eq!(super::super::socket::unacknowledged_bytes(&client), Some(0));
    }

    #[test]
    fn a_window_the_kernel_caps_is_an_error() {
        let (client, _server) = pair();
        set_window(&client, 64 << 10).unwrap();
        // The kernel holds at most twice net.core.rmem_max and wmem_max.
        let max = |name| {
            std::fs::read_to_string(format!("/proc/sys/net/core/{name}"))
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
                .unwrap_or(1 << 20)
        };
        let beyond = 4 * max("rmem_max").max(max("wmem_max")) + (1 << 20);
        if beyond < i32::MAX as u64 {
            assert!(matches!(
                set_window(&client, beyond),
                Err(OptionError::WindowShort { .. })
            ));
        }
    }

    #[test]
    fn a_repeating_payload_is_digits() {
        let mut block = [0u8; 12];
        fill_repeating(&mut block);
        assert_eq!(&block, b"012345678901");
        assert!(StreamOptions::default().is_plain());
    }
}
