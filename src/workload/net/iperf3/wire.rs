//! iperf3's control protocol on the wire (iperf 3.x, src/iperf_api.h and iperf_api.c):
//! one signed state byte at a time, JSON messages behind a 4-byte big-endian length,
//! a 37-byte cookie that names the test on every connection. Written from iperf3's
//! documented behaviour and its source as a reference; the decoders are pure functions
//! over bytes, so they are fuzzed without a socket.

use serde::{Deserialize, Deserializer, Serialize};

use crate::workload::net::protocol::{self, DecodeError, Direction};

/// The port an iperf3 server listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 5201;

/// Bytes of a cookie: 36 characters and a NUL (iperf.h, COOKIE_SIZE).
pub const COOKIE_BYTES: usize = 37;

/// Largest parameter message a server accepts (iperf 3.18's limit).
pub const MAX_PARAMS_BYTES: usize = 8 << 10;

/// Largest results message either end accepts: one entry per stream, and a server's
/// own output when the client asks for it.
pub const MAX_RESULTS_BYTES: usize = 4 << 20;

/// The iperf3 release whose protocol this end speaks, announced as `client_version`
/// (servers take it as a hint only; ratelab's own chooses its duration code by it).
pub const CLIENT_VERSION: &str = "3.22";

/// A state byte (a signed char on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Server: the streams are all here; the test starts.
    TestStart,
    /// Server: move data now.
    TestRunning,
    /// Client: the test is over.
    TestEnd,
    /// Server: send the test's parameters.
    ParamExchange,
    /// Server: open the data connections.
    CreateStreams,
    /// Server: it was stopped by a signal.
    ServerTerminate,
    /// Client: it was stopped by a signal.
    ClientTerminate,
    /// Server: send your results; mine follow.
    ExchangeResults,
    /// Server: the results are exchanged.
    DisplayResults,
    /// Client: done; the connection closes.
    IperfDone,
    /// Server: busy with another test.
    AccessDenied,
    /// Server: an error, whose two codes follow.
    ServerError,
    /// A byte no state has.
    Unknown(i8),
}

impl State {
    /// The state a byte names.
    pub fn from_byte(byte: u8) -> State {
        match byte as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            other => State::Unknown(other),
        }
    }

    /// The byte that carries the state.
    pub fn byte(self) -> u8 {
        (match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
            State::Unknown(byte) => byte,
        }) as u8
    }
}

/// A fresh cookie: 36 characters of iperf3's alphabet and a NUL.
pub fn cookie() -> [u8; COOKIE_BYTES] {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let random: [u8; COOKIE_BYTES - 1] = rand::random();
    let mut cookie = [0u8; COOKIE_BYTES];
    for (slot, byte) in cookie.iter_mut().zip(random) {
        *slot = ALPHABET[usize::from(byte) % ALPHABET.len()];
    }
    cookie
}

/// Whether `bytes` can begin an iperf3 client's first message, a cookie: ratelab's own
/// frames begin with a length whose first byte is 0, a cookie with a letter or digit.
pub fn looks_like_cookie(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes
            .iter()
            .take(COOKIE_BYTES - 1)
            .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(b))
        && bytes.get(COOKIE_BYTES - 1).is_none_or(|&b| b == 0)
}

/// The JSON of one message behind its length.
pub fn frame<T: Serialize>(message: &T) -> Vec<u8> {
    protocol::framed(message)
}

/// Decodes one message of type `T` from the front of `bytes`: the message and the bytes
/// it took.
pub fn decode<T: for<'de> Deserialize<'de>>(
    bytes: &[u8],
    limit: usize,
) -> Result<(T, usize), DecodeError> {
    let (body, used) = protocol::frame_body(bytes, limit)?;
    if body.is_empty() {
        return Err(DecodeError::Malformed("an empty message".into()));
    }
    let message =
        serde_json::from_slice(body).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    Ok((message, used))
}

