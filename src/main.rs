//! The ratelab binary: parse the command line, run the library, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = ratelab::cli::Cli::parse();
    match ratelab::run(cli) {
        Ok(code) => code.into(),
        Err(err) => {
            eprint!(
                "{}",
                ratelab::report::terminal::for_stderr("ratelab: ", &format!("{err:#}"))
            );
            ratelab::cli::exit_code::code_for(&err).into()
        }
    }
}
