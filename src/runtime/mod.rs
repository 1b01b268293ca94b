//! How this process runs, below everything else: its allocator, its logging, the
//! fast paths' switch, and other processes by pid. Nothing here knows of requests.

pub mod allocator;
pub mod logging;
pub mod process;
pub mod tuning;
