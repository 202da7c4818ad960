//! Review through the daemon: the diff with its file and hunk ids and the digest of exactly the
//! selection shown; one hunk applied with the digest pinned, decided by `workspace.apply` (the
//! table asks; a client answers) and logged before the write; a stale digest refused; the undo
//! (of a session that has ended); the log verified.

mod support;

use chock_client::{ClientError, DaemonClient};
use chock_protocol::log::AnswerKind;
use chock_protocol::rpc::{
    AnswerParams, Applied, ApplyParams, Call, DiffParams, ErrorKind, Notice, RequestId, ReviewDiff,
    SealState, Selection, ServerFrame, SessionParams, SessionState, UndoParams, Verified,
};
use support::*;

fn readme(lines: &[(usize, &str)]) -> String {
    (1..=20)
        .map(|n| {
            lines
                .iter()
                .find(|(at, _)| *at == n)
                .map_or(format!("line {n}\n"), |(_, text)| format!("{text}\n"))
        })
        .collect()
}

/// Sends `call`, answers the `workspace.apply` question it raises with `answer`, and returns the
/// call's outcome.
async fn asked_act<T: serde::de::DeserializeOwned>(
    client: &mut DaemonClient,
    session: &str,
    call: &Call,
    answer: AnswerKind,
) -> Result<T, ClientError> {
    let id: RequestId = client.send(call).await?;
    let mut answered = false;
    loop {
        match client.frame().await? {
            ServerFrame::Response(r) if r.id.as_ref() == Some(&id) => {
                return Ok(r.into_result::<T>()?);
            }
            ServerFrame::Notification(n) => {
                if let Ok(Notice::ApprovalAsked(q)) = n.notice()
                    && q.session == session
                    && !answered
                {
                    assert_eq!(q.action.as_deref(), Some("workspace.apply"));
                    assert!(q.what.contains("write 1 path(s) into"), "{}", q.what);
                    answered = true;
                    client
                        .send(&Call::ApprovalsAnswer(AnswerParams {
                            session: session.into(),
                            question: q.question,
                            answer,
                            reasons: None,
                            reply: None,
                        }))
                        .await?;
                }
            }
            ServerFrame::Response(_) => {}
        }
    }
}

#[test]
fn one_hunk_is_applied_with_its_digest_pinned_decided_and_logged_and_undone_after_the_end() {
    let world = World::new();
    std::fs::write(world.project.join("README.md"), readme(&[])).unwrap();
    world.policy("");
    let edited = readme(&[(2, "line two, changed"), (18, "line eighteen, changed")]);
    let provider = world.script(
        "edit.toml",
        &format!(
            "[[turn]]\n[[turn.call]]\ntool = \"write_file\"\ninput = {{ path = \"README.md\", content = {} }}\n\n[[turn]]\ntext = \"done\"\n",
            toml_string(&edited)
        ),
    );
    runtime().block_on(async {
        let server = world.serve().await;
        let mut client = world.client(&server).await;
        let started = start(&mut client, &world, &provider, "edit the readme").await;
        let id = started.session.clone();
        until(&mut client, |n| match n {
            Notice::SessionState(s) if s.session == id && s.state == SessionState::Idle => Some(()),
            _ => None,
        })
        .await;
        let whole: ReviewDiff = client
            .call(&Call::ReviewDiff(DiffParams {
                session: id.clone(),
                selection: Selection::default(),
            }))
            .await
            .unwrap();
        let readme_change = whole.files.iter().find(|f| f.path == "README.md").unwrap();
        assert_eq!(readme_change.hunks.len(), 2, "{whole:#?}");
        assert!(whole.patch.contains("+line two, changed"));
        let first = readme_change.hunks[0].clone();
        assert!(first.lines.iter().any(|l| l == "+line two, changed"));
        let only_first = Selection {
            files: Vec::new(),
            hunks: vec![first.id.clone()],
        };
        let shown: ReviewDiff = client
            .call(&Call::ReviewDiff(DiffParams {
                session: id.clone(),
                selection: only_first.clone(),
            }))
            .await
            .unwrap();
        assert_ne!(shown.digest, whole.digest, "the digest is the selection's");
        // A digest that is not the selection's is refused before anything is asked or written.
        let stale = client
            .call::<Applied>(&Call::ReviewApply(ApplyParams {
                session: id.clone(),
                digest: whole.digest.clone(),
                selection: only_first.clone(),
            }))
            .await
            .unwrap_err();
        match stale {
            ClientError::Rpc(e) => assert_eq!(e.kind(), ErrorKind::DigestMismatch, "{e}"),
            other => panic!("{other}"),
        }
        assert_eq!(
            std::fs::read_to_string(world.project.join("README.md")).unwrap(),
            readme(&[])
        );
        // A person saying no: refused, nothing written.
        let no = asked_act::<Applied>(
            &mut client,
            &id,
            &Call::ReviewApply(ApplyParams {
                session: id.clone(),
                digest: shown.digest.clone(),
                selection: only_first.clone(),
            }),
            AnswerKind::Deny,
        )
        .await
        .unwrap_err();
        match no {
            ClientError::Rpc(e) => assert_eq!(e.kind(), ErrorKind::Refused, "{e}"),
            other => panic!("{other}"),
        }
        assert_eq!(
            std::fs::read_to_string(world.project.join("README.md")).unwrap(),
            readme(&[])
        );
        let applied: Applied = asked_act(
            &mut client,
            &id,
            &Call::ReviewApply(ApplyParams {
                session: id.clone(),
                digest: shown.digest.clone(),
                selection: only_first,
            }),
            AnswerKind::AllowOnce,
        )
        .await
        .unwrap();
        assert_eq!(applied.paths, ["README.md"]);
        assert_eq!(applied.digest.as_deref(), Some(shown.digest.as_str()));
        assert_eq!(
            std::fs::read_to_string(world.project.join("README.md")).unwrap(),
            readme(&[(2, "line two, changed")]),
            "exactly the selected hunk landed"
        );
        let log = world.log_lines(&id);
        let at = |kind: &str| log.iter().rposition(|l| l["kind"] == kind).unwrap();
        assert!(at("approval.answer") < at("decision") && at("decision") < at("workspace.apply"));
        let record = &log[at("workspace.apply")];
        assert_eq!(record["data"]["digest"], shown.digest.as_str());
        assert_eq!(record["data"]["hunks"][0], first.id.as_str());
        // The session ends; its apply is still undone through the daemon, asked and logged.
        let _: chock_protocol::rpc::Done = client
            .call(&Call::SessionsEnd(SessionParams {
                session: id.clone(),
            }))
            .await
            .unwrap();
        let undone: Applied = asked_act(
            &mut client,
            &id,
            &Call::ReviewUndo(UndoParams {
                apply_id: applied.apply_id.clone().unwrap(),
            }),
            AnswerKind::AllowOnce,
        )
        .await
        .unwrap();
        assert_eq!(undone.paths, ["README.md"]);
        assert_eq!(
            std::fs::read_to_string(world.project.join("README.md")).unwrap(),
            readme(&[])
        );
        let log = world.log_lines(&id);
        let last = log
            .iter()
            .rev()
            .find(|l| l["kind"] == "workspace.apply")
            .unwrap();
        assert_eq!(last["data"]["kind"], "undo");
        let verified: Verified = client
            .call(&Call::LogVerify(SessionParams {
                session: id.clone(),
            }))
            .await
            .unwrap();
        assert!(verified.intact, "{verified:?}");
        assert_eq!(verified.seal, SealState::Unsealed);
        assert_eq!(verified.lines, log.len());
        server.stop().await;
    });
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}
