//! Questions asked and not answered, read from the log file of a session that does not run in
//! this daemon: an `approval.ask` naming a question that no `approval.answer` names. The log is
//! the source, so a client that attaches late, or a daemon that restarted, sees the same list;
//! nothing here answers anything. (A session running here is looked at through its handle.)

use std::path::Path;

use chock_log::{read_events, view_of};
use chock_protocol::rpc::Approval;

/// The open questions of the session `session` in `dir`, in log order (the session's view
/// keeps them). `live` says whether an answer is taken now (the session runs in this daemon); a
/// reviewer's question never is.
pub(crate) fn pending_in(session: &str, dir: &Path, live: bool) -> Vec<Approval> {
    let Ok(events) = read_events(dir) else {
        return Vec::new();
    };
    view_of(&events)
        .questions
        .into_iter()
        .map(|open| crate::session::approval(session, open, live))
        .collect()
}
