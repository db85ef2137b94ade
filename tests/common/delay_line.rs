//! A path with a round-trip time, which this kernel cannot make (it has no netem): a TUN
//! device in each of two namespaces and two threads of the test forwarding the packets
//! between them after a fixed delay each way, dropping a share at random if asked. The
//! devices are made here and moved into the namespaces; their open descriptors follow.
//! Dropping it stops the threads and removes the namespaces.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Two namespaces joined by a forwarder with a delay each way.
#[allow(dead_code)]
pub struct DelayLine {
    /// The client's namespace.
    pub client: String,
    /// The server's namespace.
    pub server: String,
    /// The server's address on the line.
    pub server_address: String,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {} failed", args.join(" "));
}

/// A TUN device named `name` (IP packets, no header), open.
fn tun(name: &str) -> File {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .expect("open /dev/net/tun");
    // struct ifreq: the name in 16 bytes, then the flags.
    let mut request = [0u8; 40];
    request[..name.len()].copy_from_slice(name.as_bytes());
    let flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    request[16..18].copy_from_slice(&flags.to_ne_bytes());
    // SAFETY: TUNSETIFF reads and writes one ifreq, which `request` holds.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, request.as_mut_ptr()) };
    assert_eq!(
        rc,
        0,
        "TUNSETIFF {name}: {}",
        std::io::Error::last_os_error()
    );
    file
}

/// Waits up to 50 ms for `file` to have a packet; false when none came.
fn readable(file: &File) -> bool {
    let mut fds = [libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(fds.as_mut_ptr(), 1, 50) > 0 }
}

/// Forwards every packet read from `from` to `to` `delay` later, dropping each with
/// probability `loss`, until `stop`.
fn forward(
    mut from: File,
    mut to: File,
    delay: Duration,
    loss: f64,
    stop: Arc<AtomicBool>,
) -> [JoinHandle<()>; 2] {
    let (queue, due) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
    let reader_stop = Arc::clone(&stop);
    let reader = std::thread::spawn(move || {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id());
        let mut buf = vec![0u8; 65_536];
        while !reader_stop.load(Ordering::Relaxed) {
            if !readable(&from) {
                continue;
            }
            let Ok(n) = from.read(&mut buf) else {
                return;
            };
            // xorshift64: a share `loss` of packets is dropped.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            if (seed >> 11) as f64 / (1u64 << 53) as f64 >= loss
                && queue
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
            {
                return;
            }
        }
    });
    let writer = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok((at, packet)) = due.recv_timeout(Duration::from_millis(50)) else {
                continue;
            };
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            let _ = to.write(&packet);
        }
    });
    [reader, writer]
}

#[allow(dead_code)]
impl DelayLine {
    /// Two namespaces whose packets take `delay` each way, a share `loss` of them
    /// dropped, with interfaces of `mtu` bytes.
    pub fn new(delay: Duration, loss: f64, mtu: u32) -> DelayLine {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = format!("rd{}x{n}", std::process::id() % 100_000);
        let (client, server) = (format!("{tag}c"), format!("{tag}s"));
        let (client_address, server_address) = (
            format!("10.204.{}.1", n % 250),
            format!("10.204.{}.2", n % 250),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let mut line = DelayLine {
            client: client.clone(),
            server: server.clone(),
            server_address: server_address.clone(),
            stop: Arc::clone(&stop),
            threads: Vec::new(),
        };
        let mtu = mtu.to_string();
        let mut devices = Vec::new();
        for (namespace, address, peer) in [
            (&client, &client_address, &server_address),
            (&server, &server_address, &client_address),
        ] {
            ip(&["netns", "add", namespace]);
            devices.push(tun(namespace));
            ip(&["link", "set", namespace, "netns", namespace]);
            ip(&[
                "-n", namespace, "addr", "add", address, "peer", peer, "dev", namespace,
            ]);
            ip(&["-n", namespace, "link", "set", namespace, "mtu", &mtu, "up"]);
            ip(&["-n", namespace, "link", "set", "lo", "up"]);
        }
        let server_end = devices.pop().expect("two devices");
        let client_end = devices.pop().expect("two devices");
        let copy = |f: &File| f.try_clone().expect("dup a TUN descriptor");
        line.threads.extend(forward(
            copy(&client_end),
            copy(&server_end),
            delay,
            loss,
            Arc::clone(&stop),
        ));
        line.threads
            .extend(forward(server_end, client_end, delay, loss, stop));
        line
    }

    /// `program` to be run in `namespace`.
    pub fn run_in(&self, namespace: &str, program: impl AsRef<std::path::Path>) -> Command {
        let mut command = Command::new("ip");
        super::isolated(&mut command)
            .args(["netns", "exec", namespace])
            .arg(program.as_ref());
        command
    }

    /// Sets a sysctl in `namespace` (`net.ipv4.tcp_rmem`, `4096 65536 65536`).
    pub fn sysctl(&self, namespace: &str, key: &str, value: &str) {
        let status = self
            .run_in(namespace, "sysctl")
            .args(["-q", "-w", &format!("{key}={value}")])
            .status()
            .expect("run sysctl");
        assert!(status.success(), "sysctl {key}={value} in {namespace}");
    }

    /// Makes `name` (cubic, reno) the congestion control at both ends; a namespace other
    /// than the first may pick only an allowed one, so an [`Allowed`] must be held.
    pub fn congestion(&self, _allowed: &Allowed, name: &str) {
        for namespace in [&self.client, &self.server] {
            self.sysctl(namespace, "net.ipv4.tcp_congestion_control", name);
        }
    }
}

/// A congestion control among those any network namespace may choose, the list as it
/// was before put back on drop.
pub struct Allowed(String);

const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

impl Allowed {
    /// Allows `name` (cubic, reno) to every namespace.
    pub fn add(name: &str) -> Allowed {
        let before = std::fs::read_to_string(ALLOWED).expect("read the allowed controls");
        std::fs::write(ALLOWED, format!("{} {name}", before.trim())).expect("allow it");
        Allowed(before)
    }
}

impl Drop for Allowed {
    fn drop(&mut self) {
        let _ = std::fs::write(ALLOWED, self.0.trim());
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        for namespace in [&self.client, &self.server] {
            let _ = Command::new("ip")
                .args(["netns", "del", namespace])
                .status();
        }
    }
}
