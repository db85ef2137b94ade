//! A host's clock against this one, estimated over one ssh connection as NTP does it:
//! the host reads its clock between our send and our receive, so its reading, less the
//! middle of that round trip, is the offset, within half the round trip. Of several
//! exchanges the one with the shortest round trip is kept.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{SystemTime, UNIX_EPOCH};

use super::Host;
use crate::platform::remote::ssh;

/// Exchanges over the connection: the first ones pay for the shell's start.
const EXCHANGES: usize = 12;

/// A host's clock minus this one's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Offset {
    /// The offset, seconds.
    pub seconds: f64,
    /// Its uncertainty: half the shortest round trip, seconds.
    pub error_s: f64,
}

/// Seconds since the Unix epoch on this clock.
pub fn now_unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Estimates `host`'s clock offset.
pub fn offset(host: &Host) -> Result<Offset, String> {
    let mut child = ssh::command(&host.ssh, "while read -r x; do date +%s.%N; done")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start ssh: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut best: Option<Offset> = None;
    for _ in 0..EXCHANGES {
        let sent = now_unix_s();
        let reading = stdin
            .write_all(b"x\n")
            .and_then(|()| stdin.flush())
            .ok()
            .and_then(|()| lines.next())
            .and_then(Result::ok);
        let received = now_unix_s();
        let Some(reading) = reading else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("its clock could not be read over ssh".into());
        };
        let remote: f64 = reading.trim().parse().map_err(|_| {
            format!("its `date +%s.%N` printed {reading:?}, not seconds with nanoseconds")
        })?;
        let sample = Offset {
            seconds: remote - (sent + received) / 2.0,
            error_s: (received - sent) / 2.0,
        };
        if best.is_none_or(|b| sample.error_s < b.error_s) {
            best = Some(sample);
        }
    }
    drop(stdin);
    let _ = child.wait();
    best.ok_or_else(|| "no exchange".to_string())
}
