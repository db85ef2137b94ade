//! Each way the server closes a connection, as one value: what it logs after
//! `closed:` and, for a control connection turned away, what the client is told. Both
//! protocols' exchanges and the stop end connections with it, so it sits below them.

use std::time::Duration;

use crate::workload::net::protocol::{Message, PROTOCOL, WireError};

/// Why the server closed a connection: each message is what it logs after `closed:`,
/// and, for a control connection turned away, what the client is told.
#[derive(Debug, thiserror::Error)]
pub(in crate::workload::net) enum Closed {
    /// The connection's first message did not come whole and in time.
    #[error("first message: {0}")]
    FirstMessage(WireError),
    /// The connection opened with a message that cannot come first.
    #[error("a connection must open with hello or data, not {0}")]
    Misplaced(&'static str),
    /// A data connection came after its test stopped waiting for them.
    #[error("data connection{} came too late", .0.map(|s| format!(" for stream {s}")).unwrap_or_default())]
    DataTooLate(Option<u32>),
    /// A data connection's cookie names no test.
    #[error("data connection for no test running here")]
    DataForNoTest,
    /// A data connection presented a test's cookie from another address than the
    /// test's client.
    #[error("data connection from another address than its test's client ({0})")]
    DataElsewhere(std::net::IpAddr),
    /// The client speaks another protocol version.
    #[error("protocol version {0} is not spoken here (this server speaks {PROTOCOL})")]
    Version(u32),
    /// The client's nonce is not 32 bytes in hex.
    #[error("the client nonce must be 32 bytes in hex")]
    Nonce,
    /// The client's proof is not of the server's key.
    #[error("wrong key")]
    WrongKey,
    /// The client sent one message where the exchange needs another.
    #[error("expected {expected}, got {got}")]
    Unexpected {
        /// The message the exchange needs.
        expected: &'static str,
        /// The message that came.
        got: &'static str,
    },
    /// The test asked for is beyond the server's bounds; says which.
    #[error("{0}")]
    OutOfBounds(String),
    /// No test can start now; says why.
    #[error("busy: {0}")]
    Busy(String),
    /// Not every data connection of the test came in time.
    #[error("{arrived} of {wanted} data connections arrived within {timeout:?}")]
    DataMissing {
        /// Those that came.
        arrived: usize,
        /// Those the test needs.
        wanted: u32,
        /// How long the server waited.
        timeout: Duration,
    },
    /// A data connection named a stream the test does not have, or one already in.
    #[error("data connection for stream {0}, which is out of range or taken")]
    DataTaken(u32),
    /// The test's cookie could not be sent; refused like a test whose data connections
    /// never came, as both end the test before it starts.
    #[error(transparent)]
    Announce(WireError),
    /// The client closed after the welcome, asking for no test: a ratelab client checks
    /// the server this way (and takes its bounds) before its run starts.
    #[error("after the handshake, as a client does that checks the server before its test")]
    Checked,
    /// The server is stopping: the test ended early; a client that understands it is
    /// told so (see [`super::stop::tell`]).
    #[error("the server is stopping")]
    Stopping,
    /// The control connection failed, timed out or carried a malformed message.
    #[error(transparent)]
    Wire(#[from] WireError),
}

impl Closed {
    /// What the peer is told before the connection closes: nothing on a connection that
    /// failed or that carries data.
    pub(super) fn answer(&self) -> Option<Message> {
        match self {
            Closed::FirstMessage(_)
            | Closed::DataTooLate(_)
            | Closed::DataForNoTest
            | Closed::DataElsewhere(_)
            | Closed::Wire(_)
            | Closed::Checked
            | Closed::Stopping => None,
            Closed::Busy(reason) => Some(Message::Busy {
                reason: reason.clone(),
            }),
            refused => Some(Message::Refused {
                reason: refused.to_string(),
            }),
        }
    }

    /// `got` came where the exchange needs `expected`.
    pub(super) fn unexpected(expected: &'static str, got: &Message) -> Closed {
        Closed::Unexpected {
            expected,
            got: got.name(),
        }
    }
}
