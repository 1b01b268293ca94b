//! End-to-end tests: the real `hitl` binary, run as separate processes in temp
//! projects, driven the way agents and humans drive it. One test binary, so the suite
//! links once.

/// The tests' own HTTP clients (reqwest, built without a TLS provider of its own, as
/// hitl is) need rustls's provider installed before the first one is built: done as
/// the test binary loads, before any test runs, from the ELF's initialisers.
#[used]
#[unsafe(link_section = ".init_array")]
static INSTALL_TLS_PROVIDER: extern "C" fn() = {
    extern "C" fn install() {
        hitl::runtime::tls::install_default_provider();
    }
    install
};

mod badinput;
mod boundary;
mod classifier;
mod cli;
mod codex;
mod compat;
mod crash;
mod dashboard;
mod devices;
mod dialog;
mod doctor;
mod failover;
mod gemini;
mod golden;
mod guard;
mod hook;
mod http;
mod human;
mod kept;
mod layering;
mod mailbox;
mod mcp;
mod notify;
mod presence;
mod push;
mod readme;
mod replicas;
mod roundtrip;
mod seeds;
mod slack;
mod soak;
mod store;
mod support;
mod tasks;
mod telegram;
mod tls;
mod tui;
mod wayback;
mod webhooks;
mod websurface;
