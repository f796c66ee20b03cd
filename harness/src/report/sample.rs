//! Downsampling for the plots, so a million-op history still makes a page of a few MB: the
//! run's time is cut into buckets; in each, every `fail` and `info` op and every op an anomaly
//! names is kept, and of the `ok` ops only the fastest, the slowest and a few spread evenly
//! between. Throughput is counted per bucket from every op (nothing is dropped there).

use std::collections::{BTreeMap, BTreeSet};

use super::history::{Outcome, Point};

/// Latency points kept: see the module doc.
///
/// `buckets` time buckets over `[0, end_s]`, at most `ok_per_bucket` ok points per bucket
/// (at least the fastest and the slowest when 2 or more).
pub fn latency_points(
    points: &[Point],
    end_s: f64,
    buckets: usize,
    ok_per_bucket: usize,
    named: &BTreeSet<u64>,
) -> Vec<Point> {
    let buckets = buckets.max(1);
    let width = (end_s / buckets as f64).max(1e-9);
    let bucket_of = |time_s: f64| ((time_s / width) as usize).min(buckets - 1);
    // The ok points of each bucket, by position in `points`.
    let mut ok: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut keep = vec![false; points.len()];
    for (i, point) in points.iter().enumerate() {
        if point.outcome != Outcome::Ok || named.contains(&point.index) {
            keep[i] = true;
        } else {
            ok.entry(bucket_of(point.time_s)).or_default().push(i);
        }
    }
    for members in ok.values() {
        if members.len() <= ok_per_bucket {
            members.iter().for_each(|&i| keep[i] = true);
            continue;
        }
        let latency = |i: &&usize| points[**i].latency_ms;
        let fastest = members
            .iter()
            .min_by(|a, b| latency(a).total_cmp(&latency(b)));
        let slowest = members
            .iter()
            .max_by(|a, b| latency(a).total_cmp(&latency(b)));
        let mut chosen: Vec<usize> = fastest.into_iter().chain(slowest).copied().collect();
        let spread = ok_per_bucket.saturating_sub(chosen.len());
        for k in 0..spread {
            chosen.push(members[(2 * k + 1) * members.len() / (2 * spread)]);
        }
        chosen.into_iter().for_each(|i| keep[i] = true);
    }
    points
        .iter()
        .zip(keep)
        .filter_map(|(point, kept)| kept.then_some(*point))
        .collect()
}

/// One throughput line: function, outcome, `(bucket start s, completions/s)` points.
pub type Series = (String, Outcome, Vec<(f64, f64)>);

/// Completions per second of each (function, outcome) with any, per time bucket of
/// `width_s` seconds over `[0, end_s]`: `(bucket start, rate)` pairs.
pub fn throughput(points: &[Point], functions: &[String], end_s: f64, width_s: f64) -> Vec<Series> {
    let width_s = width_s.max(1e-3);
    let buckets = ((end_s / width_s).ceil() as usize).max(1);
    let mut counts: BTreeMap<(usize, Outcome), Vec<u64>> = BTreeMap::new();
    for point in points {
        let bucket = ((point.time_s / width_s) as usize).min(buckets - 1);
        counts
            .entry((point.f, point.outcome))
            .or_insert_with(|| vec![0; buckets])[bucket] += 1;
    }
    counts
        .into_iter()
        .map(|((f, outcome), counts)| {
            let series = counts
                .iter()
                .enumerate()
                .map(|(b, &n)| (b as f64 * width_s, n as f64 / width_s))
                .collect();
            let name = functions.get(f).cloned().unwrap_or_default();
            (name, outcome, series)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(index: u64, time_s: f64, latency_ms: f64, outcome: Outcome) -> Point {
        Point {
            index,
            time_s,
            latency_ms,
            outcome,
            f: 0,
        }
    }

    #[test]
    fn every_fail_info_and_named_op_stays_and_ok_ops_are_thinned_per_bucket() {
        let mut points = Vec::new();
        for i in 0..10_000u64 {
            let outcome = match i % 100 {
                0 => Outcome::Fail,
                1 => Outcome::Info,
                _ => Outcome::Ok,
            };
            points.push(point(i, i as f64 / 100.0, (i % 37) as f64 + 1.0, outcome));
        }
        // Named ok ops, one of them the slowest of nothing special.
        let named = BTreeSet::from([5, 6, 9_999]);
        let kept = latency_points(&points, 100.0, 10, 4, &named);
        let indexes: BTreeSet<u64> = kept.iter().map(|p| p.index).collect();
        for p in &points {
            if p.outcome != Outcome::Ok || named.contains(&p.index) {
                assert!(indexes.contains(&p.index), "op {} dropped", p.index);
            }
        }
        let ok = kept
            .iter()
            .filter(|p| p.outcome == Outcome::Ok && !named.contains(&p.index))
            .count();
        assert!(ok <= 10 * 4, "{ok} ok points kept");
        // Each bucket keeps its fastest (1 ms) and slowest (37 ms) ok op.
        for bucket in 0..10 {
            let in_bucket: Vec<&Point> = kept
                .iter()
                .filter(|p| p.outcome == Outcome::Ok && (p.time_s / 10.0) as usize == bucket)
                .collect();
            assert!(in_bucket.iter().any(|p| p.latency_ms == 1.0));
            assert!(in_bucket.iter().any(|p| p.latency_ms == 37.0));
        }
        // Order is kept.
        assert!(kept.windows(2).all(|w| w[0].index < w[1].index));
    }

    #[test]
    fn small_histories_are_kept_whole() {
        let points: Vec<Point> = (0..50)
            .map(|i| point(i, i as f64, 2.0, Outcome::Ok))
            .collect();
        assert_eq!(
            latency_points(&points, 50.0, 100, 4, &BTreeSet::new()),
            points
        );
    }

    #[test]
    fn throughput_counts_every_op_per_second() {
        let points: Vec<Point> = (0..30)
            .map(|i| point(i, i as f64 / 10.0, 1.0, Outcome::Ok))
            .chain([point(99, 0.5, 1.0, Outcome::Info)])
            .collect();
        let series = throughput(&points, &["send".to_owned()], 3.0, 1.0);
        assert_eq!(series.len(), 2);
        let (name, outcome, ok) = &series[0];
        assert_eq!((name.as_str(), *outcome), ("send", Outcome::Ok));
        assert_eq!(ok, &vec![(0.0, 10.0), (1.0, 10.0), (2.0, 10.0)]);
        assert_eq!(series[1].2[0], (0.0, 1.0));
    }
}
