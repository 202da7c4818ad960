//! `chock`: runs `chock exec` itself, and hands every other command to `chock-full` (lib.rs).

fn main() -> std::process::ExitCode {
    chock_cli::front_main()
}
