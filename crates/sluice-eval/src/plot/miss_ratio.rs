//! Miss ratio against cache size, one line per policy (the seed paper's figure 8, as misses).

use std::path::Path;

use plotters::prelude::*;

use super::style::{color, series, x_caption, x_percent, FONT};
use super::{render, text_err, Chart, Figure, PlotError};

/// Which miss ratio to plot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ratio {
    /// Misses per request.
    Object,
    /// Missed bytes per requested byte.
    Byte,
}

struct MissRatio<'a>(Figure<'a>, Ratio);

/// Draws the miss-ratio figure into `path` (`.png` or `.svg`).
///
/// # Errors
/// [`PlotError`] when the file cannot be written.
pub fn miss_ratio(path: &Path, fig: Figure<'_>, ratio: Ratio) -> Result<(), PlotError> {
    render(path, &MissRatio(fig, ratio))
}

impl Chart for MissRatio<'_> {
    fn size(&self) -> (u32, u32) {
        (1000, 650)
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, plotters::coord::Shift>) -> Result<(), String> {
        let MissRatio(fig, ratio) = self;
        let value = |c: &crate::sim::Cell| match ratio {
            Ratio::Object => c.result.miss_ratio(),
            Ratio::Byte => c.result.byte_miss_ratio(),
        };
        let what = match ratio {
            Ratio::Object => "Object miss ratio",
            Ratio::Byte => "Byte miss ratio",
        };
        let all = series(fig.cells);
        let x_max = fig.cells.iter().map(|c| x_percent(fig.trace, fig.unit, c)).fold(1.0, f64::max) * 1.05;
        let y_max = (fig.cells.iter().map(value).fold(0.0, f64::max) * 1.1).clamp(0.05, 1.0);
        root.fill(&WHITE).map_err(text_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{what} vs cache size: {}", fig.trace.name), (FONT, 24))
            .margin(15)
            .x_label_area_size(50)
            .y_label_area_size(65)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(text_err)?;
        chart
            .configure_mesh()
            .x_desc(x_caption(fig.trace, fig.unit))
            .y_desc(what.to_lowercase())
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 17))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(text_err)?;
        let mut online = 0;
        for s in &all {
            let points: Vec<(f64, f64)> =
                s.cells.iter().map(|c| (x_percent(fig.trace, fig.unit, c), value(c))).collect();
            let c = if s.oracle { BLACK } else { color(online) };
            if !s.oracle {
                online += 1;
            }
            let line = c.stroke_width(2);
            if s.oracle {
                chart.draw_series(DashedLineSeries::new(points.clone(), 8, 5, line)).map_err(text_err)?;
            } else {
                chart.draw_series(LineSeries::new(points.clone(), line)).map_err(text_err)?;
            }
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 4, c.filled())))
                .map_err(text_err)?
                .label(s.label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(text_err)?;
        root.present().map_err(text_err)
    }
}
