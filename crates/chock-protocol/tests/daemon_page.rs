//! docs/daemon.md's method reference is the one generated from the method types: a type that
//! changed without the page fails here. `CHOCK_BLESS=1 cargo test -p chock-protocol --test
//! daemon_page` rewrites the page.

use chock_protocol::rpc::doc::{BEGIN_MARK, END_MARK, method_reference};

#[test]
fn the_daemon_page_method_reference_is_generated_from_the_types() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/daemon.md");
    let page = std::fs::read_to_string(path).expect("docs/daemon.md");
    let begin = page
        .find(BEGIN_MARK)
        .expect("docs/daemon.md has the BEGIN marker");
    let end = page
        .find(END_MARK)
        .expect("docs/daemon.md has the END marker");
    let start = begin + BEGIN_MARK.len() + 1;
    let written = &page[start..end];
    let generated = method_reference();
    if written != generated {
        if std::env::var_os("CHOCK_BLESS").is_some() {
            let fresh = format!("{}{generated}{}", &page[..start], &page[end..]);
            std::fs::write(path, fresh).expect("write docs/daemon.md");
            return;
        }
        panic!(
            "docs/daemon.md's method reference differs from the method types in crates/chock-protocol; \
             run `CHOCK_BLESS=1 cargo test -p chock-protocol --test daemon_page` and review the diff"
        );
    }
}
