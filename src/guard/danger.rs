//! What a shell line does that needs the human, judged by meaning on the commands
//! [`super::shell`] read: recursive deletes of wide or outside trees, force pushes
//! and other history rewrites, destroyed data (SQL without a `WHERE`, disks
//! formatted or written over), downloads run as code, code run from text known
//! only when it runs, permissions opened on wide trees, hitl's own answers and
//! rules changed from an agent's shell, and files written by any of the shell's
//! ways (redirections, `tee`, `sed -i`, `cp`, `mv`, `ln`, `dd of=`, `truncate`…),
//! which the caller checks against the protected list.
//!
//! Where a target cannot be known before the command runs (a variable the line
//! did not set, a command's output, the items `xargs` reads), a destructive
//! command is asked: `rm -rf "$DIR/"` with `DIR` empty is `rm -rf /`.

use std::path::{Path, PathBuf};

use super::shell::{Command, INTERPRETERS, Line, Program, RedirectKind, SHELLS, Word, lexical};

/// What the line does that needs the human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// Dangerous by what it does.
    Dangerous {
        /// The command, wrappers taken off.
        part: String,
        /// What it would do, in words.
        why: String,
    },
    /// It writes (or deletes) this file, which the caller checks against the
    /// protected files.
    Writes {
        /// The command.
        part: String,
        /// The folder it runs in.
        cwd: PathBuf,
        /// The file as written.
        path: String,
    },
}

/// Where the line runs, for judging paths.
pub struct Scope<'a> {
    /// The project's root, resolved.
    pub project: &'a Path,
    /// The user's home.
    pub home: Option<&'a Path>,
    /// Whether a path outside the project may be deleted recursively without
    /// asking (`[hook] safe_deletes`).
    pub safe_delete: &'a dyn Fn(&Path) -> bool,
    /// Files whose content answers for the human (hitl's API token, the
    /// dashboard's sessions): any command naming one is asked.
    pub secrets: &'a [PathBuf],
}

/// Everything `line` does that needs the human, in the order met.
pub fn judge(line: &Line, scope: &Scope) -> Vec<Finding> {
    let mut out = Vec::new();
    for name in &line.fork_bombs {
        out.push(Finding::Dangerous {
            part: format!("{name}() {{ … }}"),
            why: format!("the function {name} starts copies of itself without end (a fork bomb)"),
        });
    }
    for command in &line.commands {
        command_findings(command, scope, &mut out);
    }
    out
}

fn command_findings(command: &Command, scope: &Scope, out: &mut Vec<Finding>) {
    let programs = command.programs();
    let part = programs
        .first()
        .map(Program::shown)
        .unwrap_or_else(|| "(redirection)".to_string());
    for r in &command.redirects {
        if r.kind == RedirectKind::Write {
            let shown = format!("{part} > {}", super::shell::shown_word(&r.target.text));
            write(&shown, &r.target, command.cwd.as_deref(), out);
        }
    }
    for program in &programs {
        program_findings(program, scope, out);
    }
    let named = command
        .words
        .iter()
        .chain(command.redirects.iter().map(|r| &r.target));
    for w in named {
        if names_secret(w, command.cwd.as_deref(), scope.secrets) {
            out.push(dangerous(
                &part,
                format!(
                    "reads hitl's API token or sessions ({}): with them anyone answers for you",
                    w.text
                ),
            ));
            break;
        }
    }
    // A command whose very name is what a download printed: `$(curl …)`.
    if command.words.first().is_some_and(|w| w.downloaded) {
        out.push(dangerous(&part, "runs what a download printed".into()));
    }
}

