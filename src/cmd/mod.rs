//! The commands behind the CLI, one file each. `main.rs` parses flags and calls these;
//! they return errors with context, and `main` turns them into exit codes.

pub mod answer;
pub mod ask;
pub mod dashboard;
pub mod demo;
pub mod devices;
pub mod doctor;
pub mod gc;
pub mod human;
pub mod init;
pub mod inspect;
pub mod listen;
pub mod mailbox;
pub mod rules;
pub mod run;
pub mod serve;
pub mod service;
pub mod task;
pub mod token;
