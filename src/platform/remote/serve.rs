//! The far end of a network test started over ssh (`ratelab net HOST --ssh`): this
//! ratelab put on the host if needed, `net serve --once` bound to the address the test
//! uses, and a key made for this one test handed over on ssh's stdin (never on a command
//! line), so that no server waits there before or after the test.

use std::net::IpAddr;
use std::time::Duration;

use super::process::RemoteRun;
use super::{Host, deploy};

/// Longest wait for the server to listen: copying ratelab there comes first.
const LISTEN_WITHIN: Duration = Duration::from_secs(20);
/// How long a server that served its one test may take to exit before it is stopped.
const EXIT_WITHIN: Duration = Duration::from_secs(5);

/// The far end of one network test.
pub struct RemoteServer {
    run: RemoteRun,
}

/// Starts the server on `host`, listening on `bind`:`port` and requiring `key`; returns
/// once it listens.
pub fn serve(
    host: &Host,
    bind: IpAddr,
    port: u16,
    key: &str,
    say: &dyn Fn(&str),
) -> Result<RemoteServer, String> {
    let binary = deploy::ensure(host, say)?;
    let argv: Vec<String> = [
        "net",
        "serve",
        "--once",
        "--bind",
        &bind.to_string(),
        "--port",
        &port.to_string(),
        "--key-file",
        "/dev/stdin",
    ]
    .map(str::to_string)
    .to_vec();
    say(&format!(
        "{}: ratelab net serve --once on {bind} port {port}",
        host.name
    ));
    let mut run = RemoteRun::start_with(
        host,
        &binary.remote_path(),
        &argv,
        None,
        Some(format!("{key}\n").into_bytes()),
    )?;
    match run.wait_for_line("listening on", LISTEN_WITHIN) {
        Ok(_) => Ok(RemoteServer { run }),
        Err(reason) => {
            run.stop();
            let _ = run.finish();
            Err(format!("its ratelab net serve did not start: {reason}"))
        }
    }
}

/// A `net serve --once` running on a host for one test.
impl RemoteServer {
    /// Lets the server exit after its test, stopping it if it does not.
    pub fn finish(mut self) {
        let deadline = std::time::Instant::now() + EXIT_WITHIN;
        while !self.run.ended() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.run.stop_if_running();
    }
}

impl Drop for RemoteServer {
    /// A run that ends early (another workload failed before this one's test) still
    /// leaves no server waiting on the host.
    fn drop(&mut self) {
        self.run.stop_if_running();
    }
}
