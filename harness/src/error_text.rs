//! How the harness prints an error: every cause once. Error types here and in the crates
//! below (thiserror's `#[error("{path}: {source}")]`) already write their source into their own
//! message, so `{:#}`, which appends each source again, repeated a cause two to four times.
//! [`chain`] walks the chain and appends only the causes the text does not already hold.

/// The error and its causes, each once, joined by ": ".
pub fn chain(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let message = cause.to_string();
        if message.is_empty() || text.contains(&message) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&message);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::chain;
    use anyhow::Context;

    #[test]
    fn a_history_error_prints_each_cause_once() {
        let text = "{\"schema_version\":1,\"workload\":\"queue\",\"seed\":1,\"start_time\":\"t\",\
                    \"nodes\":[],\"config\":{}}\n{\"index\":0,\"time\":\n{}\n";
        let error = logjam_checkers::check_reader(text.as_bytes()).unwrap_err();
        let error = anyhow::Error::new(error).context("checking the run");
        let printed = chain(&error);
        assert_eq!(printed.matches("line 2:").count(), 1, "{printed}");
        assert_eq!(printed.matches("malformed op").count(), 1, "{printed}");
        assert!(
            printed.starts_with("checking the run: <reader>: line 2"),
            "{printed}"
        );
        // What `{:#}` printed before.
        assert!(format!("{error:#}").matches("malformed op").count() > 1);
    }

    #[test]
    fn distinct_causes_are_all_kept() {
        let error = Err::<(), _>(std::io::Error::other("disk on fire"))
            .context("cannot write report.json")
            .unwrap_err();
        assert_eq!(chain(&error), "cannot write report.json: disk on fire");
    }
}
