//! The run page's plots as inline SVG, drawn with plotters' SVG backend: latency over time
//! (one point per op, log scale, coloured by outcome), throughput over time per function and
//! outcome, and the leadership timeline per partition. Each plot shades every fault's
//! interval and labels it; a band is the only element drawn with opacity [`BAND_OPACITY`],
//! which is how the browser test counts them.

use std::collections::{BTreeMap, HashSet};

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::history::{FaultInterval, LeaderEvent, Outcome, Point};
use super::sample::Series;

/// The opacity of a fault band, used by nothing else.
pub const BAND_OPACITY: f64 = 0.18;

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 340;
const OK: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const FAIL: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const INFO: RGBColor = RGBColor(0xff, 0x9f, 0x0e);
const NAMED: RGBColor = RGBColor(0x00, 0x00, 0x00);
/// Fault band colours, one per fault name (cycled).
const BANDS: [RGBColor; 6] = [
    RGBColor(0x9e, 0x9e, 0x9e),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0xbc, 0xbd, 0x22),
];
/// Leader colours, one per node (cycled).
const LEADERS: [RGBColor; 6] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
];

fn outcome_colour(outcome: Outcome) -> RGBColor {
    match outcome {
        Outcome::Ok => OK,
        Outcome::Fail => FAIL,
        Outcome::Info => INFO,
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// The error of a drawing step.
type Drawn = Result<(), Box<dyn std::error::Error>>;

fn draw<F>(draw: F) -> String
where
    F: FnOnce(&Area<'_>) -> Drawn,
{
    let mut svg = String::new();
    {
        let area = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let drawn = area
            .fill(&WHITE)
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error>)
            .and_then(|()| draw(&area))
            .and_then(|()| area.present().map_err(|e| Box::new(e) as _));
        if let Err(error) = drawn {
            tracing::warn!("a plot could not be drawn: {error}");
        }
    }
    svg
}

/// One colour per distinct fault name, in first-injected order.
fn band_colours(faults: &[FaultInterval]) -> BTreeMap<&str, RGBColor> {
    let mut colours = BTreeMap::new();
    for fault in faults {
        let next = BANDS[colours.len() % BANDS.len()];
        colours.entry(fault.name.as_str()).or_insert(next);
    }
    colours
}

/// Shades every fault over `[y0, y1]` and labels the bands wide enough to hold a label.
fn bands<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
    faults: &[FaultInterval],
    end_s: f64,
    (y0, y1): (f64, f64),
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let colours = band_colours(faults);
    chart.draw_series(faults.iter().map(|fault| {
        let colour = colours[fault.name.as_str()];
        Rectangle::new(
            [(fault.start_s, y0), (fault.end_or(end_s), y1)],
            colour.mix(BAND_OPACITY).filled(),
        )
    }))?;
    // A label where there is room: about 6 px per character at this size.
    let px_per_s = f64::from(WIDTH) / end_s.max(1e-9);
    let mut free_from = f64::MIN;
    let mut labels = Vec::new();
    for fault in faults {
        let label = fault.label();
        let width_s = (label.len() as f64 * 6.0) / px_per_s;
        if fault.start_s >= free_from && fault.end_or(end_s) - fault.start_s >= width_s * 0.5 {
            free_from = fault.start_s + width_s;
            labels.push((fault.start_s, label));
        }
    }
    chart.draw_series(labels.into_iter().map(|(x, label)| {
        Text::new(
            label,
            (x, y1),
            ("sans-serif", 11).into_font().color(&BLACK.mix(0.8)),
        )
    }))?;
    Ok(())
}

/// Latency of every point given (already downsampled) against its invoke time, log scale;
/// `named` ops (those an anomaly names) get a black ring. Points that would land on the same
/// pixel with the same colour are drawn once.
pub fn latency(
    points: &[Point],
    named: &HashSet<u64>,
    faults: &[FaultInterval],
    end_s: f64,
) -> String {
    let end_s = end_s.max(1.0);
    let max_ms = points
        .iter()
        .map(|p| p.latency_ms)
        .fold(10.0, f64::max)
        .mul_add(1.5, 0.0);
    let min_ms = points
        .iter()
        .map(|p| p.latency_ms.max(0.01))
        .fold(max_ms / 10.0, f64::min)
        / 1.5;
    draw(|area| {
        let mut chart = ChartBuilder::on(area)
            .caption("latency (ms, log) by invoke time", ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..end_s, (min_ms..max_ms).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("ms")
            .light_line_style(WHITE)
            .draw()?;
        bands(&mut chart, faults, end_s, (min_ms, max_ms))?;
        let log_span = (max_ms / min_ms).ln();
        let mut seen = HashSet::new();
        let pixel = |p: &Point| {
            (
                (p.time_s / end_s * f64::from(WIDTH)) as i64,
                ((p.latency_ms.max(min_ms) / min_ms).ln() / log_span * f64::from(HEIGHT)) as i64,
                p.outcome,
            )
        };
        let drawn: Vec<&Point> = points
            .iter()
            .filter(|p| named.contains(&p.index) || seen.insert(pixel(p)))
            .collect();
        for outcome in [Outcome::Ok, Outcome::Info, Outcome::Fail] {
            chart
                .draw_series(drawn.iter().filter(|p| p.outcome == outcome).map(|p| {
                    Circle::new(
                        (p.time_s, p.latency_ms.max(min_ms)),
                        2,
                        outcome_colour(outcome).filled(),
                    )
                }))?
                .label(outcome.as_str())
                .legend(move |(x, y)| Circle::new((x, y), 3, outcome_colour(outcome).filled()));
        }
        chart
            .draw_series(drawn.iter().filter(|p| named.contains(&p.index)).map(|p| {
                Circle::new(
                    (p.time_s, p.latency_ms.max(min_ms)),
                    5,
                    NAMED.stroke_width(1),
                )
            }))?
            .label("named by an anomaly")
            .legend(|(x, y)| Circle::new((x, y), 4, NAMED.stroke_width(1)));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
        Ok(())
    })
}

/// Completions per second of each function and outcome.
pub fn throughput(series: &[Series], faults: &[FaultInterval], end_s: f64) -> String {
    let end_s = end_s.max(1.0);
    let max_rate = series
        .iter()
        .flat_map(|(_, _, points)| points.iter().map(|(_, rate)| *rate))
        .fold(1.0, f64::max)
        * 1.15;
    draw(|area| {
        let mut chart = ChartBuilder::on(area)
            .caption(
                "throughput (completions/s) by function and outcome",
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..end_s, 0.0..max_rate)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("ops/s")
            .light_line_style(WHITE)
            .draw()?;
        bands(&mut chart, faults, end_s, (0.0, max_rate))?;
        let mut function_colours: BTreeMap<&str, RGBColor> = BTreeMap::new();
        for (f, outcome, points) in series {
            // A colour per function; ok thick, info thinner and lighter, fail lightest.
            let next = LEADERS[function_colours.len() % LEADERS.len()];
            let colour = *function_colours.entry(f.as_str()).or_insert(next);
            let (width, alpha) = match outcome {
                Outcome::Ok => (2, 1.0),
                Outcome::Info => (1, 0.7),
                Outcome::Fail => (1, 0.4),
            };
            let style = ShapeStyle::from(colour.mix(alpha)).stroke_width(width);
            chart
                .draw_series(LineSeries::new(points.iter().copied(), style))?
                .label(format!("{f} {}", outcome.as_str()))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], style));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
        Ok(())
    })
}

