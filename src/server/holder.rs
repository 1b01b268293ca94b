//! Who holds a TCP port this server wanted: a listener whose configured port is
//! taken must not quietly move to another one (other users could take the one it
//! left, and with it what agents send there), so it says who holds it, and gives
//! way only to the user's own programs.

use std::net::SocketAddr;

/// The listening socket that holds a port, as the kernel's socket tables say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The OS user owning the socket.
    pub uid: u32,
    /// The process holding it, where this user may look (`pid`, its name).
    pub process: Option<(i32, String)>,
}

impl Holder {
    /// Whether this process's own user holds it.
    pub fn is_this_user(&self) -> bool {
        self.uid == crate::runtime::process::euid()
    }

    /// Who, in words: `user alice (uid 1001), pid 123 (python3)`.
    pub fn describe(&self) -> String {
        let name = nix::unistd::User::from_uid(self.uid.into())
            .ok()
            .flatten()
            .map_or_else(
                || "an unnamed user".to_string(),
                |u| format!("user {}", u.name),
            );
        let mut said = format!("{name} (uid {})", self.uid);
        if let Some((pid, comm)) = &self.process {
            said.push_str(&format!(", pid {pid} ({comm})"));
        }
        said
    }
}

/// The listening socket on `addr`'s port that a bind of `addr` collides with (the
/// same address, or a wildcard one); `None` when the tables show none.
pub fn holder(addr: SocketAddr) -> Option<Holder> {
    let entries = procfs::net::tcp()
        .into_iter()
        .flatten()
        .chain(procfs::net::tcp6().into_iter().flatten());
    let found = entries.into_iter().find(|e| {
        e.state == procfs::net::TcpState::Listen
            && e.local_address.port() == addr.port()
            && (e.local_address.ip() == addr.ip()
                || e.local_address.ip().is_unspecified()
                || addr.ip().is_unspecified())
    })?;
    Some(Holder {
        uid: found.uid,
        process: process_with_socket(found.inode),
    })
}

/// The process with socket `inode` open, among those this user may look into.
fn process_with_socket(inode: u64) -> Option<(i32, String)> {
    let target = format!("socket:[{inode}]");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == target.as_str())
        });
        if holds {
            let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            return Some((pid, comm.trim_end().to_string()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_this_process_listens_on_is_held_by_this_user_and_process() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let h = holder(l.local_addr().unwrap()).expect("found in the socket table");
        assert!(h.is_this_user());
        assert_eq!(h.process.unwrap().0, std::process::id() as i32);
        drop(l);
    }
}
