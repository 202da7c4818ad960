//! What the suites share: the session's one confined call (`Session::confined_call_async`), made
//! from a test that is not itself async.

use std::sync::LazyLock;

use chock_session::{CallOptions, CallResult, Deciding, Session, SessionError};

/// One runtime for the whole test binary, as `chock exec` makes one for its command; each test's
/// thread blocks on it, outside it.
static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
});

/// `session`'s confined call of `argv`, awaited on the binary's runtime.
pub fn confined_call(
    session: &Session,
    argv: &[String],
    opts: &CallOptions,
    deciding: &dyn Deciding,
) -> Result<CallResult, SessionError> {
    RUNTIME.block_on(session.confined_call_async(argv, opts, deciding))
}
