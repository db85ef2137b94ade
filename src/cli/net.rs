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
use crate::control::Cancel;
use crate::exit::{Exit, UsageError};
use crate::run::Schedule;
use crate::workload::net::iperf3::login::{self, Authority, AuthorizedUsers, Login, Padding};
use crate::workload::net::{
    DEFAULT_PORT, Direction, Key, KeyError, Limits, MAX_BLOCK_BYTES, NetKind, NetPlan, NetWorkload,
    ServeConfig, Server, StreamOptions,
};
use crate::workload::{Kind, Workload};

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
                     interval figures, so the remote end has totals only. -C and --fq-rate are \
                     asked of the server and set on this end's connections; --username with \
                     --rsa-public-key-path logs in to a server that checks credentials. A test \
                     of bytes (-n) ends once the server's TCP has taken them all, so the \
                     server counts every byte. UDP (iperf3 -u) is not spoken."
    )]
    pub iperf3: bool,
    /// The TCP congestion control of the test's connections at both ends (reno, cubic,
    /// bbr: what the kernels have), as iperf3 -C.
    #[arg(short = 'C', long, value_name = "NAME", requires = "iperf3")]
    pub congestion: Option<String>,
    /// Pace each sending connection in the kernel at this rate (SO_MAX_PACING_RATE), at
    /// both ends, as iperf3 --fq-rate (100Mbit/s, 1Gbit/s).
    #[arg(long, value_name = "RATE", value_parser = parse_rate, requires = "iperf3")]
    pub fq_rate: Option<f64>,
    /// Log in to an iperf3 server that checks credentials: the user; the password comes
    /// from IPERF3_PASSWORD, or is asked for on the terminal.
    #[arg(long, value_name = "USER", requires_all = ["iperf3", "rsa_public_key_path"])]
    pub username: Option<String>,
    /// The iperf3 server's RSA public key (PEM), which seals the credentials.
    #[arg(long, value_name = "PATH", requires = "username")]
    pub rsa_public_key_path: Option<PathBuf>,
    /// Seal the credentials with PKCS#1 v1.5 padding, for iperf3 servers before 3.17
    /// (later ones take OAEP, unless run with --use-pkcs1-padding).
    #[arg(long = "use-pkcs1-padding", requires = "username")]
    pub pkcs1_padding: bool,
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
--max-streams, --max-duration, --max-bytes and --max-memory; at most --max-tests run at \
once and other clients hear \"busy\"; every message must arrive whole within \
--idle-timeout; a malformed message closes that connection with a logged reason and the \
server serves on. With --key-file (its owner's alone: chmod 600), clients must prove they \
hold the same key (HMAC-SHA256 over fresh nonces from both ends; the key never crosses the \
wire), and the server proves it too; until a client has, it holds no test slot. Events are \
logged on stderr, text from the wire escaped. docs/security.md says what a key protects \
and every bound.\n\n\
Ctrl-C or SIGTERM stops the server: a test that is running ends at once, its client is told \
the server stopped (it stores its run as incomplete with that reason), and the server exits \
with 130. A second signal exits at once.\n\n\
iperf3 clients (`iperf3 -c HOST -p 5301`, or port 5201 with --iperf3) are served too, told \
apart by their first bytes: forward, -R, --bidir, -P, -t, -n, -l and -w, within the same \
bounds; they see their usual output, and each of their tests is stored here as a run with \
both ends (--db, --no-store), incomplete when the two ends' figures disagree. Every \
option an iperf3 client sends is honoured on this end's connections (-C, --fq-rate, -b, \
-S, -N, -M, -w, -Z, --repeating-payload, --skip-rx-copy, --dont-fragment) or refused in \
iperf3's words before the test (UDP, SCTP, -O, -A, -m). With --rsa-private-key-path and \
--authorized-users-path, iperf3 clients log in as `iperf3 -s` has them (--username); \
with --key-file and no iperf3 credentials they are refused, since they cannot prove a \
key. With --once, the server ends after one test asked for by a client that proved itself \
(the key, iperf3 credentials, or with neither a request within the bounds), served or \
refused, as with `iperf3 -s -1`."
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
    /// Most memory one test's blocks may take (a block per connection).
    #[arg(long, value_name = "SIZE", default_value = "128M", value_parser = parse_size)]
    pub max_memory: u64,
    /// Longest wait for a client's next message or data connections.
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = parse_time)]
    pub idle_timeout: Duration,
    /// A file holding the key clients must prove.
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// Exit after one test asked for by a client that proved itself.
    #[arg(short = '1', long)]
    pub once: bool,
    /// Serve as iperf3 does: on port 5201 unless --port says.
    #[arg(long)]
    pub iperf3: bool,
    /// Check iperf3 clients' credentials as `iperf3 -s` does: the RSA private key (PEM,
    /// unencrypted) that opens them.
    #[arg(long, value_name = "PATH", requires = "authorized_users_path")]
    pub rsa_private_key_path: Option<PathBuf>,
    /// The users iperf3 clients may log in as: `user,sha256("{user}password")` lines.
    #[arg(long, value_name = "PATH", requires = "rsa_private_key_path")]
    pub authorized_users_path: Option<PathBuf>,
    /// How far an iperf3 client's credentials may be from this clock, in seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = crate::workload::net::iperf3::login::DEFAULT_SKEW_SECONDS,
        requires = "rsa_private_key_path"
    )]
    pub time_skew_threshold: u64,
    /// Take iperf3 credentials sealed with PKCS#1 v1.5 padding (clients before 3.17)
    /// instead of OAEP.
    #[arg(long = "use-pkcs1-padding", requires = "rsa_private_key_path")]
    pub pkcs1_padding: bool,
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
pub fn run(args: Box<NetArgs>) -> anyhow::Result<Exit> {
    let args = *args;
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
        self.check_ranges()?;
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
            options: StreamOptions {
                congestion: self.congestion.clone(),
                pacing_bytes_per_sec: self.fq_rate.map(|r| r.round() as u64),
                ..StreamOptions::default()
            },
            // ratelab's client sends TCP only, as yet.
            udp: None,
            iperf3_login: self.login()?,
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

impl ClientArgs {
    /// Refuses values out of their ranges, naming the flag.
    fn check_ranges(&self) -> Result<(), UsageError> {
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
        Ok(())
    }

    /// The credentials for an iperf3 server that checks them: the password from
    /// IPERF3_PASSWORD, or asked for on the terminal, as iperf3 -c gets it.
    fn login(&self) -> Result<Option<Login>, UsageError> {
        let (Some(user), Some(key)) = (&self.username, &self.rsa_public_key_path) else {
            return Ok(None);
        };
        let password = match std::env::var("IPERF3_PASSWORD") {
            Ok(password) => password,
            Err(_) => ask_password().ok_or_else(|| {
                UsageError(
                    "--username needs a password: set IPERF3_PASSWORD, or run on a terminal to be asked"
                        .into(),
                )
            })?,
        };
        let padding = if self.pkcs1_padding {
            Padding::Pkcs1
        } else {
            Padding::Oaep
        };
        Ok(Some(Login::new(
            user.clone(),
            password,
            key.clone(),
            padding,
        )))
    }
}

/// Asks for a password on the terminal, without echoing it; none when standard input
/// is not a terminal.
fn ask_password() -> Option<String> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    let stdin = std::io::stdin();
    let saved = tcgetattr(&stdin).ok()?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    tcsetattr(&stdin, OptionalActions::Now, &quiet).ok()?;
    eprint!("Password: ");
    let mut line = String::new();
    let read = stdin.read_line(&mut line);
    let _ = tcsetattr(&stdin, OptionalActions::Now, &saved);
    eprintln!();
    read.ok()?;
    Some(line.trim_end_matches(['\r', '\n']).to_string())
}

