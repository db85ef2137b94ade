//! A peer that is not a ratelab server: the client reads the answer to its hello within
//! a short deadline of its own, and when the first bytes cannot start a ratelab frame,
//! or none come, says what the peer looks like (an HTTP, SSH, TLS or iperf3 server, or
//! something silent) instead of waiting out the usual timeout. Telling them apart is a
//! pure function over those first bytes.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::protocol::{self, DecodeError, Message, ReadBy, WireError};

/// Longest wait for the first answer to a hello: a ratelab server answers at once.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(3);
/// Once bytes that are not ratelab's came, how long to wait for more of them, so a
/// reply sent in several pieces is seen whole enough to be named.
const LINGER: Duration = Duration::from_millis(300);
/// Bytes of a foreign reply kept to name it.
const SNIFF_BYTES: usize = 512;
/// Characters of a foreign reply quoted in a message.
const QUOTE_CHARS: usize = 60;

/// What a peer that does not speak ratelab's protocol looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Foreign {
    /// It answered with an HTTP status line.
    Http {
        /// The status line, as sent.
        status_line: String,
    },
    /// It sent an SSH banner.
    Ssh {
        /// The banner, as sent.
        banner: String,
    },
    /// It answered with a TLS alert record.
    Tls,
    /// It answered with one of the state bytes an iperf3 server sends a new client.
    Iperf3 {
        /// The state byte.
        state: u8,
    },
    /// It answered with text of no protocol named here.
    Text {
        /// The first line, as sent.
        line: String,
    },
    /// It answered with bytes of no protocol named here.
    Binary {
        /// The first few bytes, in hex.
        hex: String,
        /// How many bytes came.
        bytes: usize,
    },
    /// It accepted the connection and said nothing.
    Silent,
}

/// iperf3's state bytes a server sends a client that just sent its cookie (iperf 3.x,
/// src/iperf_api.h): PARAM_EXCHANGE to go on, ACCESS_DENIED while a test runs,
/// SERVER_ERROR when it cannot read what came.
const IPERF3_STATES: [(u8, &str); 3] = [
    (9, "PARAM_EXCHANGE"),
    (-1i8 as u8, "ACCESS_DENIED"),
    (-2i8 as u8, "SERVER_ERROR"),
];

/// Names what sent `bytes` in answer to a hello, when they are not a ratelab message.
pub fn classify(bytes: &[u8]) -> Foreign {
    if bytes.is_empty() {
        return Foreign::Silent;
    }
    if bytes.starts_with(b"HTTP/") {
        return Foreign::Http {
            status_line: first_line(bytes),
        };
    }
    if bytes.starts_with(b"SSH-") {
        return Foreign::Ssh {
            banner: first_line(bytes),
        };
    }
    // A record of type 21 (alert) in TLS 1.x, whose version bytes start with 3.
    if bytes.len() >= 2 && bytes[0] == 0x15 && bytes[1] == 0x03 {
        return Foreign::Tls;
    }
    // iperf3 answers a new client with one state byte and then waits, or closes.
    if let [state] = bytes
        && IPERF3_STATES.iter().any(|(byte, _)| byte == state)
    {
        return Foreign::Iperf3 { state: *state };
    }
    let line = first_line(bytes);
    let text = bytes
        .iter()
        .take_while(|b| **b != b'\n')
        .all(|b| b.is_ascii_graphic() || *b == b' ' || *b == b'\t' || *b == b'\r');
    if text && !line.is_empty() {
        return Foreign::Text { line };
    }
    Foreign::Binary {
        hex: bytes
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" "),
        bytes: bytes.len(),
    }
}

