//! `chock askpass` as a program of its own, for `GIT_ASKPASS` (git runs it with the prompt as its one
//! argument and reads one line): see `chock_session::channel::askpass_main`.
#![forbid(unsafe_code)]

fn main() {
    chock_session::channel::askpass_main()
}
