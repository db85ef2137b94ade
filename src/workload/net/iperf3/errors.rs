//! iperf3's error codes (src/iperf_api.h, up to 3.22) and what each means in ratelab's
//! words: a server sends one after SERVER_ERROR, and a client that cannot print it
//! leaves its user with a number. The codes a server sends are named for the server's
//! side (this end refuses tests with them); every code has its words for the client's.

/// The codes ratelab's server sends, by iperf3's names.
pub mod code {
    /// IEDURATION: the duration is out of range (3.22 prints the range 0 to 86400 s).
    pub const DURATION: i32 = 5;
    /// IENUMSTREAMS: too many streams.
    pub const STREAMS: i32 = 6;
    /// IEBLOCKSIZE: the block is too large.
    pub const BLOCK: i32 = 7;
    /// IEBUFSIZE: the window is too large.
    pub const BUFFER: i32 = 8;
    /// IEMSS: the MSS is out of range.
    pub const MSS: i32 = 10;
    /// IEOMIT: a bad --omit.
    pub const OMIT: i32 = 12;
    /// IEUNIMP: an option this end does not implement.
    pub const UNIMPLEMENTED: i32 = 13;
    /// IEBURST: a bad burst count.
    pub const BURST: i32 = 15;
    /// IENOSCTP: no SCTP here.
    pub const NO_SCTP: i32 = 18;
    /// IEUDPBLOCKSIZE: a datagram size out of range.
    pub const UDP_BLOCK: i32 = 20;
    /// IEBADTOS: a TOS outside 0 to 255.
    pub const BAD_TOS: i32 = 21;
    /// IETOTALRATE: more than the server allows (bandwidth; here also bytes).
    pub const TOTAL: i32 = 27;
    /// IEMAXSERVERTESTDURATIONEXCEEDED (3.20+): longer than the server allows.
    pub const MAX_DURATION: i32 = 37;
    /// IERECVPARAMS: the parameters cannot be read.
    pub const RECEIVE_PARAMS: i32 = 114;
    /// IESETNODELAY: TCP_NODELAY cannot be set.
    pub const SET_NODELAY: i32 = 122;
    /// IESETMSS: TCP_MAXSEG cannot be set.
    pub const SET_MSS: i32 = 123;
    /// IESETBUF: the socket buffers cannot be set.
    pub const SET_BUFFER: i32 = 124;
    /// IESETTOS: IP_TOS cannot be set.
    pub const SET_TOS: i32 = 125;
    /// IESETCOS: the IPv6 traffic class cannot be set.
    pub const SET_CLASS: i32 = 126;
    /// IESETFLOW: the IPv6 flow label cannot be set.
    pub const SET_FLOW: i32 = 127;
    /// IEAFFINITY: the CPU affinity cannot be set.
    pub const AFFINITY: i32 = 132;
    /// IESETCONGESTION: the congestion control is not available.
    pub const SET_CONGESTION: i32 = 134;
    /// IESETPACING: SO_MAX_PACING_RATE cannot be set.
    pub const SET_PACING: i32 = 140;
    /// IESETBUF2: the socket buffers were set smaller than asked.
    pub const SET_BUFFER_SHORT: i32 = 141;
    /// IEAUTHTEST: the test is not authorized.
    pub const AUTH: i32 = 142;
    /// IESETDONTFRAGMENT: the don't-fragment flag cannot be set.
    pub const SET_DONT_FRAGMENT: i32 = 145;
}

