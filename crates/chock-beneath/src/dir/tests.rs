//! Swapped components, planted links and hostile files, each met by the walk.

use std::os::unix::fs::symlink;

use super::*;

fn layer_and_secret() -> (tempfile::TempDir, tempfile::TempDir) {
    let layer = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
    (layer, outside)
}

/// A directory component that is a symlink (what a background command swaps in between a look
/// and an act) stops every walk: nothing outside is opened, listed, read or written.
#[test]
fn a_symlinked_component_is_never_followed() {
    let (layer, outside) = layer_and_secret();
    symlink(outside.path(), layer.path().join("d")).unwrap();
    let root = Dir::open_root(layer.path()).unwrap();
    for create in [false, true] {
        assert!(matches!(
            root.open_dir(Path::new("d"), create),
            Err(WalkError::NotADirectory { .. })
        ));
        assert!(matches!(
            root.parent(Path::new("d/secret"), create),
            Err(WalkError::NotADirectory { .. })
        ));
    }
    assert!(matches!(
        root.child(OsStr::new("d")),
        Err(Errno::NOTDIR | Errno::LOOP)
    ));
    assert!(!outside.path().join("new").exists());
}

#[test]
fn a_symlink_as_the_last_name_is_never_read_through() {
    let (layer, outside) = layer_and_secret();
    symlink(outside.path().join("secret"), layer.path().join("f")).unwrap();
    let root = Dir::open_root(layer.path()).unwrap();
    assert!(root.read_file(OsStr::new("f"), 1 << 20).is_err());
    assert_eq!(
        root.meta(OsStr::new("f")).unwrap().unwrap().kind,
        FileType::Symlink
    );
    assert_eq!(
        root.read_link(OsStr::new("f")).unwrap(),
        outside.path().join("secret").as_os_str().as_encoded_bytes()
    );
    assert!(!root.xattr_is(Some(OsStr::new("f")), "user.x", None));
}

#[test]
fn walks_list_and_read_relative_to_the_descriptor() {
    let layer = tempfile::tempdir().unwrap();
    let root = Dir::open_root(layer.path()).unwrap();
    let d = root.open_dir(Path::new("a/b"), true).unwrap();
    d.write_replace(OsStr::new("z"), b"zz").unwrap();
    d.write_replace(OsStr::new("y"), b"y").unwrap();
    assert_eq!(
        d.names().unwrap(),
        vec![OsString::from("y"), OsString::from("z")]
    );
    let (bytes, meta) = d.read_file(OsStr::new("z"), 10).unwrap();
    assert_eq!(
        (bytes.as_slice(), meta.kind),
        (&b"zz"[..], FileType::RegularFile)
    );
    assert!(!d.is_empty().unwrap());
    assert!(
        root.open_dir(Path::new("a"), false)
            .unwrap()
            .child(OsStr::new("b"))
            .is_ok()
    );
    assert!(matches!(
        root.open_dir(Path::new("nope/x"), false),
        Err(WalkError::Missing { .. })
    ));
    assert!(matches!(
        root.open_dir(Path::new("../x"), false),
        Err(WalkError::NotPlain { .. })
    ));
    d.remove(OsStr::new("y")).unwrap();
    d.remove(OsStr::new("z")).unwrap();
    assert!(d.is_empty().unwrap());
}

/// A directory renamed away after it was opened is still the one read: the descriptor follows the
/// directory, not the name, so a symlink put at the old name leads nowhere.
#[test]
fn a_directory_swapped_after_it_was_opened_keeps_being_read() {
    let (layer, outside) = layer_and_secret();
    std::fs::create_dir(layer.path().join("d")).unwrap();
    std::fs::write(layer.path().join("d/secret"), "mine").unwrap();
    let root = Dir::open_root(layer.path()).unwrap();
    let d = root.child(OsStr::new("d")).unwrap();
    std::fs::rename(layer.path().join("d"), layer.path().join("d.moved")).unwrap();
    symlink(outside.path(), layer.path().join("d")).unwrap();
    assert_eq!(d.read_file(OsStr::new("secret"), 100).unwrap().0, b"mine");
}

#[test]
fn a_planted_temporary_is_not_written_through_and_a_final_symlink_is_replaced() {
    let (layer, outside) = layer_and_secret();
    let victim = outside.path().join("secret");
    let root = Dir::open_root(layer.path()).unwrap();
    let tmp = format!(".a.chock-tmp{}", std::process::id());
    symlink(&victim, layer.path().join(&tmp)).unwrap();
    assert!(root.write_replace(OsStr::new("a"), b"new").is_err());
    std::fs::remove_file(layer.path().join(&tmp)).unwrap();
    symlink(&victim, layer.path().join("a")).unwrap();
    root.write_replace(OsStr::new("a"), b"new").unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"s3cret");
    assert_eq!(
        root.meta(OsStr::new("a")).unwrap().unwrap().kind,
        FileType::RegularFile
    );
}

#[test]
fn a_sparse_file_and_a_fifo_are_refused_without_reading_or_blocking() {
    let layer = tempfile::tempdir().unwrap();
    std::fs::File::create(layer.path().join("big"))
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    rustix::fs::mknodat(
        CWD,
        layer.path().join("p"),
        FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let root = Dir::open_root(layer.path()).unwrap();
    let err = root.read_file(OsStr::new("big"), 1 << 20).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FileTooLarge, "{err}");
    let err = root.read_file(OsStr::new("p"), 1 << 20).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(!root.xattr_is(Some(OsStr::new("p")), "user.x", None));
}
