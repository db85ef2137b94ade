//! The report's charts as inline SVG, drawn by plotters from stored figures: lines of
//! points with optional min-max bars and fitted curves, on linear or log axes. Text is
//! left to the browser's fonts (plotters' SVG backend writes <text> elements).

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::vocab::{Chart, Line};

/// Chart size in SVG units; the page scales it to the screen's width.
const WIDTH: u32 = 860;
const HEIGHT: u32 = 360;

/// The width a stage's name takes per character, in SVG units (13-point sans-serif).
const SPAN_CHAR: i32 = 7;

/// The height of a row of stage names above the plot.
const SPAN_ROW: i32 = 16;

/// The height the title takes, with its space below.
const TITLE_PX: f64 = 30.0;
/// The height of the x axis's labels and name.
const X_LABELS_PX: f64 = 42.0;
/// The height of a legend entry (15-point text and its spacing).
const LEGEND_ROW_PX: f64 = 20.0;
/// The legend's frame and margins.
const LEGEND_FRAME_PX: f64 = 20.0;

/// Colours of the lines, in order: readable on white and in grey print.
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

impl Chart {
    /// The chart as an SVG document; None when it has no point to draw.
    pub fn svg(&self) -> Option<String> {
        let xs = || {
            self.lines
                .iter()
                .flat_map(|l| l.points.iter().map(|p| p.0))
                .filter(|x| x.is_finite() && (!self.x_log || *x > 0.0))
        };
        let x_min = xs().fold(f64::INFINITY, f64::min);
        let x_max = xs().fold(f64::NEG_INFINITY, f64::max);
        if !x_min.is_finite() {
            return None;
        }
        let y_max = self
            .lines
            .iter()
            .flat_map(|l| {
                l.points
                    .iter()
                    .map(|p| p.1)
                    .chain(l.ranges.iter().map(|r| r.1))
                    .chain(l.curve.iter().flat_map(|c| c.1.iter().map(|p| p.1)))
            })
            .filter(|y| y.is_finite())
            .fold(0.0, f64::max);
        let y_top = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
        // On a log axis y runs from its least positive value, a little below it.
        let y_low = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .filter(|y| y.is_finite() && *y > 0.0)
            .fold(y_top, f64::min)
            / 1.5;
        // The legend sits in a band at the top of the plot that no figure reaches: the
        // axis runs that much above the highest one, so the legend never covers data.
        let share = self.legend_share();
        let y_top = y_top / (1.0 - share);
        let y_high = y_low * (y_top * 1.4 / y_low).powf(1.0 / (1.0 - share));
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
            root.fill(&WHITE).ok()?;
            let (x_low, x_high) = if !self.categories.is_empty() {
                (-0.5, self.categories.len() as f64 - 0.5)
            } else if self.x_log {
                (x_min / 1.5, x_max * 1.5)
            } else {
                let pad = ((x_max - x_min) * 0.05).max(0.5);
                // Times and counts start at zero: no axis runs below it.
                let low = if x_min >= 0.0 {
                    (x_min - pad).max(0.0)
                } else {
                    x_min - pad
                };
                (low, x_max + pad)
            };
            match (self.x_log, self.y_log) {
                (true, true) => self.draw(
                    &root,
                    (x_low..x_high).log_scale(),
                    (y_low..y_high).log_scale(),
                ),
                (true, false) => self.draw(&root, (x_low..x_high).log_scale(), 0.0..y_top),
                (false, true) => self.draw(&root, x_low..x_high, (y_low..y_high).log_scale()),
                (false, false) => self.draw(&root, x_low..x_high, 0.0..y_top),
            }?;
            root.present().ok()?;
        }
        Some(out)
    }

    /// Rows of stage names above the plot.
    fn span_rows(&self) -> u32 {
        self.spans.iter().map(|s| s.line + 1).max().unwrap_or(0) as u32
    }

    /// The share of the plot's height the legend takes at its top: a row per entry (a
    /// line, and its fitted curve where it has one) and its frame, of the height left
    /// between the title, the stage names and the x axis.
    fn legend_share(&self) -> f64 {
        let entries: usize = self
            .lines
            .iter()
            .map(|l| 1 + usize::from(l.curve.is_some()))
            .sum();
        let plot = f64::from(HEIGHT)
            - TITLE_PX
            - 24.0
            - f64::from(SPAN_ROW) * f64::from(self.span_rows())
            - X_LABELS_PX;
        ((LEGEND_FRAME_PX + LEGEND_ROW_PX * entries as f64) / plot).min(0.6)
    }

    fn draw<X, Y>(&self, root: &DrawingArea<SVGBackend, Shift>, x: X, y: Y) -> Option<()>
    where
        X: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
        X::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
        Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
        Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
    {
        // Stage names go in a band above the plot, a row per line that has stages.
        let rows = self.span_rows();
        // The title first, so that the band of stage names sits between it and the plot.
        let below_title = root.titled(&self.title, ("sans-serif", 20)).ok()?;
        let mut chart = ChartBuilder::on(&below_title)
            .margin(12)
            .margin_top(12 + SPAN_ROW as u32 * rows)
            .x_label_area_size(X_LABELS_PX as u32)
            .y_label_area_size(92)
            .build_cartesian_2d(x, y)
            .ok()?;
        let (x_format, y_format) = (self.x_format, self.y_format);
        let categories = &self.categories;
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .x_label_formatter(&|x| {
                if categories.is_empty() {
                    x_format(*x)
                } else {
                    category(categories, *x)
                }
            })
            .y_label_formatter(&|y| y_format(*y))
            .x_labels(if categories.is_empty() {
                10
            } else {
                categories.len() * 2 + 1
            })
            .y_labels(8)
            .light_line_style(RGBColor(245, 245, 245))
            .label_style(("sans-serif", 15))
            .draw()
            .ok()?;
        self.draw_spans(root, &chart)?;
        // With a line the chart is about, the others step back.
        let any_strong = self.lines.iter().any(|l| l.strong);
        for (index, line) in self.lines.iter().enumerate() {
            if categories.is_empty() {
                draw_line(&mut chart, index, line, any_strong)?;
            } else {
                draw_bars(&mut chart, index, line, self.lines.len())?;
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .label_font(("sans-serif", 15))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .ok()?;
        Some(())
    }

    /// Marks where each stage begins with a faint dashed line in its line's colour, and
    /// names it above the plot where the stage is wide enough for its name (a row per
    /// line, so workloads side by side do not write over each other).
    fn draw_spans<X, Y>(
        &self,
        root: &DrawingArea<SVGBackend, Shift>,
        chart: &ChartContext<SVGBackend, Cartesian2d<X, Y>>,
    ) -> Option<()>
    where
        X: Ranged<ValueType = f64>,
        Y: Ranged<ValueType = f64>,
    {
        let (xs, ys) = (chart.x_range(), chart.y_range());
        let (low, high) = (ys.start.min(ys.end), ys.start.max(ys.end));
        for span in &self.spans {
            let colour = COLOURS[span.line % COLOURS.len()];
            if span.from > xs.start {
                let (x, top) = chart.backend_coord(&(span.from, high));
                let (_, bottom) = chart.backend_coord(&(span.from, low));
                let mut y = top;
                while y < bottom {
                    root.draw(&PathElement::new(
                        vec![(x, y), (x, (y + 5).min(bottom))],
                        colour.mix(0.5).stroke_width(1),
                    ))
                    .ok()?;
                    y += 9;
                }
            }
            let (left, top) = chart.backend_coord(&(span.from.max(xs.start), high));
            let (right, _) = chart.backend_coord(&(span.to.min(xs.end), high));
            let room = right - left - 8;
            if room >= SPAN_CHAR * span.label.chars().count() as i32 {
                let row = span.line as i32 + 1;
                root.draw(&Text::new(
                    span.label.clone(),
                    (left + 4, top - SPAN_ROW * row),
                    ("sans-serif", 13).into_font().color(&colour),
                ))
                .ok()?;
            }
        }
        Some(())
    }
}

/// The name of the category at `x`, where `x` is one's index; nothing between them.
fn category(categories: &[String], x: f64) -> String {
    let index = x.round();
    if (x - index).abs() > 0.01 || index < 0.0 {
        return String::new();
    }
    categories.get(index as usize).cloned().unwrap_or_default()
}

/// Draws one line as a bar at each category its points index, beside the bars of the
/// chart's other `lines`, with its ranges as whiskers.
fn draw_bars<X, Y>(
    chart: &mut ChartContext<SVGBackend, Cartesian2d<X, Y>>,
    index: usize,
    line: &Line,
    lines: usize,
) -> Option<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let colour = COLOURS[index % COLOURS.len()];
    let width = 0.8 / lines.max(1) as f64;
    let centre = |x: f64| x - 0.4 + width * (index as f64 + 0.5);
    let bars: Vec<Rectangle<(f64, f64)>> = line
        .points
        .iter()
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .map(|&(x, y)| {
            let c = centre(x);
            Rectangle::new(
                [(c - width * 0.45, 0.0), (c + width * 0.45, y)],
                colour.mix(0.85).filled(),
            )
        })
        .collect();
    chart
        .draw_series(bars)
        .ok()?
        .label(&line.name)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], colour.filled()));
    for (&(x, _), &(low, high)) in line.points.iter().zip(&line.ranges) {
        let c = centre(x);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(c, low), (c, high)],
                BLACK.mix(0.7).stroke_width(2),
            )))
            .ok()?;
    }
    Some(())
}

