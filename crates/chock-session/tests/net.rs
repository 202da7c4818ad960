//! The confined call and the network: a call gets the egress proxy only when the table lets commands
//! connect somewhere, and then a command reaches an allowed loopback host on the host through the
//! broker, and fails to reach a refused host or anything directly.

mod support;

use std::path::Path;

use chock_sandbox::NetworkPlan;
use std::sync::Arc;

use chock_decide::{Answer, AnswerFuture, Answerer, ApprovalBroker, Question, Role};
use chock_protocol::EventData;
use chock_session::{CallOptions, CallOutcome, NoApprover, PROXY_PORT, Session, SessionOptions};

/// A tiny HTTP server on the host's loopback answering every request with `body`.
fn http_server(body: &'static str) -> u16 {
    chock_test_support::model::page_server(None, body)
}

fn session(project: &Path, sessions: &Path, chock_toml: &str) -> Session {
    std::fs::write(project.join("chock.toml"), chock_toml).expect("write chock.toml");
    let options = SessionOptions {
        sessions_root: Some(sessions.to_path_buf()),
        ..SessionOptions::default()
    };
    Session::open(project, options).expect("open session")
}

#[test]
fn a_call_gets_the_proxy_only_when_the_table_allows_a_connection() {
    let (project, sessions) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let argv = vec!["true".to_owned()];

    let closed = session(project.path(), sessions.path(), "");
    let plan = closed.plan_for(&argv, &CallOptions::default());
    assert_eq!(plan.network, NetworkPlan::None);
    assert_eq!(plan.env_var("HTTPS_PROXY"), None);

    let rule = "[[rule]]\naction = \"net.connect.org.example.443\"\ndecision = \"allow\"\n";
    let open = session(project.path(), sessions.path(), rule);
    let plan = open.plan_for(&argv, &CallOptions::default());
    assert_eq!(plan.network, NetworkPlan::Proxy { port: PROXY_PORT });
    let url = format!("http://127.0.0.1:{PROXY_PORT}");
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        assert_eq!(plan.env_var(name), Some(url.as_str()), "{name}");
    }
}

