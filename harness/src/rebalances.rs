//! What the group coordinators said about a group's rebalances, read from the nodes' logs:
//! every rebalance a coordinator started with its cause in the seed's terms (`join`, `leave`,
//! `session-timeout`, `poll-timeout`, `static-member-replaced`, `metadata-change`,
//! `coordinator-moved`, `write-failed`), and every load of the group by a new coordinator.
//! Pure: the run's scenario judge and summary give it the log text.
//!
//! The lines it reads (tracing's text format; values quoted or not):
//!
//! ```text
//! 2026-12-03T09:10:11.123456Z  INFO logjam_node::…: group rebalance started group="g" cause="leave" generation=3
//! 2026-12-03T09:10:11.123456Z  INFO logjam_node::…: consumer group rebalance group=g cause=join epoch=4
//! 2026-12-03T09:10:11.123456Z  INFO logjam_node::…: group loaded by a new coordinator group="g" cause="coordinator-moved" generation=3 leader_epoch=2
//! 2026-12-03T09:10:11.123456Z  INFO logjam_node::…: consumer group loaded by a new coordinator group=g cause=coordinator-moved epoch=4 leader_epoch=2
//! ```

use std::collections::BTreeMap;

use serde::Serialize;

/// What a coordinator logged about a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// It started a rebalance (classic: a new join phase; KIP-848: a new group epoch).
    Rebalance,
    /// It loaded the group from `__consumer_offsets` with members in it (a new coordinator,
    /// after a move or a restart); not a rebalance by itself.
    Loaded,
}

/// One thing a coordinator said about a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupEvent {
    /// When, in ms since the Unix epoch (the log line's UTC timestamp).
    pub at_ms: i64,
    /// The node whose log said it.
    pub node: String,
    /// Rebalance or load.
    pub kind: EventKind,
    /// The cause, in the seed's terms.
    pub cause: String,
    /// The generation (classic) or group epoch (KIP-848) it named, if any.
    pub generation: Option<i32>,
}

/// The messages read, and what they are.
const MESSAGES: &[(&str, EventKind)] = &[
    ("group rebalance started", EventKind::Rebalance),
    ("consumer group rebalance", EventKind::Rebalance),
    (
        "consumer group loaded by a new coordinator",
        EventKind::Loaded,
    ),
    ("group loaded by a new coordinator", EventKind::Loaded),
];

/// The events about `group` in one node's log text, in log order. Lines that are not such
/// events, or are torn, are skipped.
pub fn parse_log(node: &str, text: &str, group: &str) -> Vec<GroupEvent> {
    text.lines()
        .filter_map(|line| parse_line(node, line, group))
        .collect()
}

fn parse_line(node: &str, line: &str, group: &str) -> Option<GroupEvent> {
    // The longest message first: "consumer group loaded…" also contains "group loaded…".
    let (position, message, kind) = MESSAGES
        .iter()
        .filter_map(|(message, kind)| line.find(message).map(|at| (at, *message, kind)))
        .min_by_key(|(at, message, _)| (*at, usize::MAX - message.len()))?;
    let fields = fields(&line[position + message.len()..]);
    if fields.get("group").map(String::as_str) != Some(group) {
        return None;
    }
    let at_ms = parse_timestamp(line.split_whitespace().next()?)?;
    Some(GroupEvent {
        at_ms,
        node: node.to_owned(),
        kind: kind.clone(),
        cause: fields.get("cause")?.clone(),
        generation: fields
            .get("generation")
            .or_else(|| fields.get("epoch"))
            .and_then(|g| g.parse().ok()),
    })
}

/// `key=value` pairs after the message; values may be quoted (no spaces inside, as our
/// group ids and causes have none).
fn fields(text: &str) -> BTreeMap<String, String> {
    text.split_whitespace()
        .filter_map(|word| word.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.trim_matches('"').to_owned()))
        .collect()
}

/// `2026-12-03T09:10:11.123456Z` as ms since the Unix epoch.
fn parse_timestamp(text: &str) -> Option<i64> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date = date.split('-').map(|part| part.parse::<i64>().ok());
    let (year, month, day) = (date.next()??, date.next()??, date.next()??);
    let (hms, fraction) = time.split_once('.').unwrap_or((time, "0"));
    let mut hms = hms.split(':').map(|part| part.parse::<i64>().ok());
    let (hour, minute, second) = (hms.next()??, hms.next()??, hms.next()??);
    let millis: i64 = format!("{fraction:0<3}")[..3].parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Counts per cause of the rebalances (not loads) in `events`.
pub fn causes(events: &[GroupEvent]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for event in events.iter().filter(|e| e.kind == EventKind::Rebalance) {
        *counts.entry(event.cause.clone()).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
2026-12-03T09:10:11.123456Z  INFO logjam_node::coordinator::group::members: group rebalance started group=\"logjam-members\" cause=\"leave\" generation=3
2026-12-03T09:10:12.000001Z  INFO logjam_node::coordinator::group::members: group rebalance started group=\"other\" cause=\"join\" generation=1
2026-12-03T09:10:13.5Z  INFO logjam_node::coordinator::group::clocks: consumer group rebalance group=logjam-members cause=session-timeout epoch=7
2026-12-03T09:10:14.250000Z  INFO logjam_node::coordinator::group::clocks: consumer group loaded by a new coordinator group=logjam-members cause=coordinator-moved epoch=7 leader_epoch=2
2026-12-03T09:10:15.000000Z  INFO logjam_node::coordinator::group::members: group loaded by a new coordinator group=\"logjam-members\" cause=\"coordinator-moved\" generation=4 leader_epoch=3
2026-12-03T09:10:16.000000Z  INFO logjam_node: produce group=\"logjam-members\"
2026-12-03T09:10:1";

    #[test]
    fn the_groups_events_are_read_with_their_causes_and_times() {
        let events = parse_log("n2", LOG, "logjam-members");
        let summary: Vec<(i64, &EventKind, &str, Option<i32>)> = events
            .iter()
            .map(|e| (e.at_ms % 100_000, &e.kind, e.cause.as_str(), e.generation))
            .collect();
        assert_eq!(
            summary,
            [
                (11_123, &EventKind::Rebalance, "leave", Some(3)),
                (13_500, &EventKind::Rebalance, "session-timeout", Some(7)),
                (14_250, &EventKind::Loaded, "coordinator-moved", Some(7)),
                (15_000, &EventKind::Loaded, "coordinator-moved", Some(4)),
            ]
        );
        assert!(events.iter().all(|e| e.node == "n2"));
        let counts = causes(&events);
        assert_eq!(counts.get("leave"), Some(&1));
        assert_eq!(counts.get("session-timeout"), Some(&1));
        assert_eq!(
            counts.get("coordinator-moved"),
            None,
            "a load is no rebalance"
        );
    }

    #[test]
    fn timestamps_are_unix_milliseconds() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_timestamp("2026-12-03T09:10:11.123456Z"),
            Some(1_796_289_011_123)
        );
        assert_eq!(
            parse_timestamp("2000-02-29T00:00:01.5Z"),
            Some(951_782_401_500)
        );
        assert_eq!(parse_timestamp("2026-13-03T09:10:11Z"), None);
        assert_eq!(parse_timestamp("garbage"), None);
    }
}
