//! How a stream's bytes go out and come in, as a test asks (iperf3's -Z, -b and
//! --skip-rx-copy): a sender copies its block or hands it over by sendfile, and paces
//! itself to a rate; a receiver copies what comes or has the kernel drop it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

use super::options::StreamOptions;

/// How a sender hands its block to the kernel: a copy from the block, or sendfile from
/// a memory file that holds it (iperf3's -Z).
pub enum Source<'a> {
    /// write(2) from the block.
    Block(&'a [u8]),
    /// sendfile(2) from a memory file holding the block, of this many bytes.
    File(std::os::fd::OwnedFd, usize),
}

impl Source<'_> {
    /// The source of a sender of `block`, by sendfile when `zerocopy`.
    pub fn of(block: &[u8], zerocopy: bool) -> std::io::Result<Source<'_>> {
        if !zerocopy {
            return Ok(Source::Block(block));
        }
        let file = rustix::fs::memfd_create("ratelab-block", rustix::fs::MemfdFlags::CLOEXEC)?;
        let mut writer = std::fs::File::from(file);
        writer.write_all(block)?;
        Ok(Source::File(writer.into(), block.len()))
    }

    /// Bytes one call hands over at most.
    pub fn len(&self) -> usize {
        match self {
            Source::Block(block) => block.len(),
            Source::File(_, len) => *len,
        }
    }

    /// Hands up to `want` bytes to `socket`.
    pub fn write(&self, socket: &TcpStream, want: usize) -> std::io::Result<usize> {
        match self {
            Source::Block(block) => {
                let mut socket = socket;
                socket.write(&block[..want])
            }
            Source::File(file, _) => {
                let mut offset = 0u64;
                rustix::fs::sendfile(socket, file, Some(&mut offset), want).map_err(Into::into)
            }
        }
    }
}

/// How long a paced sender waits before its next block: none while it is behind its
/// rate, with a burst of blocks allowed ahead (iperf3's -b RATE/N).
pub fn pace_wait(options: &StreamOptions, sent: u64, block: usize, elapsed: Duration) -> Duration {
    let Some(bits_per_sec) = options.bitrate_bits_per_sec.filter(|&b| b > 0) else {
        return Duration::ZERO;
    };
    let ahead_bytes = u64::from(options.burst_blocks.unwrap_or(1).max(1) - 1) * block as u64;
    let due_s = (sent.saturating_sub(ahead_bytes)) as f64 * 8.0 / bits_per_sec as f64;
    Duration::from_secs_f64(due_s).saturating_sub(elapsed)
}

/// Reads into `buffer`, or has the kernel drop as much without copying it
/// (MSG_TRUNC, iperf3's --skip-rx-copy).
pub fn read(socket: &mut &TcpStream, buffer: &mut [u8], skip_copy: bool) -> std::io::Result<usize> {
    if !skip_copy {
        return socket.read(buffer);
    }
    // SAFETY: with MSG_TRUNC the kernel writes nothing; the buffer is valid for its length.
    let n = unsafe {
        libc::recv(
            socket.as_raw_fd(),
            buffer.as_mut_ptr().cast(),
            buffer.len(),
            libc::MSG_TRUNC,
        )
    };
    usize::try_from(n).map_err(|_| std::io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paced_sender_waits_until_its_rate_allows_the_next_block() {
        let paced = StreamOptions {
            bitrate_bits_per_sec: Some(8_000_000),
            ..StreamOptions::default()
        };
        // 1 MB at 8 Mbit/s is due at 1 s: half a second in, wait half a second more.
        let wait = pace_wait(&paced, 1_000_000, 1000, Duration::from_millis(500));
        assert_eq!(wait, Duration::from_millis(500));
        assert_eq!(
            pace_wait(&paced, 1_000_000, 1000, Duration::from_secs(2)),
            Duration::ZERO
        );
        // A burst of 3 blocks may go ahead of the rate by two blocks.
        let burst = StreamOptions {
            burst_blocks: Some(3),
            ..paced.clone()
        };
        assert_eq!(
            pace_wait(&burst, 2000, 1000, Duration::ZERO),
            Duration::ZERO
        );
        assert!(pace_wait(&burst, 3000, 1000, Duration::ZERO) > Duration::ZERO);
        assert_eq!(
            pace_wait(&StreamOptions::default(), 1 << 40, 1000, Duration::ZERO),
            Duration::ZERO
        );
    }

    #[test]
    fn sendfile_and_skipping_the_copy_move_the_same_bytes() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let sender = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (receiver, _) = listener.accept().unwrap();
        let block = vec![7u8; 4096];
        let source = Source::of(&block, true).unwrap();
        assert_eq!(source.len(), 4096);
        let mut sent = 0;
        while sent < 8192 {
            sent += source.write(&sender, 4096).unwrap();
        }
        let mut buffer = vec![0u8; 4096];
        let mut socket = &receiver;
        let mut got = read(&mut socket, &mut buffer, false).unwrap();
        assert!(buffer[..got].iter().all(|&b| b == 7));
        while got < 8192 {
            got += read(&mut socket, &mut buffer, true).unwrap();
        }
        assert_eq!(got, 8192);
    }
}