/// Draws one line with its points, min-max bars and fitted curve: strongest when it is
/// the line the chart is about, fainter when another is.
fn draw_line<X, Y>(
    chart: &mut ChartContext<SVGBackend, Cartesian2d<X, Y>>,
    index: usize,
    line: &Line,
    any_strong: bool,
) -> Option<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let base = COLOURS[index % COLOURS.len()];
    let (colour, width, dot) = match (any_strong, line.strong) {
        (true, true) => (base.to_rgba(), 4, 4),
        (true, false) => (base.mix(0.45), 1, 2),
        (false, _) => (base.to_rgba(), 2, 3),
    };
    let points: Vec<(f64, f64)> = line
        .points
        .iter()
        .copied()
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .collect();
    if line.dashed {
        chart
            .draw_series(DashedLineSeries::new(points, 10, 5, colour.stroke_width(2)))
            .ok()?
            .label(&line.name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
        return Some(());
    }
    chart
        .draw_series(LineSeries::new(points.clone(), colour.stroke_width(width)))
        .ok()?
        .label(&line.name)
        .legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(width))
        });
    chart
        .draw_series(points.iter().map(|&p| Circle::new(p, dot, colour.filled())))
        .ok()?;
    for (&(x, _), &(low, high)) in line.points.iter().zip(&line.ranges) {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x, low), (x, high)],
                base.mix(0.6).stroke_width(2),
            )))
            .ok()?;
    }
    if let Some((name, curve)) = &line.curve {
        chart
            .draw_series(DashedLineSeries::new(
                curve.iter().copied().filter(|p| p.1.is_finite()),
                6,
                4,
                base.mix(0.7).stroke_width(1),
            ))
            .ok()?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], base.mix(0.7)));
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_is_svg_with_its_title_and_lines_and_an_empty_one_is_none() {
        let chart = Chart {
            title: "rate by size".into(),
            x_label: "file size".into(),
            y_label: "MB/s".into(),
            x_log: true,
            y_log: false,
            x_format: |x| format!("{x:.0}"),
            y_format: |y| format!("{y:.0}"),
            lines: vec![Line {
                name: "write".into(),
                points: vec![(1e4, 10.0), (1e6, 100.0), (1e8, 120.0)],
                ranges: vec![(8.0, 12.0), (90.0, 110.0), (119.0, 121.0)],
                curve: Some(("fit".into(), vec![(1e4, 9.0), (1e8, 119.0)])),
                strong: false,
                dashed: false,
            }],
            spans: Vec::new(),
            categories: Vec::new(),
        };
        let svg = chart.svg().unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        assert!(svg.contains("rate by size") && svg.contains("write"));
        assert!(svg.matches("<circle").count() >= 3);
        let empty = Chart {
            lines: Vec::new(),
            ..chart
        };
        assert!(empty.svg().is_none());
    }

    #[test]
    fn a_chart_of_categories_draws_a_bar_a_line_at_each_with_its_name() {
        let line = |name: &str, ys: [f64; 2]| Line {
            name: name.into(),
            points: vec![(0.0, ys[0]), (1.0, ys[1])],
            ranges: vec![(ys[0] * 0.9, ys[0]), (ys[1] * 0.9, ys[1])],
            ..Line::default()
        };
        let chart = Chart::bars(
            "share beside sensitivity",
            "share",
            |y| format!("{y:.1}"),
            vec!["cpu".into(), "disk_read on loop3".into()],
            vec![
                line("sampled share", [0.2, 0.8]),
                line("sensitivity", [0.1, 0.97]),
            ],
        );
        let svg = chart.svg().unwrap();
        assert!(
            svg.contains("disk_read on loop3") && svg.contains("cpu"),
            "{svg}"
        );
        // Two bars a line, and a legend's swatch each, beyond what lines draw.
        let plain = Chart {
            categories: Vec::new(),
            ..chart.clone()
        };
        let rects = |svg: &str| svg.matches("<rect").count();
        assert_eq!(rects(&svg), rects(&plain.svg().unwrap()) + 6, "{svg}");
    }
}