/// Whether `w` names one of `secrets`: as a path (relative to `cwd`), or by a glob
/// in its folder.
fn names_secret(w: &Word, cwd: Option<&Path>, secrets: &[PathBuf]) -> bool {
    // The folder that holds them, read whole (`grep -r . ~/.config/hitl`, `tar -c`).
    let folder = secrets.first().and_then(|s| s.parent());
    let folder_name = folder
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned());
    let names_folder = folder_name
        .as_deref()
        .is_some_and(|n| !n.is_empty() && w.text.contains(n));
    // Most words name no such file: their text says so without building a path.
    if secrets.is_empty()
        || !(w.text.contains("token") || w.text.contains("sessions") || w.glob || names_folder)
    {
        return false;
    }
    let path = match (Path::new(&w.text).is_absolute(), cwd) {
        (true, _) => PathBuf::from(&w.text),
        (false, Some(c)) => c.join(&w.text),
        (false, None) => PathBuf::from(&w.text),
    };
    let path = lexical(&path);
    if names_folder && folder.is_some_and(|f| path == f) {
        return true;
    }
    secrets.iter().any(|s| {
        path == *s
            || (w.glob && s.parent().is_some_and(|dir| path.parent() == Some(dir)))
            || s.file_name().is_some_and(|name| {
                // Named inside a longer word: `--data=@…/token`, `$(cat …/token)`.
                let tail = format!("hitl/{}", name.to_string_lossy());
                w.text.contains(&tail)
            })
    })
}

/// A finding for a file written.
fn write(part: &str, target: &Word, cwd: Option<&Path>, out: &mut Vec<Finding>) {
    if target.text.starts_with("/dev/") && !target.unknown {
        if is_disk(&target.text) {
            out.push(dangerous(
                part,
                format!("writes over the disk {}", target.text),
            ));
        }
        return;
    }
    if target.unknown {
        out.push(dangerous(
            part,
            format!("writes to a file named only when it runs ({})", target.text),
        ));
        return;
    }
    let absolute = Path::new(&target.text).is_absolute();
    let cwd = match (cwd, absolute) {
        (Some(c), _) => c.to_path_buf(),
        (None, true) => PathBuf::from("/"),
        (None, false) => {
            out.push(dangerous(
                part,
                format!(
                    "writes to {} in a folder known only when it runs",
                    target.text
                ),
            ));
            return;
        }
    };
    if target.glob {
        match expand_glob(&cwd, &target.text) {
            Some(paths) => {
                for p in paths {
                    out.push(Finding::Writes {
                        part: part.to_string(),
                        cwd: cwd.clone(),
                        path: p,
                    });
                }
            }
            None => out.push(dangerous(
                part,
                format!(
                    "writes to files matching {} (too many to check)",
                    target.text
                ),
            )),
        }
        return;
    }
    out.push(Finding::Writes {
        part: part.to_string(),
        cwd,
        path: target.text.clone(),
    });
}

fn dangerous(part: &str, why: String) -> Finding {
    Finding::Dangerous {
        part: part.to_string(),
        why,
    }
}

/// Whether `path` names a disk or partition (`/dev/sda`, `/dev/nvme0n1p2`).
fn is_disk(path: &str) -> bool {
    let Some(dev) = path.strip_prefix("/dev/") else {
        return false;
    };
    [
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "dm-", "md", "loop", "mapper/",
    ]
    .iter()
    .any(|p| dev.starts_with(p))
}

/// The program's operands: its arguments that are not options (after `--`, all).
fn operands(args: &[Word], takes_value: &[&str]) -> Vec<Word> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while i < args.len() {
        let a = &args[i];
        if !options_done && a.text == "--" && !a.unknown {
            options_done = true;
        } else if !options_done && a.text.starts_with('-') && a.text.len() > 1 && !a.unknown {
            if takes_value.contains(&a.text.as_str()) {
                i += 1;
            }
        } else {
            out.push(a.clone());
        }
        i += 1;
    }
    out
}

/// Whether the short option `letter` or one of the long options is given.
fn has_flag(args: &[Word], letters: &str, long: &[&str]) -> bool {
    args.iter().take_while(|a| a.text != "--").any(|a| {
        let t = a.text.as_str();
        if let Some(l) = t.strip_prefix("--") {
            let key = l.split('=').next().unwrap_or(l);
            long.iter().any(|x| x.trim_start_matches('-') == key)
        } else if let Some(cluster) = t.strip_prefix('-') {
            !cluster.is_empty()
                && cluster.chars().all(|c| c.is_ascii_alphanumeric())
                && cluster.chars().any(|c| letters.contains(c))
        } else {
            false
        }
    })
}

