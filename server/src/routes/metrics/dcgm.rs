//! Each GPU and MIG device's latest telemetry under the DCGM exporter's
//! metric names and labels, written straight into the exposition text.
//!
//! Not through the `prometheus` crate, which the rest of `/metrics` uses:
//! its model holds every series as a message with ten owned label pairs,
//! built and then encoded, which at 8,000 GPUs raised the server's resident
//! memory by about 116 MiB on every scrape (glibc keeps the high-water
//! mark). Written here, a scrape costs the text itself. The text is the
//! crate's, byte for byte, with the series in the order given (the crate
//! sorts them by label values; the order means nothing to Prometheus). A
//! test compares the two.

use std::fmt::Write;
use tessera_service::telemetry::DeviceGauges;

/// The labels [`write_series`] writes, in the exporter's spelling, in
/// `GaugeVec` order (the tests hold the crate's output and the Grafana
/// dashboard to them).
#[cfg(test)]
pub(super) const DCGM_LABELS: [&str; 10] = [
    "gpu",
    "UUID",
    "device",
    "modelName",
    "Hostname",
    "GPU_I_PROFILE",
    "GPU_I_ID",
    "tenant",
    "pool",
    "allocation",
];

/// One metric family: its name, help and value for a device (`None`: the
/// device has no such series).
struct Family {
    name: &'static str,
    help: &'static str,
    value: fn(&DeviceGauges) -> Option<f64>,
}

/// In the order the text lists them (by name, as the crate's registry does).
const FAMILIES: [Family; 6] = [
    Family {
        name: "DCGM_FI_DEV_FB_USED",
        help: "Framebuffer memory used (in MiB).",
        #[allow(clippy::cast_precision_loss)] // MiB: exact far beyond any GPU
        value: |d| Some(d.mem_used_mib as f64),
    },
    Family {
        name: "DCGM_FI_DEV_GPU_TEMP",
        help: "GPU temperature (in C).",
        value: |d| whole_gpu(d).and(d.temp_c).map(f64::from),
    },
    Family {
        name: "DCGM_FI_DEV_GPU_UTIL",
        help: "GPU utilization (in %).",
        // No series where the driver does not measure it (a GPU with MIG
        // on), as dcgm-exporter: absent, never a made-up 0.
        value: |d| whole_gpu(d).and(d.util_pct).map(f64::from),
    },
    Family {
        name: "DCGM_FI_DEV_POWER_USAGE",
        help: "Power draw (in W).",
        value: |d| whole_gpu(d).and(d.power_w),
    },
    Family {
        name: "DCGM_FI_DEV_SM_CLOCK",
        help: "SM clock frequency (in MHz).",
        value: |d| whole_gpu(d).and(d.sm_clock_mhz).map(f64::from),
    },
    Family {
        // DCGM reports MIG activity as a ratio, not GPU_UTIL.
        name: "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        help: "Ratio of time the graphics engine is active (MIG devices).",
        value: |d| d.mig.as_ref().and(d.util_pct).map(|u| f64::from(u) / 100.0),
    },
];

/// `Some` for a whole GPU, `None` for a MIG device.
fn whole_gpu(d: &DeviceGauges) -> Option<()> {
    d.mig.is_none().then_some(())
}

/// Appends every family that has a series, as gauges.
pub fn write_devices(out: &mut impl Write, devices: &[DeviceGauges]) -> std::fmt::Result {
    for family in &FAMILIES {
        let mut series = devices
            .iter()
            .filter_map(|d| (family.value)(d).map(|v| (d, v)))
            .peekable();
        if series.peek().is_none() {
            continue;
        }
        write!(
            out,
            "# HELP {0} {1}\n# TYPE {0} gauge\n",
            family.name, family.help
        )?;
        for (d, value) in series {
            write_series(out, family.name, d, value)?;
        }
    }
    Ok(())
}

/// One line: the name, the labels sorted by name (as the crate sorts them),
/// escaped, and the value.
fn write_series(
    out: &mut impl Write,
    name: &str,
    d: &DeviceGauges,
    value: f64,
) -> std::fmt::Result {
    let (profile, gi) = match &d.mig {
        Some((profile, gi)) => (profile.as_str(), Some(*gi)),
        None => ("", None),
    };
    write!(out, "{name}{{GPU_I_ID=\"")?;
    if let Some(gi) = gi {
        write!(out, "{gi}")?;
    }
    out.write_str("\",GPU_I_PROFILE=\"")?;
    escape_into(out, profile)?;
    out.write_str("\",Hostname=\"")?;
    escape_into(out, &d.hostname)?;
    out.write_str("\",UUID=\"")?;
    escape_into(out, &d.gpu_uuid)?;
    out.write_str("\",allocation=\"")?;
    if let Some(a) = d.allocation {
        write!(out, "{a}")?;
    }
    write!(
        out,
        "\",device=\"nvidia{0}\",gpu=\"{0}\",modelName=\"",
        d.gpu_index
    )?;
    escape_into(out, &d.model_name)?;
    out.write_str("\",pool=\"")?;
    escape_into(out, d.pool.as_deref().unwrap_or(""))?;
    out.write_str("\",tenant=\"")?;
    escape_into(out, d.tenant.as_deref().unwrap_or(""))?;
    writeln!(out, "\"}} {value}")
}

