//! Secrets on disk: the host credential, written so that no other user can
//! ever read it, and the join token, read from a file instead of argv.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Replaces `path` with `secret`, readable and writable by the owner only.
///
/// The secret goes into a new temporary file in the same folder, created with
/// mode 0600 (never more open, whatever the umask), written and flushed to
/// disk, then renamed over `path`: a reader sees the old file or the whole new
/// one, never a partial or world-readable secret. Blocks: call it off the
/// async runtime.
pub fn write_private(path: &Path, secret: &str) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the credential path names no file",
        )
    })?;
    let tmp = dir.join(temp_name(name));
    let written = write_new_private(&tmp, secret).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    // The rename itself survives a crash once the folder is flushed.
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// `.NAME.tmp-PID-N`: unique within the process, and never an existing file
/// (it is created with `create_new`, which also refuses a planted symlink).
fn temp_name(name: &std::ffi::OsStr) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    PathBuf::from(format!(
        ".{}.tmp-{}-{n}",
        name.to_string_lossy(),
        std::process::id()
    ))
}

fn write_new_private(tmp: &Path, secret: &str) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(tmp)?;
    // The umask can only have narrowed 0600; make it exactly 0600.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(secret.as_bytes())?;
    file.sync_all()
}

/// The join token kept in `path` (surrounding whitespace removed).
pub fn read_join_token_file(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--join-token-file {}: {e}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(format!(
            "--join-token-file {}: the file is empty; put the join token in it",
            path.display()
        ));
    }
    Ok(token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "tessera-agent-credential-{}-{test}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The folder's entries, by name.
    fn entries(d: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[cfg(unix)]
    fn mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_credential_is_private_from_the_start() {
        let d = dir("new");
        let path = d.join("h.credential");
        write_private(&path, "tsh_first").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "tsh_first");
        #[cfg(unix)]
        assert_eq!(mode(&path), 0o600);
        assert_eq!(entries(&d), ["h.credential"], "no temporary file is left");
    }

    #[test]
    fn replacing_swaps_the_whole_file_and_tightens_its_mode() {
        let d = dir("replace");
        let path = d.join("h.credential");
        std::fs::write(&path, "tsh_old_and_much_longer_than_the_new_one").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        #[cfg(unix)]
        let old_inode = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(&path).unwrap().ino()
        };
        write_private(&path, "tsh_new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "tsh_new");
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            assert_eq!(mode(&path), 0o600);
            // A new file was renamed into place; the old one was not rewritten
            // in place (where a reader could see it half-written).
            assert_ne!(std::fs::metadata(&path).unwrap().ino(), old_inode);
        }
        assert_eq!(entries(&d), ["h.credential"]);
    }

    #[test]
    fn a_failed_write_leaves_the_old_credential_and_no_litter() {
        let d = dir("fail");
        // The target is a folder: the rename fails after the temporary file
        // was written.
        let path = d.join("h.credential");
        std::fs::create_dir(&path).unwrap();
        assert!(write_private(&path, "tsh_new").is_err());
        assert!(path.is_dir());
        assert_eq!(
            entries(&d),
            ["h.credential"],
            "the temporary file is removed"
        );
        assert!(write_private(&d.join("missing").join("x"), "s").is_err());
    }

    #[test]
    fn the_join_token_file_is_trimmed_and_must_not_be_empty() {
        let d = dir("token");
        let path = d.join("token");
        std::fs::write(&path, "  tsj_abc\n").unwrap();
        assert_eq!(read_join_token_file(&path).unwrap(), "tsj_abc");
        std::fs::write(&path, "\n").unwrap();
        let err = read_join_token_file(&path).unwrap_err();
        assert!(err.contains("the file is empty"), "{err}");
        let err = read_join_token_file(&d.join("nope")).unwrap_err();
        assert!(err.starts_with("--join-token-file "), "{err}");
    }
}