fn program_findings(p: &Program, scope: &Scope, out: &mut Vec<Finding>) {
    let part = p.shown();
    let name = p.name.as_str();
    let cwd = p.cwd.as_deref();
    match name {
        "rm" | "unlink" | "shred" | "srm" => {
            let recursive = name == "rm" && has_flag(&p.args, "rR", &["--recursive"]);
            for target in operands(&p.args, &[]) {
                if recursive {
                    delete_tree(&part, &target, cwd, scope, out);
                } else {
                    write(&part, &target, cwd, out);
                }
            }
        }
        "find" => find(p, &part, scope, out),
        "git" => git(p, &part, out),
        "chmod" | "chown" | "chgrp" => permissions(p, &part, scope, out),
        "dd" => {
            for a in &p.args {
                if let Some(file) = a.text.strip_prefix("of=") {
                    let target = Word {
                        text: file.to_string(),
                        ..a.clone()
                    };
                    write(&part, &target, cwd, out);
                }
            }
        }
        "mkfs" | "mkswap" | "wipefs" | "fdisk" | "sfdisk" | "gdisk" | "sgdisk" | "parted"
        | "blkdiscard" | "cryptsetup" => {
            out.push(dangerous(
                &part,
                "formats, wipes or repartitions a disk".into(),
            ));
        }
        _ if name.starts_with("mkfs.") => {
            out.push(dangerous(&part, "formats a disk".into()));
        }
        "shutdown" | "reboot" | "halt" | "poweroff" => {
            out.push(dangerous(&part, "stops or restarts the machine".into()));
        }
        "systemctl"
            if p.args.iter().any(|a| {
                matches!(
                    a.text.as_str(),
                    "poweroff" | "reboot" | "halt" | "kexec" | "suspend" | "hibernate"
                )
            }) =>
        {
            out.push(dangerous(&part, "stops or restarts the machine".into()));
        }
        "tee" => {
            for t in operands(&p.args, &[]) {
                write(&part, &t, cwd, out);
            }
        }
        "truncate" => {
            for t in operands(&p.args, &["-s", "--size", "-r", "--reference"]) {
                write(&part, &t, cwd, out);
            }
        }
        "sed"
            if p.args.iter().any(|a| {
                a.text.starts_with("--in-place")
                    || a.text.strip_prefix('-').is_some_and(|c| {
                        !c.starts_with('-') && c.split('.').next().is_some_and(|f| f.contains('i'))
                    })
            }) =>
        {
            let takes = ["-e", "--expression", "-f", "--file", "-l", "--line-length"];
            let mut files = operands(&p.args, &takes);
            let script_given = p.args.iter().any(|a| {
                matches!(a.text.as_str(), "-e" | "--expression" | "-f" | "--file")
                    || a.text.starts_with("--expression=")
            });
            if !script_given && !files.is_empty() {
                files.remove(0);
            }
            for t in files {
                write(&part, &t, cwd, out);
            }
        }
        "perl"
            if p.args.iter().any(|a| {
                a.text.starts_with('-') && !a.text.starts_with("--") && a.text.contains('i')
            }) =>
        {
            let mut files = operands(&p.args, &["-e", "-E", "-M", "-I"]);
            let script_given = p.args.iter().any(|a| {
                a.text.starts_with('-')
                    && !a.text.starts_with("--")
                    && (a.text.ends_with('e') || a.text.ends_with('E'))
            });
            if !script_given && !files.is_empty() {
                files.remove(0);
            }
            for t in files {
                write(&part, &t, cwd, out);
            }
        }
        "cp" | "install" | "rsync" | "scp" => copy_like(p, &part, false, out),
        "mv" => copy_like(p, &part, true, out),
        "ln" => {
            // The link made, and (a hard link's way round the check) the file linked
            // to: a second name for a protected file is a way to write it.
            for t in operands(&p.args, &["-t", "--target-directory", "-S", "--suffix"]) {
                write(&part, &t, cwd, out);
            }
        }
        "hitl" => hitl(p, &part, out),
        "eval" | "source" | "." => {
            if p.args.iter().any(|a| a.downloaded) {
                out.push(dangerous(&part, "runs what a download printed".into()));
            } else if name == "eval" && p.args.iter().any(|a| a.unknown) {
                out.push(dangerous(&part, "runs code known only when it runs".into()));
            }
        }
        "psql" | "mysql" | "mariadb" | "sqlite3" | "duckdb" | "sqlcmd" | "clickhouse-client"
        | "cockroach" => {
            sql_client(p, &part, out);
        }
        "su" | "sg" | "flock" | "runuser" | "watch" => {
            if let Some(code) = p.code_text()
                && (code.unknown || code.downloaded)
            {
                out.push(code_unknown(&part, &code));
            }
        }
        _ if SHELLS.contains(&name) => {
            let how = p.shell_invocation();
            interpreter(p, &part, &how, true, out);
        }
        _ if INTERPRETERS
            .contains(&name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')) =>
        {
            let how = p.interpreter_invocation();
            interpreter(p, &part, &how, false, out);
        }
        _ => {}
    }
}

fn code_unknown(part: &str, code: &Word) -> Finding {
    if code.downloaded {
        dangerous(part, "runs what a download printed".into())
    } else {
        dangerous(
            part,
            format!("runs code known only when it runs ({})", code.text),
        )
    }
}

/// A shell or an interpreter: what it runs may be a download, or text known only
/// when it runs; an interpreter's inline code that names hitl's or Claude Code's
/// settings is a way round the guard.
fn interpreter(
    p: &Program,
    part: &str,
    how: &super::shell::ShellInvocation,
    shell: bool,
    out: &mut Vec<Finding>,
) {
    if let Some(code) = &how.command {
        if code.downloaded || (shell && code.unknown) {
            out.push(code_unknown(part, code));
        } else if !shell && names_guard_file(&code.text) {
            out.push(dangerous(
                part,
                "its inline code names hitl's or Claude Code's settings".into(),
            ));
        }
    }
    if how.script.as_ref().is_some_and(|s| s.downloaded) || (how.reads_input && p.input.downloaded)
    {
        out.push(dangerous(part, "runs what a download printed".into()));
    }
}

/// Whether code text names one of the files that hold the guard's settings.
fn names_guard_file(code: &str) -> bool {
    [
        ".helpers",
        ".claude",
        "hitl/config.toml",
        ".mcp.json",
        "claude.json",
    ]
    .iter()
    .any(|f| code.contains(f))
}

/// `cp`, `mv`, `install`, `rsync`: the destination is written; `mv` also takes
/// its sources away.
fn copy_like(p: &Program, part: &str, moves: bool, out: &mut Vec<Finding>) {
    let cwd = p.cwd.as_deref();
    let takes = [
        "-t",
        "--target-directory",
        "-S",
        "--suffix",
        "-m",
        "--mode",
        "-o",
        "--owner",
        "-g",
        "--group",
        "-e",
        "--rsh",
    ];
    let files = operands(&p.args, &takes);
    let target_dir = p.args.iter().enumerate().find_map(|(i, a)| {
        if a.text == "-t" || a.text == "--target-directory" {
            p.args.get(i + 1).cloned()
        } else {
            a.text.strip_prefix("--target-directory=").map(|d| Word {
                text: d.to_string(),
                ..a.clone()
            })
        }
    });
    let (sources, dest): (Vec<Word>, Option<Word>) = match target_dir {
        Some(dir) => (files, Some(dir)),
        None => match files.split_last() {
            Some((last, rest)) if !rest.is_empty() => (rest.to_vec(), Some(last.clone())),
            _ => (Vec::new(), None),
        },
    };
    if let Some(dest) = &dest {
        // Into a folder: each source's name there.
        let into_dir = dest.is_plain()
            && (dest.text.ends_with('/') || cwd.is_some_and(|c| c.join(&dest.text).is_dir()));
        if into_dir && !sources.is_empty() {
            for s in &sources {
                let name = Path::new(&s.text)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned());
                let target = match name {
                    Some(n) if s.is_plain() => {
                        Word::known(Path::new(&dest.text).join(n).to_string_lossy())
                    }
                    _ => Word {
                        glob: s.glob,
                        unknown: s.unknown,
                        ..Word::known(format!("{}/{}", dest.text.trim_end_matches('/'), s.text))
                    },
                };
                write(part, &target, cwd, out);
            }
            // The folder itself: `cp x .helpers/`.
            write(part, dest, cwd, out);
        } else {
            write(part, dest, cwd, out);
        }
    }
    if moves {
        for s in &sources {
            write(part, s, cwd, out);
        }
    }
}

