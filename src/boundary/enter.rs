//! Entering the boundary: this process (single-threaded, about to `exec` the agent)
//! gets a mount namespace of its own (and, unless it is root, a user namespace to
//! own it), makes the whole file system read-only, binds back what the plan makes
//! writable, hides hitl's secrets, then gives up every way to undo that: capabilities
//! dropped (a root agent would otherwise remount), `no_new_privs`, Landlock's scopes
//! (no signals to, no abstract sockets of, and no tracing of processes outside) and a
//! seccomp filter against typing into the terminal (`TIOCSTI`).
//!
//! Mounts made here are owned by this namespace; a process inside that makes a user
//! namespace of its own gets them "locked" (the kernel will not let it unmount one or
//! make a read-only one writable), and with no capabilities it cannot touch them here.

#![allow(unsafe_code)] // mount_setattr, open_tree-free binds through /proc/self/fd, prctl, capset, seccomp: system calls nix does not wrap.

use std::{
    ffi::CString,
    fs::File,
    io,
    os::{
        fd::{AsRawFd, OwnedFd},
        unix::{ffi::OsStrExt, fs::DirBuilderExt},
    },
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use nix::{
    mount::{MsFlags, mount},
    sched::{CloneFlags, unshare},
    unistd::{Gid, Uid},
};

use super::plan::Plan;

/// The devices a program expects in `/dev`; the rest (disks, `kvm`, `mem`) stays
/// outside: a root agent could write a disk through its device node, which a
/// read-only mount does not stop.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty", "ptmx"];

/// Enters the boundary `plan` describes. On success the caller `exec`s the agent;
/// on failure this process is in an unknown state and must exit.
pub fn enter(plan: &Plan) -> Result<()> {
    let uid = Uid::current();
    let gid = Gid::current();
    let cwd = std::env::current_dir().context("reading the current folder")?;
    let root = uid.is_root();

    if root {
        unshare(CloneFlags::CLONE_NEWNS).context("making a mount namespace")?;
    } else {
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS).context(
            "making a user and mount namespace (are unprivileged user namespaces allowed?)",
        )?;
        std::fs::write("/proc/self/setgroups", "deny").context("writing setgroups")?;
        std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))
            .context("mapping the user")?;
        std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))
            .context("mapping the group")?;
    }
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .context("making mounts private")?;

    // What will be covered but must stay reachable, held open before it is.
    let carried: Vec<(PathBuf, OwnedFd)> = plan
        .carried
        .iter()
        .map(|p| Ok((p.clone(), open_path(p)?)))
        .collect::<Result<_>>()?;
    let kept: Vec<(PathBuf, OwnedFd)> = plan
        .masks
        .iter()
        .flat_map(|m| m.keep.iter().map(|k| m.dir.join(k)))
        .filter(|p| p.is_file())
        .map(|p| Ok((p.clone(), open_path(&p)?)))
        .collect::<Result<_>>()?;
    let devices: Vec<(&str, OwnedFd)> = DEVICES
        .iter()
        .filter_map(|d| {
            open_path(&Path::new("/dev").join(d))
                .ok()
                .map(|fd| (*d, fd))
        })
        .collect();
    let pts = open_path(Path::new("/dev/pts")).ok();

    set_read_only(Path::new("/"), true, true).context("making the file system read-only")?;
    if !root {
        // Processes' own files (`uid_map` for a sandbox inside, `oom_score_adj`); a
        // user namespace leaves the kernel's settings to the real root. Root keeps
        // `/proc` read-only: `/proc/sys` would be its to write.
        let _ = set_read_only(Path::new("/proc"), false, false);
    }

    make_dev(&devices, pts.as_ref()).context("making /dev")?;
    for dir in &plan.private {
        tmpfs(dir, "1777").with_context(|| format!("making {} private", dir.display()))?;
    }
    for (path, fd) in &carried {
        // A folder, or a file named on the agent's command line.
        let folder =
            nix::sys::stat::fstat(fd).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
        let made = if folder {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(path)
        } else {
            path.parent()
                .map_or(Ok(()), |p| {
                    std::fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o755)
                        .create(p)
                })
                .and_then(|()| File::create(path).map(drop))
        };
        made.with_context(|| format!("making {} in the private folder", path.display()))?;
        bind_fd(fd, path, folder).with_context(|| format!("carrying {} in", path.display()))?;
        set_read_only(path, true, true)?;
    }
    for b in &plan.binds {
        bind_self(&b.path).with_context(|| format!("binding {}", b.path.display()))?;
        set_read_only(&b.path, !b.writable, true)
            .or_else(|e| {
                if b.writable {
                    set_read_only(&b.path, false, false)
                } else {
                    Err(e)
                }
            })
            .with_context(|| {
                format!(
                    "setting {} {}",
                    b.path.display(),
                    if b.writable { "writable" } else { "read-only" }
                )
            })?;
    }
    for mask in &plan.masks {
        tmpfs(&mask.dir, "0700").with_context(|| format!("hiding {}", mask.dir.display()))?;
        for (path, fd) in kept.iter().filter(|(p, _)| p.parent() == Some(&mask.dir)) {
            File::create(path).with_context(|| format!("placing {}", path.display()))?;
            bind_fd(fd, path, false)?;
            set_read_only(path, true, false)?;
        }
        set_read_only(&mask.dir, true, false)?;
    }

    // The current folder as the new mounts show it (the old one is read-only now).
    std::env::set_current_dir(&cwd).with_context(|| format!("entering {}", cwd.display()))?;

    lock_in(root)
}

