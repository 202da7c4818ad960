//! The detach key (`Ctrl-\`, `/detach`) on a session of this process's: whether there is one to
//! hand to the daemon, and what the status line says meanwhile. Whether it is let go at once
//! (idle) or at the task's next turn boundary (working) is the runtime's to decide, when the
//! daemon asks this process to let go; the interface only says which it expects.

use super::{App, Kind, Phase};

impl App {
    /// The detach key on the session this process runs: the session's id when it is to be handed
    /// to the daemon (working or idle alike), `None` when there is none to hand over (no session
    /// yet, or it has ended). The status line says which.
    pub fn detach_asked(&mut self) -> Option<String> {
        let Some(id) = self.session.as_ref().map(|s| s.0.clone()) else {
            self.status = Some((
                Kind::Error,
                "no session to hand over: give a task first".into(),
            ));
            return None;
        };
        let status = match self.phase {
            Phase::Working => "handing the session to the daemon (at the end of this turn)",
            Phase::Idle => "handing the idle session to the daemon now",
            Phase::NoSession | Phase::Ended => {
                self.status = Some((
                    Kind::Error,
                    format!("session {id} has ended, so there is nothing to hand over"),
                ));
                return None;
            }
        };
        self.status = Some((Kind::Note, status.into()));
        Some(id)
    }
}
