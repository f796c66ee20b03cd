//! DescribeConfigs' part of the version sweep: the sweep topic's `min.insync.replicas`, asked
//! by key with synonyms at every version: the broker default (1, `DEFAULT_CONFIG` from v1), its
//! synonym, and from v3 its type (INT).

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, RequestKind, ResponseKind};

use super::{TOPIC, text};

const KEY: &str = "min.insync.replicas";

pub fn request_for(key: ApiKey) -> Option<RequestKind> {
    (key == ApiKey::DescribeConfigs).then(|| {
        RequestKind::DescribeConfigs(
            DescribeConfigsRequest::default()
                .with_include_synonyms(true)
                .with_resources(vec![
                    DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(text(TOPIC))
                        .with_configuration_keys(Some(vec![text(KEY)])),
                ]),
        )
    })
}

pub fn check(version: i16, response: &ResponseKind) -> Option<Result<(), String>> {
    let ResponseKind::DescribeConfigs(response) = response else {
        return None;
    };
    let result = response.results.first();
    let config = result.and_then(|r| r.configs.first());
    let ok = result.is_some_and(|r| r.error_code == 0 && r.configs.len() == 1)
        && config.is_some_and(|c| {
            c.name.as_str() == KEY
                && c.value.as_ref().map(|v| v.as_str()) == Some("1")
                && c.config_source == 5
                && c.synonyms.first().is_some_and(|s| s.name.as_str() == KEY)
                && (version < 3 || c.config_type == 3)
        });
    Some(if ok {
        Ok(())
    } else {
        Err(format!("{response:?}"))
    })
}