/// Per partition, who led when: one bar per stretch between the watcher's changes, coloured
/// by leader (grey before the first change, red when leaderless), labelled with leader, epoch
/// and ISR size; unclean elections are marked with a red cross and the word.
pub fn leadership(
    partitions: &BTreeMap<i64, Vec<LeaderEvent>>,
    faults: &[FaultInterval],
    end_s: f64,
) -> String {
    let end_s = end_s.max(1.0);
    let rows = partitions.len().max(1) as f64;
    let height = -0.5..rows - 0.5;
    let px_per_s = f64::from(WIDTH) / end_s;
    draw(|area| {
        let mut chart = ChartBuilder::on(area)
            .caption(
                "leadership per partition (leader, epoch, ISR size)",
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..end_s, height.clone())?;
        let names: Vec<i64> = partitions.keys().copied().collect();
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("partition")
            .y_labels(partitions.len().max(1))
            .y_label_formatter(&|y| {
                let row = y.round();
                if (y - row).abs() < 1e-6 && row >= 0.0 {
                    names
                        .get(row as usize)
                        .map(ToString::to_string)
                        .unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .light_line_style(WHITE)
            .draw()?;
        bands(&mut chart, faults, end_s, (height.start, height.end))?;
        let mut colours: BTreeMap<String, RGBColor> = BTreeMap::new();
        for (row, events) in partitions.values().enumerate() {
            let y = row as f64;
            let mut start = 0.0;
            let mut label: Option<(String, RGBColor)> = None;
            let stretches = events
                .iter()
                .map(|e| (Some(e), e.time_s))
                .chain([(None, end_s)]);
            for (event, until) in stretches {
                let (text, colour) = label
                    .take()
                    .unwrap_or_else(|| ("?".to_owned(), RGBColor(0xdd, 0xdd, 0xdd)));
                chart.draw_series([Rectangle::new(
                    [(start, y - 0.32), (until, y + 0.32)],
                    colour.mix(0.85).filled(),
                )])?;
                if (until - start) * px_per_s > text.len() as f64 * 6.5 {
                    chart.draw_series([Text::new(
                        text,
                        (start, y),
                        ("sans-serif", 11).into_font().color(&BLACK),
                    )])?;
                }
                let Some(event) = event else { break };
                let change = &event.change;
                label = Some(match &change.leader {
                    Some(leader) => {
                        let next = LEADERS[colours.len() % LEADERS.len()];
                        let colour = *colours.entry(leader.clone()).or_insert(next);
                        (
                            format!("{leader} e{} isr {}", change.epoch, change.isr.len()),
                            colour,
                        )
                    }
                    None => (format!("none e{}", change.epoch), FAIL),
                });
                if change.unclean {
                    chart.draw_series([Cross::new((event.time_s, y), 7, FAIL.stroke_width(3))])?;
                    chart.draw_series([Text::new(
                        "unclean",
                        (event.time_s, y - 0.45),
                        ("sans-serif", 11).into_font().color(&FAIL),
                    )])?;
                }
                start = event.time_s;
            }
        }
        Ok(())
    })
}
