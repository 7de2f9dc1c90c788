//! Output files that appear complete or not at all.
//!
//! Every file is written to a hidden temporary file in the output directory and renamed into place
//! by [`OutputSet::commit`] once *all* files of the run are complete. If anything fails, or the
//! set is dropped without committing, the temporaries are removed.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The files of one conversion run.
pub struct OutputSet {
    dir: PathBuf,
    pending: Vec<(PathBuf, PathBuf)>,
    temp_dirs: Vec<PathBuf>,
    committed: bool,
}

/// Turns an I/O error on `path` into a user-facing error with a fix.
pub fn write_error(path: &Path, e: &std::io::Error) -> Error {
    let fix = match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => "free some space or choose another directory with -d",
        Some(libc::EFBIG) => "the file size limit was reached (ulimit -f); raise it or choose another directory with -d",
        Some(libc::EROFS) => "the file system is read-only; choose another directory with -d",
        Some(libc::EACCES) | Some(libc::EPERM) => "the directory is not writable; choose another directory with -d",
        _ => "choose another output directory with -d",
    };
    Error::OutputWrite {
        path: path.to_path_buf(),
        reason: format!("{e}; {fix}"),
    }
}

/// One output file being written (buffered, to a temporary name).
pub struct OutFile {
    w: BufWriter<File>,
    dest: PathBuf,
}

impl OutFile {
    /// Writes bytes.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.w
            .write_all(bytes)
            .map_err(|e| write_error(&self.dest, &e))
    }

    /// The buffered writer (for streaming encoders); map errors with [`OutFile::error`].
    pub fn writer(&mut self) -> &mut BufWriter<File> {
        &mut self.w
    }

    /// Maps an I/O error on this file.
    pub fn error(&self, e: &std::io::Error) -> Error {
        write_error(&self.dest, e)
    }

    /// Flushes the buffer; errors such as a full disk surface here at the latest.
    pub fn finish(mut self) -> Result<()> {
        self.w.flush().map_err(|e| write_error(&self.dest, &e))
    }
}

impl OutputSet {
    /// Prepares `dir` (created if missing).
    pub fn new(dir: &Path) -> Result<OutputSet> {
        let fail = |reason: String| Error::OutputWrite {
            path: dir.to_path_buf(),
            reason,
        };
        if dir.exists() && !dir.is_dir() {
            return Err(fail(
                "exists and is not a directory; choose an output directory with -d".to_owned(),
            ));
        }
        std::fs::create_dir_all(dir).map_err(|e| {
            fail(format!(
                "cannot create the output directory: {e}; choose another one with -d"
            ))
        })?;
        Ok(OutputSet {
            dir: dir.to_path_buf(),
            pending: Vec::new(),
            temp_dirs: Vec::new(),
            committed: false,
        })
    }

    /// The final path of `file_name`.
    pub fn dest(&self, file_name: &str) -> PathBuf {
        self.dir.join(file_name)
    }

    /// Starts writing `file_name`.
    pub fn create(&mut self, file_name: &str) -> Result<OutFile> {
        let dest = self.dest(file_name);
        let tmp = self
            .dir
            .join(format!(".{file_name}.{}.tmp", std::process::id()));
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| write_error(&dest, &e))?;
        self.pending.push((tmp, dest.clone()));
        Ok(OutFile {
            w: BufWriter::with_capacity(256 * 1024, f),
            dest,
        })
    }

    /// Starts writing `file_name` unbuffered (for writers that buffer themselves or write from
    /// another thread); renamed into place on commit like [`OutputSet::create`]'s files.
    pub fn create_raw(&mut self, file_name: &str) -> Result<File> {
        let dest = self.dest(file_name);
        let tmp = self
            .dir
            .join(format!(".{file_name}.{}.tmp", std::process::id()));
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| write_error(&dest, &e))?;
        self.pending.push((tmp, dest));
        Ok(f)
    }

    /// An anonymous scratch file in the output directory (unlinked at once, so it never lingers).
    /// Several threads may ask for one at the same time.
    pub fn scratch(&self) -> Result<File> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = self
            .dir
            .join(format!(".rocprof-attach-spool.{}.{n}", std::process::id()));
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| write_error(&self.dir, &e))?;
        let _ = std::fs::remove_file(&path);
        Ok(f)
    }

    /// A new hidden directory in the output directory for outputs made of several entries
    /// (OTF2 archives); removed with everything left in it when the set is dropped.
    pub fn temp_dir(&mut self, tag: &str) -> Result<PathBuf> {
        let path = self.dir.join(format!(
            ".{tag}.{}.{}.tmp",
            std::process::id(),
            self.temp_dirs.len()
        ));
        std::fs::create_dir(&path).map_err(|e| write_error(&self.dir, &e))?;
        self.temp_dirs.push(path.clone());
        Ok(path)
    }

    /// Registers an entry made in a [`OutputSet::temp_dir`] to be renamed to `file_name` on
    /// commit (a directory replaces an existing one of that name).
    pub fn adopt(&mut self, tmp: PathBuf, file_name: &str) {
        let dest = self.dest(file_name);
        self.pending.push((tmp, dest));
    }

    /// Renames every finished file into place and returns the final paths.
    pub fn commit(mut self) -> Result<Vec<PathBuf>> {
        let mut done = Vec::new();
        for (tmp, dest) in &self.pending {
            if tmp.is_dir() && dest.is_dir() {
                std::fs::remove_dir_all(dest).map_err(|e| write_error(dest, &e))?;
            }
            std::fs::rename(tmp, dest).map_err(|e| write_error(dest, &e))?;
            done.push(dest.clone());
        }
        self.committed = true;
        Ok(done)
    }
}

impl Drop for OutputSet {
    fn drop(&mut self) {
        if !self.committed {
            for (tmp, _) in &self.pending {
                let _ = std::fs::remove_file(tmp);
            }
        }
        for d in &self.temp_dirs {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
