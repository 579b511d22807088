//! Plots of a finished run, written into its folder as SVG and PNG (plotters): the best fit against
//! the data (`plot-fit`), the best score over calibrations and calibration time (`plot-progress`)
//! and the complexity/error Pareto front (`plot-pareto`). Everything but the time panel is a pure
//! function of the task, the events and the summary, so those bytes repeat across runs.
//!
//! PNG text is drawn with a 10 KB subset of DejaVu Sans (`search/assets/`, Bitstream Vera license)
//! registered with plotters' `ab_glyph` feature, so no system font is read; the bitmap is encoded
//! with `png` directly rather than through the `image` crate.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ndvm_core::Heap;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::engine;
use crate::error::{Result, SearchError};
use crate::events::Event;
use crate::summary::Summary;
use crate::task::{MetricName, Table, Task};

/// Image size in pixels (and SVG user units).
pub const SIZE: (u32, u32) = (900, 560);

/// The three plots' file stems; each is written as `<stem>.svg` and `<stem>.png`.
pub const STEMS: [&str; 3] = ["plot-fit", "plot-progress", "plot-pareto"];

const FONT: &str = "sans-serif";
static FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans-subset.ttf");

/// Markers drawn per table at most (larger tables are thinned evenly).
const MAX_MARKERS: usize = 1500;

/// Points of the fine grid the winning program is drawn on.
const GRID: usize = 400;

const TRAIN: RGBColor = RGBColor(31, 119, 180);
const VALIDATION: RGBColor = RGBColor(255, 127, 14);
const TESTS: [RGBColor; 4] = [
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(214, 39, 40),
    RGBColor(140, 86, 75),
];
const GREY: RGBColor = RGBColor(170, 170, 170);

type Draw = std::result::Result<(), String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn register_font() -> std::result::Result<(), String> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err("the embedded plot font does not load".to_string())
    }
}

/// Something drawable on any plotters backend.
trait Plot {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Draw;
}

/// Writes the three plots (six files) into `dir`; returns their paths.
pub fn write_all(
    dir: &Path,
    task: &Task,
    events: &[Event],
    summary: &Summary,
) -> Result<Vec<PathBuf>> {
    let fail = |message: String| SearchError::RunFolder {
        path: dir.to_path_buf(),
        message: format!("plots: {message}"),
    };
    register_font().map_err(fail)?;
    let mut out = Vec::new();
    out.extend(save(dir, STEMS[0], &fit_plot(task, summary)).map_err(fail)?);
    out.extend(save(dir, STEMS[1], &Progress::new(task, events)).map_err(fail)?);
    out.extend(save(dir, STEMS[2], &Pareto::new(task, events, summary)).map_err(fail)?);
    Ok(out)
}

fn save<P: Plot>(dir: &Path, stem: &str, plot: &P) -> std::result::Result<[PathBuf; 2], String> {
    let (w, h) = SIZE;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        plot.draw(&root)?;
        root.present().map_err(err)?;
    }
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
        plot.draw(&root)?;
        root.present().map_err(err)?;
    }
    let svg_path = dir.join(format!("{stem}.svg"));
    let png_path = dir.join(format!("{stem}.png"));
    std::fs::write(&svg_path, svg).map_err(err)?;
    std::fs::write(&png_path, encode_png(&rgb, w, h)?).map_err(err)?;
    Ok([svg_path, png_path])
}

fn encode_png(rgb: &[u8], w: u32, h: u32) -> std::result::Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bytes, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header().map_err(err)?;
        writer.write_image_data(rgb).map_err(err)?;
        writer.finish().map_err(err)?;
    }
    Ok(bytes)
}

/// `lo..hi` widened by `frac` of the span on each side (and made non-empty).
fn padded(lo: f64, hi: f64, frac: f64) -> std::ops::Range<f64> {
    if !lo.is_finite() || !hi.is_finite() {
        return 0.0..1.0;
    }
    let span = hi - lo;
    if span <= f64::EPSILON * lo.abs().max(1.0) {
        let d = 0.5 * lo.abs().max(1.0);
        return lo - d..hi + d;
    }
    lo - frac * span..hi + frac * span
}

