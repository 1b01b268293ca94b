//! Responders: the ways a human (or a test) answers. Each one is an adapter over a
//! [`crate::broker::BrokerHandle`]; none of them touches the spool or another UI.

pub mod terminal;
