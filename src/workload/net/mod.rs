//! TCP throughput between two hosts, as iperf3 measures it but with one thread per
//! stream at both ends: a control connection, one data connection per stream, interval
//! figures and TCP_INFO per stream, and the CPU time of both ends. The client is a
//! workload like any other, so it runs beside disk workloads on one clock.

mod admission;
mod brief;
mod charts;
mod client;
mod context;
mod datagram;
mod foreign;
mod host;
pub mod iperf3;
mod item;
mod key;
mod kind;
mod limit;
mod options;
mod payload;
mod plausible;
mod protocol;
mod report;
mod server;
mod session;
mod socket;
mod stream;
mod summary;
mod udp;
mod view;

/// Bytes in lowercase hex, as key files hold them.
pub use key::hex as key_hex;

use std::io::Write as _;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::platform::remote::{self, RemoteServer};
pub use context::NetContext;
pub use item::{Heading, NetItem, NetOp, Scope, Side};
pub use key::{Key, KeyError};
pub use kind::NetKind;
pub use options::StreamOptions;
pub use protocol::{
    DecodeError, Direction, Limits, MAX_REQUEST_BYTES, Message, PROTOCOL, decode, encode,
};
pub use server::{Log, MAX_BLOCK_BYTES, Record, Recorder, ServeConfig, Server};
pub use summary::{CpuFractions, DirectionTotals, NetSummary, Totals};

use self::client::Control;
use self::report::{Role, SideReport};
use self::session::{Connection, GRACE};

/// How long a client whose stream stalled waits for the server's report.
const STALLED_RESULTS: Duration = Duration::from_secs(2);
use crate::error::Error;
use crate::platform::nics::{self, Nic};
use crate::workload::{Context, Kind, Workload};

/// The port `net serve` listens on and `net HOST` connects to by default.
pub const DEFAULT_PORT: u16 = 5301;

/// What `ratelab net HOST` was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetPlan {
    /// The server, as given (`own` for a server ratelab runs itself on loopback).
    pub host: String,
    /// Its port.
    pub port: u16,
    /// Streams per direction.
    pub streams: u32,
    /// Who sends.
    pub direction: Direction,
    /// How long senders send; null when `bytes` bounds the test.
    pub duration_ms: Option<u64>,
    /// Bytes to send in all, per direction; null when the duration bounds the test.
    pub bytes: Option<u64>,
    /// Interval of the per-stream figures.
    pub interval_ms: u64,
    /// Bytes per write or read call.
    pub block_bytes: u64,
    /// SO_SNDBUF and SO_RCVBUF, when set.
    pub window_bytes: Option<u64>,
    /// The MSS asked for, when set.
    pub mss_bytes: Option<u32>,
    /// The link's rate as the user gave it (`--link-rate`), bytes per second.
    pub link_rate_bytes_per_sec: Option<f64>,
    /// Whether the test proved a pre-shared key.
    pub key: bool,
    /// Whether ratelab ran its own server on loopback for the test.
    pub own_server: bool,
    /// The key file, when one is given (not stored).
    #[serde(skip)]
    pub key_file: Option<PathBuf>,
    /// The ssh destination the server was started over for this test (`--ssh`), with a
    /// key made for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<String>,
    /// Whether the server is iperf3's (`--iperf3`), spoken to in iperf3's protocol.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub iperf3: bool,
    /// Whether this end served the test (to an iperf3 client, whose host is `host`), so
    /// the local end is the server's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub served: bool,
    /// What the test asked of its data connections beyond the window and MSS.
    #[serde(default, skip_serializing_if = "StreamOptions::is_plain")]
    pub options: StreamOptions,
    /// A UDP test's datagrams (each of `block_bytes`); absent for TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<protocol::Udp>,
    /// How to log in to an iperf3 server that checks credentials (not stored).
    #[serde(skip)]
    pub iperf3_login: Option<iperf3::login::Login>,
}

