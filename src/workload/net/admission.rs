//! Which connections the server takes on before they have proven themselves (the key,
//! iperf3's credentials, or with neither a valid test request): at most `MAX_WAITING`
//! in all and `MAX_WAITING_PER_PREFIX` from one /24 (IPv4) or /64 (IPv6), since one
//! host often holds many addresses. When a bound is reached, an unproven connection is
//! closed to make room: one from the address that holds the most of them, its oldest.
//! A peer that opens connection after connection and never proves itself pushes out
//! its own, and a client with one connection on its way keeps it while any address
//! holds more. A test's own data connections, announced when it is accepted, come in
//! apart from these bounds: the test's stream count bounds them.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Connections not yet proven, at most.
pub const MAX_WAITING: usize = 64;
/// Of those, at most this many from one address prefix.
pub const MAX_WAITING_PER_PREFIX: usize = 16;

/// The network an address belongs to for the bounds: its /24 (IPv4, IPv4-mapped IPv6
/// included) or its /64 (IPv6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefix(IpAddr);

impl Prefix {
    /// The prefix of `address`.
    pub fn of(address: IpAddr) -> Prefix {
        match address {
            IpAddr::V4(v4) => Prefix(IpAddr::V4((u32::from(v4) & 0xffff_ff00).into())),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Prefix::of(IpAddr::V4(v4)),
                None => {
                    let bits = u128::from(v6) & !((1u128 << 64) - 1);
                    Prefix(IpAddr::V6(Ipv6Addr::from(bits)))
                }
            },
        }
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}/24"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

struct Waiting {
    id: u64,
    peer: IpAddr,
    prefix: Prefix,
    since: Instant,
    proven: bool,
    socket: TcpStream,
}

#[derive(Default)]
struct Book {
    waiting: Vec<Waiting>,
    expected: HashMap<IpAddr, u32>,
    next_id: u64,
}

/// The server's book of waiting connections.
#[derive(Default, Clone)]
pub struct Admission(Arc<Mutex<Book>>);

/// A connection let in; it leaves the book when dropped.
pub struct Ticket {
    book: Admission,
    id: Option<u64>,
    proven: Arc<AtomicBool>,
}

impl Book {
    /// Closes one unproven connection among those `within` picks, from the address that
    /// holds the most of them there, its oldest; says whether one was closed.
    fn evict(
        &mut self,
        within: impl Fn(&Waiting) -> bool,
        evicted: &dyn Fn(IpAddr, String),
    ) -> bool {
        let unproven = |w: &&Waiting| !w.proven && within(w);
        let mut held: HashMap<IpAddr, usize> = HashMap::new();
        for w in self.waiting.iter().filter(unproven) {
            *held.entry(w.peer).or_default() += 1;
        }
        let victim = self
            .waiting
            .iter()
            .enumerate()
            .filter(|(_, w)| unproven(w))
            .max_by_key(|(_, w)| (held[&w.peer], std::cmp::Reverse(w.since)))
            .map(|(index, _)| index);
        let Some(index) = victim else {
            return false;
        };
        let pushed = self.waiting.swap_remove(index);
        // Its thread sees the end of the stream and closes it.
        let _ = pushed.socket.shutdown(Shutdown::Both);
        evicted(
            pushed.peer,
            format!(
                "{}: closed: unproven after {:.1} s while the server was full",
                pushed.peer,
                pushed.since.elapsed().as_secs_f64()
            ),
        );
        true
    }
}

