//! A `ratelab net serve` on loopback for tests that need a server: started on a free
//! port, its log collected, stopped by a signal or killed when dropped.

use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Child, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::ratelab;

/// Longest wait for anything that should take a second or two; generous for a slow,
/// loaded 2-core VM.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A `ratelab net serve` on 127.0.0.1 (or another loopback address) and a free port,
/// killed when dropped, so a failing test never leaves a server behind.
pub struct Server {
    child: Child,
    bind: IpAddr,
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
}

impl Server {
    /// Starts a server with `extra` options and waits for its "listening on" line.
    pub fn start(extra: &[&str]) -> Server {
        Server::start_with(std::process::Command::new("sh"), extra)
    }

    /// Starts a server as [`Server::start`] does, listening on `bind` (`::1`).
    pub fn start_on(bind: IpAddr, extra: &[&str]) -> Server {
        Server::start_full(std::process::Command::new("sh"), bind, extra)
    }

    /// Starts a server as [`Server::start`] does, through `wrapper`: a shell command
    /// line that ends in `exec "$@"` (to set a limit first), or a bare `sh`.
    pub fn start_with(wrapper: std::process::Command, extra: &[&str]) -> Server {
        Server::start_full(wrapper, IpAddr::V4(Ipv4Addr::LOCALHOST), extra)
    }

    fn start_full(mut wrapper: std::process::Command, bind: IpAddr, extra: &[&str]) -> Server {
        if wrapper.get_args().next().is_none() {
            wrapper.args(["-c", "exec \"$@\"", "sh"]);
        }
        let mut child = super::isolated(&mut wrapper)
            .arg(ratelab().get_program())
            .args(["net", "serve", "--port", "0", "--bind", &bind.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ratelab net serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = Arc::clone(&log);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let mut server = Server {
            child,
            bind,
            port: 0,
            log,
            reader: Some(reader),
        };
        let started = Instant::now();
        server.port = loop {
            // "listening on 127.0.0.1:40123: ..." or "listening on [::1]:40123: ...".
            let port = server.log().iter().find_map(|line| {
                let (_, rest) = line.split_once("listening on ")?;
                let (address, _) = rest.split_once(": ")?;
                Some(address.parse::<SocketAddr>().ok()?.port())
            });
            if let Some(port) = port {
                break port;
            }
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!(
                    "the server exited ({status}) before listening:\n{}",
                    server.log().join("\n")
                );
            }
            assert!(
                started.elapsed() < PATIENCE,
                "no \"listening on\" line from the server:\n{}",
                server.log().join("\n")
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        server
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        SocketAddr::new(self.bind, self.port)
    }

    /// The lines the server has logged so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Waits until the log holds a line with every one of `texts`; returns that line.
    pub fn wait_for_line(&self, texts: &[&str]) -> String {
        let started = Instant::now();
        loop {
            if let Some(line) = self
                .log()
                .into_iter()
                .find(|line| texts.iter().all(|text| line.contains(text)))
            {
                return line;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "no line with {texts:?} in the server's log:\n{}",
                self.log().join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Asserts the server process has not exited.
    pub fn assert_alive(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("the server exited ({status}):\n{}", self.log().join("\n"));
        }
    }

    /// Sends `signal` to the server and waits up to `limit` for it to exit, and for its
    /// last log lines; returns its status and how long it took to exit.
    pub fn stop_with(
        &mut self,
        signal: rustix::process::Signal,
        limit: Duration,
    ) -> (ExitStatus, Duration) {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, signal).expect("signal the server");
        let sent = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                sent.elapsed() < limit,
                "the server still runs {limit:?} after {signal:?}:\n{}",
                self.log().join("\n")
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        let took = sent.elapsed();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        (status, took)
    }

    /// Waits up to `limit` for the server to exit on its own; its status.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                started.elapsed() < limit,
                "the server still runs after {limit:?}:\n{}",
                self.log().join("\n")
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A client of this server with `extra` options that prints its run as JSON.
    pub fn client(&self, extra: &[&str]) -> std::process::Command {
        let mut command = ratelab();
        command
            .args(["net", &self.bind.to_string(), "-p", &self.port.to_string()])
            .args(["--no-store", "--json"])
            .args(extra);
        command
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// Waits for the server to close `stream` (named `what` in failures), reading whatever
/// it sends first; returns the time that took and the bytes read. Fails if the stream
/// is still open after `limit`.
pub fn wait_closed(stream: &mut TcpStream, what: &str, limit: Duration) -> (Duration, Vec<u8>) {
    let started = Instant::now();
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let left = limit.saturating_sub(started.elapsed());
        assert!(
            !left.is_zero(),
            "the server kept {what} open past {limit:?}"
        );
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut chunk) {
            Ok(0) => return (started.elapsed(), reply),
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!("the server kept {what} open past {limit:?}")
            }
            // A reset is a close too: the server dropped a socket with unread bytes.
            Err(_) => return (started.elapsed(), reply),
        }
    }
}

/// A command running in the background, killed when dropped unless it finished.
pub struct Background {
    child: Option<Child>,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<u8>>>,
    what: String,
}

impl Background {
    /// Starts `command` with its output collected.
    pub fn spawn(command: &mut std::process::Command) -> Background {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ratelab");
        let drain = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                bytes
            })
        };
        Background {
            stdout: Some(drain(Box::new(child.stdout.take().unwrap()))),
            stderr: Some(drain(Box::new(child.stderr.take().unwrap()))),
            child: Some(child),
            what: format!("{command:?}"),
        }
    }

    /// Waits up to `limit` for the command to end; a command still running is killed
    /// and the test fails.
    pub fn finish(mut self, limit: Duration) -> Output {
        let mut child = self.child.take().unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{} still running after {limit:?}", self.what);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Output {
            status,
            stdout: self.stdout.take().unwrap().join().unwrap(),
            stderr: self.stderr.take().unwrap().join().unwrap(),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
