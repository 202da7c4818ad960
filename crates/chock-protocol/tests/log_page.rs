//! docs/log.md's event reference is the one generated from the payload types: a type that
//! changed without the page fails here. `CHOCK_BLESS=1 cargo test -p chock-protocol --test
//! log_page` rewrites the page.

use chock_protocol::doc::{BEGIN_MARK, END_MARK, log_reference};

#[test]
fn the_log_page_event_reference_is_generated_from_the_types() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/log.md");
    let page = std::fs::read_to_string(path).expect("docs/log.md");
    let begin = page
        .find(BEGIN_MARK)
        .expect("docs/log.md has the BEGIN marker");
    let end = page.find(END_MARK).expect("docs/log.md has the END marker");
    let start = begin + BEGIN_MARK.len() + 1;
    let written = &page[start..end];
    let generated = log_reference();
    if written != generated {
        if std::env::var_os("CHOCK_BLESS").is_some() {
            let fresh = format!("{}{generated}{}", &page[..start], &page[end..]);
            std::fs::write(path, fresh).expect("write docs/log.md");
            return;
        }
        panic!(
            "docs/log.md's event reference differs from the payload types in crates/chock-protocol; \
             run `CHOCK_BLESS=1 cargo test -p chock-protocol --test log_page` and review the diff"
        );
    }
}
