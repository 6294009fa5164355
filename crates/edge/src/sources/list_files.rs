//! `--managed-list NAME=PATH` (`netacl serve`, `netacl edge`, `netacl eval`, `netacl-pingora`):
//! the content of a managed list from a file, and reloading it when it changes.
//!
//! A list file holds one entry a line (an IPv4 or IPv6 address or CIDR, a JA3 or a JA4
//! fingerprint); blank lines and `#` comments (whole-line or after an entry) are ignored. At
//! start a file that cannot be read or holds a malformed line is an error naming the line. The
//! running commands (`serve`, `edge`) then check every file each second and put a changed file's
//! content in force: a file that fails to read or parse is logged (with the line) and ignored
//! until it changes again, the last good content staying in force.
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use netacl_model::{ManagedList, ManagedListName, ManagedLists};

use crate::file_stamp::FileStamp;
use crate::PolicySources;

/// How often list files are checked for changes.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// Parses one `NAME=PATH` flag value.
pub fn parse_flag(value: &str) -> Result<(ManagedListName, PathBuf), String> {
    let (name, path) = value
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=PATH, found {value:?}"))?;
    let parsed = ManagedListName::parse(name.trim()).ok_or_else(|| {
        let names: Vec<&str> = ManagedListName::ALL.iter().map(|n| n.as_str()).collect();
        format!(
            "unknown managed list {name:?} (one of {})",
            names.join(", ")
        )
    })?;
    if path.is_empty() {
        return Err(format!("no file given for {name}"));
    }
    Ok((parsed, PathBuf::from(path)))
}

/// Reads and validates one list file; the error names the list, the file and the line.
pub fn read_list(
    name: ManagedListName,
    path: &Path,
    max_items: usize,
) -> Result<ManagedList, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("managed list {name} ({}): {err}", path.display()))?;
    ManagedList::from_lines(&text, max_items)
        .map_err(|err| format!("managed list {name} ({}): {err}", path.display()))
}

/// One file followed by the reloader.
pub struct ListFile {
    name: ManagedListName,
    path: PathBuf,
    stamp: Option<FileStamp>,
    digest: String,
}

/// Loads every file given (a name given twice is an error), for the start of a command.
pub fn load_all(
    flags: &[(ManagedListName, PathBuf)],
    max_items: usize,
) -> Result<(ManagedLists, Vec<ListFile>), String> {
    let mut lists = ManagedLists::new();
    let mut files = Vec::with_capacity(flags.len());
    for (name, path) in flags {
        if lists.get(*name).is_some() {
            return Err(format!("--managed-list {name} is given twice"));
        }
        let before = FileStamp::of(path).ok();
        let list = read_list(*name, path, max_items)?;
        files.push(ListFile {
            name: *name,
            path: path.clone(),
            stamp: before,
            digest: list.digest().to_owned(),
        });
        lists.set(*name, Some(Arc::new(list)));
    }
    Ok((lists, files))
}

/// Checks `files` every [`RELOAD_INTERVAL`] and hands a changed file's new content to `apply`.
/// A file that fails to read or parse is logged and skipped until it changes again; when
/// `apply` fails (the database is away, say) the file is tried again at the next check.
pub fn spawn_reloader<F, Fut>(
    mut files: Vec<ListFile>,
    max_items: usize,
    apply: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(ManagedListName, Arc<ManagedList>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send,
{
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(RELOAD_INTERVAL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            for file in &mut files {
                let now = FileStamp::of(&file.path).ok();
                if now == file.stamp {
                    continue;
                }
                let (name, path) = (file.name, file.path.clone());
                let read = tokio::task::spawn_blocking(move || read_list(name, &path, max_items))
                    .await
                    .map_err(|err| err.to_string())
                    .and_then(|result| result);
                let list = match read {
                    Ok(list) => list,
                    Err(err) => {
                        tracing::error!(
                            error = %err,
                            "managed list file refused; the last good content stays in force"
                        );
                        file.stamp = now;
                        continue;
                    }
                };
                if list.digest() == file.digest {
                    file.stamp = now;
                    continue;
                }
                let digest = list.digest().to_owned();
                let entries = list.len();
                match apply(file.name, Arc::new(list)).await {
                    Ok(()) => {
                        tracing::info!(
                            list = %file.name, path = %file.path.display(), entries, %digest,
                            "managed list reloaded"
                        );
                        file.stamp = now;
                        file.digest = digest;
                    }
                    Err(err) => {
                        tracing::warn!(
                            list = %file.name, error = %err,
                            "managed list reloaded but not put in force yet; trying again"
                        );
                    }
                }
            }
        }
    })
}

/// [`spawn_reloader`] for an edge (`netacl edge`, `netacl-pingora`): each changed file's content
/// is put in force in the edge's policy sources ([`crate::RunningEdge::policy_sources`]), the
/// policy recompiled with it; lists hold at most the model's default entries per set.
pub fn follow_in_edge(
    files: Vec<ListFile>,
    sources: Arc<PolicySources>,
) -> tokio::task::JoinHandle<()> {
    spawn_reloader(
        files,
        netacl_model::Limits::default().max_entries_per_set,
        move |name, list| {
            let sources = Arc::clone(&sources);
            async move {
                sources
                    .set_local_list(name, list)
                    .await
                    .map_err(|err| err.to_string())
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        assert_eq!(
            parse_flag("auth0.tor=/etc/tor.txt"),
            Ok((ManagedListName::Tor, PathBuf::from("/etc/tor.txt")))
        );
        assert!(parse_flag("auth0.tor").is_err());
        assert!(parse_flag("auth0.tor=").is_err());
        assert!(parse_flag("tor=/x").unwrap_err().contains("auth0.vpn"));
    }

    #[test]
    fn loading_names_the_file_and_the_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("tor.txt");
        std::fs::write(&good, "# exits\n192.0.2.1\n").expect("write");
        let bad = dir.path().join("vpn.txt");
        std::fs::write(&bad, "198.51.100.0/24\n\n198.51.100.0/33 # oops\n").expect("write");
        let (lists, files) = load_all(&[(ManagedListName::Tor, good.clone())], 10).expect("load");
        assert_eq!(lists.get(ManagedListName::Tor).map(|l| l.len()), Some(1));
        assert_eq!(files.len(), 1);
        let err = load_all(
            &[
                (ManagedListName::Tor, good.clone()),
                (ManagedListName::Vpn, bad.clone()),
            ],
            10,
        )
        .err()
        .expect("refused");
        assert!(err.contains("auth0.vpn") && err.contains("line 3"), "{err}");
        let err = load_all(
            &[
                (ManagedListName::Tor, good.clone()),
                (ManagedListName::Tor, good),
            ],
            10,
        )
        .err()
        .expect("twice");
        assert!(err.contains("twice"), "{err}");
        assert!(load_all(&[(ManagedListName::Tor, dir.path().join("none"))], 10).is_err());
    }
}