/// Tick labels with as many decimals as the range needs (and no `-0`).
fn ticks(range: &std::ops::Range<f64>) -> impl Fn(&f64) -> String + use<> {
    let step = ((range.end - range.start).abs() / 10.0).max(1e-300);
    let decimals = (-step.log10().floor()).clamp(0.0, 12.0) as usize;
    move |v: &f64| {
        let s = format!("{v:.decimals$}");
        match s.strip_prefix('-') {
            Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
            _ => s,
        }
    }
}

fn min_max(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        })
}

/// A coloured set of points with its legend name.
struct Group {
    name: String,
    color: RGBColor,
    points: Vec<(f64, f64)>,
}

/// The best fit: data and curve over the first input, predicted vs observed, or a note.
enum Fit {
    Curve {
        title: String,
        x_label: String,
        groups: Vec<Group>,
        /// The winner's curve, split where it is not finite or leaves the plotted range.
        curve: Vec<Vec<(f64, f64)>>,
        y_range: std::ops::Range<f64>,
    },
    Parity {
        title: String,
        groups: Vec<Group>,
        range: std::ops::Range<f64>,
    },
    Note {
        title: String,
        note: String,
    },
}

fn tables(task: &Task) -> Vec<(String, RGBColor, &Table)> {
    let mut v = vec![
        ("train".to_string(), TRAIN, &task.train),
        ("validation".to_string(), VALIDATION, &task.validation),
    ];
    for (i, (name, t)) in task.tests.iter().enumerate() {
        v.push((name.clone(), TESTS[i % TESTS.len()], t));
    }
    v.retain(|(_, _, t)| t.n_rows() > 0);
    v
}

/// The winner's predictions on `table`, or `None` when it does not parse or evaluate.
fn predict(
    task: &Task,
    (frontend, src): (&str, &str),
    params: &BTreeMap<String, f64>,
    table: &Table,
) -> Option<Vec<f64>> {
    let mut heap = Heap::new();
    let program = engine::parse(task, &mut heap, frontend, src).ok()?;
    engine::predict(task, &mut heap, &program, params, table).ok()
}