/// A test's parameters, as a client sends them after PARAM_EXCHANGE (iperf_api.c,
/// send_parameters, 3.12 to 3.22). iperf3 reads a flag by its presence, so a flag that
/// is off is left out, never sent as `false`; each key keeps the JSON type iperf3 sends,
/// since 3.18 and later check it. Keys this end does not know are kept in `other`, so a
/// server can refuse what it would otherwise ignore.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// TCP (the only protocol spoken here).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "flag"
    )]
    pub tcp: Option<bool>,
    /// UDP, which is refused.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "flag"
    )]
    pub udp: Option<bool>,
    /// SCTP, which is refused.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "flag"
    )]
    pub sctp: Option<bool>,
    /// Seconds at the start left out of the results (-O).
    #[serde(default, deserialize_with = "lenient")]
    pub omit: i64,
    /// The CPU the server's streams run on (-A n,m).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub server_affinity: Option<i64>,
    /// Seconds the test runs; 0 when bytes or blocks bound it, or for no bound (-t 0).
    #[serde(default = "ten", deserialize_with = "lenient")]
    pub time: i64,
    /// Bytes the senders send in all; 0 when unbounded.
    #[serde(default, deserialize_with = "lenient")]
    pub num: i64,
    /// Blocks the senders send in all; 0 when unbounded.
    #[serde(default, deserialize_with = "lenient")]
    pub blockcount: i64,
    /// TCP_MAXSEG of the data connections (-M).
    #[serde(
        rename = "MSS",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub mss: Option<i64>,
    /// TCP_NODELAY on the data connections (-N).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "flag"
    )]
    pub nodelay: Option<bool>,
    /// Streams per direction.
    #[serde(default = "one", deserialize_with = "lenient")]
    pub parallel: i64,
    /// The server sends.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "flag"
    )]
    pub reverse: Option<bool>,
    /// Both send, on separate streams.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "flag"
    )]
    pub bidirectional: Option<bool>,
    /// Multipath TCP (-m, 3.19+), which is refused.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "flag"
    )]
    pub mptcp: Option<bool>,
    /// SO_SNDBUF and SO_RCVBUF of the data connections (-w).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub window: Option<i64>,
    /// Bytes per write and read (-l).
    #[serde(default = "block", deserialize_with = "lenient")]
    pub len: i64,
    /// Each sending stream's rate in bits per second, paced by the sender (-b); 0 unpaced.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub bandwidth: Option<i64>,
    /// Each sending stream's pacing rate in the kernel (SO_MAX_PACING_RATE), bits per
    /// second (--fq-rate).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub fqrate: Option<i64>,
    /// The client's pacing timer in microseconds (unused since 3.18).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub pacing_timer: Option<i64>,
    /// Blocks a paced sender writes at once (-b RATE/N).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub burst: Option<i64>,
    /// The IP TOS byte of the data connections (-S, --dscp).
    #[serde(
        rename = "TOS",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub tos: Option<i64>,
    /// The IPv6 flow label (-L).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub flowlabel: Option<i64>,
    /// A title for the test's output (-T).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Text kept with the test's output (--extra-data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_data: Option<String>,
    /// The congestion control of the data connections (-C).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// The congestion control the client's connections use (never sent in practice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    /// The client asks for the server's own output with the results.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub get_server_output: Option<i64>,
    /// UDP segmentation offload the client offers (3.21 and later): a sender may hand
    /// the kernel several datagrams at once. The datagrams on the wire are the same;
    /// this end sends each alone, as a server without GSO does.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub gso: Option<i64>,
    /// Bytes of each datagram GSO would cut (3.21 and later).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub gso_dg_size: Option<i64>,
    /// Bytes GSO would hand the kernel at once (3.21 and later).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub gso_bf_size: Option<i64>,
    /// UDP receive offload the client offers (3.21 and later): a receiver may take
    /// several datagrams in one read. This end reads each alone.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub gro: Option<i64>,
    /// Bytes a GRO read would take at once (3.21 and later).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub gro_bf_size: Option<i64>,
    /// UDP's 64-bit counts (--udp-counters-64bit); meaningless for TCP, as in iperf3.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub udp_counters_64bit: Option<i64>,
    /// Senders send `0123456789` over and over instead of random bytes.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub repeating_payload: Option<i64>,
    /// Senders send without copying (-Z: sendfile).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub zerocopy: Option<i64>,
    /// The don't-fragment flag on the data connections (--dont-fragment).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub dont_fragment: Option<i64>,
    /// Receivers drop the data without copying it (--skip-rx-copy, 3.19+: MSG_TRUNC).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub skip_rx_copy: Option<i64>,
    /// A user and password encrypted with the server's RSA key, in base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authtoken: Option<String>,
    /// The client's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
    /// Keys this end does not know, as they came.
    #[serde(flatten)]
    pub other: std::collections::BTreeMap<String, serde_json::Value>,
}

