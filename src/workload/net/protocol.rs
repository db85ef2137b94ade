//! The control protocol between `ratelab net HOST` and `ratelab net serve`: frames of a
//! 4-byte big-endian length and a JSON message, with a version in the first message.
//! Decoding is a pure function over bytes, so it can be fuzzed without a socket.
//!
//! Within a version the protocol grows without breaking older builds: a field added to
//! a message has a default (unknown fields are ignored, except in a test request, which
//! a server must not misread), and a message added later is sent only to a client that
//! named it in its hello's `understands`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::report::{Role, SideReport};

/// The protocol version this build speaks; a server refuses any other.
pub const PROTOCOL: u32 = 1;

/// The messages added after version 1 was first spoken, as a client names them in its
/// hello's `understands`: `stopping`.
pub const STOPPING: &str = "stopping";

/// Largest frame a server accepts from a client: requests are small.
pub const MAX_REQUEST_BYTES: usize = 16 << 10;

/// Largest frame a client accepts from a server: results of every stream and interval.
pub const MAX_RESULTS_BYTES: usize = 16 << 20;

/// What the client asks the server to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestRequest {
    /// Streams per direction.
    pub streams: u32,
    /// Who sends.
    pub direction: Direction,
    /// How long senders send, in milliseconds; absent when `bytes` bounds the test.
    pub duration_ms: Option<u64>,
    /// Bytes each sending stream sends; absent when `duration_ms` bounds the test.
    pub bytes_per_stream: Option<u64>,
    /// Bytes per write or read call.
    pub block_bytes: u64,
    /// SO_SNDBUF and SO_RCVBUF to set on the server's data sockets.
    pub window_bytes: Option<u64>,
    /// Interval of the per-stream reports, in milliseconds.
    pub interval_ms: u64,
    /// A UDP test's datagrams (each of `block_bytes`); absent for TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<Udp>,
}

/// How a UDP test's datagrams carry their count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Udp {
    /// Whether the count is 64 bits (iperf3's `--udp-counters-64bit`), else 32.
    pub wide_counts: bool,
}

/// Who sends data in a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The client sends, the server receives (iperf3's default).
    Forward,
    /// The server sends, the client receives (`--reverse`).
    Reverse,
    /// Both at once, on separate streams (`--bidir`).
    Bidir,
}

impl Direction {
    /// Whether stream `index` of `streams` per direction carries data from the client.
    pub fn client_sends(self, index: u32, streams: u32) -> bool {
        match self {
            Direction::Forward => true,
            Direction::Reverse => false,
            Direction::Bidir => index < streams,
        }
    }

    /// What the client does on stream `stream` of a test with `streams` per direction.
    pub fn client_role(self, stream: u32, streams: u32) -> Role {
        if self.client_sends(stream, streams) {
            Role::Send
        } else {
            Role::Receive
        }
    }

    /// What the server does on that stream: the other half.
    pub fn server_role(self, stream: u32, streams: u32) -> Role {
        match self.client_role(stream, streams) {
            Role::Send => Role::Receive,
            Role::Receive => Role::Send,
        }
    }

    /// Data connections a test with `streams` per direction opens.
    pub fn connections(self, streams: u32) -> u32 {
        match self {
            Direction::Bidir => streams.saturating_mul(2),
            _ => streams,
        }
    }
}

/// The bounds a server enforces, sent to clients so they can say why a test was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Most streams per direction.
    pub max_streams: u32,
    /// Longest test, in milliseconds.
    pub max_duration_ms: u64,
    /// Most bytes one test may move, all streams together.
    pub max_bytes: u64,
    /// Most memory one test's blocks may take, all connections together (a server
    /// before this bound sends none: then no bound is known).
    #[serde(default = "unbounded")]
    pub max_memory_bytes: u64,
}