/// Gives up every way out: `no_new_privs` (set-user-ID programs gain nothing),
/// Landlock's scopes, the seccomp filter, then every capability, for good.
fn lock_in(root: bool) -> Result<()> {
    nix::sys::prctl::set_no_new_privs().context("setting no_new_privs")?;
    landlock_scopes()?;
    seccomp_no_typing().context("installing the seccomp filter")?;
    drop_capabilities(root).context("dropping capabilities")?;
    Ok(())
}

/// Landlock's scopes (ABI 6, Linux 6.12): no signal to a process outside, no
/// connection to an abstract unix socket made outside (a tmux or D-Bus server of the
/// user's would run commands for the agent). A Landlock domain also keeps `ptrace`
/// (and `/proc/PID/root`, `/mem`, `/fd`) of processes outside out of reach.
fn landlock_scopes() -> Result<()> {
    use landlock::{Ruleset, RulesetAttr, RulesetStatus, Scope};
    let status = Ruleset::default()
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .context("Landlock's scopes")?
        .create()
        .context("making the Landlock ruleset")?
        .restrict_self()
        .context("entering the Landlock domain")?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        bail!(
            "this kernel's Landlock cannot keep signals and abstract sockets in (ABI 6, Linux 6.12, is needed): {:?}",
            status.ruleset
        );
    }
    Ok(())
}

/// The abstract-socket and signal scopes need Landlock ABI 6; which one this kernel
/// has (0: none).
pub fn landlock_abi() -> i64 {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only
    // returns the ABI version.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    v.max(0)
}

/// A fresh `/dev` with the usual devices bound in, the terminals (`pts`) and a
/// private `shm`.
fn make_dev(devices: &[(&str, OwnedFd)], pts: Option<&OwnedFd>) -> Result<()> {
    let dev = Path::new("/dev");
    tmpfs(dev, "0755")?;
    for (name, fd) in devices {
        let path = dev.join(name);
        File::create(&path).with_context(|| format!("placing {}", path.display()))?;
        bind_fd(fd, &path, false)?;
    }
    if let Some(fd) = pts {
        let path = dev.join("pts");
        std::fs::create_dir(&path)?;
        bind_fd(fd, &path, true)?;
        set_read_only(&path, false, true).or_else(|_| set_read_only(&path, false, false))?;
    }
    let shm = dev.join("shm");
    std::fs::create_dir(&shm)?;
    tmpfs(&shm, "1777")?;
    for (link, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(to, dev.join(link))?;
    }
    Ok(())
}

fn tmpfs(dir: &Path, mode: &str) -> Result<()> {
    mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(format!("mode={mode}").as_str()),
    )
    .with_context(|| format!("mounting a tmpfs on {}", dir.display()))
}

fn open_path(path: &Path) -> Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    Ok(file.into())
}

fn bind_fd(fd: &OwnedFd, to: &Path, recursive: bool) -> Result<()> {
    let from = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let mut flags = MsFlags::MS_BIND;
    if recursive {
        flags |= MsFlags::MS_REC;
    }
    mount(Some(from.as_str()), to, None::<&str>, flags, None::<&str>)
        .with_context(|| format!("binding onto {}", to.display()))
}