/// Where a tree named on a command line lies.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tree {
    /// Known only when it runs (a variable, a substitution, a folder `cd` left
    /// unknown).
    Unknown,
    /// `/` itself.
    Root,
    /// A home folder or above it.
    Home,
    /// The project's root, or above it.
    Project,
    /// Inside the project's `.git`.
    Git,
    /// Under a place `[hook] safe_deletes` names.
    Safe,
    /// Elsewhere inside the project.
    Inside,
    /// Elsewhere outside the project.
    Outside,
}

/// Where the tree `target` (run in `cwd`) lies, and the folder it stands for (a
/// glob stands for the contents of the folder before it).
fn tree(target: &Word, cwd: Option<&Path>, scope: &Scope) -> (Tree, PathBuf) {
    if target.unknown {
        return (Tree::Unknown, PathBuf::new());
    }
    let path = Path::new(&target.text);
    let absolute = match (cwd, path.is_absolute()) {
        (_, true) => path.to_path_buf(),
        (Some(c), false) => c.join(path),
        (None, false) => return (Tree::Unknown, PathBuf::new()),
    };
    let (folder, glob) = if target.glob {
        let mut folder = PathBuf::new();
        for c in absolute.components() {
            if c.as_os_str()
                .to_string_lossy()
                .contains(['*', '?', '[', '{'])
            {
                break;
            }
            folder.push(c);
        }
        (folder, true)
    } else {
        (absolute, false)
    };
    let folder = resolve_parent(&lexical(&folder));
    let at_or_above = |p: &Path| p.starts_with(&folder);
    let place = if folder == Path::new("/") {
        Tree::Root
    } else if scope.home.is_some_and(at_or_above) {
        Tree::Home
    } else if at_or_above(scope.project) {
        Tree::Project
    } else if folder
        .strip_prefix(scope.project)
        .is_ok_and(|rel| rel.starts_with(".git"))
    {
        Tree::Git
    } else if (scope.safe_delete)(&folder) && !glob
        || (scope.safe_delete)(&folder.join("x")) && glob
    {
        Tree::Safe
    } else if folder.starts_with(scope.project) {
        Tree::Inside
    } else {
        Tree::Outside
    };
    (place, folder)
}