fn ten() -> i64 {
    10
}

fn one() -> i64 {
    1
}

fn block() -> i64 {
    128 << 10
}

impl Params {
    /// Who sends: iperf3 reads `bidirectional` and `reverse` by their presence.
    pub fn direction(&self) -> Direction {
        if self.bidirectional.is_some() {
            Direction::Bidir
        } else if self.reverse.is_some() {
            Direction::Reverse
        } else {
            Direction::Forward
        }
    }

    /// The bytes that bound the test over every stream together (`num`, else
    /// `blockcount` blocks of `len`); none when time bounds it.
    pub fn bytes(&self) -> Option<u64> {
        let positive = |v: i64| u64::try_from(v).ok().filter(|&v| v > 0);
        positive(self.num).or_else(|| {
            positive(self.blockcount)
                .map(|blocks| blocks.saturating_mul(u64::try_from(self.len).unwrap_or(0)))
        })
    }
}

/// One end's results, as each end sends them after EXCHANGE_RESULTS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// The end's CPU time over the test's wall time, in percent.
    pub cpu_util_total: f64,
    /// Its user part.
    pub cpu_util_user: f64,
    /// Its system part.
    pub cpu_util_system: f64,
    /// 1 when this end sent and counts retransmissions, 0 when it sent and cannot, -1
    /// when it only received.
    #[serde(deserialize_with = "lenient")]
    pub sender_has_retransmits: i64,
    /// The congestion control its streams used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    /// Per stream.
    pub streams: Vec<StreamResult>,
    /// The server's own text output, when the client asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
}

/// One stream's end, in the results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    /// The stream's id (see [`stream_id`]).
    #[serde(deserialize_with = "lenient")]
    pub id: i64,
    /// Bytes this end sent or received on it.
    #[serde(deserialize_with = "lenient")]
    pub bytes: i64,
    /// Segments this end retransmitted; -1 when it did not send.
    #[serde(deserialize_with = "lenient")]
    pub retransmits: i64,
    /// UDP's jitter, 0 for TCP.
    pub jitter: f64,
    /// UDP's lost datagrams, 0 for TCP.
    #[serde(deserialize_with = "lenient")]
    pub errors: i64,
    /// UDP's datagrams, 0 for TCP: a sender's sent, a receiver's highest count.
    #[serde(deserialize_with = "lenient")]
    pub packets: i64,
    /// UDP's lost datagrams in the omitted seconds (iperf 3.14 and later).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub omitted_errors: Option<i64>,
    /// UDP's datagrams in the omitted seconds (iperf 3.14 and later).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_some"
    )]
    pub omitted_packets: Option<i64>,
    /// Seconds from the test's start to the stream's start (always 0).
    #[serde(default)]
    pub start_time: f64,
    /// Seconds from the test's start to the stream's last figure.
    #[serde(default)]
    pub end_time: f64,
}

/// The id iperf3 gives the stream made `index`-th (from 0): 1, then 3, 4, 5, … (as
/// iperf_add_stream counts them, a quirk both ends keep).
pub fn stream_id(index: u32) -> i64 {
    if index == 0 { 1 } else { i64::from(index) + 2 }
}

/// An integer as iperf3 writes one: iperf 3.12 and 3.13 print -1 as 2^64 - 1, and a
/// number may come as a float.
fn lenient<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let value = serde_json::Number::deserialize(deserializer)?;
    if let Some(v) = value.as_i64() {
        Ok(v)
    } else if let Some(v) = value.as_u64() {
        Ok(v as i64)
    } else {
        let v = value.as_f64().unwrap_or_default();
        if v.is_finite() && v.abs() < 9.0e18 {
            Ok(v as i64)
        } else {
            Err(serde::de::Error::custom(format!(
                "{value} is not an integer"
            )))
        }
    }
}

fn lenient_some<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    lenient(deserializer).map(Some)
}

