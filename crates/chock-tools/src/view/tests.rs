//! The view's mapping, symlink resolution and overlay merge, on real directories.
use super::*;

fn direct() -> (tempfile::TempDir, WorkspaceView) {
    let dir = tempfile::tempdir().unwrap();
    let view = WorkspaceView::direct(Path::new("/home/u/proj"), dir.path());
    (dir, view)
}

#[test]
fn paths_map_relative_and_absolute_and_refuse_escapes() {
    let (_d, view) = direct();
    assert_eq!(
        view.relative("src/main.rs").unwrap(),
        PathBuf::from("src/main.rs")
    );
    assert_eq!(
        view.relative("/home/u/proj/src/../a.txt").unwrap(),
        PathBuf::from("a.txt")
    );
    assert_eq!(view.relative(".").unwrap(), PathBuf::new());
    for bad in ["../x", "/etc/passwd", "a/../../x", "/home/u/projx/a"] {
        assert!(
            matches!(view.relative(bad), Err(ViewError::Outside(_))),
            "{bad}"
        );
    }
}

#[test]
fn a_symlink_out_of_the_workspace_is_refused_and_one_inside_is_followed() {
    let (dir, view) = direct();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.txt"), "a").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("evil")).unwrap();
    std::os::unix::fs::symlink("../../..", dir.path().join("src/up")).unwrap();
    std::os::unix::fs::symlink("src/a.txt", dir.path().join("good")).unwrap();
    std::os::unix::fs::symlink("/home/u/proj/src", dir.path().join("abs")).unwrap();
    assert!(matches!(view.locate("evil"), Err(ViewError::Outside(_))));
    assert!(matches!(
        view.locate("src/up/etc/passwd"),
        Err(ViewError::Outside(_))
    ));
    assert_eq!(view.locate("good").unwrap(), PathBuf::from("src/a.txt"));
    assert_eq!(
        view.locate("abs/a.txt").unwrap(),
        PathBuf::from("src/a.txt")
    );
    std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
    assert!(matches!(view.locate("loop"), Err(ViewError::Loop(_))));
}

#[test]
fn an_overlay_reads_upper_first_and_writes_only_upper() {
    let lower = tempfile::tempdir().unwrap();
    let upper = tempfile::tempdir().unwrap();
    std::fs::create_dir(lower.path().join("src")).unwrap();
    std::fs::write(lower.path().join("src/a.txt"), "lower a").unwrap();
    std::fs::write(lower.path().join("src/b.txt"), "lower b").unwrap();
    std::fs::create_dir(upper.path().join("src")).unwrap();
    std::fs::write(upper.path().join("src/b.txt"), "upper b").unwrap();
    let view = WorkspaceView::overlay(Path::new("/p"), lower.path(), upper.path());
    assert_eq!(
        view.read("src/a.txt", Path::new("src/a.txt")).unwrap(),
        b"lower a"
    );
    assert_eq!(
        view.read("src/b.txt", Path::new("src/b.txt")).unwrap(),
        b"upper b"
    );
    view.write("src/a.txt", Path::new("src/a.txt"), b"new a")
        .unwrap();
    view.write("new/dir/c.txt", Path::new("new/dir/c.txt"), b"c")
        .unwrap();
    assert!(matches!(
        view.write("chock.toml", Path::new("chock.toml"), b"[[rule]]"),
        Err(ViewError::Policy(_))
    ));
    assert!(!upper.path().join("chock.toml").exists());
    assert_eq!(
        std::fs::read(lower.path().join("src/a.txt")).unwrap(),
        b"lower a"
    );
    assert_eq!(
        view.read("src/a.txt", Path::new("src/a.txt")).unwrap(),
        b"new a"
    );
    let names: Vec<_> = view
        .list("src", Path::new("src"))
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["a.txt", "b.txt"]);
    std::fs::create_dir_all(lower.path().join("target/debug")).unwrap();
    std::fs::write(
        lower.path().join("target/CACHEDIR.TAG"),
        "Signature: 8a477f597d28d172789f06886806bc55",
    )
    .unwrap();
    std::fs::write(lower.path().join("target/debug/out.txt"), "build output").unwrap();
    let all = view.walk(".", Path::new(""), 100).unwrap();
    assert_eq!(
        all,
        [
            PathBuf::from("new/dir/c.txt"),
            "src/a.txt".into(),
            "src/b.txt".into()
        ]
    );
}

#[test]
fn a_walk_is_bounded_by_directories_as_well_as_files() {
    let (dir, view) = direct();
    let mut deep = dir.path().to_path_buf();
    for i in 0..20 {
        deep.push(format!("d{i}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("f.txt"), "found").unwrap();
    assert_eq!(view.walk(".", Path::new(""), 100).unwrap().len(), 1);
    assert!(view.walk(".", Path::new(""), 5).unwrap().is_empty());
}

#[test]
fn remove_takes_a_file_out_of_the_merged_view_by_a_whiteout_or_from_the_upper_layer() {
    let (lower, upper) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::create_dir(lower.path().join("src")).unwrap();
    std::fs::write(lower.path().join("src/old.rs"), "old").unwrap();
    std::fs::write(lower.path().join("both.txt"), "lower").unwrap();
    std::fs::write(upper.path().join("both.txt"), "upper").unwrap();
    std::fs::write(upper.path().join("new.txt"), "new").unwrap();
    let view = WorkspaceView::overlay(Path::new("/home/u/proj"), lower.path(), upper.path());
    for rel in ["src/old.rs", "both.txt", "new.txt"] {
        view.remove(rel, Path::new(rel)).unwrap();
        assert!(view.entry(Path::new(rel)).is_none(), "{rel} is still seen");
    }
    // The lower layer is never touched; what it has is hidden by whiteouts, and a file only the
    // upper layer had leaves none.
    assert_eq!(
        std::fs::read_to_string(lower.path().join("both.txt")).unwrap(),
        "lower"
    );
    use std::os::unix::fs::FileTypeExt;
    for rel in ["src/old.rs", "both.txt"] {
        let meta = std::fs::symlink_metadata(upper.path().join(rel)).unwrap();
        assert!(meta.file_type().is_char_device(), "{rel}: a whiteout");
    }
    assert!(std::fs::symlink_metadata(upper.path().join("new.txt")).is_err());
    assert!(matches!(
        view.remove("chock.toml", Path::new("chock.toml")),
        Err(ViewError::Policy(_))
    ));
    assert!(
        view.remove("src", Path::new("src")).is_err(),
        "not a directory"
    );
    view.remove("gone", Path::new("gone")).unwrap();
}