#[test]
fn a_command_reaches_an_allowed_host_only_through_the_broker() {
    if !chock_test_support::installed("/usr/bin/curl") {
        return;
    }
    let allowed = http_server("allowed body");
    let refused = http_server("refused body");
    let (project, sessions) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let rule =
        format!("[[rule]]\naction = \"net.connect.1.0.0.127.{allowed}\"\ndecision = \"allow\"\n");
    let session = session(project.path(), sessions.path(), &rule);
    let script = format!(
        "curl -sS -f --max-time 10 http://127.0.0.1:{allowed}/ ; echo \" plain=$?\"; \
         curl -sS -f --max-time 10 -p http://127.0.0.1:{allowed}/ ; echo \" tunnel=$?\"; \
         curl -sS -f --max-time 10 http://127.0.0.1:{refused}/ ; echo \" refused=$?\"; \
         curl -sS -f --max-time 10 --noproxy '*' http://127.0.0.1:{allowed}/ ; echo \" direct=$?\""
    );
    let argv = vec!["sh".to_owned(), "-c".to_owned(), script];
    let result = support::confined_call(&session, &argv, &CallOptions::default(), &NoApprover)
        .expect("call");
    let CallOutcome::Ran { stdout, stderr, .. } = &result.outcome else {
        panic!("the call did not run: {:?}", result.outcome);
    };
    let (stdout, stderr) = (
        String::from_utf8_lossy(stdout),
        String::from_utf8_lossy(stderr),
    );
    assert!(
        stdout.contains("allowed body plain=0"),
        "plain HTTP:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("allowed body tunnel=0"),
        "CONNECT:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(" refused=22") && !stdout.contains("refused body"),
        "refused:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains(" direct=7"), "direct:\n{stdout}\n{stderr}");

    let events = chock_log::read_events(session.log().dir()).expect("events");
    let net: Vec<_> = events
        .iter()
        .filter(|e| e.kind.as_str().starts_with("net."))
        .collect();
    assert!(
        net.iter()
            .all(|e| e.call_id.as_deref() == Some(result.call_id.as_str()))
    );
    let refusals = net
        .iter()
        .filter(|e| e.data["decision"] == "refuse")
        .count();
    let closes = net.iter().filter(|e| e.data["phase"] == "close").count();
    assert_eq!((refusals, closes), (1, 2));
    // The proxy's events sit between the call's decision and its result.
    let position = |kind: &str| {
        events
            .iter()
            .position(|e| e.kind.as_str() == kind)
            .expect(kind)
    };
    let first_net = events
        .iter()
        .position(|e| e.kind.as_str().starts_with("net."))
        .expect("net");
    assert!(position("decision") < first_net && first_net < position("command.result"));
}

#[test]
fn a_ratchet_narrowed_during_the_session_refuses_the_commands_connections() {
    if !chock_test_support::installed("/usr/bin/curl") {
        return;
    }
    let allowed = http_server("allowed body");
    let (project, sessions) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let rule =
        format!("[[rule]]\naction = \"net.connect.1.0.0.127.{allowed}\"\ndecision = \"allow\"\n");
    let session = session(project.path(), sessions.path(), &rule);
    session
        .shared_policy()
        .write()
        .expect("policy lock")
        .restrict("net.connect.*", chock_policy::Decision::Deny)
        .expect("narrow");
    let script =
        format!("curl -sS -f --max-time 10 http://127.0.0.1:{allowed}/ ; echo \" plain=$?\"");
    let argv = vec!["sh".to_owned(), "-c".to_owned(), script];
    let result = support::confined_call(&session, &argv, &CallOptions::default(), &NoApprover)
        .expect("call");
    let CallOutcome::Ran { stdout, .. } = &result.outcome else {
        panic!("the call did not run: {:?}", result.outcome);
    };
    let stdout = String::from_utf8_lossy(stdout);
    assert!(
        stdout.contains(" plain=22") && !stdout.contains("allowed body"),
        "{stdout}"
    );
}

/// A person's (or a reviewer's) answer, faked: always yes or always no.
#[derive(Debug)]
struct FakeAnswerer {
    role: Role,
    yes: bool,
}

impl Answerer for FakeAnswerer {
    fn name(&self) -> String {
        "the test's answerer".into()
    }
    fn role(&self) -> Role {
        self.role
    }
    fn answer<'a>(&'a self, _q: &'a Question) -> AnswerFuture<'a> {
        let answer = if self.yes {
            Answer::AllowOnce {
                reasons: String::new(),
            }
        } else {
            Answer::Deny {
                reasons: "no".into(),
            }
        };
        Box::pin(async move { Some(answer) })
    }
}

/// Runs one curl to `127.0.0.1:port` under a table whose only connect row asks about exactly that
/// host, with `answerer` (if any) to ask. Returns the call's stdout and the session's log kinds with
/// their data.
fn curl_under_ask(
    answerer: Option<bool>,
) -> (String, Vec<(String, serde_json::Value)>, NetworkPlan) {
    curl_asked_under(answerer, |port| {
        (
            format!("[[rule]]\naction = \"net.connect.1.0.0.127.{port}\"\ndecision = \"ask\"\n"),
            None,
        )
    })
}

/// As [`curl_under_ask`], under the table `rows(port)` gives, with its ratchet row (if any) added
/// to the session's policy before the call, as the agent's `restrict_self` would.
fn curl_asked_under(
    answerer: Option<bool>,
    rows: impl Fn(u16) -> (String, Option<(String, chock_policy::Decision)>),
) -> (String, Vec<(String, serde_json::Value)>, NetworkPlan) {
    let port = http_server("asked body");
    let (project, sessions) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let (rule, ratchet) = rows(port);
    let session = session(project.path(), sessions.path(), &rule);
    if let Some((pattern, decision)) = ratchet {
        session
            .shared_policy()
            .write()
            .expect("policy lock")
            .restrict(&pattern, decision)
            .expect("a legal narrowing");
    }
    let options = CallOptions::default();
    let mut broker = ApprovalBroker::new();
    for role in [Role::Human, Role::Reviewer] {
        if let Some(yes) = answerer {
            broker = broker.with(Arc::new(FakeAnswerer { role, yes }));
        }
    }
    let options = CallOptions {
        ask_connections: answerer.is_some(),
        ..options
    };
    let script = format!("curl -sS -f --max-time 10 http://127.0.0.1:{port}/ ; echo \" plain=$?\"");
    let argv = vec!["sh".to_owned(), "-c".to_owned(), script];
    let network = session.plan_for(&argv, &options).network;
    let result =
        support::confined_call(&session, &argv, &options, &session.pipeline(broker)).expect("call");
    let CallOutcome::Ran { stdout, .. } = &result.outcome else {
        panic!("the call did not run: {:?}", result.outcome);
    };
    let events = chock_log::read_events(session.log().dir()).expect("events");
    let events = events
        .iter()
        .map(|e| {
            // Every writer writes exactly its type.
            EventData::parse_exact(e.kind, &e.data).expect("a typed event");
            (e.kind.as_str().to_string(), e.data.clone())
        })
        .collect();
    (
        String::from_utf8_lossy(stdout).into_owned(),
        events,
        network,
    )
}

fn position(
    events: &[(String, serde_json::Value)],
    what: impl Fn(&str, &serde_json::Value) -> bool,
) -> Option<usize> {
    events.iter().position(|(kind, data)| what(kind, data))
}

#[test]
fn an_asked_connection_waits_for_the_answer_and_goes_through_on_yes() {
    if !chock_test_support::installed("/usr/bin/curl") {
        return;
    }
    let (stdout, events, network) = curl_under_ask(Some(true));
    assert_eq!(network, NetworkPlan::Proxy { port: PROXY_PORT });
    assert!(
        stdout.contains("asked body plain=0"),
        "{stdout}\n{events:?}"
    );
    let ask = position(&events, |k, _| k == "approval.ask").expect("approval.ask");
    let answer = position(&events, |k, d| {
        k == "approval.answer" && d["answer"] == "allow_once" && d["question"] == "q-1"
    })
    .expect("approval.answer");
    let decided = position(&events, |k, d| {
        k == "decision" && d["action"] == events[ask].1["action"] && d["allowed"] == true
    })
    .expect("decision");
    let allowed = position(&events, |k, d| {
        k == "net.decision" && d["decision"] == "allow"
    })
    .expect("net.decision allow");
    let open = position(&events, |k, d| k == "net.connect" && d["phase"] == "open")
        .expect("net.connect open");
    assert!(
        ask < answer && answer < decided && decided < allowed && allowed < open,
        "{events:?}"
    );
}

#[test]
fn an_asked_connection_refused_by_the_answer_is_a_403_logged_before_anything_opens() {
    if !chock_test_support::installed("/usr/bin/curl") {
        return;
    }
    let (stdout, events, _) = curl_under_ask(Some(false));
    assert!(
        stdout.contains(" plain=22") && !stdout.contains("asked body"),
        "{stdout}"
    );
    let ask = position(&events, |k, _| k == "approval.ask").expect("approval.ask");
    let answer = position(&events, |k, d| {
        k == "approval.answer" && d["answer"] == "deny"
    })
    .expect("approval.answer");
    let decided =
        position(&events, |k, d| k == "decision" && d["allowed"] == false).expect("decision");
    let refused = position(&events, |k, d| {
        k == "net.decision" && d["decision"] == "refuse"
    })
    .expect("net.decision refuse");
    assert!(
        ask < answer && answer < decided && decided < refused,
        "{events:?}"
    );
    assert_eq!(
        position(&events, |k, d| k == "net.connect" && d["phase"] == "open"),
        None,
        "{events:?}"
    );
}

#[test]
fn an_asked_connection_with_nobody_to_ask_gets_no_proxy_and_is_refused() {
    if !chock_test_support::installed("/usr/bin/curl") {
        return;
    }
    let (stdout, events, network) = curl_under_ask(None);
    assert_eq!(network, NetworkPlan::None);
    assert!(
        !stdout.contains("asked body") && !stdout.contains(" plain=0"),
        "{stdout}"
    );
    assert_eq!(position(&events, |k, _| k == "approval.ask"), None);
    assert_eq!(position(&events, |k, _| k.starts_with("net.")), None);
}

/// Hole 3 of issue 9: under a wildcard `ask`, the agent narrows its own host to an exact
/// `agent_review` (its ratchet) and the act is approved. The approval reaches public addresses only,
/// so the loopback server is refused at the address check, not reached.
#[test]
fn an_approval_through_the_agents_own_exact_ratchet_row_does_not_reach_loopback() {
    if !chock_test_support::installed("/usr/bin/curl") {
        return;
    }
    let (stdout, events, network) = curl_asked_under(Some(true), |port| {
        (
            "[[rule]]\naction = \"net.connect.*\"\ndecision = \"ask\"\n".to_owned(),
            Some((
                format!("net.connect.1.0.0.127.{port}"),
                chock_policy::Decision::AgentReview,
            )),
        )
    });
    assert_eq!(network, NetworkPlan::Proxy { port: PROXY_PORT });
    assert!(
        !stdout.contains("asked body") && !stdout.contains(" plain=0"),
        "{stdout}\n{events:?}"
    );
    let asked = position(&events, |k, d| {
        k == "approval.ask" && d["decision"] == "agent_review"
    })
    .expect("the ratchet row put it to the asker");
    let gate = position(&events, |k, d| {
        k == "net.decision" && d["stage"] == "gate" && d["decision"] == "allow"
    })
    .expect("the approval allowed the act");
    let refused = position(&events, |k, d| {
        k == "net.decision" && d["stage"] == "address" && d["decision"] == "refuse"
    })
    .expect("the loopback address was refused");
    assert!(asked < gate && gate < refused, "{events:?}");
    assert_eq!(
        position(&events, |k, d| k == "net.connect" && d["phase"] == "open"),
        None,
        "{events:?}"
    );
}