fn fit_plot(task: &Task, summary: &Summary) -> Fit {
    let best = summary.best.as_ref();
    let winner = best.map(|b| ((b.frontend.clone(), b.src.clone()), b.params.clone()));
    let title = match (best, task.metric) {
        (None, _) => "data (no fitted candidate)".to_string(),
        (Some(b), MetricName::R2) => format!(
            "best fit: candidate {} · validation R² {}",
            b.id,
            fmt(b.validation_r2)
        ),
        (Some(b), MetricName::Loss) => format!(
            "best fit: candidate {} · training loss {}",
            b.id,
            fmt(b.train_loss)
        ),
    };
    let tabs = tables(task);
    if tabs.is_empty() || task.inputs.is_empty() {
        return Fit::Note {
            title,
            note: "this task has no per-point target to plot against".to_string(),
        };
    }
    if task.inputs.len() == 1 {
        let groups: Vec<Group> = tabs
            .iter()
            .map(|(name, color, t)| Group {
                name: name.clone(),
                color: *color,
                points: t.columns[0]
                    .iter()
                    .copied()
                    .zip(t.target.iter().copied())
                    .collect(),
            })
            .collect();
        let (x0, x1) = min_max(groups.iter().flat_map(|g| g.points.iter().map(|p| p.0)));
        let (y0, y1) = min_max(groups.iter().flat_map(|g| g.points.iter().map(|p| p.1)));
        // The curve may leave the data's range; show up to one data span beyond it.
        let span = (y1 - y0).abs().max(1e-12);
        let (lo, hi) = (y0 - span, y1 + span);
        let mut curve: Vec<Vec<(f64, f64)>> = Vec::new();
        let mut y_range = padded(y0, y1, 0.08);
        if let Some((src, params)) = &winner
            && x1 > x0
        {
            let xs: Vec<f64> = (0..GRID)
                .map(|i| x0 + (x1 - x0) * i as f64 / (GRID - 1) as f64)
                .collect();
            let grid = Table {
                columns: vec![xs.clone()],
                target: vec![0.0; GRID],
            };
            if let Some(ys) = predict(task, (&src.0, &src.1), params, &grid) {
                let mut seg = Vec::new();
                for (x, y) in xs.into_iter().zip(ys) {
                    if y.is_finite() && (lo..=hi).contains(&y) {
                        seg.push((x, y));
                    } else if !seg.is_empty() {
                        curve.push(std::mem::take(&mut seg));
                    }
                }
                if !seg.is_empty() {
                    curve.push(seg);
                }
                let (c0, c1) = min_max(curve.iter().flatten().map(|p| p.1));
                y_range = padded(y0.min(c0), y1.max(c1), 0.08);
            }
        }
        return Fit::Curve {
            title,
            x_label: task.inputs[0].clone(),
            groups,
            curve,
            y_range,
        };
    }
    // Several inputs: predicted against observed for every table.
    let Some((src, params)) = &winner else {
        return Fit::Note {
            title,
            note: "no fitted candidate to plot".to_string(),
        };
    };
    let (o0, o1) = min_max(tabs.iter().flat_map(|(_, _, t)| t.target.iter().copied()));
    let span = (o1 - o0).abs().max(1e-12);
    let (lo, hi) = (o0 - 0.5 * span, o1 + 0.5 * span);
    let groups: Vec<Group> = tabs
        .iter()
        .map(|(name, color, t)| Group {
            name: name.clone(),
            color: *color,
            points: predict(task, (&src.0, &src.1), params, t)
                .map(|pred| {
                    t.target
                        .iter()
                        .copied()
                        .zip(pred)
                        .filter(|(_, p)| p.is_finite() && (lo..=hi).contains(p))
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect();
    let (p0, p1) = min_max(groups.iter().flat_map(|g| g.points.iter().map(|p| p.1)));
    Fit::Parity {
        title,
        groups,
        range: padded(o0.min(p0), o1.max(p1), 0.05),
    }
}

fn fmt(x: Option<f64>) -> String {
    x.map_or("–".to_string(), |x| format!("{x:.6}"))
}

fn legend_dot(color: RGBColor) -> impl Fn((i32, i32)) -> Circle<(i32, i32), i32> {
    move |(x, y)| Circle::new((x + 10, y), 4, color.filled())
}

impl Plot for Fit {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Draw {
        root.fill(&WHITE).map_err(err)?;
        match self {
            Fit::Note { title, note } => {
                let area = root.titled(title, (FONT, 22)).map_err(err)?;
                area.draw(&Text::new(note.as_str(), (40, 60), (FONT, 16)))
                    .map_err(err)?;
            }
            Fit::Curve {
                title,
                x_label,
                groups,
                curve,
                y_range,
            } => {
                let (x0, x1) = min_max(groups.iter().flat_map(|g| g.points.iter().map(|p| p.0)));
                let x_range = padded(x0, x1, 0.02);
                let (fx, fy) = (ticks(&x_range), ticks(y_range));
                let mut chart = ChartBuilder::on(root)
                    .caption(title, (FONT, 22))
                    .margin(14)
                    .x_label_area_size(44)
                    .y_label_area_size(64)
                    .build_cartesian_2d(x_range, y_range.clone())
                    .map_err(err)?;
                chart
                    .configure_mesh()
                    .x_desc(x_label.as_str())
                    .y_desc("target")
                    .x_label_formatter(&fx)
                    .y_label_formatter(&fy)
                    .label_style((FONT, 14))
                    .axis_desc_style((FONT, 16))
                    .light_line_style(WHITE.mix(0.0))
                    .draw()
                    .map_err(err)?;
                for (i, seg) in curve.iter().enumerate() {
                    let s = chart
                        .draw_series(LineSeries::new(seg.iter().copied(), BLACK.stroke_width(2)))
                        .map_err(err)?;
                    if i == 0 {
                        s.label("best program").legend(|(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2))
                        });
                    }
                }
                draw_groups(&mut chart, groups)?;
                legend(&mut chart, SeriesLabelPosition::UpperRight)?;
            }
            Fit::Parity {
                title,
                groups,
                range,
            } => {
                let f = ticks(range);
                let mut chart = ChartBuilder::on(root)
                    .caption(title, (FONT, 22))
                    .margin(14)
                    .x_label_area_size(44)
                    .y_label_area_size(64)
                    .build_cartesian_2d(range.clone(), range.clone())
                    .map_err(err)?;
                chart
                    .configure_mesh()
                    .x_desc("observed")
                    .y_desc("predicted")
                    .x_label_formatter(&f)
                    .y_label_formatter(&f)
                    .label_style((FONT, 14))
                    .axis_desc_style((FONT, 16))
                    .light_line_style(WHITE.mix(0.0))
                    .draw()
                    .map_err(err)?;
                chart
                    .draw_series(LineSeries::new(
                        [(range.start, range.start), (range.end, range.end)],
                        BLACK.stroke_width(1),
                    ))
                    .map_err(err)?
                    .label("predicted = observed")
                    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
                draw_groups(&mut chart, groups)?;
                legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
            }
        }
        Ok(())
    }
}

type Chart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn draw_groups<'a, DB: DrawingBackend + 'a>(chart: &mut Chart<'a, DB>, groups: &[Group]) -> Draw {
    // Test tables first, so the (usually fewer) fitting points stay visible on top; large tables
    // are thinned to every k-th point with smaller markers.
    for g in groups.iter().rev() {
        let color = g.color;
        let stride = g.points.len().div_ceil(MAX_MARKERS).max(1);
        let radius = if g.points.len() > 500 { 2 } else { 4 };
        chart
            .draw_series(
                g.points
                    .iter()
                    .step_by(stride)
                    .map(|&p| Circle::new(p, radius, color.filled())),
            )
            .map_err(err)?
            .label(format!("{} ({})", g.name, g.points.len()))
            .legend(legend_dot(color));
    }
    Ok(())
}

fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    position: SeriesLabelPosition,
) -> Draw {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 14))
        .draw()
        .map_err(err)
}