/// The first line of `bytes` as printable text, cut to [`QUOTE_CHARS`].
fn first_line(bytes: &[u8]) -> String {
    let line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    let text: String = String::from_utf8_lossy(line)
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    let text = text.trim();
    match text.char_indices().nth(QUOTE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

impl std::fmt::Display for Foreign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const ELSEWHERE: &str = "check --port, or run `ratelab net serve` there";
        match self {
            Foreign::Silent => {
                return write!(
                    f,
                    "it accepted the connection but did not answer ratelab's hello within {} s: \
                     it does not speak ratelab's protocol ({ELSEWHERE})",
                    HELLO_TIMEOUT.as_secs()
                );
            }
            _ => f.write_str("it does not speak ratelab's protocol: ")?,
        }
        match self {
            Foreign::Http { status_line } => write!(
                f,
                "it looks like an HTTP server (it answered `{status_line}`): {ELSEWHERE}"
            ),
            Foreign::Ssh { banner } => write!(
                f,
                "it looks like an SSH server (its banner is `{banner}`): {ELSEWHERE}"
            ),
            Foreign::Tls => write!(
                f,
                "it looks like a TLS server (it answered with a TLS alert): {ELSEWHERE}"
            ),
            Foreign::Iperf3 { state } => {
                let name = IPERF3_STATES
                    .iter()
                    .find(|(byte, _)| byte == state)
                    .map_or("?", |(_, name)| name);
                write!(
                    f,
                    "it looks like an iperf3 server (it answered with iperf3's state byte {}, \
                     {name}): run `ratelab net serve` there (or use iperf3 -c)",
                    *state as i8
                )
            }
            Foreign::Text { line } => write!(f, "it answered `{line}`: {ELSEWHERE}"),
            Foreign::Binary { hex, bytes } => write!(
                f,
                "it answered with {bytes} byte{} that are not a ratelab message ({hex}{}): \
                 {ELSEWHERE}",
                if *bytes == 1 { "" } else { "s" },
                if *bytes > 8 { " …" } else { "" }
            ),
            Foreign::Silent => Ok(()),
        }
    }
}

/// Why the first answer to a hello is not a message.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// The peer is not a ratelab server.
    #[error("{0}")]
    Foreign(Foreign),
    /// The exchange failed as it can with a ratelab server too.
    #[error("no answer: {0}")]
    Wire(#[from] WireError),
}

/// Whether `bytes` can be the start of a frame of at most `limit` bytes: the length
/// prefix they begin, however it goes on, is within the limit.
pub fn could_start_frame(bytes: &[u8], limit: usize) -> bool {
    let mut prefix = [0u8; 4];
    let known = bytes.len().min(4);
    prefix[..known].copy_from_slice(&bytes[..known]);
    u32::from_be_bytes(prefix) as usize <= limit
}

/// Receives the answer to a hello, a frame of at most `limit` bytes, within `timeout`;
/// bytes that cannot start such a frame, or silence, are named as a [`Foreign`] peer.
pub fn receive_answer(
    stream: &TcpStream,
    limit: usize,
    timeout: Duration,
) -> Result<Message, AnswerError> {
    let deadline = Instant::now() + timeout;
    let mut buffer = Vec::with_capacity(256);
    let mut chunk = [0u8; 4096];
    loop {
        if !could_start_frame(&buffer, limit) {
            linger(stream, &mut buffer);
            return Err(AnswerError::Foreign(classify(&buffer)));
        }
        let need = match protocol::decode(&buffer, limit) {
            Ok((message, used)) if used == buffer.len() => return Ok(message),
            Ok((message, _)) => {
                return Err(WireError::from(DecodeError::Malformed(format!(
                    "bytes after the {} message",
                    message.name()
                )))
                .into());
            }
            Err(DecodeError::Incomplete { need, .. }) => need,
            Err(e) => return Err(WireError::from(e).into()),
        };
        // Silence, or a reply that stopped short, from a peer that closed or went quiet.
        let foreign = || AnswerError::Foreign(classify(&buffer));
        // Never read past the frame, as protocol::receive does not.
        let want = (need - buffer.len()).min(chunk.len());
        match protocol::read_by(stream, &mut chunk[..want], deadline) {
            Ok(ReadBy::Read(0)) if buffer.is_empty() => return Err(WireError::Closed.into()),
            Ok(ReadBy::Read(n)) if n > 0 => buffer.extend_from_slice(&chunk[..n]),
            Ok(_) => return Err(foreign()),
            Err(e) if buffer.is_empty() => return Err(WireError::from(e).into()),
            Err(_) => return Err(foreign()),
        }
    }
}