impl Admission {
    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Lets `socket` from `peer` in, or says why not (the words a refused client hears
    /// as "busy"). `evicted` hears of an unproven connection closed to make room.
    pub fn admit(
        &self,
        socket: &TcpStream,
        peer: IpAddr,
        evicted: &dyn Fn(IpAddr, String),
    ) -> Result<Ticket, String> {
        let mut book = self.lock();
        if let Some(left) = book.expected.get_mut(&peer).filter(|n| **n > 0) {
            *left -= 1;
            return Ok(Ticket {
                book: self.clone(),
                id: None,
                proven: Arc::default(),
            });
        }
        let prefix = Prefix::of(peer);
        if book.waiting.iter().filter(|w| w.prefix == prefix).count() >= MAX_WAITING_PER_PREFIX
            && !book.evict(|w| w.prefix == prefix, evicted)
        {
            return Err(format!(
                "{MAX_WAITING_PER_PREFIX} connections from {prefix} are already starting tests here"
            ));
        }
        if book.waiting.len() >= MAX_WAITING && !book.evict(|_| true, evicted) {
            return Err(format!(
                "{MAX_WAITING} connections are already starting tests here"
            ));
        }
        let socket = socket
            .try_clone()
            .map_err(|e| format!("cannot keep the socket: {e}"))?;
        let id = book.next_id;
        book.next_id += 1;
        book.waiting.push(Waiting {
            id,
            peer,
            prefix,
            since: Instant::now(),
            proven: false,
            socket,
        });
        Ok(Ticket {
            book: self.clone(),
            id: Some(id),
            proven: Arc::default(),
        })
    }

    /// Lets in `connections` more from `peer` apart from the bounds: a test's data
    /// connections, about to arrive.
    pub fn expect(&self, peer: IpAddr, connections: u32) {
        *self.lock().expected.entry(peer).or_insert(0) += connections;
    }

    /// Takes back what is left of `connections` expected from `peer`, once a test has
    /// all it will get.
    pub fn forget(&self, peer: IpAddr, connections: u32) {
        let mut book = self.lock();
        if let Some(left) = book.expected.get_mut(&peer) {
            *left = left.saturating_sub(connections);
            if *left == 0 {
                book.expected.remove(&peer);
            }
        }
    }
}

impl Ticket {
    /// The connection proved itself (the key, iperf3's credentials, or a valid test
    /// request where neither is asked for): it is no longer closed to make room.
    pub fn proven(&self) {
        self.proven.store(true, Ordering::SeqCst);
        if let Some(id) = self.id
            && let Some(waiting) = self.book.lock().waiting.iter_mut().find(|w| w.id == id)
        {
            waiting.proven = true;
        }
    }
}

impl Ticket {
    /// Whether the connection proved itself, readable after the ticket is gone.
    pub fn witness(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.proven)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.book.lock().waiting.retain(|w| w.id != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    #[test]
    fn prefixes_are_the_24_or_the_64_an_address_is_in() {
        let of = |a: &str| Prefix::of(a.parse().unwrap()).to_string();
        assert_eq!(of("10.1.2.3"), "10.1.2.0/24");
        assert_eq!(of("::ffff:10.1.2.3"), "10.1.2.0/24");
        assert_eq!(of("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
    }

    #[test]
    fn a_full_prefix_pushes_out_the_busiest_addresss_oldest_unproven() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let book = Admission::default();
        let pushed = std::cell::RefCell::new(Vec::new());
        let note = |_: IpAddr, line: String| pushed.borrow_mut().push(line);
        let mut held = Vec::new();
        // A client with one connection on its way, then a flood from two addresses of
        // its /24 that never proves itself.
        let client: IpAddr = "10.0.0.1".parse().unwrap();
        let (c, s) = pair(&listener);
        held.push((book.admit(&s, client, &note).unwrap(), c, s));
        for i in 0..40 {
            let flood: IpAddr = format!("10.0.0.{}", 2 + i % 2).parse().unwrap();
            let (c, s) = pair(&listener);
            held.push((book.admit(&s, flood, &note).unwrap(), c, s));
        }
        // The flood pushed out only its own: the client's connection is still in.
        assert_eq!(pushed.borrow().len(), 40 + 1 - MAX_WAITING_PER_PREFIX);
        assert!(pushed.borrow().iter().all(|l| !l.starts_with("10.0.0.1:")));
        let waiting = book
            .lock()
            .waiting
            .iter()
            .map(|w| w.peer)
            .collect::<Vec<_>>();
        assert!(waiting.contains(&client), "{waiting:?}");
        // A test's data connections come in beside the bound, as many as announced.
        book.expect(client, 2);
        let (_c, extra) = pair(&listener);
        let _a = book.admit(&extra, client, &note).unwrap();
        let _b = book.admit(&extra, client, &note).unwrap();
        assert_eq!(pushed.borrow().len(), 40 + 1 - MAX_WAITING_PER_PREFIX);
    }

    #[test]
    fn a_book_full_of_proven_connections_refuses_in_words() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let book = Admission::default();
        let quiet = |_: IpAddr, _: String| {};
        let mut held = Vec::new();
        for i in 0..MAX_WAITING_PER_PREFIX {
            let (c, s) = pair(&listener);
            let peer: IpAddr = format!("10.0.0.{}", i + 1).parse().unwrap();
            let ticket = book.admit(&s, peer, &quiet).unwrap();
            ticket.proven();
            held.push((ticket, c, s));
        }
        let (_c, late) = pair(&listener);
        let refused = book
            .admit(&late, "10.0.0.99".parse().unwrap(), &quiet)
            .err();
        assert!(
            refused
                .as_deref()
                .is_some_and(|r| r.contains("16 connections from 10.0.0.0/24")),
            "{refused:?}"
        );
        for i in 0..(MAX_WAITING - MAX_WAITING_PER_PREFIX) {
            let (c, s) = pair(&listener);
            let peer: IpAddr = format!("10.0.{}.1", 1 + i / 8).parse().unwrap();
            let ticket = book.admit(&s, peer, &quiet).unwrap();
            ticket.proven();
            held.push((ticket, c, s));
        }
        let other: IpAddr = "10.9.0.1".parse().unwrap();
        let refused = book.admit(&late, other, &quiet).err();
        assert!(refused.is_some_and(|r| r.contains("64 connections")));
        drop(held);
        assert!(book.admit(&late, other, &quiet).is_ok());
    }
}
