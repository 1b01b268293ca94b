//! The `.helpers/` file spool: its layout, atomic writes, safe reads of untrusted files,
//! the broker's watcher and the asker's wait.
//!
//! The spool is the protocol between agents and the broker, so every write here is
//! atomic (temp file in `.helpers/tmp/`, fsync, rename, fsync of the folder) and every
//! read assumes the file may be hostile: a symlink, a FIFO, a folder, or 10 MB of junk.
//! This module knows file formats only through [`crate::protocol`]; it keeps no queue.

pub mod activity;
pub mod ask;
mod atomic;
pub mod kept;
mod listener;
pub mod questions;
mod read;
pub mod wait;
pub mod watch;

use std::{
    fs,
    os::unix::fs::{DirBuilderExt, PermissionsExt},
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

pub use atomic::{
    Created, SLOTS_DIR, SPARES_DIR, clear_stale_temp, create_exclusive, keep_named_spares,
    keep_spare, leave_answer_slot, rename_no_replace, sync_dir, write_atomic, write_atomic_spared,
};
pub use listener::ListenerInfo;
pub use read::{Refusal, read_untrusted, read_untrusted_file};

/// Name of the spool folder inside a project.
pub const HELPERS: &str = ".helpers";

/// Paths of one project's spool. Cheap to clone; creating one touches nothing on disk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Spool {
    project: PathBuf,
    root: PathBuf,
}

impl Spool {
    /// The spool of the project at `project` (which need not be initialised yet).
    pub fn new(project: impl Into<PathBuf>) -> Spool {
        let project = project.into();
        let root = project.join(HELPERS);
        Spool { project, root }
    }

    /// Finds the project as git does: the nearest folder at or above `start` holding a
    /// `.helpers/` folder.
    pub fn find(start: &Path) -> Option<Spool> {
        start
            .ancestors()
            .find(|dir| dir.join(HELPERS).is_dir())
            .map(Spool::new)
    }

    /// The project a command works on: `dir` when given (it must be initialised),
    /// else the nearest `.helpers/` at or above the current folder.
    pub fn locate(dir: Option<&Path>) -> Result<Spool> {
        match dir {
            Some(d) => {
                let spool = Spool::new(d);
                if !spool.exists() {
                    anyhow::bail!(
                        "{} is not initialised for hitl (no .helpers/ folder); run: hitl init {}",
                        d.display(),
                        d.display()
                    );
                }
                Ok(spool)
            }
            None => {
                let cwd = std::env::current_dir().context("reading the current folder")?;
                Spool::find(&cwd).with_context(|| {
                    format!(
                        "no .helpers/ folder in {} or above it; run `hitl init` in the project, \
                         or pass --dir",
                        cwd.display()
                    )
                })
            }
        }
    }

    /// The project folder.
    pub fn project(&self) -> &Path {
        &self.project
    }
    /// `.helpers/`.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// `.helpers/questions/`: one file per pending question.
    pub fn questions(&self) -> PathBuf {
        self.root.join("questions")
    }
    /// `.helpers/answers/`: answers waiting to be picked up.
    pub fn answers(&self) -> PathBuf {
        self.root.join("answers")
    }
    /// `.helpers/kept/`: markers of questions kept for an asker stopped from outside
    /// (see [`kept`]).
    pub fn kept(&self) -> PathBuf {
        self.root.join("kept")
    }
    /// `.helpers/agents/`: the agent registry.
    pub fn agents(&self) -> PathBuf {
        self.root.join("agents")
    }
    /// `.helpers/queue/`: the queue snapshot and seed 000's markers.
    pub fn queue(&self) -> PathBuf {
        self.root.join("queue")
    }
    /// `.helpers/tmp/`: temp files on their way to an atomic rename.
    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }
    /// `.helpers/tmp/slot/`: the empty files askers leave for their answers (see
    /// [`leave_answer_slot`]).
    pub fn slots(&self) -> PathBuf {
        self.tmp().join(SLOTS_DIR)
    }
    /// `.helpers/tmp/listener/`: where the files kept up to date (the agent registry,
    /// the queue snapshot, `.listener.json`) are staged; see [`Spool::replace_file`].
    pub fn replace_tmp(&self) -> PathBuf {
        self.tmp().join("listener")
    }
    /// Replaces `dest`, a file kept up to date (the agent registry, the queue
    /// snapshot, `.listener.json`), atomically; not fsynced (each describes live
    /// state, rebuilt by the next write).
    ///
    /// Staged apart from `tmp/`, where askers create their questions: a rename over an
    /// old file frees the old file's blocks while it holds both folders, and on a file
    /// system that discards freed blocks at once (ext4 mounted with `discard`) that
    /// takes a quarter of a millisecond, which every asker creating a question in
    /// `tmp/` meanwhile would wait out.
    pub fn replace_file(&self, dest: &Path, bytes: &[u8]) -> std::io::Result<()> {
        let staging = self.replace_tmp();
        match write_atomic(&staging, dest, bytes, false) {
            // Made on first use; another thread may be making it at this moment.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs::create_dir_all(&staging)?;
                write_atomic(&staging, dest, bytes, false)
            }
            done => done,
        }
    }
    /// `.helpers/journal/`: hard links to the questions the broker has taken but whose
    /// end history has not recorded yet. An asker deletes its question file as soon as
    /// it has its answer; the link keeps the question until history has it.
    pub fn journal(&self) -> PathBuf {
        self.root.join("journal")
    }
    /// `.helpers/rejected/`: questions that could not be read, each with a reason.
    pub fn rejected(&self) -> PathBuf {
        self.root.join("rejected")
    }
    /// `.helpers/activity/`: hook events on their way to the activity feed.
    pub fn activity(&self) -> PathBuf {
        self.root.join("activity")
    }
    /// `.helpers/config.toml`.
    pub fn config_file(&self) -> PathBuf {
        self.root.join("config.toml")
    }
    /// `.helpers/.listener.pid`: seed 001's script refuses to ask without it.
    pub fn listener_pid_file(&self) -> PathBuf {
        self.root.join(".listener.pid")
    }
    /// `.helpers/.listener.json`: how to reach the running broker.
    pub fn listener_info_file(&self) -> PathBuf {
        self.root.join(".listener.json")
    }
    /// `.helpers/queue/held.json`: the requests a listener without HTTP holds that
    /// are not question files here (a mailbox's, a task's first-run screen), for
    /// `hitl pending` and `hitl status`, which cannot ask it.
    pub fn held_file(&self) -> PathBuf {
        self.queue().join("held.json")
    }
    /// `.helpers/queue/question_queue.json`: the pending queue, for other tools.
    pub fn queue_snapshot(&self) -> PathBuf {
        self.queue().join("question_queue.json")
    }

    /// True when `.helpers/` exists.
    pub fn exists(&self) -> bool {
        self.root.is_dir()
    }

    /// Creates every folder of the layout with mode 0700, and tightens the mode of
    /// folders that already exist: questions and answers are private to their user.
    ///
    /// Refuses, changing nothing, a layout another user could have prepared: any
    /// part of it (or the settings file) that is a symbolic link, or is owned by
    /// someone else (who could swap in a settings file with the guard off, or read
    /// the answers).
    pub fn ensure_layout(&self) -> Result<()> {
        self.check_ownership()?;
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true).mode(0o700);
        for dir in self.layout() {
            builder
                .create(&dir)
                .with_context(|| format!("creating {}", dir.display()))?;
            let mode = fs::metadata(&dir)
                .with_context(|| format!("reading {}", dir.display()))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
                    .with_context(|| format!("setting the mode of {}", dir.display()))?;
            }
        }
        Ok(())
    }
}

