//! `chock-keeper`: a session's keeper (docs/handover.md), started by the session's owner with its
//! listening socket as descriptor 3 and its standard streams on /dev/null. It confines itself
//! before it reads anything, then keeps the session's background calls until the session ends or
//! nobody owns it. It says nothing: a keeper that could not confine itself exits 1 before its
//! first answer (the owner then keeps the command itself), one stopped by an error exits 2.

fn main() {
    // SAFETY: nothing has opened a descriptor yet; 3 is the listener the owner left there.
    let listener = unsafe { chock_sandbox::keeper::inherited_listener() };
    if chock_sandbox::keeper::confine_self().is_err() {
        std::process::exit(1);
    }
    if chock_sandbox::keeper::serve(listener).is_err() {
        std::process::exit(2);
    }
}
