//! `ratelab net HOST` and `ratelab net serve`: TCP throughput between two hosts.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand};

use super::scenario::{Maker, ScenarioKind};
use super::values::{parse_host_port, parse_rate, parse_seconds, parse_size, parse_time};
use super::{Command, MeasureArgs};
use crate::exit::{Exit, UsageError};
use crate::run::Schedule;
use crate::workload::net::{
    DEFAULT_PORT, Direction, Key, KeyError, Limits, MAX_BLOCK_BYTES, NetKind, NetPlan, NetWorkload,
    ServeConfig, Server,
};
use crate::workload::{Cancel, Kind, Workload};

/// Interval of the per-stream figures when --interval is not given, as iperf3's.
const DEFAULT_REPORT_INTERVAL: Duration = Duration::from_secs(1);
/// Most streams per direction a client asks for.
const MAX_STREAMS: u32 = 128;

/// Options of `ratelab net`.
#[derive(Debug, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_long_help = "Start `ratelab net serve` on one host, then `ratelab net HOST` on the \
other. The client opens a control connection and one data connection per stream, and each \
end runs one thread per stream, so several streams use several cores at both ends.\n\n\
Each stream end reports bytes per interval (--interval, default 1s), and at the end its \
totals with the kernel's TCP_INFO (retransmits, congestion window, RTT, delivery rate), the \
MSS and the path MTU. The headline figure is what the receivers got over the test, as \
iperf3's receiver line. Both ends report their CPU time, so an end that is CPU-bound shows. \
Where the link's speed is known (from sysfs, or --link-rate), the result is shown as a share \
of the most TCP payload such a link carries: rate x MSS / (MTU + framing)."
)]
pub struct NetArgs {
    /// Run the server instead.
    #[command(subcommand)]
    pub serve: Option<NetCommand>,
    /// The host running `ratelab net serve`: HOST, HOST:PORT or [IPv6]:PORT (5301 unless given).
    #[arg(value_name = "HOST", required = true, value_parser = parse_host_port)]
    pub host: Option<(String, Option<u16>)>,
    /// The client's options.
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `ratelab net serve`.
#[derive(Debug, Subcommand)]
pub enum NetCommand {
    /// Serve tests to `ratelab net HOST` clients until interrupted.
    Serve(ServeArgs),
}

/// Options of the client.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Streams per direction, each with its own thread at both ends.
    #[arg(short = 'P', long, value_name = "N", default_value_t = 1)]
    pub parallel: u32,
    /// The server sends and this host receives.
    #[arg(short = 'R', long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both send at once, each direction on its own streams.
    #[arg(long)]
    pub bidir: bool,
    /// How long senders send (10s, 2m, or seconds as a bare number).
    #[arg(short = 't', long, value_name = "TIME", default_value = "10s", value_parser = parse_seconds, conflicts_with = "bytes")]
    pub time: Duration,
    /// Send this many bytes per direction, split between its streams, instead of sending for --time.
    #[arg(short = 'n', long, value_name = "SIZE", value_parser = parse_size)]
    pub bytes: Option<u64>,
    /// Socket buffer size (SO_SNDBUF and SO_RCVBUF) at both ends.
    #[arg(short = 'w', long, value_name = "SIZE", value_parser = parse_size)]
    pub window: Option<u64>,
    /// Largest TCP segment payload to ask for (TCP_MAXSEG), in bytes.
    #[arg(short = 'M', long, value_name = "BYTES")]
    pub mss: Option<u32>,
    /// Bytes per write or read call.
    #[arg(short = 'l', long, value_name = "SIZE", default_value = "128K", value_parser = parse_size)]
    pub block_size: u64,
    /// The server's port, when HOST does not give it [default: 5301; 5201 with --iperf3].
    #[arg(short = 'p', long, value_name = "N")]
    pub port: Option<u16>,
    /// A file holding a key shared with the server, proven without sending it.
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// Start the server on HOST over ssh first (`ssh DEST`, or `ssh HOST` when no DEST
    /// is given; RATELAB_SSH chooses the command): `net serve --once` bound to HOST's
    /// address, with a key made for this test handed over on ssh's stdin.
    #[arg(long, value_name = "DEST", num_args = 0..=1, default_missing_value = "", conflicts_with = "key_file")]
    pub ssh: Option<String>,
    /// The server is iperf3's (`iperf3 -s`, port 5201 unless given): the test speaks
    /// iperf3's protocol, and the server's results are stored as the remote end.
    #[arg(
        long,
        conflicts_with_all = ["key_file", "ssh"],
        long_help = "The server is iperf3's (`iperf3 -s`, 3.x; port 5201 unless given): the test \
                     speaks iperf3's TCP protocol, with -P, -R, --bidir, -t, -n, -l, -w and -M \
                     as iperf3 -c takes them. The server's own results (bytes and retransmits \
                     per stream, its CPU) are stored as the remote end, so the receiver figure \
                     of a forward test is the server's, as iperf3 prints it. iperf3 sends no \
                     interval figures, so the remote end has totals only. UDP (iperf3 -u) is \
                     not spoken, nor iperf3's --username authentication."
    )]
    pub iperf3: bool,
    /// The link's speed, when sysfs does not know it (10Gbit/s, 1.25GB/s).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub link_rate: Option<f64>,
    /// Output and storage options; --interval also sets the per-stream figures [default: 1s].
    #[command(flatten)]
    pub output: MeasureArgs,
}

