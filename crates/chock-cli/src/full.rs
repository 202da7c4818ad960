//! `chock-full`: every command of the command line (lib.rs says why `chock` is a second binary).

/// This binary's role and build id, in the ELF section `chock` reads (chock_cli::build_id).
// SAFETY: a section of its own, named by no other object: the static is placed there and
// nowhere else, and nothing writes it.
#[unsafe(link_section = "chock_build_id")]
#[used]
static BUILD_ID: [u8; 37] = chock_cli::build_id::FULL;

fn main() -> std::process::ExitCode {
    // Referenced, so no linker drops its section.
    std::hint::black_box(&BUILD_ID);
    chock_cli::full_main()
}
