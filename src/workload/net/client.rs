//! The client's side of the control protocol: handshake (and key proof), the test
//! request, the data connections, the start signal and the server's results.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::foreign::{self, HELLO_TIMEOUT};
use super::key::{self, Key};
use super::protocol::{
    self, Limits, MAX_REQUEST_BYTES, MAX_RESULTS_BYTES, Message, PROTOCOL, STOPPING, TestRequest,
};
use super::report::SideReport;
use super::session::Connection;
use super::socket;
use crate::error::Error;

/// Longest wait for the server's answer to a request message, or to the key's proof.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// An open control connection that passed the handshake.
pub struct Control {
    socket: TcpStream,
    peer: String,
    address: SocketAddr,
    /// The bounds the server enforces.
    pub limits: Limits,
}

impl Control {
    /// Connects to `address` (named `peer` in errors) and does the handshake, proving
    /// `key` and checking the server's proof of it when one is given; `mss` bounds its
    /// segments as the streams' (`-M`), so that where only small segments cross, the
    /// server's report does too.
    pub fn open(
        address: SocketAddr,
        peer: &str,
        key: Option<&Key>,
        mss: Option<u32>,
    ) -> Result<Control, Error> {
        let fail = |reason: String| Error::Peer {
            peer: peer.to_string(),
            reason,
        };
        let socket = socket::connect(&address, ANSWER_TIMEOUT, None, mss).map_err(|e| {
            fail(format!(
                "cannot connect: {e} (is `ratelab net serve` running there?)"
            ))
        })?;
        let mut control = Control {
            socket,
            peer: peer.to_string(),
            address,
            limits: Limits {
                max_streams: 0,
                max_duration_ms: 0,
                max_bytes: 0,
                max_memory_bytes: 0,
            },
        };
        let client_nonce = key::nonce();
        control.send(&Message::Hello {
            protocol: PROTOCOL,
            client_nonce: client_nonce.clone(),
            understands: vec![STOPPING.into()],
        })?;
        // The answer to a hello is small and comes at once from a ratelab server; what
        // else answers (or stays silent) is named within a short deadline.
        let mut answer = foreign::receive_answer(&control.socket, MAX_REQUEST_BYTES, HELLO_TIMEOUT)
            .map_err(|e| control.fail(e.to_string()))?;
        let mut server_nonce = None;
        if let Message::Challenge {
            server_nonce: nonce,
        } = &answer
        {
            let Some(key) = key else {
                return Err(fail(
                    "the server checks a key: give the same key file with --key-file".into(),
                ));
            };
            control.send(&Message::Auth {
                client_proof: key.proof("client", &client_nonce, nonce),
            })?;
            server_nonce = Some(nonce.clone());
            answer = control.receive(ANSWER_TIMEOUT)?;
        }
        match answer {
            Message::Welcome {
                server_proof,
                limits,
            } => {
                if let Some(key) = key {
                    let proven = match (&server_nonce, &server_proof) {
                        (Some(nonce), Some(proof)) => {
                            key.verify("server", &client_nonce, nonce, proof)
                        }
                        _ => false,
                    };
                    if !proven {
                        return Err(fail(
                            "the server did not prove the key of --key-file: not the server you meant"
                                .into(),
                        ));
                    }
                }
                control.limits = limits;
                Ok(control)
            }
            other => Err(control.unexpected(other, "welcome")),
        }
    }

    /// Asks for `request` and opens its data connections.
    pub fn start(&self, request: &TestRequest, mss: Option<u32>) -> Result<Vec<Connection>, Error> {
        self.send(&Message::Start(request.clone()))?;
        let cookie = match self.receive(ANSWER_TIMEOUT)? {
            Message::Accepted { cookie } => cookie,
            other => return Err(self.unexpected(other, "accepted")),
        };
        (0..request.direction.connections(request.streams))
            .map(|stream| {
                let socket =
                    socket::connect(&self.address, ANSWER_TIMEOUT, request.window_bytes, mss)
                        .map_err(|e| self.fail(format!("data connection {stream}: {e}")))?;
                protocol::send(
                    &socket,
                    &Message::Data {
                        cookie: cookie.clone(),
                        stream,
                    },
                    ANSWER_TIMEOUT,
                )
                .map_err(|e| self.fail(format!("data connection {stream}: {e}")))?;
                let role = request.direction.client_role(stream, request.streams);
                Ok(Connection::new(
                    stream,
                    role,
                    socket,
                    request.block_bytes as usize,
                ))
            })
            .collect()
    }

    /// Tells the server to start.
    pub fn go(&self) -> Result<(), Error> {
        self.send(&Message::Go)
    }

    /// Waits up to `timeout` for the server's report.
    pub fn results(&self, timeout: Duration) -> Result<SideReport, Error> {
        match protocol::receive(&self.socket, MAX_RESULTS_BYTES, timeout)
            .map_err(|e| self.fail(format!("waiting for its results: {e}")))?
        {
            Message::Results(report) => Ok(report.with_text_escaped()),
            other => Err(self.unexpected(other, "results")),
        }
    }

    fn send(&self, message: &Message) -> Result<(), Error> {
        protocol::send(&self.socket, message, ANSWER_TIMEOUT)
            .map_err(|e| self.fail(format!("sending {}: {e}", message.name())))
    }

    fn receive(&self, timeout: Duration) -> Result<Message, Error> {
        protocol::receive(&self.socket, MAX_RESULTS_BYTES, timeout)
            .map_err(|e| self.fail(format!("no answer: {e}")))
    }

    fn fail(&self, reason: String) -> Error {
        Error::Peer {
            peer: self.peer.clone(),
            reason,
        }
    }

    /// The error for an answer other than `expected`: busy, refused and stopping say why.
    fn unexpected(&self, answer: Message, expected: &str) -> Error {
        self.fail(match answer {
            Message::Busy { reason } => format!("the server is busy: {reason}"),
            Message::Refused { reason } => format!("refused: {reason}"),
            Message::Stopping { reason } => {
                format!("the server stopped before the test ended: {reason}")
            }
            other => format!("expected {expected}, got {}", other.name()),
        })
    }
}
