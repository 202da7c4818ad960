//! `chock-keeper`: a session's keeper (docs/handover.md), started by the session's owner with its
//! listening socket as descriptor 3. It confines itself before it reads anything, then keeps the
//! session's background calls until the session ends or nobody owns it.

fn main() {
    // SAFETY: nothing has opened a descriptor yet; 3 is the listener the owner left there.
    let listener = unsafe { chock_sandbox::keeper::inherited_listener() };
    if let Err(e) = chock_sandbox::keeper::confine_self() {
        eprintln!("chock-keeper: cannot confine itself: {e}");
        std::process::exit(1);
    }
    if let Err(e) = chock_sandbox::keeper::serve(listener) {
        eprintln!("chock-keeper: {e}");
        std::process::exit(1);
    }
}
