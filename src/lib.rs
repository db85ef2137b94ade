//! ratelab: a performance lab that answers which step limits the rate of the work
//! you wait for. The binary is a thin shell over [`run`].

#![warn(missing_docs)]

pub mod account;
pub mod analysis;
pub mod catch;
pub mod cli;
pub mod control;
pub mod db;
pub mod document;
pub mod error;
pub mod exit;
pub mod fleet;
pub mod platform;
pub mod report;
pub mod run;
pub mod sensors;
pub mod storage;
pub mod vocab;
pub mod workload;

pub use exit::Exit;

/// Runs one parsed command line and says how the process should exit.
pub fn run(cli: cli::Cli) -> anyhow::Result<Exit> {
    cli::dispatch(cli)
}
