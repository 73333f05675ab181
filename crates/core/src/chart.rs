//! Small charts drawn as SVG on the server (readable with the WASM blocked,
//! a few hundred bytes, coloured by the page's CSS so dark mode just works).
//! A charting crate such as `plotters` was considered: its SVG carries fixed
//! colours and font metrics, and it would add a build-heavy dependency to
//! the browser bundle for two polylines; the geometry here is a few lines.

/// The `points` attribute of an SVG polyline for `values` (x, y), mapped
/// from `[x0, x1]` × `[0, y_max]` onto a `width` × `height` box with y
/// growing downwards. Values outside the ranges are clamped; coordinates
/// have one decimal.
pub fn polyline(
    values: &[(i64, f64)],
    x0: i64,
    x1: i64,
    y_max: f64,
    width: f64,
    height: f64,
) -> String {
    let span = (x1 - x0).max(1) as f64;
    let y_max = if y_max > 0.0 { y_max } else { 1.0 };
    values
        .iter()
        .map(|(x, y)| {
            let px = ((x - x0) as f64 / span).clamp(0.0, 1.0) * width;
            let py = height - (y / y_max).clamp(0.0, 1.0) * height;
            format!("{px:.1},{py:.1}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The same line closed along the bottom edge, for a filled area.
pub fn area(
    values: &[(i64, f64)],
    x0: i64,
    x1: i64,
    y_max: f64,
    width: f64,
    height: f64,
) -> String {
    let line = polyline(values, x0, x1, y_max, width, height);
    let (Some(first), Some(last)) = (values.first(), values.last()) else {
        return String::new();
    };
    let span = (x1 - x0).max(1) as f64;
    let x = |v: i64| ((v - x0) as f64 / span).clamp(0.0, 1.0) * width;
    format!(
        "{:.1},{height:.1} {line} {:.1},{height:.1}",
        x(first.0),
        x(last.0)
    )
}

/// A bar's rectangle in chart coordinates (y grows downwards).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    /// Left.
    pub x: f64,
    /// Top.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
}

/// Stacked bars: `columns` side by side across `width`, each a list of
/// segment values stacked bottom up, scaled so `y_max` fills `height`
/// (a stack above it is clipped at the top). A tenth of each slot is gap.
/// Negative values count as zero.
pub fn stacked_bars(columns: &[Vec<f64>], y_max: f64, width: f64, height: f64) -> Vec<Vec<Rect>> {
    let slot = width / columns.len().max(1) as f64;
    let gap = slot * 0.1;
    let y_max = if y_max > 0.0 { y_max } else { 1.0 };
    columns
        .iter()
        .enumerate()
        .map(|(i, segments)| {
            let mut base = 0.0_f64;
            segments
                .iter()
                .map(|v| {
                    let from = (base / y_max).min(1.0) * height;
                    base += v.max(0.0);
                    let to = (base / y_max).min(1.0) * height;
                    Rect {
                        x: i as f64 * slot + gap / 2.0,
                        y: height - to,
                        w: slot - gap,
                        h: to - from,
                    }
                })
                .collect()
        })
        .collect()
}

/// A round scale maximum at or above `max` (1, 2, 5 × a power of ten), so
/// grid lines fall on readable values.
pub fn nice_max(max: f64) -> f64 {
    if max.is_nan() || max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|v| *v >= max * (1.0 - 1e-9))
        .unwrap_or(10.0 * power)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_stack_and_clip() {
        let bars = stacked_bars(&[vec![1.0, 2.0], vec![4.0, 4.0]], 4.0, 100.0, 40.0);
        assert_eq!(bars.len(), 2);
        // First column: 1 then 2 on top, slot 50 wide with a 5-wide gap.
        assert_eq!(
            bars[0][0],
            Rect {
                x: 2.5,
                y: 30.0,
                w: 45.0,
                h: 10.0
            }
        );
        assert_eq!(
            bars[0][1],
            Rect {
                x: 2.5,
                y: 10.0,
                w: 45.0,
                h: 20.0
            }
        );
        // Second column: the first segment fills it, the second is clipped away.
        assert_eq!(bars[1][0].h, 40.0);
        assert_eq!(bars[1][1].h, 0.0);
        assert!(stacked_bars(&[], 1.0, 10.0, 10.0).is_empty());
    }

    #[test]
    fn scales_end_on_round_values() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(0.3), 0.5);
        assert_eq!(nice_max(7.2), 10.0);
        assert_eq!(nice_max(13.0), 20.0);
        assert_eq!(nice_max(50.0), 50.0);
        assert_eq!(nice_max(f64::NAN), 1.0);
    }

    #[test]
    fn lines_map_into_the_box() {
        let v = [(0, 0.0), (50, 50.0), (100, 100.0), (150, 200.0)];
        assert_eq!(
            polyline(&v, 0, 100, 100.0, 200.0, 50.0),
            "0.0,50.0 100.0,25.0 200.0,0.0 200.0,0.0"
        );
        assert_eq!(
            area(&v[..2], 0, 100, 100.0, 200.0, 50.0),
            "0.0,50.0 0.0,50.0 100.0,25.0 100.0,50.0"
        );
        assert_eq!(polyline(&[], 0, 1, 1.0, 1.0, 1.0), "");
        assert_eq!(area(&[], 0, 1, 1.0, 1.0, 1.0), "");
        // A zero range or scale does not divide by zero.
        assert_eq!(polyline(&[(5, 3.0)], 5, 5, 0.0, 10.0, 10.0), "0.0,0.0");
    }
}
