//! The network layer: the client listener and its connections ([`server`]), the one place that
//! turns bytes into requests and responses into bytes ([`framing`]), and the one client every
//! node-to-node request goes through ([`client::NodeClient`]).

pub mod client;
pub mod framing;
pub mod server;

pub use client::{ClientError, NodeClient};