/// An error axis: log10 when every error is positive.
struct ErrorAxis {
    log: bool,
    label: String,
}

impl ErrorAxis {
    fn new(metric: MetricName, errors: impl IntoIterator<Item = f64>) -> ErrorAxis {
        let log = errors.into_iter().all(|e| e > 0.0);
        let base = match metric {
            MetricName::R2 => "1 − validation R²",
            MetricName::Loss => "training loss",
        };
        ErrorAxis {
            log,
            label: if log {
                format!("{base} (log scale)")
            } else {
                base.to_string()
            },
        }
    }

    fn y(&self, e: f64) -> f64 {
        if self.log { e.max(1e-300).log10() } else { e }
    }

    /// Tick labels for an axis over `range`: powers of ten on a log axis, with as many
    /// significant digits as a range of less than a decade needs to tell its ticks apart.
    fn ticks(&self, range: &std::ops::Range<f64>) -> impl Fn(&f64) -> String + use<> {
        let log = self.log;
        let linear = ticks(range);
        let digits = log_digits(range);
        move |v: &f64| {
            if log {
                format!("{:.*e}", digits, 10f64.powf(*v))
            } else {
                linear(v)
            }
        }
    }
}

/// Decimals of a log axis's labels over `range` (in decades): none over two decades or more, one
/// down to a third of a decade, two below (ticks 1/10 of the range apart stay distinct).
fn log_digits(range: &std::ops::Range<f64>) -> usize {
    let span = (range.end - range.start).abs();
    if span >= 2.0 {
        0
    } else if span >= 0.3 {
        1
    } else {
        2
    }
}

/// Error (lower is better) of an event, from its score.
fn error_of(metric: MetricName, e: &Event) -> Option<f64> {
    let s = e.score(metric)?;
    Some(match metric {
        MetricName::R2 => 1.0 - s,
        MetricName::Loss => -s,
    })
}

