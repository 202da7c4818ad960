//! `chock-git`: the git shim a call finds in place of every git of its tree (docs/git.md). It asks
//! the host over the call's channel and runs the real git only when the host allows the act.
#![forbid(unsafe_code)]

fn main() {
    chock_session::git_shim::main()
}
