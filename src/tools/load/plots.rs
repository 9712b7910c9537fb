//! The report's SVG plots, drawn with `plotters`: pods created and bound
//! over time, and the CDFs of pod creation→bound latency and gang
//! quorum→bound time.

use anyhow::{Result, anyhow};
use plotters::prelude::*;

const SIZE: (u32, u32) = (900, 500);

/// Pods created and bound against seconds since the run started.
pub fn pods_over_time(series: &[(f64, usize, usize)], title: &str) -> Result<String> {
    let x_max = series.last().map_or(1.0, |p| p.0).max(1.0);
    let y_max = series
        .iter()
        .map(|p| p.1.max(p.2))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let created: Vec<(f64, f64)> = series.iter().map(|p| (p.0, p.1 as f64)).collect();
    let bound: Vec<(f64, f64)> = series.iter().map(|p| (p.0, p.2 as f64)).collect();
    draw(
        title,
        ("seconds since the run started", "pods"),
        (x_max, y_max * 1.05),
        &[("created", &created, BLUE), ("bound", &bound, RED)],
    )
}

/// Empirical CDFs (fraction at or below each value) of one or more samples.
pub fn cdf(title: &str, x_desc: &str, samples: &[(&str, &[f64])]) -> Result<String> {
    let curves: Vec<(&str, Vec<(f64, f64)>)> = samples
        .iter()
        .filter(|(_, s)| !s.is_empty())
        .map(|(name, s)| (*name, cdf_points(s)))
        .collect();
    let x_max = curves
        .iter()
        .flat_map(|(_, c)| c.last().map(|p| p.0))
        .fold(0.0f64, f64::max);
    let colors = [RED, BLUE, GREEN];
    let lines: Vec<Line<'_>> = curves
        .iter()
        .zip(colors)
        .map(|((name, c), color)| (*name, c.as_slice(), color))
        .collect();
    draw(
        title,
        (x_desc, "fraction"),
        (if x_max > 0.0 { x_max * 1.05 } else { 1.0 }, 1.0),
        &lines,
    )
}

/// Sorted values against their cumulative fraction, as a step curve.
fn cdf_points(sample: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted = sample.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    let mut points = vec![(0.0, 0.0)];
    for (i, v) in sorted.iter().enumerate() {
        points.push((*v, i as f64 / n));
        points.push((*v, (i + 1) as f64 / n));
    }
    points
}

type Line<'a> = (&'a str, &'a [(f64, f64)], RGBColor);

fn draw(title: &str, desc: (&str, &str), max: (f64, f64), lines: &[Line<'_>]) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..max.0, 0f64..max.1)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc(desc.0)
            .y_desc(desc.1)
            .draw()
            .map_err(plot_error)?;
        for (name, points, color) in lines {
            let color = *color;
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(plot_error)?
                .label(*name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

fn plot_error<E: std::error::Error>(e: E) -> anyhow::Error {
    anyhow!("drawing a plot: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_are_svg_with_their_labels() {
        let svg = pods_over_time(&[(0.0, 0, 0), (1.0, 10, 4), (2.0, 10, 10)], "demo").unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        assert!(svg.contains("bound") && svg.contains("created") && svg.contains("demo"));
        let svg = cdf(
            "latency",
            "seconds",
            &[("pods", &[0.1, 0.2, 0.4]), ("gangs", &[])],
        )
        .unwrap();
        assert!(svg.contains("pods") && !svg.contains(">gangs<"));
        assert!(pods_over_time(&[], "empty").is_ok());
    }

    #[test]
    fn cdf_steps_to_one() {
        let p = cdf_points(&[2.0, 1.0]);
        assert_eq!(
            p,
            vec![(0.0, 0.0), (1.0, 0.0), (1.0, 0.5), (2.0, 0.5), (2.0, 1.0)]
        );
    }
}
