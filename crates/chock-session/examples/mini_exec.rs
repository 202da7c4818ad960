use chock_session::*;
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let project = std::env::current_dir().unwrap();
    let header = chock_log::SessionHeader {
        command: Some("exec".into()),
        ..Default::default()
    };
    let session = Session::open(
        &project,
        SessionOptions {
            header,
            scratch: true,
            calls_in_turn: true,
            ..SessionOptions::default()
        },
    )
    .unwrap();
    let opts = CallOptions {
        output: Output::Stream,
        capture_limit: 64 << 10,
        ..CallOptions::default()
    };
    let pipeline = session.pipeline(chock_decide::ApprovalBroker::new());
    let r = session.confined_call(&args, &opts, &pipeline);
    session.close(false).unwrap();
    drop(r);
}
