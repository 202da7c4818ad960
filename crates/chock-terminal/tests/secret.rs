//! A secret's answer (git's password) is read from a real pseudo-terminal with its echo off, and the
//! echo is back once the line is read; a secret is not asked of a line source that is no terminal.

use std::io::{BufReader, Write};
use std::time::{Duration, Instant};

use chock_decide::broker::{Answer, Question, QuestionKind};
use chock_terminal::TerminalAnswerer;
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{LocalModes, tcgetattr};

fn password_question() -> Question {
    Question {
        id: "q-1".into(),
        kind: QuestionKind::Question,
        call_id: Some("c1".into()),
        action: None,
        decided_by: None,
        text: "Password for 'https://alice@example.org': ".into(),
        context: Vec::new(),
        reviewer: None,
        secret: true,
    }
}

fn echoes(tty: &std::fs::File) -> bool {
    tcgetattr(tty)
        .unwrap()
        .local_modes
        .contains(LocalModes::ECHO)
}

#[test]
fn a_secret_is_read_with_the_terminal_s_echo_off_and_the_echo_is_restored() {
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .unwrap();
    assert!(echoes(&tty), "a fresh terminal echoes");
    let answerer = TerminalAnswerer::new(
        Box::new(BufReader::new(tty.try_clone().unwrap())),
        Box::new(std::io::sink()),
    )
    .reading_terminal(tty.try_clone().unwrap());
    let asking = std::thread::spawn(move || answerer.ask_now(&password_question()));
    let until = Instant::now() + Duration::from_secs(5);
    while echoes(&tty) {
        assert!(
            Instant::now() < until,
            "the terminal still echoes while a secret is asked"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The terminal's other end stays open until the answer is read (closing it hangs the line up).
    let mut master = std::fs::File::from(master);
    master.write_all(b"hunter2\n").unwrap();
    let answer = asking.join().unwrap();
    assert_eq!(
        answer,
        Some(Answer::Reply {
            text: "hunter2".into()
        })
    );
    assert!(echoes(&tty), "the echo was not restored");
    drop(master);
}

#[test]
fn a_secret_is_not_asked_of_a_line_source_that_is_no_terminal() {
    let answerer = TerminalAnswerer::new(
        Box::new(BufReader::new(&b"hunter2\n"[..])),
        Box::new(std::io::sink()),
    );
    assert_eq!(answerer.ask_now(&password_question()), None);
}