fn unbounded() -> u64 {
    u64::MAX
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// Client, first on a control connection: its version and a fresh nonce (hex).
    Hello {
        /// The protocol version the client speaks.
        protocol: u32,
        /// 32 random bytes in hex, for the server's proof of the key.
        client_nonce: String,
        /// The later messages this client understands ([`STOPPING`]); absent from the
        /// hellos of clients that understand none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        understands: Vec<String>,
    },
    /// Server, when it checks a key: a fresh nonce to prove the key against.
    Challenge {
        /// 32 random bytes in hex.
        server_nonce: String,
    },
    /// Client: HMAC-SHA256 of both nonces under the key, in hex.
    Auth {
        /// The client's proof.
        client_proof: String,
    },
    /// Server: ready for a test request.
    Welcome {
        /// The server's proof that it holds the key too (when it checks one).
        server_proof: Option<String>,
        /// The bounds it enforces.
        limits: Limits,
    },
    /// Client: the test to run.
    Start(TestRequest),
    /// Server: the test is accepted; data connections present this cookie.
    Accepted {
        /// Names the test on its data connections (hex).
        cookie: String,
    },
    /// Client, first on a data connection: which test and stream it carries.
    Data {
        /// The test's cookie.
        cookie: String,
        /// The stream's index.
        stream: u32,
    },
    /// Client: every data connection is open; start now.
    Go,
    /// Server: what its end measured.
    Results(Box<SideReport>),
    /// Server: no test can start now; try later.
    Busy {
        /// Why, in words.
        reason: String,
    },
    /// Either end: the request is refused or broken; the connection closes.
    Refused {
        /// Why, in words.
        reason: String,
    },
    /// Server, to a client that understands it: the server is stopping, so the test ends
    /// now without results; the connection closes.
    Stopping {
        /// Why, in words.
        reason: String,
    },
}

impl Message {
    /// The message's type name, for logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Hello { .. } => "hello",
            Message::Challenge { .. } => "challenge",
            Message::Auth { .. } => "auth",
            Message::Welcome { .. } => "welcome",
            Message::Start(_) => "start",
            Message::Accepted { .. } => "accepted",
            Message::Data { .. } => "data",
            Message::Go => "go",
            Message::Results(_) => "results",
            Message::Busy { .. } => "busy",
            Message::Refused { .. } => "refused",
            Message::Stopping { .. } => "stopping",
        }
    }
}

/// Why bytes are not a message.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecodeError {
    /// More bytes are needed.
    #[error("truncated frame: {have} of {need} bytes")]
    Incomplete {
        /// Bytes at hand.
        have: usize,
        /// Bytes the frame needs.
        need: usize,
    },
    /// The length prefix is over the limit.
    #[error("frame of {length} bytes is over the limit of {limit}")]
    Oversized {
        /// The announced length.
        length: usize,
        /// The limit.
        limit: usize,
    },
    /// The body is not a message this version knows.
    #[error("malformed message: {0}")]
    Malformed(String),
}

/// Decodes one frame from the front of `bytes`: the message and the bytes it took.
pub fn decode(bytes: &[u8], limit: usize) -> Result<(Message, usize), DecodeError> {
    let (body, used) = frame_body(bytes, limit)?;
    let message =
        serde_json::from_slice(body).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    Ok((message, used))
}

/// The body of the frame at the front of `bytes` (a 4-byte big-endian length, then the
/// body: ratelab's framing, and iperf3's), and the bytes the whole frame takes.
pub fn frame_body(bytes: &[u8], limit: usize) -> Result<(&[u8], usize), DecodeError> {
    let Some(prefix) = bytes.get(..4) else {
        return Err(DecodeError::Incomplete {
            have: bytes.len(),
            need: 4,
        });
    };
    let length = u32::from_be_bytes(prefix.try_into().expect("4 bytes")) as usize;
    if length > limit {
        return Err(DecodeError::Oversized { length, limit });
    }
    match bytes.get(4..4 + length) {
        Some(body) => Ok((body, 4 + length)),
        None => Err(DecodeError::Incomplete {
            have: bytes.len(),
            need: 4 + length,
        }),
    }
}