/// A flag as iperf3 sends one: `true` (a number from some versions); present is on.
fn flag<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::Bool(on) => Ok(Some(on)),
        serde_json::Value::Number(n) => Ok(Some(n.as_f64() != Some(0.0))),
        other => Err(serde::de::Error::custom(format!("{other} is not a flag"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_bytes_are_signed_and_round_trip() {
        for byte in [1u8, 2, 4, 9, 10, 11, 12, 13, 14, 16, 0xff, 0xfe, 7, 0] {
            assert_eq!(State::from_byte(byte).byte(), byte);
        }
        assert_eq!(State::from_byte(0xff), State::AccessDenied);
        assert_eq!(State::from_byte(0xfe), State::ServerError);
        assert_eq!(State::from_byte(7), State::Unknown(7));
    }

    #[test]
    fn a_cookie_is_36_characters_and_a_nul_and_is_told_from_a_frame() {
        let c = cookie();
        assert_eq!(c[36], 0);
        assert!(looks_like_cookie(&c));
        assert!(looks_like_cookie(&c[..5]));
        assert!(!looks_like_cookie(&[0, 0, 0, 40, b'{']));
        assert!(!looks_like_cookie(b"GET / HTTP/1.1"));
        assert!(!looks_like_cookie(&[]));
    }

    #[test]
    fn the_params_of_a_3_12_client_read_back() {
        let sent = br#"{"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":2,"reverse":true,"len":131072,"pacing_timer":1000,"get_server_output":1,"client_version":"3.12"}"#;
        let mut bytes = (sent.len() as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(sent);
        let (params, used): (Params, usize) = decode(&bytes, MAX_PARAMS_BYTES).unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!((params.time, params.parallel, params.len), (2, 2, 131072));
        assert_eq!(params.direction(), Direction::Reverse);
        assert_eq!(params.bytes(), None);
        assert_eq!(params.get_server_output, Some(1));
        // Nothing given: iperf3's defaults (10 s, one stream, 128 KiB, forward).
        let (empty, _): (Params, usize) = decode(&frame(&serde_json::json!({})), 64).unwrap();
        assert_eq!((empty.time, empty.parallel, empty.len), (10, 1, 131072));
        assert_eq!(empty.direction(), Direction::Forward);
        let blocks = Params {
            blockcount: 3,
            len: 1000,
            ..empty
        };
        assert_eq!(blocks.bytes(), Some(3000));
    }

    #[test]
    fn a_flag_that_is_off_is_left_out() {
        let params = Params {
            tcp: Some(true),
            time: 1,
            parallel: 1,
            len: 1,
            ..Params::default()
        };
        let text = String::from_utf8(frame(&params)[4..].to_vec()).unwrap();
        assert!(!text.contains("reverse"), "{text}");
        assert!(!text.contains("MSS"), "{text}");
    }

    #[test]
    fn results_of_iperf_3_12_read_minus_one_as_printed() {
        let text = br#"{"cpu_util_total":28.5,"cpu_util_user":0.9,"cpu_util_system":27.6,"sender_has_retransmits":18446744073709551615,"congestion_used":"bbr","streams":[{"id":1,"bytes":2912944022,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":2.000847}]}"#;
        let mut bytes = (text.len() as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(text);
        let (results, _): (Results, usize) = decode(&bytes, MAX_RESULTS_BYTES).unwrap();
        assert_eq!(results.sender_has_retransmits, -1);
        assert_eq!(results.streams[0].retransmits, -1);
        assert_eq!(results.streams[0].bytes, 2_912_944_022);
    }

    #[test]
    fn frames_over_the_limit_empty_or_short_are_refused() {
        assert!(matches!(
            decode::<Params>(&[0, 1, 0, 0], 64),
            Err(DecodeError::Oversized { .. })
        ));
        assert!(matches!(
            decode::<Params>(&[0, 0, 0, 0], 64),
            Err(DecodeError::Malformed(_))
        ));
        assert!(matches!(
            decode::<Params>(&[0, 0, 0, 9, b'{'], 64),
            Err(DecodeError::Incomplete { need: 13, .. })
        ));
    }

    #[test]
    fn stream_ids_skip_two() {
        assert_eq!((0..4).map(stream_id).collect::<Vec<_>>(), vec![1, 3, 4, 5]);
    }
}