/// Options of the server.
#[derive(Debug, Args)]
#[command(
    after_long_help = "The server is safe to leave running: each test is bounded by \
--max-streams, --max-duration and --max-bytes; at most --max-tests run at once and other \
clients hear \"busy\"; every message must arrive whole within --idle-timeout; a malformed \
message closes that connection with a logged reason and the server serves on. With \
--key-file, clients must prove they hold the same key (HMAC-SHA256 over fresh nonces from \
both ends; the key never crosses the wire), and the server proves it too. Events are logged \
on stderr.\n\n\
Ctrl-C or SIGTERM stops the server: a test that is running ends at once, its client is told \
the server stopped (it stores its run as incomplete with that reason), and the server exits \
with 130. A second signal exits at once.\n\n\
iperf3 clients (`iperf3 -c HOST -p 5301`, or port 5201 with --iperf3) are served too, told \
apart by their first bytes: forward, -R, --bidir, -P, -t, -n, -l and -w, within the same \
bounds; they see their usual output, and each of their tests is stored here as a run with \
both ends (--db, --no-store). They cannot prove a key: with --key-file they are refused \
unless --iperf3 is given. UDP (-u), -O and -b are refused as not implemented."
)]
pub struct ServeArgs {
    /// Address to listen on (:: for every IPv6 and IPv4 address).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0")]
    pub bind: IpAddr,
    /// Port to listen on [default: 5301; 5201 with --iperf3].
    #[arg(short = 'p', long, value_name = "N")]
    pub port: Option<u16>,
    /// Tests that may run at once; other clients hear "busy".
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub max_tests: usize,
    /// Most streams per direction in one test.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_streams: u32,
    /// Longest test.
    #[arg(long, value_name = "TIME", default_value = "2m", value_parser = parse_time)]
    pub max_duration: Duration,
    /// Most bytes one test may move (with --bytes).
    #[arg(long, value_name = "SIZE", default_value = "100G", value_parser = parse_size)]
    pub max_bytes: u64,
    /// Longest wait for a client's next message or data connections.
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = parse_time)]
    pub idle_timeout: Duration,
    /// A file holding the key clients must prove.
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// Exit after serving one test.
    #[arg(short = '1', long)]
    pub once: bool,
    /// Serve as iperf3 does: on port 5201 unless --port says, and to iperf3 clients even
    /// with --key-file (they cannot prove a key).
    #[arg(long)]
    pub iperf3: bool,
    /// Where the runs of iperf3 clients' tests are stored.
    #[command(flatten)]
    pub db: super::DbArg,
    /// Do not store iperf3 clients' tests.
    #[arg(long)]
    pub no_store: bool,
}

/// How a `kind = "net"` entry of a scenario becomes a workload.
pub const SCENARIO: ScenarioKind = ScenarioKind {
    name: NetKind::NAME,
    make: scenario_maker,
};

