//! The key file's rules: generation in the data directory, loading, refusals.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use netacl_secrets::{Kek, SecretContext, SecretsError, DEFAULT_KEY_FILE_NAME};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn generated_once_in_the_data_directory_with_mode_0600() {
    let dir = tempfile::tempdir().unwrap();
    let first = Kek::resolve(None, Some(dir.path())).unwrap();
    let path = dir.path().join(DEFAULT_KEY_FILE_NAME);
    assert_eq!(mode(&path), 0o600);
    let written = std::fs::read(&path).unwrap();
    let second = Kek::resolve(None, Some(dir.path())).unwrap();
    assert_eq!(first.id(), second.id());
    assert_eq!(std::fs::read(&path).unwrap(), written, "never rewritten");
    // Nothing else left behind (no temporary file).
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, [DEFAULT_KEY_FILE_NAME]);
    // What one seals the other opens.
    let here = SecretContext::new("t", "p", "r");
    let sealed = first.seal(&here, b"s").unwrap();
    assert_eq!(second.open(&here, sealed.as_str()).unwrap().expose(), b"s");
}

#[test]
fn an_existing_file_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k");
    let kek = Kek::generate_file(&path).unwrap();
    let before = std::fs::read(&path).unwrap();
    assert!(matches!(
        Kek::generate_file(&path),
        Err(SecretsError::Exists { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(Kek::load(&path).unwrap().id(), kek.id());
}

#[test]
fn racing_generators_end_with_one_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DEFAULT_KEY_FILE_NAME);
    let ids: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| Kek::load_or_generate(&path).unwrap().id()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    assert_eq!(Kek::load(&path).unwrap().id(), ids[0]);
}

#[test]
fn a_given_key_file_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.key");
    let err = Kek::resolve(Some(&missing), Some(dir.path())).unwrap_err();
    assert!(matches!(err, SecretsError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("nope.key"));
    assert!(!missing.exists());
    assert!(!dir.path().join(DEFAULT_KEY_FILE_NAME).exists());
}

#[test]
fn required_without_a_data_directory() {
    let err = Kek::resolve(None, None).unwrap_err();
    assert!(matches!(err, SecretsError::KeyFileRequired));
    assert!(err.to_string().contains("--secrets-key-file"));
}

#[test]
fn too_open_files_are_refused_without_quoting_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k");
    Kek::generate_file(&path).unwrap();
    let contents = std::fs::read_to_string(&path).unwrap();
    let encoded = contents.trim_end().split_once(':').unwrap().1.to_owned();
    for bad in [0o644, 0o640, 0o604, 0o660, 0o606] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(bad)).unwrap();
        let err = Kek::load(&path).unwrap_err();
        assert!(
            matches!(err, SecretsError::TooOpen { mode, .. } if mode == bad),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("chmod 600") && !text.contains(&encoded),
            "{text}"
        );
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
    Kek::load(&path).unwrap();
}

#[test]
fn malformed_files_are_refused_without_quoting_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k");
    let cases: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"netacl-kek-v1:".to_vec(),
        b"netacl-kek-v1:c2hvcnQtYnV0LXNlY3JldC12YWx1ZQ\n".to_vec(),
        b"netacl-kek-v2:QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE\n".to_vec(),
        b"QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=\n".to_vec(),
        vec![0xff; 47],
        [b"netacl-kek-v1:".as_slice(), &[b'Q'; 300]].concat(),
    ];
    for contents in cases {
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, &contents).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = Kek::load(&path).unwrap_err();
        assert!(matches!(err, SecretsError::Format { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            !text.contains("c2hvcnQt") && !text.contains("QUFB"),
            "{text}"
        );
    }
}

#[test]
fn a_directory_is_not_a_key_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = Kek::load(dir.path()).unwrap_err();
    assert!(matches!(err, SecretsError::NotAFile { .. }), "{err:?}");
}

#[test]
fn tags_depend_on_the_key_the_purpose_and_the_message_only() {
    let a = Kek::from_bytes(&[3u8; 32]).expect("key");
    let a_again = Kek::from_bytes(&[3u8; 32]).expect("key");
    let b = Kek::from_bytes(&[4u8; 32]).expect("key");
    let tag = a.tag("purpose", b"message");
    // The same key (another node holding the same key file) gives the same tag.
    assert_eq!(tag, a_again.tag("purpose", b"message"));
    assert_ne!(tag, b.tag("purpose", b"message"));
    assert_ne!(tag, a.tag("other purpose", b"message"));
    assert_ne!(tag, a.tag("purpose", b"messagE"));
    // The purpose and the message are separated: moving a byte across changes the tag.
    assert_ne!(a.tag("purposem", b"essage"), tag);
}
