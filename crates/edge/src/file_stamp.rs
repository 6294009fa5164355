//! The identity of a file's content as the file system tells it, without reading the file: what
//! the edge's file watchers (the rule file, managed-list files, the GeoIP databases) compare to
//! see a change. A replacement by rename changes the inode (and perhaps the device); an edit in
//! place changes the length or the modification time.
use std::io;
use std::path::Path;
use std::time::SystemTime;

/// Length, modification time, inode and device of one file (inode and device 0 off Unix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileStamp {
    pub(crate) len: u64,
    pub(crate) modified: Option<SystemTime>,
    pub(crate) inode: u64,
    pub(crate) device: u64,
}

impl FileStamp {
    /// The stamp of the file at `path` now.
    pub(crate) fn of(path: &Path) -> io::Result<FileStamp> {
        let meta = std::fs::metadata(path)?;
        #[cfg(unix)]
        let (inode, device) = {
            use std::os::unix::fs::MetadataExt;
            (meta.ino(), meta.dev())
        };
        #[cfg(not(unix))]
        let (inode, device) = (0, 0);
        Ok(FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
            device,
        })
    }

    /// The stamp of content held in memory (`len` bytes, no file).
    pub(crate) fn in_memory(len: u64) -> FileStamp {
        FileStamp {
            len,
            modified: None,
            inode: 0,
            device: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_by_rename_or_an_edit_changes_the_stamp() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, "one\n").expect("write");
        let first = FileStamp::of(&path).expect("stamp");
        assert_eq!(first, FileStamp::of(&path).expect("stamp"), "unchanged");
        std::fs::write(&path, "one two\n").expect("edit");
        let edited = FileStamp::of(&path).expect("stamp");
        assert_ne!(first, edited, "an edit changes the length");
        let other = dir.path().join("g");
        std::fs::write(&other, "one two\n").expect("write");
        std::fs::rename(&other, &path).expect("rename");
        assert_ne!(
            edited,
            FileStamp::of(&path).expect("stamp"),
            "a rename changes the inode"
        );
        assert!(FileStamp::of(&dir.path().join("none")).is_err());
    }
}