/// The frame of `message`.
pub fn encode(message: &Message) -> Vec<u8> {
    framed(message)
}

/// Any value as JSON behind its 4-byte big-endian length (ratelab's framing, and
/// iperf3's).
pub fn framed<T: Serialize>(value: &T) -> Vec<u8> {
    let body = serde_json::to_vec(value).expect("messages serialise");
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// Why a message could not be exchanged.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The peer sent something that is not a message.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The peer was silent or too slow past the deadline.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The peer closed the connection.
    #[error("connection closed by the peer")]
    Closed,
    /// The socket failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Sends one message, within `timeout`.
pub fn send(stream: &TcpStream, message: &Message, timeout: Duration) -> Result<(), WireError> {
    stream.set_write_timeout(Some(timeout.max(Duration::from_millis(1))))?;
    let mut stream = stream;
    stream
        .write_all(&encode(message))
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                WireError::Timeout(timeout)
            }
            _ => WireError::Io(e),
        })
}

/// What one read against a deadline gave.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadBy {
    /// This many bytes; 0 when the peer closed.
    Read(usize),
    /// The deadline passed first.
    Late,
}

/// Reads into `buf` what arrives before `deadline`, retrying interrupted reads: the one
/// deadline-bounded read every exchange on a control connection uses.
pub fn read_by(
    mut stream: &TcpStream,
    buf: &mut [u8],
    deadline: Instant,
) -> std::io::Result<ReadBy> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(ReadBy::Late);
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(buf) {
            Ok(n) => return Ok(ReadBy::Read(n)),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(ReadBy::Late);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Receives one message whose frame must arrive whole within `timeout`, so a peer that
/// trickles bytes is cut off as surely as a silent one.
pub fn receive(stream: &TcpStream, limit: usize, timeout: Duration) -> Result<Message, WireError> {
    let deadline = Instant::now() + timeout;
    let mut buffer = Vec::with_capacity(256);
    let mut chunk = [0u8; 4096];
    loop {
        match decode(&buffer, limit) {
            // A control peer never sends a second frame before the answer to its
            // first, so bytes past this frame are a protocol error.
            Ok((message, used)) if used == buffer.len() => return Ok(message),
            Ok((message, _)) => {
                return Err(DecodeError::Malformed(format!(
                    "bytes after the {} message",
                    message.name()
                ))
                .into());
            }
            Err(DecodeError::Incomplete { need, .. }) => {
                // Never read past the frame: data may follow a data connection's header.
                let want = (need - buffer.len()).min(chunk.len());
                match read_by(stream, &mut chunk[..want], deadline)? {
                    ReadBy::Read(0) => return Err(WireError::Closed),
                    ReadBy::Read(n) => buffer.extend_from_slice(&chunk[..n]),
                    ReadBy::Late => return Err(WireError::Timeout(timeout)),
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip() {
        let messages = [
            Message::Hello {
                protocol: PROTOCOL,
                client_nonce: "ab".repeat(32),
                understands: Vec::new(),
            },
            Message::Hello {
                protocol: PROTOCOL,
                client_nonce: "cd".repeat(32),
                understands: vec![STOPPING.into()],
            },
            Message::Start(TestRequest {
                streams: 2,
                direction: Direction::Bidir,
                duration_ms: Some(10_000),
                bytes_per_stream: None,
                block_bytes: 128 << 10,
                window_bytes: None,
                interval_ms: 1000,
                udp: None,
            }),
            Message::Go,
            Message::Busy {
                reason: "a test is running".into(),
            },
            Message::Stopping {
                reason: "it was interrupted".into(),
            },
        ];
        for message in messages {
            let frame = encode(&message);
            assert_eq!(
                decode(&frame, MAX_REQUEST_BYTES),
                Ok((message, frame.len()))
            );
        }
    }

    #[test]
    fn hellos_of_older_and_newer_clients_are_understood() {
        let hello = |body: &str| decode(&encode_body(body), MAX_REQUEST_BYTES).map(|(m, _)| m);
        let nonce = "ab".repeat(32);
        // As a client of version 1 before `understands` sends it: it understands nothing
        // later, so it is never sent a later message.
        assert_eq!(
            hello(&format!(
                r#"{{"type":"hello","protocol":1,"client_nonce":"{nonce}"}}"#
            )),
            Ok(Message::Hello {
                protocol: 1,
                client_nonce: nonce.clone(),
                understands: Vec::new(),
            })
        );
        // A field this build does not know is ignored, as servers of version 1 ignore
        // `understands`; so are later messages named in it.
        assert_eq!(
            hello(&format!(
                r#"{{"type":"hello","protocol":1,"client_nonce":"{nonce}","understands":["stopping","later"],"later":true}}"#
            )),
            Ok(Message::Hello {
                protocol: 1,
                client_nonce: nonce,
                understands: vec![STOPPING.into(), "later".into()],
            })
        );
        // A hello that names nothing later is framed as a version 1 client framed it.
        let plain = encode(&Message::Hello {
            protocol: 1,
            client_nonce: "ab".repeat(32),
            understands: Vec::new(),
        });
        assert!(!String::from_utf8_lossy(&plain).contains("understands"));
    }

    /// A frame of `body`.
    fn encode_body(body: &str) -> Vec<u8> {
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(body.as_bytes());
        frame
    }

    #[test]
    fn limits_and_garbage() {
        let frame = encode(&Message::Go);
        assert!(matches!(
            decode(&frame[..frame.len() - 1], 100),
            Err(DecodeError::Incomplete { .. })
        ));
        assert!(matches!(
            decode(&[0xff, 0xff, 0xff, 0xff], 100),
            Err(DecodeError::Oversized { .. })
        ));
        assert!(matches!(
            decode(b"\0\0\0\x02{}", 100),
            Err(DecodeError::Malformed(_))
        ));
        assert!(matches!(
            decode(b"\0\0\0\x0f{\"type\":\"nope\"}", 100),
            Err(DecodeError::Malformed(_))
        ));
    }

    proptest! {
        /// The decoder never panics and never claims more bytes than it was given.
        #[test]
        fn decoder_survives_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok((_, used)) = decode(&bytes, MAX_REQUEST_BYTES) {
                prop_assert!(used <= bytes.len());
            }
        }

        /// A valid frame cut anywhere is incomplete, never a different message.
        #[test]
        fn truncated_frames_are_incomplete(cut in 0usize..60) {
            let frame = encode(&Message::Data { cookie: "00ff".repeat(8), stream: 3 });
            let cut = cut.min(frame.len() - 1);
            let is_incomplete = matches!(decode(&frame[..cut], MAX_REQUEST_BYTES), Err(DecodeError::Incomplete { .. }));
            prop_assert!(is_incomplete);
        }

        /// A stopping message, whatever its reason, comes back as it was sent.
        #[test]
        fn stopping_round_trips(reason in ".{0,200}") {
            let message = Message::Stopping { reason };
            let frame = encode(&message);
            prop_assert_eq!(decode(&frame, MAX_REQUEST_BYTES), Ok((message, frame.len())));
        }

        /// Garbage bodies inside a well-formed length prefix are refused, not misread.
        #[test]
        fn garbage_bodies_are_malformed(body in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut frame = (body.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(&body);
            match decode(&frame, MAX_REQUEST_BYTES) {
                Ok((message, used)) => {
                    prop_assert_eq!(used, frame.len());
                    // Only bytes that are a real message decode.
                    prop_assert_eq!(serde_json::from_slice::<Message>(&body).ok(), Some(message));
                }
                Err(e) => { let is_malformed = matches!(e, DecodeError::Malformed(_)); prop_assert!(is_malformed); }
            }
        }
    }
}