impl NetPlan {
    /// The server as `HOST:PORT`, an IPv6 address in brackets (`[::1]:5301`), so the
    /// text reads back as `net HOST` and a scenario's target take it.
    pub fn host_port(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// A test of `streams` streams for `duration` against a server ratelab runs itself on
    /// loopback: what this machine's CPUs and memory give TCP with no wire in the way.
    pub fn loopback(duration: Duration, streams: u32) -> NetPlan {
        NetPlan {
            host: "127.0.0.1".into(),
            port: 0,
            streams,
            direction: Direction::Forward,
            duration_ms: Some(duration.as_millis() as u64),
            bytes: None,
            interval_ms: 1000,
            block_bytes: 128 << 10,
            window_bytes: None,
            mss_bytes: None,
            link_rate_bytes_per_sec: None,
            key: false,
            own_server: true,
            key_file: None,
            ssh: None,
            iperf3: false,
            served: false,
            options: StreamOptions::default(),
            udp: None,
            iperf3_login: None,
        }
    }

    fn request(&self) -> protocol::TestRequest {
        protocol::TestRequest {
            streams: self.streams,
            direction: self.direction,
            duration_ms: self.duration_ms,
            // Per direction, split between its streams (rounded up).
            bytes_per_stream: self.bytes.map(|b| b.div_ceil(u64::from(self.streams))),
            block_bytes: self.block_bytes,
            window_bytes: self.window_bytes,
            interval_ms: self.interval_ms,
            udp: self.udp,
        }
    }
}

/// A server ratelab runs in its own thread, for loopback tests.
struct OwnServer {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl OwnServer {
    fn start() -> Result<OwnServer, Error> {
        let config = ServeConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            limits: Limits {
                max_streams: 64,
                max_duration_ms: 3_600_000,
                max_bytes: u64::MAX,
                max_memory_bytes: u64::MAX,
            },
            max_tests: 1,
            key: None,
            idle_timeout: Duration::from_secs(600),
            once: false,
            iperf3_authority: None,
        };
        let server = Server::bind(config, Arc::new(|_: &str| {}))
            .map_err(|e| Error::io("listen on", "127.0.0.1", e))?;
        let address = server
            .local_addr()
            .map_err(|e| Error::io("listen on", "127.0.0.1", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("net-own-server".into())
            .spawn(move || {
                let _ = server.serve(&|| flag.load(Ordering::Relaxed));
            })
            .map_err(|e| Error::Unsupported(format!("cannot start the loopback server: {e}")))?;
        Ok(OwnServer {
            address,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The client of a network test.
pub struct NetWorkload {
    plan: NetPlan,
    alone_of: Option<usize>,
    address: Option<SocketAddr>,
    own_server: Option<OwnServer>,
    /// The server started over ssh for this test, and the folder holding its key.
    far_end: Option<(RemoteServer, tempfile::TempDir)>,
    key: Option<Key>,
    control: Option<Control>,
    /// The control connection to an iperf3 server, once set up.
    iperf3: Option<iperf3::Iperf3Control>,
    connections: Vec<Connection>,
    nic: Option<Nic>,
    mss_bytes: Option<u64>,
    mtu_bytes: Option<u64>,
}

impl NetWorkload {
    /// A client for `plan`.
    pub fn new(plan: NetPlan) -> NetWorkload {
        NetWorkload {
            plan,
            alone_of: None,
            address: None,
            own_server: None,
            far_end: None,
            key: None,
            control: None,
            iperf3: None,
            connections: Vec::new(),
            nic: None,
            mss_bytes: None,
            mtu_bytes: None,
        }
    }

    /// The copy of `plan` that runs alone first for workload `of` (`--alone`).
    pub fn alone_for(plan: NetPlan, of: usize) -> NetWorkload {
        NetWorkload {
            alone_of: Some(of),
            ..NetWorkload::new(plan)
        }
    }

    fn peer(&self) -> String {
        match self.address {
            Some(address) => address.to_string(),
            None => self.plan.host_port(),
        }
    }

    fn link_bits_per_sec(&self) -> Option<(f64, &'static str)> {
        match self.plan.link_rate_bytes_per_sec {
            Some(rate) => Some((rate * 8.0, "--link-rate")),
            None => self
                .nic
                .as_ref()
                .and_then(|n| n.speed_bits_per_sec)
                .map(|s| (s as f64, "sysfs")),
        }
    }
}

impl Workload for NetWorkload {
    fn kind(&self) -> &'static str {
        NetKind::NAME
    }

    fn target(&self) -> String {
        if self.plan.own_server {
            "loopback".into()
        } else {
            self.plan.host_port()
        }
    }

    fn params(&self) -> Value {
        serde_json::to_value(&self.plan).expect("plans serialise")
    }

    fn touches(&self) -> crate::workload::Touches {
        // The interface the route to the server leaves by: a UDP socket connected to
        // it (which sends nothing) says which local address the kernel picks.
        let interface = self.address.and_then(|address| {
            let unspecified: SocketAddr = if address.is_ipv6() {
                "[::]:0".parse().ok()?
            } else {
                "0.0.0.0:0".parse().ok()?
            };
            let probe = std::net::UdpSocket::bind(unspecified).ok()?;
            probe.connect(address).ok()?;
            nics::nic_of(probe.local_addr().ok()?.ip())
        });
        crate::workload::Touches {
            interfaces: interface.map(|n| n.name).into_iter().collect(),
            ..Default::default()
        }
    }

    fn context(&self) -> Value {
        let context = NetContext::of(
            self.address.map(|a| a.to_string()),
            self.nic.clone(),
            self.link_bits_per_sec(),
            self.mss_bytes,
            self.mtu_bytes,
        );
        serde_json::to_value(context).expect("contexts serialise")
    }

    fn alone_of(&self) -> Option<usize> {
        self.alone_of
    }

    fn prepare(&mut self) -> Result<(), Error> {
        // A server started over ssh binds the address the test connects to.
        let resolved = match self.plan.ssh.clone() {
            Some(destination) => {
                let address = self.resolve()?;
                self.start_far_end(&destination, address.ip())?;
                Some(address)
            }
            None => None,
        };
        let key = match &self.plan.key_file {
            Some(path) => Some(Key::read(path).map_err(|e| match e {
                KeyError::Read { path, source } => Error::Target {
                    path,
                    reason: format!("cannot read the key file: {source}"),
                },
                short => Error::Input(short.to_string()),
            })?),
            None => None,
        };
        let address = if self.plan.own_server {
            let server = OwnServer::start()?;
            let address = server.address;
            self.own_server = Some(server);
            address
        } else {
            match resolved {
                Some(address) => address,
                None => self.resolve()?,
            }
        };
        self.address = Some(address);
        if self.plan.iperf3 {
            // Any connection to an iperf3 server is a test to it, so the test's own opens
            // now: a server that is busy, is not iperf3's or refuses the parameters says
            // so before anything runs. It then waits for the streams, which open in run.
            self.iperf3 = Some(iperf3::Iperf3Control::open(
                address,
                &self.peer(),
                &self.plan,
            )?);
            return Ok(());
        }
        // A first handshake says now whether the server is there, takes the key and
        // allows the test; the test's own connection opens in setup, when its group
        // is about to start, since a server does not wait long for a silent client.
        let control = Control::open(address, &self.peer(), key.as_ref(), self.plan.mss_bytes)?;
        server::check(&self.plan.request(), &control.limits).map_err(|reason| {
            Error::Input(format!("{} refuses this test: {reason}", self.peer()))
        })?;
        self.key = key;
        Ok(())
    }

    fn setup(&mut self, _ctx: &Context) -> Result<(), Error> {
        let address = self.address.expect("prepared");
        if self.plan.iperf3 {
            // The streams open in run: their last one starts the test at the server.
            return Ok(());
        }
        let control = Control::open(
            address,
            &self.peer(),
            self.key.as_ref(),
            self.plan.mss_bytes,
        )?;
        self.connections = control.start(&self.plan.request(), self.plan.mss_bytes)?;
        self.control = Some(control);
        if let Some(first) = self.connections.first() {
            self.nic = first
                .socket
                .local_addr()
                .ok()
                .and_then(|a| nics::nic_of(a.ip()));
            self.mss_bytes = socket::mss_bytes(&first.socket);
            self.mtu_bytes = socket::path_mtu_bytes(&first.socket);
        }
        Ok(())
    }

    fn run(&mut self, ctx: &Context) -> Result<(), Error> {
        if let Some(control) = self.iperf3.take() {
            return self.run_iperf3(&control, ctx);
        }
        let control = self.control.as_ref().expect("prepared");
        let request = self.plan.request();
        control.go()?;
        let start = std::time::Instant::now();
        let planned = match request.duration_ms {
            Some(ms) if request.bytes_per_stream.is_none() => ms,
            _ => control.limits.max_duration_ms,
        };
        let hard_stop = start + Duration::from_millis(planned) + GRACE;
        ctx.sink.status(format!(
            "{} stream{} {:?} to {}",
            self.plan.streams,
            if self.plan.streams == 1 { "" } else { "s" },
            self.plan.direction,
            self.peer()
        ));
        let test = session::Run {
            request: &request,
            start,
            hard_stop,
            ending: stream::Ending::Drain,
            options: &self.plan.options,
        };
        let local = session::run(
            std::mem::take(&mut self.connections),
            &test,
            Some(ctx.sink.progress()),
            &|| ctx.cancel.is_set(),
        );
        for stream in &local.streams {
            if stream.role == Role::Send {
                self.mss_bytes = stream.mss_bytes.or(self.mss_bytes);
                self.mtu_bytes = stream.mtu_bytes.or(self.mtu_bytes);
            }
        }
        let local_items =
            item::items_of_report(&local, Side::Local, self.plan.direction, self.plan.streams);
        for item in &local_items {
            ctx.sink.item(item);
        }
        if ctx.cancel.is_set() {
            return Err(Error::Interrupted);
        }
        let remote = remote_report(control, &local, self.peer())?;
        for stream in &remote.streams {
            if stream.role == Role::Send {
                self.mss_bytes = stream.mss_bytes.or(self.mss_bytes);
                self.mtu_bytes = stream.mtu_bytes.or(self.mtu_bytes);
            }
        }
        for item in item::items_of_report(
            &remote,
            Side::Remote,
            self.plan.direction,
            self.plan.streams,
        ) {
            ctx.sink.item(&item);
        }
        ctx.sink.stage_done("test");
        let failed: Vec<String> = local
            .streams
            .iter()
            .chain(&remote.streams)
            .filter_map(|s| s.error.clone())
            .collect();
        if let Some(first) = failed.first() {
            return Err(Error::Peer {
                peer: self.peer(),
                reason: format!("{first} ({} stream ends failed)", failed.len()),
            });
        }
        self.agree(&local, &remote)
    }

    fn cleanup(&mut self) -> Result<(), Error> {
        self.connections.clear();
        self.control = None;
        self.iperf3 = None;
        self.own_server = None;
        if let Some((server, _key)) = self.far_end.take() {
            server.finish();
        }
        Ok(())
    }
}

impl NetWorkload {
    /// A test against an iperf3 server: this end's streams as items, then the server's
    /// results as the remote end's.
    fn run_iperf3(&mut self, control: &iperf3::Iperf3Control, ctx: &Context) -> Result<(), Error> {
        ctx.sink.status(format!(
            "{} stream{} {:?} to iperf3 at {}",
            self.plan.streams,
            if self.plan.streams == 1 { "" } else { "s" },
            self.plan.direction,
            self.peer()
        ));
        if let Some(first) = control.first_local_address() {
            self.nic = nics::nic_of(first);
        }
        let outcome = iperf3::run(control, &self.plan, ctx)?;
        for stream in &outcome.local.streams {
            self.mss_bytes = stream.mss_bytes.or(self.mss_bytes);
            self.mtu_bytes = stream.mtu_bytes.or(self.mtu_bytes);
        }
        for item in item::items_of_report(
            &outcome.local,
            Side::Local,
            self.plan.direction,
            self.plan.streams,
        ) {
            ctx.sink.item(&item);
        }
        let (remote, theirs) = outcome.remote?;
        for item in iperf3::remote_items(&remote, &theirs, self.plan.direction, self.plan.streams) {
            ctx.sink.item(&item);
        }
        if let Some(reason) = plausible::results(&theirs) {
            return Err(Error::Peer {
                peer: self.peer(),
                reason: format!("the server's results cannot be: {reason}"),
            });
        }
        ctx.sink.stage_done("test");
        match outcome.local.streams.iter().find_map(|s| s.error.clone()) {
            Some(first) => Err(Error::Peer {
                peer: self.peer(),
                reason: first,
            }),
            None => self.agree(&outcome.local, &remote),
        }
    }

    /// Whether the two ends' figures agree stream by stream; a run whose ends disagree
    /// is not complete.
    fn agree(&self, local: &report::SideReport, remote: &report::SideReport) -> Result<(), Error> {
        if let Some(reason) = plausible::report(remote) {
            return Err(Error::Peer {
                peer: self.peer(),
                reason: format!("the server's report cannot be: {reason}"),
            });
        }
        match report::disagreement(local, remote, self.plan.block_bytes, socket::held_between()) {
            Some(reason) => Err(Error::Peer {
                peer: self.peer(),
                reason: format!("the two ends disagree: {reason}"),
            }),
            None => Ok(()),
        }
    }

    /// The server's address, as the host and port name it.
    fn resolve(&self) -> Result<SocketAddr, Error> {
        (self.plan.host.as_str(), self.plan.port)
            .to_socket_addrs()
            .map_err(|e| Error::Peer {
                peer: self.peer(),
                reason: format!("cannot resolve the host: {e}"),
            })?
            .next()
            .ok_or_else(|| Error::Peer {
                peer: self.peer(),
                reason: "the host has no address".into(),
            })
    }

    /// Starts `net serve --once` on the host over ssh (`destination`), bound to `bind`,
    /// the address the test uses, with a key made for this test: written here only to a
    /// file in a private folder, handed over on ssh's stdin, never on a command line.
    fn start_far_end(&mut self, destination: &str, bind: std::net::IpAddr) -> Result<(), Error> {
        let dir = tempfile::tempdir()
            .map_err(|e| Error::io("make a folder for the key in", std::env::temp_dir(), e))?;
        let key_file = dir.path().join("key");
        let key = key_hex(&rand::random::<[u8; 32]>());
        // Its owner's alone, as a key file must be (auth::Key::read checks).
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&key_file)
            .and_then(|mut file| file.write_all(format!("{key}\n").as_bytes()))
            .map_err(|e| Error::io("write", &key_file, e))?;
        let host = remote::Host {
            name: self.plan.host.clone(),
            ssh: destination.to_string(),
        };
        let server =
            remote::serve(&host, bind, self.plan.port, &key, &|_| {}).map_err(|reason| {
                Error::Peer {
                    peer: format!("{} over ssh {destination}", self.peer()),
                    reason,
                }
            })?;
        self.plan.key = true;
        self.plan.key_file = Some(key_file);
        self.far_end = Some((server, dir));
        Ok(())
    }
}

/// The server's report of the test this end ran as `local`, from `peer`. A stream whose
/// bytes stopped arriving may keep the report from crossing too: then the wait is
/// short and the run ends with its own figures and its streams' words.
fn remote_report(control: &Control, local: &SideReport, peer: String) -> Result<SideReport, Error> {
    // A sender here that gave up, or one there that did (its reset crossed, small):
    // the same hop may hold the report.
    let stalled = local.streams.iter().any(|s| s.stalled.is_some() || s.reset);
    let wait = if stalled {
        STALLED_RESULTS
    } else {
        GRACE + Duration::from_secs(5)
    };
    control.results(wait).map_err(
        |e| match local.streams.iter().find_map(|s| s.error.clone()) {
            Some(first) => Error::Peer {
                peer,
                reason: format!("{first}; the server's results did not come: {e}"),
            },
            None => e,
        },
    )
}
