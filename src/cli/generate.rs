//! `ratelab completions SHELL` and `ratelab man`, generated from the clap definitions.

use clap::{Args, CommandFactory};

use crate::exit::Exit;

/// Options of `ratelab completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Prints a completion script on stdout.
pub fn completions(args: CompletionsArgs) -> anyhow::Result<Exit> {
    let mut command = super::Cli::command();
    let mut bytes = Vec::new();
    clap_complete::generate(args.shell, &mut command, "ratelab", &mut bytes);
    crate::report::emit(&bytes, None)?;
    Ok(Exit::Success)
}

/// Options of `ratelab man`: none.
#[derive(Debug, Args)]
pub struct ManArgs {}

/// Prints the man page on stdout.
pub fn man(_args: ManArgs) -> anyhow::Result<Exit> {
    let mut bytes = Vec::new();
    clap_mangen::Man::new(super::Cli::command()).render(&mut bytes)?;
    crate::report::emit(&bytes, None)?;
    Ok(Exit::Success)
}
