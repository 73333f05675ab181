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

#[cfg(test)]
mod tests {
    use super::*;

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
