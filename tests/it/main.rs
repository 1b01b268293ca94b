//! End-to-end tests: the real `hitl` binary, run as separate processes in temp
//! projects, driven the way agents and humans drive it. One test binary, so the suite
//! links once.

mod badinput;
mod boundary;
mod classifier;
mod cli;
mod compat;
mod crash;
mod dashboard;
mod dialog;
mod doctor;
mod failover;
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
mod readme;
mod replicas;
mod roundtrip;
mod seeds;
mod soak;
mod store;
mod support;
mod tasks;
mod tui;
mod wayback;
mod webhooks;
mod websurface;
