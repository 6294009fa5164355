//! The key file: one line, `netacl-kek-v1:` and the 32 bytes in base64url without padding.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

use base64::Engine as _;
use zeroize::Zeroizing;

use crate::{SecretsError, KEK_LEN};

const PREFIX: &str = "netacl-kek-v1:";
/// Longer than any key file; a bigger file is refused without reading it all.
const MAX_FILE_LEN: u64 = 256;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SecretsError + '_ {
    move |source| SecretsError::Io {
        path: path.to_owned(),
        source,
    }
}

pub(crate) fn read_key_file(path: &Path) -> Result<Zeroizing<[u8; KEK_LEN]>, SecretsError> {
    let file = File::open(path).map_err(io(path))?;
    let meta = file.metadata().map_err(io(path))?;
    if !meta.is_file() {
        return Err(SecretsError::NotAFile {
            path: path.to_owned(),
        });
    }
    check_mode(path, &meta)?;
    if meta.len() > MAX_FILE_LEN {
        return Err(SecretsError::Format {
            path: path.to_owned(),
        });
    }
    let mut text = Zeroizing::new(String::new());
    file.take(MAX_FILE_LEN)
        .read_to_string(&mut text)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => SecretsError::Format {
                path: path.to_owned(),
            },
            _ => SecretsError::Io {
                path: path.to_owned(),
                source: e,
            },
        })?;
    parse(&text).ok_or_else(|| SecretsError::Format {
        path: path.to_owned(),
    })
}

fn parse(text: &str) -> Option<Zeroizing<[u8; KEK_LEN]>> {
    let line = text.strip_suffix('\n').unwrap_or(text);
    let line = line.strip_suffix('\r').unwrap_or(line);
    let encoded = line.strip_prefix(PREFIX)?;
    let mut out = Zeroizing::new([0u8; KEK_LEN]);
    // A buffer larger than the key, so that a longer value is told apart rather than cut.
    let mut buf = Zeroizing::new([0u8; KEK_LEN + 3]);
    let n = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode_slice(encoded, &mut buf[..])
        .ok()?;
    if n != KEK_LEN {
        return None;
    }
    out.copy_from_slice(&buf[..KEK_LEN]);
    Some(out)
}

fn encode(bytes: &[u8; KEK_LEN]) -> Zeroizing<String> {
    let mut line = Zeroizing::new(String::with_capacity(PREFIX.len() + 44));
    line.push_str(PREFIX);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode_string(bytes, &mut line);
    line.push('\n');
    line
}

#[cfg(unix)]
fn check_mode(path: &Path, meta: &std::fs::Metadata) -> Result<(), SecretsError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(SecretsError::TooOpen {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_mode(_path: &Path, _meta: &std::fs::Metadata) -> Result<(), SecretsError> {
    Ok(())
}

#[cfg(unix)]
fn create_private(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn create_private(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// Writes the key beside `path` under a temporary name, syncs it, and hard-links it into place:
/// the link fails if `path` exists, so a key file is never overwritten and never seen half
/// written. The temporary name is removed either way.
pub(crate) fn create_key_file(path: &Path, bytes: &[u8; KEK_LEN]) -> Result<(), SecretsError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| SecretsError::NotAFile {
        path: path.to_owned(),
    })?;
    let mut suffix = [0u8; 8];
    aws_lc_rs::rand::fill(&mut suffix).map_err(|_| SecretsError::Crypto)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        hex::encode(suffix)
    ));
    let result = (|| {
        let mut file = create_private(&tmp).map_err(io(&tmp))?;
        file.write_all(encode(bytes).as_bytes()).map_err(io(&tmp))?;
        file.sync_all().map_err(io(&tmp))?;
        drop(file);
        std::fs::hard_link(&tmp, path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                SecretsError::Exists {
                    path: path.to_owned(),
                }
            } else {
                SecretsError::Io {
                    path: path.to_owned(),
                    source: e,
                }
            }
        })?;
        // The directory entry made durable; not every platform can open a directory.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&tmp);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_strict_parse() {
        let key = [7u8; KEK_LEN];
        let text = encode(&key);
        assert_eq!(*parse(&text).unwrap(), key);
        assert_eq!(*parse(text.trim_end()).unwrap(), key);
        assert!(parse(&text.replace("v1", "v2")).is_none());
        // 31 and 33 bytes, padding, standard alphabet, blanks, nothing
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        assert!(parse(&format!("{PREFIX}{}", b64.encode([1u8; 31]))).is_none());
        assert!(parse(&format!("{PREFIX}{}", b64.encode([1u8; 33]))).is_none());
        let padded = base64::engine::general_purpose::URL_SAFE.encode(key);
        assert!(parse(&format!("{PREFIX}{padded}")).is_none());
        let std = base64::engine::general_purpose::STANDARD_NO_PAD.encode([0xffu8; KEK_LEN]);
        assert!(parse(&format!("{PREFIX}{std}")).is_none());
        assert!(parse(&format!(" {}", &*text)).is_none());
        assert!(parse(&format!("{}\n", &*text)).is_none());
        assert!(parse("").is_none());
    }
}
