//! Every TCP socket's TCP_INFO in this network namespace, by its inode, through the
//! kernel's sock_diag netlink interface (what `ss -ti` reads): the account of a socket
//! another process holds, without root.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::tcp_info::{TcpStats, from_bytes, stats_of};

/// SOCK_DIAG_BY_FAMILY (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// INET_DIAG_INFO, the attribute carrying struct tcp_info (linux/inet_diag.h).
const INET_DIAG_INFO: u16 = 2;
/// Bytes of struct inet_diag_msg before its attributes.
const DIAG_MSG: usize = 72;
/// Where struct inet_diag_msg keeps its receive queue, send queue and inode.
const RQUEUE_AT: usize = 56;
const WQUEUE_AT: usize = 60;
const INODE_AT: usize = 68;
/// Bytes of struct nlmsghdr.
const HEADER: usize = 16;

/// One socket's account as sock_diag gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct SocketInfo {
    /// Its TCP_INFO, with the queues the dump gives: bytes unread (receive) and
    /// unacknowledged (send).
    pub tcp: TcpStats,
}

/// Every TCP socket of this network namespace that has an inode, with its TCP_INFO;
/// empty where netlink will not answer.
pub fn tcp_sockets() -> HashMap<u64, SocketInfo> {
    let mut out = HashMap::new();
    for family in [libc::AF_INET, libc::AF_INET6] {
        if let Some(fd) = open() {
            let _ = dump(&fd, family as u8, &mut out);
        }
    }
    out
}

/// The TCP_INFO of the one connection from `local` to `remote` in this network
/// namespace, looked up by its addresses (no dump of the machine's sockets, whose walk
/// of the kernel's whole table costs a millisecond or more); `None` where there is none.
pub fn tcp_connection(local: SocketAddr, remote: SocketAddr) -> Option<SocketInfo> {
    let fd = open()?;
    let family = match local {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    let mut message = request(family as u8, libc::NLM_F_REQUEST as u16);
    // struct inet_diag_sockid after the request's 8 bytes: ports and addresses in
    // network order, no interface, and no cookie (all ones).
    let id = HEADER + 8;
    message[id..id + 2].copy_from_slice(&local.port().to_be_bytes());
    message[id + 2..id + 4].copy_from_slice(&remote.port().to_be_bytes());
    message[id + 4..id + 20].copy_from_slice(&address_bytes(local.ip()));
    message[id + 20..id + 36].copy_from_slice(&address_bytes(remote.ip()));
    message[id + 40..id + 48].copy_from_slice(&[0xff; 8]);
    let mut out = HashMap::new();
    exchange(&fd, &message, &mut out)?;
    out.into_values().next()
}

/// An address as inet_diag_sockid holds it: 16 bytes, an IPv4 one in the first four.
fn address_bytes(ip: IpAddr) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => bytes[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => bytes.copy_from_slice(&v6.octets()),
    }
    bytes
}

/// A sock_diag netlink socket.
fn open() -> Option<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the descriptor is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A request about TCP sockets of `family` in every state, with TCP_INFO, its sockid
/// left empty: with NLM_F_DUMP in `flags`, every one.
fn request(family: u8, flags: u16) -> Vec<u8> {
    let mut message = Vec::with_capacity(HEADER + 56);
    let length = (HEADER + 56) as u32;
    message.extend_from_slice(&length.to_ne_bytes());
    message.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    message.extend_from_slice(&flags.to_ne_bytes());
    message.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    message.extend_from_slice(&0u32.to_ne_bytes()); // port: the kernel
    // struct inet_diag_req_v2: family, protocol, extensions, pad, states, then an
    // inet_diag_sockid of 48 bytes left empty (no filter).
    message.push(family);
    message.push(libc::IPPROTO_TCP as u8);
    message.push(1 << (INET_DIAG_INFO - 1));
    message.push(0);
    message.extend_from_slice(&u32::MAX.to_ne_bytes());
    message.extend_from_slice(&[0u8; 48]);
    message
}

/// Sends the request for every socket of `family` and reads the dump into `out`.
fn dump(fd: &OwnedFd, family: u8, out: &mut HashMap<u64, SocketInfo>) -> Option<()> {
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    exchange(fd, &request(family, flags), out)
}

