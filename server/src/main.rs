//! The `shard` binary: parses the command line and hands over to the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = shard_server::cli::Cli::parse();
    match shard_server::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("shard: {error:#}");
            ExitCode::FAILURE
        }
    }
}