/// How the server checks iperf3 clients' credentials, from its options; none when it
/// does not.
fn authority(args: &ServeArgs) -> anyhow::Result<Option<Arc<Authority>>> {
    let (Some(key_path), Some(users_path)) =
        (&args.rsa_private_key_path, &args.authorized_users_path)
    else {
        return Ok(None);
    };
    if args.time_skew_threshold == 0 {
        return Err(UsageError("--time-skew-threshold must be above zero".into()).into());
    }
    let readable = |path: &std::path::Path, flag: &str| {
        std::fs::metadata(path)
            .map(|_| ())
            .with_context(|| format!("cannot read {} for {flag}", path.display()))
    };
    readable(key_path, "--rsa-private-key-path")?;
    readable(users_path, "--authorized-users-path")?;
    let key = login::read_private_key(key_path)
        .map_err(|e| UsageError(format!("{e} (for --rsa-private-key-path)")))?;
    let users = AuthorizedUsers::read(users_path)
        .map_err(|e| UsageError(format!("{e} (for --authorized-users-path)")))?;
    let padding = if args.pkcs1_padding {
        Padding::Pkcs1
    } else {
        Padding::Oaep
    };
    Ok(Some(Arc::new(Authority::new(
        key,
        padding,
        users,
        args.time_skew_threshold,
    ))))
}