impl Spool {
    /// The layout's folders, the root first.
    fn layout(&self) -> [PathBuf; 11] {
        [
            self.root.clone(),
            self.questions(),
            self.answers(),
            self.agents(),
            self.queue(),
            self.tmp(),
            self.slots(),
            self.rejected(),
            self.journal(),
            self.activity(),
            self.kept(),
        ]
    }

    /// Every existing part of the layout is a real folder (or file) of this user's.
    fn check_ownership(&self) -> Result<()> {
        use std::os::unix::fs::MetadataExt;
        let me = crate::runtime::process::euid();
        let parts = self.layout().into_iter().chain([self.config_file()]);
        for path in parts {
            let meta = match fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
            };
            if meta.file_type().is_symlink() {
                anyhow::bail!(
                    "{} is a symbolic link: hitl will not use or change it (someone could point \
                     it at another user's files); remove it and run `hitl init` again",
                    path.display()
                );
            }
            if meta.uid() != me {
                let owner = nix::unistd::User::from_uid(meta.uid().into())
                    .ok()
                    .flatten()
                    .map_or_else(
                        || format!("uid {}", meta.uid()),
                        |u| format!("{} (uid {})", u.name, meta.uid()),
                    );
                anyhow::bail!(
                    "{} belongs to {owner}, not to you: another user could change its \
                     settings or read its answers; hitl changes nothing there (remove it, \
                     or run hitl as that user)",
                    path.display()
                );
            }
        }
        Ok(())
    }
}

/// True on file systems where another machine may write and inotify would stay silent.
pub fn is_network_fs(dir: &Path) -> bool {
    use nix::sys::statfs;
    let Ok(st) = statfs::statfs(dir) else {
        return false;
    };
    let t = st.filesystem_type();
    [
        statfs::NFS_SUPER_MAGIC,
        statfs::SMB_SUPER_MAGIC,
        statfs::FUSE_SUPER_MAGIC,
        statfs::CODA_SUPER_MAGIC,
        statfs::AFS_SUPER_MAGIC,
    ]
    .contains(&t)
        // CIFS, SMB2 and 9p, which nix does not name.
        || [0xFF53_4D42_u32 as i64, 0xFE53_4D42_u32 as i64, 0x0102_1997]
            .contains(&{ t.0 })
}

/// True for names the broker must never treat as questions: temp files of atomic
/// writers (`*.tmp`, seed 000's `X.json.tmp`), hidden files and editor droppings.
pub fn is_ignored_name(name: &str) -> bool {
    name.starts_with('.') || name.ends_with(".tmp") || name.ends_with('~') || name.ends_with(".swp")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_kept_up_to_date_are_replaced_from_many_threads_at_first_use() {
        // The staging folder is made on first use: threads racing to make it all
        // write their file (the listener's start writes two at once).
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let spool = Spool::new(dir.path().join("p"));
            spool.ensure_layout().unwrap();
            std::thread::scope(|s| {
                for i in 0..4 {
                    let spool = &spool;
                    s.spawn(move || {
                        let dest = spool.queue().join(format!("f{i}.json"));
                        spool.replace_file(&dest, b"{}").unwrap();
                    });
                }
            });
        }
    }

    #[test]
    fn finds_the_nearest_project() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path());
        spool.ensure_layout().unwrap();
        let deep = dir.path().join("a/b/c");
        fs::create_dir_all(&deep).unwrap();
        assert_eq!(Spool::find(&deep).unwrap(), spool);
        let mode = fs::metadata(spool.questions())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn ignores_temp_names() {
        assert!(is_ignored_name("x.json.tmp"));
        assert!(is_ignored_name(".hidden.json"));
        assert!(!is_ignored_name("q_a_1_2.json"));
    }
}
