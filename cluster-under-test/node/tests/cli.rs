//! The `logjam-node` command line: started as `kafka-server-start.sh server.properties` is, with
//! the properties file as the positional argument; `--config FILE` is still accepted (the other
//! tests start nodes that way); naming the file both ways, or not at all, is a usage error.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn node() -> Command {
    Command::new(env!("CARGO_BIN_EXE_logjam-node"))
}

#[test]
fn the_properties_file_is_a_positional_argument_as_for_kafka_server_start() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let path = dir.path().join("server.properties");
    std::fs::write(
        &path,
        common::config_text(&dir.path().join("data"), port, ""),
    )
    .unwrap();
    let mut child = node()
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let serving = loop {
        if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
            break true;
        }
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        serving,
        "logjam-node {} did not serve on {address}",
        path.display()
    );
}

#[test]
fn naming_the_file_twice_or_not_at_all_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.properties");
    std::fs::write(&path, "node.id=1\n").unwrap();
    let both = node()
        .arg(&path)
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2), "{both:?}");
    let neither = node().output().unwrap();
    assert_eq!(neither.status.code(), Some(2), "{neither:?}");
    assert!(String::from_utf8_lossy(&neither.stderr).contains("SERVER_PROPERTIES"));
}
