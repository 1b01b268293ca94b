//! How this process runs, below everything else: its allocator, its logging, the
//! fast paths' switch, other processes by pid, and the TLS its outbound connections
//! use. Nothing here knows of requests.

pub mod allocator;
pub mod logging;
pub mod process;
pub mod tls;
pub mod tuning;
