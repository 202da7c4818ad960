//! `chock-full`: every command of the command line (lib.rs says why `chock` is a second binary).

fn main() -> std::process::ExitCode {
    chock_cli::full_main()
}
