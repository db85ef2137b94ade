//! A TCP socket by its inode, as its process's network namespace lists it
//! (/proc/PID/net/tcp and tcp6): its two ends, its state, and the bytes queued in it
//! (`tx_queue`: sent and not yet acknowledged or not yet sent; `rx_queue`: received
//! and not yet read).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// One TCP socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSocket {
    /// This end.
    pub local: SocketAddr,
    /// The peer.
    pub remote: SocketAddr,
    /// Listening (no peer yet) rather than connected.
    pub listening: bool,
    /// Bytes not yet acknowledged by the peer, or not yet sent.
    pub send_queue_bytes: u64,
    /// Bytes received and not yet read.
    pub receive_queue_bytes: u64,
}

/// The TCP socket with `inode` in the namespace of process `pid`; `None` where it is
/// no TCP socket (a UNIX or UDP one) or it has closed.
pub fn tcp_socket(pid: u32, inode: u64) -> Option<TcpSocket> {
    ["tcp", "tcp6"].iter().find_map(|table| {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).ok()?;
        parse_tcp_table(&text, inode)
    })
}

/// Every TCP socket of the namespace of process `pid`, by inode; empty where its
/// tables may not be read.
pub fn tcp_sockets(pid: u32) -> HashMap<u64, TcpSocket> {
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .filter_map(parse_tcp_line)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The line of `inode` in a /proc/net/tcp or tcp6 text.
pub fn parse_tcp_table(text: &str, inode: u64) -> Option<TcpSocket> {
    text.lines()
        .skip(1)
        .filter_map(parse_tcp_line)
        .find_map(|(i, socket)| (i == inode).then_some(socket))
}

/// One line of a /proc/net/tcp or tcp6 text, with its inode: `sl local rem st
/// tx_queue:rx_queue tr:when retrnsmt uid timeout inode …`, addresses in hex as the
/// kernel holds them (each 32-bit word in this machine's byte order), ports in hex.
fn parse_tcp_line(line: &str) -> Option<(u64, TcpSocket)> {
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    let inode = fields.get(9)?.parse::<u64>().ok()?;
    let (tx, rx) = fields.get(4)?.split_once(':')?;
    Some((
        inode,
        TcpSocket {
            local: parse_address(fields.get(1)?)?,
            remote: parse_address(fields.get(2)?)?,
            listening: *fields.get(3)? == "0A",
            send_queue_bytes: u64::from_str_radix(tx, 16).ok()?,
            receive_queue_bytes: u64::from_str_radix(rx, 16).ok()?,
        },
    ))
}

/// `0100007F:1F90` (127.0.0.1:8080), or 32 hex digits and a port for IPv6.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (address, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let hex = address.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(hex, 16).ok()?.to_ne_bytes())
    };
    let ip = match address.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            let v6 = Ipv6Addr::from(bytes);
            // A v4 peer of a v6 socket reads best as v4.
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tcp_line_reads_by_its_inode() {
        let local = u32::from_ne_bytes([10, 201, 0, 2]);
        let remote = u32::from_ne_bytes([10, 201, 0, 1]);
        let text = format!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
             0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0\n\
             1: {local:08X}:A2C4 {remote:08X}:1451 01 003D8F00:00000000 01:00000014 00000000     0        0 222 2 0 20 4 30 10 -1\n"
        );
        let socket = parse_tcp_table(&text, 222).unwrap();
        assert_eq!(socket.local, "10.201.0.2:41668".parse().unwrap());
        assert_eq!(socket.remote, "10.201.0.1:5201".parse().unwrap());
        assert_eq!(socket.send_queue_bytes, 0x3D8F00);
        assert!(!socket.listening);
        assert!(parse_tcp_table(&text, 111).unwrap().listening);
        assert_eq!(parse_tcp_table(&text, 333), None);
    }

    #[test]
    fn a_v6_table_reads_and_v4_mapped_peers_read_as_v4() {
        let words = |bytes: [u8; 16]| -> String {
            bytes
                .chunks(4)
                .map(|c| format!("{:08X}", u32::from_ne_bytes(c.try_into().unwrap())))
                .collect()
        };
        let mapped = words(Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped().octets());
        let loopback = words(Ipv6Addr::LOCALHOST.octets());
        let text = format!(
            "header\n   0: {loopback}:1451 {mapped}:9C40 01 00000000:00000010 00:00000000 00000000  1000        0 77 1\n"
        );
        let socket = parse_tcp_table(&text, 77).unwrap();
        assert_eq!(socket.local, "[::1]:5201".parse().unwrap());
        assert_eq!(socket.remote, "127.0.0.1:40000".parse().unwrap());
        assert_eq!(socket.receive_queue_bytes, 16);
    }

    #[test]
    fn this_processes_connection_is_found() {
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let pid = std::process::id();
        let link = std::fs::read_link(format!("/proc/self/fd/{}", client.as_raw_fd())).unwrap();
        let inode: u64 = link.to_str().unwrap()[8..]
            .trim_end_matches(']')
            .parse()
            .unwrap();
        let socket = tcp_socket(pid, inode).unwrap();
        assert_eq!(socket.remote, listener.local_addr().unwrap());
    }
}