/// Best error so far against calibrations, and against summed calibration time.
struct Progress {
    axis: ErrorAxis,
    by_count: Vec<(f64, f64)>,
    by_time: Vec<(f64, f64)>,
    title: String,
}

impl Progress {
    fn new(task: &Task, events: &[Event]) -> Progress {
        let mut sorted: Vec<&Event> = events.iter().collect();
        sorted.sort_by_key(|e| e.index);
        let mut best = f64::INFINITY;
        let mut time_s = 0.0;
        let (mut by_count, mut by_time) = (Vec::new(), Vec::new());
        for (i, e) in sorted.iter().enumerate() {
            time_s += e.wall_ms / 1e3;
            let Some(err) = error_of(task.metric, e) else {
                continue;
            };
            if err < best {
                // Steps: hold the previous best up to here, then drop.
                if best.is_finite() {
                    by_count.push(((i + 1) as f64, best));
                    by_time.push((time_s, best));
                }
                best = err;
                by_count.push(((i + 1) as f64, best));
                by_time.push((time_s, best));
            }
        }
        if best.is_finite() {
            by_count.push((sorted.len() as f64, best));
            by_time.push((time_s, best));
        }
        let axis = ErrorAxis::new(task.metric, by_count.iter().map(|p| p.1));
        let by_count = by_count.into_iter().map(|(x, e)| (x, axis.y(e))).collect();
        let by_time = by_time.into_iter().map(|(x, e)| (x, axis.y(e))).collect();
        Progress {
            axis,
            by_count,
            by_time,
            title: format!("best score over the run ({} calibrations)", sorted.len()),
        }
    }
}

fn step_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    axis: &ErrorAxis,
    points: &[(f64, f64)],
    x_label: &str,
    color: RGBColor,
) -> Draw {
    let (x0, x1) = min_max(points.iter().map(|p| p.0));
    let (y0, y1) = min_max(points.iter().map(|p| p.1));
    let x_range = if points.is_empty() {
        0.0..1.0
    } else {
        padded(x0.min(0.0), x1, 0.02)
    };
    let y_range = if points.is_empty() {
        0.0..1.0
    } else {
        padded(y0, y1, 0.06)
    };
    let (fx, fy) = (ticks(&x_range), axis.ticks(&y_range));
    let mut chart = ChartBuilder::on(area)
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(76)
        .build_cartesian_2d(x_range, y_range)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(axis.label.as_str())
        .x_label_formatter(&fx)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .y_label_formatter(&fy)
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            points.iter().copied(),
            color.stroke_width(2),
        ))
        .map_err(err)?;
    Ok(())
}

impl Plot for Progress {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Draw {
        root.fill(&WHITE).map_err(err)?;
        let area = root.titled(&self.title, (FONT, 22)).map_err(err)?;
        let (w, _) = area.dim_in_pixel();
        let (left, right) = area.split_horizontally(w / 2);
        step_panel(&left, &self.axis, &self.by_count, "calibrations", TRAIN)?;
        step_panel(
            &right,
            &self.axis,
            &self.by_time,
            "calibration time, summed over threads (s)",
            VALIDATION,
        )?;
        Ok(())
    }
}

/// The Pareto front over every scored candidate.
struct Pareto {
    axis: ErrorAxis,
    front: Vec<(f64, f64)>,
    others: Vec<(f64, f64)>,
    /// The chosen model and the lowest-error one (when they are on the front).
    chosen: Option<(f64, f64)>,
    lowest: Option<(f64, f64)>,
}

impl Pareto {
    fn new(task: &Task, events: &[Event], summary: &Summary) -> Pareto {
        let front: Vec<(f64, f64)> = summary
            .pareto
            .iter()
            .map(|p| (p.complexity as f64, p.error))
            .collect();
        let axis = ErrorAxis::new(task.metric, front.iter().map(|p| p.1));
        let others = events
            .iter()
            .filter_map(|e| Some((e.complexity as f64, error_of(task.metric, e)?)))
            .filter(|p| !axis.log || p.1 > 0.0)
            .map(|(c, e)| (c, axis.y(e)))
            .collect();
        let marked = |mark: &str| {
            summary
                .pareto
                .iter()
                .find(|p| p.selected.as_deref().is_some_and(|s| s.contains(mark)))
                .map(|p| (p.complexity as f64, axis.y(p.error)))
        };
        let (chosen, lowest) = (marked("chosen"), marked("lowest-error"));
        let front = front.into_iter().map(|(c, e)| (c, axis.y(e))).collect();
        Pareto {
            axis,
            front,
            others,
            chosen,
            lowest,
        }
    }
}