/// Reads what else a foreign peer sends within [`LINGER`], up to [`SNIFF_BYTES`].
fn linger(stream: &TcpStream, buffer: &mut Vec<u8>) {
    let until = Instant::now() + LINGER;
    let mut chunk = [0u8; SNIFF_BYTES];
    while buffer.len() < SNIFF_BYTES {
        let want = SNIFF_BYTES - buffer.len();
        match protocol::read_by(stream, &mut chunk[..want], until) {
            Ok(ReadBy::Read(n)) if n > 0 => buffer.extend_from_slice(&chunk[..n]),
            // Quiet, closed or reset: what came is all there is.
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::net::protocol::{MAX_REQUEST_BYTES, encode};

    #[test]
    fn servers_are_named_by_their_first_bytes() {
        assert_eq!(
            classify(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"),
            Foreign::Http {
                status_line: "HTTP/1.1 400 Bad Request".into()
            }
        );
        assert_eq!(
            classify(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"),
            Foreign::Ssh {
                banner: "SSH-2.0-OpenSSH_9.2p1 Debian-2".into()
            }
        );
        assert_eq!(
            classify(&[0x15, 0x03, 0x03, 0x00, 0x02, 2, 70]),
            Foreign::Tls
        );
        assert_eq!(classify(&[9]), Foreign::Iperf3 { state: 9 });
        assert_eq!(classify(&[0xff]), Foreign::Iperf3 { state: 0xff });
        assert_eq!(classify(&[0xfe]), Foreign::Iperf3 { state: 0xfe });
        assert_eq!(
            classify(b"220 mail.example.org ESMTP\r\n"),
            Foreign::Text {
                line: "220 mail.example.org ESMTP".into()
            }
        );
        assert_eq!(classify(b""), Foreign::Silent);
        // One byte that is no iperf3 state, and iperf3's byte followed by more, are not
        // taken for iperf3.
        assert_eq!(
            classify(&[7]),
            Foreign::Binary {
                hex: "07".into(),
                bytes: 1
            }
        );
        assert!(matches!(
            classify(&[9, 0, 1]),
            Foreign::Binary { bytes: 3, .. }
        ));
    }

    #[test]
    fn messages_name_the_server_and_what_to_do() {
        let iperf3 = classify(&[9]).to_string();
        assert_eq!(
            iperf3,
            "it does not speak ratelab's protocol: it looks like an iperf3 server (it \
             answered with iperf3's state byte 9, PARAM_EXCHANGE): run `ratelab net serve` \
             there (or use iperf3 -c)"
        );
        assert!(
            classify(&[0xff])
                .to_string()
                .contains("state byte -1, ACCESS_DENIED")
        );
        let http = classify(b"HTTP/1.1 400 Bad Request\r\n\r\n").to_string();
        assert!(http.contains("an HTTP server (it answered `HTTP/1.1 400 Bad Request`)"));
        assert!(http.contains("--port"));
        assert!(classify(b"").to_string().contains("within 3 s"));
        let binary = classify(&[0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5]).to_string();
        assert!(
            binary.contains("10 bytes that are not a ratelab message (de ad be ef 00 01 02 03 …)")
        );
    }

    #[test]
    fn quotes_are_one_printable_line_of_bounded_length() {
        let long = format!("HTTP/1.1 200 {}\r\n", "x".repeat(200));
        let Foreign::Http { status_line } = classify(long.as_bytes()) else {
            panic!("not http");
        };
        assert_eq!(status_line.chars().count(), QUOTE_CHARS + 1);
        assert_eq!(
            first_line(b"SSH-2.0-x\x1b[31m\x07\r\nmore"),
            "SSH-2.0-x[31m",
            "control characters are dropped"
        );
    }

    #[test]
    fn only_prefixes_of_small_frames_could_be_ratelab() {
        let frame = encode(&Message::Go);
        for cut in 0..=frame.len() {
            assert!(could_start_frame(&frame[..cut], MAX_REQUEST_BYTES));
        }
        assert!(!could_start_frame(b"H", MAX_REQUEST_BYTES));
        assert!(!could_start_frame(&[9], MAX_REQUEST_BYTES));
        assert!(!could_start_frame(&[0, 1], MAX_REQUEST_BYTES));
        assert!(could_start_frame(&[0, 0, 0x40, 0], MAX_REQUEST_BYTES));
        assert!(!could_start_frame(&[0, 0, 0x40, 1], MAX_REQUEST_BYTES));
    }
}
