//! The `sluice` binary: every process kind and every client verb.

fn main() -> std::process::ExitCode {
    sluice::allocator::tune();
    sluice::cli::commands::main()
}
