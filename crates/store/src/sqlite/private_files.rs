//! The data directory and its files are the owner's alone: the directory is created `0700` and
//! every file in it `0600` (the database and SQLite's `-wal` and `-shm` beside it, which SQLite
//! creates with the database file's mode; the CLI's `secrets.key` and `operator-token`, written
//! `0600` by their own code). A directory or database file found with a looser mode (a data
//! directory made by an earlier version, or by hand) is tightened, and each change is logged
//! with the old mode; one that cannot be changed (another owner) is logged and left as it is.
use std::path::Path;

use crate::StoreError;

/// The suffixes of the files SQLite keeps beside the database in WAL mode.
const SQLITE_COMPANIONS: [&str; 2] = ["-wal", "-shm"];

/// Creates `data_dir` (and missing parents) with mode `0700`, or tightens an existing one to
/// `0700` (logged). See the module docs.
pub fn prepare_data_dir(data_dir: &Path) -> Result<(), StoreError> {
    create_private_dir(data_dir)
        .map_err(|err| StoreError::Setup(format!("cannot create {}: {err}", data_dir.display())))?;
    tighten(data_dir, 0o700);
    Ok(())
}

/// Creates the database file `0600` when it is missing (SQLite then gives its `-wal` and `-shm`
/// files the same mode) and tightens it and its companions when they are looser.
pub(crate) fn prepare_database_file(path: &Path) -> Result<(), StoreError> {
    create_private_file(path)
        .map_err(|err| StoreError::Setup(format!("cannot create {}: {err}", path.display())))?;
    tighten(path, 0o600);
    for suffix in SQLITE_COMPANIONS {
        let mut companion = path.as_os_str().to_owned();
        companion.push(suffix);
        let companion = Path::new(&companion);
        if companion.exists() {
            tighten(companion, 0o600);
        }
    }
    Ok(())
}

#[cfg(unix)]
fn create_private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

#[cfg(not(unix))]
fn create_private_dir(path: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(path)
}

#[cfg(unix)]
fn create_private_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}

#[cfg(not(unix))]
fn create_private_file(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

/// Sets `path` to `mode` when group or others have any access to it (logged).
#[cfg(unix)]
fn tighten(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(metadata) = std::fs::metadata(path) else {
        return;
    };
    let old = metadata.permissions().mode() & 0o7777;
    if old & 0o077 == 0 {
        return;
    }
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
        Ok(()) => tracing::warn!(
            path = %path.display(),
            old_mode = format!("{old:o}"),
            new_mode = format!("{mode:o}"),
            "the data directory's files are the owner's alone: mode tightened"
        ),
        Err(err) => tracing::warn!(
            path = %path.display(),
            mode = format!("{old:o}"),
            error = %err,
            "readable by group or others, and the mode cannot be tightened: chmod it by hand"
        ),
    }
}

#[cfg(not(unix))]
fn tighten(_path: &Path, _mode: u32) {}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn a_new_directory_is_0700_with_its_missing_parents() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("a").join("data");
        prepare_data_dir(&dir).expect("created");
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&root.path().join("a")), 0o700);
    }

    #[test]
    fn looser_modes_are_tightened() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("data");
        std::fs::create_dir(&dir).expect("dir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        prepare_data_dir(&dir).expect("prepared");
        assert_eq!(mode(&dir), 0o700);
        let db = dir.join("x.db");
        let wal = dir.join("x.db-wal");
        for file in [&db, &wal] {
            std::fs::write(file, b"").expect("write");
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }
        prepare_database_file(&db).expect("prepared");
        assert_eq!(mode(&db), 0o600);
        assert_eq!(mode(&wal), 0o600);
    }
}