fn scenario_maker(command: Command, target: &str) -> Option<Result<Maker, String>> {
    let Command::Net(args) = command else {
        return None;
    };
    let (host, target_port) = args.host.expect("a scenario always gives the target");
    if let (Some(in_target), Some(field)) = (target_port, args.client.port) {
        return Some(Err(format!(
            "net workload to {target}: the port is given twice, in the target ({in_target}) \
             and as port = {field}; give it in one place"
        )));
    }
    Some(
        args.client
            .plan(host, target_port)
            .map_err(|e| e.0)
            .map(|plan| {
                Box::new(move |alone_of: Option<usize>| -> Box<dyn Workload> {
                    match alone_of {
                        Some(of) => Box::new(NetWorkload::alone_for(plan.clone(), of)),
                        None => Box::new(NetWorkload::new(plan.clone())),
                    }
                }) as Maker
            }),
    )
}

/// Runs `ratelab net`.
pub fn run(args: NetArgs) -> anyhow::Result<Exit> {
    match args.serve {
        Some(NetCommand::Serve(serve)) => run_server(serve),
        None => {
            let (host, port) = args.host.expect("clap requires HOST without serve");
            let output = args.client.output.clone();
            let plan = args.client.plan(host, port)?;
            super::measure(
                NetKind::NAME,
                &output,
                vec![Box::new(NetWorkload::new(plan))],
                Schedule::together(1, &[]),
            )
        }
    }
}

impl ClientArgs {
    /// The validated plan of a test against `host`, at the port HOST gave, if any.
    pub fn plan(&self, host: String, host_port: Option<u16>) -> Result<NetPlan, UsageError> {
        if self.parallel == 0 || self.parallel > MAX_STREAMS {
            return Err(UsageError(format!(
                "--parallel {} is out of range (1 to {MAX_STREAMS})",
                self.parallel
            )));
        }
        if self.bytes == Some(0) {
            return Err(UsageError(
                "--bytes 0 sends nothing: give a size above zero".into(),
            ));
        }
        if self.time < Duration::from_millis(1) {
            return Err(UsageError(format!(
                "--time {} sends nothing: give 1ms or more",
                humantime::format_duration(self.time)
            )));
        }
        if self.block_size == 0 || self.block_size > MAX_BLOCK_BYTES {
            return Err(UsageError(format!(
                "--block-size {} is out of range (1 byte to {})",
                self.block_size,
                crate::vocab::units::format_size(MAX_BLOCK_BYTES)
            )));
        }
        if let Some(mss) = self.mss.filter(|m| !(88..=65_495).contains(m)) {
            return Err(UsageError(format!(
                "--mss {mss} is out of range (88 to 65495 bytes)"
            )));
        }
        if let Some(window) = self.window.filter(|w| *w < 1024 || *w > 1 << 30) {
            return Err(UsageError(format!(
                "--window {window} is out of range (1 KiB to 1 GiB)"
            )));
        }
        let interval = self.output.interval.unwrap_or(DEFAULT_REPORT_INTERVAL);
        let plan = NetPlan {
            port: host_port.or(self.port).unwrap_or(if self.iperf3 {
                crate::workload::net::iperf3::wire::DEFAULT_PORT
            } else {
                DEFAULT_PORT
            }),
            streams: self.parallel,
            direction: if self.bidir {
                Direction::Bidir
            } else if self.reverse {
                Direction::Reverse
            } else {
                Direction::Forward
            },
            duration_ms: self.bytes.is_none().then_some(self.time.as_millis() as u64),
            bytes: self.bytes,
            interval_ms: (interval.as_millis() as u64).max(1),
            block_bytes: self.block_size,
            window_bytes: self.window,
            mss_bytes: self.mss,
            link_rate_bytes_per_sec: self.link_rate,
            key: self.key_file.is_some(),
            own_server: false,
            key_file: self.key_file.clone(),
            ssh: self
                .ssh
                .as_ref()
                .map(|destination| match destination.as_str() {
                    "" => host.clone(),
                    given => given.to_string(),
                }),
            iperf3: self.iperf3,
            served: false,
            host,
        };
        if let (Some(_), Some(flag)) = (host_port, self.port) {
            return Err(UsageError(format!(
                "the port is given twice, in HOST {} and as --port {flag}; give it in one place",
                plan.host_port()
            )));
        }
        Ok(plan)
    }
}

