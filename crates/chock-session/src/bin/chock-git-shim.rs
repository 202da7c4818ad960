//! The git shim, as this crate's tests bind it over a call's gits (`chock` installs the same
//! program as `chock-git`): see `chock_session::git_shim`.
#![forbid(unsafe_code)]

fn main() {
    chock_session::git_shim::main()
}