/// Sends `message` and reads the answer's sockets into `out`: a dump's parts until its
/// end, or the one answer (a socket, or an error) to a request that is none.
fn exchange(fd: &OwnedFd, message: &[u8], out: &mut HashMap<u64, SocketInfo>) -> Option<()> {
    let dump = u16::from_ne_bytes([message[6], message[7]]) & libc::NLM_F_DUMP as u16 != 0;
    // SAFETY: the buffer is valid for its length; the kernel reads it.
    let sent = unsafe { libc::send(fd.as_raw_fd(), message.as_ptr().cast(), message.len(), 0) };
    if sent < 0 {
        return None;
    }
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: the kernel writes at most the buffer's length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len(), 0) };
        if n <= 0 {
            return None;
        }
        if !messages(&buffer[..n as usize], out) || !dump {
            return Some(());
        }
    }
}

/// Reads the netlink messages in `bytes` into `out`; false once the dump is done (or
/// failed).
fn messages(mut bytes: &[u8], out: &mut HashMap<u64, SocketInfo>) -> bool {
    while bytes.len() >= HEADER {
        let length = u32_at(bytes, 0) as usize;
        let kind = u16::from_ne_bytes([bytes[4], bytes[5]]);
        if length < HEADER || length > bytes.len() {
            return false;
        }
        match kind {
            k if k == libc::NLMSG_DONE as u16 || k == libc::NLMSG_ERROR as u16 => return false,
            SOCK_DIAG_BY_FAMILY => {
                if let Some((inode, info)) = socket(&bytes[HEADER..length]) {
                    out.insert(inode, info);
                }
            }
            _ => {}
        }
        bytes = &bytes[align(length).min(bytes.len())..];
    }
    true
}

/// One struct inet_diag_msg and its attributes: the socket's inode and account.
fn socket(body: &[u8]) -> Option<(u64, SocketInfo)> {
    if body.len() < DIAG_MSG {
        return None;
    }
    let inode = u64::from(u32_at(body, INODE_AT));
    let mut attributes = &body[DIAG_MSG..];
    while attributes.len() >= 4 {
        let length = u16::from_ne_bytes([attributes[0], attributes[1]]) as usize;
        let kind = u16::from_ne_bytes([attributes[2], attributes[3]]);
        if length < 4 || length > attributes.len() {
            break;
        }
        if kind == INET_DIAG_INFO && inode != 0 {
            let (info, filled) = from_bytes(&attributes[4..length]);
            let tcp = TcpStats {
                receive_queue_bytes: Some(u64::from(u32_at(body, RQUEUE_AT))),
                send_queue_bytes: Some(u64::from(u32_at(body, WQUEUE_AT))),
                ..stats_of(&info, filled)
            };
            return Some((inode, SocketInfo { tcp }));
        }
        attributes = &attributes[align(length).min(attributes.len())..];
    }
    None
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// Netlink's 4-byte alignment.
fn align(length: usize) -> usize {
    (length + 3) & !3
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_connection_of_this_process_is_found_by_its_inode_with_its_account() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut sender = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut receiver, _) = listener.accept().unwrap();
        sender.write_all(&[7u8; 100_000]).unwrap();
        let mut got = vec![0u8; 100_000];
        receiver.read_exact(&mut got).unwrap();
        let inode = std::fs::metadata(format!("/proc/self/fd/{}", sender.as_raw_fd()))
            .unwrap()
            .ino();
        let sockets = tcp_sockets();
        let info = sockets.get(&inode).expect("the sender's socket");
        let one = tcp_connection(sender.local_addr().unwrap(), sender.peer_addr().unwrap());
        assert_eq!(one.as_ref().and_then(|i| i.tcp.bytes_acked), Some(100_001));
        // The SYN is acknowledged too.
        assert_eq!(info.tcp.bytes_acked, Some(100_001), "{info:?}");
        assert_eq!(info.tcp.bytes_sent, Some(100_000), "{info:?}");
        assert!(info.tcp.busy_us.is_some(), "{info:?}");
    }
}