/// Stores the run of each test served to an iperf3 client in the database `db` names,
/// opened for each run (so a server no iperf3 client tests makes no database), and
/// logs where it went.
fn recorder(
    db: &super::DbArg,
    log: crate::workload::net::Log,
) -> anyhow::Result<crate::workload::net::Recorder> {
    let at = crate::store::Address::of(db.path.as_deref())?;
    let store = std::sync::Mutex::new(None::<crate::store::Store>);
    Ok(Arc::new(move |doc| {
        let mut store = store.lock().unwrap_or_else(|p| p.into_inner());
        if store.is_none() {
            match at.open() {
                Ok(opened) => *store = Some(opened),
                Err(e) => return log(&format!("the iperf3 test is not stored: {e:#}")),
            }
        }
        match store.as_mut().map(|s| s.import_run(&doc)) {
            Some(Ok(Some(id))) => log(&format!("stored as run {id} in {at}")),
            Some(Ok(None)) => {}
            Some(Err(e)) => log(&format!(
                "the iperf3 test is not stored: {}",
                anyhow::Error::new(e)
            )),
            None => {}
        }
    }))
}

fn run_server(args: ServeArgs) -> anyhow::Result<Exit> {
    for (flag, zero) in [
        ("--max-tests", args.max_tests == 0),
        ("--max-streams", args.max_streams == 0),
        (
            "--max-duration",
            args.max_duration < Duration::from_millis(1),
        ),
        ("--max-bytes", args.max_bytes == 0),
        (
            "--idle-timeout",
            args.idle_timeout < Duration::from_millis(1),
        ),
    ] {
        if zero {
            return Err(UsageError(format!("{flag} must be above zero")).into());
        }
    }
    let key = match &args.key_file {
        Some(path) => Some(Key::read(path).map_err(|e| match e {
            KeyError::Short { .. } => anyhow::Error::new(UsageError(e.to_string())),
            read => anyhow::Error::new(read),
        })?),
        None => None,
    };
    let config = ServeConfig {
        bind: SocketAddr::new(
            args.bind,
            args.port.unwrap_or(if args.iperf3 {
                crate::workload::net::iperf3::wire::DEFAULT_PORT
            } else {
                DEFAULT_PORT
            }),
        ),
        limits: Limits {
            max_streams: args.max_streams,
            max_duration_ms: args.max_duration.as_millis() as u64,
            max_bytes: args.max_bytes,
        },
        max_tests: args.max_tests,
        key,
        idle_timeout: args.idle_timeout,
        once: args.once,
        iperf3_without_key: args.iperf3,
    };
    let log: crate::workload::net::Log = Arc::new(|line: &str| {
        eprintln!(
            "{} {line}",
            humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        );
    });
    let mut server = Server::bind(config.clone(), Arc::clone(&log))
        .with_context(|| format!("cannot listen on {}", config.bind))?;
    if !args.no_store {
        server = server.recording(recorder(&args.db, Arc::clone(&log))?);
    }
    let address = server
        .local_addr()
        .context("cannot read the listening address")?;
    log(&format!(
        "listening on {address}: {} test{} at a time, up to {} streams, {} s and {} bytes each{}",
        config.max_tests,
        if config.max_tests == 1 { "" } else { "s" },
        config.limits.max_streams,
        config.limits.max_duration_ms / 1000,
        config.limits.max_bytes,
        match (config.key.is_some(), config.iperf3_without_key) {
            (true, true) => ", key required (iperf3 clients served without one)",
            (true, false) => ", key required (iperf3 clients refused)",
            (false, _) => "",
        }
    ));
    let cancel = Cancel::on_signals().context("cannot install signal handlers")?;
    server
        .serve(&|| cancel.is_set())
        .with_context(|| format!("serving on {address}"))?;
    if cancel.is_set() {
        log("interrupted: stopped");
        return Ok(Exit::Interrupted);
    }
    Ok(Exit::Success)
}
