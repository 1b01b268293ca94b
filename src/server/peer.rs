//! Which OS user is at the other end of a loopback TCP connection.
//!
//! Loopback alone says nothing about who is calling: any user on the machine can
//! connect. The kernel knows who owns the client's socket; asking it costs one
//! `sock_diag` netlink query for that exact socket (tens of microseconds, however many
//! sockets the machine has), where reading `/proc/net/tcp` for it costs milliseconds
//! on a busy machine. The table stays as the fallback where netlink is refused.

use std::{io, net::SocketAddr};

use netlink_packet_core::{NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload};
use netlink_packet_sock_diag::{
    SockDiagMessage,
    constants::{AF_INET, AF_INET6, IPPROTO_TCP, TCP_TIME_WAIT},
    inet::{ExtensionFlags, InetRequest, SocketId, StateFlags},
};
use netlink_sys::{Socket, SocketAddr as NetlinkAddr, protocols::NETLINK_SOCK_DIAG};

/// The OS user owning the client's end (`client`) of a live TCP connection to
/// `server`; `None` when the kernel has no such socket (the client is gone, or it is
/// not on this machine).
pub fn owner(client: SocketAddr, server: SocketAddr) -> Option<u32> {
    match by_sock_diag(client, server) {
        Ok(uid) => uid,
        Err(e) => {
            tracing::debug!("sock_diag refused ({e}); reading the socket table instead");
            by_socket_table(client, server)
        }
    }
}

/// Asks `sock_diag` for the one socket whose local end is `client` and remote end
/// `server`. A socket in TIME_WAIT is owned by nobody in particular (uid 0): only a
/// live one counts.
fn by_sock_diag(client: SocketAddr, server: SocketAddr) -> io::Result<Option<u32>> {
    let socket = Socket::new(NETLINK_SOCK_DIAG)?;
    let mut header = NetlinkHeader::default();
    // No NLM_F_DUMP: the kernel looks up this exact socket.
    header.flags = NLM_F_REQUEST;
    let request = InetRequest {
        family: if client.is_ipv4() { AF_INET } else { AF_INET6 },
        protocol: IPPROTO_TCP,
        extensions: ExtensionFlags::empty(),
        states: StateFlags::all(),
        socket_id: SocketId {
            source_port: client.port(),
            destination_port: server.port(),
            source_address: client.ip(),
            destination_address: server.ip(),
            interface_id: 0,
            // INET_DIAG_NOCOOKIE: any socket with these addresses.
            cookie: [0xff; 8],
        },
    };
    let mut message = NetlinkMessage::new(header, SockDiagMessage::InetRequest(request).into());
    message.finalize();
    let mut out = vec![0; message.buffer_len()];
    message.serialize(&mut out);
    socket.send_to(&out, &NetlinkAddr::new(0, 0), 0)?;

    let mut reply = Vec::with_capacity(8192);
    socket.recv(&mut reply, 0)?;
    let reply = NetlinkMessage::<SockDiagMessage>::deserialize(&reply)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    match reply.payload {
        NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
            Ok((r.header.state != TCP_TIME_WAIT).then_some(r.header.uid))
        }
        // No such socket.
        NetlinkPayload::Error(e) if e.raw_code() == -nix::libc::ENOENT => Ok(None),
        NetlinkPayload::Error(e) => Err(e.to_io()),
        _ => Ok(None),
    }
}

/// The same from `/proc/net/tcp` (or `tcp6`), read whole.
fn by_socket_table(client: SocketAddr, server: SocketAddr) -> Option<u32> {
    let table = if client.is_ipv4() {
        procfs::net::tcp()
    } else {
        procfs::net::tcp6()
    };
    table
        .ok()?
        .into_iter()
        .find(|e| {
            e.local_address == client
                && e.remote_address == server
                && e.state == procfs::net::TcpState::Established
        })
        .map(|e| e.uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_says_who_owns_each_end() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let client = std::net::TcpStream::connect(addr).unwrap();
        let (_accepted, client_addr) = server.accept().unwrap();
        let me = nix::unistd::geteuid().as_raw();
        assert_eq!(by_sock_diag(client_addr, addr).unwrap(), Some(me));
        assert_eq!(by_socket_table(client_addr, addr), Some(me));
        assert_eq!(owner(client_addr, addr), Some(me));
        // Nobody at a port no one uses.
        let nowhere = SocketAddr::from(([127, 0, 0, 1], 1));
        assert_eq!(owner(nowhere, addr), None);
        drop(client);
    }
}
