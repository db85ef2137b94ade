//! Which connections the server takes on before they belong to a running test: at most
//! `MAX_WAITING` in all and `MAX_WAITING_PER_PEER` from one address. When the server is
//! full, the oldest connection that has not said a word is closed to make room, so idle
//! sockets cannot lock real clients out. A test's own data connections, announced when
//! it is accepted, are let in apart from these bounds: the test's stream count bounds them.

use std::collections::HashMap;
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Connections not yet part of a running test, at most.
pub const MAX_WAITING: usize = 64;
/// Of those, at most this many from one address.
pub const MAX_WAITING_PER_PEER: usize = 16;

struct Waiting {
    id: u64,
    peer: IpAddr,
    since: Instant,
    spoken: bool,
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
}

impl Admission {
    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Lets `socket` from `peer` in, or says why not. `evicted` hears of a silent
    /// connection closed to make room.
    pub fn admit(
        &self,
        socket: &TcpStream,
        peer: IpAddr,
        evicted: &dyn Fn(String),
    ) -> Result<Ticket, String> {
        let mut book = self.lock();
        if let Some(left) = book.expected.get_mut(&peer).filter(|n| **n > 0) {
            *left -= 1;
            return Ok(Ticket {
                book: self.clone(),
                id: None,
            });
        }
        if book.waiting.iter().filter(|w| w.peer == peer).count() >= MAX_WAITING_PER_PEER {
            return Err(format!(
                "{MAX_WAITING_PER_PEER} connections from this address are already waiting"
            ));
        }
        if book.waiting.len() >= MAX_WAITING {
            let oldest_silent = book
                .waiting
                .iter()
                .enumerate()
                .filter(|(_, w)| !w.spoken)
                .min_by_key(|(_, w)| w.since)
                .map(|(index, _)| index);
            let Some(index) = oldest_silent else {
                return Err(format!("{MAX_WAITING} connections are already waiting"));
            };
            let silent = book.waiting.swap_remove(index);
            // Its thread sees the end of the stream and closes it.
            let _ = silent.socket.shutdown(Shutdown::Both);
            evicted(format!(
                "{}: closed: silent for {:.1} s while the server was full",
                silent.peer,
                silent.since.elapsed().as_secs_f64()
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
            since: Instant::now(),
            spoken: false,
            socket,
        });
        Ok(Ticket {
            book: self.clone(),
            id: Some(id),
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
    /// The connection sent its first message: it is no longer a silent one.
    pub fn spoken(&self) {
        if let Some(id) = self.id
            && let Some(waiting) = self.book.lock().waiting.iter_mut().find(|w| w.id == id)
        {
            waiting.spoken = true;
        }
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
    fn bounds_per_peer_evict_the_oldest_silent_and_let_expected_in() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let book = Admission::default();
        let quiet = |_: String| {};
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let mut sockets = Vec::new();
        let mut tickets = Vec::new();
        for _ in 0..MAX_WAITING_PER_PEER {
            let (client, server) = pair(&listener);
            tickets.push(book.admit(&server, one, &quiet).unwrap());
            sockets.push((client, server));
        }
        let (_c, extra) = pair(&listener);
        assert!(book.admit(&extra, one, &quiet).is_err());
        // A test's data connections come in beside the bound, as many as announced.
        book.expect(one, 2);
        let _a = book.admit(&extra, one, &quiet).unwrap();
        let _b = book.admit(&extra, one, &quiet).unwrap();
        assert!(book.admit(&extra, one, &quiet).is_err());
        // Fill the book from other peers; the first peer's connections all spoke but one.
        for ticket in &tickets[1..] {
            ticket.spoken();
        }
        for i in 0..(MAX_WAITING - MAX_WAITING_PER_PEER) {
            let (client, server) = pair(&listener);
            let peer: IpAddr = format!("10.0.1.{}", i % 200).parse().unwrap();
            let ticket = book.admit(&server, peer, &quiet).unwrap();
            ticket.spoken();
            tickets.push(ticket);
            sockets.push((client, server));
        }
        // Full: the one silent connection goes to make room.
        let evicted = std::cell::RefCell::new(Vec::new());
        let (_c2, newcomer) = pair(&listener);
        let other: IpAddr = "10.0.2.1".parse().unwrap();
        let ticket = book
            .admit(&newcomer, other, &|line| evicted.borrow_mut().push(line))
            .unwrap();
        assert_eq!(evicted.borrow().len(), 1);
        assert!(evicted.borrow()[0].starts_with("10.0.0.1: closed: silent"));
        ticket.spoken();
        // Full of connections that all spoke: refused.
        let (_c3, late) = pair(&listener);
        assert!(book.admit(&late, other, &quiet).is_err());
        drop(tickets);
        assert!(book.admit(&late, other, &quiet).is_ok());
    }
}
