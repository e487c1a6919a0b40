//! Estimated total access time against cache size (the seed paper's figure 7), from a
//! [`crate::sim::LatencyModel`].

use std::path::Path;

use plotters::prelude::*;

use super::style::{color, series, x_caption, x_percent, FONT};
use super::{render, text_err, Chart, Figure, PlotError};

struct AccessTime<'a>(Figure<'a>);

/// Draws the access-time figure into `path` (`.png` or `.svg`), with the no-cache time as
/// a dashed grey line.
///
/// # Errors
/// [`PlotError`] when the file cannot be written.
pub fn access_time(path: &Path, fig: Figure<'_>) -> Result<(), PlotError> {
    render(path, &AccessTime(fig))
}

impl Chart for AccessTime<'_> {
    fn size(&self) -> (u32, u32) {
        (1000, 650)
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, plotters::coord::Shift>) -> Result<(), String> {
        let fig = &self.0;
        let m = fig.latency;
        let time = |c: &crate::sim::Cell| m.access_time_s(&c.result);
        let none = m.no_cache_s(fig.trace);
        let x_max = fig.cells.iter().map(|c| x_percent(fig.trace, fig.unit, c)).fold(1.0, f64::max) * 1.05;
        let y_max = none.max(fig.cells.iter().map(time).fold(0.0, f64::max)) * 1.08;
        root.fill(&WHITE).map_err(text_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("Estimated access time vs cache size: {}", fig.trace.name), (FONT, 24))
            .margin(15)
            .x_label_area_size(70)
            .y_label_area_size(75)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(text_err)?;
        chart
            .configure_mesh()
            .x_desc(format!(
                "{}; model: hit {} ms, miss {} ms + {} ms/KiB",
                x_caption(fig.trace, fig.unit),
                m.hit_ms,
                m.miss_ms,
                m.miss_ms_per_kib
            ))
            .y_desc("total access time (s)")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 16))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(text_err)?;
        let grey = RGBColor(120, 120, 120);
        chart
            .draw_series(DashedLineSeries::new(vec![(0.0, none), (x_max, none)], 10, 6, grey.stroke_width(2)))
            .map_err(text_err)?
            .label(format!("no cache ({none:.0} s)"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], grey.stroke_width(2)));
        let mut online = 0;
        for s in series(fig.cells) {
            let points: Vec<(f64, f64)> =
                s.cells.iter().map(|c| (x_percent(fig.trace, fig.unit, c), time(c))).collect();
            let c = if s.oracle { BLACK } else { color(online) };
            if !s.oracle {
                online += 1;
            }
            if s.oracle {
                chart.draw_series(DashedLineSeries::new(points.clone(), 8, 5, c.stroke_width(2))).map_err(text_err)?;
            } else {
                chart.draw_series(LineSeries::new(points.clone(), c.stroke_width(2))).map_err(text_err)?;
            }
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 4, c.filled())))
                .map_err(text_err)?
                .label(s.label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::MiddleRight)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(text_err)?;
        root.present().map_err(text_err)
    }
}
