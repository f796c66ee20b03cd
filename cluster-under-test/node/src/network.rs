//! The network layer: the client listener and its connections ([`server`]), the wire codec
//! ([`codec`]: the one place that turns bytes into requests and responses into bytes), the
//! dispatch of a client's frame to its handler ([`framing`]), and the one client every
//! node-to-node request goes through ([`client::NodeClient`]).

pub mod client;
pub mod codec;
pub mod framing;
pub mod server;

pub use client::{ClientError, NodeClient};
