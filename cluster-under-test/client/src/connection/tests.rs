//! Tests of `connection.rs`.

use super::*;

#[test]
fn negotiation_picks_the_highest_common_version_below_our_ceiling() {
    // 12 is negotiated; non-TV2 producers cap their requests at 11 (`send_capped`).
    assert_eq!(negotiate_version(ApiKey::Produce, 3, 13), Some(12));
    assert_eq!(negotiate_version(ApiKey::Produce, 3, 9), Some(9));
    assert_eq!(negotiate_version(ApiKey::Fetch, 13, 18), None);
    assert_eq!(negotiate_version(ApiKey::JoinGroup, 0, 9), Some(9));
    assert_eq!(negotiate_version(ApiKey::OffsetFetch, 1, 9), Some(7));
    assert_eq!(negotiate_version(ApiKey::DescribeGroups, 0, 5), None);
}

/// A fake broker that answers requests in order after reading them all: proves requests
/// are pipelined (several in flight) and matched to their responses by order and id.
#[tokio::test]
async fn pipelined_requests_are_matched_to_their_responses() {
    use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut frames = Vec::new();
        // ApiVersions, then three metadata requests read before any is answered.
        for expected in 0..4 {
            let size = socket.read_i32().await.unwrap();
            let mut frame = vec![0u8; size as usize];
            socket.read_exact(&mut frame).await.unwrap();
            let mut bytes = Bytes::from(frame);
            let key = ApiKey::try_from((&bytes[..2]).get_i16()).unwrap();
            let version = (&bytes[2..4]).get_i16();
            let header =
                RequestHeader::decode(&mut bytes, key.request_header_version(version)).unwrap();
            frames.push((key, version, header.correlation_id));
            if expected == 0 {
                let response = ApiVersionsResponse::default().with_api_keys(vec![
                    kafka_protocol::messages::api_versions_response::ApiVersion::default()
                        .with_api_key(ApiKey::Metadata as i16)
                        .with_min_version(0)
                        .with_max_version(12),
                ]);
                write_response(&mut socket, key, version, header.correlation_id, &response).await;
            }
        }
        for (key, version, correlation_id) in frames.into_iter().skip(1) {
            let response = MetadataResponse::default()
                .with_controller_id(kafka_protocol::messages::BrokerId(correlation_id));
            write_response(&mut socket, key, version, correlation_id, &response).await;
        }
    });
    let connection = Arc::new(
        Connection::connect(&address, "test", Duration::from_secs(5))
            .await
            .unwrap(),
    );
    assert_eq!(connection.version(ApiKey::Metadata), Some(12));
    assert_eq!(connection.version(ApiKey::Produce), None);
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let connection = connection.clone();
            tokio::spawn(async move {
                connection
                    .send(
                        ApiKey::Metadata,
                        &MetadataRequest::default(),
                        Duration::from_secs(5),
                    )
                    .await
            })
        })
        .collect();
    let mut controllers = Vec::new();
    for call in calls {
        controllers.push(call.await.unwrap().unwrap().controller_id.0);
    }
    controllers.sort();
    assert_eq!(controllers, vec![1, 2, 3]);
    let error = connection
        .send(
            ApiKey::Metadata,
            &MetadataRequest::default(),
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::Transport {
                failure: TransportFailure::DisconnectedAfterWrite,
                ..
            } | Error::Transport {
                failure: TransportFailure::DisconnectedBeforeWrite,
                ..
            }
        ),
        "{error:?}"
    );
}

async fn write_response<T: Encodable>(
    socket: &mut TcpStream,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, key.response_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    let length = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&length.to_be_bytes());
    socket.write_all(&buf).await.unwrap();
}