/// A recursive delete of `target`: asked unless it lies under a place
/// `[hook] safe_deletes` names (by default the insides of `/tmp`); the words say
/// how wide it is.
fn delete_tree(
    part: &str,
    target: &Word,
    cwd: Option<&Path>,
    scope: &Scope,
    out: &mut Vec<Finding>,
) {
    let (place, _) = tree(target, cwd, scope);
    let t = &target.text;
    let why = match place {
        Tree::Safe => return,
        Tree::Unknown => format!("deletes recursively a path known only when it runs ({t})"),
        Tree::Root => format!("deletes everything under / ({t})"),
        Tree::Home => format!("deletes the home folder ({t})"),
        Tree::Project => format!("deletes the whole project ({t})"),
        Tree::Git => format!("deletes the repository's history ({t})"),
        Tree::Inside => format!("deletes {t} and everything in it"),
        Tree::Outside => format!("deletes {t} and everything in it, outside the project"),
    };
    out.push(dangerous(part, why));
}

/// Whether a tree is wide: the root, a home, the project itself or above it,
/// outside the project, or unknown.
fn is_wide(place: &Tree) -> bool {
    matches!(
        place,
        Tree::Unknown | Tree::Root | Tree::Home | Tree::Project | Tree::Outside
    )
}

/// `path` with its folder's symlinks followed (the last name is what `rm`
/// removes, a link or not).
fn resolve_parent(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .map(|p| p.join(name))
            .unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// `find ROOTS … -delete`: with no test it deletes the roots' whole trees; with
/// tests, what matches under them (asked for a wide root). `-exec`'s commands are
/// programs of their own.
fn find(p: &Program, part: &str, scope: &Scope, out: &mut Vec<Finding>) {
    if !p.args.iter().any(|a| a.text == "-delete") {
        return;
    }
    let roots: Vec<Word> = p
        .args
        .iter()
        .take_while(|a| !(a.text.starts_with('-') || a.text == "(" || a.text == "!") || a.unknown)
        .cloned()
        .collect();
    let roots = if roots.is_empty() {
        vec![Word::known(".")]
    } else {
        roots
    };
    let tests = p.args.iter().any(|a| {
        matches!(
            a.text.as_str(),
            "-name"
                | "-iname"
                | "-path"
                | "-ipath"
                | "-wholename"
                | "-regex"
                | "-iregex"
                | "-type"
                | "-newer"
                | "-mtime"
                | "-mmin"
                | "-atime"
                | "-size"
                | "-empty"
                | "-user"
                | "-perm"
        )
    });
    for root in roots {
        let (place, _) = tree(&root, p.cwd.as_deref(), scope);
        if !tests {
            delete_tree(part, &root, p.cwd.as_deref(), scope, out);
        } else if is_wide(&place) && place != Tree::Project {
            // What it would find is anywhere under a wide root.
            out.push(dangerous(
                part,
                format!("deletes what it finds under {}", root.text),
            ));
        }
    }
}

/// `chmod`/`chown`/`chgrp`: recursive on a wide tree, or a file opened to every
/// user of the machine where it matters.
fn permissions(p: &Program, part: &str, scope: &Scope, out: &mut Vec<Finding>) {
    let recursive = has_flag(&p.args, "R", &["--recursive"]);
    let ops = operands(&p.args, &["--reference", "--from"]);
    let (mode, targets) = match ops.split_first() {
        Some((mode, rest)) => (mode.clone(), rest.to_vec()),
        None => return,
    };
    let world_writable = p.name == "chmod" && opens_to_all(&mode.text);
    for t in &targets {
        let (place, _) = tree(t, p.cwd.as_deref(), scope);
        let wide = is_wide(&place);
        if recursive && wide && place != Tree::Project || world_writable && (recursive || wide) {
            let what = if world_writable {
                "lets every user of the machine write"
            } else {
                "changes owners or permissions of everything in"
            };
            out.push(dangerous(part, format!("{what} {}", t.text)));
        }
    }
}

/// Whether a chmod mode gives others write access (`777`, `o+w`, `a+rwx`).
fn opens_to_all(mode: &str) -> bool {
    if mode.chars().all(|c| c.is_ascii_digit()) && !mode.is_empty() {
        let last = mode.chars().last().and_then(|c| c.to_digit(8)).unwrap_or(0);
        return last & 2 != 0;
    }
    mode.split(',').any(|clause| {
        let who: String = clause.chars().take_while(|c| "ugoa".contains(*c)).collect();
        let rest = &clause[who.len()..];
        (who.is_empty() || who.contains('o') || who.contains('a'))
            && (rest.starts_with('+') || rest.starts_with('='))
            && rest.contains('w')
            && !who.is_empty()
    })
}

/// `git` with its global options before the subcommand.
fn git(p: &Program, part: &str, out: &mut Vec<Finding>) {
    let mut i = 0;
    while let Some(a) = p.args.get(i) {
        let t = a.text.as_str();
        if !t.starts_with('-') || a.unknown {
            break;
        }
        if matches!(
            t,
            "-C" | "-c"
                | "--git-dir"
                | "--work-tree"
                | "--namespace"
                | "--exec-path"
                | "--super-prefix"
                | "--config-env"
                | "--list-cmds"
        ) {
            i += 1;
        }
        i += 1;
    }
    let Some(sub) = p.args.get(i) else { return };
    let rest = &p.args[i + 1..];
    let said = |why: &str| dangerous(part, why.to_string());
    match sub.text.as_str() {
        "push" => {
            let force = has_flag(
                rest,
                "f",
                &[
                    "--force",
                    "--force-with-lease",
                    "--force-if-includes",
                    "--mirror",
                ],
            );
            let delete = has_flag(rest, "d", &["--delete", "--prune"]);
            let refspecs = operands(
                rest,
                &["--repo", "-o", "--push-option", "--receive-pack", "--exec"],
            );
            let forced_ref = refspecs.iter().skip(1).any(|r| r.text.starts_with('+'));
            let deleted_ref = refspecs
                .iter()
                .skip(1)
                .any(|r| r.text.starts_with(':') && r.text.len() > 1);
            if force || forced_ref {
                out.push(said("force-pushes, rewriting the remote's history"));
            } else if delete || deleted_ref {
                out.push(said("deletes a branch or tag on the remote"));
            }
        }
        "reset" if has_flag(rest, "", &["--hard", "--merge", "--keep"]) => {
            out.push(said("throws away uncommitted changes (reset --hard)"));
        }
        "clean" if has_flag(rest, "f", &["--force"]) => {
            out.push(said("deletes untracked files (clean -f)"));
        }
        "checkout" | "restore"
            if operands(rest, &["-b", "-B", "--source", "-s"])
                .iter()
                .any(|o| o.text == "." || o.text == ":/")
                && !has_flag(rest, "bB", &[]) =>
        {
            out.push(said("throws away uncommitted changes to every file"));
        }
        "stash"
            if rest
                .first()
                .is_some_and(|a| a.text == "clear" || a.text == "drop") =>
        {
            out.push(said("deletes stashed changes"));
        }
        "filter-branch" | "filter-repo" => out.push(said("rewrites the repository's history")),
        "reflog"
            if rest
                .first()
                .is_some_and(|a| a.text == "expire" || a.text == "delete") =>
        {
            out.push(said("deletes the reflog, the way back to lost commits"));
        }
        "update-ref" if has_flag(rest, "d", &[]) => out.push(said("deletes a ref")),
        _ => {}
    }
}

/// hitl's own commands that answer questions or change the guard: a human's, from
/// their own terminal.
fn hitl(p: &Program, part: &str, out: &mut Vec<Finding>) {
    let words: Vec<&str> = p
        .args
        .iter()
        .filter(|a| !a.text.starts_with('-'))
        .map(|a| a.text.as_str())
        .collect();
    let removes = p.args.iter().any(|a| a.text == "--remove");
    let what = match words.as_slice() {
        ["answer", ..] | ["cancel", ..] => Some("answers hitl's questions"),
        ["rules", "add" | "remove", ..] => Some("changes hitl's rules"),
        ["init", ..] if removes => Some("takes hitl's hooks out of Claude Code"),
        ["token", ..] if !p.args.iter().any(|a| a.text == "--asker") => {
            Some("prints hitl's API token, which answers every question")
        }
        _ => None,
    };
    if let Some(what) = what {
        out.push(dangerous(
            part,
            format!("{what}: a human does that from their own terminal or a hitl UI"),
        ));
    }
}

/// `psql -c`, `mysql -e`, `sqlite3 DB SQL`, and SQL given on their input.
fn sql_client(p: &Program, part: &str, out: &mut Vec<Finding>) {
    let mut texts: Vec<String> = Vec::new();
    let flags: &[&str] = match p.name.as_str() {
        "psql" => &["-c", "--command"],
        "mysql" | "mariadb" | "clickhouse-client" => &["-e", "--execute", "-q", "--query"],
        "sqlcmd" => &["-Q", "-q"],
        "cockroach" => &["-e", "--execute"],
        _ => &["-c", "-cmd"],
    };
    for (i, a) in p.args.iter().enumerate() {
        if flags.contains(&a.text.as_str()) {
            if let Some(v) = p.args.get(i + 1) {
                texts.push(v.text.clone());
            }
        } else if let Some((k, v)) = a.text.split_once('=')
            && flags.contains(&k)
        {
            texts.push(v.to_string());
        }
    }
    if matches!(p.name.as_str(), "sqlite3" | "duckdb") {
        let ops = operands(&p.args, &["-cmd", "-separator", "-nullvalue", "-init"]);
        texts.extend(ops.iter().skip(1).map(|w| w.text.clone()));
    }
    if let Some(input) = &p.input.text {
        texts.push(input.clone());
    }
    for text in texts {
        if let Some(why) = destructive_sql(&text) {
            out.push(dangerous(part, why));
            return;
        }
    }
}

/// What a SQL text destroys: `DROP`, `TRUNCATE`, a `DELETE` or `UPDATE` without
/// `WHERE`, `ALTER … DROP`. Comments and quoted text are left out.
pub fn destructive_sql(sql: &str) -> Option<String> {
    let cleaned = strip_sql(sql);
    for statement in cleaned.split(';') {
        let words: Vec<String> = statement
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(|w| w.to_ascii_uppercase())
            .collect();
        let has = |w: &str| words.iter().any(|x| x == w);
        match words.first().map(String::as_str) {
            Some("DROP") => {
                return Some(format!(
                    "drops a {} (SQL)",
                    words.get(1).map(|w| w.to_lowercase()).unwrap_or_default()
                ));
            }
            Some("TRUNCATE") => return Some("empties a table (SQL TRUNCATE)".into()),
            Some("DELETE") if !has("WHERE") => {
                return Some("deletes every row of a table (SQL DELETE without WHERE)".into());
            }
            Some("UPDATE") if !has("WHERE") => {
                return Some("changes every row of a table (SQL UPDATE without WHERE)".into());
            }
            Some("ALTER") if has("DROP") => {
                return Some("drops part of a table (SQL ALTER … DROP)".into());
            }
            _ => {}
        }
    }
    None
}

/// SQL without comments and quoted text.
fn strip_sql(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' | '`' => {
                for d in chars.by_ref() {
                    if d == c {
                        break;
                    }
                }
                out.push_str(" x ");
            }
            '-' if chars.peek() == Some(&'-') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
                out.push(' ');
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for d in chars.by_ref() {
                    if last == '*' && d == '/' {
                        break;
                    }
                    last = d;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

/// The files a glob matches in the folder `cwd` (each of its parts matched in
/// turn, as the shell does); `None` past 2,000 names looked at.
fn expand_glob(cwd: &Path, pattern: &str) -> Option<Vec<String>> {
    let mut budget = 2000usize;
    let absolute = pattern.starts_with('/');
    let mut current: Vec<PathBuf> = vec![if absolute {
        PathBuf::from("/")
    } else {
        cwd.to_path_buf()
    }];
    let parts: Vec<&str> = pattern.split('/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut next = Vec::new();
        if !part.contains(['*', '?', '[', '{']) {
            for c in current {
                next.push(c.join(part));
            }
        } else {
            let matcher = globset::GlobBuilder::new(part)
                .literal_separator(true)
                .build()
                .ok()?
                .compile_matcher();
            for c in current {
                let Ok(entries) = std::fs::read_dir(&c) else {
                    continue;
                };
                for e in entries.flatten() {
                    budget = budget.checked_sub(1)?;
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    if name.starts_with('.') && !part.starts_with('.') {
                        continue;
                    }
                    if matcher.is_match(name.as_ref()) {
                        next.push(c.join(name.as_ref()));
                    }
                }
            }
        }
        if !last {
            next.retain(|p| p.is_dir());
        }
        current = next;
    }
    Some(
        current
            .into_iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_is_judged_by_its_statements() {
        for sql in [
            "DROP TABLE users",
            "drop database x;",
            "select 1; TRUNCATE t",
            "DELETE FROM users",
            "update users set admin = true",
            "ALTER TABLE t DROP COLUMN c",
        ] {
            assert!(destructive_sql(sql).is_some(), "{sql}");
        }
        for sql in [
            "SELECT * FROM users WHERE name = 'DROP TABLE x'",
            "DELETE FROM users WHERE id = 1",
            "-- DROP TABLE users\nSELECT 1",
            "UPDATE t SET a = 1 WHERE id = 2",
            "CREATE TABLE dropped (x int)",
        ] {
            assert_eq!(destructive_sql(sql), None, "{sql}");
        }
    }

    #[test]
    fn modes_opening_files_to_all_are_seen() {
        for m in ["777", "0777", "666", "o+w", "a+rwx", "u+x,o+w", "o=rwx"] {
            assert!(opens_to_all(m), "{m}");
        }
        for m in ["755", "644", "u+w", "+x", "g+w", "600"] {
            assert!(!opens_to_all(m), "{m}");
        }
    }
}