/// A label value as the text format escapes it: backslash, double quote
/// and line feed.
fn escape_into(out: &mut impl Write, v: &str) -> std::fmt::Result {
    for c in v.chars() {
        match c {
            '\\' => out.write_str("\\\\")?,
            '"' => out.write_str("\\\"")?,
            '\n' => out.write_str("\\n")?,
            c => out.write_char(c)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{GaugeVec, Opts, Registry, TextEncoder};

    /// What the `prometheus` crate writes for the same devices.
    fn through_the_crate(devices: &[DeviceGauges]) -> String {
        let r = Registry::new();
        for family in &FAMILIES {
            let g = GaugeVec::new(Opts::new(family.name, family.help), &DCGM_LABELS).unwrap();
            r.register(Box::new(g.clone())).unwrap();
            for d in devices {
                let Some(v) = (family.value)(d) else { continue };
                let index = d.gpu_index.to_string();
                let device = format!("nvidia{index}");
                let (profile, gi) = d
                    .mig
                    .as_ref()
                    .map_or((String::new(), String::new()), |(p, gi)| {
                        (p.clone(), gi.to_string())
                    });
                let allocation = d.allocation.map(|a| a.to_string()).unwrap_or_default();
                g.with_label_values(&[
                    &index,
                    &d.gpu_uuid,
                    &device,
                    &d.model_name,
                    &d.hostname,
                    &profile,
                    &gi,
                    d.tenant.as_deref().unwrap_or(""),
                    d.pool.as_deref().unwrap_or(""),
                    &allocation,
                ])
                .set(v);
            }
        }
        let mut out = String::new();
        TextEncoder::new()
            .encode_utf8(&r.gather(), &mut out)
            .unwrap();
        out
    }

    fn gpu(host: &str, index: i32) -> DeviceGauges {
        DeviceGauges {
            hostname: host.into(),
            gpu_index: index,
            gpu_uuid: format!("GPU-{host}-{index}"),
            model_name: "NVIDIA H100 80GB HBM3".into(),
            mig: None,
            tenant: None,
            pool: None,
            allocation: None,
            util_pct: Some(87),
            mem_used_mib: 70_000,
            power_w: Some(612.5),
            temp_c: Some(71),
            sm_clock_mhz: Some(1980),
        }
    }

    #[test]
    fn the_text_is_the_crates_byte_for_byte() {
        let held = DeviceGauges {
            tenant: Some("vision".into()),
            pool: Some("h100".into()),
            allocation: Some(tessera_core::ids::AllocationId::new(42)),
            util_pct: None,
            power_w: None,
            ..gpu("a", 0)
        };
        let mig = DeviceGauges {
            mig: Some(("1g.10gb".into(), 6)),
            util_pct: Some(25),
            mem_used_mib: 4_000,
            ..gpu("a", 1)
        };
        let unmeasured_mig = DeviceGauges {
            mig: Some(("3g.40gb".into(), 0)),
            util_pct: None,
            ..gpu("a", 1)
        };
        // Label values the format must escape, and a fractional power.
        let odd = DeviceGauges {
            hostname: "b\\\"quoted\"\nline".into(),
            model_name: "Tesla \"T4\"".into(),
            power_w: Some(69.125),
            ..gpu("b", 2)
        };
        // In the crate's order: by label values, GPU_I_ID first.
        let devices = [held, odd, unmeasured_mig, mig];
        let mut ours = String::new();
        write_devices(&mut ours, &devices).unwrap();
        assert_eq!(ours, through_the_crate(&devices));
        assert!(
            ours.contains("Hostname=\"b\\\\\\\"quoted\\\"\\nline\""),
            "{ours}"
        );
        assert!(
            ours.contains("DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_ID=\"6\",GPU_I_PROFILE=\"1g.10gb\"")
        );
        assert_eq!(
            ours.matches("DCGM_FI_PROF_GR_ENGINE_ACTIVE{").count(),
            1,
            "a MIG device without a utilisation reading has no activity series: {ours}"
        );
        // The held GPU's utilisation is unknown (MIG on): no series for it,
        // where a 0 would read as idle.
        assert_eq!(
            ours.matches("DCGM_FI_DEV_GPU_UTIL{").count(),
            1,
            "only the GPU whose utilisation was measured: {ours}"
        );
    }

    #[test]
    fn a_family_without_series_is_left_out() {
        let mut ours = String::new();
        write_devices(&mut ours, &[]).unwrap();
        assert_eq!(ours, "");
        let mig_only = [DeviceGauges {
            mig: Some(("1g.10gb".into(), 6)),
            ..gpu("a", 0)
        }];
        write_devices(&mut ours, &mig_only).unwrap();
        assert!(!ours.contains("DCGM_FI_DEV_GPU_UTIL"), "{ours}");
        assert_eq!(ours, through_the_crate(&mig_only));
    }
}
