//! One verb running on one host: ssh started in a process group of its own (a terminal's
//! Ctrl-C reaches the fleet, not the connection that carries the run), the remote
//! process's id read from its first line, and a stop that signals the remote process
//! group over a second connection, so the run there cleans up and sends back its
//! document, marked incomplete.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Host, last_line, ssh};

/// The line the remote shell writes first, before it becomes ratelab.
const PID_LINE: &str = "ratelab-fleet pid ";

/// How a remote run ended.
#[derive(Debug)]
pub struct Ended {
    /// What it printed on stdout (a run document with --json).
    pub stdout: Vec<u8>,
    /// The last line it, or ssh, wrote on stderr.
    pub last_error_line: String,
    /// ssh's exit code: the remote command's, or 255 for ssh's own failure; `None` on a
    /// signal.
    pub code: Option<i32>,
    /// The verb it ran.
    pub verb: String,
}

/// A verb started on a host.
pub struct RemoteRun {
    host: Host,
    verb: String,
    child: Child,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<String>>,
    /// The remote process (and group) id, once its first line came.
    pid: Arc<Mutex<Option<u32>>>,
    /// Its stderr's lines so far.
    lines: Arc<Mutex<Vec<String>>>,
    stopped: bool,
}

impl RemoteRun {
    /// Starts `argv` (this ratelab's words after the binary) on `host` as `binary`, with
    /// one environment variable set if given.
    pub fn start(
        host: &Host,
        binary: &str,
        argv: &[String],
        env: Option<(&str, String)>,
    ) -> Result<RemoteRun, String> {
        RemoteRun::start_with(host, binary, argv, env, None)
    }

    /// As [`RemoteRun::start`], writing `input` to its stdin (then closing it): a secret
    /// that must never be on a command line.
    pub fn start_with(
        host: &Host,
        binary: &str,
        argv: &[String],
        env: Option<(&str, String)>,
        input: Option<Vec<u8>>,
    ) -> Result<RemoteRun, String> {
        let export = env.map_or(String::new(), |(name, value)| {
            format!("export {name}={}; ", ssh::quote(&value))
        });
        // sshd makes the remote shell a session leader: after exec, ratelab's pid is
        // its process group's id.
        let remote = format!(
            "echo \"{PID_LINE}$$\" >&2; {export}exec {binary} {}",
            ssh::quote_all(argv)
        );
        let mut child = ssh::command(&host.ssh, &remote)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start ssh: {e}"))?;
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            // Dropped at the end of this block: the remote side reads to its end.
            stdin
                .write_all(&input)
                .map_err(|e| format!("cannot write to ssh: {e}"))?;
        }
        let mut out = child.stdout.take().expect("piped");
        let err = child.stderr.take().expect("piped");
        let pid = Arc::new(Mutex::new(None));
        let seen = Arc::clone(&pid);
        let lines = Arc::new(Mutex::new(Vec::new()));
        let heard = Arc::clone(&lines);
        Ok(RemoteRun {
            host: host.clone(),
            verb: argv.first().cloned().unwrap_or_default(),
            child,
            stdout: Some(std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = out.read_to_end(&mut bytes);
                bytes
            })),
            stderr: Some(std::thread::spawn(move || {
                let mut text = String::new();
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    match line
                        .strip_prefix(PID_LINE)
                        .and_then(|p| p.trim().parse().ok())
                    {
                        Some(id) => *seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(id),
                        None => {
                            text.push_str(&line);
                            text.push('\n');
                            heard.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                        }
                    }
                }
                text
            })),
            pid,
            lines,
            stopped: false,
        })
    }

    /// Waits until it writes a line on stderr holding `marker` (a server's "listening"),
    /// ends, or `within` passes; the line, or why there is none.
    pub fn wait_for_line(&mut self, marker: &str, within: Duration) -> Result<String, String> {
        let deadline = std::time::Instant::now() + within;
        loop {
            let found = self
                .lines
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .find(|l| l.contains(marker))
                .cloned();
            if let Some(line) = found {
                return Ok(line);
            }
            if self.ended() {
                let said = self
                    .lines
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .join("\n");
                return Err(format!("it ended first: {}", last_line(said.as_bytes())));
            }
            if std::time::Instant::now() > deadline {
                return Err(format!(
                    "it said nothing like {marker:?} within {} s",
                    within.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The host it runs on.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// Whether it was asked to stop.
    pub fn stopping(&self) -> bool {
        self.stopped
    }

    /// Whether it has ended.
    pub fn ended(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops it if it still runs, and waits for its end.
    pub fn stop_if_running(&mut self) {
        if !self.ended() {
            self.stop();
        }
        let _ = self.child.wait();
    }

    /// Asks the remote run to stop as Ctrl-C would (SIGINT to its process group), once.
    pub fn stop(&mut self) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        let pid = *self.pid.lock().unwrap_or_else(|p| p.into_inner());
        match pid {
            Some(pid) => {
                let _ = ssh::command(&self.host.ssh, &format!("kill -INT -- -{pid}"))
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
            // Not started there yet: closing the connection is all there is to stop.
            None => {
                let _ = self.child.kill();
            }
        }
    }

    /// Waits for its end: what it printed, and how it exited.
    pub fn finish(mut self) -> Ended {
        let status = self.child.wait();
        let stdout = self.stdout.take().map(|t| t.join().unwrap_or_default());
        let stderr = self.stderr.take().map(|t| t.join().unwrap_or_default());
        Ended {
            stdout: stdout.unwrap_or_default(),
            last_error_line: last_line(stderr.unwrap_or_default().as_bytes()),
            code: status.ok().and_then(|s| s.code()),
            verb: self.verb,
        }
    }
}