impl Plot for Pareto {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Draw {
        root.fill(&WHITE).map_err(err)?;
        let (x0, x1) = min_max(self.front.iter().chain(&self.others).map(|p| p.0));
        let (y0, y1) = min_max(self.front.iter().map(|p| p.1));
        // Show the front in full and the other candidates a little above it.
        let span = y1 - y0;
        let top = if span > 0.0 {
            y1 + 0.5 * span
        } else if self.axis.log {
            y1 + 1.0
        } else {
            y1 + 0.05 * y1.abs().max(1.0)
        };
        let (x_range, y_range) = if self.front.is_empty() {
            (0.0..1.0, 0.0..1.0)
        } else {
            (padded(x0, x1, 0.04), padded(y0, top, 0.04))
        };
        let (fx, fy) = (ticks(&x_range), self.axis.ticks(&y_range));
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!(
                    "complexity / error Pareto front ({} point{})",
                    self.front.len(),
                    if self.front.len() == 1 { "" } else { "s" }
                ),
                (FONT, 22),
            )
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(76)
            .build_cartesian_2d(x_range, y_range.clone())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("complexity (atoms and pairs)")
            .x_label_formatter(&fx)
            .y_desc(self.axis.label.as_str())
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .y_label_formatter(&fy)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                self.others
                    .iter()
                    .filter(|p| y_range.contains(&p.1))
                    .map(|&p| Circle::new(p, 2, GREY.filled())),
            )
            .map_err(err)?
            .label("all candidates")
            .legend(|(x, y)| Circle::new((x + 10, y), 2, GREY.filled()));
        // The front as a staircase: error holds until the next, more complex, better program.
        let mut stairs = Vec::new();
        for (i, &(c, e)) in self.front.iter().enumerate() {
            if i > 0 {
                stairs.push((c, self.front[i - 1].1));
            }
            stairs.push((c, e));
        }
        chart
            .draw_series(LineSeries::new(stairs, TRAIN.stroke_width(2)))
            .map_err(err)?;
        chart
            .draw_series(
                self.front
                    .iter()
                    .map(|&p| Circle::new(p, 5, TRAIN.filled())),
            )
            .map_err(err)?
            .label("Pareto front")
            .legend(legend_dot(TRAIN));
        let rings = [
            (self.lowest, 9, VALIDATION, "lowest error"),
            (self.chosen, 13, TESTS[2], "chosen"),
        ];
        for (point, size, color, label) in rings {
            if let Some(p) = point {
                chart
                    .draw_series(std::iter::once(Circle::new(p, size, color.stroke_width(3))))
                    .map_err(err)?
                    .label(label)
                    .legend(move |(x, y)| Circle::new((x + 10, y), 5, color.stroke_width(2)));
            }
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_within_a_decade_stay_distinct() {
        let axis = ErrorAxis::new(MetricName::R2, [3.9e-3, 5.6e-3]);
        assert!(axis.log);
        let (lo, hi) = (axis.y(3.9e-3), axis.y(5.6e-3));
        let label = axis.ticks(&(lo..hi));
        let labels: Vec<String> = (0..=4)
            .map(|i| label(&(lo + (hi - lo) * f64::from(i) / 4.0)))
            .collect();
        let mut unique = labels.clone();
        unique.dedup();
        assert_eq!(unique.len(), labels.len(), "{labels:?}");
        assert_eq!(labels[0], "3.90e-3");
        // Over several decades: one digit, as before.
        let wide = axis.ticks(&(-6.0..0.0));
        assert_eq!(wide(&-3.0), "1e-3");
    }
}