/// Each code's words, for a client's user to act on.
const WORDS: &[(i32, &str)] = &[
    (0, "no error"),
    (1, "an end cannot be both server and client"),
    (2, "an end must be either a client or a server"),
    (3, "an option of this test can be set on the server only"),
    (4, "an option of this test can be set on the client only"),
    (
        5,
        "the test's duration is out of the range the server accepts",
    ),
    (6, "more streams than the server allows"),
    (7, "a larger block (-l) than the server allows"),
    (8, "a larger socket buffer (-w) than the server allows"),
    (9, "the report interval is out of range"),
    (10, "a larger MSS (-M) than the server allows"),
    (11, "the server's system cannot send with sendfile (-Z)"),
    (12, "a bad value for --omit"),
    (13, "the server does not implement an option of this test"),
    (14, "the server cannot open its -F file"),
    (15, "a bad burst count (-b RATE/N)"),
    (16, "a test takes one end condition only (-t, -n or -k)"),
    (17, "the server cannot open its log file"),
    (18, "the server has no SCTP"),
    (19, "--cport needs --bind"),
    (20, "a UDP block size out of range"),
    (21, "a TOS outside 0 to 255"),
    (
        22,
        "the client needs a username, a password and the server's RSA public key",
    ),
    (
        23,
        "the server needs an RSA private key and an authorized-users file",
    ),
    (24, "a bad format letter"),
    (25, "a test cannot be both reverse and bidirectional"),
    (26, "a port outside 1 to 65535"),
    (
        27,
        "more than the server allows in all (its bitrate or bytes limit)",
    ),
    (28, "a bad interval for the average rate"),
    (29, "the time-skew threshold must be above zero"),
    (30, "a bad idle timeout"),
    (31, "a bad receive timeout"),
    (32, "a receive timeout applies to a receiving client only"),
    (33, "a bad send timeout"),
    (34, "a file cannot be sent over UDP"),
    (35, "the server cannot read its authorized-users file"),
    (
        36,
        "the control connection's keepalive is shorter than its retries",
    ),
    (
        37,
        "the test is longer than the server allows (its --server-max-duration)",
    ),
    (38, "a bad unit or suffix in a value"),
    (
        39,
        "the server's system cannot skip the receive copy (--skip-rx-copy)",
    ),
    (40, "a bad DSCP value"),
    (100, "the server cannot make a new test"),
    (101, "the server cannot set the test up"),
    (102, "the server cannot listen for connections"),
    (103, "the client cannot connect to the server"),
    (104, "the server cannot accept a connection"),
    (105, "the client cannot send its cookie"),
    (106, "the server cannot read the cookie"),
    (107, "the control connection cannot be written"),
    (108, "the control connection cannot be read"),
    (109, "the control connection closed unexpectedly"),
    (
        110,
        "an unknown control message came (is the other end iperf3's?)",
    ),
    (111, "a control message cannot be sent"),
    (112, "a control message cannot be received"),
    (113, "the client cannot send its parameters"),
    (114, "the server cannot read the test's parameters"),
    (115, "the results cannot be put together"),
    (116, "the results cannot be sent"),
    (117, "the results cannot be received"),
    (118, "select failed"),
    (119, "the client stopped the test"),
    (120, "the server stopped the test"),
    (121, "the server is busy running a test"),
    (122, "the server cannot set TCP_NODELAY (-N)"),
    (123, "the server cannot set the MSS (-M)"),
    (124, "the server cannot set the socket buffer size (-w)"),
    (125, "the server cannot set the TOS (-S)"),
    (126, "the server cannot set the IPv6 traffic class (-S)"),
    (127, "the server cannot set the IPv6 flow label (-L)"),
    (128, "the server cannot reuse its address"),
    (129, "a socket cannot be made non-blocking"),
    (130, "the socket's window cannot be set"),
    (131, "the server does not know the protocol"),
    (132, "the server cannot set its CPU affinity (-A)"),
    (133, "the server cannot become a daemon"),
    (
        134,
        "the congestion control asked for (-C) is not available on the server",
    ),
    (135, "the server cannot write its PID file"),
    (136, "the server cannot set IPV6_V6ONLY"),
    (137, "SCTP_DISABLE_FRAGMENTS cannot be set"),
    (138, "the number of SCTP streams cannot be set"),
    (139, "SCTP addresses cannot be bound"),
    (140, "the server cannot set the pacing rate (--fq-rate)"),
    (
        141,
        "the server set a smaller socket buffer than asked (-w)",
    ),
    (
        142,
        "the test is not authorized: the server checks a username and password (--username)",
    ),
    (143, "the server cannot bind to its device"),
    (144, "no data came for the idle timeout"),
    (
        145,
        "the don't-fragment flag cannot be set (--dont-fragment)",
    ),
    (146, "binding to a device is not supported there"),
    (
        147,
        "a device name goes with an IPv6 link-local address only",
    ),
    (148, "TCP_USER_TIMEOUT cannot be set"),
    (150, "a thread cannot be started"),
    (151, "a thread cannot be cancelled"),
    (152, "a thread cannot be joined"),
    (153, "a thread's attributes cannot be made"),
    (154, "a thread's attributes cannot be freed"),
    (155, "SO_KEEPALIVE cannot be set on the control connection"),
    (156, "TCP_KEEPIDLE cannot be set on the control connection"),
    (157, "TCP_KEEPINTVL cannot be set on the control connection"),
    (158, "TCP_KEEPCNT cannot be set on the control connection"),
    (159, "the blocked signals cannot be changed"),
    (160, "the server's time for the test ran out"),
    (200, "a stream cannot be made"),
    (201, "a stream cannot be set up"),
    (202, "the server cannot start a stream listener"),
    (203, "a stream cannot connect"),
    (204, "the server cannot accept a stream"),
    (205, "a stream cannot be written"),
    (206, "a stream cannot be read"),
    (207, "a stream closed unexpectedly"),
    (208, "a stream has an invalid id"),
    (300, "a timer cannot be made"),
    (301, "a timer cannot be updated"),
];

/// What code `code` means, in words a client's user can act on.
pub fn words(code: i32) -> Option<&'static str> {
    WORDS
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, words)| *words)
}

/// What the codes after a SERVER_ERROR byte say: the code's words, and the server's
/// errno where it sent one (iperf 3.12 to 3.18 send only the code on a failed
/// authorization).
pub fn server_error_text(code: i32, errno: Option<i32>) -> String {
    let what = match words(code) {
        Some(words) => format!("{words} (iperf3 error {code})"),
        None => format!("iperf3 error {code}, which this ratelab does not know"),
    };
    match errno.filter(|&e| e != 0) {
        Some(e) => format!("{what}: {}", std::io::Error::from_raw_os_error(e)),
        None => what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_up_to_3_22_has_its_words() {
        let known = (0..=40).chain(100..=148).chain(150..=160);
        for code in known.chain(200..=208).chain([300, 301]) {
            assert!(words(code).is_some(), "code {code}");
        }
        assert_eq!(words(149), None);
        assert!(server_error_text(37, Some(0)).contains("longer than the server allows"));
        assert!(server_error_text(999, None).contains("999"));
        assert!(server_error_text(124, Some(libc::ENOBUFS)).contains("buffer"));
    }
}
