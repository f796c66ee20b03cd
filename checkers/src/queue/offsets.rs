//! Offset/value agreement: `inconsistent-offsets` and `duplicate`.
//!
//! - **inconsistent-offsets**: one offset of a key holds two or more distinct values, across
//!   every poll (any outcome) and every send with a known offset in a committed op. A log
//!   position has exactly one record; two values there mean the log was rewritten (e.g. a
//!   truncation after an unclean leader election, then new writes at the same offsets).
//! - **duplicate**: one value of a key sits at two or more distinct offsets. Values are sent
//!   once, so the log holds a record twice (e.g. a producer retry without idempotence).
//!
//! Source: Jepsen `jepsen.tests.kafka` (`version-orders` errors, `duplicate-cases`).

use logjam_history::{Offset, Value};

use crate::anomaly::{Anomalies, Anomaly, AnomalyKind};
use crate::fxhash::FxHashMap;
use crate::queue::index::{OpId, QueueIndex};

/// Reports both kinds.
pub(crate) fn check(index: &QueueIndex, out: &mut Anomalies) {
    for log in &index.keys {
        // inconsistent-offsets
        for slot in log.log.iter().filter(|s| !s.others.is_empty()) {
            let observed: Vec<(Value, OpId)> = std::iter::once((slot.value, slot.observer))
                .chain(slot.others.iter().copied())
                .collect();
            let listing: Vec<String> = observed
                .iter()
                .map(|(v, op)| format!("{v} (seen by {})", index.describe(*op)))
                .collect();
            let mut anomaly = Anomaly::new(
                AnomalyKind::InconsistentOffsets,
                Some(log.key),
                format!(
                    "offset {} of key {} holds {} different values: {}; a log position holds one \
                     record, so the log was rewritten there",
                    slot.offset,
                    log.key,
                    observed.len(),
                    listing.join(", ")
                ),
            );
            anomaly.offsets.push(slot.offset);
            anomaly.values = observed.iter().map(|o| o.0).collect();
            anomaly.ops = observed.iter().map(|o| index.op_ref(o.1)).collect();
            out.push(anomaly);
        }

        // duplicate
        let duplicated: FxHashMap<Value, Vec<(Offset, OpId)>> = log
            .values
            .iter()
            .filter(|(_, info)| info.offset_count >= 2)
            .map(|(v, _)| (Value(v), Vec::new()))
            .collect();
        if duplicated.is_empty() {
            continue;
        }
        let mut duplicated = duplicated;
        for slot in &log.log {
            let values =
                std::iter::once((slot.value, slot.observer)).chain(slot.others.iter().copied());
            for (value, observer) in values {
                if let Some(places) = duplicated.get_mut(&value) {
                    places.push((slot.offset, observer));
                }
            }
        }
        let mut duplicated: Vec<(Value, Vec<(Offset, OpId)>)> = duplicated.into_iter().collect();
        duplicated.sort_by_key(|(v, _)| *v);
        for (value, places) in duplicated {
            let offsets: Vec<String> = places.iter().map(|p| p.0.to_string()).collect();
            let mut anomaly = Anomaly::new(
                AnomalyKind::Duplicate,
                Some(log.key),
                format!(
                    "value {value} of key {} appears at {} offsets ({}); each value is sent once, \
                     so the log stores the same record more than once",
                    log.key,
                    places.len(),
                    offsets.join(", ")
                ),
            );
            anomaly.values.push(value);
            anomaly.offsets = places.iter().map(|p| p.0).collect();
            anomaly.ops = places.iter().map(|p| index.op_ref(p.1)).collect();
            out.push(anomaly);
        }
    }
}