fn bind_self(path: &Path) -> Result<()> {
    mount(
        Some(path),
        path,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .with_context(|| format!("binding {} onto itself", path.display()))
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// Sets or clears read-only on the mount at `path` (and every mount below it when
/// `recursive`), leaving its other flags as they are.
fn set_read_only(path: &Path, read_only: bool, recursive: bool) -> Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    let attr = MountAttr {
        attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 } | libc::AT_SYMLINK_NOFOLLOW;
    // SAFETY: a valid path and a `mount_attr` of the size passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            flags as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error())
            .with_context(|| format!("mount_setattr on {}", path.display()));
    }
    Ok(())
}

/// Drops every capability for good: the bounding and ambient sets emptied, root
/// given none at `exec` (securebits, locked), then the process's own sets cleared.
fn drop_capabilities(root: bool) -> Result<()> {
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40);
    // SAFETY: prctl with integer arguments.
    unsafe {
        for cap in 0..=last {
            libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0);
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
        if root {
            // SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP(_LOCKED)
            // | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE(_LOCKED)
            let bits: libc::c_ulong = 0x1 | 0x2 | 0x4 | 0x8 | 0x20 | 0x40 | 0x80;
            if libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error()).context("setting securebits");
            }
        }
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset with a v3 header and two data words.
    let r = unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error()).context("capset");
    }
    Ok(())
}

/// A seccomp filter refusing `ioctl(TIOCSTI)` (typing into the terminal, which the
/// user's shell would run once the agent exits) and `TIOCLINUX`, and every x32
/// system call (another numbering the filter would have to repeat).
fn seccomp_no_typing() -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    const ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
    #[cfg(target_arch = "aarch64")]
    const ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const ALLOW: u32 = 0x7fff_0000; // SECCOMP_RET_ALLOW
    const EPERM: u32 = 0x0005_0000 | 1; // SECCOMP_RET_ERRNO | EPERM
    const KILL: u32 = 0x8000_0000; // SECCOMP_RET_KILL_PROCESS
    let ins = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let nr_ioctl = libc::SYS_ioctl as u32;
    // seccomp_data: nr at 0, arch at 4, args[1] at 24 (its low half on little-endian).
    let filter = [
        ins(LD_W_ABS, 0, 0, 4),
        ins(JEQ_K, 1, 0, ARCH),
        ins(RET_K, 0, 0, KILL),
        ins(LD_W_ABS, 0, 0, 0),
        ins(JGE_K, 0, 1, 0x4000_0000), // __X32_SYSCALL_BIT
        ins(RET_K, 0, 0, EPERM),
        ins(JEQ_K, 0, 4, nr_ioctl),
        ins(LD_W_ABS, 0, 0, 24),
        ins(JEQ_K, 1, 0, libc::TIOCSTI as u32),
        ins(JEQ_K, 0, 1, libc::TIOCLINUX as u32),
        ins(RET_K, 0, 0, EPERM),
        ins(RET_K, 0, 0, ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: a well-formed filter program that outlives the call.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &prog as *const libc::sock_fprog as libc::c_ulong,
            0,
            0,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error()).context("prctl(PR_SET_SECCOMP)");
    }
    Ok(())
}

/// Whether this machine lets this user make the boundary: a child tries the
/// namespaces `enter` makes; and Landlock's ABI. `Err` says what is missing.
pub fn check_support() -> Result<i64> {
    use std::os::unix::process::CommandExt;
    let root = Uid::current().is_root();
    let mut probe = std::process::Command::new("/bin/true");
    // SAFETY: unshare is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        probe.pre_exec(move || {
            let flags = if root {
                CloneFlags::CLONE_NEWNS
            } else {
                CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS
            };
            unshare(flags).map_err(io::Error::from)
        });
    }
    match probe.status() {
        Ok(s) if s.success() => {}
        Ok(s) => bail!("a test of the namespaces ended with {s}"),
        Err(e) => bail!(
            "this user cannot make a {}mount namespace here: {e}",
            if root { "" } else { "user and " }
        ),
    }
    let abi = landlock_abi();
    if abi < 6 {
        bail!(
            "this kernel's Landlock is {} (ABI 6, Linux 6.12, keeps signals and abstract sockets in)",
            if abi == 0 {
                "off or missing".to_string()
            } else {
                format!("ABI {abi}")
            }
        );
    }
    Ok(abi)
}