/// Stores the run of each test served to an iperf3 client in the database `db` names,
/// opened for each run (so a server no iperf3 client tests makes no database), and
/// logs where it went.
fn recorder(
    db: &super::DbArg,
    log: crate::workload::net::Log,
) -> anyhow::Result<crate::workload::net::Recorder> {
    let at = Arc::new(crate::db::Address::of(db.path.as_deref())?);
    let store = Arc::new(std::sync::Mutex::new(None::<crate::db::Store>));
    Ok(Arc::new(move |local_ip| {
        // The test's own account of the machine, as every run keeps one: the interface
        // its control connection came in on carries its streams.
        let touched = crate::run::Touched {
            interfaces: local_ip
                .and_then(crate::platform::nics::nic_of)
                .map(|n| n.name)
                .into_iter()
                .collect(),
            ..Default::default()
        };
        let watch = crate::run::Watch::start(touched, crate::run::LOOK_EVERY, true);
        let (at, store, log) = (Arc::clone(&at), Arc::clone(&store), Arc::clone(&log));
        Box::new(move |mut doc| {
            doc.interference = watch.finish();
            // Concluded as the runner concludes every run: summaries, then verdicts.
            if let Err(e) = crate::run::conclude(&mut doc, None) {
                log(&format!("the iperf3 test's figures do not read back: {e}"));
            }
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
        })
    }))
}

/// What the server says when it starts: where it listens, its bounds, and who it lets in.
fn listening_line(address: SocketAddr, config: &ServeConfig) -> String {
    format!(
        "listening on {address}: {} test{} at a time, up to {} streams, {} s and {} each{}",
        config.max_tests,
        if config.max_tests == 1 { "" } else { "s" },
        config.limits.max_streams,
        config.limits.max_duration_ms / 1000,
        crate::vocab::units::format_size(config.limits.max_bytes),
        match (&config.key, &config.iperf3_authority) {
            (Some(_), Some(_)) => {
                ", key required (iperf3 clients log in with their credentials)".to_string()
            }
            (Some(_), None) => ", key required (iperf3 clients refused)".into(),
            (None, Some(authority)) => format!(
                ", iperf3 clients log in as one of {} user{}",
                authority.users(),
                if authority.users() == 1 { "" } else { "s" }
            ),
            (None, None) => String::new(),
        }
    )
}

/// Refuses a bound of zero: a server with one would refuse every test.
fn check_bounds(args: &ServeArgs) -> anyhow::Result<()> {
    for (flag, zero) in [
        ("--max-tests", args.max_tests == 0),
        ("--max-streams", args.max_streams == 0),
        (
            "--max-duration",
            args.max_duration < Duration::from_millis(1),
        ),
        ("--max-bytes", args.max_bytes == 0),
        ("--max-memory", args.max_memory == 0),
        (
            "--idle-timeout",
            args.idle_timeout < Duration::from_millis(1),
        ),
    ] {
        if zero {
            return Err(UsageError(format!("{flag} must be above zero")).into());
        }
    }
    Ok(())
}

/// The key of `--key-file`, if given; a key file unfit to use is a usage error.
fn server_key(args: &ServeArgs) -> anyhow::Result<Option<Key>> {
    Ok(match &args.key_file {
        Some(path) => Some(Key::read(path).map_err(|e| match e {
            KeyError::Short { .. } | KeyError::Exposed { .. } | KeyError::Weak { .. } => {
                anyhow::Error::new(UsageError(e.to_string()))
            }
            read => anyhow::Error::new(read),
        })?),
        None => None,
    })
}

/// The server's setup from its flags: address, bounds, key and iperf3 credentials.
fn serve_config(args: &ServeArgs) -> anyhow::Result<ServeConfig> {
    let key = server_key(args)?;
    Ok(ServeConfig {
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
            max_memory_bytes: args.max_memory,
        },
        max_tests: args.max_tests,
        key,
        idle_timeout: args.idle_timeout,
        once: args.once,
        iperf3_authority: authority(args)?,
    })
}

/// The server's log: each line to stderr after the time it was said.
fn server_log() -> crate::workload::net::Log {
    // On a terminal each line wraps at its width under its first word, as errors do.
    Arc::new(|line: &str| {
        crate::report::terminal::say(
            &format!(
                "{} ",
                humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            ),
            line,
        );
    })
}

/// The warning of a server with no key that listens beyond loopback.
fn no_key_warning(address: SocketAddr, no_store: bool) -> String {
    format!(
        "warning: no key: anyone who can reach {address} can run tests here{}; give \
         --key-file to serve only clients that hold the key, or --bind 127.0.0.1",
        if no_store {
            String::new()
        } else {
            " and have iperf3 tests stored in this server's results".into()
        }
    )
}

/// `ratelab net serve`: serves tests until stopped, or after one with `--once`.
fn run_server(args: ServeArgs) -> anyhow::Result<Exit> {
    check_bounds(&args)?;
    let config = serve_config(&args)?;
    let log = server_log();
    let mut server = Server::bind(config.clone(), Arc::clone(&log))
        .with_context(|| format!("cannot listen on {}", config.bind))?;
    if !args.no_store {
        server = server.recording(recorder(&args.db, Arc::clone(&log))?);
    }
    let address = server
        .local_addr()
        .context("cannot read the listening address")?;
    log(&listening_line(address, &config));
    if config.key.is_none() && !address.ip().is_loopback() {
        log(&no_key_warning(address, args.no_store));
    }
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
