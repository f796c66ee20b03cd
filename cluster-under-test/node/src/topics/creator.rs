//! [`TopicCreator`]: topic creation as a broker does it (the handle CreateTopics,
//! CreatePartitions and Metadata's auto-creation get): the request goes to the active controller (local or remote), and the
//! answer waits until the created topics are in this broker's image and applied to its
//! replicas, so a client can produce to them at once.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::controller::Quorum;
use crate::replica::ReplicaManager;
use crate::topics::{CreateTopicError, TopicInfo};

/// How long a broker waits for its controller to answer a topic creation.
const CONTROLLER_TIMEOUT: Duration = Duration::from_secs(30);

/// Creates topics through the active controller.
#[derive(Debug, Clone)]
pub struct TopicCreator {
    quorum: Arc<Quorum>,
    replicas: Arc<ReplicaManager>,
}

impl TopicCreator {
    /// A creator forwarding through `quorum` and applying the result to `replicas`.
    pub fn new(quorum: Arc<Quorum>, replicas: Arc<ReplicaManager>) -> TopicCreator {
        TopicCreator { quorum, replicas }
    }

    /// Whether a topic named `name` exists in this broker's image.
    pub fn exists(&self, name: &str) -> bool {
        self.replicas.image().topics.contains_key(name)
    }

    /// Sends a CreateTopics request to the active controller and waits until the topics it
    /// created are in this broker's image (so a client can use them at once). Topics the
    /// controller did not answer fail with `REQUEST_TIMED_OUT`.
    pub async fn create_topics(&self, request: CreateTopicsRequest) -> CreateTopicsResponse {
        let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0))
            .clamp(Duration::from_secs(1), CONTROLLER_TIMEOUT);
        let names: Vec<TopicName> = request.topics.iter().map(|t| t.name.clone()).collect();
        let validate_only = request.validate_only;
        let response = match self
            .quorum
            .forward(RequestKind::CreateTopics(request), timeout)
            .await
        {
            Some(ResponseKind::CreateTopics(response)) => response,
            _ => return timed_out(&names),
        };
        if !validate_only {
            let created: Vec<String> = response
                .topics
                .iter()
                .filter(|t| t.error_code == 0)
                .map(|t| t.name.to_string())
                .collect();
            let mut images = self.quorum.subscribe_image();
            let deadline = tokio::time::Instant::now() + timeout;
            loop {
                let visible = {
                    let image = images.borrow_and_update();
                    created.iter().all(|name| image.topics.contains_key(name))
                };
                if visible
                    || tokio::time::timeout_at(deadline, images.changed())
                        .await
                        .map_or(true, |changed| changed.is_err())
                {
                    break;
                }
            }
            if !created.is_empty() {
                let replicas = Arc::clone(&self.replicas);
                let _ = tokio::task::spawn_blocking(move || replicas.apply_image()).await;
            }
        }
        response
    }

    /// Sends a CreatePartitions request to the active controller and waits until every topic
    /// it grew has its new partition count in this broker's image (applied to its replicas).
    /// Topics the controller did not answer fail with `REQUEST_TIMED_OUT`.
    pub async fn create_partitions(
        &self,
        request: CreatePartitionsRequest,
    ) -> CreatePartitionsResponse {
        let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0))
            .clamp(Duration::from_secs(1), CONTROLLER_TIMEOUT);
        let wanted: Vec<(TopicName, i32)> = request
            .topics
            .iter()
            .map(|t| (t.name.clone(), t.count))
            .collect();
        let validate_only = request.validate_only;
        let response = match self
            .quorum
            .forward(RequestKind::CreatePartitions(request), timeout)
            .await
        {
            Some(ResponseKind::CreatePartitions(response)) => response,
            _ => {
                return CreatePartitionsResponse::default().with_results(
                    wanted
                        .into_iter()
                        .map(|(name, _)| {
                            CreatePartitionsTopicResult::default()
                                .with_name(name)
                                .with_error_code(ResponseError::RequestTimedOut.code())
                        })
                        .collect(),
                );
            }
        };
        let grown: Vec<(String, usize)> = response
            .results
            .iter()
            .filter(|r| r.error_code == 0 && !validate_only)
            .filter_map(|r| {
                let count = wanted.iter().find(|(name, _)| *name == r.name)?.1;
                Some((r.name.to_string(), usize::try_from(count).ok()?))
            })
            .collect();
        if !grown.is_empty() {
            let mut images = self.quorum.subscribe_image();
            let deadline = tokio::time::Instant::now() + timeout;
            loop {
                let visible = {
                    let image = images.borrow_and_update();
                    grown.iter().all(|(name, count)| {
                        image
                            .topics
                            .get(name)
                            .is_some_and(|t| t.partitions.len() >= *count)
                    })
                };
                if visible
                    || tokio::time::timeout_at(deadline, images.changed())
                        .await
                        .map_or(true, |changed| changed.is_err())
                {
                    break;
                }
            }
            let replicas = Arc::clone(&self.replicas);
            let _ = tokio::task::spawn_blocking(move || replicas.apply_image()).await;
        }
        response
    }

    /// Creates one topic and waits for it, for synchronous callers (tests). Must not be called
    /// on a tokio worker thread.
    ///
    /// # Errors
    /// [`CreateTopicError`] from the controller's answer.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: Option<i32>,
        replication_factor: Option<i16>,
        configs: &[(String, String)],
    ) -> Result<TopicInfo, CreateTopicError> {
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                    .with_num_partitions(partitions.unwrap_or(-1))
                    .with_replication_factor(replication_factor.unwrap_or(-1))
                    .with_configs(
                        configs
                            .iter()
                            .map(|(key, value)| {
                                CreatableTopicConfig::default()
                                    .with_name(StrBytes::from_string(key.clone()))
                                    .with_value(Some(StrBytes::from_string(value.clone())))
                            })
                            .collect(),
                    ),
            ]);
        let response = self
            .quorum
            .forward_blocking(RequestKind::CreateTopics(request), CONTROLLER_TIMEOUT);
        let Some(ResponseKind::CreateTopics(response)) = response else {
            return Err(CreateTopicError::Controller(ResponseError::RequestTimedOut));
        };
        let code = response.topics.first().map_or(-1, |t| t.error_code);
        if code != 0 {
            let error =
                ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError);
            return Err(match error {
                ResponseError::TopicAlreadyExists => CreateTopicError::AlreadyExists,
                other => CreateTopicError::Controller(other),
            });
        }
        let deadline = std::time::Instant::now() + CONTROLLER_TIMEOUT;
        loop {
            if let Some(topic) = self.replicas.topic_by_name(name) {
                self.replicas.apply_image();
                return Ok(topic);
            }
            if std::time::Instant::now() > deadline {
                return Err(CreateTopicError::Controller(ResponseError::RequestTimedOut));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn timed_out(names: &[TopicName]) -> CreateTopicsResponse {
    CreateTopicsResponse::default().with_topics(
        names
            .iter()
            .map(|name| {
                kafka_protocol::messages::create_topics_response::CreatableTopicResult::default()
                    .with_name(name.clone())
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_error_code(ResponseError::RequestTimedOut.code())
            })
            .collect(),
    )
}
